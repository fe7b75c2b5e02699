"""Matrix reading and GitHub Actions expansion semantics."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchimages.planning import matrix, plan
from torchimages.problems import InputError


def values(m: matrix.Matrix) -> list[dict[str, object]]:
    return [{k: v.value for k, v in c.values.items()} for c in m.rows]


def test_versions_stay_text_as_written() -> None:
    m = matrix.parse("matrix:\n  include:\n    - {torch: 2.10.0, cuda: 12.10, python: 3.10}\n", "m.yaml")
    assert values(m) == [{"torch": "2.10.0", "cuda": "12.10", "python": "3.10"}]


def test_product_exclude_include_like_github_actions() -> None:
    text = """
matrix:
  torch: [2.7.0, 2.7.1]
  cuda: ["11.8", "12.6"]
  exclude:
    - {torch: 2.7.0, cuda: "12.6"}
  include:
    - {cuda: "11.8", os: ubuntu22.04}
    - {torch: 2.7.1, cuda: "11.8", python: "3.10"}
    - {torch: 2.14.1, cuda: "13.0"}
"""
    got = values(matrix.parse(text, "m.yaml"))
    assert got == [
        {"torch": "2.7.0", "cuda": "11.8", "os": "ubuntu22.04"},
        {"torch": "2.7.1", "cuda": "11.8", "os": "ubuntu22.04", "python": "3.10"},
        {"torch": "2.7.1", "cuda": "12.6"},
        {"torch": "2.14.1", "cuda": "13.0"},
    ]


def test_include_never_overwrites_original_values() -> None:
    text = "matrix:\n  torch: [2.7.0]\n  include:\n    - {torch: 2.7.1, cuda: '12.6'}\n"
    assert values(matrix.parse(text, "m.yaml")) == [{"torch": "2.7.0"}, {"torch": "2.7.1", "cuda": "12.6"}]


def test_values_remember_their_line() -> None:
    m = matrix.parse("matrix:\n  include:\n    - torch: 2.7.0\n      cuda: '11.8'\n", "m.yaml")
    combo = m.rows[0]
    assert (combo.line, combo.line_of("torch"), combo.line_of("cuda")) == (3, 3, 4)


def test_unknown_keys_are_errors_with_a_suggestion() -> None:
    m = matrix.parse("matrix:\n  include:\n    - {torch: 2.7.0, cdua: '11.8'}\n", "m.yaml")
    (problem,) = m.problems
    assert (problem.line, problem.key) == (3, "cdua")
    assert "did you mean 'cuda'" in problem.suggestion


def test_unknown_top_level_key() -> None:
    m = matrix.parse("matrix:\n  include: [{torch: 2.7.0, cuda: cpu}]\nmatirx: {}\n", "m.yaml")
    assert [p.key for p in m.problems] == ["matirx"]


def test_flavors_is_a_list() -> None:
    m = matrix.parse("matrix:\n  include:\n    - {torch: 2.7.0, cuda: cpu, flavors: [runtime]}\n", "m.yaml")
    assert m.rows[0].values["flavors"].value == ("runtime",)


def test_malformed_yaml_reports_line_and_column() -> None:
    with pytest.raises(InputError) as caught:
        matrix.parse("matrix:\n  include:\n    - {torch: 2.7.0, cuda: [\n", "m.yaml")
    (problem,) = caught.value.problems
    assert problem.line == 4 and "malformed YAML at column" in problem.message


def test_empty_file_and_empty_matrix() -> None:
    with pytest.raises(InputError):
        matrix.parse("", "m.yaml")
    m = matrix.parse("matrix: {}\n", "m.yaml")
    assert any("no combination" in p.message for p in m.problems)


def test_axis_must_be_a_non_empty_list() -> None:
    m = matrix.parse("matrix:\n  torch: []\n", "m.yaml")
    assert any(p.key == "torch" and "non-empty" in p.message for p in m.problems)


@pytest.mark.parametrize("key", [k for k in matrix.COMBINATION_KEYS if k not in matrix.SIZE_KEYS])  # own words
def test_a_value_that_is_no_single_value_is_refused_with_an_example_of_its_key(key: str) -> None:
    """The example said is one that key takes (a platform for `platforms`, a flavor for `flavors`), never
    another key's."""
    entry = {"torch": "2.13.0", "cuda": "cpu", key: "[[x]]"}
    text = "matrix:\n  include:\n    - {" + ", ".join(f"{k}: {v}" for k, v in entry.items()) + "}\n"
    said = [p.message for p in matrix.parse(text, "m.yaml").problems if p.key == key]
    assert said and any(f"such as '{matrix.EXAMPLES[key]}'" in m for m in said), said


def test_the_examples_are_values_their_keys_take(tmp_path: Path) -> None:
    """Every example, written together, is a matrix the tool accepts: each is a value its key takes."""
    e = matrix.EXAMPLES
    keys = [k for k in matrix.COMBINATION_KEYS if k != "size_budget"]
    entry = ", ".join(f"{k}: [{e[k]}]" if k in ("flavors", "platforms") else f"{k}: '{e[k]}'" for k in keys)
    text = (
        f"repository: {e['repository']}\nbase_registry: {e['base_registry']}\n"
        f"require_locked_bases: {e['require_locked_bases']}\nsize_budget: {e['size_budget']}\n"
        f"matrix:\n  include:\n    - {{{entry}}}\n"
    )
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    loaded = plan.load(path)  # InputError, naming the example refused, otherwise
    assert len(plan.select(loaded, [])) == 1
    assert set(matrix.COMBINATION_KEYS) | {"repository", "base_registry", "require_locked_bases"} <= set(e)
