"""Nothing public is written before it is verified (building/staging.py): `join` and `build --push` write an
index under a temporary tag, read it back and check it, and only then move the public tag, then each alias, to
its digest. A refusal at any step leaves the old index under the tag and every alias, and names the temporary
tag. A platform's image that was pushed as an index (BuildKit: the image and its attestation) gives its
platform's image manifest, never a nested index.

Against the fake engine's registry (tests/fakes.py): what it serves is written by the test or by the fake as a
registry would; the code under test only reads it back."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import OCI_INDEX, FakeEngine, image_manifest
from tests.unit.building.test_builder import run
from tests.unit.building.test_platforms_build import MATRIX, REPOSITORY, engine_holding, entry, in_registry
from tests.unit.security.test_signing import RecordingSigner
from torchimages import engine as engine_package
from torchimages.building import index, staging
from torchimages.building.progress import Progress
from torchimages.building.renderers import PlainRenderer
from torchimages.combination import Image
from torchimages.engine import EngineError
from torchimages.planning import plan

PLATFORMS = ("linux/amd64", "linux/arm64")
OTHER_ID = "sha256:" + "b" * 64  # the arm64 image of a later build, pushed again under its own tag


@pytest.fixture
def selection(write_matrix: Callable[[str], Path]) -> list[plan.Selected]:
    """test_platforms_build's combination: 2.9.1 CPU runtime for linux/amd64 and linux/arm64, with an alias."""
    return plan.select(plan.load(write_matrix(MATRIX.replace("matrix:", f"repository: {REPOSITORY}\nmatrix:"))), [])


def images_of(selected: list[plan.Selected], flavor: str = "runtime") -> list[Image]:
    return [selected[0].combination.image(flavor, p) for p in PLATFORMS]


def named(engine: FakeEngine, image: Image) -> list[str | None]:
    """What the registry's tag and each alias of `image` name."""
    return [engine.tags_served.get(f"{REPOSITORY}:{name}") for name in image.names]


def staged_tags(engine: FakeEngine) -> list[str]:
    return [n for n in engine.tags_served if n.startswith(f"{REPOSITORY}:{staging.PREFIX}")]


@pytest.fixture
def joined(selection: list[plan.Selected]) -> tuple[FakeEngine, list[Image], str]:
    """Both platforms' images joined once (the old index under the tag and its alias), then the arm64 image of a
    later build pushed under its own tag: a join now writes another index."""
    engine = FakeEngine()
    images = images_of(selection)
    for image in images:
        in_registry(engine, image)
    assert index.join(engine, images) == []
    old = engine.tags_served[f"{REPOSITORY}:{images[0].tag}"]
    assert named(engine, images[0]) == [old, old] and len(images[0].names) == 2
    in_registry(engine, images[1], image_id=OTHER_ID)
    return engine, images, old


Plant = Callable[[FakeEngine, list[Image]], None]


def _rewrite_after_create(change: Callable[[FakeEngine, str, Sequence[str]], None]) -> Plant:
    """A refusal: once the fake writes the staged index, `change(engine, staged reference, sources)` alters what
    the registry serves."""

    def plant(engine: FakeEngine, images: list[Image]) -> None:
        written = engine.create_index

        def create_index(
            repository: str, names: Sequence[str], sources: Sequence[str], annotations: Any = ()
        ) -> list[str]:
            problems = written(repository, names, sources, annotations)
            change(engine, f"{repository}:{names[0]}", sources)
            return problems

        engine.create_index = create_index  # type: ignore[method-assign]

    return plant


def _reserve(engine: FakeEngine, staged: str, edit: Callable[[dict[str, Any]], None]) -> None:
    """Serve under `staged` the index it names, edited."""
    repository, tag = staged.rsplit(":", 1)
    document = json.loads(engine.served[f"{repository}@{engine.tags_served[staged]}"])
    edit(document)
    engine.serve(repository, json.dumps(document).encode(), [tag])


def _lose(engine: FakeEngine, staged: str, sources: Sequence[str]) -> None:
    del engine.served[sources[1]]


def _other_bytes(engine: FakeEngine, staged: str, sources: Sequence[str]) -> None:
    engine.served[sources[1]] = b'{"schemaVersion": 2}'


def _bigger(document: dict[str, Any]) -> None:
    document["manifests"][1]["size"] += 1


def _nested(document: dict[str, Any]) -> None:
    document["manifests"][1]["mediaType"] = OCI_INDEX


def _one_platform(document: dict[str, Any]) -> None:
    del document["manifests"][1:]


def _image_not_index(engine: FakeEngine, staged: str, sources: Sequence[str]) -> None:
    engine.tags_served[staged] = sources[0].rsplit("@", 1)[1]


def _unreadable(engine: FakeEngine, images: list[Image]) -> None:
    read = engine.manifest

    def manifest(reference: str) -> bytes | None:
        if staging.PREFIX in reference:
            raise EngineError(f"{reference}: the registry serves more than 4 MiB there, which no manifest is")
        return read(reference)

    engine.manifest = manifest  # type: ignore[method-assign]


def _other_inputs(engine: FakeEngine, images: list[Image]) -> None:
    labels = {**images[1].label_map(), "io.torchimages.input-digest": "sha256:" + "9" * 64}
    in_registry(engine, images[1], labels, image_id="sha256:" + "c" * 64)


def _create_refused(engine: FakeEngine, images: list[Image]) -> None:
    engine.index_errors = ["unknown: Method not allowed"]


def _alias_refused(engine: FakeEngine, images: list[Image]) -> None:
    engine.point_errors[f"{REPOSITORY}:{images[0].aliases[0]}"] = ["denied: requested access to the resource is denied"]


def _tag_reads_back_other(engine: FakeEngine, images: list[Image]) -> None:
    move, done = engine.point_tag, list[str]()

    def point_tag(repository: str, tag: str, digest: str) -> list[str]:
        problems = move(repository, tag, digest)
        if not done:  # the first move is no carbon copy: another index under the tag
            done.append(engine.serve(repository, b'{"schemaVersion": 2, "manifests": []}', [tag]))
        return problems

    engine.point_tag = point_tag  # type: ignore[method-assign]


def _edited(edit: Callable[[dict[str, Any]], None]) -> Plant:
    return _rewrite_after_create(lambda engine, staged, _: _reserve(engine, staged, edit))


REFUSALS: dict[str, tuple[Plant, str, bool]] = {
    # name: (what goes wrong, what the problems say, whether the public tag was moved and then moved back)
    "other inputs": (_other_inputs, "was built from other inputs than this plan's", False),
    "create refused": (_create_refused, "unknown: Method not allowed", False),
    "the staged index names one platform": (_edited(_one_platform), "; wanted linux/amd64", False),
    "a manifest it names is gone": (_rewrite_after_create(_lose), "which the registry does not hold", False),
    "a manifest of other bytes": (_rewrite_after_create(_other_bytes), "the registry serves bytes of sha256:", False),
    "a size that is not the manifest's": (_edited(_bigger), "bytes; the registry serves ", False),
    "a nested index": (_edited(_nested), "names what is no image manifest", False),
    "an image manifest, no index": (_rewrite_after_create(_image_not_index), ", not an index", False),
    "the staged index unreadable": (_unreadable, "more than 4 MiB", False),
    "an alias that does not move": (_alias_refused, "requested access to the resource is denied", True),
    "a tag that reads back other bytes": (_tag_reads_back_other, "once moved, not sha256:", True),
}


@pytest.mark.parametrize("refusal", list(REFUSALS))
def test_a_refused_join_leaves_the_old_index_under_the_tag_and_every_alias(
    joined: tuple[FakeEngine, list[Image], str], refusal: str
) -> None:
    engine, images, old = joined
    plant, said, moved_back = REFUSALS[refusal]
    plant(engine, images)
    problems = index.join(engine, images)
    assert problems and any(said in p for p in problems), problems
    assert named(engine, images[0]) == [old, old]  # the old index, under the tag and its alias
    staged = [n for n in staged_tags(engine) if engine.tags_served[n] != old]
    if staged:  # the temporary tag that holds the refused index is named
        assert any(f"{staged[0]}: the temporary tag is left in the registry" in p for p in problems), problems
    if moved_back:
        assert f"{REPOSITORY}:{images[0].tag} moved back to {old}" in problems, problems
    else:
        assert "the public tags were left as they were" in problems or not staged, problems
        moves = [a for c, a in engine.calls if c == "point_tag"]
        assert moves == [(REPOSITORY, name, old) for name in images[0].names]  # the first join's alone


def test_a_refused_signature_leaves_the_old_index(joined: tuple[FakeEngine, list[Image], str]) -> None:
    engine, images, old = joined
    signer = RecordingSigner(Path("cosign.key"), refusal="cosign sign failed: x")
    problems = index.join(engine, images, signer)
    assert f"{images[0].reference}: the index is not signed" in problems, problems
    assert "the public tags were left as they were" in problems
    (staged,) = [n for n in staged_tags(engine) if engine.tags_served[n] != old]
    assert signer.signed == [f"{REPOSITORY}@{engine.tags_served[staged]}"]  # the checked index, by its digest
    assert named(engine, images[0]) == [old, old]


def test_a_signed_join_signs_the_checked_index_before_any_public_tag_names_it(
    joined: tuple[FakeEngine, list[Image], str],
) -> None:
    engine, images, old = joined
    signer = RecordingSigner(Path("cosign.key"))
    original = engine.point_tag
    seen: list[str] = []

    def point_tag(repository: str, tag: str, digest: str) -> list[str]:
        seen.append(f"{len(signer.signed)} signed before {tag}")
        return original(repository, tag, digest)

    engine.point_tag = point_tag  # type: ignore[method-assign]
    assert index.join(engine, images, signer) == []
    new = engine.tags_served[f"{REPOSITORY}:{images[0].tag}"]
    assert new != old and named(engine, images[0]) == [new, new]
    assert signer.signed == [f"{REPOSITORY}@{new}"] and seen == [f"1 signed before {n}" for n in images[0].names]


def test_every_check_comes_before_the_public_tag_moves_and_the_tag_before_its_alias(
    joined: tuple[FakeEngine, list[Image], str],
) -> None:
    engine, images, _ = joined
    start = len(engine.calls)
    assert index.join(engine, images) == []
    calls = [(c, a) for c, a in engine.calls[start:] if c in ("create_index", "manifest", "point_tag")]
    ((_, (_, (tag,), _)),) = [call for call in calls if call[0] == "create_index"]
    staged = f"{REPOSITORY}:{tag}"
    new = engine.tags_served[staged]
    first_move = next(n for n, (c, _) in enumerate(calls) if c == "point_tag")
    reads = [a for c, a in calls[:first_move] if c == "manifest"]
    entries = [f"{REPOSITORY}@{d}" for d in engine.indexes[staged].values()]
    assert staged in reads and all(e in reads for e in entries)  # read back, and each manifest it names
    assert [a for c, a in calls if c == "point_tag"] == [(REPOSITORY, n, new) for n in images[0].names]


def test_a_join_of_the_images_the_public_tags_name_already_writes_nothing(
    joined: tuple[FakeEngine, list[Image], str],
) -> None:
    """Run again over the same images: the tag and alias name exactly their index already, so no temporary tag
    is written; signed all the same where asked."""
    engine, images, old = joined
    in_registry(engine, images[1])  # the arm64 image of the first join, under its own tag again
    before = (len([c for c, _ in engine.calls if c == "create_index"]), set(engine.tags_served))
    signer = RecordingSigner(Path("cosign.key"))
    assert index.join(engine, images, signer) == []
    assert (len([c for c, _ in engine.calls if c == "create_index"]), set(engine.tags_served)) == before
    assert named(engine, images[0]) == [old, old] and signer.signed == [f"{REPOSITORY}@{old}"]
    engine.tags_served[f"{REPOSITORY}:{images[0].aliases[0]}"] = engine.tags_served[images[1].platform_reference]
    assert index.join(engine, images) == []  # the alias names something else: written again, both moved
    assert named(engine, images[0]) == [old, old] and len(staged_tags(engine)) == 2


def test_a_first_join_whose_alias_does_not_move_says_the_tag_it_moved_cannot_be_removed(
    selection: list[plan.Selected],
) -> None:
    engine = FakeEngine()
    images = images_of(selection)
    for image in images:
        in_registry(engine, image)
    tag, alias = images[0].names
    engine.point_errors[f"{REPOSITORY}:{alias}"] = ["denied"]
    problems = index.join(engine, images)
    said = f"{REPOSITORY}:{tag} named nothing before; the registry's API removes no tag: delete it by tag"
    assert "denied" in problems and said in problems, problems
    assert named(engine, images[0])[1] is None


def test_join_takes_each_platforms_image_from_an_index_buildkit_pushed(selection: list[plan.Selected]) -> None:
    """The arm64 image was pushed as BuildKit pushes an image with its attestation: an index of both. The index
    written names its image manifest, as the amd64 one's, and beside it the attestation about it (annotated as
    BuildKit annotates it), never the nested index."""
    engine = FakeEngine()
    amd64, arm64 = images_of(selection)
    wanted = {"linux/amd64": in_registry(engine, amd64), "linux/arm64": in_registry(engine, arm64, as_index=True)}
    pushed_as = engine.tags_served[arm64.platform_reference]
    own = json.loads(engine.served[f"{REPOSITORY}@{pushed_as}"])["manifests"]
    assert pushed_as != wanted["linux/arm64"] and own[1]["platform"] == {"os": "unknown", "architecture": "unknown"}
    assert index.join(engine, [amd64, arm64]) == []
    for name in amd64.names:
        document = json.loads(engine.served[f"{REPOSITORY}@{engine.tags_served[f'{REPOSITORY}:{name}']}"])
        assert [(m["mediaType"], m["digest"]) for m in document["manifests"]] == [
            ("application/vnd.oci.image.manifest.v1+json", wanted["linux/amd64"]),
            ("application/vnd.oci.image.manifest.v1+json", wanted["linux/arm64"]),
            ("application/vnd.oci.image.manifest.v1+json", own[1]["digest"]),
        ]
        assert document["manifests"][2]["annotations"] == {
            "vnd.docker.reference.type": "attestation-manifest",
            "vnd.docker.reference.digest": wanted["linux/arm64"],
        }
    assert f"{REPOSITORY}@{wanted['linux/arm64']}" in engine.pulled  # the image pulled by its own digest


def _without_attestation(document: dict[str, Any]) -> None:
    del document["manifests"][2]


def _attestation_about_amd64(document: dict[str, Any]) -> None:
    about = document["manifests"][2]["annotations"]
    about["vnd.docker.reference.digest"] = document["manifests"][0]["digest"]


def _another_attestation(document: dict[str, Any]) -> None:
    document["manifests"].append({**document["manifests"][2], "digest": "sha256:" + "9" * 64})


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (_without_attestation, "lacks attestation"),
        (_attestation_about_amd64, "not one asked for"),
        (_another_attestation, "not one asked for"),
    ],
)
def test_an_index_that_drops_moves_or_adds_an_attestation_is_refused(
    selection: list[plan.Selected], edit: Callable[[dict[str, Any]], None], said: str
) -> None:
    engine = FakeEngine()
    amd64, arm64 = images_of(selection)
    in_registry(engine, amd64)
    in_registry(engine, arm64, as_index=True)
    _edited(edit)(engine, [amd64, arm64])
    problems = index.join(engine, [amd64, arm64])
    assert any(said in p for p in problems) and "the public tags were left as they were" in problems, problems
    assert named(engine, amd64) == [None, None]


def _index_of(engine: FakeEngine, image: Image, *platforms: str) -> None:
    """Under `image`'s own tag, an index naming its image manifest once for each of `platforms`."""
    digest = in_registry(engine, image)
    raw = engine.served[f"{REPOSITORY}@{digest}"]
    entries = [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest, "size": len(raw),
         "platform": dict(zip(("os", "architecture"), p.split("/"), strict=True))}
        for p in platforms
    ]  # fmt: skip
    document = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}
    engine.serve(REPOSITORY, json.dumps(document).encode(), [image.platform_tag])


@pytest.mark.parametrize(
    ("platforms", "said"),
    [
        (("linux/amd64",), "an index of linux/amd64, with no image of linux/arm64"),
        (("linux/arm64", "linux/arm64"), "an index of linux/arm64, linux/arm64, with several images of linux/arm64"),
        ((), "an index of nothing, with no image of linux/arm64"),
    ],
)
def test_join_refuses_an_index_under_a_platforms_tag_without_that_platforms_one_image(
    selection: list[plan.Selected], platforms: tuple[str, ...], said: str
) -> None:
    engine = FakeEngine()
    amd64, arm64 = images_of(selection)
    in_registry(engine, amd64)
    _index_of(engine, arm64, *platforms)
    (problem,) = index.join(engine, [amd64, arm64])
    assert problem == f"{arm64.platform_reference}: {said}"
    assert not [c for c, _ in engine.calls if c in ("create_index", "point_tag")]


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (b"not json", "not a manifest (not JSON"),
        (b'{"schemaVersion": 1, "fsLayers": []}', "not a manifest of schema version 2"),
        (b'{"schemaVersion": 2, "mediaType": "text/html"}', "'text/html', neither an image manifest nor an index"),
        (b'{"schemaVersion": 2, "manifests": [{"digest": "x"}]}', "its manifests[0] lacks a media type"),
        (b"[" * 100_000 + b"]" * 100_000, "not a manifest (not JSON"),
    ],
)
def test_join_refuses_what_is_no_manifest_under_a_platforms_tag(
    selection: list[plan.Selected], raw: bytes, said: str
) -> None:
    engine = FakeEngine()
    amd64, arm64 = images_of(selection)
    in_registry(engine, amd64)
    engine.serve(REPOSITORY, raw, [arm64.platform_tag])
    (problem,) = index.join(engine, [amd64, arm64])
    assert problem.startswith(f"{arm64.platform_reference}: ") and said in problem, problem
    assert "Traceback" not in problem and not [c for c, _ in engine.calls if c == "create_index"]


def test_build_push_of_one_platform_of_two_writes_no_index(selection: list[plan.Selected], tmp_path: Path) -> None:
    tag = selection[0].combination.image("runtime").tag
    arm64_only = plan.select(plan.load(tmp_path / "matrix.yaml"), [f"{tag}-arm64"])
    assert [i.platform for s in arm64_only for i in s.images] == ["linux/arm64"]
    engine = engine_holding()
    (outcome,) = run(engine, arm64_only, tmp_path, push=True)
    assert outcome.status == "built" and engine.pushed == [f"{REPOSITORY}:{tag}-arm64"]
    assert f"no index {REPOSITORY}:{tag}: the linux/amd64 image was not selected" in outcome.detail
    assert not [c for c, _ in engine.calls if c in ("create_index", "point_tag")]
    assert engine.indexes == {}


def test_build_push_where_one_platforms_push_fails_writes_no_index(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    tag = selection[0].combination.image("runtime").tag
    engine = engine_holding()
    engine.push_errors[f"{REPOSITORY}:{tag}-arm64"] = [["denied: requested access to the resource is denied"]]
    amd64, arm64 = run(engine, selection, tmp_path, push=True)
    assert (amd64.status, arm64.status) == ("built", "failed")
    assert f"no index {REPOSITORY}:{tag}: the linux/arm64 image failed" in amd64.detail
    assert not [c for c, _ in engine.calls if c in ("create_index", "point_tag")]
    assert engine.indexes == {}


def test_build_push_names_the_temporary_tag_it_leaves(selection: list[plan.Selected], tmp_path: Path) -> None:
    said: list[str] = []
    from torchimages.building.builder import Builder
    from torchimages.building.requests import BuildOptions

    options = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs", push=True)
    engine = engine_holding()
    Builder(engine, options, out=said.append).build(selection)
    (staged,) = staged_tags(engine)
    assert any(f"{staged}: the temporary tag is left in the registry" in line for line in said), said


def test_a_temporary_tag_is_unique_and_a_valid_tag_however_long_the_public_one() -> None:
    long = "2.14.1-cuda13.0-cudnn9-" + "x" * 120
    tags = {staging.staging_tag(long) for _ in range(50)}
    assert len(tags) == 50
    assert all(len(t) == 128 and re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", t) for t in tags)
    assert (
        staging.staging_tag("2.9.1-cpu-runtime", "0123456789ab") == "torchimages-staging-0123456789ab-2.9.1-cpu-runtime"
    )


ENTRY = (
    "{torch: 2.10.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none, "
    "platforms: [linux/amd64, linux/arm64]}"
)


def test_join_exits_non_zero_when_an_earlier_flavors_index_failed_and_a_later_ones_was_written(
    cli: Callable[..., tuple[int, str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "matrix.yaml").write_text(f"repository: {REPOSITORY}\nmatrix:\n  include:\n    - {ENTRY}\n")
    monkeypatch.chdir(tmp_path)
    (selected,) = plan.select(plan.load(tmp_path / "matrix.yaml"), [])
    flavors = list(dict.fromkeys(i.flavor for i in selected.images))
    assert len(flavors) == 2
    engine = FakeEngine()
    earlier, later = (images_of([selected], flavor) for flavor in flavors)
    in_registry(engine, earlier[0])  # the earlier flavor's arm64 image was never pushed
    for image in later:
        in_registry(engine, image)
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: engine)
    code, out, err = cli("join", "*")
    assert code == 1, (code, out, err)
    assert f"{earlier[0].reference}: no index:\n    {earlier[1].platform_reference} is not in the registry" in out
    assert f"{later[0].reference}: the index of" in out  # the later flavor's index was written all the same
    assert engine.indexes[later[0].reference] and earlier[0].reference not in engine.indexes


def test_the_fake_registry_serves_what_it_was_given() -> None:
    """The fake's registry is the test's literal bytes, by their digest (not computed by the code under test)."""
    engine = FakeEngine()
    raw = image_manifest("sha256:" + "1" * 64, "r:a")
    digest = engine.serve("r", raw, ["a"])
    assert engine.manifest("r:a") == raw == engine.manifest(f"r@{digest}") and engine.manifest("r:b") is None


def test_join_refuses_a_bad_registry_deadline_before_the_engine(
    cli: Callable[..., tuple[int, str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "matrix.yaml").write_text(f"repository: {REPOSITORY}\nmatrix:\n  include:\n    - {ENTRY}\n")
    monkeypatch.chdir(tmp_path)
    engine = FakeEngine()
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: engine)
    monkeypatch.setenv("TORCHIMAGES_REGISTRY_DEADLINE_S", "0")
    code, out, err = cli("join", "*")
    assert code == 2 and out == "" and err.startswith("error: TORCHIMAGES_REGISTRY_DEADLINE_S='0' must be"), err
    assert engine.calls == []


def test_an_own_index_holding_more_than_its_image_and_attestations_is_joined_without_them(
    selection: list[plan.Selected],
) -> None:
    """`<tag>-arm64` names an index of the arm64 image, its attestation and an older amd64 image: buildx would copy
    every entry of it, so the index is made from the arm64 image manifest alone, and the join says its
    attestations are not carried (outside attack 21)."""
    engine = FakeEngine()
    amd64, arm64 = images_of(selection)
    wanted = {"linux/amd64": in_registry(engine, amd64), "linux/arm64": in_registry(engine, arm64, as_index=True)}
    own = engine.tags_served[arm64.platform_reference]
    document = json.loads(engine.served[f"{REPOSITORY}@{own}"])
    stray = image_manifest("sha256:" + "e" * 64, "an older amd64 build")
    document["manifests"].append(
        entry(engine.serve(REPOSITORY, stray), len(stray), {"os": "linux", "architecture": "amd64"})
    )
    engine.serve(REPOSITORY, json.dumps(document).encode(), (arm64.platform_tag,))
    said: list[str] = []
    progress = Progress(PlainRenderer(said.append))
    assert index.join(engine, [amd64, arm64], progress=progress) == []
    public = json.loads(engine.served[f"{REPOSITORY}@{engine.tags_served[f'{REPOSITORY}:{amd64.tag}']}"])
    assert [m["digest"] for m in public["manifests"]] == [wanted["linux/amd64"], wanted["linux/arm64"]]
    assert any("its SBOM and provenance are not carried" in line and "linux/arm64: " in line for line in said), said


def test_an_attestation_of_the_own_index_about_another_image_makes_it_join_without_them(
    selection: list[plan.Selected],
) -> None:
    """The same attestation digest named twice, once about another manifest (outside attack 22): the index is made
    from the image manifest alone, and the join says so, rather than staging an index the check then refuses."""
    engine = FakeEngine()
    amd64, arm64 = images_of(selection)
    in_registry(engine, amd64)
    in_registry(engine, arm64, as_index=True)
    own = engine.tags_served[arm64.platform_reference]
    document = json.loads(engine.served[f"{REPOSITORY}@{own}"])
    moved = json.loads(json.dumps(document["manifests"][1]))
    moved["annotations"]["vnd.docker.reference.digest"] = "sha256:" + "8" * 64
    document["manifests"].append(moved)
    engine.serve(REPOSITORY, json.dumps(document).encode(), (arm64.platform_tag,))
    said: list[str] = []
    assert index.join(engine, [amd64, arm64], progress=Progress(PlainRenderer(said.append))) == []
    assert any("its SBOM and provenance are not carried" in line for line in said), said
