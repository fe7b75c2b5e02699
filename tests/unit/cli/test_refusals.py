"""A refusal leaves the disk as it was: each command, refused for each reason it checks, writes nothing
(the folder it runs in listed before and after). Empty values of file and folder options are refused with
the option named; --run-arg values that take the container from the tool are refused with the reason; two
--image references that would share a result file are refused before anything runs; a closed stderr never
sends warnings to stdout."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeEngine
from tests.unit.conftest import ROOT
from torchimages import engine as engine_package
from torchimages import textfile
from torchimages.building import locks
from torchimages.cli import preflight
from torchimages.engine import EngineError, split_run_args
from torchimages.planning import plan

Cli = Callable[..., tuple[int, str, str]]
MATRIX = "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}\n"


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder to run in, holding the matrix, a file `a-file` and a folder `a-folder`; the engine is a fake."""
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    (tmp_path / "a-file").write_text("")
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "meta.json").write_text('{"2_13_0-cpu-devel": {}, "2_13_0-cpu-runtime": {}}')  # baked, as buildx says
    monkeypatch.chdir(tmp_path)
    fake = FakeEngine()
    fake.cache_problem = "this client cannot export that cache"
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: fake)
    return tmp_path


REFUSED = [
    (["build", "--report", "R", "--find-links", "no-such-folder", "*"], "wheel source"),
    (["build", "--report", "R", "--log-dir", "a-file", "*"], "--log-dir a-file"),
    (["build", "--report", "R", "--log-dir", "a-file/logs", "*"], "--log-dir a-file/logs"),
    (["build", "--report", "a-file", "*"], "--report a-file"),
    (["build", "--report", "R", "--cache-to", "type=inline", "*"], "cannot export that cache"),
    (
        ["build", "--report", "R", "--docker", "no-such-docker-client", "*"],
        "'no-such-docker-client' was not found on PATH",
    ),
    (["build", "--report", "R", "--ca-cert", "no-such-file", "*"], "cannot read the --ca-cert file"),
    (["build", "--report", "R", "no-such-image"], "no image tag starts with"),
    (["bake", "--output", "no-such-folder/bake.json"], "--output no-such-folder/bake.json"),
    (["bake", "--output", "a-folder"], "--output a-folder"),
    (["bake", "--output", os.devnull], "it is a character device, not a regular file"),
    (["build", "--report", "R", "--log-dir", os.devnull, "*"], "it is a character device, not a folder"),
    (["test", "--image", "x:1", "--junit", os.devnull], "it is a character device, not a regular file"),
    (["bake", "--output", "bake.json", "--secrets-dir", "a-file"], "--secrets-dir a-file"),
    (["bake", "--output", "bake.json", "--ca-cert", "no-such-file"], "cannot read the --ca-cert file"),
    (["promote", "--from", "meta.json", "--log-dir", "a-file", "*"], "--log-dir a-file"),
    (["promote", "--from", "meta.json", "--docker", "no-such-docker-client", "*"], "--docker"),
    (["outdated", "--docker", "no-such-docker-client", "*"], "--docker: the docker client 'no-such-docker-client'"),
    (["outdated", "--docker", "a-folder/docker", "*"], "--docker: the docker client 'a-folder/docker' was not found"),
    (["outdated", "--docker", "./a-folder", "*"], "--docker: the docker client './a-folder' is a folder"),
    (["outdated", "--docker", "./a-file", "*"], "--docker: the docker client './a-file' is not executable"),
    (["join", "--docker", "no-such-docker-client", "*"], "--docker: the docker client 'no-such-docker-client'"),
    (["test", "--image", "a/b:1", "--image", "a_b:1", "--report", "R"], "one file name"),
    (["test", "--image", "x:1", "--report", "a-file"], "--report a-file"),
    (["test", "--image", "x:1", "--junit", "a-folder"], "--junit a-folder"),
    (["test", "--image", "x:1", "--junit", "no-such-folder/j.xml"], "--junit no-such-folder/j.xml"),
    (["test", "--image", "x:1", "--run-arg=-itd", "--report", "R"], "--detach cannot be given"),
    (["render", "--images-dir", "a-file"], "--images-dir"),
]


@pytest.mark.parametrize(("args", "said"), REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_a_refusal_writes_nothing(cli: Cli, here: Path, args: list[str], said: str) -> None:
    before = listing(here)
    code, _, err = cli(*args)
    assert code == 2 and said in err, err
    assert "Traceback" not in err
    assert listing(here) == before, "a refused command wrote"


@pytest.mark.parametrize("command", [["outdated", "*"], ["build", "--report", "R", "*"], ["join", "*"]])
def test_a_docker_variable_naming_no_client_is_refused_like_the_option(
    cli: Cli, here: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.setenv("DOCKER", "no-such-docker-client")
    code, _, err = cli(*command)
    assert code == 2 and "DOCKER: the docker client 'no-such-docker-client' was not found on PATH" in err, err
    assert listing(here) == ["a-file", "a-folder", "matrix.yaml", "meta.json"]


def test_a_bake_whose_file_cannot_be_written_leaves_no_secret(
    cli: Cli, here: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pip.conf may hold index credentials: refused after it was written (the bake file's write failed),
    it is removed with the folder made for it."""

    write = textfile.write_atomically

    def full_disk(path: Path, *args: Any, **kwargs: Any) -> None:
        if path.name == "bake.json":  # the secrets are written first, the bake file finds the disk full
            raise OSError(28, "No space left on device")
        write(path, *args, **kwargs)

    monkeypatch.setattr(textfile, "write_atomically", full_disk)
    before = listing(here)
    code, _, err = cli("bake", "--output", "bake.json")
    assert code == 2 and "--output bake.json: No space left on device" in err, err
    assert listing(here) == before


@pytest.mark.parametrize(
    "args",
    [
        ["build", "--report", "", "*"],
        ["build", "--log-dir", "", "*"],
        ["build", "--ca-cert", "", "*"],
        ["build", "--docker", "", "*"],
        ["build", "--matrix", "", "*"],
        ["render", "--images-dir", ""],
        ["bake", "--output", ""],
        ["bake", "--secrets-dir", ""],
        ["promote", "--from", ""],
        ["test", "--image", "x", "--junit", ""],
        ["test", "--image", "x", "--spec", ""],
        ["test", "--image", "x", "--shm-size", ""],
        ["test", "--host", "local", "--python-exe", ""],
    ],
)
def test_an_empty_value_is_refused_naming_the_option(
    cli: Cli, here: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    before = listing(here)
    with pytest.raises(SystemExit) as exited:
        cli(*args)
    option = next(a for a, v in itertools.pairwise(args) if v == "")
    assert exited.value.code == 2
    assert f"argument {option}: an empty value" in capsys.readouterr().err
    assert listing(here) == before


@pytest.mark.parametrize(
    ("values", "option"),
    [
        (["--name X"], "--name"),
        (["--name=X"], "--name"),
        (["--ulimit memlock=-1", "--name", "X"], "--name"),
        (["--rm"], "--rm"),
        (["--rm=true"], "--rm"),
        (["-d"], "--detach"),
        (["-itd"], "--detach"),
        (["-d=false"], "--detach"),
        (["--detach"], "--detach"),
        (["--entrypoint sh"], "--entrypoint"),
        (["--entrypoint="], "--entrypoint"),
        (["-e X=1 -d"], "--detach"),
    ],
)
def test_run_args_that_take_the_container_from_the_tool_are_refused(values: list[str], option: str) -> None:
    with pytest.raises(EngineError, match=f"{option} cannot be given: "):
        split_run_args(values)


def test_run_args_that_only_look_alike_pass() -> None:
    values = ["-it", "-e -d", "-p8080:80", "-edebug=1", "--detach-keys ctrl-x", "--ulimit memlock=-1", "-v /a:/b"]
    assert split_run_args(values)[:3] == ["-it", "-e", "-d"]


def test_all_or_nothing_undoes_what_the_block_made(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "old").write_text("x")
    new = tmp_path / "a" / "b"
    with pytest.raises(RuntimeError), preflight.all_or_nothing(kept, new):
        (kept / "added").write_text("y")
        new.mkdir(parents=True)
        raise RuntimeError
    assert listing(tmp_path) == ["kept", "kept/old"]
    with preflight.all_or_nothing(kept, new):  # no exception: everything stays
        new.mkdir(parents=True)
    assert new.is_dir()


def test_lock_reads_every_image_before_it_writes_any(write_matrix: Callable[[str], Path], tmp_path: Path) -> None:
    matrix = MATRIX + "    - {torch: 2.14.1, cuda: '13.0', os: debian12, torchvision: none, torchaudio: none}\n"
    loaded = plan.load(write_matrix(matrix))
    fake = FakeEngine()
    for c in loaded.combinations:
        fake.images[locks.image_to_freeze(c).reference] = {}
    answers = iter(["torch==2.13.0\n"])

    def run_python(reference: str, args: list[str]) -> str:
        try:
            return next(answers)
        except StopIteration:
            raise EngineError(f"could not run a container of {reference}") from None

    fake.run_python = run_python  # type: ignore[method-assign]
    before = listing(tmp_path)
    with pytest.raises(EngineError):
        locks.lock_packages(fake, tmp_path / "images", loaded.combinations)
    assert listing(tmp_path) == before


def test_with_stderr_closed_warnings_never_reach_stdout(tmp_path: Path) -> None:
    """The repository's matrix has warnings (a note line on stderr); with stderr closed, `list --json` is JSON."""
    command = f"{sys.executable} -m torchimages list --json --matrix {ROOT / 'matrix.yaml'} 2>&-"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHIMAGES_")}
    result = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False, env=env)
    assert result.returncode == 0
    assert json.loads(result.stdout), result.stdout[:300]
    refused = subprocess.run(["sh", "-c", command.replace("matrix.yaml", "no-such.yaml")], capture_output=True, env=env)
    assert refused.returncode == 2 and refused.stdout == b""


def test_every_path_in_a_bake_file_is_absolute(cli: Cli, here: Path) -> None:
    """buildx reads a bake file's paths from the folder it runs in, not the file's: relative ones (the
    matrix, --secrets-dir and --ca-cert given relative) would break `docker buildx bake -f FILE` elsewhere."""
    code, _, err = cli("bake", "--output", "bake.json", "--secrets-dir", "s", "--ca-cert", "a-file")
    assert code == 0, err
    targets = json.loads((here / "bake.json").read_text())["target"].values()
    secrets = [Path(s.split("src=", 1)[1]) for t in targets for s in t["secret"]]
    assert secrets and all(p.is_absolute() and p.is_file() for p in secrets), secrets
    assert all(Path(t["context"]) == here / "images" / Path(t["context"]).name for t in targets)
