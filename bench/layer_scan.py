"""Benchmark the release gate's layer scan (torchimages/security/layers.py) with and without its cache: for
each image, the scan without a cache (what every scan cost before the cache), then with an empty cache (cold:
every layer read and kept) and again (warm: nothing exported when every layer is kept). The images share one
cache in the order given, so `RUNTIME DEVEL` shows devel reading only its own layers on its cold run.

Prints, per image and run: seconds, layers, layers read and layers taken from the cache, and whether the
findings equal the uncached scan's. The cache is a temporary folder, removed at the end; the images are only
exported (`docker save`), never changed. Needs a Docker engine holding the images.
Run: .venv/bin/python bench/layer_scan.py IMAGE [IMAGE ...] [--no-baseline] [--docker PATH]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="time the layer scan of images without, then with its cache")
    parser.add_argument("images", nargs="+", metavar="IMAGE", help="local image references, scanned in this order")
    parser.add_argument("--no-baseline", action="store_true", help="skip the scan without a cache")
    parser.add_argument("--docker", default=None, help="the docker client (default: the first on PATH)")
    parser.add_argument("--limit", type=int, default=64 << 20, help="the cache's size limit in bytes")
    args = parser.parse_args(argv)
    engine = DockerEngine(args.docker)
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
    sys.exit(main())
