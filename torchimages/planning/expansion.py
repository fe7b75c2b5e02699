"""Located matrix rows, and the GitHub Actions matrix semantics that make them: the product of the axes, minus
the excludes (and the check that each exclude can match), then the includes merged or added; and the file's
default size budget and platforms under each row's own."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from torchimages.problems import Problem, Severity
from torchimages.sizes import SizeBudget


@dataclass(frozen=True)
class Value:
    """A value from the file with the line it came from."""

    value: str | tuple[str, ...] | SizeBudget
    line: int


@dataclass(frozen=True)
class MatrixRow:
    """One combination the matrix asks for (an expanded row), before it is resolved against the knowledge base."""

    values: dict[str, Value]
    line: int

    def get(self, key: str) -> str | None:
        """The text of a single-valued key, or None when absent."""
        found = self.values.get(key)
        return found.value if found and isinstance(found.value, str) else None

    def line_of(self, key: str) -> int:
        """The line a key's value came from (the combination's line when absent)."""
        found = self.values.get(key)
        return found.line if found else self.line


def exclude_problems(
    path: str, axes: dict[str, list[Value]], excludes: list[tuple[dict[str, Value], int]]
) -> list[Problem]:
    """An exclude naming a key that is no axis can never match (an error); one that matches no
    combination of the axes does nothing (a warning). Decided from the axes, without the product."""
    problems = []
    for entry, line in excludes:
        strays = [key for key in entry if key not in axes]
        for key in strays:
            problems.append(
                Problem(
                    f"'{key}' is not an axis of this matrix, so this exclude can never match",
                    path,
                    entry[key].line,
                    key,
                    allowed=", ".join(axes) or "no axis is defined",
                )
            )
        if strays:
            continue
        missing = [(k, v) for k, v in entry.items() if v.value not in {a.value for a in axes[k]}]
        if missing:
            key, value = missing[0]
            problems.append(
                Problem(
                    f"this exclude matches no combination ({key} {value.value} is not among the {key} values)",
                    path,
                    line,
                    key,
                    severity=Severity.WARNING,
                )
            )
    return problems


def expand(
    axes: dict[str, list[Value]],
    exclude: list[dict[str, Value]],
    include: list[tuple[dict[str, Value], int]],
    line: int,
) -> list[MatrixRow]:
    """GitHub Actions semantics: product of the axes, minus excludes, then includes merged or added."""
    names = list(axes)
    combos = itertools.product(*(axes[n] for n in names))
    product = [dict(zip(names, combo, strict=True)) for combo in combos] if names else []

    def matches(combo: dict[str, Value], entry: dict[str, Value]) -> bool:
        return all(k in combo and combo[k].value == v.value for k, v in entry.items())

    kept = [c for c in product if not any(matches(c, e) for e in exclude)]
    merged = [dict(c) for c in kept]
    extra: list[tuple[dict[str, Value], int]] = []
    for entry, entry_line in include:
        hit = False
        for original, combo in zip(kept, merged, strict=True):
            if all(original[k].value == v.value for k, v in entry.items() if k in original):
                combo.update({k: v for k, v in entry.items() if k not in original})
                hit = True
        if not hit:
            extra.append((entry, entry_line))
    return [MatrixRow(c, line) for c in merged] + [MatrixRow(e, ln) for e, ln in extra]


def with_budget(rows: list[MatrixRow], default: Value | None, key: str = "size_budget") -> list[MatrixRow]:
    """The file's top-level `size_budget` (or `max_layer`: `key`) for the flavors a row's own does not name."""
    if default is None or not isinstance(default.value, SizeBudget):
        return rows
    out = []
    for row in rows:
        own = row.values.get(key)
        budget = own.value.over(default.value) if own and isinstance(own.value, SizeBudget) else default.value
        out.append(MatrixRow({**row.values, key: Value(budget, own.line if own else default.line)}, row.line))
    return out


def with_platforms(rows: list[MatrixRow], default: Value | None) -> list[MatrixRow]:
    """The file's top-level `platforms` for every row that does not name its own (a row's own list replaces it),
    located at the row: what a row then cannot have is said where the row is."""
    if default is None:
        return rows
    return [
        row
        if "platforms" in row.values
        else MatrixRow({**row.values, "platforms": Value(default.value, row.line)}, row.line)
        for row in rows
    ]
