"""What a registry serves under a reference (the OCI distribution spec): an image manifest or an index of them
(OCI image index, Docker manifest list), read from its bytes, named by their digest, and checked. Pure: the
engine reads the bytes (at most MAX_BYTES), these functions say what they hold and what is wrong with them."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torchimages import values
from torchimages.registry import MAX_MANIFEST_BYTES

MAX_BYTES = MAX_MANIFEST_BYTES  # registries refuse larger manifests (distribution: 4 MiB); a real one is kilobytes
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
IMAGE_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
ATTESTATION = "unknown/unknown"  # BuildKit's attestation manifests (SBOM, provenance) beside an image
_REFERENCE_TYPE = "vnd.docker.reference.type"
_REFERENCE_DIGEST = "vnd.docker.reference.digest"  # an attestation's: the image manifest it is about


class ManifestError(ValueError):
    """Bytes that are no manifest or index, or one that is not what was asked for; the message says why."""


@dataclass(frozen=True)
class Entry:
    """One manifest an index names: its media type, digest, size and platform (`linux/arm64`; `unknown/unknown`
    for an attestation; "" where the index gives none)."""

    media_type: str
    digest: str
    size: int
    platform: str
    attestation: bool = False
    about: str = ""  # an attestation's: the digest of the image manifest it is about (vnd.docker.reference.digest)


@dataclass(frozen=True)
class Document:
    """A manifest or index as the registry served it: the digest and size of its bytes, its media type, and (an
    index) the manifests it names."""

    digest: str
    size: int
    media_type: str
    entries: tuple[Entry, ...] = ()

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES


def digest_of(raw: bytes) -> str:
    """The digest that names these bytes in a registry."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def platform_name(found: Any) -> str:
    """`linux/arm64` of an index entry's `platform` object ("" for none); arm64's `v8` variant is left out, as
    containerd normalises it (`linux/arm64/v8` is `linux/arm64`)."""
    if not isinstance(found, dict):
        return ""
    parts = [found.get(k) for k in ("os", "architecture", "variant")]
    if not all(isinstance(p, str | None) for p in parts) or not parts[0] or not parts[1]:
        return ""
    if parts[1] == "arm64" and parts[2] == "v8":
        parts[2] = None
    return "/".join(p for p in parts if p)


def _entry(found: Any, where: str, n: int) -> Entry:
    if not isinstance(found, dict):
        raise ManifestError(f"{where}: its manifests[{n}] is not an object")
    media_type, digest, size = found.get("mediaType"), found.get("digest"), found.get("size")
    if not isinstance(media_type, str) or not values.is_digest(digest) or type(size) is not int or size < 0:
        raise ManifestError(f"{where}: its manifests[{n}] lacks a media type, a sha256 digest or a size")
    platform = platform_name(found.get("platform"))
    annotations = found.get("annotations")
    kind = annotations.get(_REFERENCE_TYPE) if isinstance(annotations, dict) else None
    about = annotations.get(_REFERENCE_DIGEST) if isinstance(annotations, dict) else None
    # an attestation is of no platform (`unknown/unknown`): an entry of a real platform is an image, however annotated
    attestation = platform == ATTESTATION or (kind == "attestation-manifest" and not platform)
    return Entry(media_type, str(digest), size, platform, attestation, str(about) if attestation and about else "")


def parse(raw: bytes, where: str) -> Document:
    """The manifest or index in `raw` (as served for `where`); ManifestError when it is neither (not JSON, no
    schema version 2, an unknown media type, an index entry without digest or size) or larger than MAX_BYTES."""
    if len(raw) > MAX_BYTES:
        raise ManifestError(f"{where}: {len(raw)} bytes, more than a manifest's {MAX_BYTES // 2**20} MiB")
    try:
        found = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ManifestError(f"{where}: not a manifest (not JSON: {str(exc)[:80]})") from None
    if not isinstance(found, dict) or found.get("schemaVersion") != 2:
        raise ManifestError(f"{where}: not a manifest of schema version 2")
    media_type = found.get("mediaType")
    if media_type is None:  # optional in OCI's own documents: told apart by what they hold
        media_type = OCI_INDEX if "manifests" in found else OCI_MANIFEST
    if media_type in IMAGE_TYPES:
        return Document(digest_of(raw), len(raw), str(media_type))
    if media_type not in INDEX_TYPES:
        raise ManifestError(f"{where}: a {str(media_type)[:100]!r}, neither an image manifest nor an index")
    listed = found.get("manifests")
    if not isinstance(listed, list):
        raise ManifestError(f"{where}: an index without a list of manifests")
    entries = tuple(_entry(item, where, n) for n, item in enumerate(listed))
    return Document(digest_of(raw), len(raw), str(media_type), entries)


def images(index: Document) -> tuple[Entry, ...]:
    """The images an index names, attestations left out."""
    return tuple(e for e in index.entries if not e.attestation)


def attestations_of(index: Document, manifest: str) -> tuple[str, ...]:
    """The digests of the attestation manifests an index names about `manifest` (an image manifest's digest)."""
    return tuple(e.digest for e in index.entries if e.attestation and e.about == manifest)


def platform_entry(index: Document, platform: str, where: str) -> Entry:
    """The one image of `platform` an index names (attestations left out); ManifestError when it names none,
    several, or an index there."""
    found = [e for e in images(index) if e.platform == platform]
    if len(found) != 1:
        listed = ", ".join(e.platform or "no platform" for e in images(index)) or "nothing"
        many = "several images" if found else "no image"
        raise ManifestError(f"{where}: an index of {listed}, with {many} of {platform}")
    if found[0].media_type not in IMAGE_TYPES:
        raise ManifestError(f"{where}: its {platform} entry is a {found[0].media_type}, not an image manifest")
    return found[0]


def index_problems(
    index: Document, wanted: Mapping[str, str], where: str, attached: Mapping[str, Sequence[str]] | None = None
) -> list[str]:
    """Why `index` is not the index of exactly `wanted` (platform -> its image manifest's digest) and the
    attestation manifests `attached` to them (image manifest's digest -> attestation manifests' digests): each
    platform once, with that digest, as an image manifest, each attestation about its image, and nothing else (no
    other attestation, no nested index)."""
    if not index.is_index:
        return [f"{where} is a {index.media_type}, not an index"]
    nested = [f"{e.digest} ({e.media_type})" for e in index.entries if e.media_type not in IMAGE_TYPES]
    if nested:
        return [f"{where} names what is no image manifest: {', '.join(nested)}"]
    found = sorted((e.platform or "no platform", e.digest) for e in images(index))
    if found != sorted(wanted.items()):
        named = ", ".join(f"{p} {d}" for p, d in found) or "nothing"
        return [f"{where} names {named}; wanted {', '.join(f'{p} {d}' for p, d in sorted(wanted.items()))}"]
    expected = Counter((about, digest) for about, digests in (attached or {}).items() for digest in set(digests))
    kept = Counter((e.about, e.digest) for e in index.entries if e.attestation)
    problems = [f"{where} names attestation {d} about {a or 'no image'}, not one asked for" for a, d in kept - expected]
    problems += [f"{where} lacks attestation {d} about {a}" for a, d in expected - kept]
    return sorted(problems)


def entry_problems(entry: Entry, raw: bytes | None, where: str) -> list[str]:
    """Why the manifest the registry serves at an index entry's digest (`raw`; None: nothing) is not the one the
    entry describes: other bytes than its digest names, another size or media type, no image manifest."""
    named = f"{where} names {entry.digest} ({entry.platform or 'no platform'})"
    if raw is None:
        return [f"{named}, which the registry does not hold"]
    if digest_of(raw) != entry.digest:
        return [f"{named}; the registry serves bytes of {digest_of(raw)} for it"]
    if len(raw) != entry.size:
        return [f"{named} of {entry.size} bytes; the registry serves {len(raw)}"]
    try:
        found = parse(raw, entry.digest)
    except ManifestError as exc:
        return [f"{named}: {exc}"]
    if found.media_type != entry.media_type or found.is_index:
        return [f"{named} as a {entry.media_type}; the registry serves a {found.media_type}"]
    return []
