"""The gate's own rules: a skipped check is said (never silently passed), a check that could not look fails
only under --require-scan, and a check that cannot run is "not scanned", never an exception."""

from __future__ import annotations

import datetime

from tests.fakes import FakeEngine
from torchimages.engine import EngineError, ImageInfo
from torchimages.security import gate
from torchimages.security.model import CHECKS, NOT_SCANNED, SKIPPED

TODAY = datetime.date(2026, 12, 2)


def engine() -> FakeEngine:
    fake = FakeEngine()
    fake.add(ImageInfo("img:1", "sha256:" + "1" * 64, {}, {}, "", ()))
    return fake


def test_skipped_checks_are_said_and_not_run() -> None:
    fake = engine()
    results = gate.run(fake, "t", "img:1", gate.GateOptions(skip=frozenset(CHECKS), today=TODAY))
    assert [(r.check, r.status, r.note) for r in results] == [(c, SKIPPED, "skipped by --skip-check") for c in CHECKS]
    assert fake.calls == [], "a skipped check runs nothing"


def test_not_scanned_refuses_only_under_require_scan() -> None:
    options = gate.GateOptions(skip=frozenset({"secrets", "os-updates"}), today=TODAY)
    verdict = gate.verdict(engine(), "t", "img:1", options)
    (python,) = [r for r in verdict.results if r.check == "python"]
    assert python.status == NOT_SCANNED and verdict.problems == ()
    strict = gate.verdict(engine(), "t", "img:1", gate.GateOptions(options.entries, options.skip, True))
    assert strict.problems == (
        "python: not scanned (the image's Python lists no installed packages) and --require-scan is given",
    )


def test_an_engine_failure_is_not_scanned_naming_it() -> None:
    fake = engine()
    fake.python_error = EngineError("the Docker engine at unix:///fake/docker.sock does not answer")
    options = gate.GateOptions(skip=frozenset({"secrets", "os-updates"}), today=TODAY)
    (python,) = [r for r in gate.run(fake, "t", "img:1", options) if r.check == "python"]
    assert python.status == NOT_SCANNED and "does not answer" in python.note
