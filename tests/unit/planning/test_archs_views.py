"""`list --json` says each image's GPU architectures: the label's promise, or the uncertain expectation."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from torchimages.compat import CudaArchsFact
from torchimages.planning import plan, views

MATRIX = """\
matrix:
  include:
    - {torch: 2.14.1, cuda: '13.0', platforms: [linux/amd64, linux/arm64]}
    - {torch: 2.14.1, cuda: cpu}
"""
CERTAIN = CudaArchsFact(("2.14",), "sm_75 sm_90 compute_90", "S", ("REL",))
UNCERTAIN = CudaArchsFact(("2.14",), "sm_80 sm_120", "U", ("REL",))


def test_each_image_says_its_promised_architectures_or_the_uncertain_expectation(
    write_matrix: Callable[[str], Path],
) -> None:
    found = {c.cuda: c for c in plan.load(write_matrix(MATRIX)).combinations}
    cuda, cpu = found["13.0"], found[None]
    cuda = dataclasses.replace(cuda, cuda_archs=(("linux/amd64", CERTAIN), ("linux/arm64", UNCERTAIN)))
    assert views.archs_json(cuda, "linux/amd64") == {
        "cuda_archs": "sm_75 sm_90 compute_90",
        "cuda_archs_uncertain": None,
    }
    assert views.archs_json(cuda, "linux/arm64") == {"cuda_archs": None, "cuda_archs_uncertain": "sm_80 sm_120"}
    unknown = dataclasses.replace(cuda, cuda_archs=())
    assert views.archs_json(unknown, "linux/amd64") == {"cuda_archs": None, "cuda_archs_uncertain": None}
    assert views.archs_json(cpu, "linux/amd64") == {"cuda_archs": None, "cuda_archs_uncertain": None}


def test_list_json_rows_carry_them_beside_min_driver(
    write_matrix: Callable[[str], Path], cli: Callable[..., tuple[int, str, str]]
) -> None:
    path = write_matrix(MATRIX)
    code, out, _ = cli("list", "--json", "--matrix", str(path), "2.14.1-*-runtime")
    assert code == 0
    rows = json.loads(out)
    # compat.yaml's cuda_archs of 2.14 cu130: V on linux/amd64 (WHLA), S on linux/arm64 (REL, WHLA)
    assert sorted(
        (r["cuda"], r["platform"], r["cuda_archs"], r["cuda_archs_uncertain"], r["min_driver"]) for r in rows
    ) == [
        ("13.0", "linux/amd64", "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120", None, "580.65.06"),
        ("13.0", "linux/arm64", "sm_80 sm_90 sm_100 sm_110 sm_120", None, "580.65.06"),
        ("cpu", "linux/amd64", None, None, None),
    ]
