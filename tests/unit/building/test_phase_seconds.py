"""Each image's checks phase by phase (issue 44): verification, the security gate and the smoke suites each have their
own seconds in the outcome (then the report's durations), measured on a clock that only the test moves, by amounts
written here: one phase's time is never counted in another's, a failed phase is still measured, and a phase that did
not run has none."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes import FakeEngine
from tests.unit.building.test_builder import MATRIX, true_facts
from tests.unit.building.test_progress import Recorder
from torchimages.building import builder, overlap
from torchimages.building.builder import Builder
from torchimages.building.outcome import Outcome
from torchimages.building.overlap import SmokeStart
from torchimages.building.requests import BuildOptions
from torchimages.combination import Image
from torchimages.planning import plan
from torchimages.security.gate import Verdict

PROBE_S = 7.0  # the one probe run of verification in the image (versions and GPU architectures together)
GATE_S = 20.0  # the security gate
SMOKE_S = 300.0  # the smoke suites
GPU_WAIT_S = 50.0  # the smoke gate's wait for the GPUs (another image's suites hold them): not smoke time
GATE_WAIT_S = 40.0  # devel's wait for runtime's security gate to end: not devel's gate time


class Clock(threading.local):
    """builder's `time`: monotonic() moves only when the test says, on each thread by itself (devel's build and
    checks run beside runtime's, overlap.py: a shared clock would hand one image's seconds to the other)."""

    now = 1000.0

    def monotonic(self) -> float:
        return self.now


class ProbingEngine(FakeEngine):
    """A fake engine on which the probe run of the image takes PROBE_S seconds of the clock."""

    def __init__(self, clock: Clock, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.clock = clock

    def run_python(self, reference: str, args: list[str]) -> str:
        self.clock.now += PROBE_S
        return super().run_python(reference, args)


def built(
    monkeypatch: pytest.MonkeyPatch,
    write_matrix: Callable[[str], Path],
    tmp_path: Path,
    smoke_problems: list[str] | None,
    gate: bool = True,
    renderer: Recorder | None = None,
    together: bool = False,
) -> list[Outcome]:
    clock = Clock()
    monkeypatch.setattr(builder, "time", clock)
    waited_for_gate, devel_waits = [], threading.Event()

    def wait_for_runtimes_gate(event: threading.Event) -> None:  # devel's before_gate, on devel's own clock
        clock.now += GATE_WAIT_S
        devel_waits.set()
        waited_for_gate.append(event.wait())

    monkeypatch.setattr(overlap, "_wait", wait_for_runtimes_gate)
    selected = plan.select(plan.load(write_matrix(MATRIX)), ["2.7.1-cuda11.8"])
    engine = ProbingEngine(clock, true_facts(selected[0].combination))

    def security(image: Image, reference: str, secrets: object) -> Verdict:
        if image.flavor == "runtime":  # runtime's gate ends only once devel waits for it
            devel_waits.wait(timeout=10)
        clock.now += GATE_S
        return Verdict((), ())

    def smoke(combination: object, image: object, reference: str, facts: object, start: SmokeStart) -> list[str]:
        start.waiting()
        clock.now += GPU_WAIT_S  # the GPUs are another image's meanwhile
        start.started()
        clock.now += SMOKE_S
        return list(smoke_problems or [])

    options = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs", gates_together=together)
    gates = {"smoke_gate": smoke if smoke_problems is not None else None, "security_gate": security if gate else None}
    found = Builder(engine, options, out=lambda _: None, renderer=renderer, **gates).build(selected)  # type: ignore[arg-type]
    assert waited_for_gate == ([True] if gate else []), "devel waits for runtime's gate once (overlap.py)"
    return found


def test_verify_gate_and_smoke_each_have_their_own_seconds(
    monkeypatch: pytest.MonkeyPatch, write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    outcomes = built(monkeypatch, write_matrix, tmp_path, smoke_problems=[])
    assert [o.status for o in outcomes] == ["built", "built"]
    for o in outcomes:
        # verification probes the versions and the GPU architectures: two probes, nothing of the gates
        assert (o.verify_seconds, o.gate_seconds, o.smoke_seconds) == (PROBE_S, GATE_S, SMOKE_S), o
    runtime, devel = sorted(outcomes, key=lambda o: o.image.flavor != "runtime")
    assert runtime.test_seconds == PROBE_S + GATE_S + GPU_WAIT_S + SMOKE_S  # the checks' wall time, waits included
    assert devel.test_seconds == PROBE_S + GATE_WAIT_S + GATE_S + GPU_WAIT_S + SMOKE_S


def test_waits_are_said_as_waiting_not_as_the_phase(
    monkeypatch: pytest.MonkeyPatch, write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    recorder = Recorder()
    outcomes = built(monkeypatch, write_matrix, tmp_path, smoke_problems=[], renderer=recorder)
    for o in outcomes:
        stages = [e.stage for e in recorder.events if e.image == o.image.tag and e.stage != "waits for runtime"]
        checks = list(dict.fromkeys(stages[stages.index("verify") :]))
        waits = ["waiting for runtime's security gate"] if o.image.flavor == "devel" else []
        assert checks == ["verify", *waits, "security", "smoke", "waiting for the GPUs (another image's smoke suites)"]
        assert stages[-1] == "smoke", stages  # the suites run once the GPUs are held


def test_a_failed_smoke_gate_is_measured_too(
    monkeypatch: pytest.MonkeyPatch, write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    outcomes = built(monkeypatch, write_matrix, tmp_path, smoke_problems=["test_cpu.py::test_matmul failed"])
    assert {o.status for o in outcomes} == {"failed"}
    assert {(o.verify_seconds, o.gate_seconds, o.smoke_seconds) for o in outcomes} == {(PROBE_S, GATE_S, SMOKE_S)}


def test_a_phase_that_did_not_run_has_no_seconds(
    monkeypatch: pytest.MonkeyPatch, write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    outcomes = built(monkeypatch, write_matrix, tmp_path, smoke_problems=None, gate=False)
    assert [o.status for o in outcomes] == ["built", "built"]
    assert {(o.verify_seconds, o.gate_seconds, o.smoke_seconds) for o in outcomes} == {(PROBE_S, None, None)}


def test_with_the_gates_together_each_keeps_its_seconds_and_the_checks_take_the_longer(
    monkeypatch: pytest.MonkeyPatch, write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    """The default (BuildOptions.gates_together): the security gate runs in a thread of its own beside the smoke
    gate, each on its own clock here; each phase's seconds are its own, and the checks' wall time is verification
    and then the longer of the two (the smoke suites, waits included: 350 s against devel's 40 + 20)."""
    recorder = Recorder()
    outcomes = built(monkeypatch, write_matrix, tmp_path, smoke_problems=[], renderer=recorder, together=True)
    assert [o.status for o in outcomes] == ["built", "built"]
    for o in outcomes:
        assert (o.verify_seconds, o.gate_seconds, o.smoke_seconds) == (PROBE_S, GATE_S, SMOKE_S), o
        assert o.test_seconds == PROBE_S + GPU_WAIT_S + SMOKE_S, o
        stages = [e.stage for e in recorder.events if e.image == o.image.tag and e.stage != "waits for runtime"]
        checks = list(dict.fromkeys(stages[stages.index("verify") :]))
        assert checks[:2] == ["verify", "security, smoke"], checks
        assert stages[-1] == "security, smoke", stages


def test_the_gates_run_together_unless_told_otherwise() -> None:
    assert BuildOptions(images_dir=Path("images"), log_dir=Path("logs")).gates_together is True
