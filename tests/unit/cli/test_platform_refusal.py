"""The builder builds linux/amd64 alone for now: a selection that holds a combination built for linux/arm64 is
refused by every command that builds, tags or reads built images, before anything is written or an engine asked;
a linux/amd64 selection of the same matrix goes on as before."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes import FakeEngine
from torchimages import engine as engine_package
from torchimages.building.requests import BUILDABLE_PLATFORMS, unbuildable
from torchimages.cli import common
from torchimages.planning import plan

Cli = Callable[..., tuple[int, str, str]]
MATRIX = """\
matrix:
  include:
    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}
    - {torch: 2.14.1, cuda: "13.0", os: debian12, torchaudio: none, platforms: [linux/amd64, linux/arm64]}
    - {torch: 2.9.1, cuda: cpu, os: debian12, platforms: [linux/arm64], flavors: [runtime]}
"""
SAID = (
    "2.14.1-cuda13.0-py3.11-debian12 is built for linux/amd64 and linux/arm64: linux/arm64 builds are not supported yet"
)


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, FakeEngine]:
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    (tmp_path / "meta.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    fake = FakeEngine()
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: fake)
    return tmp_path, fake


COMMANDS = [
    ["build", "--report", "R"],
    ["bake", "--output", "bake.json"],
    ["promote", "--from", "meta.json"],
    ["test"],
    ["lock"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
@pytest.mark.parametrize("selector", ["2.14.1-cuda13.0-cudnn9-runtime", "2.14.1-cuda13.0-cudnn9-devel-amd64", "*"])
def test_a_selection_built_for_linux_arm64_is_refused_before_anything(
    cli: Cli, here: tuple[Path, FakeEngine], command: list[str], selector: str
) -> None:
    folder, fake = here
    before = listing(folder)
    code, out, err = cli(*command, selector)
    assert code == 2, (out, err)
    assert f"matrix.yaml:4: error: platforms: {SAID} (allowed: linux/amd64)" in err, err
    assert "build it for linux/amd64 alone (platforms: [linux/amd64]) until they are" in err
    assert "Traceback" not in err and out == ""
    assert fake.calls == [] and listing(folder) == before  # no engine asked, nothing written


def test_every_such_combination_of_the_selection_is_named(cli: Cli, here: tuple[Path, FakeEngine]) -> None:
    code, _, err = cli("build", "*")
    assert code == 2
    assert "matrix.yaml:5: error: platforms: 2.9.1-cpu-py3.11-debian12 is built for linux/arm64: linux/arm64" in err


class Reached(Exception):
    """The command asked for its engine: every check before it passed."""


@pytest.mark.parametrize("command", COMMANDS[:1] + COMMANDS[3:], ids=["build", "test", "lock"])
def test_a_linux_amd64_selection_of_the_same_matrix_goes_on_to_the_engine(
    cli: Cli, here: tuple[Path, FakeEngine], monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    def reached(*_: object) -> None:
        raise Reached

    monkeypatch.setattr(common, "connect", reached)
    with pytest.raises(Reached):
        cli(*command, "2.13.0-cpu-runtime")


def test_only_linux_amd64_alone_is_buildable(here: tuple[Path, FakeEngine]) -> None:
    folder, _ = here
    loaded = plan.load(folder / "matrix.yaml")
    assert BUILDABLE_PLATFORMS == ("linux/amd64",)
    refused = unbuildable(plan.select(loaded, []))
    assert sorted(p.line for p in refused) == [4, 5]
    assert unbuildable(plan.select(loaded, ["2.13.0-cpu"])) == []
