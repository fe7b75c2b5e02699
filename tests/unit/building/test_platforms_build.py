"""One public tag for two platforms (issue 20): each platform's image is built for its platform, verified under
its own local tag, and the public tag (and every alias) is an index written in the registry only once every
platform's image of the flavor passed; read back, and each image pulled back by digest, it is what was verified.
(On the containerd store the engine holds that index too: test_local_index.py; the fake engine here is the
classic store, where no public name is given locally to one platform's image.)

Against the fake engine: what each platform's image holds is a literal below (the facts probe's answer), never
computed by the code under test. Break a rule in builder.py or index.py (write the index when a platform failed,
tag the public name locally with one platform's image, skip the read-back or the pull-back) and a test here fails.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import OCI_INDEX, OCI_MANIFEST, FakeEngine, Raw, image_manifest, machine_answer, probe_answer
from tests.unit.building.test_builder import bake_into, promote, run
from torchimages import compat, platforms
from torchimages.building import bootstrap, index, staging
from torchimages.building.build_digest import BUILD_DIGEST_LABEL
from torchimages.building.builder import Builder
from torchimages.building.references import Baked
from torchimages.building.requests import BuildOptions
from torchimages.combination import Image
from torchimages.engine import ImageInfo
from torchimages.planning import plan
from torchimages.problems import UsageError
from torchimages.smoke import targets

MATRIX = """\
matrix:
  include:
    - {torch: 2.9.1, cuda: cpu, os: debian12, torchvision: none, torchaudio: none, flavors: [runtime],
       platforms: [linux/amd64, linux/arm64]}
"""
SITE = "/opt/venv/lib/python3.11/site-packages/torch"
# A true 2.9.1 CPU image of each platform, as the probe reports it: PyPI's aarch64 wheel reports 2.9.1+cpu too.
AMD64: Raw = probe_answer(
    "2.9.1+cpu",
    python="3.11",
    os=("debian", "12"),
    machine=machine_answer("x86_64", ("/usr/bin/python3.11", "x86_64"), (f"{SITE}/lib/libtorch_cpu.so", "x86_64")),
)
ARM64: Raw = probe_answer(
    "2.9.1+cpu",
    python="3.11",
    os=("debian", "12"),
    machine=machine_answer("aarch64", ("/usr/bin/python3.11", "aarch64"), (f"{SITE}/lib/libtorch_cpu.so", "aarch64")),
)
REPOSITORY = "registry.example.org/torchimages/pytorch"
UNKNOWN = {"os": "unknown", "architecture": "unknown"}  # BuildKit's attestation manifests' platform


@pytest.fixture
def selection(write_matrix: Callable[[str], Path]) -> list[plan.Selected]:
    text = MATRIX.replace("matrix:", f"repository: {REPOSITORY}\nmatrix:")
    return plan.select(plan.load(write_matrix(text)), [])


def engine_holding(amd64: Raw = AMD64, arm64: Raw = ARM64) -> FakeEngine:
    """An engine whose builds for each platform hold that platform's literal answer; the bootstrapped bases of
    both platforms are there, up to date (no mmdebstrap runs)."""
    engine = FakeEngine()
    engine.holds_by_platform = {"linux/amd64": amd64, "linux/arm64": arm64}
    os = compat.load().os["debian12"]
    for platform in ("linux/amd64", "linux/arm64"):
        label = {bootstrap.DIGEST_LABEL: bootstrap.digest(os, None, platform)}
        engine.images[bootstrap.reference(os, platform, multi_platform=True)] = label
    return engine


def test_each_platform_is_built_for_itself_with_its_own_labels(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = engine_holding()
    run(engine, selection, tmp_path)
    amd64, arm64 = engine.built
    assert (amd64.platform, arm64.platform) == ("linux/amd64", "linux/arm64")
    image = selection[0].combination.image("runtime", "linux/arm64")
    created = "org.opencontainers.image.created"
    built_digests = {dict(r.labels).get(BUILD_DIGEST_LABEL) for r in (amd64, arm64)}
    assert len(built_digests) == 2 and None not in built_digests  # each platform's own build digest
    entry = ("io.torchimages.matrix-entry", selection[0].combination.folder)
    for request in (amd64, arm64):  # each label once: arm64's own input digest is not passed a second time
        assert len({k for k, _ in request.labels}) == len(request.labels), request.labels
    assert {k: v for k, v in arm64.labels if k != BUILD_DIGEST_LABEL} == {
        "io.torchimages.input-digest": image.input_digest,
        "io.torchimages.platform": "linux/arm64",
        created: "2026-11-29T00:00:00Z",  # the build's SOURCE_DATE_EPOCH, every platform's
        entry[0]: entry[1],
    }
    # the Dockerfile's LABEL has linux/amd64's rest; its input digest is passed again (for the provenance)
    amd64_digest = selection[0].combination.image("runtime", "linux/amd64").input_digest
    assert [(k, v) for k, v in amd64.labels if k != BUILD_DIGEST_LABEL] == [
        (created, "2026-11-29T00:00:00Z"),
        entry,
        ("io.torchimages.input-digest", amd64_digest),
    ]


def test_the_index_is_written_once_both_platforms_passed_and_read_back(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = engine_holding()
    outcomes = run(engine, selection, tmp_path, push=True)
    assert [(o.image.platform, o.status) for o in outcomes] == [("linux/amd64", "built"), ("linux/arm64", "built")]
    tag = selection[0].combination.image("runtime").tag
    # locally, each platform's image under its own tag; the public name is never given to one platform's image
    assert engine.tagged == [f"{REPOSITORY}:{tag}-amd64", f"{REPOSITORY}:{tag}-arm64"]
    assert engine.pushed == engine.tagged
    ((repository, names, sources),) = [args for call, args in engine.calls if call == "create_index"]
    (staged,) = names  # written under a temporary tag first, never under a public name
    assert repository == REPOSITORY and staged.startswith(staging.PREFIX) and staged.endswith(f"-{tag}")
    wanted = {"linux/amd64": engine.manifests[engine.tagged[0]], "linux/arm64": engine.manifests[engine.tagged[1]]}
    assert sources == tuple(f"{REPOSITORY}@{digest}" for digest in wanted.values())
    public = selection[0].combination.image("runtime").names
    assert len(public) == 2 and all(engine.indexes[f"{REPOSITORY}:{name}"] == wanted for name in public)
    index = engine.tags_served[f"{REPOSITORY}:{staged}"]
    moves = [args for call, args in engine.calls if call == "point_tag"]
    assert moves == [(REPOSITORY, name, index) for name in public]  # the tag, then its alias
    assert engine.pulled == [f"{REPOSITORY}@{digest}" for digest in wanted.values()]
    assert f"{REPOSITORY}:{tag} names the index of linux/amd64 and linux/arm64" in outcomes[0].detail
    # the index is annotated with the OCI labels both platforms' images carry alike (here: the build's `--label`s)
    assert engine.index_annotations == [(("org.opencontainers.image.created", "2026-11-29T00:00:00Z"),)]


def test_a_platform_that_fails_verification_leaves_no_index(selection: list[plan.Selected], tmp_path: Path) -> None:
    """The arm64 image holds x86_64 programs (a build that ignored --platform): not tagged, and no index."""
    wrong = probe_answer("2.9.1+cpu", python="3.11", os=("debian", "12"), machine=machine_answer("x86_64"))
    engine = engine_holding(arm64=wrong)
    amd64, arm64 = run(engine, selection, tmp_path, push=True)
    assert (amd64.status, arm64.status) == ("built", "failed")
    assert "machine: the tag claims aarch64, the image has x86_64" in arm64.detail
    assert not [c for c, _ in engine.calls if c == "create_index"]
    tag = selection[0].combination.image("runtime").tag
    assert engine.tagged == [f"{REPOSITORY}:{tag}-amd64"]  # the verified one keeps its own tag, nothing more
    assert f"no index {REPOSITORY}:{tag}: the linux/arm64 image failed" in amd64.detail


def test_an_arm64_image_whose_torch_is_built_for_another_machine_is_refused(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    mixed = {
        **ARM64,
        "machine": machine_answer(
            "aarch64", ("/usr/bin/python3.11", "aarch64"), (f"{SITE}/lib/libtorch_cpu.so", "x86_64")
        ),
    }
    _, arm64 = run(engine_holding(arm64=mixed), selection, tmp_path)
    assert arm64.status == "failed"
    assert f"the image has uname aarch64; {SITE}/lib/libtorch_cpu.so: x86_64" in arm64.detail


def test_without_push_there_is_no_public_tag_and_the_outcome_says_where_each_image_is(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = engine_holding()
    outcomes = run(engine, selection, tmp_path)
    tag = selection[0].combination.image("runtime").tag
    assert engine.tagged == [f"{REPOSITORY}:{tag}-amd64", f"{REPOSITORY}:{tag}-arm64"] and engine.pushed == []
    here = f"here: {REPOSITORY}:{tag}-amd64, {REPOSITORY}:{tag}-arm64"  # the classic store holds no index
    assert f"no local index {REPOSITORY}:{tag}: " in outcomes[0].detail and here in outcomes[0].detail
    assert f"the registry's index {REPOSITORY}:{tag} is written by --push" in outcomes[0].detail


def test_an_index_the_registry_does_not_hold_as_written_fails_both_and_no_public_tag_names_it(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = engine_holding()
    written = engine.create_index

    def create_index(repository: str, names: Sequence[str], sources: Sequence[str], annotations: Any = ()) -> list[str]:
        return written(repository, names, sources[:1], annotations)  # the registry keeps linux/amd64's alone

    engine.create_index = create_index  # type: ignore[method-assign]
    outcomes = run(engine, selection, tmp_path, push=True)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all("index not written" in o.detail and "; wanted linux/amd64" in o.detail for o in outcomes)
    assert "the public tags were left as they were" in outcomes[0].detail
    assert [c for c, _ in engine.calls if c == "point_tag"] == []
    public = selection[0].combination.image("runtime").names
    assert not [name for name in public if f"{REPOSITORY}:{name}" in engine.tags_served]


def test_an_image_pulled_back_that_is_not_the_one_verified_fails_both(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = engine_holding()
    real_pull = engine.pull

    def pull(reference: str) -> list[str]:
        errors = real_pull(reference)
        engine.ids[reference] = "sha256:" + "2" * 64  # the registry served another image under that digest
        return errors

    engine.pull = pull  # type: ignore[method-assign]
    outcomes = run(engine, selection, tmp_path, push=True)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert "pulled back is sha256:2222" in outcomes[0].detail


def test_a_refused_index_fails_both_and_says_why(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = engine_holding()
    engine.index_errors = ["unknown: Method not allowed"]
    outcomes = run(engine, selection, tmp_path, push=True)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert "index not written:\n    unknown: Method not allowed" in outcomes[1].detail


def in_registry(
    engine: FakeEngine,
    image: Image,
    labels: dict[str, str] | None = None,
    as_index: bool = False,
    image_id: str = "",
) -> str:
    """`image` as a build elsewhere pushed it under its own tag: in the registry, pullable by digest; its image
    manifest's digest. `as_index`: pushed as BuildKit pushes an image with its attestation, an index of both;
    `image_id`: its id (default: one of its platform)."""
    image_id = image_id or "sha256:" + hashlib.sha256(image.platform.encode()).hexdigest()
    raw = image_manifest(image_id, image.platform_reference)
    digest = engine.serve(image.repository, raw, () if as_index else (image.platform_tag,))
    if as_index:
        attestation = image_manifest("sha256:" + "a" * 64, f"attestation of {image.platform_reference}")
        index = {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                entry(digest, len(raw), {"os": "linux", "architecture": platforms.arch(image.platform)}),
                {
                    **entry(engine.serve(image.repository, attestation), len(attestation), UNKNOWN),
                    "annotations": {
                        "vnd.docker.reference.type": "attestation-manifest",
                        "vnd.docker.reference.digest": digest,
                    },
                },
            ],
        }
        engine.serve(image.repository, json.dumps(index).encode(), (image.platform_tag,))
    pinned = f"{image.repository}@{digest}"
    engine.registry[pinned] = ({}, image_id)
    engine.platform_of[digest] = image.platform
    engine.add(ImageInfo(pinned, image_id, image.label_map() if labels is None else labels, {}, "", ()))
    return digest


def entry(digest: str, size: int, platform: dict[str, str], media_type: str = OCI_MANIFEST) -> dict[str, Any]:
    """One manifest of an index, as buildx and BuildKit write it."""
    return {"mediaType": media_type, "digest": digest, "size": size, "platform": platform}


def test_join_writes_the_index_of_the_platforms_images_the_registry_holds(selection: list[plan.Selected]) -> None:
    engine = FakeEngine()
    images = [selection[0].combination.image("runtime", p) for p in ("linux/amd64", "linux/arm64")]
    digests = {image.platform: in_registry(engine, image) for image in images}
    assert index.join(engine, images) == []
    assert all(engine.indexes[f"{REPOSITORY}:{name}"] == digests for name in images[0].names)


def test_join_writes_nothing_when_a_platform_is_missing_or_was_built_from_other_inputs(
    selection: list[plan.Selected],
) -> None:
    engine = FakeEngine()
    amd64, arm64 = [selection[0].combination.image("runtime", p) for p in ("linux/amd64", "linux/arm64")]
    in_registry(engine, amd64)
    (missing,) = index.join(engine, [amd64, arm64])
    assert f"{arm64.platform_reference} is not in the registry" in missing and "build and push it first" in missing
    in_registry(engine, arm64, {**arm64.label_map(), "io.torchimages.input-digest": "sha256:" + "9" * 64})
    (other,) = index.join(engine, [amd64, arm64])
    assert f"{arm64.platform_reference} was built from other inputs than this plan's" in other
    assert engine.indexes == {} and not [c for c, _ in engine.calls if c == "create_index"]


def test_the_suites_of_a_platform_this_machine_runs_under_emulation_say_so(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    said: list[str] = []
    options = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs")
    Builder(engine_holding(), options, lambda *_: [], out=said.append).build(selection)
    machine = os.uname().machine
    emulated = [p for p in ("linux/amd64", "linux/arm64") if platforms.of_machine(machine) != p]
    tag = selection[0].combination.image("runtime").tag
    for platform in emulated:
        line = f"{tag}-{platforms.arch(platform)}: the suites run under emulation ({platform} on {machine}): slower"
        assert any(line in s for s in said), said
    assert len([s for s in said if "under emulation" in s]) == len(emulated)


def test_promote_writes_the_index_once_each_platforms_baked_image_passed(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    """Each platform's image baked elsewhere (on its own runner) is verified and pushed under its own tag, then the
    index; one that fails verification leaves no index."""
    combination = selection[0].combination
    for arm64_holds, wanted in ((ARM64, ["promoted", "promoted"]), (AMD64, ["promoted", "failed"])):
        engine = engine_holding()
        baked = {}
        for image, holds in zip(selection[0].images, (AMD64, arm64_holds), strict=True):
            own = "sha256:" + hashlib.sha256(image.platform.encode()).hexdigest()  # each platform's image its own
            baked[image] = Baked(bake_into(engine, combination, image, holds, image_id=own).reference, (own,))
            engine.platforms[baked[image].reference] = image.platform  # as its bake built it
        outcomes = promote(engine, selection, baked, tmp_path, push=True)
        assert [o.status for o in outcomes] == wanted, [o.detail for o in outcomes]
        written = [args for call, args in engine.calls if call == "create_index"]
        assert len(written) == (1 if wanted[1] == "promoted" else 0)
        tag = combination.image("runtime").tag
        assert f"{REPOSITORY}:{tag}" not in engine.tagged  # never a local public name


def test_test_finds_each_platforms_image_under_its_own_tag(selection: list[plan.Selected]) -> None:
    engine = FakeEngine()
    images = [(selection[0].combination, i) for i in selection[0].images]
    with pytest.raises(UsageError, match=r"-amd64, .*-arm64"):
        targets.matrix_targets(engine, images)  # nothing built: both named by their own tags
    for _, image in images:
        engine.images[image.platform_reference] = image.label_map()
    found = targets.matrix_targets(engine, images)
    assert [(t.name, t.spec["image"]) for t in found] == [(i.own_tag, i.platform_reference) for _, i in images]
