"""`--bases bootstrap`: a registry OS's base made from its archive, mapped onto the Dockerfile's FROM at build time.

The archive facts are literals here (not the knowledge base's), so a test fails when the rule breaks, not when the
knowledge base changes; the plan tests read the real knowledge base's Ubuntu entries, which is what users get."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes import FakeEngine
from torchimages import compat, render, values
from torchimages.building import bootstrap, requests
from torchimages.compat import Archive, OsRelease
from torchimages.engine import EngineError
from torchimages.planning import plan
from torchimages.problems import InputError

ARCHIVE = Archive(
    image="example/bootstrap-ubuntu:24.04",
    suite="noble",
    suites=("noble", "noble-updates", "noble-security"),
    components=("main", "universe"),
    keyring="/usr/share/keyrings/example-archive-keyring.gpg",
    include=("apt",),
    mirror=(("amd64", "http://archive.example/ubuntu"), ("arm64", "http://ports.example/ubuntu-ports")),
    security=(("amd64", "http://security.example/ubuntu"), ("arm64", "http://ports.example/ubuntu-ports")),
)
UBUNTU = OsRelease(
    name="ubuntu24.04",
    provider="registry",
    image="ubuntu:24.04",
    python="3.12",
    packages=("python3.12",),
    devel_packages=(),
    suite="",
    confidence="V",
    sources=(),
    archive=ARCHIVE,
)
MATRIX = "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: ubuntu24.04, torchvision: none, torchaudio: none}\n"


def test_the_command_takes_the_archives_keyring_packages_and_sources_for_each_architecture() -> None:
    cmd = bootstrap.command(UBUNTU, None, "/x/rootfs.tar")
    assert f"--keyring={ARCHIVE.keyring}" in cmd and "--include=apt" in cmd
    assert cmd[-5:] == [
        "noble",
        "/x/rootfs.tar",
        "deb http://archive.example/ubuntu noble main universe",
        "deb http://archive.example/ubuntu noble-updates main universe",
        "deb http://security.example/ubuntu noble-security main universe",
    ]
    arm = bootstrap.command(UBUNTU, None, "/x/rootfs.tar", platform="linux/arm64")
    assert "--architectures=arm64" in arm
    assert arm[-3:] == [f"deb http://ports.example/ubuntu-ports {s} main universe" for s in ARCHIVE.suites]


def test_a_mirror_replaces_every_url_and_a_whole_sources_line_is_taken_alone() -> None:
    cmd = bootstrap.command(UBUNTU, "http://mirror.internal/ubuntu", "/x/rootfs.tar")
    assert cmd[-3:] == [f"deb http://mirror.internal/ubuntu {s} main universe" for s in ARCHIVE.suites]
    line = "deb http://mirror.internal/ubuntu noble main"
    assert bootstrap.command(UBUNTU, line, "/x/rootfs.tar")[-3:] == ["noble", "/x/rootfs.tar", line]
    assert bootstrap.digest(UBUNTU, None) != bootstrap.digest(UBUNTU, "http://mirror.internal/ubuntu")


def test_an_archive_without_suites_takes_mmdebstraps_defaults() -> None:
    debian = replace(UBUNTU, name="debian12", provider="bootstrap", archive=Archive("example/debian:12", "bookworm"))
    assert bootstrap.command(debian, None, "/x/rootfs.tar")[-2:] == ["bookworm", "/x/rootfs.tar"]
    assert bootstrap.command(debian, "http://m.example/debian", "/x/r.tar")[-1] == "http://m.example/debian"


@pytest.mark.parametrize(
    ("mirrors", "family", "chosen"),
    [
        ((), "ubuntu", None),
        (("http://all.example/",), "ubuntu", "http://all.example/"),
        (("http://all.example/", "ubuntu=http://u.example/"), "ubuntu", "http://u.example/"),
        (("ubuntu=http://u.example/", "http://all.example/"), "ubuntu", "http://u.example/"),
        (("ubuntu=http://u.example/",), "debian", None),
        (("debian=http://d.example/", "ubuntu=http://u.example/"), "debian", "http://d.example/"),
    ],
)
def test_a_familys_own_mirror_wins_over_a_bare_one(mirrors: tuple[str, ...], family: str, chosen: str | None) -> None:
    assert bootstrap.mirror_for(mirrors, family) == chosen


@pytest.mark.parametrize(
    "bad",
    [
        "fedora=http://x.example/",
        "ubuntu=",
        "ubuntu=ftp://x.example/",
        "ubuntu=http://x.example/\n",
        "=",
        "ubuntu=ubuntu=http://x.example/",
        "ubuntu=debian=http://x.example/",
        "\udcff",
    ],
)
def test_a_mirror_of_an_unknown_family_or_a_bad_url_is_refused(bad: str) -> None:
    with pytest.raises(values.BadValue):
        values.mirror(bad, "--mirror")


def test_a_family_mirror_is_checked_and_kept_whole() -> None:
    assert values.mirror("ubuntu=http://u.example/ubuntu", "") == "ubuntu=http://u.example/ubuntu"
    assert values.mirror("http://host.example/a=b", "") == "http://host.example/a=b"


def test_a_missing_keyring_is_said_before_anything_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "mmdebstrap").write_text("#!/bin/sh\nexit 99\n")
    (folder / "mmdebstrap").chmod(0o755)
    monkeypatch.setenv("PATH", str(folder))
    missing = replace(UBUNTU, archive=replace(ARCHIVE, keyring=str(tmp_path / "none.gpg")))
    with pytest.raises(EngineError, match=r"none\.gpg.*not installed \(apt-get install ubuntu-keyring"):
        bootstrap.ensure(FakeEngine(), missing, None, tmp_path / "log")


def test_an_os_without_an_archive_cannot_be_bootstrapped() -> None:
    with pytest.raises(EngineError, match="no archive"):
        bootstrap.command(replace(UBUNTU, archive=None), None)


def combination(write_matrix: Callable[[str], Path], text: str = MATRIX, **load: str) -> plan.Plan:
    return plan.load(write_matrix(text), **load)  # type: ignore[arg-type]


def test_the_bases_are_pulled_unless_bootstrap_is_asked(write_matrix: Callable[[str], Path]) -> None:
    (c,) = combination(write_matrix).combinations
    assert c.bases == "registry" and bootstrap.contexts(c, "linux/amd64") == ()
    assert bootstrap.bootstrapped([c]) == []
    assert [b.name for b in c.pulled_bases] == ["ubuntu:24.04"]


@pytest.mark.parametrize(
    ("text", "override"),
    [
        ("bases: bootstrap\n" + MATRIX, None),  # the matrix's top level
        (MATRIX.replace("torchaudio: none}", "torchaudio: none, bases: bootstrap}"), None),  # the row's own
        (MATRIX, "bootstrap"),  # --bases
        ("bases: registry\n" + MATRIX.replace("none}", "none, bases: registry}"), "bootstrap"),  # --bases wins
    ],
)
def test_bootstrap_maps_the_os_from_onto_the_local_base(
    write_matrix: Callable[[str], Path], text: str, override: str | None
) -> None:
    (c,) = combination(write_matrix, text, **({"os_bases": override} if override else {})).combinations
    assert c.bases == "bootstrap"
    assert bootstrap.contexts(c, "linux/amd64") == (
        ("ubuntu:24.04", "docker-image://torchimages/bootstrap-ubuntu:24.04"),
    )
    (base,) = bootstrap.bootstrapped([c])
    assert base.reference == "torchimages/bootstrap-ubuntu:24.04" and base.os.name == "ubuntu24.04"
    assert c.pulled_bases == ()  # nothing to pull, lock or warn about


def test_a_rows_own_bases_wins_over_the_matrixs(write_matrix: Callable[[str], Path]) -> None:
    text = "bases: bootstrap\n" + MATRIX.replace("none}", "none, bases: registry}")
    (c,) = combination(write_matrix, text).combinations
    assert c.bases == "registry"


def test_the_dockerfile_is_the_same_whichever_the_bases(write_matrix: Callable[[str], Path]) -> None:
    pulled = combination(write_matrix)
    made = combination(write_matrix, MATRIX, os_bases="bootstrap")
    assert render.render_all(pulled.combinations, pulled.templates) == render.render_all(
        made.combinations, made.templates
    )
    assert pulled.combinations[0].images[0].input_digest == made.combinations[0].images[0].input_digest


@pytest.mark.parametrize("value", ["pulled", "", "[bootstrap]", "{a: b}"])
def test_an_unknown_bases_value_is_refused_where_it_is_written(write_matrix: Callable[[str], Path], value: str) -> None:
    with pytest.raises(InputError) as refused:
        combination(write_matrix, f"bases: {value}\n" + MATRIX)
    assert "bases" in str(refused.value) and ":1:" in str(refused.value)


def test_an_os_without_an_archive_is_refused_under_bootstrap(
    write_matrix: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = compat.load()
    kb = replace(kb, os={**kb.os, "ubuntu24.04": replace(kb.os["ubuntu24.04"], archive=None)})
    with pytest.raises(InputError, match=r"ubuntu24\.04 cannot be bootstrapped"):
        plan.load(write_matrix(MATRIX), kb=kb, os_bases="bootstrap")


def test_bootstrapped_images_say_so_and_name_their_base(write_matrix: Callable[[str], Path]) -> None:
    (c,) = combination(write_matrix, MATRIX, os_bases="bootstrap").combinations
    labels = dict(requests.bases_labels(c, c.image("runtime")))
    assert labels == {
        "io.torchimages.bases": "bootstrap",
        "org.opencontainers.image.base.name": "torchimages/bootstrap-ubuntu:24.04",
    }
    (pulled,) = combination(write_matrix).combinations
    assert requests.bases_labels(pulled, pulled.image("runtime")) == ()


def test_the_settings_bases_is_checked_and_reaches_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchimages.cli import options

    parser = argparse.ArgumentParser()
    options.common(parser)
    monkeypatch.setenv("TORCHIMAGES_BASES", "bootstrap")
    args = parser.parse_args([])
    options.apply_settings(args)
    assert args.os_bases == "bootstrap"
    monkeypatch.setenv("TORCHIMAGES_BASES", "pulled")
    with pytest.raises(ValueError, match="registry, bootstrap"):
        options.apply_settings(parser.parse_args([]))


@given(st.text(max_size=300))
@settings(max_examples=300, deadline=None)
def test_any_mirror_value_is_taken_whole_or_refused_and_never_breaks_the_choice(text: str) -> None:
    try:
        taken = values.mirror(text, "--mirror")
    except values.BadValue:
        return
    assert taken == text and taken.isprintable()
    for family in values.MIRROR_FAMILIES:
        chosen = bootstrap.mirror_for([taken], family)
        assert chosen is None or chosen in taken


def test_a_bake_without_named_contexts_refuses_bootstrap_and_writes_nothing(
    cli: Callable[..., tuple[int, str, str]], write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    out = tmp_path / "bake.json"
    code, _, err = cli(
        "bake",
        "--matrix",
        str(write_matrix(MATRIX)),
        "--bases",
        "bootstrap",
        "--no-named-contexts",
        "--output",
        str(out),
        "2.13.0",
    )
    assert code == 2 and "--no-named-contexts leaves out" in err and not out.exists()
    code, _, err = cli(
        "bake", "--matrix", str(write_matrix(MATRIX)), "--bases", "bootstrap", "--output", str(out), "2.13.0"
    )
    assert code == 0, err
    assert '"ubuntu:24.04": "docker-image://torchimages/bootstrap-ubuntu:24.04"' in out.read_text()


def test_a_devel_that_still_needs_a_registrys_toolkit_image_is_warned_of(write_matrix: Callable[[str], Path]) -> None:
    both = "matrix:\n  include:\n    - {torch: 2.7.1, cuda: '12.6', os: ubuntu24.04}\n"
    (c,) = combination(write_matrix, both, os_bases="bootstrap").combinations
    assert c.bases == "bootstrap" and c.toolkit.provider == "image"
    (warning,) = [w for w in c.warnings if w.key == "bases"]
    assert "devel starts from nvidia/cuda:12.6.3-devel-ubuntu24.04, which a registry must serve" in warning.message
    runtime = both.replace("ubuntu24.04}", "ubuntu24.04, flavors: [runtime]}")
    (alone,) = combination(write_matrix, runtime, os_bases="bootstrap").combinations
    assert not [w for w in alone.warnings if w.key == "bases"]
    (pulled,) = combination(write_matrix, both).combinations
    assert not [w for w in pulled.warnings if w.key == "bases"]
