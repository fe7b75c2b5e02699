"""Golden files: text the code makes, compared with a reviewed copy under tests/unit/golden/.

`check(path, text)` fails with the difference when they differ; with UPDATE_GOLDEN=1 in the environment it
rewrites the copy instead (review the diff before committing it). One helper for every golden test.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

UPDATE_ENV = "UPDATE_GOLDEN"
GOLDEN = Path(__file__).parent / "unit" / "golden"
SHOWN_LINES = 60


def updating() -> bool:
    """Whether this run rewrites the goldens (UPDATE_GOLDEN set to anything but empty or 0)."""
    return os.environ.get(UPDATE_ENV, "") not in ("", "0")


def check(path: Path, text: str) -> None:
    """Assert the golden file at `path` holds `text`; rewrite it under UPDATE_GOLDEN=1."""
    if updating():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    how = f"review the change, then rewrite it: {UPDATE_ENV}=1 .venv/bin/python -m pytest tests/unit"
    if not path.exists():
        raise AssertionError(f"golden file {path} is missing; {how}")
    reviewed = path.read_text()
    if reviewed == text:
        return
    diff = list(difflib.unified_diff(reviewed.splitlines(), text.splitlines(), "golden", "now", lineterm=""))
    shown = "\n".join(diff[:SHOWN_LINES]) + (
        f"\n... ({len(diff) - SHOWN_LINES} more lines)" if len(diff) > SHOWN_LINES else ""
    )
    raise AssertionError(f"{path} differs from what the code makes now; {how}\n{shown}")
