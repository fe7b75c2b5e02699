"""Issue 43, publishing: every entry of a staged index is checked (a later entry that passes does not hide an
earlier one's problem); a cancel that comes after the checks and before the public move leaves the public tags
as they were; an index entry whose manifest the registry serves with another media type is refused.

Against the fake engine's registry, as test_staging.py: what it serves is written here; the code under test reads
it back. The refusals there all touch the second entry; here the first."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from tests.fakes import OCI_MANIFEST, FakeEngine, image_manifest
from tests.unit.building.test_platforms_build import REPOSITORY
from tests.unit.building.test_staging import (  # noqa: F401 (fixtures)
    _edited,
    _rewrite_after_create,
    joined,
    named,
    selection,
    staged_tags,
)
from torchimages.building import index, staging
from torchimages.combination import Image
from torchimages.engine import manifests

Joined = tuple[FakeEngine, list[Image], str]
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"  # the Docker image manifest


def wanted_of(engine: FakeEngine, images: list[Image]) -> dict[str, str]:
    """Each platform's image manifest under its own tag, as the registry holds it (platform -> digest)."""
    found = {i.platform: index.platform_manifest(engine, REPOSITORY, i.platform_reference, i.platform) for i in images}
    return {platform: image.digest for platform, image in found.items() if image is not None}


def _lose_first(engine: FakeEngine, staged: str, sources: Sequence[str]) -> None:
    del engine.served[sources[0]]


def _first_bigger(document: dict[str, Any]) -> None:
    document["manifests"][0]["size"] += 1


def _first_as_docker(document: dict[str, Any]) -> None:
    document["manifests"][0]["mediaType"] = DOCKER_MANIFEST  # the registry serves an OCI manifest there


FIRST_ENTRY = {
    "gone": (_rewrite_after_create(_lose_first), "which the registry does not hold"),
    "another size": (_edited(_first_bigger), "bytes; the registry serves "),
    "another media type": (_edited(_first_as_docker), f"as a {DOCKER_MANIFEST}; the registry serves a {OCI_MANIFEST}"),
}


@pytest.mark.parametrize("refusal", list(FIRST_ENTRY))
def test_a_problem_of_the_first_entry_is_not_hidden_by_the_second(joined: Joined, refusal: str) -> None:  # noqa: F811
    engine, images, old = joined
    plant, said = FIRST_ENTRY[refusal]
    plant(engine, images)
    problems = index.join(engine, images)
    assert problems and any(said in p for p in problems), problems
    assert "the public tags were left as they were" in problems
    assert named(engine, images[0]) == [old, old]


def test_a_cancel_after_the_checks_leaves_the_public_tags_as_they_were(joined: Joined) -> None:  # noqa: F811
    """The cancel comes while the checked index is signed: after every check, before any public tag moves."""
    engine, images, old = joined
    wanted = wanted_of(engine, images)
    cancelled = threading.Event()
    signed: list[str] = []

    def sign(digest: str) -> list[str]:
        signed.append(digest)
        cancelled.set()
        return []

    problems = staging.publish(engine, REPOSITORY, images[0].names, wanted, (), sign, cancelled)
    assert problems[:2] == ["interrupted before the public tags were moved", "the public tags were left as they were"]
    assert named(engine, images[0]) == [old, old] and len(signed) == 1
    (staged,) = [n for n in staged_tags(engine) if engine.tags_served[n] != old]
    assert problems[2] == staging.left(staged)
    assert [a for c, a in engine.calls if c == "point_tag"] == [(REPOSITORY, n, old) for n in images[0].names]


def test_the_same_publish_without_the_cancel_moves_them(joined: Joined) -> None:  # noqa: F811
    engine, images, old = joined
    wanted = wanted_of(engine, images)
    assert staging.publish(engine, REPOSITORY, images[0].names, wanted, (), None, threading.Event()) == []
    new = engine.tags_served[f"{REPOSITORY}:{images[0].tag}"]
    assert new != old and named(engine, images[0]) == [new, new]


DIGEST = "sha256:" + "1" * 64


def entry_of(raw: bytes, media_type: str) -> manifests.Entry:
    return manifests.Entry(media_type, manifests.digest_of(raw), len(raw), "linux/amd64")


def test_a_manifest_of_another_media_type_than_its_entry_is_refused() -> None:
    oci = image_manifest(DIGEST, "x")
    docker = json.dumps({**json.loads(oci), "mediaType": DOCKER_MANIFEST}).encode()
    assert manifests.entry_problems(entry_of(oci, OCI_MANIFEST), oci, "r:t") == []
    assert manifests.entry_problems(entry_of(docker, DOCKER_MANIFEST), docker, "r:t") == []
    (problem,) = manifests.entry_problems(entry_of(oci, DOCKER_MANIFEST), oci, "r:t")
    assert problem == (
        f"r:t names {manifests.digest_of(oci)} (linux/amd64) as a {DOCKER_MANIFEST}; "
        f"the registry serves a {OCI_MANIFEST}"
    )
    (problem,) = manifests.entry_problems(entry_of(docker, OCI_MANIFEST), docker, "r:t")
    assert problem.endswith(f"as a {OCI_MANIFEST}; the registry serves a {DOCKER_MANIFEST}")
