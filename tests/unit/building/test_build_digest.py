"""One meaning of "up to date" (issue 42): `build` skips an image only when building it now would give the same
image. The build digest (torchimages/building/build_digest.py) covers the build context's bytes as they are at
build time, the bases provider, the base's identity and the distribution mirror (never its login); `build
--rebuild-stale` asks `outdated`'s question of an image the digest calls up to date and rebuilds a stale one
without the build cache.

The builder tests run against the fake engine: what a first build labelled is what the second build compares
with; the step script bytes, base labels and mirrors are the tests' literals.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes import FakeEngine
from tests.unit.building.test_builder import CPU_HOLDS, CPU_MATRIX, run
from torchimages import compat
from torchimages.building import bootstrap, build_digest
from torchimages.building.build_digest import BUILD_DIGEST_LABEL, BuildInputs
from torchimages.building.wheels import WheelSources
from torchimages.combination import BOOTSTRAP, INPUT_DIGEST_LABEL, Combination, Image
from torchimages.engine import ImageInfo
from torchimages.planning import plan

STEP = b"#!/bin/bash\nset -o errexit\napt-get install -y python3.12\n"
BASE_FACTS = {
    bootstrap.SUITE_LABEL: "noble",
    bootstrap.SOURCES_LABEL: "deb http://archive.example.org/ubuntu noble main",
    bootstrap.RELEASE_DATE_LABEL: "Thu, 25 Apr 2024 15:10:33 UTC",
}


def inputs(**changed: object) -> BuildInputs:
    base = BuildInputs(
        input_digest="sha256:" + "1" * 64,
        context=(("Dockerfile", b"FROM ubuntu:24.04 AS runtime\n"), ("steps/apt-install.sh", STEP)),
        bases="registry",
        base=(("0", "registry=ubuntu:24.04@sha256:" + "2" * 64),),
        mirror=None,
    )
    return dataclasses.replace(base, **changed)  # type: ignore[arg-type]


# --- the digest itself: property tests ---------------------------------------------------------------------------

contexts = st.lists(
    st.tuples(
        st.sampled_from(["Dockerfile", "steps/apt-install.sh", "steps/venv.sh", "requirements.lock"]),
        st.binary(min_size=1, max_size=64),
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda f: f[0],
).map(lambda files: tuple(sorted(files)))


@given(contexts, st.data())
@settings(max_examples=100, deadline=None)
def test_any_byte_of_any_file_of_the_context_changes_the_digest(
    context: tuple[tuple[str, bytes], ...], data: st.DataObject
) -> None:
    which = data.draw(st.integers(0, len(context) - 1))
    name, content = context[which]
    at = data.draw(st.integers(0, len(content) - 1))
    byte = data.draw(st.integers(0, 255).filter(lambda b: b != content[at]))
    edited = content[:at] + bytes([byte]) + content[at + 1 :]
    other = (*context[:which], (name, edited), *context[which + 1 :])
    assert build_digest.digest(inputs(context=context)) != build_digest.digest(inputs(context=other))
    assert build_digest.digest(inputs(context=context)) == build_digest.digest(inputs(context=context))


@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20))
def test_the_bases_provider_and_the_base_identity_change_the_digest(one: str, two: str) -> None:
    if one != two:
        assert build_digest.digest(inputs(bases=one)) != build_digest.digest(inputs(bases=two))
        assert build_digest.digest(inputs(base=(("0", one),))) != build_digest.digest(inputs(base=(("0", two),)))


hosts = st.from_regex(r"[a-z][a-z0-9]{0,10}\.example(:[1-9][0-9]{1,4})?", fullmatch=True)
paths = st.from_regex(r"(/[a-z0-9]{1,8}){0,3}", fullmatch=True)
logins = st.from_regex(r"[a-z0-9]{1,8}(:[A-Za-z0-9]{1,12})?", fullmatch=True)


@given(hosts, paths, logins, logins, st.booleans())
def test_a_mirror_changes_the_digest_and_its_login_does_not(
    host: str, path: str, one: str, two: str, line: bool
) -> None:
    def mirror(login: str | None, where: str = host) -> str:
        url = f"https://{login + '@' if login else ''}{where}{path}"
        return f"deb {url} noble main" if line else url

    def of(text: str | None) -> str:
        return build_digest.digest(inputs(mirror=build_digest.without_login(text) if text else None))

    assert of(mirror(one)) == of(mirror(two)) == of(mirror(None))
    assert of(mirror(None)) != of(None)
    assert of(mirror(None)) != of(mirror(None, "other" + host))
    assert build_digest.without_login(mirror(one)) == mirror(None)


def test_a_login_is_stripped_from_a_url_and_from_a_sources_line() -> None:
    assert build_digest.without_login("https://ci:s3cret@mirror.example:8443/debian") == (
        "https://mirror.example:8443/debian"
    )
    line = "deb [signed-by=/k.gpg] http://ci:s3cret@mirror.example/ubuntu noble main"
    assert build_digest.without_login(line) == "deb [signed-by=/k.gpg] http://mirror.example/ubuntu noble main"
    assert build_digest.without_login("file:///srv/mirror") == "file:///srv/mirror"


def test_the_context_is_read_whole_from_its_folder(tmp_path: Path) -> None:
    (tmp_path / "steps").mkdir()
    (tmp_path / "Dockerfile").write_bytes(b"FROM x\n")
    (tmp_path / "steps" / "venv.sh").write_bytes(b"uv\n")
    assert build_digest.context_files(tmp_path) == (("Dockerfile", b"FROM x\n"), ("steps/venv.sh", b"uv\n"))


# --- the builder: skips only when the whole digest matches --------------------------------------------------------


@pytest.fixture
def cpu(write_matrix: Callable[[str], Path]) -> Path:
    return write_matrix(CPU_MATRIX)


def selected(matrix: Path, bases: str | None = None) -> list[plan.Selected]:
    return plan.select(plan.load(matrix, os_bases=bases), ["*-runtime"])


def context(tmp_path: Path, chosen: Sequence[plan.Selected], step: bytes = STEP) -> None:
    """The images folder the builds read: the combination's Dockerfile and a step script (literal bytes)."""
    folder = tmp_path / "images" / chosen[0].combination.folder
    (folder / "steps").mkdir(parents=True, exist_ok=True)
    (folder / "Dockerfile").write_bytes(b"FROM ubuntu:24.04 AS runtime\nRUN bash /mnt/apt-install.sh python3.12\n")
    (folder / "steps" / "apt-install.sh").write_bytes(step)


def the_image(chosen: Sequence[plan.Selected]) -> Image:
    (image,) = chosen[0].images
    return image


def built_once(chosen: Sequence[plan.Selected], tmp_path: Path, **options: Any) -> dict[str, str]:
    """The labels a first build gave the image (the Dockerfile's input digest LABEL added: the fake engine reads
    no Dockerfile)."""
    engine = base_engine()
    assert [o.status for o in run(engine, list(chosen), tmp_path, **options)] == ["built"]
    image = the_image(chosen)
    return {**engine.images[image.reference], INPUT_DIGEST_LABEL: image.input_digest}


def base_engine(
    facts: dict[str, str] | None = None, mirror: str | None = None, os_name: str = "ubuntu24.04"
) -> FakeEngine:
    """A fake engine holding the bootstrapped base of `os_name` (made with `mirror`), labelled `facts`."""
    engine = FakeEngine(CPU_HOLDS)
    if facts is None:
        return engine
    os = compat.load().os[os_name]
    labels = {bootstrap.DIGEST_LABEL: bootstrap.digest(os, mirror), **facts}
    engine.add(ImageInfo(bootstrap.reference(os, "linux/amd64", False), "sha256:" + "b" * 64, labels, {}, "0", ()))
    return engine


def again(
    chosen: Sequence[plan.Selected],
    tmp_path: Path,
    labels: dict[str, str],
    engine: FakeEngine | None = None,
    **options: Any,
) -> tuple[str, FakeEngine]:
    """A second build of the image, whose public tag holds an image labelled `labels`: its status."""
    engine = engine or base_engine()
    engine.images[the_image(chosen).reference] = dict(labels)
    (outcome,) = run(engine, list(chosen), tmp_path, **options)
    return outcome.status, engine


def test_an_image_is_skipped_only_when_its_whole_digest_matches(cpu: Path, tmp_path: Path) -> None:
    chosen = selected(cpu)
    context(tmp_path, chosen)
    labels = built_once(chosen, tmp_path)
    assert labels[BUILD_DIGEST_LABEL].startswith("sha256:")
    status, engine = again(chosen, tmp_path, labels)
    assert status == "skipped" and engine.built == []
    for missing in (BUILD_DIGEST_LABEL, INPUT_DIGEST_LABEL):
        status, engine = again(chosen, tmp_path, {k: v for k, v in labels.items() if k != missing})
        assert status == "built" and len(engine.built) == 1, missing
    status, _ = again(chosen, tmp_path, {**labels, BUILD_DIGEST_LABEL: "sha256:" + "0" * 64})
    assert status == "built"


def test_a_step_script_edited_by_hand_is_rebuilt(cpu: Path, tmp_path: Path) -> None:
    chosen = selected(cpu)
    context(tmp_path, chosen)
    labels = built_once(chosen, tmp_path)
    context(tmp_path, chosen, STEP.replace(b"python3.12", b"python3.12 curl"))  # the context as it is now
    status, engine = again(chosen, tmp_path, labels)
    assert status == "built" and len(engine.built) == 1
    assert engine.images[the_image(chosen).reference][BUILD_DIGEST_LABEL] != labels[BUILD_DIGEST_LABEL]


def test_an_image_built_on_other_bases_is_rebuilt(cpu: Path, tmp_path: Path) -> None:
    registry = selected(cpu)
    context(tmp_path, registry)
    labels = built_once(registry, tmp_path)  # on ubuntu:24.04 from a registry
    bootstrapped = selected(cpu, BOOTSTRAP)
    assert the_image(bootstrapped).input_digest == the_image(registry).input_digest  # the Dockerfile is the same
    status, engine = again(bootstrapped, tmp_path, labels, base_engine(BASE_FACTS))
    assert status == "built" and len(engine.built) == 1


def test_a_bootstrapped_base_of_another_release_date_or_mirror_is_rebuilt_not_its_login(
    cpu: Path, tmp_path: Path
) -> None:
    chosen = selected(cpu, BOOTSTRAP)
    context(tmp_path, chosen)
    mirror = "ubuntu=https://mirror.example/ubuntu"
    first = base_engine(BASE_FACTS, "https://mirror.example/ubuntu")
    assert [o.status for o in run(first, chosen, tmp_path, mirrors=(mirror,))] == ["built"]
    labels = {**first.images[the_image(chosen).reference], INPUT_DIGEST_LABEL: the_image(chosen).input_digest}

    login = "ubuntu=https://ci:s3cret@mirror.example/ubuntu"
    same = base_engine(BASE_FACTS, "https://ci:s3cret@mirror.example/ubuntu")
    assert again(chosen, tmp_path, labels, same, mirrors=(login,))[0] == "skipped"
    other = base_engine(BASE_FACTS, "https://other.example/ubuntu")
    assert again(chosen, tmp_path, labels, other, mirrors=("ubuntu=https://other.example/ubuntu",))[0] == "built"
    newer = base_engine({**BASE_FACTS, bootstrap.RELEASE_DATE_LABEL: "Thu, 04 Dec 2026 10:00:00 UTC"}, mirror[7:])
    assert again(chosen, tmp_path, labels, newer, mirrors=(mirror,))[0] == "built"


def test_other_wheel_sources_or_another_source_date_epoch_are_rebuilt_not_a_login(cpu: Path, tmp_path: Path) -> None:
    """The wheels' index decides which files of a version come (PyPI's torch 2.14.1 or an index's +cu130), and
    SOURCE_DATE_EPOCH every file's time: either changed, the image built now differs; a login does not."""
    chosen = selected(cpu)
    context(tmp_path, chosen)
    mirror = WheelSources("https://mirror.example/simple")
    labels = built_once(chosen, tmp_path, sources=mirror)
    assert again(chosen, tmp_path, labels, sources=WheelSources("https://ci:pw@mirror.example/simple"))[0] == (
        "skipped"
    )
    for other in (
        WheelSources(),
        WheelSources("https://other.example/simple"),
        WheelSources("https://mirror.example/simple", ("https://extra.example/simple",)),
        WheelSources("https://mirror.example/simple", (), ("https://wheels.example/",)),
    ):
        assert again(chosen, tmp_path, labels, sources=other)[0] == "built", other
    assert again(chosen, tmp_path, labels, sources=mirror, source_date_epoch=1)[0] == "built"
    assert again(chosen, tmp_path, labels, sources=mirror)[0] == "skipped"


def test_a_registry_base_locked_to_another_digest_is_rebuilt(cpu: Path, tmp_path: Path) -> None:
    chosen = selected(cpu)
    context(tmp_path, chosen)
    labels = built_once(chosen, tmp_path)
    combination = chosen[0].combination
    (os_base,) = combination.registry_bases
    moved = dataclasses.replace(
        combination, registry_bases=(dataclasses.replace(os_base, digest="sha256:" + "7" * 64),)
    )
    status, _ = again([plan.Selected(moved, chosen[0].images)], tmp_path, labels)
    assert status == "built"


# --- build --rebuild-stale: outdated's question before a skip -----------------------------------------------------


def stale_run(
    chosen: Sequence[plan.Selected], tmp_path: Path, labels: dict[str, str], reasons: Sequence[str]
) -> tuple[str, FakeEngine, list[str]]:
    from torchimages.building.builder import Builder
    from torchimages.building.requests import BuildOptions

    asked: list[str] = []

    def stale(combination: Combination, image: Image) -> Sequence[str]:
        asked.append(image.reference)
        return reasons

    engine = base_engine()
    engine.images[the_image(chosen).reference] = dict(labels)
    options = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs")
    (outcome,) = Builder(engine, options, out=lambda _: None, stale_check=stale).build(list(chosen))
    return outcome.status, engine, asked


def test_rebuild_stale_rebuilds_a_stale_image_without_the_cache(cpu: Path, tmp_path: Path) -> None:
    chosen = selected(cpu)
    context(tmp_path, chosen)
    labels = built_once(chosen, tmp_path)
    reasons = ["os-updates: libssl3 3.0.13-0ubuntu3.1: newer in noble-security: 3.0.13-0ubuntu3.6"]
    status, engine, asked = stale_run(chosen, tmp_path, labels, reasons)
    assert asked == [the_image(chosen).reference]
    assert status == "built" and [r.no_cache for r in engine.built] == [True]  # the old apt layer is not replayed
    status, engine, asked = stale_run(chosen, tmp_path, labels, [])
    assert status == "skipped" and engine.built == [] and asked == [the_image(chosen).reference]


def test_devel_on_a_runtime_built_just_now_is_rebuilt(cpu: Path, tmp_path: Path) -> None:
    both = plan.select(plan.load(cpu), [])
    context(tmp_path, both)
    engine = base_engine()
    run(engine, both, tmp_path)
    labels = {i.reference: {**engine.images[i.reference], INPUT_DIGEST_LABEL: i.input_digest} for i in both[0].images}
    runtime = both[0].combination.image("runtime")
    engine = base_engine()
    for image in both[0].images:  # devel up to date by its labels, runtime not (its digest differs)
        engine.images[image.reference] = labels[image.reference]
    engine.images[runtime.reference] = {**labels[runtime.reference], BUILD_DIGEST_LABEL: "sha256:" + "0" * 64}
    devel, built_runtime = run(engine, both, tmp_path)
    assert (devel.status, built_runtime.status) == ("built", "built")
    assert [r.target for r in engine.built] == ["runtime", "devel"]


def test_build_rebuild_stale_asks_outdateds_question_of_every_check(cpu: Path, tmp_path: Path) -> None:
    """The CLI's wiring: `--rebuild-stale` gives the builder security.staleness's answer; without it, no question
    is asked."""
    import argparse

    from torchimages.building.renderers import PlainRenderer
    from torchimages.building.requests import BuildOptions
    from torchimages.cli import common
    from torchimages.security.gate import GateOptions

    chosen = selected(cpu)
    engine = FakeEngine(CPU_HOLDS)  # the image is not there: staleness's first reason
    options = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs")
    gate = GateOptions((), frozenset({"os-updates", "python"}), False, None)
    args = argparse.Namespace(test=["none"])
    plain = common.make_builder(args, engine, options, PlainRenderer(lambda _: None), None, gate)  # type: ignore[arg-type]
    assert plain.stale_check is None
    asking = common.make_builder(args, engine, options, PlainRenderer(lambda _: None), None, gate, stale=True)  # type: ignore[arg-type]
    assert asking.stale_check is not None
    reasons = asking.stale_check(chosen[0].combination, the_image(chosen))
    assert [r.split(":")[0] for r in reasons] == ["not there"]


DEBIAN_CPU = (
    "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}\n"
)


@pytest.mark.parametrize("bootstrapped_here", [True, False])
def test_a_baked_image_is_up_to_date_for_build_only_with_its_bases_facts(
    write_matrix: Callable[[str], Path], tmp_path: Path, bootstrapped_here: bool
) -> None:
    """Every build path agrees: the build digest a bake target carries (its base's facts where `bake --bootstrap`
    made the base here) is the one `build` computes, so a promoted image is up to date; a bake that never saw the
    base labels a digest `build` does not match (rebuilt, never skipped on a guess)."""
    from torchimages.building import bake
    from torchimages.building.requests import BuildOptions
    from torchimages.building.wheels import WheelSources

    chosen = plan.select(plan.load(write_matrix(DEBIAN_CPU)), ["*-runtime"])
    context(tmp_path, chosen)
    image = the_image(chosen)
    local = build_digest.base_reference(chosen[0].combination, image)
    assert local is not None
    mirror = "debian=https://deb.example/debian"
    options = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs", mirrors=(mirror,))
    facts = {local: BASE_FACTS} if bootstrapped_here else {}
    request = bake.BakeRequest(options, WheelSources("https://pypi.example/simple"), secrets_dir=tmp_path / "s")
    (entry,) = bake.entries(chosen, dataclasses.replace(request, base_labels=facts))
    labels = {**dict(entry.request.labels), INPUT_DIGEST_LABEL: image.input_digest}
    engine = base_engine(BASE_FACTS, "https://deb.example/debian", "debian12")
    status, engine = again(chosen, tmp_path, labels, engine, mirrors=(mirror,))
    assert (status == "skipped", len(engine.built)) == ((True, 0) if bootstrapped_here else (False, 1))


def test_rebuild_stale_takes_a_check_that_could_not_look_as_a_reason(cpu: Path, tmp_path: Path) -> None:
    """`--rebuild-stale` never calls an image up to date on checks that did not run (the fake engine answers no
    container): each is a reason, said, so the image is rebuilt rather than skipped."""
    import argparse

    from torchimages.building.renderers import PlainRenderer
    from torchimages.building.requests import BuildOptions
    from torchimages.cli import common
    from torchimages.combination import INPUT_DIGEST_LABEL
    from torchimages.engine import ImageInfo
    from torchimages.security.gate import GateOptions

    chosen = selected(cpu)
    image = the_image(chosen)
    engine = FakeEngine(CPU_HOLDS)
    engine.add(ImageInfo(image.platform_reference, "sha256:" + "1" * 64, {INPUT_DIGEST_LABEL: "x"}, {}, "", ()))
    options = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs")
    gate = GateOptions((), frozenset(), False, None)
    args = argparse.Namespace(test=["none"])
    asking = common.make_builder(args, engine, options, PlainRenderer(lambda _: None), None, gate, stale=True)  # type: ignore[arg-type]
    assert asking.stale_check is not None
    reasons = asking.stale_check(chosen[0].combination, image)
    assert any(r.startswith("not known current: os-updates") for r in reasons), reasons


def test_a_file_name_that_is_not_utf8_is_hashed_not_a_traceback(tmp_path: Path) -> None:
    import os

    from torchimages.building import build_digest

    (tmp_path / "steps").mkdir()
    (tmp_path / "steps" / "a.sh").write_bytes(b"echo\n")
    before = build_digest.context_files(tmp_path)
    os.symlink("/dev/zero", tmp_path / "zero")  # a link is hashed as its target's name, never read
    open(os.path.join(os.fsencode(tmp_path), b"steps", b"bad\xff"), "wb").close()
    after = build_digest.context_files(tmp_path)
    assert before != after and ("zero", b"link:/dev/zero") in after
    inputs = build_digest.BuildInputs("sha256:x", after, "registry", (), None)
    assert build_digest.digest(inputs).startswith("sha256:")


def test_the_source_check_asks_only_about_images_a_build_would_build(cpu: Path, tmp_path: Path) -> None:
    """An image already up to date needs no wheel index or registry: `build` asks the sources only of the images
    it may build (all of them with --no-cache or --rebuild-stale)."""
    import dataclasses as dc

    from torchimages.building.requests import BuildOptions
    from torchimages.cli import common

    chosen = selected(cpu)
    context(tmp_path, chosen)
    labels = built_once(chosen, tmp_path)
    engine = base_engine()
    engine.images[the_image(chosen).reference] = dict(labels)
    options = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs")
    assert common.to_build(chosen, engine, options, rebuild_stale=False) == []
    assert common.to_build(chosen, engine, options, rebuild_stale=True) == list(chosen)
    assert common.to_build(chosen, engine, dc.replace(options, no_cache=True), rebuild_stale=False) == list(chosen)
    engine.images[the_image(chosen).reference] = {**labels, "io.torchimages.build-digest": "sha256:" + "0" * 64}
    assert common.to_build(chosen, engine, options, rebuild_stale=False) == list(chosen)
