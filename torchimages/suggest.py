"""Suggestions for mistyped or near-miss values."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from torchimages.compat import version_key


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice spelled most like `word`, if any is close."""
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def nearest_version(version: str, choices: Iterable[str]) -> str | None:
    """The choice numerically nearest to `version` (ties go to the newer one)."""
    options = list(choices)
    if not options:
        return None
    try:
        target = version_key(version)
    except ValueError:
        return closest(version, options)

    def distance(choice: str) -> tuple[float, tuple[int, ...]]:
        key = version_key(choice)
        weight = sum(abs(a - b) * 1000**-i for i, (a, b) in enumerate(zip(key, target, strict=False)))
        return (weight, tuple(-k for k in key))

    return min(options, key=distance)
