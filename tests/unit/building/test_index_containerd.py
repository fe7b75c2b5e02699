"""The index of several platforms on the containerd image store (issue 46): there an image's id is the digest of
its index (the platform's manifest and its attestations), and that index is what the engine pushed. So a
platform's pushed image is the verified one when the registry serves the very bytes of that digest (checked: a
registry serving other bytes for a digest is refused), without pulling it back; where the id is not what was
pushed (the classic store: the configuration's digest) it is pulled back and compared as before. Against the
fake engine: the registry's documents and the ids are literals here."""

from __future__ import annotations

import json

import pytest

from tests.fakes import OCI_INDEX, OCI_MANIFEST, FakeEngine
from torchimages.building import index
from torchimages.combination import Image
from torchimages.engine import ImageInfo, manifests

REPOSITORY = "registry.example.org/t/pytorch"
PLATFORM_MANIFEST = json.dumps(
    {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {"digest": "sha256:" + "3" * 64, "size": 9}, "layers": []}
).encode()
MANIFEST = manifests.digest_of(PLATFORM_MANIFEST)


def platform_index() -> bytes:
    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": MANIFEST,
                    "size": len(PLATFORM_MANIFEST),
                    "platform": {"os": "linux", "architecture": "arm64"},
                },
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": "sha256:" + "2" * 64,
                    "size": 2,
                    "platform": {"os": "unknown", "architecture": "unknown"},
                    "annotations": {
                        "vnd.docker.reference.type": "attestation-manifest",
                        "vnd.docker.reference.digest": MANIFEST,
                    },
                },
            ],
        }
    ).encode()


def image_of(reference: str) -> Image:
    class Found:
        repository = REPOSITORY
        platform = "linux/arm64"
        platform_reference = reference

    return Found()  # type: ignore[return-value]


def engine_with(local_id: str) -> FakeEngine:
    engine = FakeEngine()
    reference = f"{REPOSITORY}:2.9.1-cpu-runtime-arm64"
    engine.add(ImageInfo(reference, local_id, {}, {}, "", ()))
    return engine


def test_an_image_whose_id_is_the_pushed_index_is_not_pulled_back() -> None:
    served = platform_index()
    pushed = manifests.digest_of(served)
    engine = engine_with(pushed)
    engine.served[f"{REPOSITORY}@{pushed}"] = served
    engine.served[f"{REPOSITORY}@{MANIFEST}"] = PLATFORM_MANIFEST
    image = image_of(f"{REPOSITORY}:2.9.1-cpu-runtime-arm64")
    found = index.platform_manifest(engine, REPOSITORY, f"{REPOSITORY}@{pushed}", "linux/arm64")
    assert found == index.PlatformImage(MANIFEST, f"{REPOSITORY}@{pushed}", ("sha256:" + "2" * 64,))
    assert index.pulled_back(engine, image, MANIFEST, pushed) == []
    assert engine.pulled == []


def test_an_image_whose_id_is_not_what_was_pushed_is_pulled_back_and_compared() -> None:
    engine = engine_with("sha256:" + "c" * 64)  # the classic store's id: its configuration's digest
    image = image_of(f"{REPOSITORY}:2.9.1-cpu-runtime-arm64")
    problems = index.pulled_back(engine, image, MANIFEST, "sha256:" + "d" * 64)
    assert engine.pulled == [f"{REPOSITORY}@{MANIFEST}"]
    assert problems == [
        f"{REPOSITORY}@{MANIFEST} could not be pulled back: pulling {REPOSITORY}@{MANIFEST} failed: manifest unknown"
    ]


def test_a_registry_serving_other_bytes_for_a_digest_is_refused() -> None:
    served = platform_index()
    claimed = "sha256:" + "e" * 64
    engine = engine_with(claimed)
    engine.served[f"{REPOSITORY}@{claimed}"] = served
    with pytest.raises(manifests.ManifestError, match=f"the registry serves bytes of {manifests.digest_of(served)}"):
        index.platform_manifest(engine, REPOSITORY, f"{REPOSITORY}@{claimed}", "linux/arm64")
