"""Validation against the knowledge base: every kind of bad input, reported all at once."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from torchimages import compat
from torchimages.combination import Combination
from torchimages.planning import plan
from torchimages.problems import InputError, Severity


def problems_of(write_matrix: Callable[[str], Path], text: str) -> list[str]:
    with pytest.raises(InputError) as caught:
        plan.load(write_matrix(text))
    return [str(p) for p in caught.value.problems if p.severity is Severity.ERROR]


def one_combination(write_matrix: Callable[[str], Path], entry: str) -> Combination:
    (combination,) = plan.load(write_matrix(f"matrix:\n  include:\n    - {entry}\n")).combinations
    return combination


def test_the_example_users_type(write_matrix: Callable[[str], Path]) -> None:
    combination = one_combination(write_matrix, "{torch: 2.7.0, cuda: '11.8'}")
    assert combination.flavors == ("devel", "runtime")
    assert (combination.cudnn, combination.nccl, combination.python, combination.os.name) == (
        "9.1.0.70",
        "2.21.5",
        "3.10",
        "ubuntu22.04",
    )
    assert combination.image("runtime").tag == "2.7.0-cuda11.8-cudnn9-runtime"
    assert combination.toolkit.image == "nvidia/cuda:11.8.0-devel-ubuntu22.04"
    assert combination.devel_from == "nvidia/cuda:11.8.0-devel-ubuntu22.04"
    assert (combination.torchvision, combination.torchaudio) == ("0.22.0", "2.7.0")


def test_cudnn_8_is_refused_with_the_right_value(write_matrix: Callable[[str], Path]) -> None:
    (error,) = problems_of(write_matrix, "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8', cudnn: '8'}\n")
    assert "torch 2.7.0+cu118 ships cuDNN 9.1.0.70, not 8" in error
    assert "m" in error and ":3:" in error and "cudnn" in error


def test_unpublished_cuda_gets_a_suggestion(write_matrix: Callable[[str], Path]) -> None:
    (error,) = problems_of(write_matrix, "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '12.4'}\n")
    assert "torch 2.7.0 was published for CUDA 11.8, 12.6, 12.8 (and cpu), not 12.4" in error
    assert "did you mean 12.6?" in error


def test_all_problems_are_reported_at_once(write_matrix: Callable[[str], Path]) -> None:
    text = """
matrix:
  include:
    - {torch: 2.8.0, cuda: '11.8'}
    - {torch: 2.7.2, cuda: '12.6'}
    - {torch: 2.7.0, cuda: cu118}
    - {torch: '2.7', cuda: '12.6'}
    - {torch: 2.7.0, cuda: '12.6', nccl: 2.20.5}
    - {torch: 2.15.0, cuda: '13.2', python: '3.10'}
    - {torch: 2.7.0, cuda: '12.6', os: ubuntu26.04}
    - {torch: 2.7.0, cuda: '12.6', flavors: [devel, slim]}
    - {torch: 2.7.0, cuda: cpu, cudnn: '9'}
    - {torch: 2.7.0}
"""
    errors = problems_of(write_matrix, text)
    expected = [
        ":4: error: cuda: torch 2.8.0 was published for CUDA 12.6, 12.8, 12.9",
        ":5: error: torch: torch 2.7.2 was never published (allowed: 2.7.0, 2.7.1); did you mean 2.7.1?",
        ":6: error: cuda: 'cu118' is a wheel index name",
        ":7: error: torch: '2.7' is not a full torch version",
        ":8: error: nccl: torch 2.7.0+cu126 ships NCCL 2.26.2, not 2.20.5",
        ":9: error: python: ubuntu24.04 provides Python 3.12, not 3.10",
        ":9: error: python: torch 2.15 has wheels for Python 3.11 to 3.15, not 3.10",
        ":10: error: os: unknown OS 'ubuntu26.04'",
        ":11: error: flavors: unknown flavor 'slim'",
        ":12: error: cudnn: torch 2.7.0+cpu has no cuDNN",
        ":13: error: cuda: missing",
    ]
    assert len(errors) == len(expected)
    for want in expected:
        assert any(want in e for e in errors), want


def test_devel_needs_toolkit_images_for_the_os(write_matrix: Callable[[str], Path]) -> None:
    (error,) = problems_of(write_matrix, "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8', os: ubuntu24.04}\n")
    assert "nvidia/cuda 11.8 devel images exist for ubuntu20.04, ubuntu22.04, not ubuntu24.04" in error
    assert "Python" not in error


def test_runtime_only_is_fine_without_toolkit_images(write_matrix: Callable[[str], Path]) -> None:
    text = "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '12.8', os: ubuntu22.04, flavors: [runtime]}\n"
    (combination,) = plan.load(write_matrix(text)).combinations
    assert combination.flavors == ("runtime",)


def test_bootstrap_devel_takes_the_toolkit_torch_pins(write_matrix: Callable[[str], Path]) -> None:
    combination = one_combination(write_matrix, "{torch: 2.14.1, cuda: '13.0', os: debian12}")
    assert combination.toolkit.provider == "wheels" and combination.devel_from == "runtime"
    assert combination.toolkit.requirements == (
        "cuda-toolkit[nvcc,nvvm,cudart,cccl,crt,nvrtc]==13.0.3",
        "ninja==1.13.2",
    )


def test_bootstrap_devel_where_the_wheels_hold_only_ptxas_is_refused(write_matrix: Callable[[str], Path]) -> None:
    (error,) = problems_of(write_matrix, "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '12.6', os: debian12}\n")
    assert "flavors: a devel image on debian12 takes nvcc from NVIDIA's wheels" in error
    assert "NVIDIA's nvcc wheels of CUDA 12.6 hold only ptxas, not nvcc" in error
    assert "use flavors: [runtime] or an ubuntu OS" in error


def test_bootstrap_runtime_where_the_wheels_hold_only_ptxas_is_fine(write_matrix: Callable[[str], Path]) -> None:
    combination = one_combination(write_matrix, "{torch: 2.7.0, cuda: '12.6', os: debian12, flavors: [runtime]}")
    assert combination.toolkit.provider == "none"


@pytest.mark.parametrize("os", ["ubuntu24.04", "ubuntu22.04", "debian12"])
def test_cuda_13_devel_takes_nvcc_from_the_wheels_on_every_os(write_matrix: Callable[[str], Path], os: str) -> None:
    combination = one_combination(write_matrix, f"{{torch: 2.14.1, cuda: '13.0', os: {os}}}")
    assert (combination.toolkit.provider, combination.toolkit.image, combination.devel_from) == (
        "wheels",
        "",
        "runtime",
    )
    assert combination.toolkit.requirements[0] == "cuda-toolkit[nvcc,nvvm,cudart,cccl,crt,nvrtc]==13.0.3"
    assert combination.toolkit.reason == (
        "NVIDIA's nvcc wheels for CUDA 13.0 hold nvcc: devel is runtime plus the toolkit's wheels."
    )


def test_cuda_12_devel_on_ubuntu_starts_from_the_toolkit_image(write_matrix: Callable[[str], Path]) -> None:
    combination = one_combination(write_matrix, "{torch: 2.14.1, cuda: '12.6', os: ubuntu24.04}")
    assert (combination.toolkit.provider, combination.devel_from) == ("image", "nvidia/cuda:12.6.3-devel-ubuntu24.04")
    assert combination.toolkit.requirements == ("ninja==1.13.2",)
    assert combination.toolkit.reason == (
        "NVIDIA's nvcc wheels for CUDA 12.6 hold only ptxas: devel starts from the toolkit image."
    )


def _nvcc_wheels(held: dict[str, bool]) -> compat.KnowledgeBase:
    """The shipped knowledge base with `nvcc_wheels` of some CUDA lines set as given."""
    kb = compat.load()
    cuda = {v: dataclasses.replace(facts, nvcc_wheels=held.get(v, facts.nvcc_wheels)) for v, facts in kb.cuda.items()}
    return dataclasses.replace(kb, cuda=cuda)


def test_the_knowledge_base_decides_where_nvcc_comes_from(write_matrix: Callable[[str], Path]) -> None:
    """Flipped facts flip the choice: the rule reads `nvcc_wheels`, it does not know CUDA versions."""
    path = write_matrix(
        "matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0', os: ubuntu24.04}\n"
        "    - {torch: 2.14.1, cuda: '12.6', os: ubuntu24.04}\n"
    )
    flipped = {c.cuda: c.toolkit for c in plan.load(path, kb=_nvcc_wheels({"13.0": False, "12.6": True})).combinations}
    assert (flipped["13.0"].provider, flipped["13.0"].image) == ("image", "nvidia/cuda:13.0.3-devel-ubuntu24.04")
    assert (
        flipped["13.0"].reason
        == "NVIDIA's nvcc wheels for CUDA 13.0 hold only ptxas: devel starts from the toolkit image."
    )
    # Wheels with nvcc, but torch's cu126 build pins no cuda-toolkit: still the toolkit image.
    assert (flipped["12.6"].provider, flipped["12.6"].image) == ("image", "nvidia/cuda:12.6.3-devel-ubuntu24.04")
    assert flipped["12.6"].reason == (
        "torch's cu126 build pins no cuda-toolkit (nvcc's wheels): devel starts from the toolkit image."
    )
    held = {c.cuda: c.toolkit.provider for c in plan.load(path, kb=_nvcc_wheels({"13.0": True})).combinations}
    assert held == {"13.0": "wheels", "12.6": "image"}


def test_bootstrap_devel_with_nvcc_wheels_but_no_toolkit_pin_is_refused(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix("matrix:\n  include:\n    - {torch: 2.7.0, cuda: '12.6', os: debian12}\n")
    with pytest.raises(InputError) as caught:
        plan.load(path, kb=_nvcc_wheels({"12.6": True}))
    (error,) = [str(p) for p in caught.value.problems if p.severity is Severity.ERROR]
    assert "the knowledge base has no cuda-toolkit pin for cu126 builds of this torch" in error
    assert "use flavors: [runtime] or an ubuntu OS" in error


def test_an_uncertain_toolkit_pin_warns_on_every_os(write_matrix: Callable[[str], Path]) -> None:
    for os in ("ubuntu24.04", "debian12"):
        combination = one_combination(write_matrix, f"{{torch: 2.13.0, cuda: '13.2', os: {os}, torchaudio: none}}")
        assert combination.toolkit.provider == "wheels"
        wanted = "the cuda-toolkit pin of torch 2.13.0+cu132 (nvcc for devel) is uncertain in the knowledge base"
        assert any(wanted in p.message for p in combination.warnings), os


def test_uncertain_facts_warn(write_matrix: Callable[[str], Path]) -> None:
    combination = one_combination(write_matrix, "{torch: 2.6.0, cuda: '12.6'}")
    assert any("nccl version of torch 2.6.0+cu126 is uncertain" in p.message for p in combination.warnings)


def test_an_uncertain_fact_names_the_index_that_would_settle_it(write_matrix: Callable[[str], Path]) -> None:
    combination = one_combination(write_matrix, "{torch: 2.6.0, cuda: '12.6'}")
    wanted = (
        "the nccl version of torch 2.6.0+cu126 is uncertain in the knowledge base (variants.cu126.nccl of 2.6: "
        "https://download.pytorch.org/whl/cu126 would settle it, "
        "`kb sync --index https://download.pytorch.org/whl/cu126 --release 2.6.0`)"
    )
    assert wanted in [p.message for p in combination.warnings]
    kb = compat.load()
    release = dataclasses.replace(kb.torch["2.15"], confidence="U")  # as it was before PyPI settled it
    said = kb.settled_by(release, "cu132", "variants.cu132.nccl", "2.15.0")
    assert "https://pypi.org/simple would settle it" in said  # PyPI's default build


def test_companions_can_be_left_out(write_matrix: Callable[[str], Path]) -> None:
    combination = one_combination(write_matrix, "{torch: 2.13.0, cuda: cpu, torchvision: none, torchaudio: none}")
    assert (combination.torchvision, combination.torchaudio, combination.cuda, combination.cudnn) == (None,) * 4


def test_torchaudio_pairs_with_its_last_release(write_matrix: Callable[[str], Path]) -> None:
    assert one_combination(write_matrix, "{torch: 2.14.1, cuda: '13.0'}").torchaudio == "2.11.1"
    errors = problems_of(write_matrix, "matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0', torchaudio: 2.14.1}\n")
    assert "pairs with torchaudio 2.11.1, not 2.14.1" in errors[0]


def test_default_os_follows_the_cuda_toolkit_images(write_matrix: Callable[[str], Path]) -> None:
    assert one_combination(write_matrix, "{torch: 2.6.0, cuda: '12.4'}").os.name == "ubuntu22.04"
    assert one_combination(write_matrix, "{torch: 2.6.0, cuda: '12.6'}").os.name == "ubuntu24.04"


@pytest.mark.parametrize(
    ("entry", "refused"),
    [
        ("{torch: 2.8.0, cuda: '12.6', cudnn: '9.1'}", "torch 2.8.0+cu126 ships cuDNN 9.10.2.21, not 9.1"),
        ("{torch: 2.8.0, cuda: '12.6', cudnn: '9.10.2.2'}", "torch 2.8.0+cu126 ships cuDNN 9.10.2.21, not 9.10.2.2"),
        ("{torch: 2.11.0, cuda: '12.6', nccl: '2.2'}", "torch 2.11.0+cu126 ships NCCL 2.28.9, not 2.2"),
        ("{torch: 2.11.0, cuda: '12.6', nccl: '2.28.90'}", "torch 2.11.0+cu126 ships NCCL 2.28.9, not 2.28.90"),
        ("{torch: 2.11.0, cuda: '12.6', nccl: '2.28.'}", "nccl"),
    ],
)
def test_a_restated_cudnn_or_nccl_must_match_the_pin_part_by_part(
    write_matrix: Callable[[str], Path], entry: str, refused: str
) -> None:
    errors = problems_of(write_matrix, f"matrix:\n  include:\n    - {entry}\n")
    assert any(refused in e for e in errors), errors


@pytest.mark.parametrize(
    ("entry", "nccl"),
    [
        ("{torch: 2.8.0, cuda: '12.6', cudnn: '9'}", "2.27.3"),
        ("{torch: 2.8.0, cuda: '12.6', cudnn: '9.10'}", "2.27.3"),
        ("{torch: 2.8.0, cuda: '12.6', cudnn: 9.10.2.21}", "2.27.3"),
        ("{torch: 2.11.0, cuda: '12.6', nccl: '2.28'}", "2.28.9"),
        ("{torch: 2.11.0, cuda: '12.6', nccl: 2.28.9}", "2.28.9"),
    ],
)
def test_a_restated_cudnn_or_nccl_of_whole_parts_of_the_pin_is_accepted(
    write_matrix: Callable[[str], Path], entry: str, nccl: str
) -> None:
    combination = one_combination(write_matrix, entry)
    assert (combination.cudnn, combination.nccl) == ("9.10.2.21", nccl)


@pytest.mark.parametrize(
    ("entry", "refused"),
    [
        # ubuntu22.04 provides Python 3.10; torch 2.15 has no wheel for it
        ("{torch: 2.15.0, cuda: cpu, os: ubuntu22.04}", "torch 2.15 has wheels for Python 3.11 to 3.15, not 3.10"),
        ("{torch: 2.15.0, cuda: cpu, os: ubuntu22.04, python: '3.10'}", "torch 2.15 has wheels for Python 3.11"),
    ],
)
def test_a_python_the_os_provides_is_refused_when_torch_has_no_wheel_for_it(
    write_matrix: Callable[[str], Path], entry: str, refused: str
) -> None:
    errors = problems_of(write_matrix, f"matrix:\n  include:\n    - {entry}\n")
    assert any(f"error: python: {refused}" in e for e in errors), errors
