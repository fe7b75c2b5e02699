# debian-sources.sh - sourced by start-docker.sh and setup-emulation.sh (not run on its own).
# debian_uri SUITE: the first URI of an enabled `deb` source of this machine's apt configuration ($APT_ETC)
# for SUITE, so that a second Debian suite is reached through the machine's own mirror, never a host name
# written in this project.
debian_uri() {  # the first URI of an enabled `deb` source for suite $1 (deb822 .sources, then one-line .list)
  local f
  for f in "$APT_ETC"/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v suite="$1" 'BEGIN { RS = ""; FS = "\n" }
      { uris = ""; suites = ""; types = ""; enabled = "yes"
        for (i = 1; i <= NF; i++) { l = $i; if (l ~ /^[ \t]*#/) continue
          if (sub(/^URIs:[ \t]*/, "", l)) uris = l; else if (sub(/^Suites:[ \t]*/, "", l)) suites = l
          else if (sub(/^Types:[ \t]*/, "", l)) types = l; else if (sub(/^Enabled:[ \t]*/, "", l)) enabled = l }
        if (enabled != "no" && (" " types " ") ~ / deb / && (" " suites " ") ~ (" " suite " ")) { split(uris, u, " "); print u[1]; exit } }' "$f"
  done
  for f in "$APT_ETC"/sources.list "$APT_ETC"/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v suite="$1" '$1 == "deb" { i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/ && i < NF) i++; i++ }
      if ($(i + 1) == suite) { print $i; exit } }' "$f"
  done
}
