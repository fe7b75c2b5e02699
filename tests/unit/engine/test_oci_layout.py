"""The OCI layout `docker load` takes to name an index on the containerd store (oci_layout.py): `oci-layout`,
`index.json` naming the index by the image's full name, and the index itself as a blob named by its digest.
The expected names and digests are literals, never computed by the code under test."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from torchimages import values
from torchimages.engine import manifests, oci_layout

INDEX = b'{"manifests":[],"mediaType":"application/vnd.oci.image.index.v1+json","schemaVersion":2}'
INDEX_DIGEST = "sha256:93e16ab8fb1bfb08f051a420835b414851eaeedb9f7105d26dacb84f26d810b5"


def members(archive: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("reference", "full"),
    [
        ("torchimages/pytorch:2.9.1-cpu-runtime", "docker.io/torchimages/pytorch:2.9.1-cpu-runtime"),
        ("pytorch:x", "docker.io/library/pytorch:x"),
        ("127.0.0.1:5000/team/pytorch:x", "127.0.0.1:5000/team/pytorch:x"),
        ("torchimages-tmp/index:t-0123456789", "docker.io/torchimages-tmp/index:t-0123456789"),
    ],
)
def test_the_layout_names_the_index_by_the_full_name_and_holds_it_as_its_blob(reference: str, full: str) -> None:
    found = members(oci_layout.layout(reference, INDEX))
    digest = INDEX_DIGEST
    assert sorted(found) == ["blobs/sha256/" + digest.removeprefix("sha256:"), "index.json", "oci-layout"]
    assert json.loads(found["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    assert found["blobs/sha256/" + digest.removeprefix("sha256:")] == INDEX
    assert json.loads(found["index.json"]) == {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.index.v1+json",
                "digest": digest,
                "size": len(INDEX),
                "annotations": {"io.containerd.image.name": full},
            }
        ],
    }


def test_an_image_manifest_or_no_reference_is_refused() -> None:
    manifest = b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"}'
    with pytest.raises(manifests.ManifestError, match="is not an index"):
        oci_layout.layout("torchimages/pytorch:x", manifest)
    with pytest.raises(values.BadValue):
        oci_layout.layout("Not A Reference", INDEX)
