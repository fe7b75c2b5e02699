"""An image's layers as the engine's containerd content store keeps them (content_store.stored_layers,
DockerEngine.stored_layers): its platform's manifest and configuration read by digest and hashed, the layer blobs
streamed through `ctr content get`; anything that is not an image's documents, or names other layers than
`docker image inspect` does, is left to the `docker save` read (None). `ctr` is test_content_store's stand-in; the
documents are literals made here."""

from __future__ import annotations

import gzip
import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.unit.engine.test_containerd_store import ATTRS, CONTAINERD, Image, engine_of
from tests.unit.engine.test_content_store import fake_ctr
from torchimages import engine
from torchimages.engine import content_store
from torchimages.engine.content_store import Unreadable

TARS = (b"base layer tar" * 100, b"venv layer tar" * 100)
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def documents(
    diff_ids: list[str] | None = None, platform: str = "amd64", config_digest: str | None = None
) -> tuple[str, dict[str, bytes]]:
    """An image of two gzip layers on the containerd store: its index's digest (its id) and every blob by digest."""
    zipped = [gzip.compress(t, mtime=0) for t in TARS]
    config = json.dumps({"rootfs": {"type": "layers", "diff_ids": diff_ids or [sha(t) for t in TARS]}}).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"digest": config_digest or sha(config), "size": len(config)},
            "layers": [{"digest": sha(z), "size": len(z)} for z in zipped],
        }
    ).encode()
    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": sha(manifest),
                    "size": len(manifest),
                    "platform": {"os": "linux", "architecture": platform},
                },
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": "sha256:" + "e" * 64,
                    "size": 1,
                    "platform": {"os": "unknown", "architecture": "unknown"},
                    "annotations": {
                        "vnd.docker.reference.type": "attestation-manifest",
                        "vnd.docker.reference.digest": sha(manifest),
                    },
                },
            ],
        }
    ).encode()
    return sha(index), {sha(b): b for b in (*zipped, config, manifest, index)}


def test_the_layers_are_the_platforms_manifests_blobs_and_its_configurations_diff_ids(tmp_path: Path) -> None:
    index, blobs = documents()
    store, calls = fake_ctr(tmp_path, blobs)
    found = content_store.stored_layers(store, index, "linux/amd64")
    zipped = [gzip.compress(t, mtime=0) for t in TARS]
    assert found.blobs == tuple(sha(z) for z in zipped)
    assert found.diff_ids == tuple(sha(t) for t in TARS)
    assert len(calls.read_text().splitlines()) == 3, "the index, the manifest, the configuration: no layer yet"
    with found.open(found.blobs[1]) as stream:
        assert stream.read() == zipped[1]


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"platform": "arm64"}, "with no image of linux/amd64"),
        ({"diff_ids": ["sha256:" + "1" * 64]}, "names another count of layers than its manifest"),
        ({"diff_ids": ["sha256:1", "sha256:2"]}, "names a layer by no sha256 digest"),
        ({"config_digest": "sha256:" + "9" * 64}, "not found"),
    ],
    ids=["another-platform", "another-count", "no-digest", "no-configuration"],
)
def test_documents_that_are_not_this_images_are_unreadable(tmp_path: Path, kwargs: dict[str, Any], said: str) -> None:
    index, blobs = documents(**kwargs)
    store, _ = fake_ctr(tmp_path, blobs)
    with pytest.raises(Unreadable, match=said):
        content_store.stored_layers(store, index, "linux/amd64")


def test_a_configuration_whose_bytes_are_not_its_digest_is_unreadable(tmp_path: Path) -> None:
    index, blobs = documents()
    config = next(d for d, b in blobs.items() if b.startswith(b'{"rootfs"'))
    blobs[config] = blobs[config].replace(b"layers", b"LAYERS")
    store, _ = fake_ctr(tmp_path, blobs)
    with pytest.raises(Unreadable, match="does not hash to its name"):
        content_store.stored_layers(store, index, "linux/amd64")


def engine_holding(tmp_path: Path, blobs: dict[str, bytes], attrs: dict[str, Any]) -> Any:
    tmp_path.mkdir()
    store, _ = fake_ctr(tmp_path, blobs)
    found, sdk = engine_of(CONTAINERD)
    found.__dict__.update(_content_stores=(store,))
    known = Image()
    known.attrs = attrs
    sdk.images.get = lambda reference: known  # type: ignore[method-assign]
    return found


def test_the_engine_reads_the_stored_layers_only_where_they_are_the_ones_inspect_names(tmp_path: Path) -> None:
    index, blobs = documents()
    inspected = {**ATTRS, "Id": index, "Os": "linux", "Architecture": "amd64"}
    same = {**inspected, "RootFS": {"Layers": [sha(t) for t in TARS]}}
    assert engine_holding(tmp_path / "a", blobs, same).stored_layers("r/x:1") is not None
    other = {**inspected, "RootFS": {"Layers": [sha(t) for t in reversed(TARS)]}}
    assert engine_holding(tmp_path / "b", blobs, other).stored_layers("r/x:1") is None
    no_platform = {**same, "Architecture": ""}
    assert engine_holding(tmp_path / "c", blobs, no_platform).stored_layers("r/x:1") is None
    missing = engine_holding(tmp_path / "d", {}, same)
    assert missing.stored_layers("r/x:1") is None, "a store that holds nothing of it: the save is read"
    classic = engine_holding(tmp_path / "e", blobs, same)
    classic.__dict__.update(_content_stores=())
    assert classic.stored_layers("r/x:1") is None


def test_an_image_whose_id_is_one_manifest_is_read_without_an_index(tmp_path: Path) -> None:
    zipped = gzip.compress(TARS[0], mtime=0)
    config = json.dumps({"rootfs": {"diff_ids": [sha(TARS[0])]}}).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"digest": sha(config)},
            "layers": [{"digest": sha(zipped), "size": len(zipped)}],
        }
    ).encode()
    store, _ = fake_ctr(tmp_path, {sha(b): b for b in (zipped, config, manifest)})
    found = content_store.stored_layers(store, sha(manifest), "linux/amd64")
    assert (found.blobs, found.diff_ids) == ((sha(zipped),), (sha(TARS[0]),))


def test_a_store_that_does_not_hold_the_image_is_passed_for_the_next(tmp_path: Path) -> None:
    index, blobs = documents()
    found = engine_holding(
        tmp_path / "a",
        blobs,
        {**ATTRS, "Id": index, "Os": "linux", "Architecture": "amd64", "RootFS": {"Layers": [sha(t) for t in TARS]}},
    )
    (tmp_path / "empty").mkdir()
    empty, asked = fake_ctr(tmp_path / "empty", {})
    found.__dict__.update(_content_stores=(empty, *found._content_stores))
    assert found.stored_layers("r/x:1") is not None
    assert len(asked.read_text().splitlines()) == 1, "the first store was asked, and passed"


def test_no_such_image_is_the_engines_error(tmp_path: Path) -> None:
    _, blobs = documents()
    found = engine_holding(tmp_path / "a", blobs, ATTRS)

    def missing(reference: str) -> Any:
        raise docker.errors.ImageNotFound("no such image")

    found.sdk.images.get = missing
    with pytest.raises(engine.EngineError, match="no image r/x:1 here to read its layers"):
        found.stored_layers("r/x:1")


def test_a_cancel_stops_a_layer_stream_and_is_said(tmp_path: Path) -> None:
    index, blobs = documents()
    store, _ = fake_ctr(tmp_path, blobs)
    cancelled = threading.Event()
    found = content_store.stored_layers(store, index, "linux/amd64", cancelled)
    cancelled.set()
    with pytest.raises(engine.EngineError, match="cancelled"), found.open(found.blobs[0]) as stream:
        stream.read()


def test_a_configuration_past_its_bound_is_unreadable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index, blobs = documents()
    store, _ = fake_ctr(tmp_path, blobs)
    monkeypatch.setattr(content_store, "CONFIG_BYTES", 10)
    with pytest.raises(Unreadable):
        content_store.stored_layers(store, index, "linux/amd64")


def test_a_platform_entry_that_is_an_index_is_unreadable(tmp_path: Path) -> None:
    index, blobs = documents()
    outer = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": index,
                    "size": len(blobs[index]),
                    "platform": {"os": "linux", "architecture": "amd64"},
                }
            ],
        }
    ).encode()
    store, _ = fake_ctr(tmp_path, {**blobs, sha(outer): outer})
    with pytest.raises(Unreadable, match="is an index, not an image manifest"):
        content_store.stored_layers(store, sha(outer), "linux/amd64")
