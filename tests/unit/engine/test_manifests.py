"""What the registry serves is read within a deadline and at most 4 MiB (engine/manifests.py, DockerEngine's
`manifest`, `create_index` and `point_tag`): a docker client that answers a manifest of megabytes, or never
answers, is refused with a message that says which, and a registry's `not found` is no manifest. The docker
client is a shell script; its output is the test's literal bytes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from torchimages import engine
from torchimages.engine import manifests
from torchimages.engine.requests import BuildClient

INDEX = {
    "schemaVersion": 2,
    "mediaType": manifests.OCI_INDEX,
    "manifests": [
        {
            "mediaType": manifests.DOCKER_MANIFEST,
            "digest": "sha256:" + "1" * 64,
            "size": 523,
            "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"},
        },
        {
            "mediaType": manifests.OCI_MANIFEST,
            "digest": "sha256:" + "2" * 64,
            "size": 840,
            "platform": {"os": "unknown", "architecture": "unknown"},
            "annotations": {"vnd.docker.reference.type": "attestation-manifest"},
        },
    ],
}


ENTRY = b'{"schemaVersion": 2, "manifests": [{"mediaType": "x", "digest": "sha256:' + b"1" * 64 + b'", "size": SIZE}]}'


def docker_engine(tmp_path: Path, script: str) -> engine.DockerEngine:
    """A DockerEngine whose docker client (and buildx) is `script`; no engine is connected."""
    cli = tmp_path / "docker"
    cli.write_text("#!/bin/sh\n" + script)
    cli.chmod(0o755)
    found = engine.DockerEngine.__new__(engine.DockerEngine)
    client = BuildClient((str(cli), "buildx", "build"), ())
    found.__dict__.update(sdk=None, _errors=docker.errors, _docker_cli=str(cli), _client=client, _named_contexts=None)
    return found


def test_a_manifest_comes_back_byte_for_byte(tmp_path: Path) -> None:
    raw = json.dumps(INDEX, indent=3).encode()
    (tmp_path / "raw").write_bytes(raw)
    found = docker_engine(tmp_path, f'[ "$*" = "buildx imagetools inspect --raw r/a:1" ] && cat {tmp_path}/raw\n')
    assert found.manifest("r/a:1") == raw
    document = manifests.parse(raw, "r/a:1")
    assert document.digest == manifests.digest_of(raw) and document.is_index
    (entry,) = manifests.images(document)  # the attestation left out; arm64's v8 variant is linux/arm64
    assert (entry.platform, entry.size) == ("linux/arm64", 523)
    assert manifests.platform_entry(document, "linux/arm64", "r/a:1") == entry


def test_a_manifest_of_megabytes_is_refused_and_its_writer_stopped(tmp_path: Path) -> None:
    found = docker_engine(tmp_path, "head -c 5000000 /dev/zero; sleep 30\n")
    started = time.monotonic()
    with pytest.raises(engine.EngineError) as caught:
        found.manifest("r/a:1")
    assert str(caught.value) == "r/a:1: the registry serves more than 4 MiB there, which no manifest is"
    assert time.monotonic() - started < 10


def test_a_registry_that_never_answers_meets_the_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHIMAGES_REGISTRY_DEADLINE_S", "0.5")
    found = docker_engine(tmp_path, "printf '{'; exec sleep 30\n")
    started = time.monotonic()
    with pytest.raises(engine.EngineError) as caught:
        found.manifest("r/a:1")
    assert str(caught.value) == "r/a:1: no answer from its registry within 0.5 s (TORCHIMAGES_REGISTRY_DEADLINE_S)"
    create = found.point_tag("r/a", "1", "sha256:" + "1" * 64)
    assert time.monotonic() - started < 5
    (problem,) = create
    assert "did not finish within 0.5 s (TORCHIMAGES_REGISTRY_DEADLINE_S)" in problem


def test_not_found_is_no_manifest_and_another_error_says_why(tmp_path: Path) -> None:
    found = docker_engine(tmp_path, 'echo "ERROR: r/a:1: not found" >&2; exit 1\n')
    assert found.manifest("r/a:1") is None
    denied = docker_engine(
        tmp_path, 'echo "ERROR: unexpected status from HEAD request: 401 Unauthorized" >&2; exit 1\n'
    )
    with pytest.raises(engine.EngineError, match=r"^r/a:1 could not be read from its registry: unexpected status"):
        denied.manifest("r/a:1")


def test_a_tag_is_pointed_by_a_carbon_copy_of_one_source_without_annotations(tmp_path: Path) -> None:
    found = docker_engine(tmp_path, f'echo "$*" > {tmp_path}/args\n')
    digest = "sha256:" + "1" * 64
    assert found.point_tag("r/a", "1.0", digest) == []
    assert (tmp_path / "args").read_text() == f"buildx imagetools create --tag r/a:1.0 r/a@{digest}\n"


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (b"", "not a manifest (not JSON"),
        (b"\xff\xfe", "not a manifest (not JSON"),
        (b'{"schemaVersion": 2, "manifests": {}}', "an index without a list of manifests"),
        (b'{"schemaVersion": 2, "manifests": [1]}', "its manifests[0] is not an object"),
        (b'{"schemaVersion": 2, "manifests": [{"mediaType": "x", "digest": "sha256:1", "size": 1}]}', "lacks"),
        (ENTRY.replace(b"SIZE", b"-1"), "lacks"),
        (ENTRY.replace(b"SIZE", b"true"), "lacks"),
        (ENTRY.replace(b"SIZE", b"1.0"), "lacks"),
        (b" " * (4 * 2**20 + 1), "more than a manifest's 4 MiB"),
    ],
)  # fmt: skip
def test_what_is_no_manifest_is_refused_with_a_message(raw: bytes, said: str) -> None:
    with pytest.raises(manifests.ManifestError) as caught:
        manifests.parse(raw, "r/a:1")
    assert str(caught.value).startswith("r/a:1: ") and said in str(caught.value), caught.value


ARM64, ATTESTED = "sha256:" + "1" * 64, "sha256:" + "2" * 64


def attested_index_entries() -> list[dict[str, Any]]:
    """INDEX's entries, its attestation about the arm64 image (as BuildKit annotates it)."""
    entries = [dict(e) for e in INDEX["manifests"]]  # type: ignore[attr-defined]
    entries[1]["annotations"] = {
        "vnd.docker.reference.type": "attestation-manifest",
        "vnd.docker.reference.digest": ARM64,
    }
    return entries


def attested_index(*extra: dict[str, Any]) -> manifests.Document:
    """INDEX with its attestation about the arm64 image, and `extra` entries."""
    document = {**INDEX, "manifests": [*attested_index_entries(), *extra]}
    return manifests.parse(json.dumps(document).encode(), "r/a:1")


def test_an_index_of_the_image_and_its_attestation_is_exactly_what_was_asked() -> None:
    assert manifests.index_problems(attested_index(), {"linux/arm64": ARM64}, "r/a:1", {ARM64: [ATTESTED]}) == []
    assert manifests.attestations_of(attested_index(), ARM64) == (ATTESTED,)


def test_an_entry_of_a_real_platform_annotated_as_an_attestation_is_an_image() -> None:
    """A second arm64 manifest cannot pass as an attestation: its platform makes it an image, refused."""
    other = {
        "mediaType": manifests.OCI_MANIFEST,
        "digest": "sha256:" + "3" * 64,
        "size": 9,
        "platform": {"os": "linux", "architecture": "arm64"},
        "annotations": {"vnd.docker.reference.type": "attestation-manifest", "vnd.docker.reference.digest": ARM64},
    }
    index = attested_index(other)
    assert manifests.attestations_of(index, ARM64) == (ATTESTED,)
    (problem,) = manifests.index_problems(index, {"linux/arm64": ARM64}, "r/a:1", {ARM64: [ATTESTED]})
    assert "wanted linux/arm64" in problem, problem
    with pytest.raises(manifests.ManifestError, match="several images of linux/arm64"):
        manifests.platform_entry(index, "linux/arm64", "r/a:1")


def test_an_attestation_named_twice_is_not_exactly_the_one_asked() -> None:
    again = {**attested_index_entries()[1]}
    (problem,) = manifests.index_problems(attested_index(again), {"linux/arm64": ARM64}, "r/a:1", {ARM64: [ATTESTED]})
    assert f"names attestation {ATTESTED} about {ARM64}, not one asked for" in problem
