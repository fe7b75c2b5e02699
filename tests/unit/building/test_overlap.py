"""devel builds while runtime's checks run (issue 44), and nothing is tagged out of turn.

Against the fake engine, with events in place of time: runtime's smoke gate waits (an event) for something of
devel's to happen, which can happen only while the two overlap; every build, build end, gate, tag, removal and
lasting line goes into one timeline, and the tests read the order there. No sleeps, no timing: a wait that
times out (the overlap is gone) makes the gate fail, and the test with it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest

from tests.fakes import FakeEngine
from tests.unit.building.test_builder import MATRIX, true_facts
from torchimages.building import verify
from torchimages.building.builder import Builder, SmokeGate
from torchimages.building.outcome import Outcome
from torchimages.building.references import TEMP_REPOSITORY
from torchimages.building.requests import BuildOptions
from torchimages.combination import Combination, Image
from torchimages.engine import BuildRequest
from torchimages.planning import plan

PATIENCE_S = 10  # how long a gate waits for devel before it says the overlap is gone (never in a passing run)


class Timeline:
    """What happened, in order, from every thread: (what, whose) pairs."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def add(self, what: str, whose: str) -> None:
        with self._lock:
            self.events.append((what, whose))

    def first(self, what: str, whose: str) -> int:
        """The index of the first such event (a missing one fails the test)."""
        matches = [n for n, (w, who) in enumerate(self.events) if w == what and whose in who]
        assert matches, f"no {what} of {whose} in {self.events}"
        return matches[0]

    def has(self, what: str, whose: str) -> bool:
        return any(w == what and whose in who for w, who in self.events)


class TimedEngine(FakeEngine):
    """The fake engine, telling the timeline when a build starts and ends, what is tagged and removed."""

    def __init__(self, timeline: Timeline, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.timeline = timeline

    def build(self, request: BuildRequest, log: IO[bytes], cancelled: threading.Event | None = None) -> int:
        self.timeline.add("build", request.target)
        status = super().build(request, log, cancelled)
        self.timeline.add("built", request.target)
        return status

    def tag(self, reference: str, repository: str, tag: str) -> None:
        super().tag(reference, repository, tag)
        self.timeline.add("tag", f"{repository}:{tag}")

    def remove_image(self, reference: str) -> None:
        self.timeline.add("remove", reference)
        super().remove_image(reference)


@pytest.fixture
def selection(write_matrix: Callable[[str], Path]) -> list[plan.Selected]:
    return plan.select(plan.load(write_matrix(MATRIX)), [])[:1]


def build(
    engine: FakeEngine,
    selection: list[plan.Selected],
    tmp_path: Path,
    gate: SmokeGate,
    timeline: Timeline,
    cancelled: threading.Event | None = None,
) -> tuple[Outcome, Outcome]:
    """(devel's outcome, runtime's), each lasting line in the timeline."""
    options = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs")
    said = lambda line: timeline.add("line", line)  # noqa: E731
    devel, runtime = Builder(engine, options, gate, out=said, cancelled=cancelled).build(selection)
    assert (devel.image.flavor, runtime.image.flavor) == ("devel", "runtime")
    return devel, runtime


def tags_of(engine: FakeEngine, flavor: str) -> list[str]:
    return [name for name in engine.tagged if name.endswith(f"-{flavor}")]


@pytest.mark.parametrize("runtime_passes", [True, False])
def test_devel_builds_during_runtimes_checks_and_is_tagged_only_after_runtimes_outcome(
    selection: list[plan.Selected], tmp_path: Path, runtime_passes: bool
) -> None:
    """runtime's smoke gate ends only once devel's own checks ran: devel was built meanwhile. devel's tag waits
    for runtime's outcome; neither is tagged before its own checks passed. A runtime refused by its checks still
    carries a verified devel (as before the overlap: devel is verified on its own), tagged after that refusal."""
    timeline = Timeline()
    engine = TimedEngine(timeline, true_facts(selection[0].combination))
    devel_checked = threading.Event()

    def gate(combination: Combination, image: Image, reference: str, facts: verify.Facts, *_: object) -> list[str]:
        timeline.add("checks", image.flavor)
        assert tags_of(engine, image.flavor) == [], "tagged before its own checks passed"
        if image.flavor == "devel":
            devel_checked.set()
            return []
        if not devel_checked.wait(PATIENCE_S):
            return ["devel's checks did not run while runtime's ran: no overlap"]
        timeline.add("checks ended", image.flavor)
        return [] if runtime_passes else ["runtime's smoke suites failed"]

    devel, runtime = build(engine, selection, tmp_path, gate, timeline)
    assert (devel.status, runtime.status) == ("built", "built" if runtime_passes else "failed")
    assert timeline.first("build", "devel") < timeline.first("checks ended", "runtime")
    runtime_said = timeline.first("line", f"{runtime.image.own_tag}: {runtime.status} in")
    assert timeline.first("checks ended", "runtime") < runtime_said < timeline.first("tag", "-devel")
    assert tags_of(engine, "devel") and bool(tags_of(engine, "runtime")) == runtime_passes
    assert engine.temporary() == []


def test_the_held_runtime_image_is_removed_only_after_devels_build_ended(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    timeline = Timeline()
    engine = TimedEngine(timeline, true_facts(selection[0].combination))
    devel_checked = threading.Event()

    def gate(combination: Combination, image: Image, reference: str, facts: verify.Facts, *_: object) -> list[str]:
        if image.flavor == "devel":
            devel_checked.set()
        elif not devel_checked.wait(PATIENCE_S):
            return ["no overlap"]
        return []

    devel, runtime = build(engine, selection, tmp_path, gate, timeline)
    (held,) = engine.held
    assert held.startswith(TEMP_REPOSITORY + "/") and (devel.status, runtime.status) == ("built", "built")
    assert timeline.first("built", "devel") < timeline.first("remove", held)
    assert timeline.first("line", f"{devel.image.own_tag}: built in") < timeline.first("remove", held)


def test_an_interrupt_during_runtimes_checks_leaves_a_waiting_devel_untagged(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    """devel's checks passed and it waits for runtime's outcome; the interrupt comes during runtime's checks:
    neither is tagged, every temporary reference is removed (the held one after devel's build ended)."""
    timeline = Timeline()
    engine = TimedEngine(timeline, true_facts(selection[0].combination))
    cancelled, devel_checked = threading.Event(), threading.Event()

    def gate(combination: Combination, image: Image, reference: str, facts: verify.Facts, *_: object) -> list[str]:
        if image.flavor == "devel":
            devel_checked.set()
            return []
        if not devel_checked.wait(PATIENCE_S):
            return ["no overlap"]
        cancelled.set()  # the signal arrives while runtime's suites run
        return []

    devel, runtime = build(engine, selection, tmp_path, gate, timeline, cancelled)
    assert (devel.status, runtime.status) == ("interrupted", "interrupted")
    assert devel.detail == "interrupted verified, not tagged; not tagged"
    assert engine.tagged == [] and engine.temporary() == []
    (held,) = engine.held
    assert timeline.first("built", "devel") < timeline.first("remove", held)


def test_an_interrupt_during_devels_build_leaves_runtime_untagged_though_its_checks_pass(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    """The interrupt comes while devel builds and runtime's checks run: runtime's checks pass, and it is not
    tagged all the same; devel is interrupted during its build; the held runtime image outlives devel's build."""
    timeline = Timeline()
    engine = TimedEngine(timeline, true_facts(selection[0].combination))
    cancelled, devel_building = threading.Event(), threading.Event()

    def interrupt_in_devel(request: BuildRequest) -> None:
        if request.target == "devel":
            cancelled.set()
            devel_building.set()

    engine.on_build = interrupt_in_devel

    def gate(combination: Combination, image: Image, reference: str, facts: verify.Facts, *_: object) -> list[str]:
        return [] if devel_building.wait(PATIENCE_S) else ["no overlap"]

    devel, runtime = build(engine, selection, tmp_path, gate, timeline, cancelled)
    assert (devel.status, runtime.status) == ("interrupted", "interrupted")
    assert devel.detail == "interrupted during the build; not tagged"
    assert engine.tagged == [] and engine.temporary() == []
    (held,) = engine.held
    assert timeline.first("built", "devel") < timeline.first("remove", held)


def test_a_runtime_whose_checks_crash_lets_no_devel_be_tagged(selection: list[plan.Selected], tmp_path: Path) -> None:
    """An error no rule expects in runtime's checks ends the build with it, as before the overlap: devel, its checks
    passed and waiting, is not tagged after it; the temporary references are removed."""
    timeline = Timeline()
    engine = TimedEngine(timeline, true_facts(selection[0].combination))
    devel_checked = threading.Event()

    def gate(combination: Combination, image: Image, reference: str, facts: verify.Facts, *_: object) -> list[str]:
        if image.flavor == "devel":
            devel_checked.set()
            return []
        devel_checked.wait(PATIENCE_S)
        raise RuntimeError("the gate broke")

    with pytest.raises(RuntimeError, match="the gate broke"):
        build(engine, selection, tmp_path, gate, timeline)
    assert engine.tagged == [] and engine.temporary() == []


def test_devels_security_gate_starts_after_runtimes_ended(selection: list[plan.Selected], tmp_path: Path) -> None:
    """devel's layer scan takes runtime's layers from the scan's cache (docs/benchmarks.md): it starts only once
    runtime's gate ended, though devel builds and is verified while runtime's checks run."""
    from torchimages.security.gate import Verdict

    timeline = Timeline()
    engine = TimedEngine(timeline, true_facts(selection[0].combination))
    devel_checked = threading.Event()

    def security(image: Image, reference: str, secrets: object) -> Verdict:
        timeline.add("gate", image.flavor)
        if image.flavor == "runtime":
            devel_built = threading.Event()
            for _ in range(PATIENCE_S * 100):  # give devel every chance to start its gate too early
                if timeline.has("built", "devel"):
                    devel_built.set()
                    break
                threading.Event().wait(0.01)
            timeline.add("gate ended", image.flavor)
        return Verdict((), ())

    def smoke(combination: Combination, image: Image, reference: str, facts: verify.Facts, *_: object) -> list[str]:
        if image.flavor == "devel":
            devel_checked.set()
            return []
        return [] if devel_checked.wait(PATIENCE_S) else ["devel's checks did not run while runtime's ran"]

    options = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs")
    said = lambda line: timeline.add("line", line)  # noqa: E731
    devel, runtime = Builder(engine, options, smoke, out=said, security_gate=security).build(selection)
    assert (devel.status, runtime.status) == ("built", "built")
    assert timeline.first("build", "devel") < timeline.first("gate ended", "runtime")
    assert timeline.first("gate ended", "runtime") < timeline.first("gate", "devel")
