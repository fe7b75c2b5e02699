"""Benchmark: validate + plan + render a generated matrix of 1,000 combinations; prints seconds.

The knowledge base has a few hundred real combinations, so the benchmark widens a copy of it
with synthetic torch releases (2.100 and up, cloned from 2.14) to reach the size asked for.
"""

from __future__ import annotations

import bench_cli  # first: from here on a signal is one line and 128 + N (bench/bench_cli.py)

bench_cli.early(__name__, "bench/plan_render.py")

import copy
import platform
import sys
import tempfile
import time
from pathlib import Path

import yaml

from torchimages import compat, render
from torchimages.planning import plan

VARIANTS = ("cpu", "cu126", "cu130", "cu132")


def synthetic_kb(minors: int) -> compat.KnowledgeBase:
    """The real knowledge base plus `minors` cloned releases."""
    raw = yaml.safe_load(compat.data_text())
    template = raw["torch"]["2.14"]
    for i in range(minors):
        minor = f"2.{100 + i}"
        clone = copy.deepcopy(template)
        clone["patches"] = [f"{minor}.0"]
        clone["torchvision"] = {f"{minor}.0": "0.29.1"}
        clone["torchaudio"] = {f"{minor}.0": "2.11.1"}
        raw["torch"][minor] = clone
    return compat.parse(raw)


def matrix_text(minors: int) -> str:
    """A matrix of minors x 4 builds, each on two OSes' worth of variants through include entries."""
    lines = ["matrix:", "  include:"]
    for i in range(minors):
        for variant in VARIANTS:
            cuda = "cpu" if variant == "cpu" else f"{variant[2:-1]}.{variant[-1]}"
            lines.append(f"    - {{torch: 2.{100 + i}.0, cuda: '{cuda}'}}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = bench_cli.parser(description=__doc__)
    parser.add_argument("--combinations", type=bench_cli.whole_number(len(VARIANTS), 100_000), default=1000)
    parser.add_argument("--repeat", type=bench_cli.whole_number(1, 1000), default=5)
    args = parser.parse_args()
    minors = args.combinations // len(VARIANTS)
    kb = synthetic_kb(minors)
    timings = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "matrix.yaml"
        path.write_text(matrix_text(minors))
        for _ in range(args.repeat):
            images = Path(tmp) / "images"
            start = time.perf_counter()
            loaded = plan.load(path, kb=kb, images_dir=images)
            rendered = render.render_all(loaded.combinations, loaded.templates)
            render.write(rendered, images)
            timings.append(time.perf_counter() - start)
            for file in [*images.glob("*/Dockerfile"), *images.glob(f"*/{render.STEPS_FOLDER}/*")]:
                file.unlink()
    print(f"machine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()}")
    print(f"combinations: {len(rendered)}, images: {len(loaded.images())}")
    print(f"validate+plan+render+write: best {min(timings):.3f} s, median {sorted(timings)[len(timings) // 2]:.3f} s")


if __name__ == "__main__":
    sys.exit(bench_cli.run("bench/plan_render.py", main))
