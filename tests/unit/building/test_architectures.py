"""The GPU architectures an image holds are the ones its tag promises (building/architectures.py).

Every reading is the archs probe's literal answer and every expectation a literal fact: nothing here is computed
by the code under test.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes import CU118_270, CU118_ARCHS, FakeEngine, Raw, archs_answer, probe_answer
from torchimages.archs import Archs, parse_archs
from torchimages.building import architectures, verify
from torchimages.building.architectures import ArchReading, UnreadableArchs, check, decode
from torchimages.building.builder import Builder
from torchimages.building.outcome import Outcome
from torchimages.building.requests import BuildOptions
from torchimages.compat import CudaArchsFact
from torchimages.planning import plan

CU130 = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_120"
CERTAIN = CudaArchsFact(("2.12",), CU130, "V", ("REL",))
UNCERTAIN = CudaArchsFact(("2.12",), CU130, "U", ("REL",))
WHAT = "cu130 torch 2.12.1 on linux/amd64"


# --- decoding the probe's answer ---------------------------------------------------------------------------


def test_torch_holds_its_flags_sass_and_the_ptx_of_its_flags_and_of_libtorch_cuda() -> None:
    found = decode(
        archs_answer(
            "sm_80 sm_75 sm_90",  # flags without compute_: the PTX is in the fatbin
            {"torch/lib/libtorch_cuda.so": ("sm_75 sm_80 sm_90", "compute_90"), "torchvision/_C.so": ("sm_75", "")},
        )
    )
    assert found.label == "sm_75 sm_80 sm_90 compute_90"
    both = decode(archs_answer("sm_90 compute_120", {"torch/lib/libtorch_cuda.so": ("sm_90", "compute_90")}))
    assert both.label == "sm_90 compute_90 compute_120"
    assert dict(found.files)["torchvision/_C.so"].label == "sm_75"


def test_a_cpu_torch_reads_as_none() -> None:
    found = decode({"torch_flags": None, "files": {}, "errors": {}})
    assert found.torch is None and found.label is None and found.files == () and found.errors == ()
    assert decode({"torch_flags": None, "files": None}) == decode({"torch_flags": None}) == found
    assert decode({"torch_flags": " ", "files": {}, "errors": {}}) == found  # an empty list of flags: none


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ([], "a list, not an object"),
        ("sm_90", "a str, not an object"),
        ({"torch_flags": 90}, "torch_flags is a int"),
        ({"torch_flags": "sm_9"}, "torch_flags: 'sm_9' is not an architecture"),
        ({"torch_flags": "sm_90 " * 5000}, "torch_flags: an architecture list of 30000 characters"),
        ({"torch_flags": "sm_90", "files": []}, "files is a list"),
        ({"torch_flags": "sm_90", "files": {"a.so": {"sass": "sm_90"}}}, "files[a.so]: a list of at most"),
        ({"torch_flags": "sm_90", "files": {"a.so": {"sass": ["sm_90"] * 65}}}, "a list of at most 64"),
        ({"torch_flags": "sm_90", "files": {"a.so": {"sass": ["compute_90"]}}}, "compute_90 in its sass list"),
        ({"torch_flags": "sm_90", "files": {"a.so": {"ptx": ["sm_90"]}}}, "sm_90 in its ptx list"),
        ({"torch_flags": "sm_90", "files": {"a.so": {"sass": [90]}}}, "int is not an architecture name"),
        ({"torch_flags": "sm_90", "files": {"a.so": 3}}, "files[a.so] is a int"),
        ({"torch_flags": "sm_90", "files": {"/etc/a.so": {}}}, "not a relative path"),
        ({"torch_flags": "sm_90", "files": {"../a.so": {}}}, "not a relative path"),
        ({"torch_flags": "sm_90", "files": {"a\n.so": {}}}, "not a relative path"),
        ({"torch_flags": "sm_90", "files": {f"{n}.so": {} for n in range(513)}}, "names 513 files (at most 512)"),
        ({"torch_flags": "sm_90", "errors": {"torch": None}}, "errors[torch] is a NoneType"),
    ],
)
def test_an_answer_the_probe_does_not_print_is_unreadable_and_says_why(raw: Any, said: str) -> None:
    with pytest.raises(UnreadableArchs) as caught:
        decode(raw)
    assert said in str(caught.value)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=30), inner, max_size=5)),
    max_leaves=30,
)
_NAMES = st.sampled_from(["sm_75", "sm_90a", "compute_120", "sm_100f", "sm_9", "", "compute_90", "x"])
_ANSWERS = st.fixed_dictionaries(
    {
        "torch_flags": st.none() | st.lists(_NAMES, max_size=6).map(" ".join) | _JSON,
        "files": st.dictionaries(
            st.sampled_from(["torch/lib/libtorch_cuda.so", "torchvision/_C.so", "/abs.so", "a/../b"]) | st.text(),
            st.fixed_dictionaries({"sass": st.lists(_NAMES, max_size=4), "ptx": st.lists(_NAMES, max_size=4)}) | _JSON,
            max_size=4,
        )
        | _JSON,
        "errors": st.dictionaries(st.text(max_size=20), st.text(max_size=20) | _JSON, max_size=3) | _JSON,
    }
)


@settings(max_examples=300, deadline=None)
@given(raw=_ANSWERS | _JSON)
def test_any_answer_is_read_or_refused_as_unreadable_never_a_traceback(raw: Any) -> None:
    try:
        found = decode(json.loads(json.dumps(raw)))
    except UnreadableArchs as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    verdict = check(found, True, CERTAIN, WHAT)
    assert all(isinstance(line, str) and "\n" not in line for line in verdict.problems + verdict.notes)
    if found.torch is not None:
        assert parse_archs(found.torch.label) == found.torch


# --- the checks --------------------------------------------------------------------------------------------

CU130_IMAGE = archs_answer(
    "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120",
    {
        "torch/lib/libtorch_cuda.so": ("sm_75 sm_80 sm_86 sm_90 sm_100 sm_120", "compute_120"),
        "torchvision/_C.so": ("sm_75 sm_80 sm_86 sm_90 sm_100 sm_120", "compute_120"),
        "torchaudio/lib/libtorchaudio.so": ("", ""),  # no CUDA code: nothing to hold to torch's
    },
)


# What the archs probe read of PyPI's torch 2.14.1 (cu130) and torchvision 0.29.1 wheels on 2026-12-04
# (docs/benchmarks.md: equal to cuobjdump's lists): torch's libraries hold arch-specific kernels beyond its flags,
# libtorch_cuda_linalg.so fewer architectures, and no PTX; torchvision has compute_120.
WHEEL_2141_CU130 = archs_answer(
    "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120",
    {
        "torch/lib/libtorch_cuda.so": (
            "sm_75 sm_80 sm_86 sm_89 sm_90 sm_90a sm_100 sm_100a sm_103f sm_120 sm_120a sm_121a",
            "",
        ),
        "torch/lib/libtorch_cuda_linalg.so": ("sm_80 sm_86 sm_90 sm_100 sm_120", ""),
        "torch/lib/libtorch_nvshmem.so": ("sm_75 sm_80 sm_86 sm_90 sm_100 sm_120", ""),
        "torchvision/_C_stable.so": ("sm_75 sm_80 sm_86 sm_90 sm_100 sm_120", "compute_120"),
    },
)


def test_the_wheel_read_holds_what_its_certain_fact_promises() -> None:
    fact = CudaArchsFact(("2.14",), "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120", "V", ("WHLA",))
    found = decode(WHEEL_2141_CU130)
    assert found.label == "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"
    assert check(found, True, fact, "cu130 torch 2.14.1 on linux/amd64") == architectures.ArchVerdict()


def test_an_image_that_holds_what_the_tag_promises_passes() -> None:
    assert check(decode(CU130_IMAGE), True, CERTAIN, WHAT) == architectures.ArchVerdict()


def test_a_torch_without_a_promised_architecture_fails_naming_what_it_lacks() -> None:
    raw = {**CU130_IMAGE, "torch_flags": "sm_75 sm_80 sm_86 sm_90 sm_100"}
    verdict = check(decode(raw), True, CERTAIN, WHAT)
    assert verdict.problems == (
        f"GPU architectures: the tag promises {CU130}, the image's torch holds sm_75 sm_80 sm_86 sm_90 sm_100"
        " compute_120: missing sm_120",
    )


def test_a_torch_with_more_than_promised_fails_too_the_label_would_lie() -> None:
    raw = archs_answer("sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_120")
    verdict = check(decode(raw), True, CERTAIN, WHAT)
    assert [line.split(": ")[-1] for line in verdict.problems] == ["not promised sm_70"]


def test_an_uncertain_fact_is_only_noted_and_a_missing_one_reported() -> None:
    raw = {**CU130_IMAGE, "torch_flags": "sm_75 sm_80 sm_86 sm_90 sm_100"}
    verdict = check(decode(raw), True, UNCERTAIN, WHAT)
    assert verdict.problems == ()
    assert verdict.notes == (
        f"GPU architectures: the knowledge base expects (uncertain: no label) {CU130}, the image's torch holds"
        " sm_75 sm_80 sm_86 sm_90 sm_100 compute_120: missing sm_120",
    )
    unknown = check(decode(raw), True, None, WHAT)
    assert unknown.problems == () and unknown.notes == (
        f"GPU architectures: the knowledge base knows none for {WHAT}; the image's torch holds"
        " sm_75 sm_80 sm_86 sm_90 sm_100 compute_120",
    )
    assert check(decode(CU130_IMAGE), True, UNCERTAIN, WHAT) == architectures.ArchVerdict()


def test_a_torchvision_without_code_for_an_architecture_torch_serves_fails() -> None:
    raw = archs_answer(
        "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120",
        {
            "torch/lib/libtorch_cuda.so": ("", "compute_120"),
            "torchvision/_C.so": ("sm_75 sm_80 sm_90", ""),  # sm_86 runs sm_80's cubin; 10.0 and 12.0 nothing
            "torchaudio/lib/libtorchaudio.so": ("sm_75 sm_80 sm_86 sm_90", "compute_90"),  # PTX JIT covers the rest
        },
    )
    verdict = check(decode(raw), True, CERTAIN, WHAT)
    assert verdict.problems == (
        "GPU architectures: torchvision/_C.so holds sm_75 sm_80 sm_90, no code for sm_100 sm_120, which torch serves"
        " (its ops fail there with 'no kernel image')",
    )


def test_an_arch_specific_cubin_does_not_cover_another_minor() -> None:
    raw = archs_answer("sm_80 sm_86", {"torchvision/_C.so": ("sm_86a", "")})
    fact = CudaArchsFact(("2.12",), "sm_80 sm_86", "V", ("REL",))
    assert [p.split(", ")[1] for p in check(decode(raw), True, fact, WHAT).problems] == ["no code for sm_80"]


def test_a_file_the_probe_could_not_read_fails_naming_it() -> None:
    raw = {**CU130_IMAGE, "errors": {"torchvision/image.so": "no fatbin section: truncated ELF"}}
    verdict = check(decode(raw), True, CERTAIN, WHAT)
    assert verdict.problems == (
        "GPU architectures: could not read torchvision/image.so: no fatbin section: truncated ELF",
    )


def test_a_cuda_torch_that_reports_no_architectures_fails() -> None:
    verdict = check(decode(archs_answer(None)), True, CERTAIN, WHAT)
    assert verdict.problems == ("GPU architectures: torch reports none (torch_flags null), but this is a CUDA build",)


def test_a_cpu_build_holds_no_gpu_code() -> None:
    assert (
        check(decode(archs_answer(None)), False, None, "cpu torch 2.12.1 on linux/amd64") == architectures.ArchVerdict()
    )
    flags = check(decode(archs_answer("sm_90")), False, None, "cpu")
    assert flags.problems == ("GPU architectures: a CPU build holds GPU code: torch sm_90; no other file",)
    vision = check(decode(archs_answer(None, {"torchvision/_C.so": ("sm_90", "")})), False, None, "cpu")
    assert vision.problems == ("GPU architectures: a CPU build holds GPU code: torch none; torchvision/_C.so",)


def test_reading_label_is_the_archs_label() -> None:
    assert ArchReading(Archs(parse_archs("sm_90 sm_80").sass, parse_archs("compute_90").ptx)).label == (
        "sm_80 sm_90 compute_90"
    )


# --- in the builder: verification before any tag ----------------------------------------------------------

MATRIX = "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8'}\n"
CU118 = "sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"


@pytest.fixture
def selected(write_matrix: Callable[[str], Path]) -> list[plan.Selected]:
    return plan.select(plan.load(write_matrix(MATRIX)), [])


def build(engine: FakeEngine, selected: list[plan.Selected], tmp_path: Path) -> tuple[list[Outcome], list[str]]:
    said: list[str] = []
    opts = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs")
    outcomes = Builder(engine, opts, None, out=said.append).build(selected)
    return outcomes, said


def test_the_builder_tags_an_image_whose_architectures_are_promised_and_keeps_the_reading(
    selected: list[plan.Selected], tmp_path: Path
) -> None:
    assert selected[0].combination.promised_archs("linux/amd64") == CU118
    engine = FakeEngine(CU118_270)
    outcomes, _ = build(engine, selected, tmp_path)
    assert [o.status for o in outcomes] == ["built", "built"]
    assert [o.cuda_archs for o in outcomes] == [CU118, CU118]


def test_the_builder_tags_nothing_whose_torch_lacks_a_promised_architecture(
    selected: list[plan.Selected], tmp_path: Path
) -> None:
    lacking = {**CU118_ARCHS, "torch_flags": "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"}
    engine = FakeEngine({**CU118_270, "cuda_archs_probe": lacking})
    outcomes, _ = build(engine, selected, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all(f"the tag promises {CU118}" in o.detail and "missing sm_37" in o.detail for o in outcomes)
    assert engine.tagged == [] and engine.temporary() == []


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (archs_answer(CU118, {"torchvision/_C.so": ("sm_80 sm_90", "")}), "torchvision/_C.so holds sm_80 sm_90"),
        (archs_answer(CU118, errors={"torchvision/_C.so": "unreadable"}), "could not read torchvision/_C.so"),
        (archs_answer(None), "torch reports none (torch_flags null)"),
        ({"torch_flags": 7}, "could not read the GPU architectures inside the image: torch_flags is a int"),
    ],
)
def test_the_builder_tags_nothing_whose_companions_or_reading_fail(
    selected: list[plan.Selected], tmp_path: Path, answer: Raw, said: str
) -> None:
    engine = FakeEngine({**CU118_270, "cuda_archs_probe": answer})
    outcomes, _ = build(engine, selected, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all(said in o.detail for o in outcomes)
    assert engine.tagged == [] and engine.temporary() == []


def test_an_uncertain_expectation_is_said_and_the_image_tagged_without_a_label(
    selected: list[plan.Selected], tmp_path: Path
) -> None:
    uncertain = CudaArchsFact(("2.7",), "sm_50 " + CU118.split(" ", 1)[1], "U", ("MOI",))
    combination = dataclasses.replace(selected[0].combination, cuda_archs=(("linux/amd64", uncertain),))
    chosen = [dataclasses.replace(selected[0], combination=combination)]
    engine = FakeEngine(CU118_270)
    outcomes, said = build(engine, chosen, tmp_path)
    assert [o.status for o in outcomes] == ["built", "built"]
    assert any(
        "the knowledge base expects (uncertain: no label)" in line and "not promised sm_37" in line for line in said
    )


def test_a_cpu_image_is_probed_and_holds_none(write_matrix: Callable[[str], Path], tmp_path: Path) -> None:
    matrix = "matrix:\n  include:\n    - {torch: 2.7.0, cuda: cpu, python: '3.12', os: ubuntu24.04}\n"
    cpu = plan.select(plan.load(write_matrix(matrix)), [])
    holds = probe_answer(
        "2.7.0+cpu", python="3.12", os=("ubuntu", "24.04"), torchvision="0.22.0+cpu", torchaudio="2.7.0+cpu"
    )
    outcomes, _ = build(FakeEngine(holds), cpu, tmp_path)
    assert [(o.status, o.cuda_archs) for o in outcomes] == [("built", None)] * len(outcomes)
    gpu_code = {**holds, "cuda_archs_probe": archs_answer("sm_90")}
    outcomes, _ = build(FakeEngine(gpu_code), cpu, tmp_path)
    assert all(o.status == "failed" and "a CPU build holds GPU code" in o.detail for o in outcomes)


def test_read_archs_runs_the_probe_by_name_and_refuses_no_answer() -> None:
    class Runner:
        def __init__(self, output: str) -> None:
            self.output, self.args = output, [""]

        def run_python(self, reference: str, args: list[str]) -> str:
            self.args = args
            return self.output

    runner = Runner('noise\nSMOKE_JSON:{"torch_flags": "sm_90", "files": {}, "errors": {}}\n')
    assert verify.read_archs(runner, "ref").label == "sm_90"
    assert runner.args[0] == "-c" and "SMOKE_JSON" in runner.args[1]
    with pytest.raises(ValueError, match="printed no SMOKE_JSON line"):
        verify.read_archs(Runner("Traceback"), "ref")
    with pytest.raises(ValueError, match="not JSON"):
        verify.read_archs(Runner("SMOKE_JSON:{"), "ref")
