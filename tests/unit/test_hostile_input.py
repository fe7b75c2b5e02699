"""Bad input never hurts: every hostile input ends in a located message, exit status 2, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.conftest import ROOT

Cli = Callable[..., tuple[int, str, str]]
GOOD = "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8'}\n"


def write_bytes(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_bytes(data)
    return path


def refused(cli: Cli, *args: str) -> str:
    """Run a command that must refuse its input; its stderr (no traceback, nothing on stdout, nothing written)."""
    code, out, err = cli(*args)
    assert code == 2, (out, err)
    assert out == "" and "Traceback" not in err
    return err


# 1. Encoding and control characters


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"matrix:\n  torch: [2.7.0\xe9]\n", ":2: error: the matrix file is not UTF-8: byte 0xe9 at column 16"),
        (b"\xff\xfem\x00a\x00t\x00", ": error: the matrix file is UTF-16 (little-endian)"),
        (b"\xfe\xff\x00m\x00a", ": error: the matrix file is UTF-16 (big-endian)"),
        (bytes(range(256)) * 4, ":2: error: the matrix file is not UTF-8: byte 0x80"),
        (b"matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11\x01.8'}\n", ":3: error: character U+0001 at column"),
        (b"matrix:\n  torch: [2.7.0]\x00\n", ":2: error: character U+0000"),
        (b"matrix:\n  torch: [\x1b[31m2.7.0]\n", ":2: error: character U+001B"),
    ],
    ids=["latin1", "utf16le", "utf16be", "binary", "soh", "nul", "escape"],
)
def test_undecodable_or_control_characters_are_refused(cli: Cli, tmp_path: Path, data: bytes, expected: str) -> None:
    path = write_bytes(tmp_path, data)
    for command in ("validate", "list", "render"):
        err = refused(cli, command, "--matrix", str(path))
        assert f"{path}{expected}" in err
    assert not (tmp_path / "images").exists()


# 2. Not a regular file; too large


def test_a_directory_is_refused(cli: Cli, tmp_path: Path) -> None:
    err = refused(cli, "validate", "--matrix", str(tmp_path))
    assert f"{tmp_path}: error: the matrix file must be a regular file, not a directory" in err


def test_a_device_is_refused_before_reading(cli: Cli) -> None:
    err = refused(cli, "validate", "--matrix", "/dev/zero")  # read, it would never end
    assert "/dev/zero: error: the matrix file must be a regular file, not a character device" in err


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "matrix.yaml"
    os.mkfifo(fifo)
    result = subprocess.run(
        [sys.executable, str(ROOT / "build.py"), "validate", "--matrix", str(fifo)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "must be a regular file, not a FIFO" in result.stderr


def test_a_file_over_the_size_limit_is_refused(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_bytes(tmp_path, GOOD.encode() + b"#" * (1024 * 1024))
    err = refused(cli, "render", "--matrix", str(path))
    assert "larger than 1048576 bytes; set TORCHIMAGES_MAX_MATRIX_BYTES to raise the limit" in err
    assert not (tmp_path / "images").exists()
    monkeypatch.setenv("TORCHIMAGES_MAX_MATRIX_BYTES", str(2 * 1024 * 1024))
    assert cli("validate", "--matrix", str(path))[0] == 0
    monkeypatch.setenv("TORCHIMAGES_MAX_MATRIX_BYTES", "10")
    assert "larger than 10 bytes" in refused(cli, "validate", "--matrix", str(path))
    monkeypatch.setenv("TORCHIMAGES_MAX_MATRIX_BYTES", "lots")
    assert "TORCHIMAGES_MAX_MATRIX_BYTES='lots' must be a positive whole number" in refused(
        cli, "validate", "--matrix", str(path)
    )
