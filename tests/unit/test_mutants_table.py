"""`make mutants`' table (bench/mutants.py) is checked against the code by `make lint` (`--check`): these tests
show that check can fail, and that the table holds now."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mutants() -> ModuleType:
    if str(ROOT / "bench") not in sys.path:  # the script imports bench_cli beside it, as `python bench/...` finds it
        sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location("mutants_table", ROOT / "bench" / "mutants.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutants_table"] = module
    spec.loader.exec_module(module)
    return module


def test_the_table_matches_the_code(mutants: ModuleType) -> None:
    assert mutants.table_problems(list(mutants.MUTATIONS)) == []


def test_a_row_whose_text_moved_is_stale(mutants: ModuleType) -> None:
    row = mutants.Mutation("moved", "security/gate.py", "text no longer in the file\n", "", "a rule")
    assert mutants.table_problems([row]) == ["moved: its original text is found 0 times in security/gate.py"]


def test_a_row_without_tests_or_without_change_is_refused(mutants: ModuleType) -> None:
    first = mutants.MUTATIONS[0]
    unlisted = mutants.Mutation("unlisted", "cli/validate.py", first.original, "x", "a rule")
    same = mutants.Mutation("same", first.file, first.original, first.original, "a rule")
    problems = mutants.table_problems([unlisted, same])
    assert "unlisted: cli/validate.py has no RELEVANT entry (which tests concern it)" in problems
    assert "same: its replacement is its original text" in problems


def test_check_exits_2_on_a_stale_row(mutants: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    row = mutants.Mutation("moved", "security/gate.py", "text no longer in the file\n", "", "a rule")
    monkeypatch.setattr(mutants, "MUTATIONS", (*mutants.MUTATIONS, row))
    assert mutants.main(["--check"]) == 2
    monkeypatch.setattr(mutants, "MUTATIONS", mutants.MUTATIONS[:-1])
    assert mutants.main(["--check"]) == 0


def a_tree(tmp_path: Path, mutants: ModuleType) -> Path:
    """A tree of the mutated module (`PACKAGE/m.py`, under RELEVANT as test files named `m`, or that say `m`) and
    three unit test files: named for it, one that only mentions it, one that does neither."""
    (tmp_path / mutants.PACKAGE).mkdir()
    (tmp_path / mutants.PACKAGE / "m.py").write_text("RULE = 1\n")
    unit = tmp_path / "tests" / "unit"
    unit.mkdir(parents=True)
    (unit / "test_m.py").write_text("")
    (unit / "test_other.py").write_text("import m  # mentions it\n")
    (unit / "test_unrelated.py").write_text("")
    return tmp_path


def test_a_row_s_tests_are_those_named_for_its_module_then_those_that_mention_it(
    tmp_path: Path, mutants: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = a_tree(tmp_path, mutants)
    monkeypatch.setitem(mutants.RELEVANT, "m.py", (r"test_m\b", r"\bm\b"))
    row = mutants.Mutation("m-rule", "m.py", "RULE = 1\n", "RULE = 2\n", "a rule")
    assert mutants.relevant_tests(tree, row) == (["tests/unit/test_m.py"], ["tests/unit/test_other.py"])


@pytest.mark.parametrize(
    ("named", "mentioning", "verdict", "runs"),
    [
        (1, 0, "killed", 1),
        (0, 1, "killed", 2),
        (0, 0, "survived", 2),
        (5, 1, "killed", 2),
        (0, 5, "survived", 2),
        (None, 0, "interrupted", 1),
    ],
    ids=["named-fail", "mention-fails", "none-fail", "named-none-collected", "mention-none-kept", "stopped"],
)
def test_a_row_whose_named_tests_pass_is_tried_on_the_tests_that_mention_it(
    tmp_path: Path, mutants: ModuleType, monkeypatch: pytest.MonkeyPatch, named: int | None, mentioning: int,
    verdict: str, runs: int,
) -> None:  # fmt: skip
    tree = a_tree(tmp_path, mutants)
    monkeypatch.setitem(mutants.RELEVANT, "m.py", (r"test_m\b", r"\bm\b"))
    ran: list[list[str]] = []

    def pytest_run(_tree: Path, tests: list[str], _timeout: float) -> tuple[int | None, str]:
        ran.append(tests)
        assert (tree / mutants.PACKAGE / "m.py").read_text() == "RULE = 2\n"  # the mutation is in place
        return (named, "the first pass") if len(ran) == 1 else (mentioning, "the second pass")

    monkeypatch.setattr(mutants, "pytest", pytest_run)
    result = mutants.run_one(tree, mutants.Mutation("m-rule", "m.py", "RULE = 1\n", "RULE = 2\n", "a rule"), 10)
    assert result.verdict == verdict
    assert len(ran) == runs
    if (named, mentioning) == (0, 5):  # what is said of it is the pass that ran tests
        assert result.detail == "the first pass"
    assert (tree / mutants.PACKAGE / "m.py").read_text() == "RULE = 1\n"


def test_each_of_a_row_s_passes_has_its_timeout(
    tmp_path: Path, mutants: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = a_tree(tmp_path, mutants)
    monkeypatch.setitem(mutants.RELEVANT, "m.py", (r"test_m\b", r"\bm\b"))
    given: list[float] = []

    def pytest_run(_tree: Path, _tests: list[str], timeout: float) -> tuple[int, str]:
        given.append(timeout)
        time.sleep(0.3)
        return 0, "passed"

    monkeypatch.setattr(mutants, "pytest", pytest_run)
    mutants.run_one(tree, mutants.Mutation("m-rule", "m.py", "RULE = 1\n", "RULE = 2\n", "a rule"), 10)
    assert given == [10, 10]  # a pass's timeout is a hang's bound, never a verdict on a pass that had no time


def a_slow_run(
    tmp_path: Path, mutants: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> tuple[threading.Thread, list[tuple[int | None, str]], subprocess.Popen[str]]:
    """The runner's pytest over one test that sleeps a minute, started in a thread (its result lands in the list)
    with a fresh STOP; returned once the run is registered in flight."""
    monkeypatch.setattr(mutants, "STOP", threading.Event())
    unit = tmp_path / "tests" / "unit"
    unit.mkdir(parents=True)
    (unit / "test_slow.py").write_text("import time\n\n\ndef test_slow():\n    time.sleep(60)\n")
    out: list[tuple[int | None, str]] = []
    run = threading.Thread(target=lambda: out.append(mutants.pytest(tmp_path, ["tests/unit/test_slow.py"], 120)))
    started = time.monotonic()
    run.start()
    while not mutants._RUNS and time.monotonic() - started < 30:
        time.sleep(0.05)
    (proc,) = mutants._RUNS
    return run, out, proc


def test_a_stopped_runner_ends_its_runs_at_once_with_no_verdict(
    tmp_path: Path, mutants: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pytest run in flight when the runner stops (a signal: stop_runs) ends within seconds, not at its timeout,
    and says it was stopped (no "killed" for a run the signal ended), its process gone."""
    started = time.monotonic()
    run, out, proc = a_slow_run(tmp_path, mutants, monkeypatch)
    time.sleep(1)
    mutants.stop_runs()
    run.join(30)
    assert out == [(None, "stopped")]
    assert time.monotonic() - started < 30
    assert proc.poll() is not None


def test_a_ctrl_c_that_reaches_a_run_first_gives_no_verdict(
    tmp_path: Path, mutants: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A terminal's Ctrl-C reaches the runs too (the runner's process group): pytest ends with exit status 2 and
    "KeyboardInterrupt", which is no failed test (it was counted "killed")."""
    run, out, proc = a_slow_run(tmp_path, mutants, monkeypatch)
    time.sleep(2)  # pytest is in the test by now
    proc.send_signal(signal.SIGINT)
    run.join(30)
    assert out == [(None, "stopped")]
    assert not mutants.STOP.is_set()
