"""Reading an image's attestations from its `docker save` on the containerd image store (an OCI layout): the
layout's index names the image's index, which names the platform's manifest and the attestation manifests beside
it, whose layers are in-toto statements. The layouts are literals here, shaped as Docker 26.1 saved a built image
(2026-12-07); any JSON is answered or refused with AttestationError, never another exception."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchimages.engine import AttestationError, Attested, read_attested

IMAGE = "sha256:" + "1" * 64
OTHER = "sha256:" + "2" * 64
INDEX, ATTEST, SBOM, PROV = ("sha256:" + c * 64 for c in "abcd")
SPDX, SLSA = "https://spdx.dev/Document", "https://slsa.dev/provenance/v0.2"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def statement(predicate: str, subject: str = IMAGE) -> bytes:
    hex_digest = subject.split(":")[1]
    return json.dumps(
        {
            "_type": "https://in-toto.io/Statement/v0.1",
            "predicateType": predicate,
            "subject": [{"name": "pkg:docker/x@y", "digest": {"sha256": hex_digest}}],
            "predicate": {},
        }
    ).encode()


def layout(
    sbom_subject: str = IMAGE, refers: str = IMAGE, platform: dict[str, str] | None = None
) -> tuple[bytes, dict[str, bytes]]:
    top = {"schemaVersion": 2, "manifests": [{"mediaType": OCI_INDEX, "digest": INDEX, "size": 856}]}
    index = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [
            {
                "mediaType": OCI_MANIFEST,
                "digest": IMAGE,
                "platform": platform or {"architecture": "amd64", "os": "linux"},
            },
            {
                "mediaType": OCI_MANIFEST,
                "digest": ATTEST,
                "annotations": {
                    "vnd.docker.reference.digest": refers,
                    "vnd.docker.reference.type": "attestation-manifest",
                },
                "platform": {"architecture": "unknown", "os": "unknown"},
            },
        ],
    }
    attestation = {
        "schemaVersion": 2,
        "layers": [
            {
                "mediaType": "application/vnd.in-toto+json",
                "digest": SBOM,
                "annotations": {"in-toto.io/predicate-type": SPDX},
            },
            {
                "mediaType": "application/vnd.in-toto+json",
                "digest": PROV,
                "annotations": {"in-toto.io/predicate-type": SLSA},
            },
        ],
    }
    blobs = {
        INDEX: json.dumps(index).encode(),
        ATTEST: json.dumps(attestation).encode(),
        SBOM: statement(SPDX, sbom_subject),
        PROV: statement(SLSA),
    }
    return json.dumps(top).encode(), blobs


def test_both_attestations_of_the_platforms_image_are_read() -> None:
    top, blobs = layout()
    found = read_attested(top, blobs, "linux/amd64")
    assert found == Attested(IMAGE, (SPDX, SLSA))
    assert found.problems() == []
    assert found.sbom == (SBOM, blobs[SBOM]), "the SPDX statement is kept as stored, for the report's SBOM"


def test_a_statement_about_another_image_does_not_count() -> None:
    found = read_attested(*layout(sbom_subject=OTHER), "linux/amd64")
    assert found == Attested(IMAGE, (SLSA,))
    assert found.sbom is None, "an SBOM about another image is not this one's"
    assert found.problems() == [f"attestations: no SPDX SBOM names its manifest {IMAGE}"]


def test_an_attestation_manifest_about_another_image_does_not_count() -> None:
    found = read_attested(*layout(refers=OTHER), "linux/amd64")
    assert found == Attested(IMAGE, ())
    assert len(found.problems()) == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda top, blobs: (b"not json", blobs), "its index.json is not JSON"),
        (lambda top, blobs: (b"[]", blobs), "its index.json is not a JSON object"),
        (lambda top, blobs: (b'{"manifests": []}', blobs), "its index.json names 0 images, not one"),
        (
            lambda top, blobs: (top.replace(OCI_INDEX.encode(), OCI_MANIFEST.encode()), blobs),
            "it is one image manifest, not an index: the engine kept no attestations beside it",
        ),
        (lambda top, blobs: (top, {k: v for k, v in blobs.items() if k != INDEX}), "is not in the image's content"),
        (lambda top, blobs: (top, {**blobs, INDEX: b"\xff\xfe"}), f"the image index {INDEX} is not JSON"),
        (
            lambda top, blobs: (top, {**blobs, ATTEST: b"[1]"}),
            f"the attestation manifest {ATTEST} is not a JSON object",
        ),
    ],
)
def test_a_layout_that_is_not_a_built_images_is_refused(change: Any, message: str) -> None:
    changed_top, changed_blobs = change(*layout())
    with pytest.raises(AttestationError, match=message):
        read_attested(changed_top, changed_blobs, "linux/amd64")


def test_another_platforms_image_is_not_this_ones() -> None:
    with pytest.raises(AttestationError, match="its index names 0 images of linux/arm64, not one"):
        read_attested(*layout(), "linux/arm64")
    assert read_attested(*layout(platform={"architecture": "arm64", "os": "linux"}), "linux/arm64").manifest == IMAGE


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=8)
    | st.sampled_from(
        [IMAGE, INDEX, ATTEST, SBOM, SPDX, OCI_INDEX, OCI_MANIFEST, "linux", "amd64", "application/vnd.in-toto+json"]
    ),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "manifests",
                    "digest",
                    "mediaType",
                    "platform",
                    "annotations",
                    "layers",
                    "subject",
                    "predicateType",
                    "os",
                    "architecture",
                    "sha256",
                    "vnd.docker.reference.digest",
                    "x",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=600, deadline=None)
@given(JSON, st.dictionaries(st.sampled_from([INDEX, ATTEST, SBOM, PROV]), JSON, max_size=4))
def test_any_json_is_answered_or_refused_with_attestation_error(top: Any, blobs: dict[str, Any]) -> None:
    try:
        found = read_attested(
            json.dumps(top).encode(), {k: json.dumps(v).encode() for k, v in blobs.items()}, "linux/amd64"
        )
    except AttestationError:
        return
    assert isinstance(found, Attested) and all(isinstance(p, str) for p in found.predicates)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([INDEX, ATTEST, SBOM, PROV]), JSON)
def test_any_blob_of_a_real_layout_replaced_is_answered_or_refused(blob: str, value: Any) -> None:
    """Past the layout's checks: each blob of a built image's layout in turn replaced by any JSON (a manifest's
    `layers` a number, a subject a string...)."""
    top, blobs = layout()
    try:
        found = read_attested(top, {**blobs, blob: json.dumps(value).encode()}, "linux/amd64")
    except AttestationError:
        return
    assert found.manifest == IMAGE and set(found.predicates) <= {SPDX, SLSA}


def test_a_manifest_whose_layers_are_no_list_counts_no_statement() -> None:
    top, blobs = layout()
    found = read_attested(top, {**blobs, ATTEST: b'{"layers": 5}'}, "linux/amd64")
    assert found == Attested(IMAGE, ())


def test_another_os_or_digest_algorithm_or_a_second_image_does_not_pass() -> None:
    with pytest.raises(AttestationError, match="names 0 images of linux/amd64"):
        read_attested(*layout(platform={"architecture": "amd64", "os": "windows"}), "linux/amd64")
    top, blobs = layout()
    sha512 = json.loads(blobs[SBOM])
    sha512["subject"][0]["digest"] = {"sha512": IMAGE.split(":")[1]}
    assert read_attested(top, {**blobs, SBOM: json.dumps(sha512).encode()}, "linux/amd64").predicates == (SLSA,)
    two = json.dumps({"manifests": [json.loads(top)["manifests"][0]] * 2}).encode()
    with pytest.raises(AttestationError, match="names 2 images, not one"):
        read_attested(two, blobs, "linux/amd64")


def test_the_first_spdx_statement_about_the_image_is_the_one_kept() -> None:
    top, blobs = layout()
    second = statement(SPDX).replace(b'"predicate": {}', b'"predicate": {"second": true}')
    blobs[OTHER] = second
    attestation = json.loads(blobs[ATTEST])
    attestation["layers"].append({"mediaType": "application/vnd.in-toto+json", "digest": OTHER})
    blobs[ATTEST] = json.dumps(attestation).encode()
    found = read_attested(top, blobs, "linux/amd64")
    assert found.predicates == (SPDX, SLSA, SPDX)
    assert found.sbom == (SBOM, blobs[SBOM]), "the first, as the attestation manifest lists them"
