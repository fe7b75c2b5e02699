"""`gates_together` (issue 44): an image's security gate and smoke gate run at the same time, both only after
verification passed; the tag waits for both, and the problems of both are said. On by default.

Against the fake engine; the gates meet at a barrier (one per image) that only two gates running at once can
pass: run one after the other, the barrier breaks after a patience no passing run waits for, and the gate says so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes import FakeEngine
from tests.unit.building.test_builder import MATRIX, true_facts
from torchimages.building import verify
from torchimages.building.builder import Builder
from torchimages.building.outcome import Outcome
from torchimages.building.requests import BuildOptions
from torchimages.combination import Combination, Image
from torchimages.engine import EngineError
from torchimages.planning import plan
from torchimages.security.gate import Verdict
from torchimages.security.model import CheckResult

PATIENCE_S = 10
SECRET = "secrets: layer 2 of 9 (sha256:ab12): /root/.netrc: credentials"
SMOKE = "FAILED test_import_is_silent"


@pytest.fixture
def selection(write_matrix: Callable[[str], Path]) -> list[plan.Selected]:
    return plan.select(plan.load(write_matrix(MATRIX)), [])[:1]


class Gates:
    """Both gates of every image: each waits at its image's barrier (both gates there at once), records that it
    ran and what was tagged then, and answers the problems it is told to."""

    def __init__(self, engine: FakeEngine, security: tuple[str, ...] = (), smoke: tuple[str, ...] = ()) -> None:
        self.engine, self.security_problems, self.smoke_problems = engine, security, smoke
        self.barriers = {flavor: threading.Barrier(2, timeout=PATIENCE_S) for flavor in ("runtime", "devel")}
        self.ran: list[tuple[str, str]] = []

    def _meet(self, image: Image, gate: str) -> list[str]:
        self.ran.append((gate, image.flavor))
        assert not any(name.endswith(f"-{image.flavor}") for name in self.engine.tagged), "tagged before its gates"
        try:
            self.barriers[image.flavor].wait()
        except threading.BrokenBarrierError:
            return [f"the {gate} gate ran alone: the gates did not run at the same time"]
        return []

    def security(self, image: Image, reference: str, secrets: tuple[tuple[str, bytes], ...]) -> Verdict:
        problems = (*self._meet(image, "security"), *self.security_problems)
        return Verdict((CheckResult("secrets", "failed" if problems else "passed", problems),), problems)

    def smoke(
        self, combination: Combination, image: Image, reference: str, facts: verify.Facts, *_: object
    ) -> list[str]:
        return [*self._meet(image, "smoke"), *self.smoke_problems]


def build(engine: FakeEngine, selection: list[plan.Selected], tmp_path: Path, gates: Gates) -> list[Outcome]:
    options = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs", gates_together=True)
    builder = Builder(engine, options, gates.smoke, out=lambda _: None, security_gate=gates.security)
    return builder.build(selection)


def test_the_two_gates_run_at_once_and_the_tag_waits_for_both(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = FakeEngine(true_facts(selection[0].combination))
    gates = Gates(engine)
    outcomes = build(engine, selection, tmp_path, gates)
    assert [o.status for o in outcomes] == ["built", "built"], [o.detail for o in outcomes]
    assert sorted(gates.ran) == sorted((g, f) for g in ("security", "smoke") for f in ("runtime", "devel"))
    assert {name.rsplit("-", 1)[-1] for name in engine.tagged} == {"runtime", "devel"}
    assert all(o.security for o in outcomes) and engine.temporary() == []


def test_the_problems_of_both_gates_are_said_and_nothing_is_tagged(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = FakeEngine(true_facts(selection[0].combination))
    outcomes = build(engine, selection, tmp_path, Gates(engine, security=(SECRET,), smoke=(SMOKE,)))
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all(SECRET in o.detail and SMOKE in o.detail for o in outcomes)
    assert engine.tagged == [] and engine.temporary() == []


@pytest.mark.parametrize("failing", ["security", "smoke"])
def test_either_gate_alone_refusing_leaves_no_tag(selection: list[plan.Selected], tmp_path: Path, failing: str) -> None:
    engine = FakeEngine(true_facts(selection[0].combination))
    gates = Gates(engine, security=(SECRET,)) if failing == "security" else Gates(engine, smoke=(SMOKE,))
    outcomes = build(engine, selection, tmp_path, gates)
    assert [o.status for o in outcomes] == ["failed", "failed"] and engine.tagged == []


def test_neither_gate_runs_before_verification_passed(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = FakeEngine({**true_facts(selection[0].combination), "cudnn": 90501})
    gates = Gates(engine)
    outcomes = build(engine, selection, tmp_path, gates)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all("cudnn: the tag claims 9.1.0.70, the image has 9.5.1" in o.detail for o in outcomes)
    assert gates.ran == [] and engine.tagged == []


class Failing(Gates):
    """Gates of which one ends on an engine error (after meeting the other at the barrier)."""

    def __init__(self, engine: FakeEngine, raising: str, **problems: tuple[str, ...]) -> None:
        super().__init__(engine, **problems)
        self.raising = raising

    def _meet(self, image: Image, gate: str) -> list[str]:
        met = super()._meet(image, gate)
        if self.raising in (gate, "both"):
            raise EngineError(f"the engine went away during the {gate} gate")
        return met


@pytest.mark.parametrize(("raising", "other"), [("security", "smoke"), ("smoke", "security")])
def test_an_engine_error_of_one_gate_is_said_beside_the_other_gates_problems(
    selection: list[plan.Selected], tmp_path: Path, raising: str, other: str
) -> None:
    engine = FakeEngine(true_facts(selection[0].combination))
    problems = {"security": (SECRET,)} if other == "security" else {"smoke": (SMOKE,)}
    outcomes = build(engine, selection, tmp_path, Failing(engine, raising, **problems))
    said = SECRET if other == "security" else SMOKE
    assert [o.status for o in outcomes] == ["failed", "failed"]
    for o in outcomes:
        error = f"Docker engine error in the {raising} gate: the engine went away during the {raising} gate"
        assert said in o.detail and error in o.detail, o.detail
    assert engine.tagged == [] and engine.temporary() == []


@pytest.mark.parametrize("raising", ["security", "smoke"])
def test_an_engine_error_of_one_gate_alone_fails_the_image_as_before(
    selection: list[plan.Selected], tmp_path: Path, raising: str
) -> None:
    engine = FakeEngine(true_facts(selection[0].combination))
    outcomes = build(engine, selection, tmp_path, Failing(engine, raising))
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all(
        o.detail.startswith(f"Docker engine error: the engine went away during the {raising} gate") for o in outcomes
    ), [o.detail for o in outcomes]
    assert engine.tagged == []


def test_two_engine_errors_fail_the_image_naming_each_gate(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = FakeEngine(true_facts(selection[0].combination))
    outcomes = build(engine, selection, tmp_path, Failing(engine, "both"))
    assert [o.status for o in outcomes] == ["failed", "failed"]
    for o in outcomes:
        assert o.detail.startswith(
            "Docker engine error: the security gate: the engine went away during the security gate; "
            "the smoke gate: the engine went away during the smoke gate"
        ), o.detail
    assert engine.tagged == []
