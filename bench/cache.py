"""Benchmark the shared BuildKit cache the way CI runners would use it: each runner is a FRESH private Docker
engine (its own dockerd, data root and bridge, with nothing but the bootstrap base loaded), and a registry
on loopback stands for the team's registry.

  runner 1: build --cache-to type=inline --push          (cold build; the images carry their cache)
  runner 2: build --cache-from REGISTRY/REPO:{tag}       (the second CI run, from the cache)
  runner 3: build                                        (the same second run without the cache)

Prints each runner's wall time and how many of runner 2's venv steps BuildKit reported CACHED. Builds one
CPU combination, both flavors (`--test none`: build and verification). Needs root (dockerd, `ip link`),
Debian's dockerd and docker-registry, the bootstrap base in the machine's engine (read with `docker save`)
and the wheel sources (`eval "$(scripts/host-pip-sources)"`). Takes about 5-10 minutes; leaves nothing.
Run: .venv/bin/python bench/cache.py [--entry '{torch: ..., cuda: cpu, ...}']
"""

from __future__ import annotations

import bench_cli  # first: from here on a signal is one line and 128 + N (bench/bench_cli.py)

bench_cli.early(__name__, "bench/cache.py")

import argparse
import contextlib
import datetime
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the private engine of the fault tests

from tests.e2e.test_faults import BASE, private_engine
from torchimages.engine import find_build_client

ENTRY = "{torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}"
VENV_STEP = re.compile(r"^#(\d+) \[runtime +\d+/\d+\] RUN --mount=type=cache,target=/home/torch/.cache/pip", re.M)


@contextlib.contextmanager
def registry(folder: Path) -> Iterator[str]:
    """Debian's docker-registry on a free loopback port; its address."""
    binary = shutil.which("docker-registry")
    if binary is None:
        sys.exit("Debian's docker-registry is not installed (apt-get install docker-registry)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    config = folder / "registry.yml"
    storage = f"storage:\n  filesystem:\n    rootdirectory: {folder}/data\n"
    config.write_text(f"version: 0.1\n{storage}http:\n  addr: {address}\n")
    server = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"http://{address}/v2/", timeout=1).close()
                break
            time.sleep(0.2)
        yield address
    finally:
        server.terminate()
        server.wait(timeout=10)


def runner(archive: Path, matrix: Path, logs: Path, *options: str) -> tuple[float, str]:
    """One CI run on a fresh private engine: its wall time (engine start excluded) and build.py's output."""
    with private_engine(archive) as engine:
        args = ["build", "--matrix", str(matrix), "--log-dir", str(logs), "--test", "none", *options, "*"]
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, str(ROOT / "build.py"), *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "DOCKER_HOST": engine.host},
            check=False,
        )
        seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"build.py {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return seconds, result.stdout


def cached_steps(logs: Path) -> tuple[int, int]:
    """(CACHED, all) venv steps over every image log in `logs`."""
    cached = total = 0
    for log in logs.glob("*.log"):
        text = log.read_text(errors="replace")
        for step in VENV_STEP.findall(text):
            total += 1
            cached += bool(re.search(rf"^#{step} CACHED$", text, re.M))
    return cached, total


def main() -> None:
    parser = bench_cli.parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entry", default=ENTRY, help="the matrix include entry to build (default: %(default)s)")
    args = parser.parse_args()
    try:
        entry = yaml.safe_load(args.entry)
    except yaml.YAMLError as exc:
        parser.error(f"--entry is not YAML: {' '.join(str(exc).split())[:200]}")
    if not isinstance(entry, dict):
        parser.error(f"--entry {args.entry[:80]!r} is not one mapping (e.g. {ENTRY})")
    if os.geteuid() != 0:
        sys.exit("needs root: it starts private dockerds")
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as tmp, registry(Path(tmp)) as address:
        folder = Path(tmp)
        archive = folder / "base.tar"
        subprocess.run(["docker", "save", "-o", str(archive), BASE], check=True)
        repository = f"{address}/torchimages-bench-{uuid.uuid4().hex[:8]}/pytorch"
        matrix = folder / "matrix.yaml"
        matrix.write_text(yaml.safe_dump({"repository": repository, "matrix": {"include": [entry]}}))
        subprocess.run([sys.executable, str(ROOT / "build.py"), "render", "--matrix", str(matrix)], check=True)
        now = datetime.datetime.now(datetime.UTC)
        print(f"# {now:%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores")
        print(f"# build client: {' '.join(find_build_client().command)}")
        print(f"# {args.entry}, both flavors, each runner a fresh private engine; load {os.getloadavg()[0]:.2f}")
        first, _ = runner(archive, matrix, folder / "logs-1", "--cache-to", "type=inline", "--push")
        print(f"runner 1, --cache-to type=inline --push (cold):   {first:6.0f} s  load {os.getloadavg()[0]:.2f}")
        cached, _ = runner(archive, matrix, folder / "logs-2", "--cache-from", f"{repository}:{{tag}}")
        hits, steps = cached_steps(folder / "logs-2")
        print(f"runner 2, --cache-from {repository}:{{tag}}: {cached:6.0f} s  load {os.getloadavg()[0]:.2f}")
        print(f"          venv steps CACHED: {hits} of {steps}")
        plain, _ = runner(archive, matrix, folder / "logs-3")
        print(f"runner 3, no cache:                               {plain:6.0f} s  load {os.getloadavg()[0]:.2f}")
        print(f"\nsecond run with the cache / without: {cached:.0f} s / {plain:.0f} s = {cached / plain:.2f}")


if __name__ == "__main__":
    sys.exit(bench_cli.run("bench/cache.py", main))
