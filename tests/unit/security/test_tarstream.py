"""The layer scan reads a layer as the engine's Go reader does (torchimages/security/tarstream.py): a header
Go accepts is read, however odd, and what follows it is scanned; a header Go refuses, a sparse file, a type
the engine does not apply, data after the end make the layer "not scanned" saying why, never a silent end
and never clean. The layers are made by hand (tests/unit/security/handmade.py), block by block."""

from __future__ import annotations

import io
import time

import pytest

from tests.fakes import FakeEngine
from tests.unit.security.handmade import END, gnu_long, header, member, octal, pad, pax, record, tar
from tests.unit.security.test_layers import NETRC, REFERENCE, RSA_4096, docker_26_save, keys, scan
from torchimages.security import gate, tarstream
from torchimages.security.model import Scan
from torchimages.security.tarstream import TarError, TarStream

CLEAN = member(b"etc/motd", b"hello\n")
PLANTED = member(b"root/.netrc", NETRC)


def entries(data: bytes) -> list[tuple[str, str, bytes]]:
    """(name, type, content) of each entry, read as the scan reads them."""
    stream = TarStream(io.BytesIO(data))
    return [(e.name, e.type, stream.read()) for e in stream]


def not_scanned(result: Scan, *said: str) -> None:
    assert not result.scanned, result.note
    assert "layer 1 of 1" in result.note and "could not be read" in result.note
    for words in said:
        assert words in result.note, result.note


# --- headers Go accepts: read, and what follows them scanned --------------------------------------------------

SIGNED = header(b"etc/caf\xc3\xa9", 0, checksum="signed")  # a name with high bytes: the signed sum differs
ACCEPTED = {
    # a V7 header (no magic): Go reads its name, size and type, and ignores what USTAR would put after them
    "v7 with bytes in the ustar fields": header(b"etc/v7", magic=b"\xff\xfeJUNK", uname=b"\xff" * 32, prefix=b"\x01"),
    "signed checksum": SIGNED,
    "checksum with leading NULs and spaces": b"",  # filled below
    "size with leading NULs and spaces": header(b"etc/sized", 3, size=b"\0\0 0000003 \0") + pad(b"abc"),
    "size in base-256": header(b"etc/big", 5, size=b"\x80" + bytes(10) + b"\x05") + pad(b"12345"),
    "mode in base-256 and uid with spaces": header(b"etc/m", 0, mode=b"\x80\0\0\0\0\0\x01\xa4", uid=b"  1000  "),
    "a pax header with many records": pax(
        [(b"mtime", b"1700000000.123456789"), (b"SCHILY.xattr.user.x", b"\0binary\xff"), (b"comment", b"")]
    )
    + CLEAN,
    "pax records whose length has leading zeros": pax(b"0000020 comment=abc\n") + CLEAN,
    "a global pax header": pax([(b"path", b"ignored"), (b"uid", b"not a number")], type=b"g") + CLEAN,
    "a gnu long name": gnu_long(b"opt/" + b"d" * 200 + b"/notes") + member(b"././@LongLink-x", b"notes"),
    "a folder with a size": header(b"etc/folder/", 4096, b"5"),  # no content, whatever the size says
    "a hard link with a size": header(b"etc/link", 700, b"1", link=b"etc/motd"),
    "an old-style regular file": header(b"etc/old", 3, b"\0") + pad(b"old"),
    "a GNU header whose atime is text": header(
        b"motd2", 0, magic=b"ustar ", version=b" \0", prefix=b"etc" + bytes(9) + b"zz"
    ),
    "a STAR header": header(b"motd3", 0, prefix=b"etc", star_trailer=b"tar\0"),
    "one zero block at the end": b"",
}
block = bytearray(header(b"etc/chk"))
value = sum(block[:148]) + 8 * 32 + sum(block[156:])
block[148:156] = b"\0\0%04o \0" % value  # leading NULs: Python's tarfile reads it as 0
ACCEPTED["checksum with leading NULs and spaces"] = bytes(block)


@pytest.mark.parametrize("odd", ACCEPTED.values(), ids=list(ACCEPTED))
def test_after_a_header_go_accepts_the_layer_is_still_read(odd: bytes) -> None:
    end = bytes(512) if odd == b"" else END  # "one zero block at the end": Go stops there too
    layer = tar(CLEAN, odd, PLANTED, end=end)
    assert keys(scan(layer)) == ["/root/.netrc"]


def test_names_come_from_prefix_pax_and_gnu_long_names_as_go_applies_them() -> None:
    data = tar(
        header(b".netrc", 0, prefix=b"root"),
        pax([(b"path", b"home/a/.netrc"), (b"size", b"4")]) + header(b"innocent", 0) + pad(b"pass"),
        gnu_long(b"home/b/.netrc") + pax([(b"path", b"home/c/x")]) + header(b"innocent", 0),  # GNU wins
        pax([(b"path", b"home/d/.netrc")]) + pax([(b"uid", b"1")]) + header(b"home/d/plain", 0),  # replaced
        header(b"x" * 100, 0, prefix=b"home/e"),
    )
    assert [(name, kind) for name, kind, _ in entries(data)] == [
        ("root/.netrc", "0"),
        ("home/a/.netrc", "0"),
        ("home/b/.netrc", "0"),
        ("home/d/plain", "0"),
        ("home/e/" + "x" * 100, "0"),
    ]
    assert entries(data)[1][2] == b"pass"


def test_a_secret_behind_a_gnu_long_name_and_after_a_pax_header_is_found() -> None:
    layer = tar(
        pax([(b"comment", b"x" * 5000)]) + CLEAN,
        gnu_long(b"root/" + b"d" * 150 + b"/id_rsa") + member(b"short", RSA_4096),
    )
    assert keys(scan(layer)) == ["/root/" + "d" * 150 + "/id_rsa"]


def test_the_end_is_two_zero_blocks_or_the_stream_s_end() -> None:
    assert [e[0] for e in entries(CLEAN)] == ["etc/motd"]  # no end blocks at all
    assert [e[0] for e in entries(CLEAN + bytes(512))] == ["etc/motd"]
    assert entries(b"") == [] and entries(END) == []
    assert [e[0] for e in entries(CLEAN[:-500])] == ["etc/motd"]  # the stream ends in the padding: Go's end


# --- what Go refuses, and what this check does not read: not scanned, saying why ------------------------------

BAD_CHECKSUM = bytearray(header(b"etc/x"))
BAD_CHECKSUM[148:156] = b"0000001\0"
REFUSED = {
    "bad checksum": (bytes(BAD_CHECKSUM), "no tar header"),
    "size that is no octal": (header(b"etc/x", size=b"12x4\0"), "numeric fields do not parse"),
    "mode that is no octal": (header(b"etc/x", mode=b"07 55\0"), "numeric fields do not parse"),
    "base-256 overflow": (header(b"etc/x", size=b"\x80\x01" + bytes(10)), "numeric fields do not parse"),
    "negative size": (header(b"etc/x", size=b"\xff" * 12), "negative size"),
    "a zero block, then a header": (bytes(512) + CLEAN, "a zero block, then a header"),
    "a pax record without '='": (pax(b"8 abcde\n") + CLEAN, "without a key"),
    "a pax record whose length is wrong": (pax(b"30 path=root/.netrc\n") + CLEAN, "malformed record"),
    "a pax record not ending in a newline": (pax(b"10 a=bcdef\n") + CLEAN, "does not end in a newline"),
    "a pax path with a NUL": (pax([(b"path", b"a\0b")]) + CLEAN, "a NUL"),
    "a pax size that is no number": (pax([(b"size", b"0x10")]) + CLEAN, "size record that is no number"),
    "a pax mtime that is no time": (pax([(b"mtime", b"1.5e3")]) + CLEAN, "no time"),
    "a pax header over 1 MiB": (pax([(b"comment", b"x" * (1 << 20))]) + CLEAN, "at most 1048576"),
    "a gnu long name over 1 MiB": (gnu_long(b"a" * (1 << 20)) + CLEAN, "at most 1048576"),
    "an old GNU sparse file": (header(b"etc/sparse", 0, b"S", magic=b"ustar ", version=b" \0"), "sparse"),
    "a PAX sparse file": (pax([(b"GNU.sparse.major", b"1"), (b"GNU.sparse.minor", b"0")]) + CLEAN, "sparse"),
    "a PAX 0.0 sparse map": (
        pax([(b"GNU.sparse.offset", b"0"), (b"GNU.sparse.numbytes", b"6")]) + CLEAN,
        "sparse",
    ),
    "a contiguous file (type 7)": (member(b"etc/c", b"data", b"7"), "type '7'"),
    "a type the engine does not know": (member(b"etc/v", b"data", b"V"), "type 'V'"),
    "an old-style folder with content": (header(b"etc/d/", 5, b"\0") + pad(b"12345"), "read as a folder"),
    "a name longer than PATH_MAX": (pax([(b"path", b"a/" * 2100)]) + CLEAN, "a name of 4200 bytes"),
}


@pytest.mark.parametrize(("bad", "said"), REFUSED.values(), ids=list(REFUSED))
def test_a_header_go_refuses_makes_the_layer_not_scanned_and_what_came_before_is_said(bad: bytes, said: str) -> None:
    result = scan(tar(PLANTED, bad, member(b"home/u/.netrc", NETRC)))
    not_scanned(result, said, "entry ")
    assert [f.key for f in result.findings] == ["/root/.netrc"]


def test_a_stream_cut_short_is_not_scanned() -> None:
    whole = tar(CLEAN, member(b"opt/big", b"x" * 5000), PLANTED)
    for cut in (1024 + 100, 1024 + 700, 1024 + 512 + 3000):  # in a header, in the content, in the content
        result = scan(whole[:cut])
        not_scanned(result, "the stream ends inside")


def test_data_after_the_end_is_not_scanned() -> None:
    hidden = member(b"root/.netrc", NETRC)  # after the end: in the blob, never applied
    not_scanned(scan(tar(CLEAN) + hidden), "data after the end of the archive")
    assert scan(tar(CLEAN) + bytes(10240)).scanned  # zeros after the end (a tar's record padding) are fine


def test_a_huge_pax_header_is_read_in_linear_time() -> None:
    """CVE-2024-6232 (Python's tarfile before 3.11.10): a PAX header whose records make the parse quadratic."""
    many = b"".join(record(b"k%d" % n, b"v") for n in range(100_000))[: (1 << 20) - 20]
    crafted = many[: many.rfind(b"\n") + 1]
    spaces = b"9" * 100_000 + b" " + b"x" * 100  # a length field that never ends
    for data in (crafted, spaces, b"1 " * 400_000):
        start = time.monotonic()
        scan(tar(pax(data), PLANTED))
        assert time.monotonic() - start < 2.0


# --- the reader's own pieces ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (b"0000012\0", 10),
        (b"  12  ", 10),
        (b"\0\0" + b"12\0\0", 10),
        (b"12\x0099", 10),  # up to the first NUL after trimming
        (b"", 0),
        (b"\0" * 8, 0),
        (b"\x80\0\0\0\0\0\0\x10", 16),
        (b"\xff" * 8, -1),
        (b"8", None),
        (b"-1", None),
        (b"1 2", None),
        (b"\x80" + b"\xff" * 11, None),
    ],
)
def test_numbers_are_read_as_go_reads_them(field: bytes, value: int | None) -> None:
    assert tarstream.numeric(field) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [(b"12", 12), (b"+12", 12), (b"-3", -3), (b"0" * 40 + b"7", 7), (b"", None), (b"1_0", None), (b" 1", None)],
)
def test_pax_numbers_are_read_as_go_s_parseint(text: bytes, value: int | None) -> None:
    assert tarstream.decimal(text) == value


def test_an_octal_field_of_the_outer_archive_and_of_a_layer_is_one_reader() -> None:
    assert octal(10, 8) == b"0000012\0"
    assert tarstream.is_header(header(b"x")) and tarstream.is_header(bytes(512))
    assert not tarstream.is_header(b"{" + bytes(511)) and not tarstream.is_header(header(b"x")[:100])
    with pytest.raises(TarError, match="entry 1"):
        entries(bytes(BAD_CHECKSUM))


def test_names_are_printable_whatever_bytes_they_hold() -> None:
    data = tar(member(b"tmp/a\nb\x1b[31m", b"x"), member(b"tmp/caf\xc3\xa9 \xff", b"y"))
    assert [name for name, _, _ in entries(data)] == ["tmp/a\\nb\\x1b[31m", "tmp/café \\xff"]
    assert all(f.key.isprintable() for f in scan(data).findings)


def test_under_require_scan_a_layer_not_read_as_the_engine_reads_it_refuses_the_tag() -> None:
    engine = FakeEngine()
    engine.archives[REFERENCE] = docker_26_save([tar(CLEAN, bytes(512), PLANTED)])  # a zero block, then a header
    options = gate.GateOptions(skip=frozenset({"os-updates", "python"}), require_scan=True)
    verdict = gate.verdict(engine, "2.13.0-cpu-runtime", REFERENCE, options)
    (problem,) = verdict.problems
    assert problem.startswith("secrets: not scanned (") and "a zero block, then a header" in problem
    assert problem.endswith("and --require-scan is given")
