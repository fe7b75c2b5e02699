"""Show that two revisions of the Dockerfiles build the same layers: build the selected images from each revision
(`build.py build --no-cache --test none`, each revision's own tool in a git worktree of it, the same engine, wheel
sources and bases) and compare each image's layers by diff ID (the digest of a layer's uncompressed content, what
`docker image inspect` lists under RootFS.Layers). Prints, per image, every layer with both diff IDs and whether
they are equal, then a summary; exit 0 when every image's layers are equal (empty layers aside: an empty
layer, the empty tar's diff ID, holds nothing), 1 when one differs, 2 on an error.
Record the figures in docs/benchmarks.md (issue 34: the step scripts moved every command out of the Dockerfiles).

A build that a revision's verification refuses is an error (its images are not tagged). The two builds share the
engine's cache mounts (apt's lists and uv's downloads), not its build cache (`--no-cache`): every step runs again.
The OS packages come from the archive at the time of each build; an archive that moved between the two builds
makes the OS layer differ (said in the output: rerun).

Run (from the repository root, with the machine's wheel sources as `make build` has them):
  eval "$(scripts/host-pip-sources)"
  .venv/bin/python bench/layer_equality.py --old REV [--new REV] TAG... [-- BUILD-ARGS]
  e.g. --old 701a0eb 2.13.0-cpu 2.11.0-cuda13.0 -- --bases bootstrap
`--new` defaults to the working tree as it is (uncommitted changes included).
"""

from __future__ import annotations

import bench_cli  # first: from here on a signal is one line and 128 + N (bench/bench_cli.py)

bench_cli.early(__name__, "bench/layer_equality.py")

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The diff ID of an empty layer (an empty tar): what WORKDIR or a RUN that changes nothing leaves.
EMPTY_LAYER = "sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"


@dataclass(frozen=True)
class Built:
    """One image a revision built: its tag and its layers' diff IDs, bottom first."""

    tag: str
    layers: tuple[str, ...]


def run(command: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env={**os.environ, "PYTHONPATH": str(cwd)}, text=True, capture_output=True)


def build(checkout: Path, tags: Sequence[str], build_args: Sequence[str]) -> list[Built]:
    """Build `tags` with the checkout's own tool; each image's layers."""
    python = sys.executable
    done = subprocess.run(
        [python, "build.py", "build", "--matrix", "matrix.yaml", "--no-cache", "--test", "none", *build_args, *tags],
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": str(checkout)},
    )
    if done.returncode != 0:
        raise SystemExit(f"layer_equality: the build in {checkout} failed (exit {done.returncode})")
    listed = run([python, "build.py", "list", "--json", *tags], checkout)
    if listed.returncode != 0:
        raise SystemExit(f"layer_equality: `build.py list` in {checkout} failed: {listed.stderr.strip()}")
    images = []
    for entry in json.loads(listed.stdout):
        inspected = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{json .RootFS.Layers}}", entry["reference"]],
            text=True,
            capture_output=True,
        )
        if inspected.returncode != 0:
            raise SystemExit(f"layer_equality: {entry['reference']} was not built: {inspected.stderr.strip()}")
        images.append(Built(entry["tag"], tuple(json.loads(inspected.stdout))))
    return images


def compare(old: Sequence[Built], new: Sequence[Built]) -> tuple[list[str], bool]:
    """Report lines, and whether every image's layers are equal but for empty ones (pure)."""
    lines, equal = [], True
    news = {b.tag: b for b in new}
    for image in old:
        other = news.get(image.tag)
        if other is None:
            lines.append(f"{image.tag}: not built by the new revision")
            equal = False
            continue
        same = image.layers == other.layers
        filled = [n for n in image.layers if n != EMPTY_LAYER] == [n for n in other.layers if n != EMPTY_LAYER]
        equal &= filled
        verdict = "equal" if same else "equal but for empty layers" if filled else "DIFFER"
        lines.append(f"{image.tag}: {len(image.layers)} and {len(other.layers)} layers, {verdict}")
        for n in range(max(len(image.layers), len(other.layers))):
            a = image.layers[n] if n < len(image.layers) else "-"
            b = other.layers[n] if n < len(other.layers) else "-"
            empty = " (empty layer)" if EMPTY_LAYER in (a, b) and a != b else ""
            short = [layer[7:19] if layer != "-" else layer for layer in (a, b)]
            lines.append(f"  {n + 1:2} {short[0]:12} {short[1]:12} {'=' if a == b else 'differs' + empty}")
    return lines, equal


def main(argv: Sequence[str] | None = None) -> int:
    parser = bench_cli.parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="the revision to compare against (git rev)")
    parser.add_argument("--new", help="the revision to compare (default: the working tree as it is)")
    parser.add_argument("tags", nargs="+", help="tag prefixes or globs, as `build.py build` takes them")
    args, rest = parser.parse_known_args(argv)
    build_args = [a for a in rest if a != "--"]
    with tempfile.TemporaryDirectory(prefix="layer-equality-") as tmp:
        checkouts = {}
        for side, rev in (("old", args.old), ("new", args.new)):
            if rev is None:
                checkouts[side] = ROOT
                continue
            folder = Path(tmp) / side
            added = run(["git", "worktree", "add", "--detach", str(folder), rev], ROOT)
            if added.returncode != 0:
                print(f"layer_equality: no worktree of {rev!r}: {added.stderr.strip()}", file=sys.stderr)
                return 2
            checkouts[side] = folder
        try:
            old = build(checkouts["old"], args.tags, build_args)
            new = build(checkouts["new"], args.tags, build_args)
        finally:
            for folder in checkouts.values():
                if folder != ROOT:
                    run(["git", "worktree", "remove", "--force", str(folder)], ROOT)
    lines, equal = compare(old, new)
    print(f"old {args.old}, new {args.new or 'working tree'}")
    print("\n".join(lines))
    print("every layer equal (empty layers aside)" if equal else "some layers differ")
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(bench_cli.run("bench/layer_equality.py", main))
