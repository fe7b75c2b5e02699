"""Benchmark the release gate's layer scan (torchimages/security/layers.py) with and without its cache: for
each image, the scan without a cache (what every scan cost before the cache), then with an empty cache (cold:
every layer read and kept) and again (warm: nothing exported when every layer is kept). The images share one
cache in the order given, so `RUNTIME DEVEL` shows devel reading only its own layers on its cold run.

Prints, per image and run: seconds, layers, layers read and layers taken from the cache, and whether the
findings equal the uncached scan's. The cache is a temporary folder, removed at the end; the images are only
exported (`docker save`), never changed. Needs a Docker engine holding the images.
Run: .venv/bin/python bench/layer_scan.py IMAGE [IMAGE ...] [--no-baseline] [--docker PATH]

Without Docker, `--synthetic MB` writes a `docker save` archive of about MB megabytes to a temporary file (a
layer of many small text files as site-packages has, one of large binaries, one gzip'd, two planted
findings) and times reading it (`layers.read_archive`, the scan's part after the export) `--runs` times, best
and median, without and with the hashing a cache asks for. Only functions every version of layers.py has
are called, so PYTHONPATH may name another checkout's package to time it on the same archive.
Run: .venv/bin/python bench/layer_scan.py --synthetic 600 [--runs 3]
"""

from __future__ import annotations

import bench_cli  # first: from here on a signal is one line and 128 + N (bench/bench_cli.py)

bench_cli.early(__name__, "bench/layer_scan.py")

import argparse
import gzip
import hashlib
import io
import json
import random
import re
import statistics
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from torchimages.engine import DockerEngine
from torchimages.security import layers
from torchimages.security.layer_cache import LayerCache
from torchimages.security.model import Scan

NOTE = re.compile(r"(\d+) layers, (\d+) entries(?: \((\d+) from the cache\))?")


def timed(engine: DockerEngine, reference: str, cache: LayerCache | None) -> tuple[float, Scan]:
    start = time.monotonic()
    found = layers.scan(engine, reference, (), cache=cache)
    return time.monotonic() - start, found


def row(reference: str, run: str, seconds: float, found: Scan, same: bool | None) -> str:
    counted = NOTE.match(found.note)
    total, kept = (int(counted[1]), int(counted[3] or 0)) if counted else (0, 0)
    agrees = "" if same is None else ("same findings" if same else "FINDINGS DIFFER")
    scanned = "" if found.scanned else f"not scanned: {found.note}"
    counts = f"{total:3} layers  {total - kept:3} read  {kept:3} cached"
    return f"{reference:<48} {run:<9} {seconds:8.2f} s  {counts}  {agrees} {scanned}".rstrip()


def _tar(files: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def synthetic_layers(megabytes: int) -> list[bytes]:
    """Three layer tarballs of about `megabytes` in all: small text files (a third), large binaries (half, part
    zeros as shared libraries have), a gzip'd layer of both; a netrc and a private key planted."""
    rng = random.Random(0)
    words = [rng.randbytes(rng.randint(2, 9)).hex().encode() for _ in range(2000)]
    small: list[tuple[str, bytes]] = []
    budget = megabytes * (1 << 20) // 3
    while budget > 0:
        text = b" ".join(rng.choices(words, k=rng.randint(50, 2000))) + b"\n"
        small.append((f"opt/venv/lib/python3.11/site-packages/p{len(small) // 50}/m{len(small)}.py", text))
        budget -= len(text)
    small.append(("root/.netrc", b"machine example.org login u password p\n"))
    large: list[tuple[str, bytes]] = []
    for at in range(max(1, megabytes // 2 // 50)):
        size = 50 << 20
        large.append((f"usr/lib/x86_64-linux-gnu/lib{at}.so", rng.randbytes(size // 2) + bytes(size // 2)))
    key = b"-----BEGIN PRIVATE KEY-----\n" + b"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" * 40 + b"\n-----END PRIVATE KEY-----\n"
    large.append(("srv/tls/bundle.pem", rng.randbytes(1 << 20) + key))
    packed = gzip.compress(_tar(small[: len(small) // 6]), compresslevel=1, mtime=0)
    return [_tar(small), _tar(large), packed]


def synthetic_archive(tarballs: list[bytes]) -> bytes:
    """Docker 25+'s layout: the layer blobs, the configuration, manifest.json last."""

    def digest(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    diff_ids = [digest(gzip.decompress(t) if t[:2] == b"\x1f\x8b" else t) for t in tarballs]
    config = json.dumps({"rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d in diff_ids]}}).encode()
    names = [f"blobs/sha256/{digest(t)}" for t in tarballs]
    manifest = json.dumps([{"Config": f"blobs/sha256/{digest(config)}", "Layers": names}]).encode()
    return _tar(
        [*zip(names, tarballs, strict=True), (f"blobs/sha256/{digest(config)}", config), ("manifest.json", manifest)]
    )


def synthetic(megabytes: int, runs: int) -> int:
    """Time reading a synthetic archive (see the module)."""
    archive = synthetic_archive(synthetic_layers(megabytes))
    print(f"synthetic archive: {len(archive) / (1 << 20):.0f} MiB, 3 layers", flush=True)
    with tempfile.NamedTemporaryFile(prefix="layer-scan-bench-") as file:
        file.write(archive)
        file.flush()
        del archive
        for label, known in (("no cache", None), ("hashed", {})):
            times = []
            for _ in range(runs):
                with open(file.name, "rb") as stream:
                    start = time.monotonic()
                    read = layers.read_archive(stream, (), known)
                    found, problems = layers.findings(read, layers.layer_order(read))
                    times.append(time.monotonic() - start)
            keys = sorted({f.key for f in found})
            print(
                f"{label:<9} best {min(times):6.2f} s  median {statistics.median(times):6.2f} s  "
                f"({runs} runs)  findings {keys}  problems {problems}",
                flush=True,
            )
    return 0


MAX_SYNTHETIC_MB = 8192  # the archive is made in memory, twice over: more than a few GB is no benchmark here
MAX_RUNS = 100


def bounded(most: int) -> Callable[[str], int]:
    """An argparse type: a whole number from 1 to `most` (the archive is held in memory)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not 1 <= value <= most:
            raise argparse.ArgumentTypeError(f"{value} is not from 1 to {most}")
        return value

    return parse


LIMIT = bench_cli.whole_number(1, 1 << 50)  # an argparse type: the cache's limit in bytes


def main(argv: list[str] | None = None) -> int:
    parser = bench_cli.parser(description="time the layer scan of images without, then with its cache")
    parser.add_argument(
        "images", nargs="*", type=bench_cli.image, metavar="IMAGE", help="local image references, scanned in this order"
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the scan without a cache")
    parser.add_argument("--docker", default=None, help="the docker client (default: the first on PATH)")
    parser.add_argument("--limit", type=LIMIT, default=64 << 20, help="the cache's size limit in bytes")
    parser.add_argument(
        "--synthetic", type=bounded(MAX_SYNTHETIC_MB), metavar="MB", help="time a synthetic archive instead (no Docker)"
    )
    parser.add_argument("--runs", type=bounded(MAX_RUNS), default=3, help="runs of the synthetic archive (default 3)")
    args = parser.parse_args(argv)
    if args.synthetic:
        return synthetic(args.synthetic, args.runs)
    if not args.images:
        parser.error("name an IMAGE, or --synthetic MB")
    engine = bench_cli.engine_holding("layer_scan.py", args.images, args.docker)
    with tempfile.TemporaryDirectory(prefix="layer-scan-bench-") as folder:
        cache = LayerCache(Path(folder) / "layer-scans", args.limit)
        for reference in args.images:
            baseline = None
            if not args.no_baseline:
                seconds, baseline = timed(engine, reference, None)
                print(row(reference, "no cache", seconds, baseline, None), flush=True)
            for run in ("cold", "warm"):
                seconds, found = timed(engine, reference, cache)
                same = None if baseline is None else found.findings == baseline.findings
                print(row(reference, run, seconds, found, same), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(bench_cli.run("bench/layer_scan.py", main))
