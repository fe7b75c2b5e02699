"""Where the suite's time went: a table at the end of every run (`make test` prints it).

Each test's time is its setup, call and teardown together, so a module's shared build (a module- or
session-scoped fixture) counts once, in the first test that needed it; the total of a module is the sum of its
tests. Printed: the slowest tests, then one line per module of tests/e2e (and one for all of tests/unit), the
largest first, the run's whole time, and with pytest-xdist each worker's busy time.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import pytest

SLOWEST = 15


@dataclass(frozen=True)
class Row:
    """One line of the table: what (a test or a module), its seconds, how many tests."""

    name: str
    seconds: float
    tests: int = 1


def group_of(nodeid: str) -> str:
    """The line a test counts in: its module for tests/e2e, `tests/unit` for every unit test."""
    path = nodeid.split("::", 1)[0]
    return "tests/unit" if path.startswith("tests/unit/") else path


def by_group(times: Mapping[str, float]) -> list[Row]:
    """A row per group, the largest first."""
    seconds: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for nodeid, spent in times.items():
        seconds[group_of(nodeid)] += spent
        counts[group_of(nodeid)] += 1
    return sorted((Row(g, seconds[g], counts[g]) for g in seconds), key=lambda r: (-r.seconds, r.name))


def slowest(times: Mapping[str, float], count: int) -> list[Row]:
    return [Row(n, s) for n, s in sorted(times.items(), key=lambda item: (-item[1], item[0]))[:count]]


def table(
    times: Mapping[str, float], whole: float, count: int = SLOWEST, workers: Mapping[str, float] | None = None
) -> list[str]:
    """The lines printed at the end of a run; `workers`: each xdist worker's busy seconds, when it ran some."""
    lines = [f"slowest {min(count, len(times))} tests (setup + call + teardown):"]
    lines += [f"  {row.seconds:8.1f} s  {row.name}" for row in slowest(times, count)]
    lines.append("time per module (tests/unit as one):")
    lines += [f"  {row.seconds:8.1f} s  {row.tests:5d} tests  {row.name}" for row in by_group(times)]
    lines.append(f"  {sum(times.values()):8.1f} s  {len(times):5d} tests  in all; the run took {whole:.0f} s")
    if workers:
        lines.append("time per worker (busy, of the run's time):")
        lines += [f"  {workers[name]:8.1f} s  {name}" for name in sorted(workers)]
    return lines


class Timing:
    """The plugin: adds up each test's phases, prints the table in the terminal summary."""

    def __init__(self) -> None:
        self.times: dict[str, float] = defaultdict(float)
        self.workers: dict[str, float] = defaultdict(float)
        self.started = time.monotonic()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.times[report.nodeid] += report.duration
        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", None)  # xdist's, if any
        if isinstance(worker, str):
            self.workers[worker] += report.duration

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.times:
            return
        terminalreporter.section("where the time went")
        for line in table(self.times, time.monotonic() - self.started, workers=self.workers):
            terminalreporter.write_line(line)


def register(config: pytest.Config) -> None:
    """Register the plugin once (xdist workers report to the controller, which prints)."""
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(Timing(), "torchimages-timing")
