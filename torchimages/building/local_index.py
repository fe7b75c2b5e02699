"""One local tag for every platform of a flavor: on the containerd image store the engine holds an index, so once
every platform's image passed (each verified under its own tag, `<tag>-<arch>`), the public tag and its aliases
name, on this engine too, one OCI image index of exactly those images and the attestation manifests (SBOM and
provenance) about each, as a registry's index does (index.py).

Each platform's entry is copied from the document its own tag names in the content store (the image's id there:
its own index, or its image manifest), read by digest and hashed; nothing is built again. Every manifest the index
names must be in the content store (an attestation manifest that is not, as after a pull of one platform, is left
out, and the outcome says so). With `--push` the index is the registry's own (its bytes, read by the digest its
tags name once staging wrote them: one digest here and there, the one signed) where this engine holds all it
names, each as that index describes it. It is loaded under a temporary
name, read back (these very bytes), and only then are the tag and each alias moved to it, one at a time, each read
back; at the first failure, or an interrupt before the first move, every name moved is moved back. Where no content
store can be read (the classic store holds one platform's image under a name; a user without containerd's socket)
nothing is written and the outcome says why, and what the public names still name here."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torchimages.building.references import TEMP_REPOSITORY
from torchimages.combination import Image
from torchimages.engine import Engine, EngineError, manifests, shared_annotations
from torchimages.problems import shown


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
    image = next(
        (d for d in listed if d["digest"] == entry.digest and manifests.platform_name(d.get("platform")) == platform),
        None,
    )
    if image is None:  # parse named it by the same rules: not reached, unless the two part ways
        raise NoIndex(f"{reference}: no entry of {entry.digest} for {platform}")
    others = [e for e in document.entries if e != entry and not (e.attestation and e.about == entry.digest)]
    if others or not about:
        note = (
            f"{platform}: {reference} holds {len(others)} more manifest(s) beside its image and the attestations "
            "about it, so the index names its image manifest alone: its SBOM and provenance are not carried"
            if others and about
            else ""
        )
        return Held(platform, entry.digest, (image,), (), note)
    carried = {d["digest"]: d for d in reversed(listed) if d["digest"] in about and d is not image}  # each once
    kept = tuple(dict.fromkeys(about))
    return Held(platform, entry.digest, (image, *(carried[digest] for digest in kept)), kept)


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


def stale(engine: Engine, first: Image, own: Mapping[str, str] | None = None) -> str:
    """What the public names of `first` still name on this engine where no index was written now ("" where none
    names anything: a tag left from an earlier run would otherwise pass for this run's); `own`: the id of each
    platform's image here -> its platform (a name may name one of them alone, as before it had several)."""
    named = []
    for name in first.names:
        try:
            info = engine.inspect(f"{first.repository}:{name}")
        except EngineError:
            continue
        if info is not None:
            platform = (own or {}).get(info.id)
            named.append(
                f"{first.repository}:{name} names the {platform} image alone"
                if platform
                else f"{first.repository}:{name} still names {info.id}, which this run did not write"
            )
    return "here " + ", ".join(named) if named else ""


def write(
    engine: Engine,
    first: Image,
    mine: Mapping[Image, str],
    cancelled: threading.Event | None = None,
    served: bytes | None = None,
) -> tuple[str, list[str]]:
    """Make `first`'s tag and aliases name, in the engine's store, the index of `mine` (one flavor, every
    platform, each under its own tag -> the id verified), with the OCI labels they share as its annotations (as
    index.py's): `served`, the registry's index of them as read back, where given and this engine holds all it
    names. What was done (a line) and the problems (none: every name names it; else every name names what it
    named before, or the problems say what it names)."""
    found: list[Held] = []
    labels: list[dict[str, str]] = []
    for image, verified in mine.items():
        reference = image.platform_reference
        try:
            info = engine.inspect(reference)
            if info is None:
                return "", [f"{reference} is no longer here"]
            if info.id != verified:
                return "", [f"{reference} names {info.id} now, not the image verified or found up to date ({verified})"]
            raw = engine.stored_blob(info.id)
            if raw is None:
                why = (
                    f"the engine's content store did not give what {reference} (id {info.id}) names (the classic "
                    "store holds one image a name; containerd's socket is root's; or ctr failed)"
                )
                here = "here: " + ", ".join(i.platform_reference for i in mine)
                own = {verified_id: i.platform for i, verified_id in mine.items()}
                return "; ".join(
                    filter(None, [f"no local index {first.reference}: {why}", here, stale(engine, first, own)])
                ), []
            found.append(_present(engine, held(raw, info.id, image.platform, reference)))
        except (EngineError, NoIndex) as exc:
            return "", [f"{reference}: {exc}"]
        labels.append(info.labels)
    written, notes = _chosen(found, tuple(shared_annotations(labels).items()), served)
    digest = manifests.digest_of(written)
    problems, said = _loaded(engine, first, written, found, cancelled)
    if problems:
        return "", [*problems, *said]
    platforms = ", ".join(f"{image.platform} {image.manifest}" for image in found)
    line = f"{first.reference} names, on this engine, the index {digest} of {platforms}"
    return "; ".join([line, *notes, *[image.note for image in found if image.note], *said]), []


def _present(engine: Engine, image: Held) -> Held:
    """`image` with only the attestation manifests the content store holds (its note says which it does not);
    EngineError where it does not hold the image manifest itself."""
    if _blob_problem(engine, image.descriptors[0]):
        raise EngineError(f"the content store does not hold the image manifest {image.manifest}")
    why = {str(d["digest"]): problem for d in image.descriptors[1:] if (problem := _blob_problem(engine, d))}
    missing = list(why)
    if not missing:
        return image
    kept = tuple(d for d in image.descriptors if d["digest"] not in missing)
    listed = ", ".join(f"{digest} ({problem})" for digest, problem in why.items())
    note = f"{image.platform}: attestation manifest(s) {listed} not held as named on this engine: not in its index"
    attestations = tuple(a for a in image.attestations if a not in missing)
    return Held(image.platform, image.manifest, kept, attestations, "; ".join(filter(None, [image.note, note])))


def _blob_problem(engine: Engine, descriptor: Mapping[str, Any]) -> str:
    """Why the content store does not hold the manifest `descriptor` names as it says ("" where it does)."""
    raw = engine.stored_blob(str(descriptor["digest"]))
    if raw is None:
        return "not given by the content store"
    return "" if len(raw) == descriptor.get("size") else f"{len(raw)} bytes, not {descriptor.get('size')}"


def _chosen(
    found: Sequence[Held], annotations: Sequence[tuple[str, str]], served: bytes | None
) -> tuple[bytes, list[str]]:
    """The index to write: the registry's (`served`) where it names exactly what this engine holds of `found`,
    else one made here (the notes say why it differs from the registry's)."""
    made = document(found, annotations)
    if served is None:
        return made, []
    differs = read_back(served, served, found, "the registry's index") or _described_otherwise(served, found)
    if not differs:
        return served, []
    return made, [f"not the registry's index (it names what this engine does not hold as named): {'; '.join(differs)}"]


def _described_otherwise(served: bytes, found: Sequence[Held]) -> list[str]:
    """Where the registry's index describes a manifest otherwise (its size, its media type) than this engine holds
    it (`found`'s descriptors, each checked against the content store)."""
    held_here = {str(d["digest"]): d for image in found for d in image.descriptors}
    problems = []
    for entry in manifests.parse(served, "the registry's index").entries:
        here = held_here.get(entry.digest)
        if here is None or (here.get("size"), here.get("mediaType")) != (entry.size, entry.media_type):
            problems.append(f"its {entry.digest} as a {entry.media_type} of {entry.size} bytes")
    return problems


def _loaded(
    engine: Engine, first: Image, written: bytes, found: Sequence[Held], cancelled: threading.Event | None
) -> tuple[list[str], list[str]]:
    """Load `written` under a temporary name, read it back, then move each public name to it (or find each there
    already: nothing is loaded); the problems and what else is said (a temporary name left)."""
    digest = manifests.digest_of(written)
    repository = first.repository
    try:
        before = {name: _id_at(engine, f"{repository}:{name}") for name in first.names}
    except EngineError as exc:
        return [f"what the public names name here could not be read ({exc}): nothing was written"], []
    if all(found_id == digest for found_id in before.values()):
        return [], []
    staged = f"{TEMP_REPOSITORY}/index:{first.tag[:100]}-{uuid.uuid4().hex[:10]}"
    try:
        engine.hold_index(staged, written)
        staged_id = _id_at(engine, staged)
        problems = (
            [f"{staged} names {staged_id or 'nothing'}, not the index loaded ({digest})"]
            if staged_id != digest
            else read_back(engine.stored_blob(digest), written, found, staged)
        )
        if not problems and cancelled is not None and cancelled.is_set():
            problems = ["interrupted before the public tags were moved"]
        if not problems:
            problems = _moved(engine, staged, repository, list(first.names), digest, before)
    except EngineError as exc:
        problems = [str(exc)]
    said = []
    try:
        engine.remove_image(staged)
    except EngineError as exc:
        said.append(f"the temporary name {staged} is left ({shown(str(exc))}): `docker rmi {staged}`")
    return problems, said


def _id_at(engine: Engine, reference: str) -> str | None:
    info = engine.inspect(reference)
    return info.id if info is not None else None


def _moved(
    engine: Engine, staged: str, repository: str, names: Sequence[str], digest: str, before: Mapping[str, str | None]
) -> list[str]:
    """Move each of `names` in turn to the index `staged` names (`digest`), each read back; at the first failure,
    every name moved so far (that one too) moved back to what it named `before`. The problems."""
    moved: list[str] = []
    for name in names:
        moved.append(name)
        reference = f"{repository}:{name}"
        try:
            engine.tag(staged, repository, name)
            now = _id_at(engine, reference)
            problems = [] if now == digest else [f"{reference} names {now or 'nothing'} once moved, not {digest}"]
        except EngineError as exc:
            problems = [f"{reference} could not be moved to {digest}: {exc}"]
        if problems:
            return [*problems, *_restored(engine, repository, moved, before)]
    return []


def _restored(engine: Engine, repository: str, names: Sequence[str], before: Mapping[str, str | None]) -> list[str]:
    """Move each of `names` back to what it named before (the last moved first; one that named nothing is
    removed); what became of each."""
    said = []
    for name in reversed(names):
        reference, old = f"{repository}:{name}", before[name]
        try:
            if _id_at(engine, reference) == old:
                continue
            if old is None:
                engine.remove_image(reference)
            else:
                engine.tag(old, repository, name)
            back = _id_at(engine, reference) == old
        except EngineError:
            back = False
        what = f"back to {old}" if old else "back to nothing (it named nothing before)"
        said.append(f"{reference} put {what}" if back else f"{reference} could not be put {what}")
    return said
