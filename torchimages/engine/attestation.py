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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
