"""Temporary references: where an image is built before it earns its public tags, how one is
recognised, and an image built elsewhere waiting under one for promotion (`Baked`), found and checked
to be what its builder reported (`find_baked`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from torchimages.combination import Combination, Image
from torchimages.engine import Engine

TEMP_REPOSITORY = "torchimages-tmp"


def temporary_reference(
    combination: Combination, image: Image, token: str | None = None, repository: str = TEMP_REPOSITORY
) -> str:
    """A private reference an image is built to before it earns its public tags: in the temporary
    repository (never the public one), named by combination and flavor; `token` (default: random)
    tells builds apart."""
    return f"{repository}/{combination.folder.replace('+', '_')}:{image.flavor}-{token or uuid.uuid4().hex[:10]}"


def is_temporary(reference: str, repository: str = TEMP_REPOSITORY) -> bool:
    """Whether a reference names a temporary image (`[registry/]torchimages-tmp/<combination>:<tag>`)."""
    name = reference.rsplit("@", 1)[0]
    path = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
    return f"/{path}".rsplit("/", 1)[0].endswith(f"/{repository}")


@dataclass(frozen=True)
class Baked:
    """An image built elsewhere (a bake, a CI runner) to a temporary reference, waiting for promotion:
    `ids` are what its builder reported it to be (image or manifest digests; empty: not checked)."""

    reference: str
    ids: tuple[str, ...] = ()


def find_baked(engine: Engine, baked: Baked, base: Baked | None = None) -> list[str]:
    """The baked image is here (pulled when missing) and is what its builder reported, and built on
    `base` when one is given (its layers first); else why not."""
    found = engine.inspect(baked.reference)
    if found is None:
        errors = engine.pull(baked.reference)
        found = engine.inspect(baked.reference)
        if found is None:
            return [f"{baked.reference} is neither here nor could it be pulled: {'; '.join(errors) or 'not found'}"]
    known = {found.id, *(d.rsplit("@", 1)[-1] for d in found.repo_digests)}
    if baked.ids and not known.intersection(baked.ids):
        return [
            f"{baked.reference} is not the image its builder reported: it is {found.id}, "
            f"the metadata says {', '.join(baked.ids)}"
        ]
    if base is None:
        return []
    return built_on(
        engine, found.layers, baked.reference, base.reference, "bake devel and runtime of a combination together"
    )


def built_on(engine: Engine, layers: tuple[str, ...], reference: str, base: str, fix: str) -> list[str]:
    """`reference` (whose layers are `layers`) is built on the image `base` (its layers are the first), else
    why not; nothing to say when `base` is not here."""
    below = engine.inspect(base)
    if below is not None and layers[: len(below.layers)] != below.layers:
        return [f"{reference} is not built on {base} (runtime's layers are not its first): {fix}"]
    return []
