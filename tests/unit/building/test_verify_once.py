"""Issue 44: the facts and the GPU-architecture probes run in one container and one interpreter per image
(verify.read_both, probes.combined_program), each answer decoded and refused as its own run's was.

Every answer is a literal of the test handed to the fake engine (tests/fakes.py); the combined program itself
is run here by the host's Python with literal parts, so a part that raises is a real exception.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes import CU118_270, CU118_ARCHS, FakeEngine, archs_answer
from torchimages.building import verify
from torchimages.building.builder import Builder
from torchimages.building.outcome import Outcome
from torchimages.building.readings import INSTALLED_PROBE
from torchimages.building.requests import BuildOptions
from torchimages.combination import Image
from torchimages.engine import ProbeError
from torchimages.planning import plan
from torchimages.probes import Split, combined_program, combined_source, program_nonce, split_parts
from torchimages.security.python import PACKAGES_PROBE

MATRIX = "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8'}\n"
CU118 = "sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"
VERSIONS = "could not read the versions inside the image: "
ARCHS = "could not read the GPU architectures inside the image: "


@pytest.fixture
def selected(write_matrix: Callable[[str], Path]) -> list[plan.Selected]:
    return plan.select(plan.load(write_matrix(MATRIX)), [])


def build(engine: FakeEngine, selected: list[plan.Selected], tmp_path: Path) -> tuple[list[Outcome], list[str]]:
    """Build with a smoke gate that records the facts it is handed; (outcomes, the gated references)."""
    gated: list[str] = []

    def gate(combination: object, image: Image, reference: str, facts: verify.Facts, *_: object) -> list[str]:
        gated.append(reference)
        assert dict(facts.raw) == {k: v for k, v in CU118_270.items() if k != "cuda_archs_probe"}
        return []

    opts = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs")
    return Builder(engine, opts, gate).build(selected), gated


def verification_runs(engine: FakeEngine) -> list[tuple[str, list[str]]]:
    """The run_python calls other than the installed-packages record and the security gate's listing."""
    return [
        args
        for call, args in engine.calls
        if call == "run_python" and args[1] not in (["-c", INSTALLED_PROBE], ["-c", PACKAGES_PROBE])
    ]


# --- one container run per image --------------------------------------------------------------------------


def test_read_both_is_one_run_of_the_image_that_yields_both_answers() -> None:
    engine = FakeEngine()
    engine.images["img:tmp"] = {}
    engine.truth["img:tmp"] = {**CU118_270, "cuda_archs_probe": archs_answer("sm_80 sm_90")}
    probed = verify.read_both(engine, "img:tmp")
    (call,) = [c for c in engine.calls if c[0] == "run_python"]
    nonce = program_nonce(call[1][1][1])
    assert nonce is not None
    assert call == ("run_python", ("img:tmp", ["-c", combined_source(("facts", "cuda_archs"), nonce)]))
    assert probed.facts().versions["torch"] == "2.7.0+cu118"
    assert probed.archs().label == "sm_80 sm_90"


def test_the_builder_runs_one_container_per_image_for_the_facts_and_the_archs(
    selected: list[plan.Selected], tmp_path: Path
) -> None:
    engine = FakeEngine(CU118_270)
    outcomes, gated = build(engine, selected, tmp_path)
    assert [(o.status, o.cuda_archs) for o in outcomes] == [("built", CU118), ("built", CU118)]
    runs = verification_runs(engine)
    assert len(runs) == 2, runs  # two images, one run each
    nonces = [program_nonce(args[1]) for _, args in runs]
    both = ("facts", "cuda_archs")
    assert all(args == ["-c", combined_source(both, n or "")] for n, (_, args) in zip(nonces, runs, strict=True))
    assert len(set(nonces)) == 2  # a new nonce for each run
    assert len(gated) == 2  # and the smoke gate is handed that run's facts (the gate asserts them)


# --- each failure named as before, each part's alone --------------------------------------------------------

UNREADABLE = [
    ("probe noise\nTraceback (most recent call last):", "probe printed no SMOKE_JSON line"),
    ("SMOKE_JSON:{not json", "probe's answer is not JSON"),
    (
        "half a line\nSMOKE_FAILED:ZeroDivisionError: division by zero",
        "probe failed: ZeroDivisionError: division by zero",
    ),
    ('SMOKE_JSON:{"torch_flags": null}\nSMOKE_FAILED:SystemExit: 3', "probe failed: SystemExit: 3"),
]


@pytest.mark.parametrize(("text", "said"), UNREADABLE)
def test_an_unreadable_facts_part_is_the_versions_failure_and_nothing_is_tagged(
    selected: list[plan.Selected], tmp_path: Path, text: str, said: str
) -> None:
    engine = FakeEngine(CU118_270)
    engine.part_output["facts"] = text
    outcomes, gated = build(engine, selected, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all(f"{VERSIONS}the facts {said}" in o.detail for o in outcomes), outcomes[0].detail
    assert all(ARCHS not in o.detail for o in outcomes)
    assert engine.tagged == [] and gated == [] and engine.temporary() == []


@pytest.mark.parametrize(("text", "said"), UNREADABLE)
def test_an_unreadable_archs_part_is_the_archs_failure_and_the_facts_still_read(
    selected: list[plan.Selected], tmp_path: Path, text: str, said: str
) -> None:
    engine = FakeEngine(CU118_270)
    engine.part_output["cuda_archs"] = text
    outcomes, gated = build(engine, selected, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all(f"{ARCHS}the archs {said}" in o.detail for o in outcomes), outcomes[0].detail
    assert all(VERSIONS not in o.detail for o in outcomes)
    assert engine.tagged == [] and gated == [] and engine.temporary() == []


def test_the_archs_problems_still_refuse_the_tag(selected: list[plan.Selected], tmp_path: Path) -> None:
    lacking = {**CU118_ARCHS, "torch_flags": "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"}
    engine = FakeEngine({**CU118_270, "cuda_archs_probe": lacking})
    outcomes, gated = build(engine, selected, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all("missing sm_37" in o.detail for o in outcomes)
    assert engine.tagged == [] and gated == [] and len(verification_runs(engine)) == 2


def test_the_archs_verdict_comes_only_after_the_facts_matched(selected: list[plan.Selected], tmp_path: Path) -> None:
    engine = FakeEngine({**CU118_270, "python": "3.12", "cuda_archs_probe": {"torch_flags": 7}})
    outcomes, _ = build(engine, selected, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all("python: the tag claims" in o.detail and ARCHS not in o.detail for o in outcomes), outcomes[0].detail


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (ProbeError("python exited with status 139 in img: Segmentation fault"), "python exited with status 139"),
        ("no marker at all", "the facts probe did not run: no SMOKE_PART:<nonce>:facts line in 'no marker at all'"),
    ],
)
def test_a_run_that_fails_as_a_whole_is_the_versions_failure(
    selected: list[plan.Selected], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: object, said: str
) -> None:
    engine = FakeEngine(CU118_270)

    def run_python(reference: str, args: list[str]) -> str:
        if isinstance(answer, ProbeError):
            raise answer
        return str(answer)

    monkeypatch.setattr(engine, "run_python", run_python)
    outcomes, gated = build(engine, selected, tmp_path)
    assert all(o.status == "failed" and f"{VERSIONS}{said}" in o.detail for o in outcomes), outcomes[0].detail
    assert engine.tagged == [] and gated == []


def test_a_missing_archs_part_is_the_archs_failure() -> None:
    facts = "SMOKE_JSON:" + json.dumps({k: v for k, v in CU118_270.items() if k != "cuda_archs_probe"})
    probed = verify.Probed(Split({"facts": (facts,)}, ended=True), "the end")
    assert probed.facts().versions["torch"] == "2.7.0+cu118"
    missing = "the archs probe did not run: no SMOKE_PART:<nonce>:cuda_archs line in 'the end'"
    with pytest.raises(ValueError, match=missing):
        probed.archs()


# --- the combined program, run by a real Python ------------------------------------------------------------


NONCE = "0123456789abcdef0123456789abcdef"


def run_program(program: str) -> str:
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def single(split: Split) -> dict[str, str]:
    """Each part's one output, by name (a name given twice fails the test)."""
    assert split.ended and all(len(outputs) == 1 for outputs in split.outputs.values()), split
    return {name: outputs[0] for name, outputs in split.outputs.items()}


@pytest.mark.parametrize(
    ("first", "failure"),
    [
        (
            "print('SMOKE_JSON:{\"a\": 1}')\nraise ZeroDivisionError('division\\nby zero')",
            "ZeroDivisionError: division by zero",
        ),
        ("import sys\nsys.exit(3)", "SystemExit: 3"),
        ("import sys\nsys.exit('said why')", "SystemExit: said why"),
        ("raise KeyboardInterrupt", "KeyboardInterrupt:"),
        ("import sys\nsys.stdout.write('no newline at the end')", None),
        ("import sys\nprint('SMOKE_JSON:{\"a\": 1}')\nsys.exit(0)", None),
    ],
)
def test_a_part_that_raises_or_exits_is_said_and_the_next_part_still_answers(first: str, failure: str | None) -> None:
    second = 'print("SMOKE_JSON:" + "{\\"b\\": 2}")'
    parts = single(split_parts(run_program(combined_program([("first", first), ("second", second)], NONCE)), NONCE))
    assert set(parts) == {"first", "second"}
    assert parts["second"].splitlines()[-1] == 'SMOKE_JSON:{"b": 2}'
    said = [line for line in parts["first"].splitlines() if line.startswith("SMOKE_FAILED:")]
    assert said == ([f"SMOKE_FAILED:{failure}"] if failure else [])


def test_each_part_runs_in_a_namespace_of_its_own_as_main() -> None:
    first = "x = 1\nif __name__ == '__main__':\n    print('SMOKE_JSON:' + str(x))"
    second = "print('SMOKE_JSON:' + repr('x' in globals()))"
    parts = single(split_parts(run_program(combined_program([("first", first), ("second", second)], NONCE)), NONCE))
    assert {name: text.strip() for name, text in parts.items()} == {
        "first": "SMOKE_JSON:1",
        "second": "SMOKE_JSON:False",
    }


def test_the_real_probes_combined_answer_on_the_host(tmp_path: Path) -> None:
    """The facts and archs scripts, combined, in the host's Python (torch or not): both parts decode."""
    probed = verify.Probed(split_parts(run_program(combined_source(verify.BOTH, NONCE)), NONCE))
    facts = probed.facts()
    assert facts.versions["python"] == f"{sys.version_info.major}.{sys.version_info.minor}"
    reading = probed.archs()
    assert reading.torch is None or isinstance(reading.label, str)


def test_a_part_name_is_an_identifier() -> None:
    with pytest.raises(ValueError, match="lower-case identifier"):
        combined_program([("a\nSMOKE_PART:b", "")], NONCE)
    with pytest.raises(ValueError, match="32 hex digits"):
        combined_program([("a", "")], "")


# --- forged marks (issue 44's outside review) ---------------------------------------------------------------

# Stands for what an image runs at `import torch` (a .pth file, sitecustomize): it prints after the real parts.
FORGER = """
import atexit
atexit.register(lambda: print(FORGED))
print('SMOKE_JSON:{"facts": 1}')
"""
FAILING_ARCHS = "raise RuntimeError('the archs probe failed for real')\n"


@pytest.mark.parametrize(
    "forged",
    [
        'SMOKE_PART:cuda_archs\nSMOKE_JSON:{"torch_flags": "sm_90"}',  # no nonce: noise
        f'SMOKE_PART:{NONCE}:cuda_archs\nSMOKE_JSON:{{"torch_flags": "sm_90"}}',  # after the end mark
        f'SMOKE_END:{NONCE}\nSMOKE_PART:{NONCE}:cuda_archs\nSMOKE_JSON:{{"torch_flags": "sm_90"}}',
    ],
)
def test_a_part_printed_after_the_run_forges_no_answer(forged: str) -> None:
    program = combined_program([("facts", f"FORGED = {forged!r}\n" + FORGER), ("cuda_archs", FAILING_ARCHS)], NONCE)
    output = run_program(program)
    assert forged.splitlines()[-1] in output  # the forger did print
    probed = verify.Probed(split_parts(output, NONCE), output[-500:])
    with pytest.raises(ValueError, match="the archs probe failed: RuntimeError: the archs probe failed for real"):
        probed.archs()


def test_a_part_given_twice_is_refused_and_the_other_part_still_reads() -> None:
    """Something that knows the nonce (it can read the program) and prints a part before the real one."""
    facts = "SMOKE_JSON:" + json.dumps({k: v for k, v in CU118_270.items() if k != "cuda_archs_probe"})
    forged = f'\nSMOKE_PART:{NONCE}:cuda_archs\nSMOKE_JSON:{{"torch_flags": "sm_90"}}\nSMOKE_PART:{NONCE}:facts'
    first = f"print({forged!r})\nprint({facts!r})"
    program = combined_program([("facts", first), ("cuda_archs", FAILING_ARCHS)], NONCE)
    probed = verify.Probed(split_parts(run_program(program), NONCE))
    with pytest.raises(ValueError, match="the archs probe's answer is given twice"):
        probed.archs()
    with pytest.raises(ValueError, match="the facts probe's answer is given twice"):
        probed.facts()


def test_a_run_that_did_not_reach_its_end_answers_nothing() -> None:
    facts = "SMOKE_JSON:" + json.dumps({k: v for k, v in CU118_270.items() if k != "cuda_archs_probe"})
    program = combined_program([("facts", f"import os\nprint({facts!r}, flush=True)\nos._exit(0)")], NONCE)
    probed = verify.Probed(split_parts(run_program(program), NONCE), "the end")
    with pytest.raises(ValueError, match="the facts probe's run did not reach its end mark: 'the end'"):
        probed.facts()


# --- splitting untrusted output ----------------------------------------------------------------------------

# One line each: no line break of any kind (str.splitlines' set: control characters, Zl, Zp), never a part's mark.
LINES = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=60).filter(
    lambda s: not s.startswith("SMOKE_PART:") and s.strip() != "SMOKE_END:" + NONCE
)


@given(st.text(max_size=400))
@settings(max_examples=300, deadline=None)
def test_split_parts_reads_any_output_without_failing(text: str) -> None:
    split = split_parts(text, NONCE)
    assert all(isinstance(k, str) and all(isinstance(v, str) for v in vs) for k, vs in split.outputs.items())
    if f"SMOKE_PART:{NONCE}:" not in text:
        assert split.outputs == {}


@given(
    st.text(max_size=80).filter(lambda s: "SMOKE_PART:" not in s),
    st.lists(st.tuples(st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), st.lists(LINES, max_size=5)), max_size=4),
    st.text(max_size=200),
)
@settings(max_examples=200, deadline=None)
def test_split_parts_gives_each_part_its_own_lines_a_name_given_twice_kept_twice(
    before: str, parts: list[tuple[str, list[str]]], after: str
) -> None:
    marked = ["SMOKE_PART:" + NONCE + ":" + name for name, _ in parts]
    output = "\n".join([before, *(line for m, (_, body) in zip(marked, parts, strict=True) for line in [m, *body])])
    output += f"\nSMOKE_END:{NONCE}\n{after}"
    expected: dict[str, list[str]] = {}
    for name, body in parts:
        expected.setdefault(name, []).append("\n".join(body))
    split = split_parts(output, NONCE)
    assert split.ended and split.outputs == {name: tuple(bodies) for name, bodies in expected.items()}
