"""`list --json` says each image's GPU architectures: the label's promise, or the uncertain expectation."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from torchimages.planning import plan, views

MATRIX = """\
matrix:
  include:
    - {torch: 2.12.1, cuda: '13.0', platforms: [linux/amd64, linux/arm64]}
    - {torch: 2.15.0, cuda: '13.2'}
    - {torch: 2.12.1, cuda: cpu}
"""


def test_each_image_says_its_promised_architectures_or_the_uncertain_expectation(
    write_matrix: Callable[[str], Path],
) -> None:
    chosen = plan.select(plan.load(write_matrix(MATRIX)), [])
    found = {
        (s.combination.cuda, i.platform): views.archs_json(s.combination, i.platform) for s in chosen for i in s.images
    }
    assert found == {
        ("13.0", "linux/amd64"): {
            "cuda_archs": "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_120",
            "cuda_archs_uncertain": None,
        },
        ("13.0", "linux/arm64"): {
            "cuda_archs": "sm_80 sm_90 sm_100 sm_110 sm_120 compute_120",
            "cuda_archs_uncertain": None,
        },
        ("13.2", "linux/amd64"): {
            "cuda_archs": None,
            "cuda_archs_uncertain": "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_120",
        },
        (None, "linux/amd64"): {"cuda_archs": None, "cuda_archs_uncertain": None},
    }


def test_list_json_rows_carry_them_beside_min_driver(
    write_matrix: Callable[[str], Path], cli: Callable[..., tuple[int, str, str]]
) -> None:
    path = write_matrix(MATRIX)
    code, out, _ = cli("list", "--json", "--matrix", str(path), "2.12.1-cuda13.0-cudnn9-runtime")
    assert code == 0
    rows = json.loads(out)
    assert [(r["platform"], r["cuda_archs"], r["min_driver"]) for r in rows] == [
        ("linux/amd64", "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_120", "580.65.06"),
        ("linux/arm64", "sm_80 sm_90 sm_100 sm_110 sm_120 compute_120", "580.65.06"),
    ]
