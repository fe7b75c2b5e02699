"""`outdated`'s rules against the fake engine, every fact a literal here: an image is stale when it is not
there, was built from other inputs, sits on a base that moved, or is covered by an expired entry; current
otherwise; a check that could not look is said, and is staleness only under --require-scan."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes import FakeEngine
from torchimages.combination import BASES_LABEL, INPUT_DIGEST_LABEL, Combination, Image, RegistryBase
from torchimages.engine import ImageInfo
from torchimages.planning import plan
from torchimages.security import allowlist, staleness
from torchimages.security.gate import GateOptions

MATRIX = "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}\n"
TODAY = datetime.date(2026, 12, 2)
BUILT_ON = "sha256:" + "a" * 64  # the base's digest when the image was built
NOW = "sha256:" + "b" * 64  # the digest the bases lock pins now
CURRENT = GateOptions(today=TODAY)


@pytest.fixture
def runtime(write_matrix: Callable[[str], Path]) -> tuple[Combination, Image]:
    (selected,) = plan.select(plan.load(write_matrix(MATRIX)), [])
    return selected.combination, selected.combination.image("runtime")


def holding(image: Image, labels: dict[str, str]) -> FakeEngine:
    fake = FakeEngine()
    fake.add(ImageInfo(image.platform_reference, "sha256:" + "1" * 64, labels, {}, "", ()))
    return fake


def labels(image: Image, **extra: str) -> dict[str, str]:
    return {INPUT_DIGEST_LABEL: image.input_digest, staleness.BASE_DIGEST_LABEL: BUILT_ON, **extra}


def test_an_image_built_from_todays_inputs_on_its_base_is_current(runtime: tuple[Combination, Image]) -> None:
    combination, image = runtime
    found = staleness.check(holding(image, labels(image)), combination, image, CURRENT)
    assert not found.stale, found.lines()
    assert any(u.startswith("python:") for u in found.unchecked)  # said, not passed in silence
    assert any(line.startswith("    not scanned: python: ") for line in found.lines()), found.lines()


def test_an_image_not_there_is_stale(runtime: tuple[Combination, Image]) -> None:
    combination, image = runtime
    found = staleness.check(FakeEngine(), combination, image, CURRENT)
    assert found.reasons == ("not there: never built here, or not pulled (--pull)",)


def test_other_inputs_make_it_stale(runtime: tuple[Combination, Image]) -> None:
    combination, image = runtime
    engine = holding(image, labels(image, **{INPUT_DIGEST_LABEL: "sha256:" + "9" * 64}))
    assert "its input digest differs" in staleness.check(engine, combination, image, CURRENT).reasons[0]


@pytest.mark.parametrize(
    ("label", "asked", "stale"),
    [
        ("sha256:" + "5" * 64, "sha256:" + "5" * 64, False),
        ("sha256:" + "5" * 64, "sha256:" + "6" * 64, True),
        (None, "sha256:" + "6" * 64, True),
        ("sha256:" + "5" * 64, None, False),
    ],
)
def test_a_build_digest_a_build_would_not_give_makes_it_stale(
    runtime: tuple[Combination, Image], label: str | None, asked: str | None, stale: bool
) -> None:
    """outdated and build share one meaning of up to date: an image whose build digest is not the one a build
    now computes (a step script edited by hand, another base or mirror, a plain docker build) is stale."""
    combination, image = runtime
    built = labels(image, **({staleness.BUILD_DIGEST_LABEL: label} if label else {}))
    found = staleness.check(holding(image, built), combination, image, CURRENT, build_digest=asked)
    assert any("its build digest differs" in r for r in found.reasons) is stale, found.reasons


def test_the_build_digest_label_is_the_builds() -> None:
    from torchimages.building import build_digest

    assert staleness.BUILD_DIGEST_LABEL == build_digest.BUILD_DIGEST_LABEL


def test_a_registry_base_the_lock_moved_makes_it_stale(runtime: tuple[Combination, Image]) -> None:
    combination, image = runtime
    ubuntu = RegistryBase("ubuntu:24.04", "ubuntu:24.04", NOW)  # the lock pins NOW today
    on_ubuntu = dataclasses.replace(
        combination,
        os=dataclasses.replace(combination.os, provider="registry", image=ubuntu.reference),
        registry_bases=(ubuntu,),
        bases="registry",
    )
    built = {**labels(image), staleness.BASE_NAME_LABEL: "docker.io/library/ubuntu:24.04"}
    found = staleness.check(holding(image, built), on_ubuntu, image, CURRENT)
    assert found.reasons == (
        f"its base docker.io/library/ubuntu:24.04 moved: built on {BUILT_ON}, the bases lock pins {NOW} now",
    )
    unlocked = {k: v for k, v in built.items() if k != staleness.BASE_DIGEST_LABEL}
    assert "built on it unlocked" in staleness.check(holding(image, unlocked), on_ubuntu, image, CURRENT).reasons[0]
    same = {**built, staleness.BASE_DIGEST_LABEL: NOW}
    assert not staleness.check(holding(image, same), on_ubuntu, image, CURRENT).stale


def test_an_image_on_other_bases_than_asked_is_stale_and_a_bootstrapped_one_ignores_the_lock(
    runtime: tuple[Combination, Image],
) -> None:
    combination, image = runtime
    ubuntu = RegistryBase("ubuntu:24.04", "ubuntu:24.04", NOW)
    on_ubuntu = dataclasses.replace(
        combination,
        os=dataclasses.replace(combination.os, provider="registry", image=ubuntu.reference),
        registry_bases=(ubuntu,),
        bases="registry",
    )
    pulled = {**labels(image), staleness.BASE_DIGEST_LABEL: NOW}
    bootstrapped = {**labels(image), BASES_LABEL: "bootstrap", staleness.BASE_DIGEST_LABEL: ""}
    made = dataclasses.replace(on_ubuntu, bases="bootstrap")
    assert not staleness.check(holding(image, bootstrapped), made, image, CURRENT).stale  # the lock is no matter
    assert staleness.check(holding(image, pulled), made, image, CURRENT).reasons == (
        "built on the registry's base; the selection asks for a base bootstrapped from the distribution's archive now",
    )
    assert staleness.check(holding(image, bootstrapped), on_ubuntu, image, CURRENT).reasons == (
        "built on a base bootstrapped from the distribution's archive; the selection asks for the registry's base now",
    )
    assert not staleness.check(holding(image, labels(image)), combination, image, CURRENT).stale  # debian12: n/a


def test_an_expired_entry_makes_it_stale(runtime: tuple[Combination, Image], tmp_path: Path) -> None:
    combination, image = runtime
    path = tmp_path / "allow.yaml"
    path.write_text(
        "entries:\n  - {check: secrets, id: /root/.bashrc, reason: the distribution's, expires: 2026-11-30}\n"
    )
    options = GateOptions(allowlist.read(path, today=TODAY), today=TODAY)
    found = staleness.check(holding(image, labels(image)), combination, image, options)
    assert found.reasons == ("allowlist entry secrets /root/.bashrc (line 2) expired on 2026-11-30",)


def test_not_scanned_is_stale_under_require_scan(runtime: tuple[Combination, Image]) -> None:
    combination, image = runtime
    strict = GateOptions(require_scan=True, today=TODAY)
    found = staleness.check(holding(image, labels(image)), combination, image, strict)
    assert found.stale and any(r.startswith("python:") for r in found.reasons)


def test_the_command_exits_1_when_any_is_stale_and_2_on_a_bad_allowlist(
    cli: Callable[..., tuple[int, str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torchimages import engine as engine_package

    (tmp_path / "matrix.yaml").write_text(MATRIX)
    monkeypatch.chdir(tmp_path)
    fake = FakeEngine()
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: fake)
    code, out, _ = cli("outdated")
    assert code == 1 and "2 of 2 images stale" in out and "not there" in out
    code, out, err = cli("outdated", "--tags")  # for a job's loop: the stale tags alone on stdout
    assert code == 1 and out.split() == ["2.13.0-cpu-devel", "2.13.0-cpu-runtime"] and "not there" in err
    (tmp_path / "security-allowlist.yaml").write_text("entries:\n  - {check: python}\n")
    fake.calls.clear()
    code, _, err = cli("outdated")
    assert code == 2 and "an entry needs id, reason, expires" in err and fake.calls == [], "refused before the engine"
