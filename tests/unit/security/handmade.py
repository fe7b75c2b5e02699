"""Tar bytes made by hand, block by block, for the odd and broken headers Python's tarfile cannot write: every
field given as raw bytes where a test wants it, the checksum computed (unsigned, signed, or given)."""

from __future__ import annotations

from collections.abc import Iterable

BLOCK = 512
END = bytes(2 * BLOCK)

FIELDS = {  # name: (start, end) in the header block
    "name": (0, 100),
    "mode": (100, 108),
    "uid": (108, 116),
    "gid": (116, 124),
    "size": (124, 136),
    "mtime": (136, 148),
    "chksum": (148, 156),
    "type": (156, 157),
    "link": (157, 257),
    "magic": (257, 263),
    "version": (263, 265),
    "uname": (265, 297),
    "gname": (297, 329),
    "devmajor": (329, 337),
    "devminor": (337, 345),
    "prefix": (345, 500),
    "star_trailer": (508, 512),
}


def octal(value: int, width: int) -> bytes:
    """A numeric field as GNU tar and Go write it: zero-padded octal, NUL-terminated."""
    return b"%0*o\0" % (width - 1, value)


def pad(data: bytes) -> bytes:
    return data + bytes(-len(data) % BLOCK)


def sums(block: bytes) -> tuple[int, int]:
    """The unsigned and signed sums of a block, its checksum field as spaces."""
    spaced = block[:148] + b" " * 8 + block[156:]
    return sum(spaced), sum(b - 256 if b >= 128 else b for b in spaced)


def header(
    name: bytes,
    length: int = 0,
    type: bytes = b"0",
    *,
    link: bytes = b"",
    magic: bytes = b"ustar\x00",
    version: bytes = b"00",
    checksum: str | bytes = "unsigned",
    **raw: bytes,
) -> bytes:
    """One header block (`length`: its size field, in octal): a USTAR one by default; `raw` sets any field of
    FIELDS to exact bytes (padded with NULs); `checksum` "unsigned", "signed" (the sum of signed bytes) or the
    field's exact bytes."""
    values = {
        "name": name,
        "mode": octal(0o644, 8),
        "uid": octal(0, 8),
        "gid": octal(0, 8),
        "size": octal(length, 12),
        "mtime": octal(1_700_000_000, 12),
        "type": type,
        "link": link,
        "magic": magic,
        "version": version,
        **raw,
    }
    block = bytearray(BLOCK)
    for field, value in values.items():
        start, end = FIELDS[field]
        assert len(value) <= end - start, (field, value)
        block[start : start + len(value)] = value
    unsigned, signed = sums(bytes(block))
    if isinstance(checksum, bytes):
        field_value = checksum
    else:
        total = unsigned if checksum == "unsigned" else signed
        field_value = b"%06o\0 " % total if total >= 0 else b"-%05o\0 " % -total
    block[148 : 148 + len(field_value)] = field_value
    return bytes(block)


def member(name: bytes, data: bytes = b"", type: bytes = b"0", **kw: object) -> bytes:
    """A header and its content, padded to the block."""
    return header(name, len(data), type, **kw) + pad(data)  # type: ignore[arg-type]


def record(key: bytes, value: bytes) -> bytes:
    """One PAX record, its length counting itself."""
    body = b" " + key + b"=" + value + b"\n"
    length = len(body) + 1
    while len(str(length)) + len(body) != length:
        length += 1
    return str(length).encode() + body


def pax(records: Iterable[tuple[bytes, bytes]] | bytes, type: bytes = b"x", name: bytes = b"PaxHeader") -> bytes:
    """A PAX extended header ('x', or 'g' global) holding these records (or these exact bytes)."""
    data = records if isinstance(records, bytes) else b"".join(record(k, v) for k, v in records)
    return member(name, data, type)


def gnu_long(text: bytes, type: bytes = b"L") -> bytes:
    """A GNU long name ('L') or link ('K'), as GNU tar writes it."""
    return member(b"././@LongLink", text + b"\0", type, magic=b"ustar ", version=b" \0")


def tar(*pieces: bytes, end: bytes = END) -> bytes:
    return b"".join(pieces) + end
