"""The one reader of every file the tool reads, which may be hostile: a regular file only (no FIFO, device or
directory), no larger than a limit the user can raise, decoded as UTF-8, and parsed as JSON or YAML no deeper
than MAX_DEPTH; each refusal a located `Problem` (the file, and its line where one is known).
And the one writer: a file written whole or not at all (`write_atomically`), whatever signal comes.

Each reader names its file (`what`: 'the matrix file') and the setting that holds its limit.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

import yaml

from torchimages import settings as environment
from torchimages import stopping
from torchimages.problems import InputError, Problem

FILE_BYTES_VARIABLE = "TORCHIMAGES_MAX_FILE_BYTES"  # every file but the matrix, which has its own
MAX_DEPTH = 100  # lists and mappings inside each other; no file the tool reads needs a tenth of it
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_BOMS = {
    b"\xff\xfe\x00\x00": "UTF-32 (little-endian)",
    b"\x00\x00\xfe\xff": "UTF-32 (big-endian)",
    b"\xff\xfe": "UTF-16 (little-endian)",
    b"\xfe\xff": "UTF-16 (big-endian)",
}


class Missing(InputError):
    """The file is not there (a reader of an optional file catches this one; to others it is any refusal)."""


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
        line, column = position(data, exc.start)
        byte = data[exc.start : exc.start + 1].hex()
        problem = Problem(
            f"{what} is not UTF-8: byte 0x{byte} at column {column} ({exc.reason}); save it as UTF-8",
            file=path,
            line=line,
        )
        raise InputError([problem]) from None


def position(text: str | bytes, index: int) -> tuple[int, int]:
    """The 1-based line and column of a character (or byte) index."""
    newline: Any = "\n" if isinstance(text, str) else b"\n"
    return text.count(newline, 0, index) + 1, index - (text.rfind(newline, 0, index) + 1) + 1


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_bytes(path: Path, what: str, limit_variable: str = FILE_BYTES_VARIABLE) -> bytes:
    """The bytes of a regular file no larger than the limit the setting `limit_variable` holds; anything else is
    refused before it is read (`Missing` when there is no such file). `what` names the file in a refusal."""
    limit = environment.count(limit_variable)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        error = Missing if exc.errno == errno.ENOENT else InputError
        raise error([Problem(f"cannot read {what}: {exc.strerror}", file=str(path))]) from None
    except ValueError:  # a NUL in the path
        raise InputError([Problem(f"cannot read {what}: the path holds a NUL character", file=str(path))]) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = file_kind(mode)
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


def file_kind(mode: int) -> str:
    """What a file is, by its `st_mode`, in words ('a directory', 'a FIFO (named pipe)', 'a regular file')."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((name for test, name in _KINDS if test(mode)), "something else")


def writable_target(path: Path) -> Path:
    """Where writing `path` lands: a link followed to its target. OSError when something that is no regular
    file is there (a device such as /dev/null, a FIFO, a folder): a written file never replaces one."""
    target = Path(os.path.realpath(path))
    with contextlib.suppress(FileNotFoundError):
        found = os.stat(target).st_mode
        if not stat.S_ISREG(found):
            raise OSError(errno.EINVAL, f"it is {file_kind(found)}, not a regular file (it is not replaced)")
    return target


def put_in_place(written: Path, path: Path) -> None:
    """Move a whole file written beside `path` (same folder) into its place (writable_target's rule)."""
    os.replace(written, writable_target(path))


def write_atomically(path: Path, content: str | bytes, mode: int = 0o644) -> None:
    """Write `path` whole or not at all: a temporary file beside it (same folder, so same file system) is
    written, given `mode` and put in its place (put_in_place: a link followed, never over a device or FIFO);
    a signal waits until that is done, and any failure removes the temporary file. OSError when it cannot."""
    target = writable_target(path)
    data = content.encode("utf-8") if isinstance(content, str) else content
    with stopping.held():
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(temporary, mode)
            put_in_place(Path(temporary), target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise


def read_text(path: Path, what: str, limit_variable: str = FILE_BYTES_VARIABLE) -> str:
    """The text of a regular UTF-8 file within its limit (read_bytes, then decode)."""
    return decode(read_bytes(path, what, limit_variable), str(path), what)


# --- JSON --------------------------------------------------------------------------------------------------

_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')  # a string (skipped whole) or a bracket


def _too_deep(text: str, path: str, what: str, index: int) -> InputError:
    line, column = position(text, index)
    message = f"{what} nests lists and mappings deeper than {MAX_DEPTH} levels at column {column}"
    return InputError([Problem(message, file=path, line=line)])


def parse_json(text: str, path: str, what: str) -> Any:
    """A JSON document, nested no deeper than MAX_DEPTH (checked before it is parsed: deeper, Python's parser
    would exhaust its stack); InputError, located, for anything that is not JSON."""
    depth = 0
    for token in _JSON_TOKENS.finditer(text):
        bracket = token.group()
        if bracket in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise _too_deep(text, path, what, token.start())
        elif bracket in "]}":
            depth -= 1
    try:
        return json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as exc:
        problem = Problem(f"{what} is not JSON: {exc.msg} at column {exc.colno}", file=path, line=exc.lineno)
        raise InputError([problem]) from None
    except (ValueError, RecursionError) as exc:  # an integer of more digits than int() takes
        raise InputError([Problem(f"{what} is not JSON this tool reads: {exc}", file=path)]) from None


def kind(value: object) -> str:
    """What a JSON value is, in JSON's words (a refusal says `a list`, not `list`)."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "true or false", int: "a number"}
    return "null" if value is None else names.get(type(value), "a number")


def read_json_object(path: Path, what: str, limit_variable: str = FILE_BYTES_VARIABLE) -> dict[str, Any]:
    """A file that must hold one JSON object (read_text, parse_json, then its shape)."""
    data = parse_json(read_text(path, what, limit_variable), str(path), what)
    if not isinstance(data, dict):
        raise InputError([Problem(f"{what} must be a JSON object, not {kind(data)}", file=str(path))])
    return data


# --- YAML --------------------------------------------------------------------------------------------------

_OPEN = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSE = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def compose_yaml(text: str, path: str, what: str) -> yaml.Node | None:
    """The node tree of a YAML document (None when empty), nested no deeper than MAX_DEPTH (counted over the
    parser's events first: a deeper tree would exhaust the composer's stack); InputError, located, for
    malformed YAML and for control characters. Aliases are shared nodes: a walker must bound its walk."""
    try:
        depth = 0
        for event in yaml.parse(text, Loader=LOADER):
            if isinstance(event, _OPEN):
                depth += 1
                if depth > MAX_DEPTH:
                    mark = event.start_mark
                    problem = Problem(
                        f"{what} nests lists and mappings deeper than {MAX_DEPTH} levels at column {mark.column + 1}",
                        file=path,
                        line=mark.line + 1,
                    )
                    raise InputError([problem])
            elif isinstance(event, _CLOSE):
                depth -= 1
        node: yaml.Node | None = yaml.compose(text, Loader=LOADER)
        return node
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at column {mark.column + 1}" if mark else ""
        message = f"malformed YAML{where}: {exc.problem}"
        if "maximum nesting depth" in str(exc.problem):  # libyaml's own limit (1000), met when it reads ahead
            message = f"{what} nests lists and mappings deeper than {MAX_DEPTH} levels{where}"
        raise InputError([Problem(message, file=path, line=mark.line + 1 if mark else 0)]) from None
    except yaml.reader.ReaderError as exc:
        line, column = position(text, exc.position)
        problem = Problem(
            f"character {_codepoint(exc.character)} at column {column} is not allowed in YAML "
            "(control characters other than tab and newline are refused)",
            file=path,
            line=line,
        )
        raise InputError([problem]) from None
    except yaml.YAMLError as exc:
        raise InputError([Problem(f"malformed YAML: {exc}", file=path)]) from None


def _codepoint(character: object) -> str:
    if isinstance(character, int):
        return f"U+{character:04X}"
    if isinstance(character, str) and len(character) == 1:
        return f"U+{ord(character):04X}"
    return repr(character)
