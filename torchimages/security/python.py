"""Known vulnerabilities of the packages in an image's venv, by pip-audit (placeholder: being written)."""

from __future__ import annotations

from torchimages.engine import Engine
from torchimages.security.model import PYTHON, Scan


def scan(engine: Engine, reference: str) -> Scan:
    """The known vulnerabilities of the venv's packages in `reference` (see the module)."""
    return Scan(PYTHON, scanned=False, note="not written yet")
