"""The exit status of an interrupted `build` or `promote`: 128 + the signal (130 SIGINT, 143 SIGTERM), the
shell's convention, never 0 or 1; nothing tagged. The signal arrives while the fake engine builds (no Docker)."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest

from tests.fakes import CU118_270, FakeEngine
from torchimages import engine as engine_package
from torchimages.building import bake
from torchimages.engine import BuildRequest, ImageInfo
from torchimages.planning import plan

Cli = Callable[..., tuple[int, str, str]]
MATRIX = "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8'}\n"
HOLDS = CU118_270  # a true 2.7.0+cu118 image


class InterruptedEngine(FakeEngine):
    """Each build is interrupted: the signal reaches the command (as Ctrl-C or `kill` would, in its main
    thread), and the build returns once the command has cancelled it, as a stopped build client does."""

    def __init__(self, signum: int | None) -> None:
        super().__init__(HOLDS)
        self.signum = signum

    def build(self, request: BuildRequest, log: IO[bytes], cancelled: threading.Event | None = None) -> int:
        status = super().build(request, log, cancelled)
        if self.signum is None:
            return status
        signal.pthread_kill(threading.main_thread().ident or 0, self.signum)
        assert cancelled is not None and cancelled.wait(10), "the signal did not cancel the build"
        return -self.signum


def baked(fake: FakeEngine, path: Path, tmp_path: Path) -> str:
    """Both images of the matrix at `path` baked into the fake engine (true 2.7.0+cu118 images); the path of the
    metadata file that names them."""
    (selected,) = plan.select(plan.load(path), [])
    metadata = {}
    for image in selected.images:
        reference = bake.bake_reference(selected.combination, image)
        fake.images[reference] = {}
        fake.truth[reference] = HOLDS
        metadata[bake.target_name(image)] = {bake.IMAGE_NAME: reference}
    (tmp_path / "metadata.json").write_text(json.dumps(metadata))
    return str(tmp_path / "metadata.json")


def connecting(monkeypatch: pytest.MonkeyPatch, engine: FakeEngine) -> None:
    """Every command connects to `engine`."""
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: engine)


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (None, 0)])
def test_an_interrupted_build_exits_128_plus_the_signal(
    cli: Cli,
    write_matrix: Callable[[str], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    signum: int | None,
    status: int,
) -> None:
    fake = InterruptedEngine(signum)
    connecting(monkeypatch, fake)
    matrix = str(write_matrix(MATRIX))
    code, out, err = cli("build", "--matrix", matrix, "--test", "none", "--log-dir", str(tmp_path / "logs"), "*")
    assert code == status, out + err
    if signum is None:
        assert "2 built" in out and len(fake.tagged) == 4  # the tags and the 2.7 aliases
        return
    assert "2 interrupted" in out and len(fake.built) == 1
    assert fake.tagged == [] and fake.pushed == [] and fake.temporary() == []


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_promote_exits_128_plus_the_signal(
    cli: Cli,
    write_matrix: Callable[[str], Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    signum: int,
    status: int,
) -> None:
    """The signal comes while the first baked image is looked for: promote stops and tags nothing."""
    fake = FakeEngine(HOLDS)
    connecting(monkeypatch, fake)
    path = write_matrix(MATRIX)
    source = baked(fake, path, tmp_path)
    inspect, raised = fake.inspect, list[int]()

    def inspect_interrupted(reference: str) -> ImageInfo | None:
        if not raised:
            raised.append(signum)
            signal.raise_signal(signum)
        return inspect(reference)

    monkeypatch.setattr(fake, "inspect", inspect_interrupted)
    logs = str(tmp_path / "logs")
    code, out, err = cli("promote", "--matrix", str(path), "--test", "none", "--log-dir", logs, "--from", source)
    assert code == status, out + err
    assert "2 interrupted" in out
    assert fake.tagged == []
