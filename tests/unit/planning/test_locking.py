"""Work that moved out of the command line, tested at its new home: `lock --bases` (planning.locking), the
views of a plan (planning.views) and signal handling (building.interrupts)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.planning.test_bases import OS_DIGEST, TOOLKIT, TOOLKIT_DIGEST, UBUNTU, write_lock
from torchimages import registry
from torchimages.building import interrupts
from torchimages.planning import bases, locking, plan, views

SERVED = {"ubuntu:24.04": OS_DIGEST, TOOLKIT: TOOLKIT_DIGEST}


@pytest.fixture
def registry_serves(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A registry answering each reference with the digest in the returned mapping (edit it), else an error."""
    served = dict(SERVED)

    def resolve(reference: str) -> str:
        if reference not in served:
            raise registry.RegistryError(f"{reference}: no answer")
        return served[reference]

    monkeypatch.setattr(registry, "resolve_digest", resolve)
    return served


def every(loaded: plan.Plan) -> list[plan.Selected]:
    return [plan.Selected(c, c.images) for c in loaded.combinations]


def test_lock_bases_writes_every_digest_and_renders_from_them(
    write_matrix: Callable[[str], Path], registry_serves: dict[str, str]
) -> None:
    loaded = plan.load(write_matrix(UBUNTU))
    outcome = locking.lock_bases(loaded, every(loaded))
    assert outcome.ok and outcome.err == ()
    assert f"locked ubuntu:24.04: ubuntu:24.04@{OS_DIGEST}" in outcome.out
    assert bases.read_locks(loaded.bases.lock_file if loaded.bases else Path()) == {
        "ubuntu:24.04": OS_DIGEST,
        TOOLKIT: TOOLKIT_DIGEST,
    }
    assert outcome.out[-1].endswith("Dockerfiles re-rendered to pull them by digest")
    dockerfile = next((loaded.images_dir).glob("*/Dockerfile")).read_text()
    assert f"FROM ubuntu:24.04@{OS_DIGEST} AS runtime" in dockerfile


def test_lock_bases_check_fails_when_the_registry_serves_another_digest(
    write_matrix: Callable[[str], Path], registry_serves: dict[str, str]
) -> None:
    path = write_matrix(UBUNTU)
    write_lock(path, SERVED)
    loaded = plan.load(path)
    assert locking.lock_bases(loaded, every(loaded), check=True).ok
    registry_serves["ubuntu:24.04"] = "sha256:" + "c" * 64
    outcome = locking.lock_bases(loaded, every(loaded), check=True)
    assert not outcome.ok and outcome.out == ()
    assert any(line.startswith(f"stale: ubuntu:24.04: locked {OS_DIGEST}") for line in outcome.err)
    assert outcome.err[-1] == f"run `{bases.LOCK_COMMAND}` and commit matrix.bases.lock"
    assert bases.read_locks(bases.lock_path(path))["ubuntu:24.04"] == OS_DIGEST  # a check writes nothing


def test_lock_bases_writes_nothing_unless_every_base_answers(
    write_matrix: Callable[[str], Path], registry_serves: dict[str, str]
) -> None:
    del registry_serves[TOOLKIT]
    path = write_matrix(UBUNTU)
    loaded = plan.load(path)
    outcome = locking.lock_bases(loaded, every(loaded))
    assert not outcome.ok and f"error: {TOOLKIT}: no answer" in outcome.err
    assert outcome.err[-1].startswith("nothing written") and not bases.lock_path(path).exists()
    assert not locking.lock_bases(loaded, every(loaded), check=True).ok  # a base that does not answer is no pass


def test_the_plan_steps_list_bootstrapped_bases_first(write_matrix: Callable[[str], Path]) -> None:
    loaded = plan.load(write_matrix("matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12}\n"))
    steps = views.steps(plan.select(loaded, []))
    assert steps[0].startswith("1. bootstrap base ") and steps[1].startswith("2. ") and len(steps) == 3
    assert views.ci_matrix(plan.select(loaded, []))["include"][0]["cuda"] == "cpu"


def test_a_signal_cancels_the_work_is_said_once_and_gives_128_plus_n(capfd: pytest.CaptureFixture[str]) -> None:
    cancelled: list[bool] = []
    before = signal.getsignal(signal.SIGTERM)

    def work() -> str:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        return "done"

    done = interrupts.until_interrupted(lambda: cancelled.append(True), work)
    assert done.result == "done" and done.signals == (signal.SIGTERM, signal.SIGTERM) and cancelled == [True, True]
    assert done.exit_status == 143 and signal.getsignal(signal.SIGTERM) is before
    assert capfd.readouterr().err.count("SIGTERM: stopping") == 1
    assert interrupts.until_interrupted(lambda: None, lambda: 1).exit_status is None
