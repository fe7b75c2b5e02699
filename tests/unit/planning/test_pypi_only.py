"""Which images build from PyPI alone (`pypi_only`): every wheel their pins name, on every platform they are built
for, is one PyPI serves. The facts are a small knowledge base written here, not the shipped one."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from torchimages import compat
from torchimages.combination import Combination
from torchimages.planning import plan, views

Cli = Callable[..., tuple[int, str, str]]

# Two release lines: 2.11 (PyPI's linux/amd64 build is cu130, its companions of the same line) and 2.13 (its
# torchaudio is the older 2.11.1, pinned by its label), each with linux/arm64 wheels on PyPI and on PyTorch's index.
KB_TEXT = """
sources: {T: "written in the test"}
index_url_template: "https://download.pytorch.org/whl/{variant}"
source_date: "2026-11-29"
torchaudio_last_release: "2.11.1"
uv: {version: "0.13.8", sha256: ["%s"], sources: [T]}
numpy: {"3.12": "2.3.5"}
cuda:
  "12.6": {image_release: "12.6.3", min_driver: "560.28.03", minor_compat_min_driver: "525.60.13",
           ubuntu: ["24.04"], arch_list: "8.0", nvcc_wheels: false, confidence: V}
  "13.0": {image_release: "13.0.2", min_driver: "580.65.06", minor_compat_min_driver: "580.65.06",
           ubuntu: ["24.04"], arch_list: "8.0", nvcc_wheels: true, confidence: V}
os:
  ubuntu24.04: {provider: registry, image: "ubuntu:24.04", python: "3.12", confidence: V, sources: [T]}
torch:
  "2.11":
    patches: ["2.11.0"]
    python: ["3.12"]
    pypi_default: cu130
    variants:
      cpu: {}
      cu126: {cudnn: "9.10.2.21", nccl: "2.28.9"}
      cu130: {cudnn: "9.19.0.56", nccl: "2.28.9"}
    torchvision: {"2.11.0": "0.26.0"}
    torchaudio: {"2.11.0": "2.11.0"}
    platforms:
      linux/arm64:
        cpu: {index: pypi, confidence: V, sources: [T]}
        cu126: {index: pytorch, confidence: V, sources: [T]}
        cu130: {index: pytorch, confidence: V, sources: [T]}
    confidence: V
  "2.13":
    patches: ["2.13.0"]
    python: ["3.12"]
    pypi_default: cu130
    variants:
      cpu: {}
      cu130: {cudnn: "9.20.0.48", nccl: "2.29.7"}
    torchvision: {"2.13.0": "0.28.0"}
    torchaudio: {"2.13.0": "2.11.1"}
    platforms:
      linux/arm64:
        cu130: {index: pypi, confidence: V, sources: [T]}
    confidence: V
""" % ("0" * 64)
KB = compat.parse(yaml.safe_load(KB_TEXT))


def combination(tmp_path: Path, entry: str) -> Combination:
    path = tmp_path / "matrix.yaml"
    path.write_text(f"matrix:\n  include:\n    - {entry}\n")
    (found,) = plan.load(path, images_dir=tmp_path / "images", kb=KB).combinations
    return found


@pytest.mark.parametrize(
    ("entry", "pypi_only"),
    [
        # PyPI's linux/amd64 build, companions of the same line: `torch==2.11.0,!=2.11.0+cpu,...`
        ("{torch: 2.11.0, cuda: '13.0'}", True),
        # another build: `torch==2.11.0+cu126`, on PyTorch's index alone
        ("{torch: 2.11.0, cuda: '12.6'}", False),
        ("{torch: 2.11.0, cuda: cpu}", False),
        # PyPI's build, but torchaudio of the older line is pinned `==2.11.1+cu130`
        ("{torch: 2.13.0, cuda: '13.0'}", False),
        ("{torch: 2.13.0, cuda: '13.0', torchaudio: none}", True),
        # linux/arm64's wheels of this build are on PyPI (plain pins there) and linux/amd64's too
        ("{torch: 2.13.0, cuda: '13.0', torchaudio: none, platforms: [linux/amd64, linux/arm64]}", True),
        ("{torch: 2.13.0, cuda: '13.0', platforms: [linux/arm64]}", True),
        # PyPI's linux/amd64 build, whose linux/arm64 wheels are PyTorch's index's (plain pins all the same)
        ("{torch: 2.11.0, cuda: '13.0', platforms: [linux/amd64, linux/arm64]}", False),
        ("{torch: 2.11.0, cuda: '13.0', platforms: [linux/arm64]}", False),
        # the cpu build is PyPI's on linux/arm64 only
        ("{torch: 2.11.0, cuda: cpu, platforms: [linux/arm64]}", True),
        ("{torch: 2.11.0, cuda: cpu, platforms: [linux/amd64, linux/arm64]}", False),
    ],
)
def test_an_image_is_pypi_only_where_pypi_serves_every_wheel_it_pins(
    tmp_path: Path, entry: str, pypi_only: bool
) -> None:
    assert combination(tmp_path, entry).pypi_only is pypi_only


def test_the_indexes_are_those_the_dockerfile_names(tmp_path: Path) -> None:
    both = combination(tmp_path, "{torch: 2.11.0, cuda: cpu, platforms: [linux/amd64, linux/arm64]}")
    assert both.wheel_indexes == ("https://download.pytorch.org/whl/cpu", "https://pypi.org/simple")
    assert both.pypi_platforms == ("linux/arm64",)
    pypi = combination(tmp_path, "{torch: 2.11.0, cuda: '13.0'}")
    assert pypi.wheel_indexes == ("https://download.pytorch.org/whl/cu130",)  # PyPI too, through --index-url


def test_a_combination_made_without_resolving_is_not_pypi_only(tmp_path: Path) -> None:
    found = combination(tmp_path, "{torch: 2.11.0, cuda: '13.0'}")
    assert not dataclasses.replace(found, pypi_platforms=()).pypi_only


def test_list_json_and_plan_say_it(tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compat, "load", lambda: KB)
    path = tmp_path / "matrix.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            matrix:
              include:
                - {torch: 2.11.0, cuda: '13.0'}
                - {torch: 2.11.0, cuda: '12.6'}
            """
        )
    )
    common = ("--matrix", str(path), "--images-dir", str(tmp_path / "images"))
    code, out, _ = cli("list", "--json", *common, "2.11.0-cuda13.0-cudnn9-runtime", "2.11.0-cuda12.6-cudnn9-runtime")
    assert code == 0
    found = {entry["tag"]: (entry["pypi_only"], entry["wheel_index"]) for entry in json.loads(out)}
    assert found == {
        "2.11.0-cuda12.6-cudnn9-runtime": (False, "https://download.pytorch.org/whl/cu126"),
        "2.11.0-cuda13.0-cudnn9-runtime": (True, "https://download.pytorch.org/whl/cu130"),
    }
    code, out, _ = cli("plan", *common, "2.11.0-cuda13.0-cudnn9-runtime", "2.11.0-cuda12.6-cudnn9-runtime")
    assert code == 0
    assert "wheels from https://download.pytorch.org/whl/cu126 (PyPI-only build: no)" in out
    assert "wheels from https://download.pytorch.org/whl/cu130 (PyPI-only build: yes)" in out


def test_the_image_json_names_the_new_fields(tmp_path: Path) -> None:
    found = combination(tmp_path, "{torch: 2.13.0, cuda: '13.0', platforms: [linux/arm64]}")
    described = views.image_json(found, found.image("runtime"))
    assert (described["pypi_only"], described["wheel_index"]) == (True, "https://pypi.org/simple")
