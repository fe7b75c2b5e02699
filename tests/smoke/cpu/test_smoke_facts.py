"""The versions inside the image equal the spec; `import torch` is silent."""

from __future__ import annotations

from typing import Any

import pytest
from smoke_spec import SmokeSpec
from smoke_versions import cudnn_version_string, first_parts, nccl_version_string, public_version

pytestmark = pytest.mark.cpu

REBUILD = "rebuild the image from a spec that matches, or fix the spec"


def test_import_torch_succeeds(facts: dict[str, Any]) -> None:
    assert facts.get("import_torch_error") is None, (
        f"`import torch` failed: {facts['import_torch_error']}; check the venv in the image"
    )


def test_import_torch_prints_nothing(facts: dict[str, Any]) -> None:
    stderr = facts.get("import_torch_stderr", "")
    assert stderr == "", (
        f"`import torch` wrote to stderr:\n{stderr[-2000:]}\n"
        "A warning here shows up in every user's program; install what it asks for "
        "(for example numpy) or fix the environment it names."
    )


def test_torch_version(facts: dict[str, Any], spec: SmokeSpec) -> None:
    found = public_version(str(facts.get("torch")))
    assert found == spec.torch, f"torch is {facts.get('torch')}, the spec says {spec.torch}; {REBUILD}"


@pytest.mark.parametrize("package", ["torchvision", "torchaudio"])
def test_companion_version(facts: dict[str, Any], spec: SmokeSpec, package: str) -> None:
    expected = getattr(spec, package)
    if expected is None:
        pytest.skip(f"spec has no {package} version: not checked")
    reported = facts[package]
    assert reported["error"] is None, f"`import {package}` failed: {reported['error']}"
    assert reported["version"] is not None, f"{package} {expected} is not installed; {REBUILD}"
    found = public_version(reported["version"])
    assert found == expected, f"{package} is {reported['version']}, the spec says {expected}; {REBUILD}"


def test_cuda_version(facts: dict[str, Any], spec: SmokeSpec) -> None:
    if spec.cuda is None:
        assert facts.get("cuda") is None, (
            f"spec asks for CPU-only torch but torch.version.cuda is {facts.get('cuda')}; install the +cpu wheel"
        )
        return
    assert facts.get("cuda") == spec.cuda, (
        f"torch.version.cuda is {facts.get('cuda')}, the spec says {spec.cuda}; "
        "install the torch wheel built for that CUDA"
    )


def test_cudnn_version(facts: dict[str, Any], spec: SmokeSpec) -> None:
    if spec.cudnn is None:
        pytest.skip("spec has no cuDNN version (CPU-only or not pinned): not checked")
    code = facts.get("cudnn")
    assert code is not None, (
        f"torch.backends.cudnn.version() is None ({facts.get('cudnn_error', 'no error')}); "
        f"cuDNN {spec.cudnn} is missing or cannot be loaded"
    )
    found, expected = cudnn_version_string(int(code)), first_parts(spec.cudnn, 3)
    assert found == expected, f"torch loads cuDNN {found} ({code}), the spec says {expected}; {REBUILD}"


def test_nccl_version(facts: dict[str, Any], spec: SmokeSpec) -> None:
    if spec.nccl is None:
        pytest.skip("spec has no NCCL version (CPU-only or not pinned): not checked")
    reported = facts.get("nccl")
    assert reported is not None, (
        f"torch.cuda.nccl.version() failed ({facts.get('nccl_error')}); NCCL {spec.nccl} missing"
    )
    found = nccl_version_string(reported)
    assert found == spec.nccl, f"torch loads NCCL {found}, the spec says {spec.nccl}; {REBUILD}"


def test_python_version(facts: dict[str, Any], spec: SmokeSpec) -> None:
    assert facts["python"] == spec.python, (
        f"{facts['executable']} is Python {facts['python_full']}, the spec says {spec.python}; "
        "check --python-exe or the image's Python"
    )


def test_os(facts: dict[str, Any], spec: SmokeSpec) -> None:
    found = facts["os"]["id"] + facts["os"]["version_id"]
    assert found == spec.os, f"/etc/os-release says {found}, the spec says {spec.os}; {REBUILD}"
