"""Benchmark `build.py build --jobs 1` against `--jobs 2` over four CPU combinations (runtime flavor, Debian 12
base): wall time of each run, each image's time, and the machine's load average during the runs.

Every build is cold (`--no-cache`; `--test none`: build and verification only). Machines like this one carry a
single CPU torch wheel (2.13.0+cpu), so the four combinations (torch 2.13.0, 2.12.1, 2.11.0, 2.10.0) all install
it: their rendered Dockerfiles are pinned to it, and each combination's constraints file gets its own comment
line so that BuildKit cannot share one combination's pip steps with another's. The three whose tag then promises
another torch fail verification (as they must: tags never lie); the build work measured is real. Pass
`--as-rendered` where every combination's wheel is at hand.

Needs a Docker engine and the wheel sources (`eval "$(scripts/host-pip-sources)"`). Takes 5-15 minutes; removes
the tags it makes (the build cache is left alone).
Run: .venv/bin/python bench/jobs.py [--jobs 1 2] [--as-rendered]
"""

from __future__ import annotations

import bench_cli  # first: from here on a signal is one line and 128 + N (bench/bench_cli.py)

bench_cli.early(__name__, "bench/jobs.py")

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from torchimages.engine import find_build_client
from torchimages.planning import plan

ROOT = Path(__file__).resolve().parent.parent
TORCHES = ("2.13.0", "2.12.1", "2.11.0", "2.10.0")
LOCAL_TORCH = "2.13.0"
ENTRY = "{{torch: {}, cuda: cpu, os: debian12, torchvision: none, torchaudio: none, flavors: [runtime]}}"
SUMMARY_LINE = re.compile(r"^(built|failed|skipped|interrupted) +(\d+) s  \S+:(\S+)$", re.MULTILINE)


def write_matrix(folder: Path, repository: str, as_rendered: bool) -> Path:
    matrix = folder / "matrix.yaml"
    rows = "".join(f"    - {ENTRY.format(torch)}\n" for torch in TORCHES)
    matrix.write_text(f"repository: {repository}\nmatrix:\n  include:\n{rows}")
    run([sys.executable, ROOT / "build.py", "render", "--matrix", matrix])
    if not as_rendered:
        for combination in plan.load(matrix).combinations:
            context = matrix.parent / "images" / combination.folder
            dockerfile = context / "Dockerfile"
            dockerfile.write_text(
                dockerfile.read_text().replace(f'"torch=={combination.torch}+cpu"', f'"torch=={LOCAL_TORCH}+cpu"')
            )
            lock = context / "requirements.lock"
            lock.write_text((lock.read_text() if lock.exists() else "") + f"# bench/jobs.py: {combination.folder}\n")
    return matrix


def run(args: list[str | Path]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=ROOT, check=False)
    if result.returncode not in (0, 1):
        sys.exit(f"failed ({result.returncode}): {' '.join(map(str, args))}\n{result.stdout}\n{result.stderr}")
    return result


class LoadSampler(threading.Thread):
    """The 1-minute load average every few seconds while a run goes on."""

    def __init__(self, every: float = 5.0) -> None:
        super().__init__(daemon=True)
        self.every, self.samples, self.stop = every, [os.getloadavg()[0]], threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.every):
            self.samples.append(os.getloadavg()[0])


def build(matrix: Path, jobs: int, logs: Path) -> tuple[float, str, list[float]]:
    sampler = LoadSampler()
    sampler.start()
    start = time.perf_counter()
    args: list[str | Path] = [
        "build",
        "--matrix",
        matrix,
        "--log-dir",
        logs,
        "--jobs",
        str(jobs),
        "--no-cache",
        "--test",
        "none",
        "*",
    ]
    result = run([sys.executable, ROOT / "build.py", *args])
    seconds = time.perf_counter() - start
    sampler.stop.set()
    sampler.join()
    return seconds, result.stdout, sampler.samples


def remove_repository(repository: str) -> None:
    listed = subprocess.run(
        ["docker", "images", "--format", "{{.Repository}}:{{.Tag}}", repository], capture_output=True, text=True
    )
    for name in listed.stdout.split():
        subprocess.run(["docker", "rmi", name], capture_output=True, check=False)


JOBS = bench_cli.whole_number(1, 64)  # an argparse type: the --jobs values


def main() -> None:
    parser = bench_cli.parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=JOBS, nargs="+", default=[1, 2], help="the --jobs values to time, in order")
    parser.add_argument("--as-rendered", action="store_true", help="build the Dockerfiles as rendered (no pin)")
    args = parser.parse_args()
    repository = f"torchimages-bench-{uuid.uuid4().hex[:8]}/pytorch"
    print(f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores")
    print(f"# build client: {' '.join(find_build_client().command)}")
    print(f"# {len(TORCHES)} CPU combinations (runtime, debian12), --no-cache --test none")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-jobs-") as tmp:
        matrix = write_matrix(Path(tmp), repository, args.as_rendered)
        try:
            for jobs in args.jobs:
                remove_repository(repository)
                seconds, output, load = build(matrix, jobs, Path(tmp) / f"logs-{jobs}")
                images = SUMMARY_LINE.findall(output)
                per_image = ", ".join(f"{tag} {status} {s} s" for status, s, tag in sorted(images, key=lambda i: i[2]))
                total = sum(int(s) for _, s, _ in images)
                rows.append((jobs, seconds, total, max(load), sum(load) / len(load)))
                print(f"--jobs {jobs}: {seconds:.0f} s wall; images {per_image} (sum {total} s)")
                print(f"          load average (1 min) during the run: mean {rows[-1][4]:.2f}, max {rows[-1][3]:.2f}")
        finally:
            remove_repository(repository)
    print("\n| --jobs | wall | sum of image times | load avg mean / max |")
    print("| --- | --- | --- | --- |")
    for jobs, seconds, total, high, mean in rows:
        print(f"| {jobs} | {seconds:.0f} s | {total} s | {mean:.2f} / {high:.2f} |")
    if len(rows) >= 2:
        fewest, most = min(rows), max(rows)
        print(f"\nspeed-up of --jobs {most[0]} over --jobs {fewest[0]}: {fewest[1] / most[1]:.2f}x")


if __name__ == "__main__":
    sys.exit(bench_cli.run("bench/jobs.py", main))
