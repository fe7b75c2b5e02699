"""Installed OS packages with a newer version in the security suite of the image's own apt sources
(placeholder: being written)."""

from __future__ import annotations

from torchimages.engine import Engine
from torchimages.security.model import OS_UPDATES, Scan


def scan(engine: Engine, reference: str, network: str | None) -> Scan:
    """The pending security updates of `reference` (see the module)."""
    return Scan(OS_UPDATES, scanned=False, note="not written yet")
