"""A wheel's core metadata read by HTTP range requests where an index serves no `.metadata` file, as pip's lazy
wheel does: the file's last 64 KiB (the zip's end record, often its whole central directory), the central
directory where the tail does not hold it, then the one `*.dist-info/METADATA` member, inflated. Never more than
MAX_REQUESTS requests nor MAX_BYTES bytes a wheel: the wheel is never downloaded.

Everything the server sends is hostile input. A server that ignores the range (a 200 with the whole body) is
`NoRanges` and nothing of that body is read; a Content-Range other than the range asked, a directory or member
outside the file, a zip64 archive, a METADATA member past its bound or one that inflates past it, a CRC-32 other
than the directory's: each is a `RangeError` with one line. The wheel's sha256, which the index's page may give,
cannot be checked on a partial read (the member's CRC-32 is): a fact read so says it in its source (SAID)."""

from __future__ import annotations

import http.client
import re
import struct
import urllib.parse
import zlib
from dataclasses import dataclass
from typing import Protocol

from torchimages import values
from torchimages.kb import pages
from torchimages.kb.index import (
    MAX_REDIRECTS,
    USER_AGENT,
    Client,
    IndexProblem,
    NotServed,
    _authorization,
    _connection,
    _redirect,
    _shown,
)

TAIL = 64 * 1024  # the first request: the file's last bytes (the end record and its comment, at most 65,557)
MAX_DIRECTORY_BYTES = 8 * 1024 * 1024  # torch's central directory is about 1-2 MiB (some 10,000 entries)
MAX_METADATA_BYTES = 4 * 1024 * 1024  # the METADATA member, deflated or inflated (torch's: tens of KiB)
SLACK = 64 * 1024  # asked for past the member's name and data: its local header's extra field
MAX_REQUESTS = 3  # the tail, the directory, the member (with its local header: SLACK covers any extra field)
MAX_BYTES = TAIL + MAX_DIRECTORY_BYTES + MAX_METADATA_BYTES + SLACK + 1024
SAID = "its METADATA read by HTTP range requests: a partial read, the wheel's sha256 not checked"

END = b"PK\x05\x06"
END64_LOCATOR = b"PK\x06\x07"
CENTRAL = b"PK\x01\x02"
LOCAL = b"PK\x03\x04"
END_SIZE, CENTRAL_SIZE, LOCAL_SIZE = 22, 46, 30
FULL16, FULL32 = 0xFFFF, 0xFFFFFFFF
STORED, DEFLATED = 0, 8  # the compression methods read (zipfile's ZIP_STORED, ZIP_DEFLATED)
METADATA = re.compile(r"[^/]+\.dist-info/METADATA")
CONTENT_RANGE = re.compile(r"bytes (\d{1,15})-(\d{1,15})/(\d{1,15})")


class RangeError(IndexProblem):
    """The wheel's metadata cannot be read by range requests; the message says why in one line."""


class NoRanges(RangeError):
    """The server does not answer range requests (a 200 with the whole body): the wheel stays unread."""


class ZipError(RangeError):
    """The bytes read are not a wheel whose METADATA can be read within the bounds (the message without a URL)."""


class Source(Protocol):
    """A file read in ranges: its last `length` bytes (all of it when shorter) with its size, and a span."""

    def tail(self, length: int) -> tuple[bytes, int]: ...

    def span(self, start: int, end: int) -> bytes: ...


@dataclass(frozen=True)
class Member:
    """The METADATA member as the central directory describes it."""

    name: str
    raw: bytes  # the name as the directory holds it
    flags: int
    method: int
    crc: int
    compressed: int
    size: int
    offset: int


class Bounded:
    """A Source held to MAX_REQUESTS requests and MAX_BYTES bytes, each answer exactly the length asked."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.requests = 0
        self.asked = 0
        self.size: int | None = None

    def _ask(self, length: int) -> None:
        if self.requests >= MAX_REQUESTS:
            raise ZipError(f"more than {MAX_REQUESTS} range requests would be needed")
        if self.asked + length > MAX_BYTES:
            raise ZipError(f"more than {MAX_BYTES} bytes would be read")
        self.requests += 1
        self.asked += length

    def tail(self, length: int) -> tuple[bytes, int]:
        self._ask(length)
        body, size = self.source.tail(length)
        if len(body) != min(length, size) or size < 0:
            raise ZipError(f"asked for the last {length} bytes, got {len(body)} of a {size}-byte file")
        self.size = size
        return body, size

    def span(self, start: int, end: int) -> bytes:
        if self.size is None or not 0 <= start < end <= self.size:
            raise ZipError(f"bytes {start}-{end} lie outside the file")
        self._ask(end - start)
        body = self.source.span(start, end)
        if len(body) != end - start:
            raise ZipError(f"asked for bytes {start}-{end - 1}, got {len(body)} bytes")
        return body


def metadata_bytes(source: Source) -> bytes:
    """The wheel's METADATA member, inflated and its CRC-32 checked, read from `source` within the bounds."""
    bounded = Bounded(source)
    tail, size = bounded.tail(TAIL)
    tail_at = size - len(tail)
    directory_at, directory_size, entries = end_record(tail, tail_at)
    if directory_at >= tail_at:
        directory = tail[directory_at - tail_at : directory_at - tail_at + directory_size]
    else:
        directory = bounded.span(directory_at, directory_at + directory_size)
    member = metadata_member(directory, entries, directory_at)
    start = member.offset
    end = min(directory_at, start + LOCAL_SIZE + len(member.raw) + member.compressed + SLACK)
    local = tail[start - tail_at : end - tail_at] if start >= tail_at else bounded.span(start, end)
    data_at = start + local_data_offset(local, member)
    if data_at + member.compressed > directory_at:
        raise ZipError(f"the member {values.show(member.name)} runs into the central directory")
    held = local[data_at - start :]
    return inflate(member, held[: member.compressed])


def end_record(tail: bytes, tail_at: int) -> tuple[int, int, int]:
    """The central directory's offset, size and number of entries, from the file's tail (which starts at
    `tail_at`): the last end record whose comment ends the file."""
    at = len(tail) - END_SIZE
    while at >= 0:
        at = tail.rfind(END, 0, at + 4)
        if at < 0:
            break
        if at + END_SIZE + struct.unpack_from("<H", tail, at + 20)[0] == len(tail):
            break
        at -= 1
    if at < 0:
        raise ZipError("no zip end record in the file's last bytes: not a zip file")
    disk, first, here, entries, directory_size, directory_at, _comment = struct.unpack_from("<HHHHIIH", tail, at + 4)
    if (
        FULL16 in (disk, here, entries)
        or FULL32 in (directory_size, directory_at)
        or (at >= 20 and tail[at - 20 : at - 16] == END64_LOCATOR)
    ):
        raise ZipError("a zip64 archive: its records are not read by range requests")
    if disk or first or here != entries:
        raise ZipError("a zip file of several disks")
    if directory_size > MAX_DIRECTORY_BYTES:
        raise ZipError(f"a central directory of {directory_size} bytes, more than the {MAX_DIRECTORY_BYTES} read")
    if directory_at + directory_size > tail_at + at:
        raise ZipError("the end record places the central directory past itself (outside the file)")
    if entries * CENTRAL_SIZE > directory_size:
        raise ZipError(f"{entries} entries cannot fit a central directory of {directory_size} bytes")
    return directory_at, directory_size, entries


def metadata_member(directory: bytes, entries: int, directory_at: int) -> Member:
    """The one top-level `*.dist-info/METADATA` entry of the central directory, its values checked."""
    found: list[Member] = []
    at = 0
    for _ in range(entries):
        if directory[at : at + 4] != CENTRAL or at + CENTRAL_SIZE > len(directory):
            raise ZipError(f"the central directory is broken at byte {at}")
        fields = struct.unpack_from("<HHHHHHIIIHHHHHII", directory, at + 4)
        flags, method, crc, compressed, size = fields[2], fields[3], fields[6], fields[7], fields[8]
        name_length, extra, comment, offset = fields[9], fields[10], fields[11], fields[15]
        raw = directory[at + CENTRAL_SIZE : at + CENTRAL_SIZE + name_length]
        at += CENTRAL_SIZE + name_length + extra + comment
        if at > len(directory):
            raise ZipError("the central directory's last entry runs past its end")
        name = raw.decode("utf-8" if flags & 0x800 else "cp437", errors="replace")
        if METADATA.fullmatch(name):
            found.append(Member(name, raw, flags, method, crc, compressed, size, offset))
    if len(found) != 1:
        raise ZipError(f"the wheel holds {len(found)} .dist-info/METADATA files, not one")
    member = found[0]
    if FULL32 in (member.compressed, member.size, member.offset):
        raise ZipError(f"the member {values.show(member.name)} has zip64 sizes: not read by range requests")
    if member.flags & 0x1:
        raise ZipError(f"the member {values.show(member.name)} is encrypted")
    if member.method not in (STORED, DEFLATED):
        how = f"is compressed by method {member.method}, not stored or deflated"
        raise ZipError(f"the member {values.show(member.name)} {how}")
    if max(member.compressed, member.size) > MAX_METADATA_BYTES:
        size = f"is {member.size} bytes, more than the {MAX_METADATA_BYTES} read"
        raise ZipError(f"the member {values.show(member.name)} {size}")
    if member.offset + LOCAL_SIZE + len(member.raw) + member.compressed > directory_at:
        raise ZipError(f"the central directory places {values.show(member.name)} outside the file's members")
    return member


def local_data_offset(local: bytes, member: Member) -> int:
    """Where the member's data starts after its local header (read from `local`, which starts at the header)."""
    if len(local) < LOCAL_SIZE or local[:4] != LOCAL:
        raise ZipError(f"no local header where the directory places {values.show(member.name)}")
    name_length, extra = struct.unpack_from("<HH", local, 26)
    if local[LOCAL_SIZE : LOCAL_SIZE + name_length] != member.raw:
        raise ZipError(f"the local header at {member.offset} names another file than {values.show(member.name)}")
    return LOCAL_SIZE + int(name_length) + int(extra)


def inflate(member: Member, data: bytes) -> bytes:
    """The member's data inflated (at most MAX_METADATA_BYTES), its size and CRC-32 the directory's."""
    if member.method == STORED:
        body = data
    else:
        inflater = zlib.decompressobj(-15)
        try:
            body = inflater.decompress(data, MAX_METADATA_BYTES + 1)
        except zlib.error as exc:
            raise ZipError(f"the member {values.show(member.name)} does not inflate ({exc})") from None
        if len(body) > MAX_METADATA_BYTES:
            raise ZipError(f"the member {values.show(member.name)} inflates past {MAX_METADATA_BYTES} bytes")
        if not inflater.eof:
            raise ZipError(f"the member {values.show(member.name)}'s deflated data ends early")
    if len(body) != member.size or zlib.crc32(body) != member.crc:
        raise ZipError(f"the member {values.show(member.name)}'s size or CRC-32 is not the central directory's")
    return body


class HttpSource:
    """A file on an index, read by `Range:` requests through `client` (its deadline, per-read timeout, request
    count); each answer a 206 whose Content-Range is the range asked, its body exactly that long."""

    def __init__(self, client: Client, url: str, size: int | None = None) -> None:
        self.client = client
        self.url = url
        self.size = size  # the size the index's page gives (None: not given); then the first answer's

    def tail(self, length: int) -> tuple[bytes, int]:
        first, last, size, body = self._get(f"bytes=-{length}", length)
        if last != size - 1 or first != max(0, size - length) or (self.size is not None and size != self.size):
            raise RangeError(f"{_shown(self.url)}: asked for the last {length} bytes, got bytes {first}-{last}/{size}")
        self.size = size
        return body, size

    def span(self, start: int, end: int) -> bytes:
        first, last, size, body = self._get(f"bytes={start}-{end - 1}", end - start)
        if (first, last, size) != (start, end - 1, self.size):
            raise RangeError(
                f"{_shown(self.url)}: asked for bytes {start}-{end - 1}/{self.size}, got {first}-{last}/{size}"
            )
        return body

    def _get(self, wanted: str, limit: int) -> tuple[int, int, int, bytes]:
        with self.client.deadline.running():
            for _ in range(MAX_REDIRECTS + 1):
                found = self._once(wanted, limit)
                if not isinstance(found, str):
                    return found
                self.url = found
            raise RangeError(f"{_shown(self.url)}: more than {MAX_REDIRECTS} redirects")

    def _once(self, wanted: str, limit: int) -> tuple[int, int, int, bytes] | str:
        url, client = self.url, self.client
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise RangeError(f"{_shown(url)}: not an http or https URL")
        client.requests += 1
        try:
            connection = _connection(parts, client._timeout(url))
            try:
                connection.connect()
                client.deadline.watch(connection.sock)
                path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
                headers = {"Range": wanted, "Accept": "*/*", "Accept-Encoding": "identity", "User-Agent": USER_AGENT}
                headers.update(_authorization(parts))  # the index's login, as its pages are asked (not after a
                # redirect to another host: the URL redirected to holds no login then)
                connection.request("GET", path, headers=headers)
                answer = connection.getresponse()
                if answer.status in (301, 302, 303, 307, 308):
                    return _redirect(url, answer.getheader("Location") or "")
                if answer.status == 404:
                    raise NotServed(f"{_shown(url)}: not served (HTTP 404)")
                if answer.status == 200:  # the whole file follows: none of it is read
                    raise NoRanges(f"{_shown(url)}: answers a range request with the whole file (HTTP 200): not read")
                if answer.status != 206:
                    raise RangeError(f"{_shown(url)}: HTTP {answer.status} to a range request")
                said = " ".join((answer.getheader("Content-Range") or "").split())[:80]
                match = CONTENT_RANGE.fullmatch(said)
                if match is None or (answer.getheader("Content-Encoding") or "identity").lower() != "identity":
                    raise RangeError(f"{_shown(url)}: a 206 without a Content-Range of bytes ({said!r})")
                first, last, size = (int(g) for g in match.groups())
                if not first <= last < size or last - first + 1 > limit:
                    raise RangeError(f"{_shown(url)}: Content-Range {said!r} is not the range asked")
                body = client._body(url, answer, connection, last - first + 1)
                if len(body) != last - first + 1:
                    raise RangeError(f"{_shown(url)}: {len(body)} bytes for Content-Range {said!r}")
                return first, last, size, body
            finally:
                connection.close()
        except (NotServed, RangeError):
            raise
        except IndexProblem as exc:  # the client's bounds on a body: said as a read by ranges that failed
            raise RangeError(str(exc)) from None
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise RangeError(f"{_shown(url)}: {client._why(exc)}") from None


def wheel_metadata(client: Client, url: str, size: int | None = None) -> pages.Metadata:
    """The core metadata of the wheel at `url` (of `size` bytes where the page says), read by range requests.
    NoRanges: the server answers no ranges; NotServed: no such file; RangeError: anything else that is wrong."""
    try:
        body = metadata_bytes(HttpSource(client, url, size))
    except ZipError as exc:
        raise RangeError(f"{_shown(url)}: {exc}") from None
    try:
        return pages.metadata(body)
    except pages.PageError as exc:
        raise RangeError(f"{_shown(url)}: {exc}") from None


def unserved(problem: IndexProblem) -> bool:
    """Whether a failed read says the metadata is not served at all (no ranges, no file), not that it is wrong."""
    return isinstance(problem, NoRanges | NotServed)


def source(url: str) -> str:
    """The source of a fact read from the wheel at `url` by range requests (its login never said)."""
    return f"{_shown(url)} ({SAID})"
