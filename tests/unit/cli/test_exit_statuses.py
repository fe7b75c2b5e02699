"""Exit statuses a job's script reads: `build` where one image of two failed is a failure (1), however many
passed; `test` fails (1) on every pytest status but 0 (1 tests failed, 2 interrupted, 3 internal error, 4 usage
error, 5 no test ran; a signal), for a container and for this host; `--skip-check NAME` leaves out NAME alone,
every other check of the gate still runs. The engine is a fake, pytest's answers literals."""

from __future__ import annotations

import argparse
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest

from tests.fakes import CU118_270, FakeEngine
from torchimages import engine as engine_package
from torchimages.cli import common
from torchimages.engine import BuildRequest, ImageInfo
from torchimages.planning import plan
from torchimages.security import gate
from torchimages.security.model import CHECKS, SKIPPED
from torchimages.smoke import runner

Cli = Callable[..., tuple[int, str, str]]
MATRIX = "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8'}\n"  # two images: devel and runtime


class FailingDevel(FakeEngine):
    """Builds runtime as asked; devel's build fails (exit status 1, as a failed RUN step)."""

    def build(self, request: BuildRequest, log: IO[bytes], cancelled: threading.Event | None = None) -> int:
        if request.target == "devel":
            self.calls.append(("build", request))
            return 1
        return super().build(request, log, cancelled)


def test_a_build_where_one_of_two_images_failed_exits_1(
    cli: Cli, write_matrix: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FailingDevel(CU118_270)
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: fake)
    matrix = str(write_matrix(MATRIX))
    code, out, err = cli("build", "--matrix", matrix, "--test", "none", "--log-dir", str(tmp_path / "logs"), "*")
    assert "1 built" in out and "1 failed" in out, out + err
    assert code == 1, out + err


def engine_holding_the_images(write_matrix: Callable[[str], Path]) -> tuple[FakeEngine, str]:
    """A fake engine holding both images of MATRIX (built already), and the matrix's path."""
    path = write_matrix(MATRIX)
    (selected,) = plan.select(plan.load(path), [])
    fake = FakeEngine(CU118_270)
    for image in selected.images:
        fake.add(ImageInfo(image.platform_reference, "sha256:" + "1" * 64, dict(image.label_map()), {}, "torch", ()))
    return fake, str(path)


def pytest_answering(statuses: list[int]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """run_suites_in_container as pytest ending with each status in turn (one per image)."""
    answers = iter(statuses)

    def run(*args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(["pytest"], next(answers), "", "")

    return run


@pytest.mark.parametrize("status", [1, 2, 3, 4, 5, -9])
def test_test_fails_on_every_pytest_status_but_0(
    cli: Cli, write_matrix: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    fake, matrix = engine_holding_the_images(write_matrix)
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: fake)
    monkeypatch.setattr(runner, "run_suites_in_container", pytest_answering([0, status]))
    code, out, err = cli("test", "--matrix", matrix, "2.7.0")
    assert code == 1, out + err
    assert out.count("passed ") == 1 and out.count("FAILED ") == 1, out


def test_test_passes_when_pytest_exits_0_for_every_image(
    cli: Cli, write_matrix: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, matrix = engine_holding_the_images(write_matrix)
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: fake)
    monkeypatch.setattr(runner, "run_suites_in_container", pytest_answering([0, 0]))
    code, out, err = cli("test", "--matrix", matrix, "2.7.0")
    assert code == 0, out + err


@pytest.mark.parametrize(("status", "code"), [(0, 0), (1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (-15, 1)])
def test_test_of_this_host_fails_on_every_pytest_status_but_0(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, status: int, code: int
) -> None:
    monkeypatch.setattr(runner, "host_document", lambda python_exe, tag="local-host": {"tag": tag})
    monkeypatch.setattr(runner, "run_suites", lambda *a, **k: subprocess.CompletedProcess(["pytest"], status, "", ""))
    assert cli("test", "--host", "local")[0] == code


def image_engine() -> FakeEngine:
    fake = FakeEngine()
    fake.add(ImageInfo("img:1", "sha256:" + "1" * 64, {}, {}, "", ()))
    return fake


@pytest.mark.parametrize("skipped", CHECKS)
def test_skip_check_leaves_out_that_check_alone(tmp_path: Path, skipped: str) -> None:
    args = argparse.Namespace(allowlist=None, matrix=tmp_path / "matrix.yaml", require_scan=False, skip_check=[skipped])
    options = common.security_options(args)
    assert options.skip == {skipped}
    results = gate.run(image_engine(), "t", "img:1", options)
    assert [r.check for r in results] == list(CHECKS)
    assert [r.check for r in results if r.status == SKIPPED] == [skipped], results
    assert all(r.note != "skipped by --skip-check" for r in results if r.check != skipped)


def test_skip_check_all_leaves_out_every_check(tmp_path: Path) -> None:
    args = argparse.Namespace(allowlist=None, matrix=tmp_path / "matrix.yaml", require_scan=False, skip_check=["all"])
    options = common.security_options(args)
    assert options.skip == set(CHECKS)
    assert all(r.status == SKIPPED for r in gate.run(image_engine(), "t", "img:1", options))


def test_skip_check_names_reach_the_gate_from_the_command_line(
    cli: Cli, write_matrix: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`build --skip-check python --skip-check secrets`: those two, not os-updates."""
    seen: list[frozenset[str]] = []
    real = common.security_options

    def recording(args: argparse.Namespace, network: str | None = None) -> gate.GateOptions:
        options = real(args, network)
        seen.append(options.skip)
        raise SystemExit(0)  # what was asked is all this test reads: stop before anything is built

    monkeypatch.setattr(common, "security_options", recording)
    matrix = str(write_matrix(MATRIX))
    with pytest.raises(SystemExit):
        cli("build", "--matrix", matrix, "--skip-check", "python", "--skip-check", "secrets", "*")
    assert seen == [frozenset({"python", "secrets"})]
