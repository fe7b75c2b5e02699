"""The containerd image store's answers read as the classic store's were (issue 46). An image's size is its
uncompressed layers' on either store: the classic store's `docker image inspect` Size is that; the containerd
store's is the compressed content's (421 MB of a CPU runtime whose layers hold 1.49 GB, Docker 26.1.5,
2026-12-07), so there the layers' own sizes (its history) are added. A zstd push read back: there an id is the
digest of a manifest or an index, never the configuration's. The engine's answers are literals here (a stand-in
SDK)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from torchimages import engine

ATTRS = {"Id": "sha256:" + "a" * 64, "Size": 421_229_050, "Config": {}, "RootFS": {"Layers": []}}
HISTORY: list[dict[str, Any]] = [
    {"CreatedBy": "CMD", "Size": 0},
    {"CreatedBy": "RUN venv", "Size": 797_000_000},
    {"Size": 138_000_000},
]
CLASSIC = {"DriverStatus": [["Backing Filesystem", "extfs"]]}
CONTAINERD = {"DriverStatus": [["driver-type", "io.containerd.snapshotter.v1"]]}


class Image:
    attrs = ATTRS
    foreign = False  # another platform's index: Docker 26 answers its history with 404

    def history(self) -> list[dict[str, Any]]:
        if self.foreign:
            raise docker.errors.NotFound("no image for linux/amd64")
        return HISTORY


class Pulled:
    def __init__(self, attrs: dict[str, Any]) -> None:
        self.attrs, self.id = attrs, attrs["Id"]


class Images:
    pulled_attrs: dict[str, Any] = ATTRS

    def get(self, reference: str) -> Image:
        if reference != "r/x:1":
            raise docker.errors.ImageNotFound(reference)
        return Image()

    def pull(self, repository: str, tag: str) -> Pulled:
        return Pulled(self.pulled_attrs)


class Sdk:
    def __init__(self, info: dict[str, Any]) -> None:
        self.images, self._info = Images(), info
        self.asked = 0

    def info(self) -> dict[str, Any]:
        self.asked += 1
        return self._info


def engine_of(info: dict[str, Any]) -> tuple[engine.DockerEngine, Sdk]:
    found = engine.DockerEngine.__new__(engine.DockerEngine)
    sdk = Sdk(info)
    found.__dict__.update(sdk=sdk, _errors=docker.errors, _docker_cli="docker", _client=None, _named_contexts=None)
    return found, sdk


def test_the_classic_stores_size_is_inspects() -> None:
    found, _ = engine_of(CLASSIC)
    info = found.inspect("r/x:1")
    assert info is not None and info.size == 421_229_050


def test_the_containerd_stores_size_is_the_layers_added_and_the_store_asked_once() -> None:
    found, sdk = engine_of(CONTAINERD)
    first, second = found.inspect("r/x:1"), found.inspect("r/x:1")
    assert first is not None and first.size == 935_000_000 == (second.size if second else None)
    assert sdk.asked == 1
    assert found.inspect("r/none:1") is None
    Image.foreign = True
    try:
        other = found.inspect("r/x:1")
        assert other is not None and other.size == 0  # not known: never an error, never the compressed Size
        with pytest.raises(engine.EngineError, match="no history of another platform's image kept in an index"):
            found.history("r/x:1")
    finally:
        Image.foreign = False


def test_an_image_of_unknown_size_fails_its_budget_and_shows_no_size() -> None:
    from tests.fakes import FakeEngine
    from torchimages.building import readings

    fake = FakeEngine()
    fake.add(engine.ImageInfo("r/x:1", "sha256:" + "a" * 64, {}, {}, "", (), size=0))

    class Budgeted:
        size_budget, flavor = 10**9, "runtime"

    assert readings.size(fake, "r/x:1") is None
    problems = readings.over_budget(fake, Budgeted(), "r/x:1")  # type: ignore[arg-type]
    assert problems == ["could not read the size of r/x:1: the engine gives none for it"]


VERIFIED = engine.ImageInfo("r/x:1", "sha256:" + "a" * 64, {"l": "1"}, {"E": "1"}, "", ("sha256:" + "b" * 64,))
ZSTD_PULLED = {  # the zstd manifest pulled by digest: its id is that digest on the containerd store
    "Id": "sha256:" + "f" * 64,
    "Config": {"Labels": {"l": "1"}, "Env": ["E=1"]},
    "RootFS": {"Layers": ["sha256:" + "b" * 64]},
}


RECORDED_APART = " (this store records it apart from the image's own names)"


def test_a_zstd_read_back_on_the_containerd_store_compares_the_layers_and_configuration() -> None:
    """The zstd manifest's id is not the verified index's there: the same layers, labels, environment and user
    make it the verified image; other layers do not."""
    found, sdk = engine_of(CONTAINERD)
    sdk.images.pulled_attrs = ZSTD_PULLED
    said: list[str] = []
    assert found._read_back("reg/r", "sha256:" + "f" * 64, VERIFIED, said.append) == []
    assert said == [f"reg/r@sha256:{'f' * 64}: pushed with zstd and read back" + RECORDED_APART]
    sdk.images.pulled_attrs = {**ZSTD_PULLED, "RootFS": {"Layers": ["sha256:" + "c" * 64]}}
    assert found._read_back("reg/r", "sha256:" + "f" * 64, VERIFIED, print) == [
        f"reg/r@sha256:{'f' * 64}: the registry holds an image of other layers or configuration than the verified one"
    ]


def test_a_zstd_read_back_on_the_classic_store_compares_the_ids() -> None:
    found, sdk = engine_of(CLASSIC)
    sdk.images.pulled_attrs = ZSTD_PULLED  # the same layers, another id: not the verified image there
    assert found._read_back("reg/r", "sha256:" + "f" * 64, VERIFIED, print) == [
        f"reg/r@sha256:{'f' * 64}: the registry holds image sha256:{'f' * 64}, not the verified sha256:{'a' * 64}"
    ]


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def image_blobs(tamper: bool = False) -> tuple[str, dict[str, bytes]]:
    """A built image on the containerd store, content-addressed: its index's digest (the image's id there) and its
    blobs by digest: a gzip layer blob, the image manifest, its SBOM and provenance statements, the attestation
    manifest, the index."""
    layer = gzip.compress(b"layer tar" * 1000, mtime=0)
    manifest = json.dumps({"schemaVersion": 2, "layers": [{"digest": sha(layer), "size": len(layer)}]}).encode()
    statements = [
        json.dumps({"predicateType": p, "subject": [{"digest": {"sha256": sha(manifest)[7:]}}]}).encode()
        for p in ("https://spdx.dev/Document", "https://slsa.dev/provenance/v0.2")
    ]
    attestation = json.dumps(
        {"layers": [{"mediaType": "application/vnd.in-toto+json", "digest": sha(s)} for s in statements]}
    ).encode()
    index = json.dumps(
        {
            "manifests": [
                {"digest": sha(manifest), "platform": {"os": "linux", "architecture": "amd64"}},
                {"digest": sha(attestation), "annotations": {"vnd.docker.reference.digest": sha(manifest)}},
            ]
        }
    ).encode()
    blobs = {sha(b): b for b in (layer, manifest, *statements, attestation, index)}
    if tamper:  # the SBOM statement's bytes under its name are other bytes
        blobs[sha(statements[0])] = statements[0].replace(b"spdx", b"SPDX")
    return sha(index), blobs


def saved_layout(tmp_path: Path, tamper: bool = False) -> Path:
    """A `docker save` of the image of image_blobs: its blobs and index.json."""
    index, blobs = image_blobs(tamper)
    top = json.dumps({"manifests": [{"mediaType": "application/vnd.oci.image.index.v1+json", "digest": index}]})
    blobs["index.json"] = top.encode()
    archive = tmp_path / "saved.tar"
    with tarfile.open(archive, "w") as tar:
        for name, data in ((d.replace("sha256:", "blobs/sha256/"), b) for d, b in sorted(blobs.items())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return archive


def engine_saving(tmp_path: Path, archive: Path) -> engine.DockerEngine:
    """A DockerEngine whose `docker save` prints `archive` (a stand-in CLI) and whose SDK knows r/x:1."""
    cli = tmp_path / "docker"
    cli.write_text(f'#!/bin/sh\n[ "$1" = save ] && exec cat {archive}\nexit 3\n')
    cli.chmod(0o755)
    found, _ = engine_of(CONTAINERD)
    found.__dict__.update(_docker_cli=str(cli), _content_stores=())  # no content store: the save is read
    return found


def test_the_attestations_are_read_from_the_saved_image_and_each_blob_hashed(tmp_path: Path) -> None:
    found = engine_saving(tmp_path, saved_layout(tmp_path))
    attested = found.attestations("r/x:1", "linux/amd64")
    assert attested.predicates == ("https://spdx.dev/Document", "https://slsa.dev/provenance/v0.2")
    assert attested.problems() == []
    (tmp_path / "t").mkdir()
    tampered = engine_saving(tmp_path / "t", saved_layout(tmp_path / "t", tamper=True))
    with pytest.raises(engine.EngineError, match="is not in the image's content"):
        tampered.attestations("r/x:1", "linux/amd64")  # a blob whose bytes are not its name is not read


def test_a_zstd_read_back_with_other_labels_environment_or_user_is_not_the_verified_image() -> None:
    found, sdk = engine_of(CONTAINERD)
    for changed in (
        {"Config": {"Labels": {"l": "2"}, "Env": ["E=1"]}},
        {"Config": {"Labels": {"l": "1"}, "Env": ["E=2"]}},
        {"Config": {"Labels": {"l": "1"}, "Env": ["E=1"], "User": "0"}},
    ):
        sdk.images.pulled_attrs = {**ZSTD_PULLED, **changed}
        problems = found._read_back("reg/r", "sha256:" + "f" * 64, VERIFIED, print)
        assert problems and "other layers or configuration" in problems[0], changed


def test_the_compressed_size_is_asked_with_verbose_and_leaves_the_attestation_out(tmp_path: Path) -> None:
    listing = [
        {"Descriptor": {"platform": {"os": "linux", "architecture": "amd64"}},
         "OCIManifest": {"config": {"size": 10}, "layers": [{"size": 400}]}},
        {"Descriptor": {"platform": {"os": "unknown", "architecture": "unknown"}},
         "OCIManifest": {"config": {"size": 1}, "layers": [{"size": 5000}]}},
    ]  # fmt: skip
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps(listing))
    cli = tmp_path / "docker"
    cli.write_text(f'#!/bin/sh\n[ "$1 $2 $3" = "manifest inspect --verbose" ] && exec cat {answer}\nexit 3\n')
    cli.chmod(0o755)
    found, _ = engine_of(CONTAINERD)
    found.__dict__.update(_docker_cli=str(cli))
    assert found.compressed_size("reg.example/r:1") == 410
