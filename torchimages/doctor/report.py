"""The text the doctor prints for its checks."""

from __future__ import annotations

from collections.abc import Sequence

from torchimages.doctor.model import FAIL, WARN, Check


def report(checks: Sequence[Check]) -> list[str]:
    """The lines the doctor prints: one per check, its fix beneath a failure or warning."""
    width = max(len(c.name) for c in checks)
    lines = []
    for check in checks:
        lines.append(f"{check.status:<5} {check.name:<{width}}  {check.message}")
        if check.fix and check.status in (FAIL, WARN):
            lines.append(f"{'':<5} {'':<{width}}  fix: {check.fix}")
    return lines
