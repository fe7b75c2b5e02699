"""`make mutants`' table (bench/mutants.py) is checked against the code by `make lint` (`--check`): these tests
show that check can fail, and that the table holds now."""

from __future__ import annotations

import importlib.util
import sys
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
