"""How `make test` spreads the suite over its workers (pytest-xdist, `-n TEST_WORKERS --dist loadscope`).

Each test belongs to one group, and a group runs on one worker, in order: the modules that assert on the run's
shared CPU build (conftest.cpu_built) in one group (the build is made once, by that worker, and the tests that
rebuild it, marked `rebuilds_shared`, come last), all of tests/unit in another, each other e2e module in its
own. The groups are handed out in ORDER: the unit tests first, then the longest first (the costs in
docs/benchmarks.md, "The test suite's time"), so that the last to finish is a short one; without xdist the
same order holds in one process.

The group is read from the test's id alone (xdist's controller schedules ids; it collects nothing), so a test
that uses the shared build outside SHARED_MODULES is refused at collection: it would build it again.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

SHARED = "cpu-shared"
UNIT = "unit"
SHARED_MODULES = frozenset(
    {"test_any_image", "test_build_cpu", "test_clusters", "test_progress", "test_push", "test_report"}
)
# tests/unit first (they need no engine, so they never wait for it), then the groups of more than a minute,
# longest first (measured 2026-12-03, `make test` on 2 cores); the others follow in the order collected.
ORDER = (
    UNIT,
    SHARED,
    "test_build_cuda",
    "test_arm64",
    "test_ubuntu_jammy",
    "test_cache",
    "test_faults",
    "test_release_gate",
    "test_retries",
    "test_interrupts",
    "test_bake",
)


def group_of(nodeid: str) -> str:
    """The group of a test id: UNIT for tests/unit, SHARED for a module of SHARED_MODULES, else its module."""
    path = nodeid.split("::", 1)[0]
    if path.startswith("tests/unit/"):
        return UNIT
    module = path.rsplit("/", 1)[-1].removesuffix(".py")
    return SHARED if module in SHARED_MODULES else module


def rank(group: str) -> int:
    return ORDER.index(group) if group in ORDER else len(ORDER)


def arrange(items: list[pytest.Item]) -> None:
    """Order the run: groups in ORDER, each group's tests as collected, the `rebuilds_shared` ones after
    the rest of theirs. UsageError for a test of the shared build outside SHARED_MODULES."""
    strays = [i.nodeid for i in items if "cpu_built" in getattr(i, "fixturenames", ()) and group_of(i.nodeid) != SHARED]
    if strays:
        raise pytest.UsageError(
            f"{strays[0]} uses the shared CPU build (cpu_built) outside tests/scheduling.py SHARED_MODULES: "
            "add its module there, or it builds the image again on another worker"
        )
    position = {item.nodeid: i for i, item in enumerate(items)}
    items.sort(
        key=lambda item: (
            rank(group_of(item.nodeid)),
            item.get_closest_marker("rebuilds_shared") is not None,
            position[item.nodeid],
        )
    )


class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """xdist's scope scheduling (a scope to one worker, the next scope to the first worker free), with
    `group_of` as the scope."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)

    def _reschedule(self, node: Any) -> None:
        """xdist's, but a worker gets its next group only when at most one test of its own is left (xdist: two). A
        worker holds its last test until it knows the next one, so one is the least that keeps it going (zero would
        hang it). At two, the arm64 group (a 900 s build test, then a short one) took the next group (Ubuntu 22.04) as
        it started; at one, the next group is handed out when its build test ends, to whichever worker asks first
        (a `.ci/run`, 2026-12-08, ran Ubuntu 22.04 last, its least free disk 3.6 GB: docs/benchmarks.md)."""
        if node.shutting_down:
            return
        if not self.workqueue:
            node.shutdown()
            return
        if self._pending_of(self.assigned_work[node]) > 1:
            return
        self._assign_work_unit(node)
