"""Shared fixtures: write a matrix file and run the CLI in-process."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from torchimages.cli.entry import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _own_cache_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's tool cache (the release gate's layer scans) in a fresh folder of its own, never the user's
    ~/.cache: XDG_CACHE_HOME, which the `cli` fixture (clearing TORCHIMAGES_*) leaves alone."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))


@pytest.fixture(autouse=True)
def _no_source_questions(monkeypatch: pytest.MonkeyPatch) -> None:
    """`build` asks the indexes and registries a selection needs before it starts (cli.common.check_reachable);
    a unit test's fake engine has no indexes to ask, so the question is not put here: its rules are tested in
    tests/unit/kb/test_reach.py and, against the real engine and a loopback index, tests/e2e/test_sources.py."""
    from torchimages.cli import common

    monkeypatch.setattr(common, "check_reachable", lambda chosen, sources, engine, matrix=None: ())


@pytest.fixture(autouse=True)
def _no_engine_for_attestations(monkeypatch: pytest.MonkeyPatch) -> None:
    """`bake` asks this machine's engine whether it attaches attestations (cli.common.attestations: it would make
    the SBOM generator image there): a unit test asks none; tests/unit/engine/test_attestation.py has the rules."""
    from torchimages.cli import common
    from torchimages.engine import SbomAttestation

    monkeypatch.setattr(common, "attestations", lambda: SbomAttestation(False, "a unit test asks no engine"))


@pytest.fixture
def write_matrix(tmp_path: Path) -> Callable[[str], Path]:
    """Write a matrix document (dedented) to a temporary folder and return its path."""

    def write(text: str) -> Path:
        path = tmp_path / "matrix.yaml"
        path.write_text(textwrap.dedent(text))
        return path

    return write


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., tuple[int, str, str]]:
    """Run build.py's main with arguments; return (exit status, stdout, stderr). The machine's TORCHIMAGES_*
    settings (`make test` exports its wheel sources and CA bundle) do not reach it: a test sets what it needs."""
    for name in [n for n in os.environ if n.startswith("TORCHIMAGES_")]:
        monkeypatch.delenv(name)

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out, err = capsys.readouterr()
        return code, out, err

    return run
