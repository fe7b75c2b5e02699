"""Issue 13, "shared cache", against real engines: one CI runner (the machine's engine) builds with
`--cache-to type=inline --push` into a registry on loopback; a second runner, a FRESH private engine with
nothing but the bootstrap base, builds the same image with `--cache-from REGISTRY/REPO:{tag}`: its log shows
the cache imported and the venv steps CACHED, and the image is still verified and tagged. Both build clients:
the one found (buildx where installed) and the classic client (DOCKER_BUILDKIT=1, through a `--docker`
wrapper that has no buildx). A cache type the engine's built-in BuildKit cannot do is refused before any
build (exit 2)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from torchimages import engine
from torchimages.engine import discovery

from .conftest import NO_LAYER_SCAN, ROOT, remove_repository, require, run_cli
from .test_faults import base_archive, private_engine, shared_engine_keeps_its_bridge  # noqa: F401 (fixtures)
from .test_push import registry  # noqa: F401 (fixture)

pytestmark = pytest.mark.e2e
RUNTIME = "{torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none, flavors: [runtime]}"
TAG = "2.13.0-cpu-runtime"
# A BuildKit step of the venv (a uv RUN) and what BuildKit says of it: `#12 [runtime 5/8] RUN --mount=...`
# then, a few lines on, `#12 CACHED`.
VENV_STEP = re.compile(r"^#(\d+) \[runtime +\d+/\d+\] RUN --mount=type=cache,target=/home/torch/.cache/uv", re.M)


@pytest.fixture(scope="module")
def classic_docker(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A docker client without buildx that builds with DOCKER_BUILDKIT=1: a wrapper of the first docker on
    PATH that can, refusing `buildx` (so find_build_client takes the classic client)."""
    folder = tmp_path_factory.mktemp("classic")
    for number, docker in enumerate(discovery._candidates(None)):
        wrapper = folder / f"docker-{number}"
        wrapper.write_text(f'#!/bin/sh\n[ "$1" = buildx ] && exit 1\nexec {docker} "$@"\n')
        wrapper.chmod(0o755)
        try:
            if not engine.find_build_client(str(wrapper)).buildx:
                return str(wrapper)
        except engine.EngineError:
            continue
    require("no docker client on PATH builds with DOCKER_BUILDKIT=1 (Debian's docker.io has one)")
    raise AssertionError("unreachable")


def write_matrix(folder: Path, repository: str) -> Path:
    path = folder / "matrix.yaml"
    path.write_text(textwrap.dedent(f"repository: {repository}\nmatrix:\n  include:\n    - {RUNTIME}\n"))
    rendered = run_cli("render", "--matrix", path)
    assert rendered.returncode == 0, rendered.stderr
    return path


def build(matrix: Path, logs: Path, *options: str, docker_host: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"DOCKER_HOST": docker_host} if docker_host else {})}
    args = ["build", "--matrix", str(matrix), "--log-dir", str(logs), "--test", "none", *NO_LAYER_SCAN, *options, "*"]
    return subprocess.run(
        [sys.executable, str(ROOT / "build.py"), *args], capture_output=True, text=True, cwd=ROOT, env=env, check=False
    )


def venv_steps(log: str) -> dict[str, bool]:
    """Every venv step of a build log (its BuildKit number) and whether BuildKit reported it CACHED."""
    return {n: bool(re.search(rf"^#{n} CACHED$", log, re.M)) for n in VENV_STEP.findall(log)}


@pytest.mark.parametrize("client", ["found", "classic"])
def test_a_fresh_engine_builds_from_the_cache_another_runner_pushed(
    client: str,
    registry: str,  # noqa: F811
    base_archive: Path,  # noqa: F811
    docker_client: Any,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    docker = ("--docker", request.getfixturevalue("classic_docker")) if client == "classic" else ()
    repository = f"{registry}/torchimages-e2e-{uuid.uuid4().hex[:8]}/pytorch"
    matrix = write_matrix(tmp_path, repository)
    try:
        first = build(matrix, tmp_path / "logs-1", *docker, "--cache-to", "type=inline", "--push")
        assert first.returncode == 0, first.stdout + first.stderr
    finally:
        remove_repository(docker_client, repository)

    with private_engine(base_archive) as fresh:
        assert fresh.docker("image", "inspect", f"{repository}:{TAG}").returncode != 0
        cache_from = ("--cache-from", f"{repository}:{{tag}}")
        second = build(matrix, tmp_path / "logs-2", *docker, *cache_from, docker_host=fresh.host)
        output = second.stdout + second.stderr
        assert second.returncode == 0, output
        assert "1 built, 0 skipped, 0 failed" in output, output  # built = verified, then tagged
        log = (tmp_path / "logs-2" / f"{TAG}.log").read_text()
        assert ("buildx" not in log.splitlines()[0]) == (client == "classic"), log.splitlines()[0]
        assert f"importing cache manifest from {repository}:{TAG}" in log, log
        steps = venv_steps(log)
        assert len(steps) >= 3 and all(steps.values()), (steps, log)
        assert fresh.docker("image", "inspect", f"{repository}:{TAG}").returncode == 0


@pytest.mark.parametrize("client", ["found", "classic"])
def test_a_cache_type_the_engine_cannot_do_is_refused_before_any_build(
    client: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    docker = ("--docker", request.getfixturevalue("classic_docker")) if client == "classic" else ()
    matrix = write_matrix(tmp_path, f"torchimages-e2e-{uuid.uuid4().hex[:8]}/pytorch")
    result = build(
        matrix,
        tmp_path / "logs",
        *docker,
        "--cache-to",
        "type=registry,ref=127.0.0.1:5000/cache:x",
        "--cache-from",
        "type=local,src=/tmp",
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(
        "error: --cache-from type=local,src=/tmp, --cache-to type=registry,ref=127.0.0.1:5000/cache:x: "
    ), result.stderr
    assert "built-in BuildKit" in result.stderr and "type=inline" in result.stderr, result.stderr
    assert "building" not in result.stdout and not (tmp_path / "logs").exists(), result.stdout
