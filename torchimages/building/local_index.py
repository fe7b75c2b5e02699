"""One local tag for every platform of a flavor: on the containerd image store the engine holds an index, so once
every platform's image passed (each verified under its own tag, `<tag>-<arch>`), the public tag and its aliases
name, on this engine too, one OCI image index of exactly those images and the attestation manifests (SBOM and
provenance) about each, as a registry's index does (index.py).

Each platform's entry is copied from the document its own tag names in the content store (the image's id there:
its own index, or its image manifest), read by digest and hashed; nothing is built again. The index is loaded
under a temporary tag, read back (the name must name these very bytes, which must name exactly those manifests),
and only then are the tag and each alias moved to it; the temporary tag is then removed. Where the content store
cannot be read (the classic store holds one platform's image under a name; a user without containerd's socket)
nothing is written and the outcome says why."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torchimages.building.references import TEMP_REPOSITORY
from torchimages.combination import Image
from torchimages.engine import Engine, EngineError, manifests, shared_annotations

PLATFORM_KEYS = ("architecture", "os", "variant")


@dataclass(frozen=True)
class Held:
    """One platform's image as its own tag names it in the store: the descriptors the index copies (its image
    manifest's, then the attestation manifests' about it), its manifest's digest, and why its attestations are not
    carried where they are not."""

    platform: str
    manifest: str
    descriptors: tuple[Mapping[str, Any], ...]
    attestations: tuple[str, ...] = ()
    note: str = ""


class NoIndex(ValueError):
    """A platform's stored document that no index can be made from; the message says why."""


def _platform_object(platform: str) -> dict[str, str]:
    os_name, _, rest = platform.partition("/")
    architecture, _, variant = rest.partition("/")
    found = {"os": os_name, "architecture": architecture}
    return found | ({"variant": variant} if variant else {})


def held(raw: bytes, image_id: str, platform: str, reference: str) -> Held:
    """What the index takes of `platform`'s image whose own tag `reference` names `raw` (the document of its id,
    `image_id`): an image manifest as it is; from an index (BuildKit keeps an image with its attestations as one),
    its entry of `platform` and the attestation manifests about it, each descriptor as that index gives it. Where
    that index holds anything else, the image manifest alone (the note says so). NoIndex when `raw` is not
    `image_id`'s bytes, or names no single image manifest of `platform`."""
    if manifests.digest_of(raw) != image_id:
        raise NoIndex(f"{reference}: the store's document hashes to {manifests.digest_of(raw)}, not {image_id}")
    try:
        document = manifests.parse(raw, reference)
        if not document.is_index:
            own = {"mediaType": document.media_type, "digest": image_id, "size": len(raw)}
            return Held(platform, image_id, (own | {"platform": _platform_object(platform)},))
        entry = manifests.platform_entry(document, platform, reference)
    except manifests.ManifestError as exc:
        raise NoIndex(str(exc)) from None
    listed = json.loads(raw)["manifests"]  # parse checked: a list of objects, each with its digest
    about = manifests.attestations_of(document, entry.digest)
    image = next(d for d in listed if d["digest"] == entry.digest)
    others = [e for e in document.entries if e != entry and not (e.attestation and e.about == entry.digest)]
    if others or not about:
        note = (
            f"{platform}: {reference} holds {len(others)} more manifest(s) beside its image and the attestations "
            "about it, so the index names its image manifest alone: its SBOM and provenance are not carried"
            if others and about
            else ""
        )
        return Held(platform, entry.digest, (image,), (), note)
    carried = [d for d in listed if d["digest"] in about and d is not image]
    return Held(platform, entry.digest, (image, *carried), about)


def document(images: Sequence[Held], annotations: Sequence[tuple[str, str]] = ()) -> bytes:
    """The OCI image index of `images` (platform by platform, each image manifest then the attestations about
    it), `annotations` on it; its bytes, the same for the same images (keys sorted, no spaces)."""
    index: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": manifests.OCI_INDEX,
        "manifests": [dict(d) for found in images for d in found.descriptors],
    }
    if annotations:
        index["annotations"] = dict(annotations)
    return json.dumps(index, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def read_back(raw: bytes | None, written: bytes, images: Sequence[Held], where: str) -> list[str]:
    """Why the document the engine now names under `where` (`raw`; None: none read) is not the index `written`
    of exactly `images` and the attestations about each."""
    if raw is None:
        return [f"{where}: the engine's content store did not give it back"]
    if raw != written:
        return [f"{where} names {manifests.digest_of(raw)}, not the index written ({manifests.digest_of(written)})"]
    try:
        found = manifests.parse(raw, where)
    except manifests.ManifestError as exc:
        return [str(exc)]
    wanted = {image.platform: image.manifest for image in images}
    attached = {image.manifest: image.attestations for image in images if image.attestations}
    return manifests.index_problems(found, wanted, where, attached)


def write(engine: Engine, first: Image, mine: Sequence[Image]) -> tuple[str, list[str]]:
    """Make `first`'s tag and aliases name, in the engine's store, the index of `mine` (one flavor, every
    platform, each under its own tag), with the OCI labels they share as its annotations (index.py's): what was
    done (a line: the index and what it names, or why none was written) and the problems (none: the tags name
    it). Nothing public moves before the index is read back."""
    found: list[Held] = []
    labels: list[dict[str, str]] = []
    for image in mine:
        reference = image.platform_reference
        try:
            info = engine.inspect(reference)
            raw = engine.stored_document(reference) if info is not None else None
        except EngineError as exc:
            return "", [f"{reference}: {exc}"]
        if info is None:
            return "", [f"{reference} is no longer here"]
        if raw is None:
            here = ", ".join(i.platform_reference for i in mine)
            why = "the engine's content store cannot be read here (the classic store, or no containerd socket)"
            return f"no local index {first.reference}: {why}; here: {here}", []
        try:
            found.append(held(raw, info.id, image.platform, reference))
        except NoIndex as exc:
            return "", [str(exc)]
        labels.append(info.labels)
    annotations = tuple(shared_annotations(labels).items())
    written = document(found, annotations)
    digest = manifests.digest_of(written)
    staged = f"{TEMP_REPOSITORY}/index:{first.tag[:100]}-{uuid.uuid4().hex[:10]}"
    problems = _staged(engine, staged, written, found, first)
    try:
        engine.remove_image(staged)
    except EngineError as exc:
        problems.append(f"{staged} could not be removed: {exc}")
    if problems:
        return "", problems
    notes = [image.note for image in found if image.note]
    platforms = ", ".join(f"{image.platform} {image.manifest}" for image in found)
    said = f"{first.reference} names, on this engine, the index {digest} of {platforms}"
    return "; ".join([said, *notes]), []


def _staged(engine: Engine, staged: str, written: bytes, found: Sequence[Held], first: Image) -> list[str]:
    """Load `written` under `staged`, read it back, then move the tag and each alias to it; the problems (those
    of the read-back: nothing public moved)."""
    digest = manifests.digest_of(written)
    try:
        engine.hold_index(staged, written)
        problems = read_back(engine.stored_document(staged), written, found, staged)
        if problems:
            return problems
        for name in first.names:
            engine.tag(staged, first.repository, name)
        named = {name: engine.inspect(f"{first.repository}:{name}") for name in first.names}
    except EngineError as exc:
        return [str(exc)]
    return [
        f"{first.repository}:{name} names {info.id if info else 'nothing'}, not the index {digest}"
        for name, info in named.items()
        if info is None or info.id != digest
    ]
