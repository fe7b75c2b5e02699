"""`build --gzip-level N`: the gzip level of the layers each build exports, on the containerd image store through
buildx's docker driver. A bad value is refused at parse time, an engine that cannot do it at preflight (exit 2,
nothing built or written); the level reaches every build's command line as the image exporter's option, and a
client that cannot take it is refused rather than ignored."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeEngine
from tests.unit.building.test_provenance import SERVED
from tests.unit.engine.test_containerd_store import CLASSIC, CONTAINERD, engine_of
from torchimages import engine as engine_package
from torchimages import values
from torchimages.building import requests
from torchimages.cli import common
from torchimages.engine import BuildClient, BuildRequest, EngineError, build_command
from torchimages.planning import plan
from torchimages.problems import UsageError

Cli = Callable[..., tuple[int, str, str]]
MATRIX = "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}\n"
BUILDX = BuildClient(("docker", "buildx", "build"), ())
CLASSIC_CLIENT = BuildClient(("docker", "build"), (("DOCKER_BUILDKIT", "1"),))


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeEngine:
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    monkeypatch.chdir(tmp_path)
    engine = FakeEngine()
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: engine)
    return engine


@pytest.mark.parametrize("good", list("123456789"))
def test_a_level_is_one_digit_from_1_to_9(good: str) -> None:
    assert values.gzip_level(good) == good


@pytest.mark.parametrize(
    "bad", ["0", "10", "-1", "", " 1", "1 ", "\u0663", "1\n", "x", "\uff19"]
)  # Arabic-Indic, full-width
def test_anything_else_is_refused(bad: str) -> None:
    with pytest.raises(values.BadValue, match=r"a gzip level is one digit, 1 \(fastest\) to 9 \(smallest\)"):
        values.gzip_level(bad)


def test_a_bad_level_is_refused_before_anything(cli: Cli, fake: FakeEngine, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli("build", "--gzip-level", "0", "--log-dir", "logs", "*")
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "--gzip-level" in err and "1 (fastest) to 9 (smallest)" in err, err
    assert fake.calls == [] and not Path("logs").exists()


def test_an_engine_that_cannot_set_the_level_is_refused_before_any_build(cli: Cli, fake: FakeEngine) -> None:
    fake.gzip_problem = "this engine keeps images in its classic image store"
    code, _, err = cli("build", "--gzip-level", "1", "--log-dir", "logs", "*")
    assert code == 2 and "--gzip-level 1: this engine keeps images in its classic image store" in err, err
    assert fake.built == [] and not Path("logs").exists()


def test_the_level_is_asked_of_the_engine_only_when_given() -> None:
    engine = FakeEngine()
    engine.gzip_problem = "this engine keeps images in its classic image store"
    common.check_gzip_level(None, engine)  # type: ignore[arg-type]
    assert engine.calls == [], "without the option the engine is not asked, and nothing is refused"
    with pytest.raises(UsageError, match="--gzip-level 9: this engine keeps images in its classic image store"):
        common.check_gzip_level(9, engine)  # type: ignore[arg-type]


def test_the_level_reaches_the_build_request(write_matrix: Callable[[str], Path]) -> None:
    (chosen,) = plan.select(plan.load(write_matrix(MATRIX)), [])
    image = chosen.combination.image("runtime")
    for level in (1, 9, None):
        options = requests.BuildOptions(Path("images"), Path("logs"), gzip_level=level)
        request = requests.build_request(
            options, chosen.combination, image, "tmp/x:1", SERVED, Path("pip.conf"), Path("uv.toml")
        )
        assert request.gzip_level == level


def test_the_level_is_the_image_exporters_option_on_buildx_and_refused_by_the_classic_client(tmp_path: Path) -> None:
    request = BuildRequest(tmp_path, tmp_path / "Dockerfile", "runtime", "tmp/x:1", gzip_level=1)
    cmd = build_command(BUILDX, request)
    at = cmd.index("--output")
    assert cmd[at + 1] == "type=image,compression=gzip,compression-level=1"
    assert cmd[cmd.index("--tag") + 1] == "tmp/x:1", "the exporter names the image by its tag"
    with pytest.raises(EngineError, match="a gzip level of 1 cannot be given to docker build"):
        build_command(CLASSIC_CLIENT, request)
    assert "--output" not in build_command(BUILDX, BuildRequest(tmp_path, tmp_path / "D", "runtime", "tmp/x:1"))


def driver_answer(driver: str) -> Any:
    def answer(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[bytes]:
        return subprocess.CompletedProcess(cmd, 0, f"Name: default\nDriver: {driver}\n".encode(), b"")

    return answer


@pytest.mark.parametrize(
    ("info", "client", "driver", "problem"),
    [
        (CONTAINERD, BUILDX, "docker", None),
        (CLASSIC, BUILDX, "docker", "this engine keeps images in its classic image store, which stores layers"),
        (CONTAINERD, CLASSIC_CLIENT, "docker", "the build client is `docker build` (DOCKER_BUILDKIT=1)"),
        (CONTAINERD, BUILDX, "docker-container", "buildx's builder has the docker-container driver"),
        (CONTAINERD, BUILDX, None, "`docker buildx inspect` names no driver for its builder"),
    ],
)
def test_the_engine_says_why_it_cannot_set_the_level(
    monkeypatch: pytest.MonkeyPatch,
    info: dict[str, Any],
    client: BuildClient,
    driver: str | None,
    problem: str | None,
) -> None:
    found, _ = engine_of(info)
    found.__dict__["_client"] = client
    monkeypatch.setattr(found, "_driver", lambda: driver)
    said = found.gzip_level_problem()
    assert said is None if problem is None else (said is not None and said.startswith(problem)), said
