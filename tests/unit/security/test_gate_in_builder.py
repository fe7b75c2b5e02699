"""The security gate's place among the rules that make tags true (builder.py), against the fake engine: a
refusing verdict leaves no tag and no push, its results reach the outcome, the gate runs on the temporary
reference with the build's secrets, and promote runs it too. The verdicts are literals written here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes import FakeEngine
from tests.unit.building.test_builder import MATRIX, bake_into, true_facts
from torchimages.building import bootstrap
from torchimages.building.builder import Builder
from torchimages.building.outcome import Outcome
from torchimages.building.references import TEMP_REPOSITORY
from torchimages.building.requests import BuildOptions
from torchimages.building.wheels import WheelSources
from torchimages.combination import Image
from torchimages.planning import plan
from torchimages.security.gate import Verdict
from torchimages.security.model import CheckResult

PASSING = Verdict((CheckResult("secrets", "passed"), CheckResult("python", "not scanned", note="no service")), ())
REFUSING = Verdict(
    (CheckResult("secrets", "failed", ("secrets: layer 2 of 9 (sha256:ab12): /root/.netrc: credentials",)),),
    ("secrets: layer 2 of 9 (sha256:ab12): /root/.netrc: credentials",),
)


@pytest.fixture
def first(write_matrix: Callable[[str], Path]) -> list[plan.Selected]:
    return plan.select(plan.load(write_matrix(MATRIX)), [])[:1]


class Gate:
    """A security gate that answers `verdict` and records what it was asked."""

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        self.asked: list[tuple[str, str, tuple[tuple[str, bytes], ...]]] = []

    def __call__(self, image: Image, reference: str, secrets: tuple[tuple[str, bytes], ...]) -> Verdict:
        self.asked.append((image.own_tag, reference, secrets))
        return self.verdict


def build(
    engine: FakeEngine, selected: list[plan.Selected], tmp_path: Path, gate: Gate, **options: object
) -> list[Outcome]:
    opts = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs", **options)  # type: ignore[arg-type]
    return Builder(engine, opts, out=lambda _: None, security_gate=gate).build(selected)


def test_a_refusing_security_gate_leaves_no_tag_and_no_push(first: list[plan.Selected], tmp_path: Path) -> None:
    engine = FakeEngine(true_facts(first[0].combination))
    gate = Gate(REFUSING)
    outcomes = build(engine, first, tmp_path, gate, push=True)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert all("/root/.netrc: credentials" in o.detail for o in outcomes)
    assert all(o.security == REFUSING.results for o in outcomes)  # the report says which check refused
    assert engine.tagged == [] and engine.pushed == [] and engine.temporary() == []


def test_a_passing_gate_tags_and_its_results_reach_the_outcome(first: list[plan.Selected], tmp_path: Path) -> None:
    engine = FakeEngine(true_facts(first[0].combination))
    gate = Gate(PASSING)
    outcomes = build(engine, first, tmp_path, gate)
    assert [o.status for o in outcomes] == ["built", "built"]
    assert all(o.security == PASSING.results for o in outcomes)
    assert engine.tagged, "a passing verdict is tagged"


def test_the_gate_runs_on_the_temporary_reference_with_the_builds_secrets(
    first: list[plan.Selected], tmp_path: Path
) -> None:
    engine = FakeEngine(true_facts(first[0].combination))
    gate = Gate(PASSING)
    build(engine, first, tmp_path, gate, sources=WheelSources("https://user:token@wheels.example.org/simple"))
    assert len(gate.asked) == 2
    for _tag, reference, secrets in gate.asked:
        assert reference.startswith(TEMP_REPOSITORY)
        named = dict(secrets)  # what the build mounted: the login in the index URL must be in no layer
        assert list(named) == ["pip.conf", "uv.toml"]
        assert all(b"user:token@wheels.example.org" in text for text in named.values())


def test_promote_runs_the_security_gate_on_the_baked_image(first: list[plan.Selected], tmp_path: Path) -> None:
    combination = first[0].combination
    engine = FakeEngine(true_facts(combination))
    baked = {i: bake_into(engine, combination, i, true_facts(combination)) for i in first[0].images}
    gate = Gate(REFUSING)
    opts = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs")
    outcomes = Builder(engine, opts, out=lambda _: None, security_gate=gate).promote(first, baked)
    assert [o.status for o in outcomes] == ["failed", "failed"] and len(gate.asked) == 2
    assert engine.tagged == []


NOT_SCANNED_LINE = "python not scanned (no service): not read as clean; --require-scan fails it"


def test_build_and_promote_each_say_a_check_not_scanned(first: list[plan.Selected], tmp_path: Path) -> None:
    """A check that could not look is printed by both commands that run the gate, per image, as it happens
    (not only in --report): "not scanned" is never passed in silence."""
    combination = first[0].combination
    said: list[str] = []
    engine = FakeEngine(true_facts(combination))
    opts = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs")
    Builder(engine, opts, out=said.append, security_gate=Gate(PASSING)).build(first)
    tags = [i.own_tag for i in first[0].images]
    assert [t for t in tags if any(line.endswith(f"{t}: {NOT_SCANNED_LINE}") for line in said)] == tags, said
    said.clear()
    engine = FakeEngine(true_facts(combination))
    baked = {i: bake_into(engine, combination, i, true_facts(combination)) for i in first[0].images}
    Builder(engine, opts, out=said.append, security_gate=Gate(PASSING)).promote(first, baked)
    assert [t for t in tags if any(line.endswith(f"{t}: {NOT_SCANNED_LINE}") for line in said)] == tags, said
    said.clear()
    engine = FakeEngine(true_facts(combination))
    scanned = Verdict((CheckResult("secrets", "passed"), CheckResult("python", "passed")), ())
    Builder(engine, opts, out=said.append, security_gate=Gate(scanned)).build(first)
    assert not any("not scanned" in line for line in said), said


def test_the_gate_searches_every_layer_for_a_mirrors_login(write_matrix: Callable[[str], Path], tmp_path: Path) -> None:
    """An image on a base bootstrapped from a mirror with a login (issue 42): its apt steps mount the login, and
    the gate is given it (the auth.conf, and the URL whose login it searches for)."""
    selected = plan.select(plan.load(write_matrix(MATRIX), os_bases="bootstrap"), [])[:1]
    combination = selected[0].combination
    mirror = "ubuntu=http://builder:s3cret-pass-word@mirror.example/ubuntu"
    engine = FakeEngine(true_facts(combination))
    for base in bootstrap.bootstrapped([combination]):  # made already, from that mirror
        made = bootstrap.digest(base.os, "http://mirror.example/ubuntu", base.platform)
        engine.images[base.reference] = {bootstrap.DIGEST_LABEL: made}
    gate = Gate(PASSING)
    build(engine, selected, tmp_path, gate, mirrors=(mirror,))
    assert gate.asked
    for _tag, _reference, secrets in gate.asked:
        named = dict(secrets)
        line = b"machine http://mirror.example/ubuntu login builder password s3cret-pass-word\n"
        assert named["apt auth.conf"] == line
        assert b"builder:s3cret-pass-word@" in named["--mirror"]
    assert all("aptauth" in dict(request.secrets) for request in engine.built)
