"""Image metadata from the Docker daemon (labels, id, digest) for the docker backend."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class ImageInfo:
    """What `docker image inspect` says about an image."""

    id: str
    repo_digests: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def digest(self) -> str:
        """The registry digest when the image was pushed or pulled, else its id."""
        return self.repo_digests[0] if self.repo_digests else self.id


def _from_attrs(attrs: Mapping[str, Any]) -> ImageInfo:
    config = attrs.get("Config") or {}
    return ImageInfo(
        id=str(attrs.get("Id", "")),
        repo_digests=tuple(attrs.get("RepoDigests") or ()),
        labels=MappingProxyType(dict(config.get("Labels") or {})),
    )


def _inspect_cli(kind: str, ref: str) -> dict[str, Any]:
    out = subprocess.run(["docker", kind, "inspect", ref], check=True, capture_output=True, text=True).stdout
    data = json.loads(out)
    return dict(data[0])


def inspect_image(ref: str) -> ImageInfo:
    """Inspect an image through the docker SDK, or the docker CLI where the SDK is absent."""
    try:
        import docker
    except ImportError:
        return _from_attrs(_inspect_cli("image", ref))
    client = docker.from_env()
    try:
        return _from_attrs(client.images.get(ref).attrs)
    finally:
        client.close()


def container_image(container: str) -> str:
    """The image id a running container was started from."""
    try:
        import docker
    except ImportError:
        return str(_inspect_cli("container", container).get("Image", ""))
    client = docker.from_env()
    try:
        return str(client.containers.get(container).attrs.get("Image", ""))
    finally:
        client.close()
