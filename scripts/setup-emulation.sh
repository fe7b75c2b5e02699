#!/usr/bin/env bash
# setup-emulation.sh - let this machine run containers of the other platform under QEMU (issue 20).
#
#  * mounts binfmt_misc on $BINFMT_DIR when it is not mounted
#  * installs Debian's qemu-user-static, binfmt-support and arch-test (mmdebstrap --arch checks with it) when missing; on bookworm, qemu-user-static (with
#    qemu-user and qemu-user-binfmt, which it is made of there) comes from trixie, pinned like start-docker.sh
#    pins docker.io so that nothing else ever comes from there: QEMU 7.2 of bookworm crashes in some
#    postinst scripts of foreign images (`qemu: uncaught target signal 11 (Segmentation fault)`). A
#    bookworm qemu-user-static older than trixie's is upgraded. Where trixie's cannot be installed,
#    bookworm's is, and the last line says so.
#  * registers and enables the handler of the other platform (qemu-aarch64 on x86_64, for linux/arm64;
#    qemu-x86_64 on aarch64, for linux/amd64) with the F (fix-binary) flag, so that containers, which do not
#    hold the interpreter, can use it: through update-binfmts where binfmt-support knows the format, else the
#    package's own binfmt.d file. A handler without F is registered again; so is one whose interpreter was
#    just upgraded (with F the kernel keeps the binary it opened at registration).
#  * prints, on stdout and as its only stdout line, what it did, or `nothing to do` and what is in place
#
# Idempotent: a second run installs, mounts and registers nothing. Needs root for what it changes: without
# root it checks, and names what root would have to do.
# Env: QEMU_TARGET (the handler's architecture: aarch64 or x86_64, default the other one of `uname -m`),
#      APT_ETC (apt's configuration folder, default /etc/apt), BINFMT_DIR (default /proc/sys/fs/binfmt_misc),
#      BINFMT_CONF_DIRS (where binfmt.d files are looked for, default "/etc/binfmt.d /run/binfmt.d /usr/lib/binfmt.d"),
#      OS_RELEASE (default /etc/os-release)
set -euo pipefail

APT_ETC=${APT_ETC:-/etc/apt}
BINFMT_DIR=${BINFMT_DIR:-/proc/sys/fs/binfmt_misc}
BINFMT_CONF_DIRS=${BINFMT_CONF_DIRS:-/etc/binfmt.d /run/binfmt.d /usr/lib/binfmt.d}
OS_RELEASE=${OS_RELEASE:-/etc/os-release}
PACKAGES=(qemu-user-static binfmt-support arch-test)  # arch-test: mmdebstrap checks with it that a foreign --arch runs
# On trixie on, qemu-user-static is a transitional package of these two (static qemu-user, binfmt.d files):
FROM_TRIXIE=(qemu-user-static qemu-user qemu-user-binfmt)
TRIXIE_SOURCE=$APT_ETC/sources.list.d/torchimages-trixie.sources  # the one start-docker.sh writes, shared
QEMU_PIN=$APT_ETC/preferences.d/torchimages-trixie-qemu
export DEBIAN_FRONTEND=noninteractive

log() { printf '[setup-emulation] %s\n' "$*" >&2; }
die() { printf '[setup-emulation] ERROR: %s\n' "$*" >&2; exit 1; }
is_root() { [ "$(id -u)" -eq 0 ]; }
join() { local sep=$1 out=${2:-}; shift 2 || shift $#; for x in "$@"; do out+="$sep$x"; done; printf '%s' "$out"; }

# the same as start-docker.sh's (tests/unit/test_scripts.py keeps the two equal)
here=${BASH_SOURCE[0]%/*}; [ "$here" != "${BASH_SOURCE[0]}" ] || here=.  # this script's folder (no dirname needed)
# shellcheck source=scripts/debian-sources.sh
. "$here/debian-sources.sh"  # debian_uri()

installed_version() { dpkg-query -W -f='${Status} ${Version}' "$1" 2>/dev/null | sed -n 's/^install ok installed //p' || true; }
candidate() { apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: //p' | grep -v '^(none)$' || true; }
suite_of() {  # the suite apt has version $2 of package $1 from (`trixie`), or ""
  apt-cache madison "$1" 2>/dev/null | awk -F' *[|] *' -v v="$2" '$2 == v && !found { split($3, w, " "); sub(/\/.*/, "", w[2]); print w[2]; found = 1 }' || true
}

# the handler's fields, from its file in $BINFMT_DIR: `enabled`, the interpreter path, the flags ("" if none)
handler_field() {  # $1: file, $2: enabled|interpreter|flags
  case $2 in
    enabled) head -n1 "$1" ;;
    interpreter) sed -n 's/^interpreter //p' "$1" ;;
    flags) sed -n 's/^flags: *//p' "$1" ;;
  esac
}
# the registration line of handler $1 in the first binfmt.d file that has it (systemd's order: /etc, /run, /usr/lib)
binfmt_d_line() {
  local d
  for d in $BINFMT_CONF_DIRS; do
    [ -f "$d/$1.conf" ] || continue
    grep -v -E '^[[:space:]]*([#;]|$)' "$d/$1.conf" | head -n1 || true
    return 0
  done
}
# whether binfmt-support knows format $1 (an update-binfmts admin file, as its packages import them)
update_binfmts_knows() { command -v update-binfmts >/dev/null 2>&1 && update-binfmts --display "$1" >/dev/null 2>&1; }

# 0. which handler -----------------------------------------------------------------------------------------
machine=$(uname -m)
case ${QEMU_TARGET:-} in
  "") case $machine in
        x86_64) QEMU_TARGET=aarch64 ;;
        aarch64 | arm64) QEMU_TARGET=x86_64 ;;
        *) die "this machine is $machine: the platforms are linux/amd64 (x86_64) and linux/arm64 (aarch64), and QEMU_TARGET is not set" ;;
      esac ;;
  aarch64 | x86_64) ;;
  *) die "QEMU_TARGET=${QEMU_TARGET}: must be aarch64 (linux/arm64) or x86_64 (linux/amd64)" ;;
esac
case $machine/$QEMU_TARGET in  # a handler for this machine's own binaries would run every program under QEMU
  x86_64/x86_64 | aarch64/aarch64 | arm64/aarch64) die "QEMU_TARGET=$QEMU_TARGET is this machine's own architecture: nothing to emulate" ;;
esac
HANDLER=qemu-$QEMU_TARGET
ENTRY=$BINFMT_DIR/$HANDLER
platform=$([ "$QEMU_TARGET" = aarch64 ] && echo linux/arm64 || echo linux/amd64)

# What this run would change, found before anything is changed: without root, that is the error. ------
# shellcheck source=/dev/null
. "$OS_RELEASE"
mounted=$([ -e "$BINFMT_DIR/status" ] && echo yes || echo no)
missing=()
for p in "${PACKAGES[@]}"; do [ -n "$(installed_version "$p")" ] || missing+=("$p"); done
# On bookworm, trixie's QEMU is pinned in unless this script's pin is there already (a fallback's too) or a
# QEMU of 9 or newer is installed.
have=$(installed_version qemu-user-static)
want_pin=no
if [ "${VERSION_CODENAME:-}" = bookworm ] && [ ! -f "$QEMU_PIN" ] && { [ -z "$have" ] || dpkg --compare-versions "$have" lt 1:9; }; then
    if [ -f "$TRIXIE_SOURCE" ] || [ -n "$(debian_uri "$VERSION_CODENAME" | head -n1 || true)" ]; then
        want_pin=yes
    else
        log "no Debian source for $VERSION_CODENAME in ${APT_ETC}/sources.list{,.d/} to take trixie's URI from: bookworm's QEMU"
    fi
fi
newer=$(candidate qemu-user-static)
upgrade=no
if [ -n "$have" ] && [ -n "$newer" ] && dpkg --compare-versions "$have" lt "$newer"; then upgrade=yes; fi
handler_problem=""
if [ ! -e "$ENTRY" ]; then
    handler_problem="not registered"
elif [[ $(handler_field "$ENTRY" flags) != *F* ]]; then
    handler_problem="registered without the F (fix-binary) flag"
elif [ ! -x "$(handler_field "$ENTRY" interpreter)" ]; then
    handler_problem="registered with an interpreter that is not here ($(handler_field "$ENTRY" interpreter))"
elif [ "$(handler_field "$ENTRY" enabled)" != enabled ]; then
    handler_problem="disabled"
fi

todo=()
[ "$mounted" = yes ] || todo+=("mount binfmt_misc on $BINFMT_DIR")
[ "$want_pin" = no ] || todo+=("pin trixie's qemu-user-static in ($QEMU_PIN)")
[ "${#missing[@]}" -eq 0 ] || todo+=("install ${missing[*]}")
[ "$upgrade" = no ] || todo+=("upgrade qemu-user-static $have to $newer")
[ -z "$handler_problem" ] || todo+=("register and enable $HANDLER ($handler_problem)")
if [ "${#todo[@]}" -gt 0 ] && ! is_root; then
    die "must run as root to $(join ', ' "${todo[@]}") (sudo make emulation)"
fi
did=()  # what this run did, for the last line

# 1. binfmt_misc ----------------------------------------------------------------------------------------
if [ "$mounted" = no ]; then
    log "mounting binfmt_misc on $BINFMT_DIR"
    mount -t binfmt_misc binfmt_misc "$BINFMT_DIR" \
        || die "mount -t binfmt_misc binfmt_misc $BINFMT_DIR failed (in a container, that takes --privileged)"
    [ -e "$BINFMT_DIR/status" ] || die "$BINFMT_DIR has no status file after mounting binfmt_misc"
    did+=("mounted binfmt_misc")
fi

# 2. a pin for trixie's QEMU, on bookworm -----------------------------------------------------------------
# Trixie's qemu-user is static (it depends on nothing) and qemu-user-binfmt holds its binfmt.d files, so
# bookworm meets them. Every other package of trixie gets priority 1, these three 500. The trixie source is
# start-docker.sh's where it exists, else written as that script writes it, with this machine's own URI.
if [ "$want_pin" = yes ]; then
    if [ ! -f "$TRIXIE_SOURCE" ]; then
        uri=$(debian_uri "$VERSION_CODENAME" | head -n1 || true)
        log "adding a trixie source ($TRIXIE_SOURCE) from this machine's own Debian source: $uri"
        printf 'Types: deb\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uri" >"$TRIXIE_SOURCE"
    fi
    log "pinning ${FROM_TRIXIE[*]} alone to trixie ($QEMU_PIN)"
    {
        echo "# torchimages (scripts/setup-emulation.sh): from trixie, ${FROM_TRIXIE[*]} only."
        printf 'Package: *\nPin: release n=trixie\nPin-Priority: 1\n'
        printf '\nPackage: %s\nPin: release n=trixie\nPin-Priority: 500\n' "${FROM_TRIXIE[*]}"
    } >"$QEMU_PIN"
    apt-get update -qq >&2 || log "apt-get update reported errors (continuing)"
    newer=$(candidate qemu-user-static)
    if [ -n "$have" ] && [ -n "$newer" ] && dpkg --compare-versions "$have" lt "$newer"; then upgrade=yes; fi
fi

# 3. packages --------------------------------------------------------------------------------------------
# Where trixie's cannot be installed (apt's dry run says why), the pin keeps trixie at priority 1 alone and
# says why in a comment: bookworm's QEMU is installed, and later runs do not try again.
wanted=("${missing[@]}")
[ "$upgrade" = no ] || { log "qemu-user-static $have is older than $newer: upgrading"; wanted+=(qemu-user-static); }
changed_packages=no
fallback=""
if [ "${#wanted[@]}" -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 \
        || die "installing ${wanted[*]} takes apt-get (Debian, Ubuntu), which is not here: install QEMU's static user-mode emulators with this system's package manager and register qemu-$QEMU_TARGET with the F flag"
    [ "$want_pin" = yes ] || apt-get update -qq >&2 || log "apt-get update reported errors (continuing)"
    if [ -f "$QEMU_PIN" ] && grep -q '^Pin-Priority: 500' "$QEMU_PIN" \
        && ! dry=$(apt-get install -s -qq --no-install-recommends "${wanted[@]}" 2>&1); then
        reason=$(printf '%s\n' "$dry" | grep -E '^E:|^ ' | head -n1 | sed 's/^ *//' || true)
        fallback="trixie's qemu-user-static $newer cannot be installed here (${reason:-the dry run of apt-get failed}), so bookworm's"
        log "$fallback"
        {
            echo "# torchimages (scripts/setup-emulation.sh): nothing from trixie: $fallback."
            printf 'Package: *\nPin: release n=trixie\nPin-Priority: 1\n'
        } >"$QEMU_PIN"
        if [ "$upgrade" = yes ]; then  # an upgrade to bookworm's newest, or none
            newer=$(candidate qemu-user-static)
            if ! dpkg --compare-versions "$have" lt "$newer"; then upgrade=no; wanted=("${missing[@]}"); fi
        fi
    fi
fi
if [ "${#wanted[@]}" -gt 0 ]; then
    log "installing: ${wanted[*]}"
    apt-get install -y -qq --no-install-recommends "${wanted[@]}" >&2 || die "apt-get install ${wanted[*]} failed"
    changed_packages=yes
    v=$(installed_version qemu-user-static)
    suite=$(suite_of qemu-user-static "$v")
    did+=("installed ${wanted[*]} (qemu-user-static $v${suite:+ from $suite}${fallback:+: $fallback})")
fi

# 4. the handler -----------------------------------------------------------------------------------------
register() {  # the package's own registration: binfmt-support's format where it has one, else its binfmt.d line
    local line
    if update_binfmts_knows "$HANDLER"; then
        log "update-binfmts --enable $HANDLER"
        update-binfmts --enable "$HANDLER" >&2 || die "update-binfmts --enable $HANDLER failed"
        [ ! -e "$ENTRY" ] || return 0
    fi
    line=$(binfmt_d_line "$HANDLER")
    [ -n "$line" ] || die "no registration of $HANDLER: update-binfmts does not know it and no binfmt.d file ($BINFMT_CONF_DIRS) holds it; is qemu-user-static installed?"
    [[ ${line##*:} == *F* ]] || line="${line}F"  # containers need the fix-binary flag
    log "registering $HANDLER from its binfmt.d file: $line"
    printf '%s\n' "$line" >"$BINFMT_DIR/register" || die "writing the registration of $HANDLER to $BINFMT_DIR/register failed"
}
unregister() { log "removing the registration of $HANDLER: $1"; echo -1 >"$ENTRY"; }

if [ -e "$ENTRY" ] && [ "$changed_packages" = yes ]; then  # the package may have registered it afresh: check
    handler_problem=""
    [[ $(handler_field "$ENTRY" flags) == *F* ]] || handler_problem="registered without the F (fix-binary) flag"
    [ -x "$(handler_field "$ENTRY" interpreter)" ] || handler_problem="registered with an interpreter that is not here"
fi
case $handler_problem in
  "not registered") register; did+=("registered $HANDLER") ;;
  disabled) ;;
  "") if [ "$changed_packages" = yes ] && [ "$mounted" = yes ] && [[ " ${wanted[*]} " == *" qemu-user-static "* ]]; then
        # with F, the kernel holds the interpreter it opened at registration: the new one needs a new one
        unregister "its interpreter was just installed"; register; did+=("registered $HANDLER again")
      fi ;;
  *) unregister "$handler_problem"; register; did+=("registered $HANDLER again (it was $handler_problem)") ;;
esac
if [ "$(handler_field "$ENTRY" enabled)" != enabled ]; then
    log "enabling $HANDLER"
    if update_binfmts_knows "$HANDLER"; then update-binfmts --enable "$HANDLER" >&2; else echo 1 >"$ENTRY"; fi
    did+=("enabled $HANDLER")
fi

# 5. check and say ---------------------------------------------------------------------------------------
[ "$(handler_field "$ENTRY" enabled)" = enabled ] || die "$HANDLER is registered but not enabled ($ENTRY)"
flags=$(handler_field "$ENTRY" flags)
[[ $flags == *F* ]] || die "$HANDLER has no F (fix-binary) flag after registration (flags: ${flags:-none}): containers cannot use it"
interpreter=$(handler_field "$ENTRY" interpreter)
[ -x "$interpreter" ] || die "$HANDLER's interpreter $interpreter is not here"
# Debian's interpreter is a link named *-binfmt-P (argv[0] preserved), which runs only under binfmt_misc: ask
# the binary it names for its version
qemu=$("$(readlink -f "$interpreter")" --version 2>/dev/null | head -n1 || true)
state="$HANDLER enabled ($interpreter, flags $flags${qemu:+, $qemu}): $platform containers run under emulation"
if [ "${#did[@]}" -eq 0 ]; then
    echo "setup-emulation: nothing to do: binfmt_misc mounted, ${PACKAGES[*]} installed (qemu-user-static $have), $state"
else
    echo "setup-emulation: $(join '; ' "${did[@]}"); $state"
fi
