# shellcheck shell=bash
# engine-store.sh - sourced by start-docker.sh: the image store of an engine it is about to start.
#
# containerd_store FILE: where FILE (dockerd's daemon.json) is not there, write it with the containerd image store
# turned on ("features": {"containerd-snapshotter": true}: there builds can keep SBOM and provenance attestations);
# one that is there (a file, or a link, even to nothing) is left as it is (a machine's own settings win), with a
# note when it does not name the feature. Says what it did on stderr. Status 1 when FILE is a folder or could not
# be written.
containerd_store() {
    local file=$1
    if [ -d "$file" ]; then
        printf '[start-docker] %s is a folder, not a configuration file for dockerd\n' "$file" >&2
        return 1
    elif [ -L "$file" ] && [ ! -e "$file" ]; then
        printf '[start-docker] %s is a link to nothing: left as it is (dockerd starts with its own defaults: the classic image store, where builds attach no attestations)\n' "$file" >&2
    elif [ ! -e "$file" ]; then
        mkdir -p "$(dirname "$file")" || return 1
        printf '{\n  "features": {"containerd-snapshotter": true}\n}\n' >"$file" || return 1
        printf '[start-docker] wrote %s: the engine keeps images in the containerd image store (images an engine kept before in its classic store stay on disk, unseen by this one)\n' "$file" >&2
    elif ! grep -qs '"containerd-snapshotter"' "$file"; then
        printf '[start-docker] %s is there and does not name containerd-snapshotter: left as it is (on the classic image store builds attach no attestations)\n' "$file" >&2
    fi
}
