"""`--compression gzip|zstd` (issue 19): a bad value, zstd without --push, and zstd without the programs a
zstd push runs are refused at parse or preflight time (exit 2), before anything is built or written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes import FakeEngine
from torchimages import engine as engine_package

Cli = Callable[..., tuple[int, str, str]]
MATRIX = "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}\n"


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeEngine:
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    (tmp_path / "meta.json").write_text('{"2_13_0-cpu-devel": {}, "2_13_0-cpu-runtime": {}}')
    monkeypatch.chdir(tmp_path)
    engine = FakeEngine()
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: engine)
    return engine


def programs(folder: Path, **scripts: str) -> str:
    """A PATH of one folder holding these programs (name: shell script)."""
    folder.mkdir(exist_ok=True)
    for name, script in scripts.items():
        (folder / name).write_text("#!/bin/sh\n" + script)
        (folder / name).chmod(0o755)
    return str(folder)


@pytest.mark.parametrize("command", [["build"], ["promote", "--from", "meta.json"]])
def test_zstd_without_push_is_refused_before_anything(cli: Cli, fake: FakeEngine, command: list[str]) -> None:
    code, _, err = cli(*command, "--compression", "zstd", "--log-dir", "logs", "*")
    assert code == 2 and "--compression zstd: only a push compresses layers; add --push" in err, err
    assert fake.calls == [] and not Path("logs").exists()


@pytest.mark.parametrize(
    ("scripts", "said"),
    [
        ({}, "--compression zstd needs skopeo and zstd on PATH (not found)"),
        ({"zstd": "exit 0\n"}, "--compression zstd needs skopeo on PATH (not found)"),
        ({"zstd": "exit 0\n", "skopeo": "echo '  --dest-compress'\n"}, "has no `copy --preserve-digests` (too old)"),
    ],
)
def test_zstd_without_its_programs_is_refused_before_any_build(
    cli: Cli, fake: FakeEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scripts: dict[str, str], said: str
) -> None:
    monkeypatch.setenv("PATH", programs(tmp_path / "bin", **scripts))
    code, _, err = cli("build", "--push", "--compression", "zstd", "--log-dir", "logs", "*")
    assert code == 2 and said in err and "apt-get install skopeo zstd" in err, err
    assert fake.built == [] and fake.calls == [] and not Path("logs").exists()


def test_an_unknown_compression_is_refused_naming_the_option(
    cli: Cli, fake: FakeEngine, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli("build", "--push", "--compression", "zstd:chunked", "*")
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--compression" in err and "a push compresses layers with gzip or zstd" in err, err
    assert fake.calls == []
