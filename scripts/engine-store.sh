# shellcheck shell=bash
# engine-store.sh - sourced by start-docker.sh: the image store of an engine it is about to start.
#
# containerd_store FILE: where FILE (dockerd's daemon.json) does not exist, write it with the containerd image
# store turned on ("features": {"containerd-snapshotter": true}: builds keep SBOM and provenance attestations
# there); one that exists is left as it is (a machine's own settings win), with a note when it does not name
# the feature. Says what it did on stderr; status 1 only when FILE could not be written.
containerd_store() {
    local file=$1
    if [ ! -e "$file" ] && [ ! -L "$file" ]; then
        mkdir -p "$(dirname "$file")" || return 1
        printf '{\n  "features": {"containerd-snapshotter": true}\n}\n' >"$file" || return 1
        printf '[start-docker] wrote %s: the engine keeps images in the containerd image store\n' "$file" >&2
    elif ! grep -qs '"containerd-snapshotter"' "$file"; then
        printf '[start-docker] %s exists and does not name containerd-snapshotter: left as it is (on the classic image store builds attach no attestations)\n' "$file" >&2
    fi
}
