#!/usr/bin/env bash
# Make the bundle that lets scripts/gpu-container-check.sh run Docker on the GPU machine (no
# network, no Docker there). Runs on a Debian 12 (bookworm) machine with apt and pip, as root.
#
#   scripts/make-gpu-docker-bundle.sh OUTDIR        (e.g. .gpu-bundle, git-ignored)
#
# OUTDIR gets:
#   docker-bin.tar.xz  bin/: dockerd docker containerd containerd-shim-runc-v2 runc docker-init
#                      (tini-static); lib/: libdevmapper.so.1.02.1 (dockerd links it; Ubuntu 24.04
#                      does not always have it). Taken from Debian's .deb files (apt-get download +
#                      dpkg-deb -x); nothing is installed here.
#   wheels/            pytest-testinfra and the docker SDK (build.py test needs both)
#   wheels/fallback/   requests and its dependencies, installed there only when the GPU machine's
#                      python3 cannot import requests and urllib3 (the docker SDK needs them)
#   MANIFEST.txt       package versions, ldd of the daemons, sha256 of every file
# Exit status: 0 when the bundle is complete.
set -euo pipefail

out=${1:?usage: make-gpu-docker-bundle.sh OUTDIR}
PACKAGES=(docker.io containerd runc tini libdevmapper1.02.1)
# From docker.io 26 on (trixie's, which start-docker.sh installs on bookworm) the client is a package of its own.
if apt-cache show docker-cli >/dev/null 2>&1; then PACKAGES+=(docker-cli); fi
WHEELS=(pytest-testinfra==10.2.2 docker==7.1.0)
FALLBACK_WHEELS=(requests==2.32.3 urllib3==2.2.3 certifi==2024.8.30 idna==3.10)
# requests' charset detector: the newest release with a pure-Python wheel, so the fallback works on
# any Python 3 (the compiled 3.4.x wheels are per interpreter).
PURE_FALLBACK_WHEELS=(charset-normalizer==3.0.1)
# Sonames a stock Ubuntu 24.04 has (libc6, libsystemd0, libudev1, libcap2, libgcrypt20, liblzma5,
# libzstd1, liblz4-1, libselinux1, libpcre2-8-0, libgpg-error0, libseccomp2); others are flagged.
UBUNTU_HAS='^(linux-vdso|ld-linux-x86-64|libc|libm|libsystemd|libudev|libcap|libgcrypt|liblzma|libzstd|liblz4|libselinux|libpcre2-8|libgpg-error|libseccomp|libdevmapper)\.so'

step() { printf '\n== %s\n' "$*"; }

mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$out/wheels" "$out/docker-bin.tar.xz" "$out/MANIFEST.txt"

step "apt-get download ${PACKAGES[*]} (into $work/debs)"
mkdir -p "$work/debs" "$work/x" "$work/stage/bin" "$work/stage/lib"
# _apt cannot write into a mktemp folder (mode 0700): let it, to avoid apt's 'unsandboxed' warning.
chmod 755 "$work"
chown _apt "$work/debs" 2>/dev/null || true
(cd "$work/debs" && apt-get download "${PACKAGES[@]}")

step "dpkg-deb -x each package (extract only, no install)"
for deb in "$work"/debs/*.deb; do
    echo "  $(basename "$deb")"
    dpkg-deb -x "$deb" "$work/x"
done

step "collect the engine binaries"
find_one() { # the first existing path of a binary in the extracted tree
    local name=$1 d
    for d in usr/sbin usr/bin sbin bin; do
        if [ -e "$work/x/$d/$name" ]; then
            readlink -f "$work/x/$d/$name"
            return 0
        fi
    done
    echo "error: $name is in none of the packages ${PACKAGES[*]}" >&2
    return 1
}
for name in dockerd docker containerd containerd-shim-runc-v2 runc; do
    src=$(find_one "$name")
    echo "  $name <- ${src#"$work/x/"}"
    install -m 0755 "$src" "$work/stage/bin/$name"
done
src=$(find_one tini-static)
echo "  docker-init <- ${src#"$work/x/"}"
install -m 0755 "$src" "$work/stage/bin/docker-init"

step "shared libraries the binaries need (ldd)"
{
    for b in "$work"/stage/bin/*; do
        echo "$(basename "$b"):"
        if ldd "$b" >"$work/ldd.txt" 2>&1; then
            sed 's/^[[:space:]]*/    /; s/ (0x[0-9a-f]*)$//' "$work/ldd.txt"
            awk '{print $1}' "$work/ldd.txt" | sed 's|.*/||' | grep -Ev "$UBUNTU_HAS" |
                sed 's/^/    WARNING: not known to be in Ubuntu 24.04: /' || true
        else
            echo "    (static)"
        fi
    done
} | tee "$work/ldd-all.txt"
if grep -q 'libdevmapper\.so' "$work/ldd-all.txt"; then
    lib=$(find "$work/x" -name 'libdevmapper.so.1.02.1' | head -n 1)
    [ -n "$lib" ] || { echo "error: dockerd links libdevmapper but libdevmapper1.02.1 has no libdevmapper.so.1.02.1" >&2; exit 1; }
    echo "  lib/libdevmapper.so.1.02.1 <- ${lib#"$work/x/"} (its own needs:)"
    install -m 0644 "$(readlink -f "$lib")" "$work/stage/lib/libdevmapper.so.1.02.1"
    ldd "$work/stage/lib/libdevmapper.so.1.02.1" | sed 's/^[[:space:]]*/    /; s/ (0x[0-9a-f]*)$//'
fi

step "write $out/docker-bin.tar.xz"
tar -C "$work/stage" --owner=0 --group=0 -cf - bin lib | xz -T0 -6 >"$out/docker-bin.tar.xz"
tar -tvJf "$out/docker-bin.tar.xz"

step "download wheels for CPython 3.12 manylinux x86_64: ${WHEELS[*]}"
pip_download() {
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux2014_x86_64 -d "$1" "${@:2}"
}
pip_download "$out/wheels" "${WHEELS[@]}"
step "download fallback wheels (used only if the GPU machine lacks requests/urllib3): ${FALLBACK_WHEELS[*]} ${PURE_FALLBACK_WHEELS[*]}"
pip_download "$out/wheels/fallback" "${FALLBACK_WHEELS[@]}"
python3 -m pip download --no-deps --only-binary=:all: --python-version 3 --implementation py --abi none \
    --platform any -d "$out/wheels/fallback" "${PURE_FALLBACK_WHEELS[@]}"

step "write $out/MANIFEST.txt"
{
    echo "bundle for scripts/gpu-container-check.sh, made $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(grep -m1 '^PRETTY_NAME=' /etc/os-release | cut -d= -f2- | tr -d '"')"
    echo
    echo "Debian packages:"
    for deb in "$work"/debs/*.deb; do
        echo "  $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)"
    done
    echo
    echo "ldd:"
    cat "$work/ldd-all.txt"
    echo
    echo "sha256:"
    (cd "$out" && find . -type f ! -name MANIFEST.txt | sort | xargs sha256sum)
} >"$out/MANIFEST.txt"
cat "$out/MANIFEST.txt"

step "bundle size"
du -ab "$out" | sort -k2 | awk '{printf "  %10d  %s\n", $1, $2}'
echo "total: $(du -sh "$out" | cut -f1)"
