"""Benchmark cold pulls of one image pushed with gzip layers, then with zstd layers: for each compression, the
seconds of a `docker pull` into an engine holding none of its layers, the layer count, the largest layer
compressed (as the registry stores it) and uncompressed (as the engine holds it), and the totals. A few layers
of balanced sizes pull faster than one huge one where the engine fetches and unpacks layers in parallel: this
measures what the split of NVIDIA's libraries (render.NVIDIA_GROUPS) and a `max_layer` limit buy. Prints
figures; record them in docs/benchmarks.md.

The image measured is a fresh copy of IMAGE (compression.py's `fresh_copy`: each layer with one empty file
more, loaded as `torchimages-bench/compression:<run>`), so its layers are its own: removing every name of it
removes them, and no other image (a devel holding a runtime's layers, a base) keeps a layer the pull would then
skip. It is pushed through the tool's own path (`DockerEngine.push`: `docker push` for gzip, the zstd upload of
engine/zstd_push.py for zstd), removed here, then pulled (`--runs` times, removed again after each). IMAGE is
never changed; nothing else is pruned. The registry is Debian's `docker-registry` started on 127.0.0.1 at a free
port with a temporary storage folder (removed at the end), or `--registry HOST:PORT`, one on this machine
(loopback only; the run's tags stay in it).

Needs a Docker engine 23+ (to pull zstd), Debian's docker-registry, skopeo and zstd (`make bench-compression`
installs them), free disk of about twice the image under the engine's folder and once its compressed size
under $TMPDIR. Untested against an engine when written (its pure parts are unit-tested: tests/unit/test_bench_pull.py).
Run: .venv/bin/python bench/pull.py [IMAGE] [--registry 127.0.0.1:PORT] [--runs N]
     (default IMAGE: the CUDA 13.0 runtime on Debian 12)
"""

from __future__ import annotations

import bench_cli  # first: from here on a signal is one line and 128 + N (bench/bench_cli.py)

bench_cli.early(__name__, "bench/pull.py")

import argparse
import contextlib
import datetime
import os
import platform
import re
import statistics
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from compression import DEFAULT_IMAGE, fresh_copy, registry_manifest, timed  # bench/: the folder this runs from
from image_build import loopback_registry

from torchimages.engine import DockerEngine
from torchimages.sizes import format_size

COMPRESSIONS = ("gzip", "zstd")
REPOSITORY = "bench-pull"  # in the registry: bench-pull/gzip, bench-pull/zstd
MAX_RUNS = 10  # each run is a whole cold pull (minutes for a CUDA image)
_LOOPBACK = re.compile(r"^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|localhost|\[::1\]):(\d{1,5})$")


@dataclass(frozen=True)
class Pulled:
    """The figures of one compression: each run's pull seconds, and the image's layers (manifest order)."""

    compression: str
    seconds: tuple[float, ...]
    compressed: tuple[int, ...]  # each layer's bytes in the registry
    largest_uncompressed: int  # the largest layer the engine holds (docker history)
    uncompressed: int  # the image's size in the engine (docker image inspect)


def runs(text: str) -> int:
    """An argparse type: a whole number of runs from 1 to MAX_RUNS."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_RUNS:
        raise argparse.ArgumentTypeError(f"{value} is not from 1 to {MAX_RUNS}")
    return value


def registry(text: str) -> str:
    """An argparse type: HOST:PORT of a registry on this machine (127.x.y.z, localhost or [::1]; port 1-65535)."""
    found = _LOOPBACK.match(text)
    if not found:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT of a registry on loopback (e.g. 127.0.0.1:5000)")
    if any(int(part) > 255 for part in found[1].split(".") if part.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r}: {found[1]} is no IPv4 address")
    if not 1 <= int(found[2]) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: port {found[2]} is not from 1 to 65535")
    return text


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = bench_cli.parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "image", nargs="?", type=bench_cli.image, default=DEFAULT_IMAGE, help=f"a local image (default {DEFAULT_IMAGE})"
    )
    parser.add_argument(
        "--registry", type=registry, help="HOST:PORT of a registry on loopback (default: docker-registry started here)"
    )
    parser.add_argument("--runs", type=runs, default=1, help=f"cold pulls per compression, 1 to {MAX_RUNS} (default 1)")
    parser.add_argument("--docker", default=None, help="the docker client (default: the first on PATH)")
    return parser.parse_args(argv)  # the image's reference: bench_cli.image


def layer_sizes(manifest: dict[str, Any]) -> tuple[int, ...]:
    """Each layer's compressed bytes, from an image manifest (OCI or Docker v2); SystemExit for anything else."""
    layers = manifest.get("layers")
    if not isinstance(layers, list) or not all(isinstance(layer, dict) for layer in layers):
        sys.exit("the registry's manifest lists no layers (an index? the run pushes one platform's image)")
    sizes = [layer.get("size") for layer in layers]
    if not all(isinstance(size, int) and size >= 0 for size in sizes):
        sys.exit("the registry's manifest has a layer without a size")
    return tuple(int(size) for size in sizes if isinstance(size, int))


HEADER = ("compression", "pull s", "layers", "largest compressed", "largest uncompressed", "compressed", "uncompressed")


def row(pulled: Pulled) -> tuple[str, ...]:
    seconds = pulled.seconds
    shown = f"{statistics.median(seconds):.1f}" + (f" (best {min(seconds):.1f})" if len(seconds) > 1 else "")
    return (
        pulled.compression,
        shown,
        str(len(pulled.compressed)),
        format_size(max(pulled.compressed, default=0)),
        format_size(pulled.largest_uncompressed),
        format_size(sum(pulled.compressed)),
        format_size(pulled.uncompressed),
    )


def table(pulls: Sequence[Pulled]) -> str:
    """A Markdown table of the figures, one row per compression (median pull seconds, and the best of several)."""
    rows = [HEADER, *(row(p) for p in pulls)]
    lines = ["| " + " | ".join(cells) + " |" for cells in rows]
    lines.insert(1, "| --- | " + " | ".join("---:" for _ in HEADER[1:]) + " |")
    return "\n".join(lines)


@contextlib.contextmanager
def a_registry(given: str | None) -> Iterator[str]:
    if given:
        yield given
        return
    with loopback_registry() as (address, _):
        yield address


def measure(engine: DockerEngine, image: str, address: str, run: str, times: int) -> list[Pulled]:
    """Push a fresh copy of `image` with each compression, remove it here, then time the cold pulls."""
    sdk, docker = engine.sdk, engine.docker_cli
    copy = fresh_copy(docker, sdk, image, run)
    print(f"copy: {copy} {sdk.images.get(copy).id[:19]}", flush=True)
    made = [copy]
    pulls = []
    try:
        manifests = {}
        for compression in COMPRESSIONS:
            remote = f"{address}/{REPOSITORY}/{compression}"
            sdk.images.get(copy).tag(remote, run)
            made.append(f"{remote}:{run}")
            start = time.perf_counter()
            errors = engine.push(remote, [run], print, compression)
            if errors:
                sys.exit(f"{compression} push failed: {errors}")
            manifests[compression] = registry_manifest(address, f"{REPOSITORY}/{compression}", run)
            print(f"{compression}: pushed in {time.perf_counter() - start:.0f} s", flush=True)
        for reference in made:  # the copy's layers are its own: with its names gone, the engine holds none
            sdk.images.remove(reference)
        made = []
        for compression in COMPRESSIONS:
            remote = f"{address}/{REPOSITORY}/{compression}:{run}"
            seconds, largest, size = [], 0, 0
            for _ in range(times):
                seconds.append(timed(docker, "pull", remote))
                made.append(remote)
                largest = max((step.size for step in engine.history(remote)), default=0)
                size = int(sdk.images.get(remote).attrs["Size"])
                sdk.images.remove(remote)
                made.remove(remote)
            pulled = Pulled(compression, tuple(seconds), layer_sizes(manifests[compression]), largest, size)
            pulls.append(pulled)
            print(" ".join(row(pulled)), flush=True)
    finally:
        for reference in made:
            engine.remove_image(reference)
    return pulls


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    engine = bench_cli.engine_holding("pull.py", [args.image], args.docker)
    sdk = engine.sdk
    print(f"date: {datetime.date.today()}  machine: {platform.machine()}, {os.cpu_count()} cores", flush=True)
    print(f"engine: Docker {sdk.version()['Version']}, storage driver: {sdk.info().get('Driver')}", flush=True)
    print(f"image: {args.image} ({format_size(int(sdk.images.get(args.image).attrs['Size']))})", flush=True)
    with a_registry(args.registry) as address:
        pulls = measure(engine, args.image, address, uuid.uuid4().hex[:8], args.runs)
    print(table(pulls))
    gz, zs = (statistics.median(p.seconds) for p in pulls)
    print(f"zstd / gzip pull: {zs / gz:.2f}" if gz else "")
    return 0


if __name__ == "__main__":
    sys.exit(bench_cli.run("bench/pull.py", main))
