"""`--sign-key`: each pushed image signed by its digest once its tags are in the registry, and the index of a
tag of several platforms once it is written under its temporary tag and checked, before the public tags move to
it (security.signing runs cosign). A signature that fails fails the image: an image's tags were pushed, and the
outcome says so; an index's public tags were not moved."""

from __future__ import annotations

import threading

from torchimages.building.progress import Progress
from torchimages.combination import Image
from torchimages.engine import Engine
from torchimages.security.signing import Signer

PUSHED_NOT_SIGNED = "pushed, not signed: the registry holds its tags without a signature"
INDEX_NOT_SIGNED = "the index is not signed"


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
    first: Image, digest: str, signer: Signer, cancelled: threading.Event | None, progress: Progress | None
) -> list[str]:
    """Sign the index `first`'s names are to name (by `digest`, read back and checked under its temporary tag)
    before they are moved to it; the problems (then they are not moved)."""
    if progress:
        progress.update(first.tag, "sign")
    return _signed(
        signer, f"{first.repository}@{digest}", cancelled, progress, f"{first.reference}: {INDEX_NOT_SIGNED}"
    )


def _signed(
    signer: Signer, reference: str, cancelled: threading.Event | None, progress: Progress | None, refused: str = ""
) -> list[str]:
    """Sign `reference` (by digest); the problems under `refused` (default: the repository, pushed not signed)."""
    problems = signer.sign(reference, cancelled)
    if problems:
        return [refused or f"{reference.split('@')[0]}: {PUSHED_NOT_SIGNED}", *problems]
    if progress:
        progress.note(f"{reference}: signed with {signer.key}")
    return []
