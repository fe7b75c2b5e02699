"""Bad input never hurts: every hostile input ends in a located message, exit status 2, nothing written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

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
