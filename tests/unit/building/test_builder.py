"""The rules that make tags true, against an in-memory fake engine (no Docker).

Each test breaks when its rule is broken in builder.py: a mismatch or a failed smoke gate leaves no
tag, verification cannot be skipped, shared names are refused before any build, an up-to-date image
keeps its aliases and is pushed, and the temporary reference never outlives the build.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import pytest

from tests.fakes import CU118_270, CU118_ARCHS, CU118_LIBRARIES, FakeEngine, Raw, probe_answer
from torchimages.building import bake, builder, verify
from torchimages.building.builder import Builder
from torchimages.building.outcome import Outcome, summary
from torchimages.building.readings import INSTALLED_PROBE
from torchimages.building.references import TEMP_REPOSITORY, Baked
from torchimages.building.requests import BuildOptions
from torchimages.combination import INPUT_DIGEST_LABEL, Combination, Image, Toolkit
from torchimages.engine import BuildRequest, CacheSpec, EngineError, HistoryEntry
from torchimages.planning import plan
from torchimages.problems import InputError

MATRIX = "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8'}\n    - {torch: 2.7.1, cuda: '11.8'}\n"


# What true images of MATRIX's combinations hold, as the facts probe reports it, written out: torch 2.7.x+cu118
# pins cuDNN 9.1.0.70 (torch reports 90100) and NCCL 2.21.5; ubuntu22.04's Python is 3.10; the NVIDIA
# libraries it loads are those wheels' (tests/fakes.py).
HOLDS: dict[str, Raw] = {
    "2.7.0": CU118_270,
    "2.7.1": probe_answer(
        "2.7.1+cu118",
        cuda="11.8",
        cudnn=90100,
        nccl=[2, 21, 5],
        python="3.10",
        os=("ubuntu", "22.04"),
        torchvision="0.22.1+cu118",
        torchaudio="2.7.1+cu118",
        libraries=CU118_LIBRARIES,
        cuda_archs_probe=CU118_ARCHS,
    ),
}


@pytest.fixture
def selection(write_matrix: Callable[[str], Path]) -> list[plan.Selected]:
    return plan.select(plan.load(write_matrix(MATRIX)), [])


def true_facts(combination: Combination) -> Raw:
    """What a true image of one of MATRIX's combinations holds (HOLDS, by its torch)."""
    return HOLDS[combination.torch]


def run(
    engine: FakeEngine,
    selected: list[plan.Selected],
    tmp_path: Path,
    gate: builder.SmokeGate | None = None,
    cancelled: threading.Event | None = None,
    **options: object,
) -> list[Outcome]:
    opts = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs", **options)  # type: ignore[arg-type]
    return Builder(engine, opts, gate, out=lambda _: None, cancelled=cancelled).build(selected)


def labels_of_a_build(selected: Sequence[plan.Selected], tmp_path: Path, holds: Raw) -> dict[str, dict[str, str]]:
    """The labels a first build gave each image, by its public reference (the Dockerfile's input digest LABEL
    added: the fake engine reads no Dockerfile): what makes it up to date for the next build."""
    first = FakeEngine(holds)
    run(first, list(selected), tmp_path)
    return {
        i.reference: {**first.images[i.reference], INPUT_DIGEST_LABEL: i.input_digest}
        for s in selected
        for i in s.images
    }


def names(selected: Sequence[plan.Selected]) -> set[str]:
    return {f"{i.repository}:{n}" for s in selected for i in s.images for n in i.names}


def test_a_verified_image_gets_its_tag_and_every_alias(selection: list[plan.Selected], tmp_path: Path) -> None:
    newest = selection[1:]  # 2.7.1: the minor's aliases and `latest` point at it
    assert all(image.aliases for image in newest[0].images)
    engine = FakeEngine(true_facts(newest[0].combination))
    outcomes = run(engine, newest, tmp_path)
    assert [o.status for o in outcomes] == ["built", "built"]
    assert set(engine.tagged) == names(newest)
    assert engine.temporary() == [] and engine.pushed == []
    for image in newest[0].images:  # what it holds, beside its log, for comparing rebuilds
        assert "gcc=12.2.0-14" in (tmp_path / "logs" / f"{image.tag}.installed.txt").read_text()


def test_a_version_that_differs_leaves_no_tag_and_names_both_values(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    first = selection[:1]
    engine = FakeEngine({**true_facts(first[0].combination), "cudnn": 90501})
    outcomes = run(engine, first, tmp_path, push=True)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all("cudnn: the tag claims 9.1.0.70, the image has 9.5.1" in o.detail for o in outcomes)
    assert engine.tagged == [] and engine.pushed == []
    assert engine.temporary() == [], "the temporary reference must be removed"


@pytest.mark.parametrize("torchaudio", ["2.7.0+cu126", "2.7.0", None])
def test_a_companion_of_another_build_or_missing_leaves_no_tag(
    selection: list[plan.Selected], tmp_path: Path, torchaudio: str | None
) -> None:
    first = selection[:1]
    engine = FakeEngine({**true_facts(first[0].combination), "torchaudio": {"version": torchaudio, "error": None}})
    outcomes = run(engine, first, tmp_path, push=True)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    found = torchaudio or "none"
    assert all(f"torchaudio: the tag claims 2.7.0+cu118, the image has {found}" in o.detail for o in outcomes)
    assert engine.tagged == [] and engine.pushed == [] and engine.temporary() == []


def test_a_failing_smoke_gate_leaves_no_tag(selection: list[plan.Selected], tmp_path: Path) -> None:
    first = selection[:1]
    engine = FakeEngine(true_facts(first[0].combination))
    calls: list[str] = []

    def gate(combination: Combination, image: Image, reference: str, facts: verify.Facts, *_: object) -> list[str]:
        calls.append(reference)
        assert reference.startswith(TEMP_REPOSITORY), "the gate runs on the temporary reference"
        return ["smoke suites (cpu) failed:", "FAILED test_import_is_silent"]

    outcomes = run(engine, first, tmp_path, gate, push=True)
    assert [o.status for o in outcomes] == ["failed", "failed"] and len(calls) == 2
    assert all("FAILED test_import_is_silent" in o.detail for o in outcomes)
    assert engine.tagged == [] and engine.pushed == [] and engine.temporary() == []


def test_a_failed_build_leaves_no_tag(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = FakeEngine(true_facts(selection[0].combination), build_status=1)
    outcomes = run(engine, selection[:1], tmp_path)
    devel, runtime = outcomes
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert "build failed (exit 1)" in runtime.detail and devel.detail.startswith("not built: devel is built on")
    assert engine.tagged == [] and engine.probed == [] and [r.target for r in engine.built] == ["runtime"]


@pytest.mark.parametrize(
    ("no_cache", "push", "jobs", "gate"),
    list(itertools.product([False, True], [False, True], [1, 2], [False, True])),
)
def test_no_option_skips_verification(
    selection: list[plan.Selected], tmp_path: Path, no_cache: bool, push: bool, jobs: int, gate: bool
) -> None:
    engine = FakeEngine(probe_answer("9.9.9", python="3.10", os=("ubuntu", "22.04")))
    passing: builder.SmokeGate = lambda combination, image, reference, facts, start: []  # noqa: E731
    outcomes = run(engine, selection, tmp_path, passing if gate else None, no_cache=no_cache, push=push, jobs=jobs)
    assert {o.status for o in outcomes} == {"failed"}
    assert all("torch: the tag claims" in o.detail for o in outcomes)
    assert engine.tagged == [] and engine.pushed == []
    assert len(engine.probed) == len(engine.built) == 4


def test_images_that_would_share_a_name_are_refused_before_any_build(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    first, second = selection
    clash = dataclasses.replace(second.images[0], aliases=(*second.images[0].aliases, first.images[0].tag))
    engine = FakeEngine(true_facts(first.combination))
    with pytest.raises(InputError, match=f"both be tagged '{first.images[0].repository}:{first.images[0].tag}'"):
        run(engine, [first, plan.Selected(second.combination, (clash, second.images[1]))], tmp_path)
    assert engine.built == []


def test_an_up_to_date_image_keeps_its_aliases_and_is_pushed(selection: list[plan.Selected], tmp_path: Path) -> None:
    first = selection[1:]
    engine = FakeEngine(true_facts(first[0].combination))
    engine.images |= labels_of_a_build(first, tmp_path, true_facts(first[0].combination))
    outcomes = run(engine, first, tmp_path, push=True)
    assert [o.status for o in outcomes] == ["skipped", "skipped"]
    assert engine.built == []
    assert set(engine.tagged) == set(engine.pushed) == names(first)


@pytest.mark.parametrize(("label", "no_cache"), [("sha256:older", False), (None, True)])
def test_a_changed_input_digest_or_no_cache_rebuilds(
    selection: list[plan.Selected], tmp_path: Path, label: str | None, no_cache: bool
) -> None:
    first = selection[:1]
    engine = FakeEngine(true_facts(first[0].combination))
    engine.images |= labels_of_a_build(first, tmp_path, true_facts(first[0].combination))
    for image in first[0].images:
        engine.images[image.reference][INPUT_DIGEST_LABEL] = label or image.input_digest
    assert [o.status for o in run(engine, first, tmp_path, no_cache=no_cache)] == ["built", "built"]
    assert len(engine.built) == 2


def test_only_verified_images_are_pushed(selection: list[plan.Selected], tmp_path: Path) -> None:
    good, bad = selection
    engine = FakeEngine(true_facts(good.combination))  # every image holds 2.7.0: the 2.7.1 tags would lie
    outcomes = run(engine, [good, bad], tmp_path, push=True)
    assert [o.status for o in outcomes] == ["built", "built", "failed", "failed"]
    assert set(engine.pushed) == names([good]) and not set(engine.tagged) & names([bad])


def test_an_interrupt_during_a_build_tags_nothing_and_starts_nothing_more(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    """Ctrl-C while the first image builds: it is `interrupted` (not failed), its temporary reference goes,
    nothing is tagged or pushed, and no later image is built."""
    engine = FakeEngine(true_facts(selection[0].combination))
    cancelled = threading.Event()
    engine.on_build = lambda request: cancelled.set()  # the signal arrives while the engine builds
    outcomes = run(engine, selection, tmp_path, cancelled=cancelled, push=True)
    assert [o.status for o in outcomes] == ["interrupted"] * 4
    first = outcomes[1]  # runtime is built first (devel is built on it)
    assert first.image.flavor == "runtime" and "during the build" in first.detail
    assert all(o.detail == "not started" for o in outcomes if o is not first)
    assert len(engine.built) == 1 and engine.probed == []
    assert engine.tagged == [] and engine.pushed == [] and engine.temporary() == []
    assert "4 interrupted" in summary(outcomes) and "0 failed" in summary(outcomes)


def test_an_interrupt_after_verification_leaves_no_tag(selection: list[plan.Selected], tmp_path: Path) -> None:
    """Verification and the smoke gate pass, then the interrupt comes (while the build records what the
    image holds, the last step before tagging): the verified image is still not tagged."""
    first = selection[:1]
    engine = FakeEngine(true_facts(first[0].combination))
    cancelled = threading.Event()
    probe = engine.run_python

    def run_python(reference: str, args: list[str]) -> str:
        if args == ["-c", INSTALLED_PROBE] and ":runtime-" in reference:
            cancelled.set()
        return probe(reference, args)

    engine.run_python = run_python  # type: ignore[method-assign]
    passing: builder.SmokeGate = lambda combination, image, reference, facts, start: []  # noqa: E731
    outcomes = run(engine, first, tmp_path, passing, cancelled=cancelled)
    assert [o.status for o in outcomes] == ["interrupted", "interrupted"]
    _, runtime = outcomes  # devel overlapped runtime's checks: it is interrupted wherever it was
    assert "verified, not tagged" in runtime.detail
    assert engine.tagged == [] and engine.temporary() == []


def test_a_gate_stopped_by_the_interrupt_is_interrupted_not_failed(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    first = selection[:1]
    engine = FakeEngine(true_facts(first[0].combination))
    cancelled = threading.Event()

    def gate(combination: Combination, image: Image, reference: str, facts: verify.Facts, *_: object) -> list[str]:
        cancelled.set()  # the gate's pytest was stopped: it reports failures that are no verdict
        return ["smoke suites (cpu) failed:", "ERROR interrupted"]

    outcomes = run(engine, first, tmp_path, gate, cancelled=cancelled)
    assert [o.status for o in outcomes] == ["interrupted", "interrupted"]
    assert "during its checks" in outcomes[1].detail  # runtime's (built first)
    assert engine.tagged == [] and engine.temporary() == []


def test_builder_cancel_before_the_build_builds_nothing(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = FakeEngine(true_facts(selection[0].combination))
    opts = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs")
    build = Builder(engine, opts, out=lambda _: None)
    build.cancel()
    assert {o.status for o in build.build(selection)} == {"interrupted"}
    assert engine.built == [] and engine.tagged == []


def test_the_summary_says_why_an_image_failed(selection: list[plan.Selected], tmp_path: Path) -> None:
    """The pip error of a failed build's step, not BuildKit's report of the step, is the summary's reason."""
    log = (
        "#9 0.48 ERROR: Could not find a version that satisfies the requirement numpy==0.0.1\n"
        "#9 0.48 ERROR: No matching distribution found for numpy==0.0.1\n"
        "#9 ERROR: executor failed running [/bin/bash -o pipefail -c ...]\n------\n"
    )
    combination, image = selection[0].combination, selection[0].images[0]
    failed = Outcome(combination, image, "failed", 3.0, f"build failed (exit 1); last lines of x.log:\n{log}")
    stopped = Outcome(combination, image, "interrupted", 1.0, "interrupted during the build; not tagged")
    text = summary([failed, stopped])
    assert "ERROR: No matching distribution found for numpy==0.0.1" in text.splitlines()[2]
    assert text.splitlines()[4].strip() == "interrupted during the build; not tagged"
    assert text.splitlines()[-1] == "0 built, 0 skipped, 1 failed, 1 interrupted"


class GoneEngine(FakeEngine):
    """The engine stops during the first build: every later call fails as DockerEngine's do (EngineError)."""

    def build(self, request: BuildRequest, log: IO[bytes], cancelled: threading.Event | None = None) -> int:
        self.built.append(request)
        self.up = False
        return 1

    def labels(self, reference: str) -> dict[str, str] | None:
        if not self.up:
            raise EngineError(f"inspecting {reference} failed: the Docker engine at {self.address()} does not answer")
        return super().labels(reference)

    def remove_image(self, reference: str) -> None:
        if not self.up:
            raise EngineError(f"removing {reference} failed: the Docker engine does not answer")


def test_an_engine_stopped_during_a_build_is_named(selection: list[plan.Selected], tmp_path: Path) -> None:
    """Issue 11: the engine stops mid-build: the image fails with a message naming the engine, nothing is
    tagged, the next image fails with an engine error, and nothing raises (the removal's failure is said)."""
    engine = GoneEngine(true_facts(selection[0].combination))
    said: list[str] = []
    opts = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs")
    outcomes = Builder(engine, opts, out=said.append).build(selection[:1])
    assert [o.status for o in outcomes] == ["failed", "failed"]
    devel, runtime = outcomes  # runtime is built first
    first = runtime.detail.splitlines()[0]
    assert first.startswith("the Docker engine at unix:///fake/docker.sock stopped answering during the build of")
    assert "does not answer" in devel.detail
    assert engine.tagged == [] and len(engine.built) == 1
    assert first in summary(outcomes)
    assert any("could not remove" in line for line in said)


def test_an_engine_error_the_interrupt_caused_is_an_interruption_not_a_failure(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    """Ctrl-C stops the engine's action under way (the docker CLI killed, a container gone): the image is
    `interrupted`, not `failed` with the engine error the interrupt caused, and nothing is tagged."""
    cancelled = threading.Event()

    class InterruptedEngine(FakeEngine):
        def tag(self, reference: str, repository: str, tag: str) -> None:
            cancelled.set()
            raise EngineError(f"tagging {reference} failed: context canceled")

    engine = InterruptedEngine(true_facts(selection[0].combination))
    outcomes = run(engine, selection[:1], tmp_path, cancelled=cancelled)
    assert outcomes[1].status == "interrupted", outcomes[1].detail  # runtime, built first
    assert "context canceled" in outcomes[1].detail
    assert "failed" not in [o.status for o in outcomes]


def test_a_full_disk_is_named_in_the_summary(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = FakeEngine(true_facts(selection[0].combination), build_status=1)

    def full(request: BuildRequest) -> None:
        (tmp_path / "logs").mkdir(exist_ok=True)
        for path in (tmp_path / "logs").glob("*.log"):
            path.write_text(
                "#9 41.2 ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device\n"
            )

    engine.on_build = full
    outcomes = run(engine, selection[:1], tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    reasons = summary(outcomes).splitlines()  # devel first: not built, as runtime's build failed
    assert reasons[2].strip() == "not built: devel is built on its runtime image, and the build of " + (
        f"{selection[0].combination.image('runtime').tag} failed"
    )
    assert (
        reasons[4].strip().startswith("no space left on device: the build failed (exit 1): the engine's disk is full")
    )
    assert engine.tagged == []


# --- promote: images built elsewhere (a bake, CI runners) get their tags by the same rules ----------------

ID = "sha256:" + "1" * 64


def bake_into(engine: FakeEngine, combination: Combination, image: Image, facts: Raw, **kw: object) -> Baked:
    """An image a bake built to its temporary reference, as the engine holds it; what the metadata says."""
    reference = bake.bake_reference(combination, image)
    engine.images[reference] = {"io.torchimages.flavor": image.flavor}
    engine.truth[reference] = facts
    engine.ids[reference] = str(kw.get("image_id", ID))
    engine.layers[reference] = kw.get("layers", ())  # type: ignore[assignment]
    return Baked(reference, (ID,))


def promote(
    engine: FakeEngine,
    selected: list[plan.Selected],
    baked: dict[Image, Baked],
    tmp_path: Path,
    gate: builder.SmokeGate | None = None,
    **options: object,
) -> list[Outcome]:
    opts = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs", **options)  # type: ignore[arg-type]
    return Builder(engine, opts, gate, out=lambda _: None).promote(selected, baked)


def test_promote_tags_a_verified_baked_image_and_removes_its_temporary_reference(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    newest = selection[1:]
    combination = newest[0].combination
    engine = FakeEngine(true_facts(combination))
    baked = {i: bake_into(engine, combination, i, true_facts(combination)) for i in newest[0].images}
    outcomes = promote(engine, newest, baked, tmp_path, push=True)
    assert [o.status for o in outcomes] == ["promoted", "promoted"]
    assert set(engine.tagged) == set(engine.pushed) == names(newest)
    assert engine.temporary() == [] and engine.built == []
    assert summary(outcomes, always=("promoted", "failed")).splitlines()[-1] == "2 promoted, 0 failed"


@pytest.mark.parametrize("push", [False, True])
def test_promote_never_tags_an_unverified_image(selection: list[plan.Selected], tmp_path: Path, push: bool) -> None:
    """The baked image holds another cuDNN than its tag promises: no tag, no alias, no push, reference gone."""
    first = selection[:1]
    combination = first[0].combination
    engine = FakeEngine(true_facts(combination))
    lie = {**true_facts(combination), "cudnn": 90501}
    baked = {i: bake_into(engine, combination, i, lie) for i in first[0].images}
    outcomes = promote(engine, first, baked, tmp_path, push=push)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all("cudnn: the tag claims 9.1.0.70, the image has 9.5.1" in o.detail for o in outcomes)
    assert engine.tagged == [] and engine.pushed == [] and engine.temporary() == []


def test_promote_runs_the_smoke_gate_on_the_baked_image(selection: list[plan.Selected], tmp_path: Path) -> None:
    first = selection[:1]
    combination = first[0].combination
    engine = FakeEngine(true_facts(combination))
    baked = {i: bake_into(engine, combination, i, true_facts(combination)) for i in first[0].images}
    gated: list[str] = []

    def gate(combination: Combination, image: Image, reference: str, facts: verify.Facts, *_: object) -> list[str]:
        gated.append(reference)
        return ["smoke suites (cpu) failed:", "FAILED test_compile"]

    outcomes = promote(engine, first, baked, tmp_path, gate)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert gated == [baked[i].reference for i in first[0].images]
    assert engine.tagged == [] and engine.temporary() == []


def test_promote_refuses_an_image_other_than_the_one_the_bake_reported(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    """The temporary reference now names another image (retagged, overwritten): no tag, not even verified."""
    first = selection[:1]
    combination = first[0].combination
    engine = FakeEngine(true_facts(combination))
    other = "sha256:" + "2" * 64
    baked = {i: bake_into(engine, combination, i, true_facts(combination), image_id=other) for i in first[0].images}
    outcomes = promote(engine, first, baked, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all(f"it is {other}, the metadata says {ID}" in o.detail for o in outcomes)
    assert engine.tagged == [] and engine.probed == [] and engine.temporary() == []


def test_promote_pulls_a_baked_image_that_is_not_here(selection: list[plan.Selected], tmp_path: Path) -> None:
    first = selection[:1]
    combination = first[0].combination
    engine = FakeEngine(true_facts(combination))
    baked = {}
    for image in first[0].images:
        reference = f"reg.example/{bake.bake_reference(combination, image)}"
        engine.registry[reference] = (true_facts(combination), ID)
        baked[image] = Baked(reference, (ID,))
    outcomes = promote(engine, first, baked, tmp_path)
    assert [o.status for o in outcomes] == ["promoted", "promoted"]
    assert engine.pulled == [b.reference for b in baked.values()]


def test_a_baked_image_that_is_nowhere_fails_with_the_pull_error(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    first = selection[:1]
    engine = FakeEngine(true_facts(first[0].combination))
    baked = {i: Baked(bake.bake_reference(first[0].combination, i), (ID,)) for i in first[0].images}
    outcomes = promote(engine, first, baked, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all("neither here nor could it be pulled" in o.detail and "manifest unknown" in o.detail for o in outcomes)
    assert engine.tagged == []


def test_a_missing_metadata_entry_is_a_clear_error(selection: list[plan.Selected], tmp_path: Path) -> None:
    """Before anything runs (build.py promote exits 2), and in the builder as a failure of that image."""
    first = selection[:1]
    combination = first[0].combination
    engine = FakeEngine(true_facts(combination))
    devel = combination.image("devel")
    metadata = {bake.target_name(devel): {"containerimage.digest": ID}}
    with pytest.raises(InputError, match="no entry for bake target '2_7_0-cuda11_8-cudnn9-runtime'"):
        bake.baked_images(metadata, first, "metadata.json")
    baked = {devel: bake_into(engine, combination, devel, true_facts(combination))}
    outcomes = promote(engine, first, baked, tmp_path)
    assert [o.status for o in outcomes] == ["promoted", "failed"]
    assert outcomes[1].detail == "not baked: no metadata entry"
    assert engine.tagged == [f"{devel.repository}:{n}" for n in devel.names]


def test_promote_never_touches_a_reference_outside_the_temporary_repository(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    """Metadata naming a public image (or any other) gets it neither tagged nor removed."""
    first = selection[:1]
    combination = first[0].combination
    engine = FakeEngine(true_facts(combination))
    engine.images["team/base:1"] = {}
    baked = {i: Baked("team/base:1") for i in first[0].images}
    outcomes = promote(engine, first, baked, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all("is not a temporary reference" in o.detail for o in outcomes)
    assert "team/base:1" in engine.images and engine.tagged == []


def test_a_devel_image_not_built_on_its_runtime_is_not_promoted(selection: list[plan.Selected], tmp_path: Path) -> None:
    """devel FROM runtime: runtime's layers must be devel's first layers (one bake built both)."""
    first = selection[:1]
    combination = dataclasses.replace(first[0].combination, toolkit=Toolkit("wheels"))
    assert combination.devel_from == "runtime"
    engine = FakeEngine(true_facts(combination))
    holds = true_facts(combination)
    runtime, devel = combination.image("runtime"), combination.image("devel")
    selected = [plan.Selected(combination, combination.images)]
    baked = {
        runtime: bake_into(engine, combination, runtime, holds, layers=("a", "b")),
        devel: bake_into(engine, combination, devel, holds, layers=("a", "x", "c")),
    }
    outcomes = promote(engine, selected, baked, tmp_path)
    assert [(o.image.flavor, o.status) for o in outcomes] == [("devel", "failed"), ("runtime", "promoted")]
    assert "runtime's layers are not its first" in outcomes[0].detail
    engine.tagged.clear()
    baked = {
        runtime: bake_into(engine, combination, runtime, holds, layers=("a", "b")),
        devel: bake_into(engine, combination, devel, holds, layers=("a", "b", "c")),
    }
    assert [o.status for o in promote(engine, selected, baked, tmp_path)] == ["promoted", "promoted"]


def with_budget(selected: list[plan.Selected], flavor: str, budget: int) -> list[plan.Selected]:
    """The selection with a size budget on one flavor's images."""
    return [
        plan.Selected(
            s.combination,
            tuple(dataclasses.replace(i, size_budget=budget) if i.flavor == flavor else i for i in s.images),
        )
        for s in selected
    ]


def test_an_image_over_its_size_budget_fails_untagged_naming_size_budget_and_largest_layers(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    newest = with_budget(selection[1:], "runtime", 3_000_000_000)
    engine = FakeEngine(true_facts(newest[0].combination))
    engine.size = 3_500_000_001
    devel, runtime = run(engine, newest, tmp_path)
    assert (devel.status, runtime.status) == ("built", "failed")
    assert runtime.detail.splitlines() == [
        "not tagged:",
        "    size 3.5 GB (3500000001 bytes) is over the runtime budget of 3 GB (3000000000 bytes); "
        "its 5 largest layers:",
        "         700 MB  RUN step 7",
        "         600 MB  RUN step 6",
        "         500 MB  RUN step 5",
        "         400 MB  RUN step 4",
        "         300 MB  RUN step 3",
    ]
    assert set(engine.tagged) == {
        f"{i.repository}:{n}" for i in newest[0].images if i.flavor == "devel" for n in i.names
    }
    assert engine.probed == [engine.built[1].reference]  # runtime (built first) over budget: not even verified
    assert engine.temporary() == []
    assert "size 3.5 GB (3500000001 bytes) is over the runtime budget" in summary([devel, runtime])


def test_an_image_at_its_budget_is_tagged(selection: list[plan.Selected], tmp_path: Path) -> None:
    newest = with_budget(selection[1:], "runtime", 3_000_000_000)
    engine = FakeEngine(true_facts(newest[0].combination))
    engine.size = 3_000_000_000
    assert [o.status for o in run(engine, newest, tmp_path)] == ["built", "built"]


def with_max_layer(selected: list[plan.Selected], flavor: str, limit: int | None) -> list[plan.Selected]:
    """The selection with a largest-layer limit on one flavor's images."""
    return [
        plan.Selected(
            s.combination,
            tuple(dataclasses.replace(i, max_layer=limit) if i.flavor == flavor else i for i in s.images),
        )
        for s in selected
    ]


# A runtime's history as the engine gives it (uncompressed sizes), largest layer third: the cuDNN group's step.
CUDNN_STEP = (
    "RUN |1 SOURCE_DATE_EPOCH=1764374400 /bin/bash -o pipefail -c if [ -s /run/secrets/cacert ]; then export "
    "PIP_CERT=/run/secrets/cacert; fi     && export UV_CACHE_DIR=/home/torch/.cache/uv/cache     && "
    'uv=$uv/bin/uv     && printf \'%s\\n\'         "torch==2.7.0+cu118"     | "$uv" pip compile --python '
    "/opt/venv/bin/python --quiet --no-header --no-annotate -     | { grep -iE '^nvidia[-_.](cudnn)([-_.]cu[0-9]+)?==' "
    '|| [ $? = 1 ]; }     | xargs -r "$uv" pip install --python /opt/venv/bin/python --compile-bytecode --no-deps'
    "     && rm -f /opt/venv/.lock # buildkit"
)


def layered(largest: int) -> list[HistoryEntry]:
    return [
        HistoryEntry("", 77_100_000),
        HistoryEntry("RUN /bin/bash -o pipefail -c apt-get install -y gcc # buildkit", 325_000_000),
        HistoryEntry(CUDNN_STEP, largest),
        HistoryEntry('RUN "$uv" pip install --no-deps "torch==2.7.0+cu118" # buildkit', 1_000_000_000),
    ]


def test_an_image_whose_largest_layer_is_over_max_layer_fails_untagged_naming_it(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    newest = with_max_layer(selection[1:], "runtime", 1_500_000_000)
    engine = FakeEngine(true_facts(newest[0].combination))
    engine.steps = layered(1_500_000_001)
    devel, runtime = run(engine, newest, tmp_path)
    assert (devel.status, runtime.status) == ("built", "failed")
    assert runtime.detail.splitlines() == [
        "not tagged:",
        "    largest layer 1.5 GB (1500000001 bytes) is over the runtime max_layer of 1.5 GB (1500000000 bytes): "
        'RUN printf \'%s\\n\' "torch==2.7.0+cu118" | "$uv" pip compile --python /opt/venv/bin/python --quiet '
        "--no-header --no-annotate - | { grep -iE '^nvidia[-_.](cudnn)([-_.]cu[0-9]+)?==' || [ $? = 1 ]; } | xargs -r "
        '"$uv" pip install --python /opt...',
    ]
    assert set(engine.tagged) == {
        f"{i.repository}:{n}" for i in newest[0].images if i.flavor == "devel" for n in i.names
    }
    assert engine.probed == [engine.built[1].reference]  # runtime (built first): not even verified
    assert engine.temporary() == []


@pytest.mark.parametrize("largest", [1_499_999_999, 1_500_000_000])
def test_an_image_whose_largest_layer_is_at_most_max_layer_is_tagged(
    selection: list[plan.Selected], tmp_path: Path, largest: int
) -> None:
    newest = with_max_layer(selection[1:], "runtime", 1_500_000_000)
    engine = FakeEngine(true_facts(newest[0].combination))
    engine.steps = layered(largest)
    assert [o.status for o in run(engine, newest, tmp_path)] == ["built", "built"]


def test_the_default_max_layer_refuses_a_cuda_runtime_of_one_nvidia_layer_not_a_devel_on_nvidia_cuda(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    """No max_layer in matrix.yaml: the CUDA runtime's is 2.5 GB; devel (on nvidia/cuda's devel image) has none."""
    engine = FakeEngine(true_facts(selection[1].combination))
    engine.steps = layered(3_200_000_000)  # NVIDIA's libraries in one layer, as before they were split
    devel, runtime = run(engine, selection[1:], tmp_path)
    assert (devel.status, runtime.status) == ("built", "failed")
    assert "largest layer 3.2 GB (3200000000 bytes) is over the runtime max_layer of 2.5 GB" in runtime.detail
    engine.steps = layered(2_500_000_000)
    assert [o.status for o in run(engine, selection[1:], tmp_path)] == ["built", "built"]


def test_outcomes_say_how_long_the_build_and_the_checks_took(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = FakeEngine(true_facts(selection[1].combination))
    (built, _) = run(engine, selection[1:], tmp_path)
    assert built.build_seconds is not None and built.test_seconds is not None
    assert 0 <= built.build_seconds + built.test_seconds <= built.seconds
    engine.images |= labels_of_a_build(selection[1:], tmp_path, true_facts(selection[1].combination))
    (skipped, _) = run(engine, selection[1:], tmp_path)  # up to date: neither ran
    assert skipped.status == "skipped" and skipped.build_seconds is None and skipped.test_seconds is None
    engine.build_status = 1
    (_, failed) = run(engine, selection[1:], tmp_path, no_cache=True)  # runtime: built (and failed) first
    assert failed.build_seconds is not None and failed.test_seconds is None


def test_cache_options_reach_every_build_with_the_images_tag(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = FakeEngine(true_facts(selection[0].combination))
    cache_from = (CacheSpec.parse("reg:5000/t/pytorch:{tag}"), CacheSpec.parse("reg:5000/t/pytorch:latest"))
    cache_to = (CacheSpec.parse("type=inline"), CacheSpec.parse("type=local,dest=/cache/{tag}"))
    run(engine, selection[:1], tmp_path, cache_from=cache_from, cache_to=cache_to)
    assert {r.target: [str(s) for s in r.cache_from] for r in engine.built} == {
        image.flavor: [
            f"type=registry,ref=reg:5000/t/pytorch:{image.tag}",
            "type=registry,ref=reg:5000/t/pytorch:latest",
        ]
        for image in selection[0].images
    }
    assert {r.target: [str(s) for s in r.cache_to] for r in engine.built} == {
        image.flavor: ["type=inline", f"type=local,dest=/cache/{image.tag}"] for image in selection[0].images
    }


# --- verification checks every fact the tag states, `none` included ---------------------------------------

CPU_MATRIX = "matrix:\n  include:\n    - {torch: 2.7.0, cuda: cpu}\n"
# A true 2.7.0+cpu image (ubuntu24.04's Python 3.12), and one that holds the CUDA 11.8 build of the same torch.
CPU_HOLDS = probe_answer(
    "2.7.0+cpu", python="3.12", os=("ubuntu", "24.04"), torchvision="0.22.0+cpu", torchaudio="2.7.0+cpu"
)
CUDA_TORCH_HOLDS = {**CPU_HOLDS, "torch": "2.7.0+cu118", "cuda": "11.8", "cudnn": 90100, "nccl": [2, 21, 5]}


def test_a_true_cpu_image_gets_its_tag(write_matrix: Callable[[str], Path], tmp_path: Path) -> None:
    selected = plan.select(plan.load(write_matrix(CPU_MATRIX)), [])
    engine = FakeEngine(CPU_HOLDS)
    assert [o.status for o in run(engine, selected, tmp_path)] == ["built", "built"]


def test_a_cpu_tag_on_an_image_holding_cuda_torch_is_not_tagged(
    write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    selected = plan.select(plan.load(write_matrix(CPU_MATRIX)), [])
    engine = FakeEngine(CUDA_TORCH_HOLDS)
    outcomes = run(engine, selected, tmp_path, push=True)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    for outcome in outcomes:
        assert "cuda: the tag claims none, the image has 11.8" in outcome.detail
        assert "cudnn: the tag claims none, the image has 9.1.0" in outcome.detail
        assert "nccl: the tag claims none, the image has 2.21.5" in outcome.detail
    assert engine.tagged == [] and engine.pushed == [] and engine.temporary() == []


@pytest.mark.parametrize(
    ("fact", "holds", "message"),
    [
        ("nccl", [2, 20, 5], "nccl: the tag claims 2.21.5, the image has 2.20.5"),
        ("nccl", None, "nccl: the tag claims 2.21.5, the image has none"),
        ("cudnn", 90501, "cudnn: the tag claims 9.1.0.70, the image has 9.5.1"),
        ("cuda", "12.6", "cuda: the tag claims 11.8, the image has 12.6"),
        ("python", "3.11", "python: the tag claims 3.10, the image has 3.11"),
        ("os", {"id": "debian", "version_id": "12"}, "os: the tag claims ubuntu22.04, the image has debian12"),
        ("torch", "2.7.1+cu118", "torch: the tag claims 2.7.0, the image has 2.7.1+cu118"),
    ],
)
def test_every_fact_of_the_tag_is_verified(
    selection: list[plan.Selected], tmp_path: Path, fact: str, holds: Any, message: str
) -> None:
    first = selection[:1]
    engine = FakeEngine({**true_facts(first[0].combination), fact: holds})
    outcomes = run(engine, first, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all(message in o.detail for o in outcomes), outcomes[0].detail
    assert engine.tagged == []


# --- admission: no tag without readable facts, a failed push fails, an interrupt stops before the gate ---------


@pytest.mark.parametrize(
    "answer",
    [
        EngineError("python exited with status 1 in torchimages-tmp/x: ModuleNotFoundError: No module named 'torch'"),
        "Traceback (most recent call last):\n  ...\nImportError: libcudnn.so.9: cannot open shared object file\n",
        "SMOKE_JSON:{not json",
    ],
    ids=["probe fails", "no answer", "bad answer"],
)
def test_an_image_whose_versions_cannot_be_read_is_not_tagged(
    selection: list[plan.Selected], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: EngineError | str
) -> None:
    first = selection[:1]
    engine = FakeEngine(true_facts(first[0].combination))
    probe = engine.run_python

    def run_python(reference: str, args: list[str]) -> str:
        if args == ["-c", INSTALLED_PROBE]:
            return probe(reference, args)
        if isinstance(answer, EngineError):
            raise answer
        return answer

    monkeypatch.setattr(engine, "run_python", run_python)
    gated: list[str] = []

    def gate(combination: Combination, image: Image, reference: str, facts: verify.Facts, *_: object) -> list[str]:
        gated.append(reference)
        return []

    outcomes = run(engine, first, tmp_path, gate, push=True)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all("could not read the versions inside the image" in o.detail for o in outcomes)
    assert engine.tagged == [] and engine.pushed == [] and gated == [] and engine.temporary() == []


def test_a_failed_push_fails_the_image_naming_the_error(selection: list[plan.Selected], tmp_path: Path) -> None:
    newest = selection[1:]
    engine = FakeEngine(true_facts(newest[0].combination))
    devel = newest[0].images[0]
    engine.push_errors[f"{devel.repository}:{devel.tag}"] = [[f"{devel.repository}:{devel.tag}: denied: no"]]
    outcomes = run(engine, newest, tmp_path, push=True)
    assert [o.status for o in outcomes] == ["failed", "built"]
    assert outcomes[0].detail.startswith("not published:") and "denied: no" in outcomes[0].detail
    assert f"{devel.repository}:{devel.tag}" not in engine.pushed


def test_a_failed_push_of_an_up_to_date_image_fails_it(selection: list[plan.Selected], tmp_path: Path) -> None:
    first = selection[1:]
    engine = FakeEngine(true_facts(first[0].combination))
    engine.images |= labels_of_a_build(first, tmp_path, true_facts(first[0].combination))
    runtime = first[0].images[1]
    engine.push_errors[f"{runtime.repository}:{runtime.tag}"] = [["unauthorized: authentication required"]]
    outcomes = run(engine, first, tmp_path, push=True)
    assert [o.status for o in outcomes] == ["skipped", "failed"]
    assert "not published:" in outcomes[1].detail and "unauthorized" in outcomes[1].detail


def test_an_interrupt_during_verification_stops_before_the_smoke_gate(
    selection: list[plan.Selected], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = selection[:1]
    engine = FakeEngine(true_facts(first[0].combination))
    cancelled = threading.Event()
    probe = engine.run_python

    def run_python(reference: str, args: list[str]) -> str:
        cancelled.set()  # the signal arrives while the facts probe runs
        return probe(reference, args)

    monkeypatch.setattr(engine, "run_python", run_python)
    gated: list[str] = []

    def gate(combination: Combination, image: Image, reference: str, facts: verify.Facts, *_: object) -> list[str]:
        gated.append(reference)
        return []

    outcomes = run(engine, first, tmp_path, gate, cancelled=cancelled)
    assert [o.status for o in outcomes] == ["interrupted", "interrupted"]
    assert gated == [], "no smoke gate starts after the interrupt"
    assert engine.tagged == [] and engine.temporary() == []


BUILDKIT_13_LOG = """#9 [runtime 5/8] RUN /opt/venv/bin/pip install --no-input "numpy==0.0.1"
#9 0.561 ERROR: Could not find a version that satisfies the requirement numpy==0.0.1 (from versions: 1.3.0)
#9 0.562 ERROR: No matching distribution found for numpy==0.0.1
#9 ERROR: process "/bin/bash -o pipefail -c ..." did not complete successfully: exit code: 1
------
 > [runtime 5/8] RUN /opt/venv/bin/pip install --no-input "numpy==0.0.1":
0.562 ERROR: No matching distribution found for numpy==0.0.1
------
Dockerfile:44
--------------------
  43 |     # Layer: the venv's first packages.
  44 | >>> RUN /opt/venv/bin/pip install --no-input "numpy==0.0.1"
  45 |     # Layer: torch's other dependencies (triton, sympy, ...).
  46 |     RUN true
  47 |     RUN true
  48 |     RUN true
  49 |     RUN true
--------------------
ERROR: failed to solve: process "/bin/bash -o pipefail -c ..." did not complete successfully: exit code: 1
"""  # the end of a failed step's log as engine 26 (BuildKit 0.13) writes it: the Dockerfile excerpt last


def test_the_step_error_is_found_where_buildkit_13_leaves_it(tmp_path: Path) -> None:
    from torchimages.building import readings

    log = tmp_path / "x.log"
    log.write_text(BUILDKIT_13_LOG)
    assert "No matching" not in readings.tail(log)  # the 12 last lines hold only the Dockerfile excerpt
    assert readings.last_step_error(log) == "#9 0.562 ERROR: No matching distribution found for numpy==0.0.1"


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_every_name_of_a_verified_image_is_pushed_compressed_as_asked(
    selection: list[plan.Selected], tmp_path: Path, compression: str
) -> None:
    newest = selection[1:]
    engine = FakeEngine(true_facts(newest[0].combination))
    outcomes = run(engine, newest, tmp_path, push=True, compression=compression)
    assert [o.status for o in outcomes] == ["built", "built"]
    pushes = [args for call, args in engine.calls if call == "push"]
    assert {f"{repository}:{tag}" for repository, tag, _ in pushes} == names(newest) == set(engine.pushed)
    assert {how for _, _, how in pushes} == {compression}


def test_the_default_push_is_gzip(selection: list[plan.Selected], tmp_path: Path) -> None:
    newest = selection[1:]
    engine = FakeEngine(true_facts(newest[0].combination))
    run(engine, newest, tmp_path, push=True)
    assert {args[2] for call, args in engine.calls if call == "push"} == {"gzip"}


UV_FAILED_LOG = """#9 [runtime 5/8] RUN --mount=type=cache,target=/home/torch/.cache/uv,uid=1000,gid=1000 ...
#9 0.48 Using Python 3.11.2 environment at: /opt/venv
#9 0.561 error: No solution found when resolving dependencies
#9 0.561   cause: Because there is no version of numpy==0.0.1 and you require numpy==0.0.1, we can conclude that \
your requirements are unsatisfiable.
#9 ERROR: process "/bin/bash -o pipefail -c ..." did not complete successfully: exit code: 1
#10 [runtime 6/8] RUN --mount=type=cache,target=/home/torch/.cache/uv,uid=1000,gid=1000 ...
#10 1.2 error: Request failed after 3 retries in 9.9s
#10 1.2   cause: Failed to fetch: http://127.0.0.1:9/simple/numpy/
#10 1.2   cause: error sending request for url (http://127.0.0.1:9/simple/numpy/)
#10 1.2   cause: tcp connect error
"""  # uv 0.13's errors as BuildKit logs them: the error, then why, one cause a line


def test_uvs_error_is_said_with_its_first_cause(selection: list[plan.Selected], tmp_path: Path) -> None:
    """The summary's reason for a uv failure is its error and first cause (the line that says why); its
    further causes, some of which read `error`, are no error lines of their own."""
    from torchimages.building import readings

    log = tmp_path / "x.log"
    log.write_text(UV_FAILED_LOG)
    assert readings.last_step_error(log) == (
        "#10 1.2 error: Request failed after 3 retries in 9.9s: Failed to fetch: http://127.0.0.1:9/simple/numpy/"
    )
    resolution = "".join(UV_FAILED_LOG.splitlines(keepends=True)[:5])  # BuildKit 0.8: the error in the tail
    combination, image = selection[0].combination, selection[0].images[0]
    failed = Outcome(combination, image, "failed", 3.0, f"build failed (exit 1); last lines of x.log:\n{resolution}")
    assert summary([failed]).splitlines()[2].strip() == (
        "error: No solution found when resolving dependencies: Because there is no version of numpy==0.0.1 "
        "and you require numpy==0.0.1, we can conclude that your requirements are unsatisfiable."
    )
