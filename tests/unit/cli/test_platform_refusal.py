"""`build`, `bake`, `promote` and `test` handle every platform (the index, each platform's own tag); `lock`,
which does not yet, refuses a selection holding one before anything is written or an engine
asked, saying what to do instead; a linux/amd64 selection of the same matrix goes on as before."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes import FakeEngine
from torchimages import engine as engine_package
from torchimages.building.requests import unsupported
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
    "2.14.1-cuda13.0-py3.11-debian12 is built for linux/amd64 and linux/arm64: "
    "`{}` of such combinations is not supported yet"
)
INSTEAD = {
    "lock": "leave it unlocked for now: one lock file would constrain every platform's build",
}


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
    assert f"matrix.yaml:4: error: platforms: {SAID.format(command[0])} (allowed: linux/amd64)" in err, err
    assert INSTEAD[command[0]] in err
    assert "Traceback" not in err and out == ""
    assert fake.calls == [] and listing(folder) == before  # no engine asked, nothing written


def test_every_such_combination_of_the_selection_is_named(cli: Cli, here: tuple[Path, FakeEngine]) -> None:
    code, _, err = cli("lock", "*")
    assert code == 2
    assert "matrix.yaml:5: error: platforms: 2.9.1-cpu-py3.11-debian12 is built for linux/arm64: `lock` of" in err


class Reached(Exception):
    """The command asked for its engine: every check before it passed."""


@pytest.mark.parametrize("command", [["build"], ["test"], *COMMANDS], ids=["build", "test", "lock"])
def test_a_linux_amd64_selection_of_the_same_matrix_goes_on_to_the_engine(
    cli: Cli, here: tuple[Path, FakeEngine], monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    def reached(*_: object) -> None:
        raise Reached

    monkeypatch.setattr(common, "connect", reached)
    with pytest.raises(Reached):
        cli(*command, "2.13.0-cpu-runtime")


@pytest.mark.parametrize("command", ["build", "test"])
def test_a_selection_for_several_platforms_goes_on_to_the_engine_in_build_and_test(
    cli: Cli, here: tuple[Path, FakeEngine], monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    def reached(*_: object) -> None:
        raise Reached

    monkeypatch.setattr(common, "check_emulation", lambda chosen: None)  # this machine's emulator is not the point
    monkeypatch.setattr(common, "connect", reached)
    with pytest.raises(Reached):
        cli(command, "2.14.1-cuda13.0-cudnn9-runtime")


def test_only_combinations_of_linux_amd64_alone_pass_a_command_that_does_not_handle_others(
    here: tuple[Path, FakeEngine],
) -> None:
    folder, _ = here
    loaded = plan.load(folder / "matrix.yaml")
    refused = unsupported(plan.select(loaded, []), "test", "x")
    assert sorted(p.line for p in refused) == [4, 5]
    assert unsupported(plan.select(loaded, ["2.13.0-cpu"]), "test", "x") == []


def test_join_of_a_selection_of_linux_amd64_alone_is_refused_before_the_engine(
    cli: Cli, here: tuple[Path, FakeEngine]
) -> None:
    _, fake = here
    code, _, err = cli("join", "2.13.0-cpu-runtime")
    assert code == 2 and "no selected image is built for several platforms" in err and "Traceback" not in err
    assert fake.calls == []
