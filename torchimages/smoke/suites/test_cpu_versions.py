"""The versions inside the image equal the spec; `import torch` is silent.

The versions come from the one facts probe and the one decoder that verification before
tagging uses (torchimages.building.verify), so the suite and the build can never disagree.
"""

from __future__ import annotations

from typing import Any

import pytest

from torchimages.building import verify
from torchimages.smoke.document import SmokeSpec
from torchimages.versions import FACTS

pytestmark = pytest.mark.cpu

REBUILD = "rebuild the image from a spec that matches, or fix the spec"
HINTS = {
    "torch": REBUILD,
    "cuda": "install the torch wheel built for that CUDA (the +cpu wheel for a CPU-only image)",
    "cudnn": "cuDNN is missing, cannot be loaded, or is another version: " + REBUILD,
    "nccl": "NCCL is missing, cannot be loaded, or is another version: " + REBUILD,
    "python": "check --python-exe or the image's Python",
    "os": REBUILD,
}


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


@pytest.mark.parametrize("fact", FACTS)
def test_version(facts: dict[str, Any], spec: SmokeSpec, fact: str) -> None:
    expected = spec.expected_facts()[fact]
    if expected is None and fact in ("cudnn", "nccl") and spec.cuda is not None:
        pytest.skip(f"spec has no {fact} version (not pinned): not checked")
    found = verify.decode(facts)
    mismatches = verify.compare({fact: expected}, found)
    errors = {name: facts.get(f"{name}_error") for name in ("cudnn", "nccl") if facts.get(f"{name}_error")}
    detail = f" (the probe said: {errors[fact]})" if fact in errors else ""
    assert not mismatches, f"{mismatches[0]}{detail}; {HINTS[fact]}"


@pytest.mark.parametrize("package", ["torchvision", "torchaudio"])
def test_companion_version(facts: dict[str, Any], spec: SmokeSpec, package: str) -> None:
    expected = spec.expected_companions()[package]
    if expected is None:
        pytest.skip(f"spec has no {package} version: not checked")
    reported = facts.get(package) or {}
    assert reported.get("error") is None, f"`import {package}` failed: {reported['error']}"
    assert reported.get("version") is not None, f"{package} {expected} is not installed; {REBUILD}"
    mismatches = verify.compare({package: expected}, verify.decode(facts))
    assert not mismatches, f"{mismatches[0]}; {REBUILD}"


def test_pinned_distributions_are_kept(facts: dict[str, Any]) -> None:
    """An image built FROM ours that lifted PIP_CONSTRAINT or UV_CONSTRAINT and replaced a pinned distribution
    (torch, a companion, triton, an nvidia-*/cuda-* wheel) no longer is what its labels say."""
    verdict = verify.check_constraints(verify.decode(facts))
    if not verdict.checked:
        pytest.skip(verdict.notes[0])
    lines = [str(drift) for drift in verdict.drifts]
    assert not lines, (
        "the image no longer has what it was built with:\n"
        + "\n".join(lines + list(verdict.notes))
        + "\nrebuild the derived image without lifting the constraints (docs/how-to/run-the-images.md, derived images)"
    )
