"""The time table `make test` ends with (tests/timing.py): the figures are literals here."""

from __future__ import annotations

from tests import timing

TIMES = {
    "tests/unit/test_a.py::test_one": 0.5,
    "tests/unit/planning/test_b.py::test_two": 1.5,
    "tests/e2e/test_build_cpu.py::test_build": 300.0,
    "tests/e2e/test_build_cpu.py::test_labels": 2.0,
    "tests/e2e/test_push.py::test_push": 120.0,
}


def test_unit_tests_are_one_line_and_e2e_modules_one_each_largest_first() -> None:
    rows = timing.by_group(TIMES)
    assert [(r.name, r.seconds, r.tests) for r in rows] == [
        ("tests/e2e/test_build_cpu.py", 302.0, 2),
        ("tests/e2e/test_push.py", 120.0, 1),
        ("tests/unit", 2.0, 2),
    ]


def test_the_slowest_tests_come_first_and_are_cut_at_the_count() -> None:
    assert [r.name for r in timing.slowest(TIMES, 2)] == [
        "tests/e2e/test_build_cpu.py::test_build",
        "tests/e2e/test_push.py::test_push",
    ]


def test_the_table_ends_with_the_whole_run() -> None:
    lines = timing.table(TIMES, 500.4, count=1)
    assert lines[0] == "slowest 1 tests (setup + call + teardown):"
    assert lines[1] == "     300.0 s  tests/e2e/test_build_cpu.py::test_build"
    assert lines[-1] == "     424.0 s      5 tests  in all; the run took 500 s"


def test_with_workers_each_one_s_busy_time_ends_the_table() -> None:
    lines = timing.table(TIMES, 500.4, count=1, workers={"gw1": 120.0, "gw0": 304.0})
    assert lines[-3:] == ["time per worker (busy, of the run's time):", "     304.0 s  gw0", "     120.0 s  gw1"]
    assert timing.table(TIMES, 500.4, count=1, workers={})[-1].endswith("the run took 500 s")
