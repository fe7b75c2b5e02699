"""`run_shell`: a script in a throwaway container, its command line, and DockerEngine's answers from a docker
CLI (a stand-in script here: its exit status, output, a hang, docker's own failure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import docker.errors
import pytest

from torchimages import engine
from torchimages.security import os_answers


def test_the_docker_run_command_of_a_script() -> None:
    cmd = engine.shell_command("/usr/bin/docker", "img:1", "s1", "echo hi")
    assert cmd == [
        "/usr/bin/docker",
        "run",
        "--rm",
        "--name",
        "s1",
        "--pull",
        "never",
        "--network",
        "none",
        "--entrypoint",
        "/bin/sh",
        "img:1",
        "-c",
        "echo hi",
    ]
    cmd = engine.shell_command("docker", "img:1", "s1", "x", user="0:0", network="default")
    assert cmd[cmd.index("--network") + 1] == "default" and cmd[cmd.index("--user") + 1] == "0:0"


class Containers:
    def __init__(self) -> None:
        self.removed: list[str] = []

    def get(self, name: str) -> Any:
        self.removed.append(name)
        raise docker.errors.NotFound("gone")


class Sdk:
    def __init__(self) -> None:
        self.containers = Containers()


def docker_engine(tmp_path: Path, script: str) -> tuple[engine.DockerEngine, Sdk]:
    """A DockerEngine whose docker CLI is `script` and whose SDK only removes containers (none connects)."""
    cli = tmp_path / "docker"
    cli.write_text("#!/bin/sh\n" + script)
    cli.chmod(0o755)
    found = engine.DockerEngine.__new__(engine.DockerEngine)
    sdk = Sdk()
    found.__dict__.update(sdk=sdk, _errors=docker.errors, _docker_cli=str(cli), _client=None, _named_contexts=None)
    return found, sdk


def test_the_scripts_status_and_output_come_back(tmp_path: Path) -> None:
    found, _ = docker_engine(tmp_path, 'echo "args: $*"; echo oops >&2; exit 3\n')
    result = found.run_shell("img:1", "echo hi", user="0:0", network="host")
    assert (result.status, result.stderr, result.timed_out) == (3, "oops\n", False)
    assert "--network host --user 0:0 --entrypoint /bin/sh img:1 -c echo hi" in result.stdout


def test_a_script_past_its_time_limit_is_stopped_and_its_container_removed(tmp_path: Path) -> None:
    found, sdk = docker_engine(tmp_path, "echo started; exec sleep 30\n")
    result = found.run_shell("img:1", "sleep 30", timeout_s=0.5)
    assert result.timed_out and result.status == -1
    assert len(sdk.containers.removed) == 1 and sdk.containers.removed[0].startswith("torchimages-shell-")


def test_dockers_own_failure_is_an_engine_error(tmp_path: Path) -> None:
    found, _ = docker_engine(tmp_path, "echo 'Unable to find image img:1 locally' >&2; exit 125\n")
    with pytest.raises(engine.EngineError, match="could not run a container of img:1: Unable to find image"):
        found.run_shell("img:1", "true")


def test_output_that_is_not_utf8_comes_back_byte_for_byte(tmp_path: Path) -> None:
    """Two outputs that differ only in a byte that is not UTF-8 read differently (each byte kept: the
    os-updates check keys a shared answer on the look's text), and the text gives back the very bytes."""
    (tmp_path / "ff").mkdir()
    (tmp_path / "fe").mkdir()
    found_ff, _ = docker_engine(tmp_path / "ff", "printf 'deb http://x.example.org/\\377 bookworm main\\n'\n")
    found_fe, _ = docker_engine(tmp_path / "fe", "printf 'deb http://x.example.org/\\376 bookworm main\\n'\n")
    ff, fe = found_ff.run_shell("img:1", "true").stdout, found_fe.run_shell("img:1", "true").stdout
    assert ff != fe
    assert ff.encode("utf-8", "surrogateescape") == b"deb http://x.example.org/\xff bookworm main\n"
    assert os_answers.key("default", ff) != os_answers.key("default", fe)
