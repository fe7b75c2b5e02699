"""An OCI image layout (image-spec's `oci-layout`, `index.json`, `blobs/`) holding one index under one name, as a
tar: what `docker load` on the containerd image store takes to name an index whose manifests it holds already
(containerd's import reads what the archive lacks from its content store). Pure."""

from __future__ import annotations

import io
import json
import tarfile

from torchimages import registry
from torchimages.engine import manifests

NAME_ANNOTATION = "io.containerd.image.name"  # the image's name on import (the full name: docker.io/library/...)


def _member(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    archive.addfile(info, io.BytesIO(data))


def layout(reference: str, document: bytes) -> bytes:
    """A tar of the OCI layout naming the index `document` `reference` (`repository:tag`, given its full name);
    manifests.ManifestError where `document` is no index, values.BadValue where `reference` is no reference."""
    found = manifests.parse(document, reference)
    if not found.is_index:
        raise manifests.ManifestError(f"{reference}: a {found.media_type} is not an index")
    top = {
        "schemaVersion": 2,
        "mediaType": manifests.OCI_INDEX,
        "manifests": [
            {
                "mediaType": found.media_type,
                "digest": found.digest,
                "size": found.size,
                "annotations": {NAME_ANNOTATION: registry.full_name(reference)},
            }
        ],
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        _member(archive, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        _member(archive, "index.json", json.dumps(top, sort_keys=True).encode())
        _member(archive, "blobs/sha256/" + found.digest.removeprefix("sha256:"), document)
    return buffer.getvalue()
