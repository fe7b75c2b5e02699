"""A tar stream read the way the engine reads a layer: Go's archive/tar reader (moby and containerd apply layers
through it), one entry at a time, from a stream that is never seeked, holding at most one bounded header.

What Go does, and so this reader (Go's src/archive/tar: reader.go, strconv.go, format.go):
    blocks         512 bytes; the end is two zero blocks, or the stream's end before a header (or after one
                   zero block); a zero block followed by anything else is an error
    a header       valid when its checksum field (octal) is the unsigned or the signed sum of the block (the
                   field counted as spaces); its magic says V7, USTAR/PAX, STAR or GNU, anything else is V7
    numbers        octal, leading and trailing spaces and NULs ignored, up to the first NUL; or base-256 (the
                   first byte's top bit); every numeric field of the format must parse, or the header is an error
    names          up to the first NUL; USTAR and STAR join their prefix (`prefix/name`); GNU long names and
                   links ('L', 'K', at most 1 MiB) replace them, and so do PAX `path` and `linkpath`
    PAX            'x' records (at most 1 MiB, `%d key=value\\n`, parsed in one linear pass) apply to the next
                   entry only (a second 'x' replaces the first); `size`, `uid`, `gid`, `atime`, `mtime`, `ctime`
                   must parse; 'g' is returned as an entry of its own (its records apply to nothing)
    types          '\\0' is a regular file, or a folder when its name ends in '/'; links, devices, folders and
                   FIFOs have no content whatever their size says
    sparse files   GNU's ('S', and the PAX GNU.sparse records Go reads as sparse): an error here (TarError), as
                   this check does not lay out their holes
Beyond Go (an error here too): a stream that ends inside an entry, non-zero bytes after the end, a name or
link of more than NAME_MAX bytes (the engine cannot create it), a '\\0' entry read as a folder with content
(Go versions disagree on where the next header is), and a header Go reads but GNU tar would not agree on is
not looked for: Go is the engine's reader, so Go is what is followed.

Errors are TarError, saying what and where (the entry's number and its header's offset). Memory is bounded
whatever the stream holds: one block, one special header (SPECIAL_MAX), names of at most NAME_MAX, and only
the PAX records the engine reads are kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

BLOCK = 512
ZERO = bytes(BLOCK)
SPECIAL_MAX = 1 << 20  # bytes of a PAX header or a GNU long name or link: Go refuses more (maxSpecialFileSize)
NAME_MAX = 4096  # bytes of a name or link target (Linux's PATH_MAX): the engine cannot create a longer one
SKIP = 1 << 20  # bytes read at once when skipping content
AHEAD = 64 << 10  # bytes read ahead of the reader (headers and small files come from one read of the source)

HEADER_ONLY = frozenset("123456")  # hard link, symlink, char and block device, folder, FIFO: no content
DECIMAL = re.compile(rb"[+-]?[0-9]+")  # Go's strconv.ParseInt(s, 10, 64): a sign, ASCII digits, nothing else
OCTAL = re.compile(rb"[0-7]+")  # Go's strconv.ParseUint(s, 8, 64)
HIGH = bytes(range(0x80, 0x100))
V7, USTAR, STAR, GNU = "V7", "USTAR", "STAR", "GNU"
PAX_NUMBERS = ("size", "uid", "gid")
PAX_TIMES = ("atime", "mtime", "ctime")
SPARSE = ("GNU.sparse.major", "GNU.sparse.minor", "GNU.sparse.map")


class TarError(Exception):
    """The stream is no tar the engine would read the same way (or at all); the message says what and where."""


class Source(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


@dataclass(frozen=True)
class Entry:
    """One entry as Go returns it: `name` and `link` decoded (`decoded`: printable), `type` one
    character ('0' regular, '1' hard link, '2' symlink, '3'/'4' devices, '5' folder, '6' FIFO, 'g' a global
    PAX header, others as found), `size` the bytes of its content (0 when it has none), `number` its place
    (from 1) and `offset` its header's."""

    name: str
    link: str
    type: str
    size: int
    number: int
    offset: int

    def where(self) -> str:
        return f"entry {self.number} (at byte {self.offset})"


def read_full(source: Source, size: int) -> bytes:
    """Up to `size` bytes, fewer only at the stream's end (a pipe or a decompressor may answer short)."""
    data = source.read(size)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = source.read(size - got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


# --- fields -------------------------------------------------------------------------------------------------


def cstring(field: bytes) -> bytes:
    """A field up to its first NUL (Go's parseString)."""
    end = field.find(b"\0")
    return field if end < 0 else field[:end]


def octal(field: bytes) -> int | None:
    """Go's parseOctal: spaces and NULs trimmed at both ends, then up to the first NUL, base 8 (as int64:
    2**63 and above wrap to negative); None when that does not parse."""
    trimmed = field.strip(b" \0")
    if not trimmed:
        return 0
    digits = cstring(trimmed)
    if OCTAL.fullmatch(digits) is None:
        return None
    value = int(digits, 8)
    if value >= 1 << 64:
        return None
    return value - (1 << 64) if value >= 1 << 63 else value


def numeric(field: bytes) -> int | None:
    """Go's parseNumeric: base-256 when the first byte's top bit is set (two's complement, big-endian, the
    top bit not part of it), else octal; None on overflow or when it does not parse."""
    if not field or not field[0] & 0x80:
        return octal(field)
    negative = bool(field[0] & 0x40)
    value = 0
    for at, byte in enumerate(field):
        byte = byte ^ 0xFF if negative else byte
        if at == 0:
            byte &= 0x7F
        if value >> 56:
            return None
        value = value << 8 | byte
    if value >> 63:
        return None
    return ~value if negative else value


def decimal(text: bytes) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64), or None (leading zeros allowed, however many)."""
    if DECIMAL.fullmatch(text) is None:
        return None
    digits = text.lstrip(b"+-").lstrip(b"0") or b"0"
    if len(digits) > 19:
        return None
    value = -int(digits) if text.startswith(b"-") else int(digits)
    return value if -(1 << 63) <= value < 1 << 63 else None


def pax_time(text: bytes) -> bool:
    """Whether Go's parsePAXTime reads it: decimal seconds, optionally `.` and digits."""
    seconds, dot, fraction = text.partition(b".")
    if decimal(seconds) is None:
        return False
    return not dot or fraction.strip(b"0123456789") == b""


def checksums(block: bytes) -> tuple[int, int]:
    """The block's unsigned and signed byte sums, its checksum field counted as eight spaces."""
    rest = block[:148] + block[156:]
    unsigned = sum(rest) + 8 * 0x20
    return unsigned, unsigned - 256 * (len(rest) - len(rest.translate(None, HIGH)))


def header_format(block: bytes) -> str | None:
    """The format Go reads a block as (V7, USTAR, STAR, GNU), or None when it is no header (its checksum)."""
    value = octal(block[148:156])
    if value is None or value not in checksums(block):
        return None
    magic, version, trailer = block[257:263], block[263:265], block[508:512]
    if magic == b"ustar\0":
        return STAR if trailer == b"tar\0" else USTAR
    if magic == b"ustar " and version == b" \0":
        return GNU
    return V7


def is_header(block: bytes) -> bool:
    """Whether a first block starts a tar: a header Go reads, or a zero block (an empty archive)."""
    return len(block) == BLOCK and (block == ZERO or header_format(block) is not None)


def decoded(name: bytes) -> str:
    """A name as text: UTF-8, other bytes as `\\xNN`; a name with control characters (a newline, a terminal
    escape) escaped whole, so that no report or log prints them."""
    text = name.decode("utf-8", "backslashreplace")
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


@dataclass(frozen=True)
class Header:
    """One raw header block read: its type, name, link and size (before PAX and GNU long names apply)."""

    type: str
    name: bytes
    link: bytes
    size: int


def parse_header(block: bytes) -> Header:
    """A header block as Go's readHeader reads it; TarError saying why not."""
    form = header_format(block)
    if form is None:
        raise TarError("a block that is no tar header (its checksum does not match)")
    fields = [block[100:108], block[108:116], block[116:124], block[124:136], block[136:148]]  # mode uid gid size mtime
    name = cstring(block[0:100])
    if form != V7:
        fields += [block[329:337], block[337:345]]  # devmajor, devminor
        prefix = b""
        if form == USTAR:
            prefix = cstring(block[345:500])
        elif form == STAR:
            prefix = cstring(block[345:476])
            fields += [block[476:488], block[488:500]]  # atime, ctime
        else:  # GNU: atime and ctime read leniently; when they do not parse, Go falls back to a prefix
            stamps = [block[345:357], block[357:369]]
            if any(stamp[0] != 0 and numeric(stamp) is None for stamp in stamps):
                candidate = cstring(block[345:500])
                prefix = candidate if candidate.isascii() else b""
        if prefix:
            name = prefix + b"/" + name
    values = [numeric(f) for f in fields]
    if any(v is None for v in values):
        raise TarError("a header whose numeric fields do not parse")
    return Header(chr(block[156]), name, cstring(block[157:257]), values[3] or 0)


# --- PAX ------------------------------------------------------------------------------------------------------


def pax_records(data: bytes) -> dict[str, bytes]:
    """The records of a PAX header that the engine reads (path, linkpath, size, ids, times, GNU sparse), each
    checked as Go checks it; every other record checked for its form and dropped. One linear pass; TarError
    on the first bad record."""
    kept: dict[str, bytes] = {}
    sparse_map = 0  # GNU.sparse.offset and .numbytes records seen (GNU's PAX sparse format 0.0)
    at, end = 0, len(data)
    while at < end:
        space = data.find(b" ", at)
        length = decimal(data[at:space]) if space > at else None
        if length is None or length < 5 or length > end - at or at + length <= space + 1:
            raise TarError(f"a PAX header with a malformed record at byte {at} of its records")
        record_end = at + length
        if data[record_end - 1] != 0x0A:
            raise TarError(f"a PAX header whose record at byte {at} does not end in a newline")
        record = data[space + 1 : record_end - 1]
        key, equals, value = record.partition(b"=")
        if not equals or not key:
            raise TarError(f"a PAX header with a record without a key at byte {at}")
        if (key in (b"path", b"linkpath", b"uname", b"gname") and b"\0" in value) or b"\0" in key:
            raise TarError(f"a PAX header with a NUL in its record at byte {at}")
        at = record_end
        name = key.decode("ascii", "replace")
        if name in ("GNU.sparse.offset", "GNU.sparse.numbytes"):
            expected = "GNU.sparse.offset" if sparse_map % 2 == 0 else "GNU.sparse.numbytes"
            if name != expected or b"," in value:
                raise TarError("a PAX header with a GNU sparse map out of order")
            sparse_map += 1  # only that there is one matters: a sparse file is not read
        elif name in ("path", "linkpath", *PAX_NUMBERS, *PAX_TIMES, *SPARSE):
            kept[name] = value
    if sparse_map:
        kept["GNU.sparse.map"] = b"x"
    return kept


def sparse(records: dict[str, bytes]) -> bool:
    """Whether Go reads the entry as a GNU sparse file in PAX form (readGNUSparsePAXHeaders)."""
    major, minor = records.get("GNU.sparse.major", b""), records.get("GNU.sparse.minor", b"")
    if (major, minor) in ((b"0", b"0"), (b"0", b"1"), (b"1", b"0")):
        return True
    if major or minor:
        return False  # a version Go does not know: a regular file
    return bool(records.get("GNU.sparse.map"))


def merged(header: Header, records: dict[str, bytes]) -> Header:
    """A header with its PAX records applied (Go's mergePAX: an empty value keeps the header's own)."""
    name, link, size = header.name, header.link, header.size
    for key in PAX_NUMBERS:
        value = records.get(key, b"")
        if value and decimal(value) is None:
            raise TarError(f"a PAX {key} record that is no number")
    for key in PAX_TIMES:
        value = records.get(key, b"")
        if value and not pax_time(value):
            raise TarError(f"a PAX {key} record that is no time")
    if records.get("path"):
        name = records["path"]
    if records.get("linkpath"):
        link = records["linkpath"]
    if records.get("size"):
        size = decimal(records["size"]) or 0
    return Header(header.type, name, link, size)


# --- the stream -----------------------------------------------------------------------------------------------


class TarStream:
    """The entries of a tar stream in order (iterate), and the content of the current one (`read`); what was
    not read of an entry is skipped when the next is asked for. Iteration ends at the archive's end, after
    the rest of the stream was read and found to be zeros; TarError when the stream is not what Go reads."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.ahead = b""  # bytes read from the source; those from `at` on not consumed yet
        self.at = 0
        self.offset = 0  # bytes of the stream consumed
        self.remaining = 0  # content bytes of the current entry not read yet
        self.padding = 0
        self.count = 0  # headers read
        self.header_at = 0  # where the header being read starts
        self.current: Entry | None = None

    # reading the source

    def _take(self, size: int) -> bytes:
        """The next `size` bytes of the stream (fewer only at its end), through the read-ahead."""
        start = self.at
        if size <= len(self.ahead) - start:
            self.at += size
            data = self.ahead[start : self.at]
        elif size - (len(self.ahead) - start) >= AHEAD:
            data = self.ahead[start:] + read_full(self.source, size - (len(self.ahead) - start))
            self.ahead, self.at = b"", 0
        else:
            self.ahead = self.ahead[start:] + read_full(self.source, AHEAD)
            data, self.at = self.ahead[:size], min(size, len(self.ahead))
        self.offset += len(data)
        return data

    def _block(self) -> bytes | None:
        """The next block; None at the stream's end before it; TarError when it ends inside one."""
        data = self._take(BLOCK)
        if not data:
            return None
        if len(data) < BLOCK:
            raise TarError(f"the stream ends inside a header at byte {self.offset - len(data)}")
        return data

    def read(self, size: int = -1, /) -> bytes:
        """Up to `size` bytes of the current entry's content (all the rest when negative); b"" at its end.
        TarError when the stream ends first."""
        want = self.remaining if size < 0 else min(size, self.remaining)
        if want <= 0:
            return b""
        data = self._take(want)
        self.remaining -= len(data)
        if len(data) < want:
            where = self.current.where() if self.current else "a special header"
            raise TarError(f"the stream ends inside the content of {where}")
        return data

    def _skip(self) -> bool:
        """Skip what is left of the current entry and its padding; False when the stream ended in the
        padding (Go: the end of the archive)."""
        while self.remaining:
            self.read(SKIP)
        padding, self.padding = self.padding, 0
        return len(self._take(padding)) == padding

    def _special(self, size: int, what: str) -> bytes:
        """The content of a PAX header or GNU long name (at most SPECIAL_MAX bytes, as Go)."""
        if size > SPECIAL_MAX:
            raise TarError(f"{what} of {size} bytes (the engine reads at most {SPECIAL_MAX})")
        data = self.read(size)
        if len(data) < size:
            raise TarError(f"the stream ends inside {what}")
        return data

    def _start(self, size: int, header_only: bool) -> None:
        """Set up the content of an entry just read (Go's handleRegularFile)."""
        content = 0 if header_only else size
        if content < 0:
            raise TarError("a header with a negative size")
        self.remaining, self.padding = content, -content % BLOCK

    # the entries

    def __iter__(self) -> Iterator[Entry]:
        while (entry := self._located()) is not None:
            self.current = entry
            yield entry
        self.current = None
        self._rest()

    def _located(self) -> Entry | None:
        """The next entry (`_next`); its TarError says where (the header's number and offset)."""
        self.header_at = self.offset
        try:
            return self._next()
        except TarError as exc:
            raise TarError(f"entry {self.count} (at byte {self.header_at}): {exc}") from None

    def _next(self) -> Entry | None:
        """The next entry as Go's Reader.Next returns it, None at the end."""
        records: dict[str, bytes] = {}
        long_name = long_link = b""
        while True:
            if not self._skip():  # what is left of the entry before, and its padding
                return None
            self.header_at = self.offset
            block = self._block()
            if block is None:
                return None
            self.count += 1
            if block == ZERO:
                second = self._block()
                if second is None or second == ZERO:
                    return None
                raise TarError("a zero block, then a header")
            header = parse_header(block)
            self._start(header.size, header.type in HEADER_ONLY)
            if header.type in ("x", "g"):
                found = pax_records(self._special(header.size, "a PAX header"))
                if header.type == "g":  # its records apply to nothing; the engine ignores it
                    return Entry(decoded(header.name), "", "g", 0, self.count, self.header_at)
                records = found
                continue
            if header.type in ("L", "K"):
                text = cstring(self._special(header.size, "a GNU long name"))
                long_name, long_link = (text, long_link) if header.type == "L" else (long_name, text)
                continue
            return self._entry(merged(header, records), records, long_name, long_link)

    def _entry(self, header: Header, records: dict[str, bytes], long_name: bytes, long_link: bytes) -> Entry:
        """A file's entry: GNU long names applied over its merged header, its type settled, content set up."""
        name = long_name or header.name
        link = long_link or header.link
        kind = header.type
        if kind == "\0":
            kind = "5" if name.endswith(b"/") else "0"
            if kind == "5" and header.size:
                raise TarError(f"an old-style entry read as a folder, with {header.size} bytes of content")
        if kind == "S":
            raise TarError("a GNU sparse file, which the engine does not apply")
        if sparse(records):
            raise TarError("a sparse file (GNU's PAX sparse format), which this check does not read")
        self._start(header.size, kind in HEADER_ONLY)
        return Entry(self._name(name), self._name(link), kind, self.remaining, self.count, self.header_at)

    def _name(self, name: bytes) -> str:
        if len(name) > NAME_MAX:
            raise TarError(f"a name of {len(name)} bytes (the engine creates at most {NAME_MAX})")
        return decoded(name)

    def _rest(self) -> None:
        """After the end: the rest of the stream must be zeros (what follows is in the blob, not applied)."""
        while chunk := self._take(SKIP):
            if chunk.count(0) != len(chunk):
                raise TarError(f"data after the end of the archive (at byte {self.offset - len(chunk)})")
