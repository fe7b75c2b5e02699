#!/usr/bin/env bash
# start-docker.sh - make a BuildKit-capable Docker engine available on this machine.
#
#  * installs Debian's docker.io (engine + client) and mmdebstrap if missing; on bookworm, docker.io 26 and
#    its client (docker-cli) come from trixie (bookworm's 20.10 is end of life since 2023), and so does the
#    buildx CLI plugin (docker-buildx: bookworm has none), with an apt pin so that nothing else ever comes
#    from trixie. A bookworm docker.io older than trixie's is upgraded; an engine that already runs is
#    left running (restart dockerd to use the new one). Where trixie cannot be installed, bookworm's is.
#    cosign (the signatures of `--sign-key`; bookworm has none) is pinned in from trixie the same way, and
#    installed when EXTRA_PACKAGES names it (`make test` does): trixie's 2.5.0 depends on libc6 alone.
#  * starts dockerd in the background (no service manager needed) if no engine answers
#  * prints, on stdout and as its only stdout line, the path of the BuildKit-capable
#    client (Debian's docker client, normally /usr/bin/docker; the docker first on PATH
#    may be a 28.x client without buildx, which cannot do BuildKit builds)
#
# Idempotent: a second run installs nothing, starts nothing, prints the same path.
#  * an engine it starts keeps images in the containerd image store (where builds keep their SBOM and provenance
#    attestations): it writes DAEMON_JSON (default /etc/docker/daemon.json) with that feature where there is none;
#    one that exists is left as it is, and so is an engine that already runs (a note says which store it keeps).
#    busybox-static is installed for the SBOM generator image (torchimages/engine/sbom_generator.py), unless
#    Debian's dynamic busybox is installed (busybox-static would replace it): then a note says so.
# Env: DAEMON_JSON, EXTRA_PACKAGES (more Debian packages to install, e.g. docker-registry for the tests), DOCKERD_LOG (default /var/log/dockerd.log), DOCKERD_TIMEOUT (seconds, default 60),
#      APT_ETC (apt's configuration folder, default /etc/apt)
set -euo pipefail

DOCKERD_LOG=${DOCKERD_LOG:-/var/log/dockerd.log}
DAEMON_JSON=${DAEMON_JSON:-/etc/docker/daemon.json}
DOCKERD_TIMEOUT=${DOCKERD_TIMEOUT:-60}
PACKAGES=(docker.io mmdebstrap ubuntu-keyring ${EXTRA_PACKAGES:-})

log() { printf '[start-docker] %s\n' "$*" >&2; }
die() { printf '[start-docker] ERROR: %s\n' "$*" >&2; exit 1; }

need_root() { [ "$(id -u)" -eq 0 ] || die "must run as root to $1 (or start a Docker engine yourself)"; }

# 1. a trixie source for the engine and buildx alone, on bookworm ---------------------------------------
# Debian packages docker.io 26 (with docker-cli), docker-buildx and cosign from trixie on; their dependencies
# are met on bookworm (libc6 >= 2.34, containerd >= 1.4, runc, tini). A trixie source is added for them alone,
# pinned: every other package of trixie gets priority 1 (never installed or upgraded from there unless named
# with -t), these 500 (so the newer version wins). A pin written before a package joined the list is written
# again. The trixie source uses the URI of this machine's
# own Debian source (its mirror, its proxy), never a host name written here.
APT_ETC=${APT_ETC:-/etc/apt}
TRIXIE_SOURCE=$APT_ETC/sources.list.d/torchimages-trixie.sources
TRIXIE_PIN=$APT_ETC/preferences.d/torchimages-trixie
FROM_TRIXIE=(docker.io docker-cli docker-buildx cosign ubuntu-keyring)
export DEBIAN_FRONTEND=noninteractive

here=${BASH_SOURCE[0]%/*}; [ "$here" != "${BASH_SOURCE[0]}" ] || here=.  # this script's folder (no dirname needed)
# shellcheck source=scripts/debian-sources.sh
. "$here/debian-sources.sh"  # debian_uri()
# shellcheck source=scripts/engine-store.sh
. "$here/engine-store.sh"  # containerd_store()

installed_version() { dpkg-query -W -f='${Status} ${Version}' "$1" 2>/dev/null | sed -n 's/^install ok installed //p' || true; }  # "" for a package dpkg never saw
pin_is_current() {  # the pin names every package of FROM_TRIXIE
    [ -f "$TRIXIE_PIN" ] || return 1
    local p
    for p in "${FROM_TRIXIE[@]}"; do grep -qx "Package: $p" "$TRIXIE_PIN" || return 1; done
}

. /etc/os-release
if [ "${VERSION_CODENAME:-}" = bookworm ] && ! pin_is_current && [ "$(id -u)" -eq 0 ]; then
    uri=$(debian_uri "$VERSION_CODENAME" | head -n1 || true)
    if [ -n "$uri" ]; then
        log "adding a trixie source for ${FROM_TRIXIE[*]} alone ($TRIXIE_SOURCE, pinned by $TRIXIE_PIN), from this machine's own Debian source: $uri"
        {
            echo "# torchimages (scripts/start-docker.sh): from trixie, ${FROM_TRIXIE[*]} only."
            printf 'Package: *\nPin: release n=trixie\nPin-Priority: 1\n'
            for p in "${FROM_TRIXIE[@]}"; do printf '\nPackage: %s\nPin: release n=trixie\nPin-Priority: 500\n' "$p"; done
        } >"$TRIXIE_PIN"
        printf 'Types: deb\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$uri" >"$TRIXIE_SOURCE"
        rm -f "$APT_ETC/sources.list.d/torchimages-trixie-buildx.sources" "$APT_ETC/preferences.d/torchimages-trixie-buildx"
        apt-get update -qq >&2 || log "apt-get update reported errors (continuing)"
    else
        log "no Debian source for $VERSION_CODENAME in ${APT_ETC}/sources.list{,.d/} to take trixie's URI from: bookworm's packages only"
    fi
fi

# 2. packages --------------------------------------------------------------------------------------------
# Missing ones are installed; a docker.io older than the candidate apt offers (bookworm's 20.10 where trixie's
# 26 is pinned in) is upgraded. Where the newer engine cannot be installed, bookworm's is (the tool works with
# both; docs/benchmarks.md compares them).
# busybox-static (a static shell for the SBOM generator image) replaces Debian's dynamic busybox: never that one.
if [ -n "$(installed_version busybox)" ]; then
    log "busybox (dynamic) is installed: busybox-static, which would replace it, is not; the SBOM generator needs a static busybox (TORCHIMAGES_BUSYBOX names one)"
else
    PACKAGES+=(busybox-static)
fi
wanted=()
for p in "${PACKAGES[@]}" docker-buildx; do
    have=$(installed_version "$p")
    if [ -z "$have" ]; then
        wanted+=("$p")
    elif [ "$p" = docker.io ]; then
        candidate=$(apt-cache policy docker.io 2>/dev/null | sed -n 's/^ *Candidate: //p')
        if [ -n "$candidate" ] && [ "$candidate" != "(none)" ] && dpkg --compare-versions "$have" lt "$candidate"; then
            log "docker.io $have is older than $candidate: upgrading"
            wanted+=(docker.io)
        fi
    fi
done
# trixie's docker.io ships its client apart (docker-cli, only a Recommends of docker.io): named here, where apt has it
if [ -z "$(installed_version docker-cli)" ] && apt-cache policy docker-cli 2>/dev/null | grep 'Candidate: [0-9]' >/dev/null; then
    wanted+=(docker-cli)
fi
if [ "${#wanted[@]}" -gt 0 ]; then
    need_root "install ${wanted[*]}"
    log "installing: ${wanted[*]}"
    [ -f "$TRIXIE_PIN" ] || { apt-get update -qq >&2 || log "apt-get update reported errors (continuing)"; }
    if ! apt-get install -y -qq --no-install-recommends "${wanted[@]}" >&2; then
        log "apt-get install ${wanted[*]} failed; trying bookworm's packages alone"
        rm -f "$TRIXIE_PIN" "$TRIXIE_SOURCE"
        apt-get update -qq >&2 || log "apt-get update reported errors (continuing)"
        bookworm=()  # cosign is trixie's alone: without it, only the signing tests skip
        for p in "${wanted[@]}"; do
            if apt-cache policy "$p" 2>/dev/null | grep 'Candidate: [0-9]' >/dev/null; then bookworm+=("$p"); else log "$p: bookworm has no package of it: not installed"; fi
        done
        apt-get install -y -qq --no-install-recommends "${bookworm[@]}" >&2 \
            || die "apt-get install ${bookworm[*]} failed"
    fi
else
    log "packages present: ${PACKAGES[*]} docker-buildx (docker.io $(installed_version docker.io))"
fi

# 3. the BuildKit-capable client: the docker binary Debian's docker-cli (trixie on) or docker.io (bookworm) owns
CLIENT=$( { dpkg -L docker-cli 2>/dev/null; dpkg -L docker.io; } | grep -E '/bin/docker$' | head -n1 || true)
[ -n "$CLIENT" ] && [ -x "$CLIENT" ] || die "cannot find the docker client installed by docker-cli or docker.io"
DOCKERD=$(dpkg -L docker.io | grep -E '/s?bin/dockerd$' | head -n1 || true)
[ -n "$DOCKERD" ] && [ -x "$DOCKERD" ] || die "cannot find dockerd installed by docker.io"

# 4. the engine ---------------------------------------------------------------
if "$CLIENT" info >/dev/null 2>&1; then
    running=$("$CLIENT" version --format '{{.Server.Version}}' 2>/dev/null || true)
    log "engine already answers (version $running)"
    installed=$(installed_version docker.io | sed 's/+.*//')
    if [ -n "$running" ] && [ -n "$installed" ] && [ "${running%%+*}" != "$installed" ]; then
        log "the running engine is $running, the installed one $installed: stop dockerd and run this again to use it"
    fi
else
    if pgrep -x dockerd >/dev/null 2>&1; then
        log "a dockerd process exists but does not answer yet; waiting for it"
    else
        need_root "start dockerd"
        containerd_store "$DAEMON_JSON" || die "could not write $DAEMON_JSON"
        log "starting $DOCKERD (log: $DOCKERD_LOG)"
        mkdir -p "$(dirname "$DOCKERD_LOG")"
        # PATH first with /usr/sbin:/usr/bin so dockerd finds Debian's containerd/runc; --config-file: DAEMON_JSON,
        # where it is (dockerd's default is /etc/docker/daemon.json)
        config=()
        [ -f "$DAEMON_JSON" ] && config=(--config-file "$DAEMON_JSON")
        PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH nohup setsid "$DOCKERD" "${config[@]}" >>"$DOCKERD_LOG" 2>&1 </dev/null &
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

# The image store the engine keeps images in (docker info's driver-type): said, never changed here
if "$CLIENT" info --format '{{json .DriverStatus}}' 2>/dev/null | grep -q 'io.containerd.snapshotter.v1'; then
    log "the engine keeps images in the containerd image store (where builds can keep SBOM and provenance attestations: build says whether it attaches them)"
else
    log "the engine keeps images in its classic image store: builds attach no attestations; to change it, add \"features\": {\"containerd-snapshotter\": true} to $DAEMON_JSON and restart dockerd (its images stay in the classic store, unseen)"
fi

# 5. check BuildKit really works through this client (cheap: no build, just the flag). The help is read whole
# first: `| grep -q` would stop reading at the match, and the client's SIGPIPE then fails the pipe (pipefail).
build_help=$(DOCKER_BUILDKIT=1 "$CLIENT" build --help 2>/dev/null || true)
if [[ $build_help != *--secret* ]]; then
    die "$CLIENT build has no --secret: not a BuildKit-capable client"
fi

echo "$CLIENT"
