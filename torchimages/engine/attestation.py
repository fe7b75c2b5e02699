"""What an image says of itself beyond its configuration: its attestations (an SPDX SBOM and SLSA provenance, where
this engine can keep them), and the OCI annotations of a manifest or index, taken from the image's own OCI labels.

An attestation is a manifest beside the image's in an image index (BuildKit's attestation storage). The builds load
their result into the engine, so the engine's image store must keep that index: the containerd image store does;
the classic one (graphdriver) does not, and buildx's `docker` driver then refuses them ("Attestation is not
supported for the docker driver"). Another driver (docker-container, kubernetes, remote) builds outside the engine:
it cannot run the SBOM generator image made in the engine (sbom_generator.py), and what it loads into a classic
store arrives without attestations. The classic client (`docker build` with DOCKER_BUILDKIT=1) has no `--sbom`.
Where none is attached, the syft SBOM of `--report` is still written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torchimages import values
from torchimages.engine.manifests import IMAGE_TYPES, INDEX_TYPES

OCI_PREFIX = "org.opencontainers.image."
# Inherited from a base's labels (ubuntu's `ref.name=ubuntu`) and meaningful in an OCI layout or index: never copied.
NOT_ANNOTATED = frozenset({f"{OCI_PREFIX}ref.name"})
CONTAINERD_SNAPSHOTTER = "io.containerd.snapshotter.v1"  # `docker info`'s driver-type of the containerd store


@dataclass(frozen=True)
class SbomAttestation:
    """Whether builds attach an SPDX SBOM (made by the `generator` image) and SLSA provenance (mode=max) as
    attestations, and why (not)."""

    attached: bool
    why: str
    generator: str = ""  # the SBOM generator image (`--sbom=generator=REF`), where attached

    @property
    def note(self) -> str:
        """One line for a log or report: `attached (...)` or `not attached: <why>`."""
        return f"attached ({self.why})" if self.attached else f"not attached: {self.why}"


NOT_ASKED = SbomAttestation(False, "the engine was not asked (no build client found yet)")
CONTAINERD_STORE_HOW = (
    "turn on the containerd image store: `make engine` starts an engine with it; elsewhere "
    '"features": {"containerd-snapshotter": true} in /etc/docker/daemon.json, then restart dockerd'
)


def sbom_attestation(
    buildx: bool, driver: str | None, containerd_store: bool, generator: str = "", generator_problem: str = ""
) -> SbomAttestation:
    """Whether a build client attaches attestations the engine keeps: `buildx` (else the classic client), its
    builder's `driver` (`docker`, `docker-container`, ...; None: buildx said none), whether the engine keeps
    images in the containerd image store, and the SBOM generator image made in it (or why none could be)."""
    if not buildx:
        return SbomAttestation(False, "the build client is `docker build` (DOCKER_BUILDKIT=1), which has no --sbom")
    if driver is None:
        return SbomAttestation(False, "`docker buildx inspect` names no driver of the builder")
    if not containerd_store:
        where = "refuses attestations" if driver == "docker" else "loads images into it without their attestations"
        return SbomAttestation(
            False,
            f"the engine keeps images in its classic image store, and buildx's {driver} driver {where} "
            f"({CONTAINERD_STORE_HOW})",
        )
    if driver != "docker":
        return SbomAttestation(
            False,
            f"buildx's {driver} driver builds outside the engine and cannot run the SBOM generator image made "
            "in it; use the engine's own builder (`docker buildx use default`)",
        )
    if not generator:
        return SbomAttestation(False, f"no SBOM generator image could be made: {generator_problem or 'not said why'}")
    return SbomAttestation(
        True,
        f"SPDX SBOM by {generator}, SLSA provenance mode=max; buildx docker driver, containerd image store",
        generator,
    )


def uses_containerd_store(info: Mapping[str, Any]) -> bool:
    """Whether `docker info` says the engine keeps images in the containerd image store (`DriverStatus` holds
    `driver-type io.containerd.snapshotter.v1`)."""
    status = info.get("DriverStatus") or []
    return any(
        isinstance(pair, Sequence) and len(pair) == 2 and list(pair) == ["driver-type", CONTAINERD_SNAPSHOTTER]
        for pair in status
    )


def oci_annotations(labels: Mapping[str, str]) -> dict[str, str]:
    """An image's OCI labels (`org.opencontainers.image.*`, but `ref.name`) as annotations, sorted."""
    return {k: v for k, v in sorted(labels.items()) if k.startswith(OCI_PREFIX) and k not in NOT_ANNOTATED and v}


def shared_annotations(each: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """The OCI annotations every one of several images (an index's) has with the same value."""
    found = [oci_annotations(labels) for labels in each]
    if not found:
        return {}
    first, *rest = found
    return {k: v for k, v in first.items() if all(other.get(k) == v for other in rest)}


SPDX_PREDICATE = "https://spdx.dev/Document"
PROVENANCE_PREDICATES = ("https://slsa.dev/provenance/v0.2", "https://slsa.dev/provenance/v1")
REFERENCE_DIGEST = "vnd.docker.reference.digest"  # an attestation manifest's annotation: the image it is about
IN_TOTO = "application/vnd.in-toto+json"
JSON_BLOB_BYTES = 256 * 1024 * 1024  # the largest blob of a saved image read as JSON (an SBOM: megabytes)


@dataclass(frozen=True)
class Attested:
    """What an image's index says of one platform's image: its manifest's digest, the predicate types of the
    in-toto statements attached to it whose subject names that digest, and the first such SPDX statement as stored
    (its blob's digest and bytes, which hash to it where the store's reader checks: content_store, the save's)."""

    manifest: str
    predicates: tuple[str, ...]
    sbom: tuple[str, bytes] | None = field(default=None, repr=False, compare=False)

    def problems(self) -> list[str]:
        """What a built image lacks: an SPDX SBOM and SLSA provenance about its own manifest."""
        missing = []
        if SPDX_PREDICATE not in self.predicates:
            missing.append("SPDX SBOM")
        if not any(p in self.predicates for p in PROVENANCE_PREDICATES):
            missing.append("SLSA provenance")
        return [f"attestations: no {what} names its manifest {self.manifest}" for what in missing]


class AttestationError(ValueError):
    """A saved image whose index cannot be read for attestations: the message says why."""


def _json(blobs: Mapping[str, bytes], digest: object, what: str) -> dict[str, Any]:
    if not isinstance(digest, str) or digest not in blobs:
        raise AttestationError(f"the {what} {values.show(str(digest))} is not in the image's content")
    try:
        found = json.loads(blobs[digest])
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise AttestationError(f"the {what} {digest} is not JSON") from None
    if not isinstance(found, dict):
        raise AttestationError(f"the {what} {digest} is not a JSON object")
    return found


def _entries(document: Mapping[str, Any], what: str) -> list[Mapping[str, Any]]:
    entries = document.get("manifests")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise AttestationError(f"the {what} lists no manifests")
    return entries


def _names(digests: Mapping[str, Any], manifest: str) -> bool:
    """Whether an in-toto subject's digests (`{"sha256": "HEX"}`) name the manifest (`sha256:HEX`)."""
    algorithm, _, encoded = manifest.partition(":")
    return bool(encoded) and digests.get(algorithm) == encoded


def read_attested(layout_index: bytes, blobs: Mapping[str, bytes], platform: str) -> Attested:
    """The attestations of `platform`'s image (`linux/amd64`) in a `docker save` archive of the containerd image
    store (an OCI layout): `layout_index` is its index.json, `blobs` its JSON blobs by digest (`sha256:...`).
    The layout names the image's index (attested_in reads it). AttestationError when the archive is not such a
    layout."""
    try:
        layout = json.loads(layout_index)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise AttestationError("its index.json is not JSON") from None
    if not isinstance(layout, dict):
        raise AttestationError("its index.json is not a JSON object")
    tops = _entries(layout, "index.json")
    if len(tops) != 1:
        raise AttestationError(f"its index.json names {len(tops)} images, not one")
    top = tops[0]
    if top.get("mediaType") not in INDEX_TYPES:
        raise AttestationError("it is one image manifest, not an index: the engine kept no attestations beside it")
    return attested_in(top.get("digest"), blobs, platform)


def attested_in(index_digest: object, blobs: Mapping[str, bytes], platform: str) -> Attested:
    """The attestations of `platform`'s image in the image index named `index_digest`, its blobs read from
    `blobs` (by digest): the index names the image's manifest and, beside it, attestation manifests (annotated
    with the manifest's digest), whose layers are in-toto statements. AttestationError when the index is not
    there or not such an index (one image manifest: the engine kept no attestations)."""
    index = _json(blobs, index_digest, "image index")
    if index.get("mediaType") in IMAGE_TYPES or ("layers" in index and "manifests" not in index):
        raise AttestationError("it is one image manifest, not an index: the engine kept no attestations beside it")
    entries = _entries(index, "image index")
    os_name, _, architecture = platform.partition("/")
    images = [
        e.get("digest")
        for e in entries
        if isinstance(e.get("platform"), dict)
        and (e["platform"].get("os"), e["platform"].get("architecture")) == (os_name, architecture)
    ]
    if len(images) != 1 or not isinstance(images[0], str):
        raise AttestationError(f"its index names {len(images)} images of {platform}, not one")
    manifest = images[0]
    predicates: list[str] = []
    sbom: tuple[str, bytes] | None = None
    for entry in entries:
        annotations = entry.get("annotations")
        if not isinstance(annotations, dict) or annotations.get(REFERENCE_DIGEST) != manifest:
            continue
        layers = _json(blobs, entry.get("digest"), "attestation manifest").get("layers")
        for layer in layers if isinstance(layers, list) else []:
            if not isinstance(layer, dict) or layer.get("mediaType") != IN_TOTO:
                continue
            statement = _json(blobs, layer.get("digest"), "attestation")
            subjects = statement.get("subject")
            names = isinstance(subjects, list) and any(
                isinstance(s, dict) and isinstance(s.get("digest"), dict) and _names(s["digest"], manifest)
                for s in subjects
            )
            predicate = statement.get("predicateType")
            if names and isinstance(predicate, str):
                predicates.append(predicate)
                if predicate == SPDX_PREDICATE and sbom is None:
                    sbom = (layer["digest"], blobs[layer["digest"]])
    return Attested(manifest, tuple(predicates), sbom)
