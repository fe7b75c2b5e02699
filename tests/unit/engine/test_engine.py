"""Without an engine or a BuildKit client, one clear message and exit status 2 (real failures, no mocks)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.conftest import ROOT
from torchimages import engine


def test_no_engine_is_one_clear_message(tmp_path: Path) -> None:
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-such.sock"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "build.py"), "build", "--log-dir", str(tmp_path), "2.14.1-cuda13.0-*-debian12"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 2
    assert "no Docker engine answers" in result.stderr and "dockerd" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_client_that_cannot_build_with_buildkit_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\necho 'BuildKit is enabled but the buildx component is missing' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(engine.EngineError) as caught:
        engine.find_build_client(str(fake))
    message = str(caught.value)
    assert "no docker client here builds with BuildKit" in message and "buildx" in message


def test_a_missing_client_is_named() -> None:
    with pytest.raises(engine.EngineError, match="'/no/such/docker' was not found"):
        engine.find_build_client("/no/such/docker")


def test_a_client_without_the_buildx_plugin_cannot_bake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """find_buildx names what it tried and how to get the plugin; a client whose `buildx version` answers is it."""
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\necho \"docker: 'buildx' is not a docker command.\" >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.delenv("DOCKER", raising=False)
    with pytest.raises(engine.EngineError) as caught:
        engine.find_buildx(str(fake))
    assert str(fake) in str(caught.value) and "docker-buildx" in str(caught.value)
    fake.write_text('#!/bin/sh\n[ "$1 $2" = "buildx version" ] && echo "github.com/docker/buildx 0.13.1"\n')
    assert engine.find_buildx(str(fake)) == str(fake)


def test_named_contexts_are_found_by_a_probe_build(tmp_path: Path) -> None:
    """Issue 19: a buildx whose build with `--build-context` succeeds takes named contexts; one that fails
    (20.10's frontend pulls `probectx` as an image) and the classic client do not."""
    fake = tmp_path / "docker"
    fake.write_text('#!/bin/sh\ncase "$*" in *"--build-context probectx="*) exit 0;; esac\nexit 1\n')
    fake.chmod(0o755)
    buildx = engine.BuildClient((str(fake), "buildx", "build"), ())
    assert engine.takes_named_contexts(buildx)
    assert not engine.takes_named_contexts(engine.BuildClient((str(fake), "build"), (("DOCKER_BUILDKIT", "1"),)))
    fake.write_text("#!/bin/sh\necho 'failed to resolve source metadata for docker.io/library/probectx' >&2\nexit 1\n")
    assert not engine.takes_named_contexts(buildx)
