"""A companion's build is part of what a tag promises: torchvision and torchaudio are pinned to the
combination's variant, verified by their local label, and labelled with it.

The image facts below are literals, as the facts probe prints them from a real image: the case that
started this is `2.14.1-cuda13.0-cudnn9-runtime-debian12` holding PyPI's torchaudio, which reports
`2.11.1+cu132`, beside torch `2.14.1+cu130`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from torchimages.building import verify
from torchimages.combination import Combination
from torchimages.planning import plan
from torchimages.smoke import document

MATRIX = "matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0', os: debian12}\n"

# What a true 2.14.1+cu130 image on debian12 reports (the facts probe's answer).
TRUE_IMAGE: dict[str, Any] = {
    "torch": "2.14.1+cu130",
    "cuda": "13.0",
    "cudnn": 92400,
    "nccl": [2, 30, 7],
    "python": "3.11",
    "os": {"id": "debian", "version_id": "12"},
    "torchvision": {"version": "0.29.1+cu130", "error": None},
    "torchaudio": {"version": "2.11.1+cu130", "error": None},
    "machine": {"uname": "x86_64", "files": {"/usr/bin/python3.11": "x86_64"}},
}


class Runner:
    """Just what verification asks of an engine: the probe's printed answer, a literal."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer

    def run_python(self, reference: str, args: list[str]) -> str:
        return "SMOKE_JSON:" + json.dumps(self.answer) + "\n"


@pytest.fixture
def combination(write_matrix: Callable[[str], Path]) -> Combination:
    (selected,) = plan.select(plan.load(write_matrix(MATRIX)), [])
    return selected.combination


def mismatches(combination: Combination, **changed: Any) -> list[str]:
    facts = verify.read_facts(Runner({**TRUE_IMAGE, **changed}), "img:tmp")
    return [str(m) for m in verify.compare(combination.expected_facts(), facts)]


def test_the_tag_promises_each_companion_as_version_plus_variant(combination: Combination) -> None:
    assert combination.companion_versions() == {"torchvision": "0.29.1+cu130", "torchaudio": "2.11.1+cu130"}
    expected = combination.expected_facts()
    assert expected["torchvision"] == "0.29.1+cu130" and expected["torchaudio"] == "2.11.1+cu130"


def test_a_true_image_passes(combination: Combination) -> None:
    assert mismatches(combination) == []


def test_a_companion_of_another_build_fails_naming_both_labels(combination: Combination) -> None:
    (problem,) = mismatches(combination, torchaudio={"version": "2.11.1+cu132", "error": None})
    assert problem.startswith("torchaudio: the tag claims 2.11.1+cu130, the image has 2.11.1+cu132")
    assert "cu132 build, not cu130" in problem


@pytest.mark.parametrize(
    "reported",
    [
        {"version": "2.11.1", "error": None},  # no label: nothing says which build it is
        {"version": "2.11.0+cu130", "error": None},  # another release of the same build
        {"version": None, "error": None},  # not installed: a failure, never "nothing to check"
        {"version": None, "error": "OSError: libcudart.so.13: cannot open shared object file"},
        None,  # the probe said nothing of it
    ],
)
def test_a_missing_unlabelled_or_other_torchaudio_fails(combination: Combination, reported: Any) -> None:
    (problem,) = mismatches(combination, torchaudio=reported)
    assert problem.startswith("torchaudio: the tag claims 2.11.1+cu130")


def test_torchvision_is_verified_too(combination: Combination) -> None:
    (problem,) = mismatches(combination, torchvision={"version": "0.29.1+cu132", "error": None})
    assert problem.startswith("torchvision: the tag claims 0.29.1+cu130, the image has 0.29.1+cu132")


def test_a_left_out_companion_must_be_absent(write_matrix: Callable[[str], Path]) -> None:
    matrix = "matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0', os: debian12, torchaudio: none}\n"
    (selected,) = plan.select(plan.load(write_matrix(matrix)), [])
    assert selected.combination.companion_versions()["torchaudio"] is None
    facts = verify.read_facts(Runner(TRUE_IMAGE), "img:tmp")
    (problem,) = [str(m) for m in verify.compare(selected.combination.expected_facts(), facts)]
    assert problem.startswith("torchaudio: the tag claims none, the image has 2.11.1+cu130")


def test_labels_name_each_companions_build(combination: Combination, write_matrix: Callable[[str], Path]) -> None:
    for image in combination.images:
        labels = image.label_map()
        assert labels["io.torchimages.torchvision"] == "0.29.1+cu130"
        assert labels["io.torchimages.torchaudio"] == "2.11.1+cu130"
        assert labels["io.torchimages.torch"] == "2.14.1"
    matrix = (
        "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}\n"
    )
    (cpu,) = plan.select(plan.load(write_matrix(matrix)), [])
    labels = cpu.combination.images[0].label_map()
    assert labels["io.torchimages.torchvision"] == "none" and labels["io.torchimages.torchaudio"] == "none"


def test_pins_take_only_the_variants_companion_build(
    combination: Combination, write_matrix: Callable[[str], Path]
) -> None:
    # The default variant: torchvision as torch (PyPI's plain wheel is this build); torchaudio 2.11.1 from an
    # older line is pinned with the label, since PyPI's plain 2.11.1 is a cu132 build for every torch.
    assert combination.pins[1:3] == (
        "torchvision==0.29.1,!=0.29.1+cpu,!=0.29.1+cu126,!=0.29.1+cu132",
        "torchaudio==2.11.1+cu130",
    )
    matrix = "matrix:\n  include:\n    - {torch: 2.10.0, cuda: '13.0'}\n    - {torch: 2.14.1, cuda: '13.2'}\n"
    older, newer = (s.combination for s in plan.select(plan.load(write_matrix(matrix)), []))
    assert older.pins[1:3] == ("torchvision==0.25.0+cu130", "torchaudio==2.10.0+cu130")  # same line, not default
    assert newer.pins[1:3] == ("torchvision==0.29.1+cu132", "torchaudio==2.11.1+cu132")


def test_the_smoke_spec_carries_and_checks_the_label(combination: Combination) -> None:
    image = combination.images[0]
    spec = document.spec_from_dict(document.image_document(combination, image, "img:tmp"))
    assert spec.expected_companions() == {"torchvision": "0.29.1+cu130", "torchaudio": "2.11.1+cu130"}
    from_labels = document.spec_from_dict(document.labels_document("img:tmp", image.label_map()))
    assert from_labels.torchaudio == "2.11.1+cu130"
    found = verify.decode({**TRUE_IMAGE, "torchaudio": {"version": "2.11.1+cu132", "error": None}})
    assert [m.fact for m in verify.compare(spec.expected_companions(), found)] == ["torchaudio"]
    assert verify.compare(spec.expected_companions(), verify.decode(TRUE_IMAGE)) == []
    with pytest.raises(document.SpecError):
        document.spec_from_dict({**document.image_document(combination, image, "x"), "torchaudio": "2.11.1+"})


# Builds whose linux/arm64 wheels come from PyTorch's index (the knowledge base's `index: pytorch`): there,
# as on linux/amd64, torchvision and torchaudio report their build's local label (`0.24.1+cu128`).
PYTORCH_INDEX_ARM64 = [("2.9.1", "12.6"), ("2.9.1", "12.8"), ("2.9.1", "13.0"), ("2.10.0", "13.0"), ("2.12.1", "12.6")]


@pytest.mark.parametrize(("torch", "cuda"), PYTORCH_INDEX_ARM64)
def test_an_arm64_image_from_pytorchs_index_promises_its_companions_local_label(
    write_matrix: Callable[[str], Path], torch: str, cuda: str
) -> None:
    """Its pins, expected facts, labels and smoke spec carry `+<variant>` (2.9.1+cu128's default variant
    too, which PyPI serves plain on linux/amd64 alone), and an arm64 image holding the plain companion fails."""
    row = f"{{torch: {torch}, cuda: '{cuda}', os: ubuntu24.04, platforms: [linux/amd64, linux/arm64]}}"
    (selected,) = plan.select(plan.load(write_matrix(f"matrix:\n  include:\n    - {row}\n")), [])
    combination = selected.combination
    arm64 = "linux/arm64"
    assert combination.index_url_for(arm64).startswith("https://download.pytorch.org/whl/")
    label = f"+{combination.variant}"
    promised = combination.companion_versions(arm64)
    assert all(v and v.endswith(label) for v in promised.values()), promised
    assert {k: combination.expected_facts(arm64)[k] for k in promised} == promised
    image = combination.image("runtime", arm64)
    assert {k: image.label_map()[f"io.torchimages.{k}"] for k in promised} == promised
    spec = document.spec_from_dict(document.image_document(combination, image, "img:tmp"))
    assert spec.expected_companions() == promised
    plain = promised["torchvision"].removesuffix(label)  # type: ignore[union-attr]
    arm_image = {
        **TRUE_IMAGE,
        "torch": f"{torch}{label}",
        "cuda": cuda,
        "cudnn": None,
        "nccl": None,
        "python": combination.python,
        "os": {"id": "ubuntu", "version_id": "24.04"},
        "torchvision": {"version": plain, "error": None},
        "torchaudio": {"version": promised["torchaudio"], "error": None},
        "machine": {"uname": "aarch64", "files": {}},
    }
    found = verify.read_facts(Runner(arm_image), "img:tmp")
    problems = [str(m) for m in verify.compare(combination.expected_facts(arm64), found)]
    assert any(
        p.startswith(f"torchvision: the tag claims {promised['torchvision']}, the image has {plain}") for p in problems
    ), problems
