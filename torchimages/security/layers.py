"""Credentials, private keys, the build's own secrets and stray files, in any layer of an image (placeholder:
being written)."""

from __future__ import annotations

from collections.abc import Sequence

from torchimages.engine import Engine
from torchimages.security.model import SECRETS, Scan


def scan(engine: Engine, reference: str, secrets: Sequence[bytes]) -> Scan:
    """What the layers of `reference` hold that no image may (see the module)."""
    return Scan(SECRETS, scanned=False, note="not written yet")
