"""The GPU suite's architecture decision (torchimages/smoke/gpu_archs.py) on literal capabilities and lists: a GPU
the list does not cover is named with its capability and the list; the probe's answer read however it comes."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchimages.archs import ArchError, Capability
from torchimages.smoke import gpu_archs
from torchimages.smoke.gpu_archs import Device

CU126 = "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"
CU130 = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_120"
H200 = Device(0, "NVIDIA H200", Capability(9, 0))
RTX5090 = Device(1, "NVIDIA GeForce RTX 5090", Capability(12, 0))
NEXT = Device(2, "NVIDIA Next", Capability(13, 0))
WHOSE = "torch.cuda.get_arch_list()"


def test_a_gpu_the_list_lacks_is_named_with_its_capability_and_the_list() -> None:
    (line,) = gpu_archs.uncovered([RTX5090], CU126, WHOSE)
    assert line.startswith(
        f"GPU 1 NVIDIA GeForce RTX 5090 (capability 12.0) is not covered by {WHOSE} ({CU126}): no cubin sm_12Y "
        "with Y <= 0 and no PTX at or below 12.0"
    )
    assert "no kernel image is available" in line


@pytest.mark.parametrize(
    ("devices", "listed", "bad"),
    [
        ([H200], CU126, []),
        ([H200, RTX5090], CU130, []),
        ([NEXT], CU130, []),  # PTX of 12.0: the driver compiles it for 13.0
        ([NEXT], CU126, [NEXT]),
        ([H200, RTX5090, NEXT], CU126, [RTX5090, NEXT]),
        ([Device(0, "Tesla V100", Capability(7, 0))], CU130, [Device(0, "Tesla V100", Capability(7, 0))]),
        ([Device(0, "GB10", Capability(12, 1))], CU130, []),  # 12.0's cubin runs on 12.1
        ([Device(0, "H100", Capability(9, 0))], "sm_80 compute_90a", [Device(0, "H100", Capability(9, 0))]),
    ],
)
def test_each_gpu_is_decided_by_nvidias_rules(devices: list[Device], listed: str, bad: list[Device]) -> None:
    found = gpu_archs.uncovered(devices, listed, WHOSE)
    assert [line.split(" is not covered")[0] for line in found] == [str(d) for d in bad]


def test_how_each_gpu_runs_it_is_said_for_the_report() -> None:
    assert gpu_archs.covered_by([H200, NEXT, RTX5090], CU130) == {
        "GPU 0 NVIDIA H200 (capability 9.0)": "sass sm_90",
        "GPU 2 NVIDIA Next (capability 13.0)": "ptx compute_120",
        "GPU 1 NVIDIA GeForce RTX 5090 (capability 12.0)": "sass sm_120",
    }


@pytest.mark.parametrize("listed", ["", "sm_90 gfx90a", "sm_90 " * 1000])
def test_what_is_no_list_is_an_arch_error(listed: str) -> None:
    with pytest.raises(ArchError):
        gpu_archs.uncovered([H200], listed, WHOSE)


ANSWER = {
    "arch_list": CU130.split(),
    "devices": [{"index": 0, "name": "NVIDIA H200", "capability": [9, 0]}],
}


def test_the_probes_answer_is_read() -> None:
    assert gpu_archs.read_answer(ANSWER) == ((H200,), CU130)
    (device,), _ = gpu_archs.read_answer(
        {**ANSWER, "devices": [{"index": 3, "name": "x\x1b[2Jy", "capability": [12, 1]}]}
    )
    assert device == Device(3, "x?[2Jy", Capability(12, 1))


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (None, "did not report the architectures"),
        ({"error": "RuntimeError: CUDA error"}, "could not read them: RuntimeError: CUDA error"),
        ({**ANSWER, "devices": []}, "not a list of 1..64"),
        ({**ANSWER, "devices": [{}] * 65}, "not a list of 1..64"),
        ({**ANSWER, "arch_list": "sm_90"}, "not a list of names"),
        ({**ANSWER, "arch_list": [90]}, "not a list of names"),
        ({**ANSWER, "devices": ["H200"]}, "a device is str"),
        ({**ANSWER, "devices": [{"index": True, "name": "x", "capability": [9, 0]}]}, "index is 'True'"),
        ({**ANSWER, "devices": [{"index": 0, "name": "x", "capability": [9]}]}, "not [major, minor]"),
        ({**ANSWER, "devices": [{"index": 0, "name": "x", "capability": [9, 10]}]}, "not a compute capability"),
        ({**ANSWER, "devices": [{"index": 0, "name": "x", "capability": [-1, 0]}]}, "not a compute capability"),
    ],
)
def test_an_answer_that_is_not_one_says_what_is_wrong(raw: Any, said: str) -> None:
    with pytest.raises(ArchError) as raised:
        gpu_archs.read_answer(raw)
    assert said in str(raised.value)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 200) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["index", "name", "capability",
                                                                                 "devices", "arch_list", "error"]),
                                                                inner, max_size=4),
    max_leaves=20,
)  # fmt: skip


@given(JSON)
def test_any_answer_is_read_or_refused_with_an_arch_error(raw: Any) -> None:
    try:
        devices, listed = gpu_archs.read_answer(raw)
    except ArchError:
        return
    assert devices and all(d.name.isprintable() for d in devices)
    with contextlib.suppress(ArchError):  # a list that is not one is refused; nothing else is raised
        gpu_archs.uncovered(devices, listed, WHOSE)
