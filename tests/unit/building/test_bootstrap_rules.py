"""Issue 43, bootstrapped bases: a base is reused only when its digest label is this OS's, mirror's and platform's
digest (not merely when it has one); another platform's base is never taken for it.

The labels an engine holds are literals here (a digest of no command) or another platform's digest: facts of the
engine, never today's answer computed by the code under test."""

from __future__ import annotations

from pathlib import Path

from tests.fakes import FakeEngine
from tests.unit.building.test_bootstrap import DEBIAN, fake_mmdebstrap  # noqa: F401 (a fixture)
from torchimages.building import bootstrap

OTHER_DIGEST = "sha256:" + "0" * 64  # a base made by another command (another suite, mirror, hook)
ARM64 = bootstrap.Base(DEBIAN, "linux/arm64", f"{DEBIAN.image}-arm64")


def test_a_base_labelled_with_another_digest_is_bootstrapped_again(tmp_path: Path, fake_mmdebstrap: Path) -> None:  # noqa: F811
    fake_mmdebstrap.write_text("ok\n")
    engine = FakeEngine()
    engine.images[DEBIAN.image] = {bootstrap.DIGEST_LABEL: OTHER_DIGEST}
    assert not bootstrap.up_to_date(engine, DEBIAN, None)
    said = bootstrap.ensure(engine, DEBIAN, None, tmp_path / "b.log")
    assert said == f"base {DEBIAN.image} bootstrapped from the bookworm archive"
    assert [args[0] for call, args in engine.calls if call == "import_rootfs"] == [DEBIAN.image]


def test_a_base_made_without_the_mirror_is_not_up_to_date_with_it() -> None:
    engine = FakeEngine()
    engine.images[DEBIAN.image] = {bootstrap.DIGEST_LABEL: bootstrap.digest(DEBIAN, None)}
    assert bootstrap.up_to_date(engine, DEBIAN, None)
    assert not bootstrap.up_to_date(engine, DEBIAN, "http://mirror.example/debian")


def test_a_base_labelled_with_linux_amd64s_digest_is_not_the_arm64_base(
    tmp_path: Path,
    fake_mmdebstrap: Path,  # noqa: F811
) -> None:
    fake_mmdebstrap.write_text("ok\n")
    engine = FakeEngine()
    amd64 = {bootstrap.DIGEST_LABEL: bootstrap.digest(DEBIAN, None)}
    engine.images[ARM64.reference] = amd64  # an arm64 name on linux/amd64's base
    assert not bootstrap.up_to_date(engine, DEBIAN, None, ARM64)
    said = bootstrap.ensure(engine, DEBIAN, None, tmp_path / "b.log", base=ARM64)
    assert said == f"base {ARM64.reference} bootstrapped from the bookworm archive"
    ((name, _, platform),) = [args for call, args in engine.calls if call == "import_rootfs"]
    assert (name, platform) == (ARM64.reference, "linux/arm64")


def test_an_up_to_date_linux_amd64_base_is_never_tagged_as_the_arm64_base(
    tmp_path: Path,
    fake_mmdebstrap: Path,  # noqa: F811
) -> None:
    fake_mmdebstrap.write_text("ok\n")
    engine = FakeEngine()
    engine.images[DEBIAN.image] = {bootstrap.DIGEST_LABEL: bootstrap.digest(DEBIAN, None)}
    said = bootstrap.ensure(engine, DEBIAN, None, tmp_path / "b.log", base=ARM64)
    assert said == f"base {ARM64.reference} bootstrapped from the bookworm archive"
    assert engine.tagged == []
    assert [args[2] for call, args in engine.calls if call == "import_rootfs"] == ["linux/arm64"]
