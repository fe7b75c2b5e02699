"""`--sign-key`: each pushed image signed by its digest once its tags are in the registry, and the index of a
tag of several platforms once it is written and checked (security.signing runs cosign). A signature that
fails fails the image: its tags were pushed, and the outcome says so."""

from __future__ import annotations

import threading

from torchimages.building.progress import Progress
from torchimages.combination import Image
from torchimages.engine import Engine
from torchimages.security.signing import Signer

PUSHED_NOT_SIGNED = "pushed, not signed: the registry holds its tags without a signature"


def sign_pushed(
    engine: Engine, image: Image, signer: Signer | None, cancelled: threading.Event | None, progress: Progress
) -> list[str]:
    """Sign the digest the engine recorded when it pushed the image's tags (none without a signer); the
    problems, each saying the tags were pushed."""
    if signer is None:
        return []
    from torchimages.building.index import pushed_digest  # index signs its own: see sign_index

    digest = pushed_digest(engine, image)
    if digest is None:
        return [f"{image.platform_reference}: {PUSHED_NOT_SIGNED} (the engine recorded no digest of it)"]
    progress.update(image.own_tag, "sign")
    return _signed(signer, f"{image.repository}@{digest}", cancelled, progress)


def sign_index(
    first: Image,
    wanted: dict[str, str],
    signer: Signer | None,
    cancelled: threading.Event | None,
    progress: Progress | None,
) -> list[str]:
    """Sign the index under `first`'s names (they name one index: checked to list exactly `wanted`, read once
    and named by the digest of what was read); the problems."""
    if signer is None:
        return []
    if progress:
        progress.update(first.tag, "sign")
    digest = signer.index_digest(first.reference, wanted, cancelled)
    if isinstance(digest, list):
        return [f"{first.reference}: {PUSHED_NOT_SIGNED}", *digest]
    return _signed(signer, f"{first.repository}@{digest}", cancelled, progress)


def _signed(signer: Signer, reference: str, cancelled: threading.Event | None, progress: Progress | None) -> list[str]:
    problems = signer.sign(reference, cancelled)
    if problems:
        return [f"{reference.split('@')[0]}: {PUSHED_NOT_SIGNED}", *problems]
    if progress:
        progress.note(f"{reference}: signed with {signer.key}")
    return []
