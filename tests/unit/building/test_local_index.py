"""Both platforms of a combination under one local tag (issue 46): on the containerd store, once every platform's
image passed, the public tag and its aliases name, on this engine, one index of exactly the image manifests each
platform's own tag names and the attestation manifests about each, read back before any tag moves.

Each platform's stored document is a literal below (what BuildKit keeps: the image manifest and the attestation
manifest about it), never computed by the code under test; so is the index expected of them (a golden string).
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest

from tests.fakes import FakeEngine
from tests.unit.building.test_builder import run
from tests.unit.building.test_platforms_build import REPOSITORY, engine_holding
from tests.unit.building.test_platforms_build import selection as selection
from torchimages.building import index, local_index
from torchimages.building.builder import Builder
from torchimages.building.local_index import Held, NoIndex
from torchimages.building.requests import BuildOptions
from torchimages.combination import Image
from torchimages.engine import BuildRequest, EngineError, ImageInfo
from torchimages.planning import plan

AMD64_MANIFEST = "sha256:" + "a" * 64
ARM64_MANIFEST = "sha256:" + "b" * 64
AMD64_ATTESTATION = "sha256:" + "c" * 64
ARM64_ATTESTATION = "sha256:" + "d" * 64
OTHER = "sha256:" + "e" * 64


def own_index(manifest: str, attestation: str, arch: str, extra: str = "") -> bytes:
    """An image's own index as BuildKit keeps it on the containerd store: its image manifest, and the attestation
    manifest about it (`unknown/unknown`)."""
    entries = [
        {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest,
            "size": 1234,
            "platform": {"architecture": arch, "os": "linux"},
        },
        {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": attestation,
            "size": 567,
            "annotations": {
                "vnd.docker.reference.digest": manifest,
                "vnd.docker.reference.type": "attestation-manifest",
            },
            "platform": {"architecture": "unknown", "os": "unknown"},
        },
    ]
    if extra:
        entries.append({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": extra, "size": 9})
    return json.dumps(
        {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": entries}
    ).encode()


def digest(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


AMD64_OWN = own_index(AMD64_MANIFEST, AMD64_ATTESTATION, "amd64")
ARM64_OWN = own_index(ARM64_MANIFEST, ARM64_ATTESTATION, "arm64")
ATTESTATION_ANNOTATIONS = (
    '"annotations":{{"vnd.docker.reference.digest":"{0}","vnd.docker.reference.type":"attestation-manifest"}}'
)
# The index of both (golden): each platform's image manifest, then the attestation manifest about it, each
# descriptor as its own index gives it; keys sorted, no spaces.
BOTH = (
    '{"manifests":['
    f'{{"digest":"{AMD64_MANIFEST}","mediaType":"application/vnd.oci.image.manifest.v1+json",'
    '"platform":{"architecture":"amd64","os":"linux"},"size":1234},'
    f'{{{ATTESTATION_ANNOTATIONS.format(AMD64_MANIFEST)},"digest":"{AMD64_ATTESTATION}",'
    '"mediaType":"application/vnd.oci.image.manifest.v1+json","platform":{"architecture":"unknown","os":"unknown"},'
    '"size":567},'
    f'{{"digest":"{ARM64_MANIFEST}","mediaType":"application/vnd.oci.image.manifest.v1+json",'
    '"platform":{"architecture":"arm64","os":"linux"},"size":1234},'
    f'{{{ATTESTATION_ANNOTATIONS.format(ARM64_MANIFEST)},"digest":"{ARM64_ATTESTATION}",'
    '"mediaType":"application/vnd.oci.image.manifest.v1+json","platform":{"architecture":"unknown","os":"unknown"},'
    '"size":567}'
    '],"mediaType":"application/vnd.oci.image.index.v1+json","schemaVersion":2}'
)

# As a build writes it: annotated with the OCI labels both images carry alike (here the build's creation time).
BUILT = '{"annotations":{"org.opencontainers.image.created":"2026-11-29T00:00:00Z"},' + BOTH[1:]


def test_a_platforms_own_index_gives_its_image_manifest_and_the_attestations_about_it() -> None:
    found = local_index.held(ARM64_OWN, digest(ARM64_OWN), "linux/arm64", "r:t-arm64")
    assert (found.platform, found.manifest, found.attestations, found.note) == (
        "linux/arm64",
        ARM64_MANIFEST,
        (ARM64_ATTESTATION,),
        "",
    )
    assert [d["digest"] for d in found.descriptors] == [ARM64_MANIFEST, ARM64_ATTESTATION]


def test_an_own_index_holding_more_gives_the_image_manifest_alone_and_says_so() -> None:
    raw = own_index(ARM64_MANIFEST, ARM64_ATTESTATION, "arm64", extra=OTHER)
    found = local_index.held(raw, digest(raw), "linux/arm64", "r:t-arm64")
    assert [d["digest"] for d in found.descriptors] == [ARM64_MANIFEST] and found.attestations == ()
    assert "holds 1 more manifest(s)" in found.note and "SBOM and provenance are not carried" in found.note


def test_an_attestation_named_twice_in_the_own_index_is_carried_once() -> None:
    document = json.loads(ARM64_OWN)
    document["manifests"].append(document["manifests"][1])
    raw = json.dumps(document).encode()
    found = local_index.held(raw, digest(raw), "linux/arm64", "r:t-arm64")
    assert [d["digest"] for d in found.descriptors] == [ARM64_MANIFEST, ARM64_ATTESTATION]
    assert found.attestations == (ARM64_ATTESTATION,)
    written = local_index.document([found])
    assert local_index.read_back(written, written, [found], "tmp") == []


def test_an_image_manifest_is_named_as_it_is_with_its_platform() -> None:
    raw = b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{},"layers":[]}'
    found = local_index.held(raw, digest(raw), "linux/arm64", "r:t-arm64")
    assert found.descriptors == (
        {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": digest(raw),
            "size": len(raw),
            "platform": {"os": "linux", "architecture": "arm64"},
        },
    )


@pytest.mark.parametrize(
    ("raw", "named", "said"),
    [
        (ARM64_OWN, OTHER, "hashes to"),  # bytes that are not the image id's
        (AMD64_OWN, digest(AMD64_OWN), "no image of linux/arm64"),  # another platform's image
        (b"not json", digest(b"not json"), "not JSON"),
        (b"[]", digest(b"[]"), "schema version 2"),
    ],
)
def test_a_stored_document_no_index_can_be_made_from_is_refused(raw: bytes, named: str, said: str) -> None:
    with pytest.raises(NoIndex, match=said):
        local_index.held(raw, named, "linux/arm64", "r:t-arm64")


def held_both() -> list[Held]:
    return [
        local_index.held(AMD64_OWN, digest(AMD64_OWN), "linux/amd64", "r:t-amd64"),
        local_index.held(ARM64_OWN, digest(ARM64_OWN), "linux/arm64", "r:t-arm64"),
    ]


def test_the_index_of_both_names_each_image_then_its_attestations_golden() -> None:
    assert local_index.document(held_both()).decode() == BOTH
    annotated = json.loads(local_index.document(held_both(), (("org.opencontainers.image.version", "2.9.1"),)))
    assert annotated["annotations"] == {"org.opencontainers.image.version": "2.9.1"}


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (None, "did not give it back"),
        (AMD64_OWN, "not the index written"),
    ],
)
def test_what_is_read_back_must_be_the_index_written(raw: bytes | None, said: str) -> None:
    written = BOTH.encode()
    assert local_index.read_back(written, written, held_both(), "tmp") == []
    assert said in " ".join(local_index.read_back(raw, written, held_both(), "tmp"))


def test_an_index_written_without_an_attestation_is_refused_on_read_back() -> None:
    amd64, arm64 = held_both()
    lacking = local_index.document([amd64, Held(arm64.platform, arm64.manifest, arm64.descriptors[:1])])
    assert local_index.read_back(lacking, lacking, held_both(), "tmp") == [
        f"tmp lacks attestation {ARM64_ATTESTATION} about {ARM64_MANIFEST}"
    ]


# --- the build: the fake engine keeps each platform's literal own index --------------------------------------


def own_of(request: BuildRequest) -> bytes:
    return ARM64_OWN if request.platform == "linux/arm64" else AMD64_OWN


def containerd_engine() -> FakeEngine:
    """The containerd store: each build's image is named by its platform's own index, and the content store holds
    the manifests it names (bytes of the size the index says)."""
    engine = engine_holding()
    engine.containerd_store = True
    engine.build_document = own_of
    for manifest in (AMD64_MANIFEST, ARM64_MANIFEST):
        engine.documents[manifest] = b"m" * 1234
    for attestation in (AMD64_ATTESTATION, ARM64_ATTESTATION):
        engine.documents[attestation] = b"a" * 567
    return engine


def options(tmp_path: Path) -> BuildOptions:
    return BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs")


def public(selection: list[plan.Selected]) -> list[str]:
    return [f"{REPOSITORY}:{name}" for name in selection[0].combination.image("runtime").names]


def test_once_both_passed_the_tag_and_alias_name_their_index_here(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = containerd_engine()
    outcomes = run(engine, selection, tmp_path)
    assert [o.status for o in outcomes] == ["built", "built"]
    index = digest(BUILT.encode())
    assert engine.documents[index] == BUILT.encode()
    names = public(selection)
    assert len(names) == 2 and all(engine.ids[name] == index for name in names)
    ((staged, _),) = engine.held_indexes  # loaded under a temporary name, then the tags moved
    assert staged not in engine.images and staged not in names and engine.temporary() == []
    assert f"{names[0]} names, on this engine, the index {index} of linux/amd64 {AMD64_MANIFEST}" in outcomes[0].detail
    assert "the registry's index" in outcomes[0].detail and engine.pushed == []


def test_a_failed_platform_leaves_no_local_index(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = containerd_engine()
    engine.holds_by_platform["linux/arm64"] = engine.holds_by_platform["linux/amd64"]  # x86_64 programs
    amd64, arm64 = run(engine, selection, tmp_path)
    assert (amd64.status, arm64.status) == ("built", "failed")
    assert engine.held_indexes == [] and not any(name in engine.images for name in public(selection))


def test_an_index_read_back_as_other_bytes_fails_both_and_moves_no_tag(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = containerd_engine()
    hold = engine.hold_index
    engine.hold_index = lambda reference, document: hold(reference, document.replace(b"arm64", b"amd64"))  # type: ignore[method-assign]
    outcomes = run(engine, selection, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert "local index not written" in outcomes[0].detail and "not the index loaded" in outcomes[0].detail
    assert not any(name in engine.images for name in public(selection)) and engine.temporary() == []


def test_an_engine_that_refuses_the_index_fails_both(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = containerd_engine()
    engine.hold_error = EngineError("loading refused")
    outcomes = run(engine, selection, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"] and "loading refused" in outcomes[1].detail


def test_where_the_content_store_is_not_read_nothing_is_written_and_the_outcome_says_why(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = engine_holding()  # the classic store: no document
    outcomes = run(engine, selection, tmp_path)
    assert [o.status for o in outcomes] == ["built", "built"] and engine.held_indexes == []
    assert f"no local index {public(selection)[0]}: the engine's content store did not give" in outcomes[0].detail


def test_with_push_the_index_is_written_here_and_in_the_registry(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = containerd_engine()
    outcomes = run(engine, selection, tmp_path, push=True)
    assert [o.status for o in outcomes] == ["built", "built"]
    names = public(selection)
    assert all(engine.ids[name] == digest(BUILT.encode()) for name in names)
    assert all(f"{REPOSITORY}:{n}" in engine.indexes for n in selection[0].combination.image("runtime").names)


def test_an_interrupt_during_the_load_moves_no_public_name(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = containerd_engine()
    cancelled = threading.Event()
    hold = engine.hold_index

    def interrupted(reference: str, document: bytes) -> None:
        cancelled.set()
        hold(reference, document)

    engine.hold_index = interrupted  # type: ignore[method-assign]
    builder = Builder(engine, options(tmp_path), None, out=lambda _: None, cancelled=cancelled)
    outcomes = builder.build(selection)
    assert [o.status for o in outcomes] == ["interrupted", "interrupted"]
    assert "interrupted before the public tags were moved" in outcomes[0].detail
    assert not any(name in engine.images for name in public(selection)) and engine.temporary() == []


def test_an_alias_that_cannot_be_moved_puts_the_tag_back_and_says_so(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = containerd_engine()
    tag, alias = public(selection)
    old = "sha256:" + "0" * 64
    engine.add(ImageInfo(tag, old, {}, {}, "", ()))  # the tag named an earlier index; the alias nothing
    engine.add(ImageInfo(f"{REPOSITORY}:dangling", old, {}, {}, "", ()))  # the engine keeps it once untagged
    real = engine.tag

    def refusing(reference: str, repository: str, tag: str) -> None:
        if f"{repository}:{tag}" == alias:
            raise EngineError("refused")
        real(reference, repository, tag)

    engine.tag = refusing  # type: ignore[method-assign]
    outcomes = run(engine, selection, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert f"{alias} could not be moved to" in outcomes[0].detail and f"{tag} put back to {old}" in outcomes[0].detail
    assert engine.ids[tag] == old and alias not in engine.images


def keeping_temporary_names(engine: FakeEngine, why: str = "device busy") -> FakeEngine:
    """`engine`, refusing to remove the local index's temporary names (saying `why`)."""
    remove = engine.remove_image

    def refusing(reference: str) -> None:
        if reference.startswith("torchimages-tmp/index:"):
            raise EngineError(why)
        remove(reference)

    engine.remove_image = refusing  # type: ignore[method-assign]
    return engine


def test_a_temporary_name_that_cannot_be_removed_is_said_and_the_index_stands(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = keeping_temporary_names(containerd_engine())
    outcomes = run(engine, selection, tmp_path)
    assert [o.status for o in outcomes] == ["built", "built"]
    assert all(engine.ids[name] == digest(BUILT.encode()) for name in public(selection))
    assert "is left (device busy): `docker rmi torchimages-tmp/index:" in outcomes[0].detail


def test_a_platform_tag_moved_after_its_verification_is_not_indexed(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = containerd_engine()
    real = engine.tag

    def moving(reference: str, repository: str, tag: str) -> None:
        real(reference, repository, tag)
        if tag.endswith("-arm64"):  # meanwhile someone tags another image as the amd64 one
            engine.ids[f"{repository}:{tag.removesuffix('-arm64')}-amd64"] = "sha256:" + "f" * 64

    engine.tag = moving  # type: ignore[method-assign]
    outcomes = run(engine, selection, tmp_path, push=True)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert "names sha256:" + "f" * 64 + " now, not the image verified" in outcomes[0].detail
    assert engine.held_indexes == [] and not [c for c, _ in engine.calls if c == "create_index"]


def test_an_attestation_the_store_does_not_hold_is_left_out_and_said(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = containerd_engine()
    del engine.documents[ARM64_ATTESTATION]  # as after a pull of one platform: its attestations not fetched
    outcomes = run(engine, selection, tmp_path)
    assert [o.status for o in outcomes] == ["built", "built"]
    ((_, written),) = engine.held_indexes
    assert [m["digest"] for m in json.loads(written)["manifests"]] == [
        AMD64_MANIFEST,
        AMD64_ATTESTATION,
        ARM64_MANIFEST,
    ]
    said = f"attestation manifest(s) {ARM64_ATTESTATION} (not given by the content store) not held as named"
    assert said in outcomes[0].detail


def test_a_failed_platform_says_what_the_public_name_still_names_here(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = containerd_engine()
    tag, _ = public(selection)
    engine.add(ImageInfo(tag, "sha256:" + "0" * 64, {}, {}, "", ()))  # an earlier run's index
    engine.holds_by_platform["linux/arm64"] = engine.holds_by_platform["linux/amd64"]
    amd64, _ = run(engine, selection, tmp_path)
    assert f"here {tag} still names sha256:{'0' * 64}, which this run did not write" in amd64.detail


def written_twice(served: bytes | None = None) -> tuple[FakeEngine, list[str], tuple[str, list[str]]]:
    """Both platforms' images here, verified; the index written once (with `served`), then again."""
    engine = containerd_engine()
    images = {}
    for own, platform in ((AMD64_OWN, "linux/amd64"), (ARM64_OWN, "linux/arm64")):
        image = Image("runtime", REPOSITORY, "t", ("a",), "d", (), platform=platform, platform_tag="t-" + platform[6:])
        engine.add(ImageInfo(image.platform_reference, digest(own), {}, {}, "", ()))
        engine.documents[digest(own)] = own
        images[image] = digest(own)
    first = next(iter(images))
    said = local_index.write(engine, first, images, None, served)
    again = local_index.write(engine, first, images, None, served)
    return engine, [f"{REPOSITORY}:t", f"{REPOSITORY}:a"], (said[0], said[1] + again[1])


def test_names_that_name_the_index_already_are_left_as_they_are() -> None:
    engine, names, (said, problems) = written_twice()
    assert problems == [] and len(engine.held_indexes) == 1  # the second write loaded nothing
    assert all(engine.ids[name] == digest(BOTH.encode()) for name in names) and "the index" in said


def test_with_push_the_names_here_take_the_registrys_index_where_it_names_what_is_held() -> None:
    registry = BOTH.replace('"schemaVersion":2', '"annotations":{"by":"imagetools"},"schemaVersion":2').encode()
    engine, names, (said, problems) = written_twice(served=registry)
    assert problems == [] and all(engine.ids[name] == digest(registry) for name in names)
    other = registry.replace(ARM64_ATTESTATION.encode(), OTHER.encode())  # names what this engine does not hold
    engine, names, (said, problems) = written_twice(served=other)
    assert problems == [] and all(engine.ids[name] == digest(BOTH.encode()) for name in names)
    assert "not the registry's index (it names what this engine does not hold as named)" in said
    assert f"the registry's index lacks attestation {ARM64_ATTESTATION}" in said


def test_an_index_the_store_does_not_give_back_moves_no_name(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = containerd_engine()
    hold = engine.hold_index

    def lost(reference: str, document: bytes) -> None:
        hold(reference, document)
        del engine.documents[digest(document)]  # named, but its bytes not there to read back

    engine.hold_index = lost  # type: ignore[method-assign]
    outcomes = run(engine, selection, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"] and "did not give it back" in outcomes[0].detail
    assert not any(name in engine.images for name in public(selection))


def test_a_name_that_does_not_name_the_index_once_moved_is_put_back(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = containerd_engine()
    tag, alias = public(selection)
    real = engine.tag

    def elsewhere(reference: str, repository: str, tag: str) -> None:
        real(reference, repository, tag)
        if f"{repository}:{tag}" == alias:
            engine.ids[alias] = OTHER  # the engine says it moved it, and names something else

    engine.tag = elsewhere  # type: ignore[method-assign]
    outcomes = run(engine, selection, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert f"{alias} names {OTHER} once moved" in outcomes[0].detail
    assert tag not in engine.images and alias not in engine.images  # both named nothing before


def test_with_push_the_local_index_is_given_the_registrys_bytes(
    selection: list[plan.Selected], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = containerd_engine()
    given: list[bytes | None] = []
    write = local_index.write

    def recorded(*args: object) -> tuple[str, list[str]]:
        given.append(args[4])  # type: ignore[arg-type]
        return write(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(local_index, "write", recorded)
    run(engine, selection, tmp_path, push=True)
    tag = public(selection)[0]
    assert given == [engine.served[f"{REPOSITORY}@{engine.tags_served[tag]}"]]


def test_an_image_manifest_the_store_does_not_hold_fails_and_a_wrong_size_is_said(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = containerd_engine()
    del engine.documents[ARM64_MANIFEST]
    outcomes = run(engine, selection, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"] and engine.held_indexes == []
    assert f"the content store does not hold the image manifest {ARM64_MANIFEST}" in outcomes[0].detail
    engine = containerd_engine()
    engine.documents[ARM64_ATTESTATION] = b"a" * 566  # not the size its own index says
    outcomes = run(engine, selection, tmp_path / "again")
    assert [o.status for o in outcomes] == ["built", "built"]
    assert f"{ARM64_ATTESTATION} (566 bytes, not 567) not held as named" in outcomes[0].detail


def test_write_refuses_a_platform_tag_that_names_another_image_than_the_one_verified() -> None:
    engine = containerd_engine()
    image = Image("runtime", REPOSITORY, "t", (), "d", (), platform="linux/arm64", platform_tag="t-arm64")
    engine.add(ImageInfo(image.platform_reference, digest(ARM64_OWN), {}, {}, "", ()))
    engine.documents[digest(ARM64_OWN)] = ARM64_OWN
    said, problems = local_index.write(engine, image, {image: OTHER})
    assert said == "" and problems == [
        f"{image.platform_reference} names {digest(ARM64_OWN)} now, "
        f"not the image verified or found up to date ({OTHER})"
    ]
    assert engine.held_indexes == []


def test_a_name_that_cannot_be_put_back_is_said_so(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = containerd_engine()
    tag, alias = public(selection)
    real_tag, real_remove = engine.tag, engine.remove_image

    def refusing(reference: str, repository: str, tag: str) -> None:
        if f"{repository}:{tag}" == alias:
            raise EngineError("refused")
        real_tag(reference, repository, tag)

    def stuck(reference: str) -> None:
        if reference == tag:
            raise EngineError("in use")
        real_remove(reference)

    engine.tag, engine.remove_image = refusing, stuck  # type: ignore[method-assign]
    outcomes = run(engine, selection, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert (
        f"{tag} could not be put back to nothing" in outcomes[0].detail and f"{tag} put back" not in outcomes[0].detail
    )


def test_a_public_name_of_one_platforms_image_is_said_as_that() -> None:
    engine = containerd_engine()
    image = Image("runtime", REPOSITORY, "t", (), "d", (), platform="linux/amd64", platform_tag="t-amd64")
    engine.add(ImageInfo(f"{REPOSITORY}:t", digest(AMD64_OWN), {}, {}, "", ()))  # single-platform before
    said = local_index.stale(engine, image, {digest(AMD64_OWN): "linux/amd64"})
    assert said == f"here {REPOSITORY}:t names the linux/amd64 image alone"


def test_the_image_entry_is_the_one_of_its_platform_not_an_attestation_of_the_same_digest() -> None:
    document = json.loads(ARM64_OWN)
    decoy = {**document["manifests"][1], "digest": ARM64_MANIFEST}  # an unknown/unknown entry, the image's digest
    document["manifests"].insert(0, decoy)
    raw = json.dumps(document).encode()
    found = local_index.held(raw, digest(raw), "linux/arm64", "r:t-arm64")
    assert found.descriptors[0]["platform"] == {"architecture": "arm64", "os": "linux"}


def test_a_registry_index_that_cannot_be_read_back_is_said_and_the_engines_is_made_here(
    selection: list[plan.Selected], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = containerd_engine()
    read, publish, published = engine.manifest, index.publish, threading.Event()

    def unreadable(reference: str) -> bytes | None:
        if published.is_set() and reference.startswith(f"{REPOSITORY}@"):  # read by the digest staging heard
            raise EngineError("timed out")
        return read(reference)

    def publishing(*args: object, **kwargs: object) -> list[str]:
        try:
            return publish(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            published.set()  # from here on the registry does not answer

    engine.manifest = unreadable  # type: ignore[method-assign]
    monkeypatch.setattr(index, "publish", publishing)
    outcomes = run(engine, selection, tmp_path, push=True)
    assert [o.status for o in outcomes] == ["built", "built"]
    assert "could not be read back (timed out): the engine's is made here" in outcomes[0].detail


def test_a_temporary_name_left_by_a_failed_index_is_said(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = keeping_temporary_names(containerd_engine())
    engine.hold_error = EngineError("loading refused")
    outcomes = run(engine, selection, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert "loading refused" in outcomes[0].detail and "is left (device busy)" in outcomes[0].detail


def test_a_registry_index_read_back_as_nothing_by_its_digest_is_said(
    selection: list[plan.Selected], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = containerd_engine()
    read, publish, published = engine.manifest, index.publish, threading.Event()

    def gone(reference: str) -> bytes | None:
        return None if published.is_set() and "@" in reference else read(reference)

    def publishing(*args: object, **kwargs: object) -> list[str]:
        try:
            return publish(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            published.set()

    engine.manifest = gone  # type: ignore[method-assign]
    monkeypatch.setattr(index, "publish", publishing)
    outcomes = run(engine, selection, tmp_path, push=True)
    assert [o.status for o in outcomes] == ["built", "built"]
    assert "read back as nothing: the engine's is made here" in outcomes[0].detail


def test_a_registry_index_describing_a_manifest_otherwise_is_not_loaded_here() -> None:
    other_size = BOTH.replace('"size":1234}', '"size":1}', 1).encode()  # the amd64 image manifest's size
    engine, names, (said, problems) = written_twice(served=other_size)
    assert problems == [] and all(engine.ids[name] == digest(BOTH.encode()) for name in names)
    assert f"its {AMD64_MANIFEST} as a application/vnd.oci.image.manifest.v1+json of 1 bytes" in said


def test_an_engine_error_is_one_line_where_it_is_said(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = keeping_temporary_names(containerd_engine(), "busy\n[9/9] FORGED: all images signed")
    outcomes = run(engine, selection, tmp_path)
    assert "\n[9/9] FORGED" not in outcomes[0].detail and "busy\\n[9/9] FORGED" in outcomes[0].detail


def test_a_failed_index_says_what_the_public_names_still_name(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = containerd_engine()
    tag, _ = public(selection)
    engine.add(ImageInfo(tag, "sha256:" + "0" * 64, {}, {}, "", ()))
    engine.hold_error = EngineError("loading refused")
    outcomes = run(engine, selection, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert f"here {tag} still names sha256:{'0' * 64}, which this run did not write" in outcomes[0].detail


def test_an_index_that_fails_its_checks_while_an_interrupt_waits_is_failed_not_interrupted(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = containerd_engine()
    cancelled = threading.Event()
    hold = engine.hold_index

    def other_bytes(reference: str, document: bytes) -> None:
        cancelled.set()
        hold(reference, document.replace(b"arm64", b"amd64"))

    engine.hold_index = other_bytes  # type: ignore[method-assign]
    outcomes = Builder(engine, options(tmp_path), None, out=lambda _: None, cancelled=cancelled).build(selection)
    assert [o.status for o in outcomes] == ["failed", "failed"] and "not the index loaded" in outcomes[0].detail
