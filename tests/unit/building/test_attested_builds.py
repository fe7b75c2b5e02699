"""Where builds attach attestations, an image is tagged only once its own attestations are read back: an SPDX SBOM
and SLSA provenance whose subject is its manifest (issue 46). Against the fake engine: what each built image's index
holds is a literal below, never computed by the code under test. Drop the check in builder.py, or tag an image
whose attestations could not be read, and a test here fails."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes import FakeEngine
from tests.unit.building.test_builder import CPU_HOLDS, CPU_MATRIX, bake_into, run
from tests.unit.building.test_builder import promote as promote_with
from torchimages.building import bake
from torchimages.building.builder import Builder
from torchimages.building.requests import BuildOptions
from torchimages.engine import Attested, BuildRequest, EngineError, SbomAttestation
from torchimages.planning import plan

GENERATOR = "torchimages.invalid/sbom-generator:0123456789abcdef0123"
ATTACHED = SbomAttestation(True, "a test's", GENERATOR)
MANIFEST = "sha256:" + "ab" * 32
SPDX, SLSA = "https://spdx.dev/Document", "https://slsa.dev/provenance/v0.2"


def engine_attesting(found: Attested | EngineError) -> FakeEngine:
    """An engine whose every build's index holds `found` (or whose reading fails so)."""
    engine = FakeEngine(CPU_HOLDS)

    def attest(request: BuildRequest) -> None:
        engine.attested[request.reference] = found

    engine.on_build = attest
    return engine


@pytest.fixture
def selected(write_matrix: Callable[[str], Path]) -> list[plan.Selected]:
    return plan.select(plan.load(write_matrix(CPU_MATRIX)), [])


def test_an_image_with_both_attestations_is_tagged(selected: list[plan.Selected], tmp_path: Path) -> None:
    engine = engine_attesting(Attested(MANIFEST, (SPDX, SLSA)))
    outcomes = run(engine, selected, tmp_path, sbom=ATTACHED)
    assert [o.status for o in outcomes] == ["built", "built"]
    assert [r.sbom_generator for r in engine.built] == [GENERATOR, GENERATOR]
    asked = [ref for call, ref in engine.calls if call == "attestations"]
    assert sorted(asked) == sorted(r.reference for r in engine.built)  # each image's own, once


@pytest.mark.parametrize(
    ("predicates", "missing"),
    [
        ((SLSA,), [f"attestations: no SPDX SBOM names its manifest {MANIFEST}"]),
        ((SPDX,), [f"attestations: no SLSA provenance names its manifest {MANIFEST}"]),
        (
            ("https://in-toto.io/attestation/vulns/v0.1",),
            [
                f"attestations: no SPDX SBOM names its manifest {MANIFEST}",
                f"attestations: no SLSA provenance names its manifest {MANIFEST}",
            ],
        ),
        ((SPDX, "https://slsa.dev/provenance/v1"), []),
    ],
)
def test_an_image_lacking_an_attestation_is_not_tagged(
    selected: list[plan.Selected], tmp_path: Path, predicates: tuple[str, ...], missing: list[str]
) -> None:
    engine = engine_attesting(Attested(MANIFEST, predicates))
    outcomes = run(engine, selected, tmp_path, sbom=ATTACHED, push=True)
    if not missing:
        assert [o.status for o in outcomes] == ["built", "built"]
        return
    runtime = next(o for o in outcomes if o.image.flavor == "runtime")
    assert runtime.status == "failed"
    for line in missing:
        assert line in runtime.detail
    assert engine.tagged == [] and engine.pushed == []


def test_attestations_that_cannot_be_read_are_no_pass(selected: list[plan.Selected], tmp_path: Path) -> None:
    engine = engine_attesting(EngineError("the saved image x: it is one image manifest, not an index"))
    outcomes = run(engine, selected, tmp_path, sbom=ATTACHED)
    runtime = next(o for o in outcomes if o.image.flavor == "runtime")
    assert runtime.status == "failed"
    assert "could not read the image's attestations: the saved image x: it is one image manifest" in runtime.detail
    assert engine.tagged == []


def test_where_none_are_attached_none_are_asked_for(selected: list[plan.Selected], tmp_path: Path) -> None:
    engine = FakeEngine(CPU_HOLDS)  # its `attestations` would fail: never asked
    outcomes = run(engine, selected, tmp_path)
    assert [o.status for o in outcomes] == ["built", "built"]
    assert not [call for call, _ in engine.calls if call == "attestations"]
    assert [r.sbom_generator for r in engine.built] == ["", ""]


def test_promote_refuses_an_image_without_attestations_unless_told(
    selected: list[plan.Selected], tmp_path: Path
) -> None:
    """A baked image carries what its bake attached: promote asks for both attestations even though it builds
    nothing (options.sbom not attached), and takes one without only with --allow-unattested."""
    (combination,) = [s.combination for s in selected]
    runtime_only = [dataclasses.replace(selected[0], images=(combination.image("runtime"),))]

    def promote(engine: FakeEngine, require: bool) -> str:
        baked = {i: bake_into(engine, combination, i, CPU_HOLDS) for i in runtime_only[0].images}
        (outcome,) = promote_with(engine, runtime_only, baked, tmp_path, require_attestations=require)
        return f"{outcome.status}: {outcome.detail}"

    REFERENCE = bake.bake_reference(combination, combination.image("runtime"))
    unattested = FakeEngine(CPU_HOLDS)  # reading its attestations fails: the engine kept none
    said = promote(unattested, require=True)
    assert said.startswith("failed") and "could not read the image's attestations" in said
    assert "(promote --allow-unattested takes it without)" in said and unattested.tagged == []
    lacking = FakeEngine(CPU_HOLDS)
    lacking.attested[REFERENCE] = Attested(MANIFEST, (SLSA,))
    said = promote(lacking, require=True)
    assert f"attestations: no SPDX SBOM names its manifest {MANIFEST} (promote --allow-unattested" in said
    attested = FakeEngine(CPU_HOLDS)
    attested.attested[REFERENCE] = Attested(MANIFEST, (SPDX, SLSA))
    assert promote(attested, require=True).startswith("promoted")
    told = FakeEngine(CPU_HOLDS)
    assert promote(told, require=False).startswith("promoted")
    assert not [call for call, _ in told.calls if call == "attestations"]


def test_an_up_to_date_image_without_its_attestations_is_built_again_where_they_are_attached(
    selected: list[plan.Selected], tmp_path: Path
) -> None:
    """An image up to date by its build digest but built without attestations (before they were attached, or on
    another store) is built again, and its new attestations checked, never skipped and pushed as it is; one that
    carries them is skipped. The build digest itself does not cover them (`outdated` asks no engine)."""
    engine = FakeEngine(CPU_HOLDS)  # its first builds keep no attestations
    run(engine, selected, tmp_path)
    assert not engine.attested

    def attest(request: BuildRequest) -> None:
        engine.attested[request.reference] = Attested(MANIFEST, (SPDX, SLSA))

    engine.on_build = attest
    said: list[str] = []
    again = Builder(engine, BuildOptions(tmp_path / "images", tmp_path / "logs", sbom=ATTACHED), None, out=said.append)
    assert [o.status for o in again.build(selected)] == ["built", "built"]
    assert any("up to date, but could not read the image's attestations" in line for line in said), said
    third = run(engine, selected, tmp_path, sbom=ATTACHED)  # now they are there: up to date
    assert [o.status for o in third] == ["skipped", "skipped"]
    assert [o.status for o in run(engine, selected, tmp_path)] == ["skipped", "skipped"]  # none asked: skipped


def test_the_attestations_are_read_with_the_builds_cancel_event(selected: list[plan.Selected], tmp_path: Path) -> None:
    """An interrupt stops the reading of the attestations (a whole `docker save`): the builder hands its own
    cancel event to the engine."""
    engine = engine_attesting(Attested(MANIFEST, (SPDX, SLSA)))
    seen: list[object] = []
    reads = engine.attestations

    def recording(reference: str, platform: str, cancelled: object = None) -> Attested:
        seen.append(cancelled)
        return reads(reference, platform)

    engine.attestations = recording  # type: ignore[method-assign]
    builder = Builder(engine, BuildOptions(tmp_path / "images", tmp_path / "logs", sbom=ATTACHED), None, out=print)
    assert [o.status for o in builder.build(selected)] == ["built", "built"]
    assert seen and all(event is builder.cancelled for event in seen)
