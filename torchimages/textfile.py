"""Reading a file that may be hostile: a regular file only (no FIFO, device or directory), no larger than a
limit the user can raise, decoded as UTF-8; each refusal a located `Problem`. And writing a file whole or
not at all (`write_atomically`), whatever signal comes.

Shared by the readers of user files; each names its file (`what`) and its limit's setting.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from torchimages import settings as environment
from torchimages import stopping
from torchimages.problems import InputError, Problem

_BOMS = {
    b"\xff\xfe\x00\x00": "UTF-32 (little-endian)",
    b"\x00\x00\xfe\xff": "UTF-32 (big-endian)",
    b"\xff\xfe": "UTF-16 (little-endian)",
    b"\xfe\xff": "UTF-16 (big-endian)",
}


def decode(data: bytes, path: str, what: str) -> str:
    """The text of a file, which must be UTF-8 (a UTF-8 byte order mark is allowed); `what` names the file in
    a refusal ('the matrix file')."""
    for bom, name in _BOMS.items():
        if data.startswith(bom):
            raise InputError(
                [Problem(f"{what} is {name} (it starts with a byte order mark); save it as UTF-8", file=path)]
            )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        byte = data[exc.start : exc.start + 1].hex()
        problem = Problem(
            f"{what} is not UTF-8: byte 0x{byte} at column {column} ({exc.reason}); save it as UTF-8",
            file=path,
            line=line,
        )
        raise InputError([problem]) from None


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_bytes(path: Path, what: str, limit_variable: str) -> bytes:
    """The bytes of a regular file no larger than the limit the setting `limit_variable` holds; anything else is
    refused before it is read. `what` names the file in a refusal ('the matrix file')."""
    limit = environment.count(limit_variable)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError([Problem(f"cannot read {what}: {exc.strerror}", file=str(path))]) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = next((name for test, name in _KINDS if test(mode)), "something else")
        raise InputError([Problem(f"{what} must be a regular file, not {kind}", file=str(path))])
    with os.fdopen(fd, "rb") as file:
        try:
            data = file.read(limit + 1)
        except OSError as exc:
            raise InputError([Problem(f"cannot read {what}: {exc.strerror}", file=str(path))]) from None
    if len(data) > limit:
        raise InputError(
            [
                Problem(
                    f"{what} is larger than {limit} bytes; set {limit_variable} to raise the limit",
                    file=str(path),
                )
            ]
        )
    return data


def write_atomically(path: Path, content: str | bytes, mode: int = 0o644) -> None:
    """Write `path` whole or not at all: a temporary file beside it (same folder, so same file system) is
    written, given `mode` and put in its place with os.replace; a signal waits until that is done, and any
    failure removes the temporary file. OSError when the folder cannot be written."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    with stopping.held():
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(temporary, mode)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
