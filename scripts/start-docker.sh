#!/usr/bin/env bash
# start-docker.sh - make a BuildKit-capable Docker engine available on this machine.
#
#  * installs Debian's docker.io (engine + 20.10 client) and mmdebstrap if missing
#  * installs the buildx CLI plugin (Debian's docker-buildx, from trixie: bookworm has none) if missing,
#    with an apt pin so that nothing else ever comes from trixie (`docker buildx bake`, see README)
#  * starts dockerd in the background (no service manager needed) if no engine answers
#  * prints, on stdout and as its only stdout line, the path of the BuildKit-capable
#    client (Debian's 20.10 client, normally /usr/bin/docker; the docker first on PATH
#    may be a 28.x client without buildx, which cannot do BuildKit builds)
#
# Idempotent: a second run installs nothing, starts nothing, prints the same path.
# Env: EXTRA_PACKAGES (more Debian packages to install, e.g. docker-registry for the tests), DOCKERD_LOG (default /var/log/dockerd.log), DOCKERD_TIMEOUT (seconds, default 60),
#      APT_ETC (apt's configuration folder, default /etc/apt)
set -euo pipefail

DOCKERD_LOG=${DOCKERD_LOG:-/var/log/dockerd.log}
DOCKERD_TIMEOUT=${DOCKERD_TIMEOUT:-60}
PACKAGES=(docker.io mmdebstrap ${EXTRA_PACKAGES:-})

log() { printf '[start-docker] %s\n' "$*" >&2; }
die() { printf '[start-docker] ERROR: %s\n' "$*" >&2; exit 1; }

need_root() { [ "$(id -u)" -eq 0 ] || die "must run as root to $1 (or start a Docker engine yourself)"; }

# 1. packages -----------------------------------------------------------------
missing=()
for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [ "${#missing[@]}" -gt 0 ]; then
    need_root "install ${missing[*]}"
    log "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # a third-party source that is unreachable must not stop us: warn, go on
    apt-get update -qq >&2 || log "apt-get update reported errors (continuing)"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 \
        || die "apt-get install ${missing[*]} failed"
else
    log "packages present: ${PACKAGES[*]}"
fi

# 1b. the buildx plugin (bake): Debian packages it from trixie on (docker-buildx, depends only on libc6 >= 2.34,
# so the .deb installs on bookworm). A trixie source is added for it alone, pinned: every other package
# of trixie gets priority 1 (never installed or upgraded from there unless named with -t), this one 500.
# The trixie source uses the URI of this machine's own Debian source (its mirror, its proxy), never a
# host name written here.
APT_ETC=${APT_ETC:-/etc/apt}
TRIXIE_SOURCE=$APT_ETC/sources.list.d/torchimages-trixie-buildx.sources
TRIXIE_PIN=$APT_ETC/preferences.d/torchimages-trixie-buildx

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
if ! dpkg-query -W -f='${Status}' docker-buildx 2>/dev/null | grep -q 'install ok installed'; then
    need_root "install docker-buildx"
    . /etc/os-release
    if [ "${VERSION_CODENAME:-}" = bookworm ] && ! apt-cache policy docker-buildx 2>/dev/null | grep -q 'Candidate: [0-9]'; then
        log "adding a trixie source for docker-buildx alone ($TRIXIE_SOURCE, pinned by $TRIXIE_PIN)"
        cat >"$TRIXIE_PIN" <<'PIN'
# torchimages (scripts/start-docker.sh): from trixie, docker-buildx only.
Package: *
Pin: release n=trixie
Pin-Priority: 1

Package: docker-buildx
Pin: release n=trixie
Pin-Priority: 500
PIN
        uri=$(debian_uri "$VERSION_CODENAME" | head -n1 || true)
        [ -n "$uri" ] || die "no Debian source for $VERSION_CODENAME in ${APT_ETC}/sources.list{,.d/} to take trixie's URI from; install docker-buildx yourself"
        log "trixie from this machine's own Debian source: $uri"
        cat >"$TRIXIE_SOURCE" <<SRC
Types: deb
URIs: $uri
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
        apt-get update -qq >&2 || log "apt-get update reported errors (continuing)"
    fi
    log "installing: docker-buildx"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-buildx >&2 \
        || die "apt-get install docker-buildx failed"
else
    log "buildx plugin present (docker-buildx)"
fi

# 2. the BuildKit-capable client: the docker binary that the docker.io package owns
CLIENT=$(dpkg -L docker.io | grep -E '/bin/docker$' | head -n1 || true)
[ -n "$CLIENT" ] && [ -x "$CLIENT" ] || die "cannot find the docker client installed by docker.io"
DOCKERD=$(dpkg -L docker.io | grep -E '/s?bin/dockerd$' | head -n1 || true)
[ -n "$DOCKERD" ] && [ -x "$DOCKERD" ] || die "cannot find dockerd installed by docker.io"

# 3. the engine ---------------------------------------------------------------
if "$CLIENT" info >/dev/null 2>&1; then
    log "engine already answers"
else
    if pgrep -x dockerd >/dev/null 2>&1; then
        log "a dockerd process exists but does not answer yet; waiting for it"
    else
        need_root "start dockerd"
        log "starting $DOCKERD (log: $DOCKERD_LOG)"
        mkdir -p "$(dirname "$DOCKERD_LOG")"
        # PATH first with /usr/sbin:/usr/bin so dockerd finds Debian's containerd/runc
        PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH nohup setsid "$DOCKERD" >>"$DOCKERD_LOG" 2>&1 </dev/null &
    fi
    deadline=$((SECONDS + DOCKERD_TIMEOUT))
    until "$CLIENT" info >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            log "last lines of $DOCKERD_LOG:"
            tail -n 20 "$DOCKERD_LOG" >&2 || true
            die "docker engine did not answer within ${DOCKERD_TIMEOUT}s"
        fi
        if ! pgrep -x dockerd >/dev/null 2>&1; then
            tail -n 20 "$DOCKERD_LOG" >&2 || true
            die "dockerd exited; see $DOCKERD_LOG"
        fi
        sleep 0.5
    done
    log "engine up after ${SECONDS}s"
fi

# 4. check BuildKit really works through this client (cheap: no build, just the flag)
if ! DOCKER_BUILDKIT=1 "$CLIENT" build --help 2>/dev/null | grep -q -- '--secret'; then
    die "$CLIENT build has no --secret: not a BuildKit-capable client"
fi

echo "$CLIENT"
