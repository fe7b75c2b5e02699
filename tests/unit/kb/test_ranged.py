"""A wheel's METADATA read by HTTP range requests (kb/ranged.py), against a loopback server serving real zips
built here (zipfile): a server with range support, and each hostile one: a range ignored (a 200 with the whole
body), a lying Content-Range, a directory outside the file, a zip64 record, a huge METADATA member, a member that
inflates without bound. Then sync's hook: where no metadata file is served, the wheel is read so, its source says
the sha256 is not checked, and a server without ranges leaves it unread. The facts are literals."""

from __future__ import annotations

import datetime
import io
import json
import random
import struct
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.range_server import Answer, Answering, Log, basic, ranges, serving
from torchimages.cli.entry import main
from torchimages.kb import pages, ranged, sync
from torchimages.kb.index import Client, NotServed

WHEEL = "torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl"
PATH = f"/f/{WHEEL}"
# torch 2.8.0's Requires-Dist of its CUDA libraries, as pypi.org's linux x86_64 wheel says them (trimmed)
META = (
    b"Metadata-Version: 2.4\nName: torch\nVersion: 2.8.0\n"
    b'Requires-Dist: nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux" and platform_machine == "x86_64"\n'
    b'Requires-Dist: nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux" and platform_machine == "x86_64"\n'
    b'Requires-Dist: nvidia-nccl-cu12==2.27.3; platform_system == "Linux" and platform_machine == "x86_64"\n'
    b"\n" + b"PyTorch is a Python package. " * 500
)


def wheel(
    meta: bytes = META,
    files: int = 40,
    blob: int = 300_000,
    record: int = 100_000,
    method: int = zipfile.ZIP_DEFLATED,
    dist_info: str = "torch-2.8.0.dist-info",
    extra: tuple[str, ...] = (),
) -> bytes:
    """A wheel as zipfile writes it: a big library first, `files` small ones, METADATA, WHEEL, a RECORD of
    `record` bytes last (as torch's, which keeps METADATA out of the file's last 64 KiB)."""
    noise = random.Random(45)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("torch/lib/libtorch.so", noise.randbytes(blob), zipfile.ZIP_STORED)
        for n in range(files):
            archive.writestr(f"torch/include/some/long/path/to/a/header_number_{n:05d}.h", f"// {n}\n")
        archive.writestr(f"{dist_info}/METADATA", meta, method)
        for name in extra:
            archive.writestr(name, meta, method)
        archive.writestr(f"{dist_info}/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
        archive.writestr(f"{dist_info}/RECORD", noise.randbytes(record).hex()[:record], zipfile.ZIP_STORED)
    return out.getvalue()


def _read(answering: Answering, size: int | None = None, log: Log | None = None) -> pages.Metadata:
    with serving({PATH: answering}, log) as base:
        return ranged.wheel_metadata(Client(10), base + PATH, size)


def _entry(body: bytes, name: str) -> int:
    """Where the central directory entry of `name` starts."""
    return body.rindex(b"PK\x01\x02", 0, body.rindex(name.encode()))


def _end(body: bytes) -> int:
    return body.rindex(b"PK\x05\x06")


def _patched(body: bytes, at: int, fmt: str, value: int) -> bytes:
    return body[:at] + struct.pack(fmt, value) + body[at + struct.calcsize(fmt) :]


def test_a_wheel_is_read_by_ranges_within_its_bounds() -> None:
    body, log = wheel(files=3000), Log()
    meta = _read(ranges(body), len(body), log)
    assert (meta.name, meta.version) == ("torch", "2.8.0")
    assert sorted(str(r.specifier) for r in meta.requires) == ["==12.8.90", "==2.27.3", "==9.10.2.21"]
    # the tail, the directory (3,000 entries: more than the tail holds), the member: a few KiB of a 500 KB file
    assert log.requests == {PATH: 3} and log.ranges[0] == f"bytes=-{ranged.TAIL}"
    assert sum(log.sent.values()) < ranged.TAIL + 400_000 < len(body)


def test_a_small_directory_is_read_from_the_tail() -> None:
    body, log = wheel(record=1000), Log()
    assert _read(ranges(body), None, log).version == "2.8.0"
    assert log.requests == {PATH: 1}  # METADATA and the directory lie in the last 64 KiB


def test_a_stored_member_is_read() -> None:
    assert _read(ranges(wheel(method=zipfile.ZIP_STORED))).name == "torch"


def test_a_range_ignored_is_not_read() -> None:
    body, log = wheel(blob=40_000_000), Log()
    with pytest.raises(ranged.NoRanges, match=r"whole file \(HTTP 200\): not read"):
        _read(lambda _header: Answer(200, body), len(body), log)
    log.done.wait(5)
    assert log.requests == {PATH: 1} and log.sent.get(PATH, 0) < 16_000_000  # hung up, never downloaded whole
    assert ranged.unserved(ranged.NoRanges("x"))


def _lying(body: bytes, shift: int = 0, total: int | None = None, extra: bytes = b"") -> Answering:
    honest = ranges(body)

    def answer(header: str | None) -> Answer:
        found = honest(header)
        first, last = (int(v) for v in found.headers[0][1].split()[1].split("/")[0].split("-"))
        said = f"bytes {first + shift}-{last + shift}/{total or len(body)}"
        return Answer(206, found.body + extra, (("Content-Range", said),))

    return answer


@pytest.mark.parametrize(
    ("answering", "size", "why"),
    [
        (_lying(wheel(), shift=-100), None, "asked for the last 65536 bytes, got bytes"),
        (_lying(wheel(files=3000), total=10**9), None, "asked for the last"),  # its total another file's
        (ranges(wheel()), 10**9, "asked for the last"),  # the page's size not the file's
        (_lying(wheel(), extra=b"more"), None, "65540 bytes announced, more than the 65536"),  # a body past its range
        (lambda _h: Answer(206, b"x" * 10), None, "without a Content-Range"),
        (lambda _h: Answer(206, b"x" * 10, (("Content-Range", "bytes 0-99999/100000"),)), None, "not the range"),
        (
            lambda _h: Answer(206, b"x" * 5, (("Content-Range", "bytes 0-9/10"), ("Content-Length", "10"))),
            None,
            "early",
        ),
        (lambda _h: Answer(416), None, "HTTP 416"),
    ],
)
def test_a_lying_server_is_refused(answering: Answering, size: int | None, why: str) -> None:
    with pytest.raises(ranged.RangeError, match=why):
        _read(answering, size)


def _span_liar(body: bytes) -> Answering:
    """Honest for the tail, then another part of the file than the span asked."""
    honest = ranges(body)

    def answer(header: str | None) -> Answer:
        if header and header.startswith("bytes=-"):
            return honest(header)
        first, last = (int(v) for v in (header or "bytes=0-0")[6:].split("-"))
        return honest(f"bytes={first + 7}-{last + 7}")

    return answer


def test_a_span_of_another_range_is_refused() -> None:
    with pytest.raises(ranged.RangeError, match=r"asked for bytes \d+-\d+/\d+, got"):
        _read(_span_liar(wheel(files=3000)))


def test_hostile_zips() -> None:
    body = wheel()
    end = _end(body)
    outside = _patched(body, end + 16, "<I", len(body))  # the directory's offset: past the file
    zip64 = _patched(body, end + 16, "<I", 0xFFFFFFFF)
    member = _entry(body, "torch-2.8.0.dist-info/METADATA")
    size64 = _patched(body, member + 20, "<I", 0xFFFFFFFF)
    member_outside = _patched(body, member + 42, "<I", len(body) - 100)
    bad_crc = _patched(body, member + 16, "<I", 1234)
    encrypted = _patched(body, member + 8, "<H", 1)
    bzip2 = _patched(body, member + 10, "<H", 12)
    cases = {
        outside: "places the central directory past itself",
        zip64: "zip64 archive",
        size64: "zip64 sizes",
        member_outside: "outside the file's members",
        bad_crc: "CRC-32",
        encrypted: "encrypted",
        bzip2: "compressed by method 12",
        b"not a zip at all" * 10: "no zip end record",
        body[:-10]: "no zip end record",
        wheel(extra=("other-1.0.dist-info/METADATA",)): "holds 2 .dist-info/METADATA files",
        wheel(dist_info="torch-2.8.0.dist-info/nested.dist-info"): "holds 0 .dist-info/METADATA files",
    }
    for hostile, why in cases.items():
        with pytest.raises(ranged.RangeError, match=why):
            _read(ranges(hostile))


def test_a_zip64_locator_is_refused() -> None:
    body = wheel()
    end = _end(body)
    locator = b"PK\x06\x07" + struct.pack("<IQI", 0, 0, 1)
    with pytest.raises(ranged.RangeError, match="zip64 archive"):
        _read(ranges(body[:end] + locator + body[end:]))


def test_a_huge_metadata_member_is_not_fetched() -> None:
    huge, log = wheel(meta=META + random.Random(1).randbytes(ranged.MAX_METADATA_BYTES).hex().encode()), Log()
    with pytest.raises(ranged.RangeError, match="bytes, more than the 4194304 read"):
        _read(ranges(huge), None, log)
    assert sum(log.sent.values()) <= ranged.TAIL * 2  # the tail and the directory: not the member


def test_a_member_that_inflates_past_its_bound_is_cut() -> None:
    bomb = wheel(meta=META + b" " * (ranged.MAX_METADATA_BYTES * 4))  # deflates to a few KiB
    member = _entry(bomb, "torch-2.8.0.dist-info/METADATA")
    said_small = _patched(bomb, member + 24, "<I", len(META))  # its directory entry says it is small
    with pytest.raises(ranged.RangeError, match="inflates past 4194304 bytes"):
        _read(ranges(said_small))
    with pytest.raises(ranged.RangeError, match="more than the 4194304 read"):
        _read(ranges(bomb))  # said as it is: refused before it is fetched


def test_a_truncated_deflate_stream_is_refused() -> None:
    body = wheel()
    member = _entry(body, "torch-2.8.0.dist-info/METADATA")
    (compressed,) = struct.unpack_from("<I", body, member + 20)
    short = _patched(body, member + 20, "<I", compressed // 2)
    with pytest.raises(ranged.RangeError, match=r"ends early|CRC-32"):
        _read(ranges(short))


def test_the_bounds_hold_before_a_request() -> None:
    many = wheel(files=2)
    end = _end(many)
    big_directory = _patched(many, end + 12, "<I", ranged.MAX_DIRECTORY_BYTES + 1)
    with pytest.raises(ranged.RangeError, match="central directory of 8388609 bytes"):
        _read(ranges(big_directory))
    crowded = _patched(_patched(many, end + 8, "<H", 60_000), end + 10, "<H", 60_000)
    with pytest.raises(ranged.RangeError, match="60000 entries cannot fit"):
        _read(ranges(crowded))


def test_not_served_and_redirects() -> None:
    body = wheel()
    with serving({"/moved": lambda _h: Answer(302, b"", (("Location", PATH),)), PATH: ranges(body)}) as base:
        assert ranged.wheel_metadata(Client(10), base + "/moved").name == "torch"
        with pytest.raises(NotServed):
            ranged.wheel_metadata(Client(10), base + "/elsewhere.whl")


# --- sync's hook: where no metadata file is served --------------------------------------------------------------

PAGE = "application/vnd.pypi.simple.v1+json"


def _index(files: dict[str, Answering], size: int) -> dict[str, Answering]:
    entry = {"filename": WHEEL, "url": PATH, "hashes": {"sha256": "0" * 64}, "size": size}
    page = json.dumps({"files": [entry]}).encode()
    return {
        "/simple/torch/": lambda _h: Answer(200, page, (("Content-Type", PAGE),)),
        "/simple/torchvision/": lambda _h: Answer(404),
        "/simple/torchaudio/": lambda _h: Answer(404),
        **files,
    }


def test_sync_reads_a_wheel_by_ranges_where_no_metadata_file_is_served() -> None:
    body = wheel()
    with serving(_index({PATH: ranges(body)}, len(body))) as base:
        found = sync.read_index(Client(10), base + "/simple", "2.4", "2.8.0")
    assert [(b.variant, b.cudnn, b.nccl) for b in found.builds] == [("cu128", "9.10.2.21", "2.27.3")]
    assert found.builds[0].source == f"{base}{PATH} ({ranged.SAID})" and found.ranged == 1
    assert "sha256 not checked" in found.builds[0].source and found.misses == ()
    text = sync.source_tag([base + "/simple"], datetime.date(2026, 12, 6), ranges=True)[1]
    assert "range requests" in text and "sha256 not checked" in text
    assert "range requests" not in sync.source_tag([base + "/simple"], datetime.date(2026, 12, 6))[1]


def test_sync_checks_the_name_and_version_read_by_ranges() -> None:
    body = wheel(meta=META.replace(b"Version: 2.8.0", b"Version: 2.8.1"))
    with serving(_index({PATH: ranges(body)}, len(body))) as base:
        found = sync.read_index(Client(10), base + "/simple", "2.4", "2.8.0")
    assert found.builds == () and found.misses[0].reason == sync.ANOTHER


@pytest.mark.parametrize(
    ("answering", "reason"),
    [
        (lambda _h: Answer(200, b"x" * 200_000), sync.NO_METADATA),  # no range support
        (lambda _h: Answer(404), sync.NO_METADATA),
        (ranges(b"garbage" * 20_000), sync.UNREADABLE),
    ],
)
def test_sync_leaves_a_wheel_unread(answering: Answering, reason: str) -> None:
    with serving(_index({PATH: answering}, 140_000)) as base:
        found = sync.read_index(Client(10), base + "/simple", "2.4", "2.8.0")
    assert found.builds == () and found.ranged == 0 and found.misses[0].reason == reason, found.misses


def test_sync_asks_the_json_api_where_ranges_fail() -> None:
    release = {"info": {"name": "torch", "version": "2.8.0", "requires_dist": []}, "urls": [{"filename": WHEEL}]}
    files = {PATH: lambda _h: Answer(200, b"x" * 200_000), "/pypi/torch/2.8.0/json": lambda _h: Answer(200, b"")}
    files["/pypi/torch/2.8.0/json"] = lambda _h: Answer(200, json.dumps(release).encode())
    with serving(_index(files, 200_000)) as base:
        found = sync.read_index(Client(10), base + "/simple", "2.4", "2.8.0", base + "/pypi")
    assert found.json_api == 1 and found.ranged == 0
    assert [b.source for b in found.builds] == [base + "/pypi/torch/2.8.0/json"]


# --- issue 45: a login index, and a page that gives no size -----------------------------------------------------

LOGIN = "reader:topsecretpw"


def test_ranges_are_asked_with_the_index_login() -> None:
    """The wheel of an index with a login is asked by ranges with it (HTTP basic, as its pages), not refused 401."""
    body = wheel()
    log = Log()
    with serving({PATH: ranges(body)}, log, login=LOGIN) as base:
        found = ranged.wheel_metadata(Client(10), base.replace("://", f"://{LOGIN}@") + PATH)
    assert found.name == "torch" and {auth for _, auth in log.authorizations} == {basic(LOGIN)}


def test_a_redirect_to_another_host_carries_no_login() -> None:
    """Redirected to another host (`localhost` for `127.0.0.1`), the range requests go without the login."""
    body = wheel()
    log = Log()
    with serving({PATH: ranges(body)}, log) as other:
        moved = other.replace("127.0.0.1", "localhost") + PATH
        with serving({"/moved": lambda _h: Answer(302, b"", (("Location", moved),))}, Log()) as base:
            found = ranged.wheel_metadata(Client(10), base.replace("://", f"://{LOGIN}@") + "/moved")
    assert found.name == "torch" and log.authorizations and all(auth is None for _, auth in log.authorizations)


def test_a_range_read_refused_never_says_the_login() -> None:
    with serving({PATH: ranges(wheel())}, login=LOGIN) as base:
        url = base.replace("://", "://reader:wrongpw@") + PATH
        with pytest.raises(ranged.RangeError) as refused:
            ranged.wheel_metadata(Client(10), url)
    assert str(refused.value) == f"{base}{PATH}: HTTP 401 to a range request"
    assert ranged.source(url) == f"{base}{PATH} ({ranged.SAID})"


def _html_index(files: dict[str, Answering]) -> dict[str, Answering]:
    """An index whose page is HTML that gives no file size and serves no metadata file (a plain mirror)."""
    page = f'<a href="{PATH}">{WHEEL}</a>'.encode()
    return {**_index({}, 0), "/simple/torch/": lambda _h: Answer(200, page, (("Content-Type", "text/html"),)), **files}


def test_a_wheel_of_unknown_size_too_big_to_read_whole_is_read_by_ranges() -> None:
    """Issue 45: the page gives no size, the wheel is announced past the 64 KiB read whole: its METADATA is read
    by ranges (before: an unreadable wheel, never asked by ranges)."""
    body = wheel()
    assert len(body) > sync.MAX_WHEEL_BYTES
    with serving(_html_index({PATH: ranges(body)})) as base:
        found = sync.read_index(Client(10), base + "/simple", "2.4", "2.8.0")
    assert [(b.variant, b.nccl) for b in found.builds] == [("cu128", "2.27.3")] and found.ranged == 1, found.misses


def test_a_login_index_is_read_and_nothing_read_from_it_says_the_login() -> None:
    """The page, the .metadata asked and the ranges carry the login; no note, miss, source or origin says it."""
    body = wheel()
    other = WHEEL.replace("x86_64", "aarch64")
    page = f'<a href="{PATH}">{WHEEL}</a><a href="/f/{other}">{other}</a>'.encode()
    files = {PATH: ranges(body), "/simple/torch/": lambda _h: Answer(200, page, (("Content-Type", "text/html"),))}
    log = Log()
    with serving(_html_index(files), log, login=LOGIN) as base:
        index = base.replace("://", f"://{LOGIN}@") + "/simple"
        found = sync.read_index(Client(10), index, "2.4", "2.8.0")
        unread = sync.unread_facts([found], ["2.8"], "2.8.0")
    assert found.ranged == 1 and [b.source for b in found.builds] == [f"{base}{PATH} ({ranged.SAID})"]
    assert [b.origin for b in found.builds] == [base + "/simple"] and found.misses[0].filename == other
    said = [*found.notes, *sync.condensed(found.index, found.misses), *(m.detail for m in found.misses), *unread]
    assert said and not [line for line in said if "topsecretpw" in line or "reader" in line], said
    assert {auth for _, auth in log.authorizations} == {basic(LOGIN)}


@pytest.mark.parametrize(
    ("command", "nccl", "code"), [("sync", "2.27.99", 0), ("check", "2.27.99", 1), ("check", "2.27.3", 2)]
)
def test_kb_says_no_line_with_the_index_login(
    command: str, nccl: str, code: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 45 as the reviewer met it: `kb sync|check --verbose` on a login index whose page gives no size: the
    wheel is read by ranges with the login, its change said with its source, the unread wheel's notes, warnings
    and errors said: none with the login."""
    body = wheel(meta=META.replace(b"nvidia-nccl-cu12==2.27.3", f"nvidia-nccl-cu12=={nccl}".encode()))
    other = WHEEL.replace("x86_64", "aarch64")
    page = f'<a href="{PATH}">{WHEEL}</a><a href="/f/{other}">{other}</a>'.encode()
    files = {PATH: ranges(body), "/simple/torch/": lambda _h: Answer(200, page, (("Content-Type", "text/html"),))}
    compat = tmp_path / "compat.yaml"
    compat.write_bytes((Path(sync.__file__).parents[1] / "data" / "compat.yaml").read_bytes())
    with serving(_html_index(files), login=LOGIN) as base:
        index = base.replace("://", f"://{LOGIN}@") + "/simple"
        said = main(["kb", command, "--verbose", "--release", "2.8.0", "--compat", str(compat), "--index", index])
    out, err = capsys.readouterr()
    assert nccl == "2.27.3" or f"-> 2.27.99 [{base}{PATH} ({ranged.SAID})]" in out, out + err
    assert f"note: not read: {base}/f/{other}: not served (HTTP 404)" in err, err
    assert f"{base}/simple: 1 torch wheel not read (e.g. {other}" in err and said == code, out + err
    assert code != 2 or f"error: {base}/simple: 1 torch wheel not read" in err, err
    assert "topsecretpw" not in out + err and "reader" not in out + err


# --- the reader over random, truncated and garbled zips: its own error only, never past its bounds -------------


class Memory:
    """A file in memory read as a Source, counting the requests and bytes it hands out."""

    def __init__(self, body: bytes) -> None:
        self.body, self.requests, self.sent = body, 0, 0

    def tail(self, length: int) -> tuple[bytes, int]:
        self.requests += 1
        piece = self.body[max(0, len(self.body) - length) :]
        self.sent += len(piece)
        return piece, len(self.body)

    def span(self, start: int, end: int) -> bytes:
        self.requests += 1
        piece = self.body[start:end]
        self.sent += len(piece)
        return piece


SMALL = wheel(files=5, blob=2000, record=500, meta=META[:600])
LARGE = wheel(files=1500, blob=70_000, record=70_000, meta=META[:600])


def _garbled(draw: st.DrawFn) -> bytes:
    body = draw(st.sampled_from([SMALL, LARGE]))
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(body) - 1))
        kind = draw(st.sampled_from(["flip", "cut", "splice", "tail"]))
        if kind == "flip":
            body = body[:at] + bytes([body[at] ^ draw(st.integers(1, 255))]) + body[at + 1 :]
        elif kind == "cut":
            body = body[:at] if draw(st.booleans()) else body[at:]
        elif kind == "splice":
            body = body[:at] + draw(st.binary(max_size=64)) + body[at:]
        else:  # the directory's numbers, near the end, changed
            near = max(0, len(body) - draw(st.integers(1, 200)))
            body = body[:near] + draw(st.binary(min_size=1, max_size=8)) + body[near + 8 :]
        if not body:
            break
    return body


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=300), st.composite(_garbled)()))
def test_the_reader_never_raises_but_its_own_error_nor_reads_past_its_bounds(body: bytes) -> None:
    source = Memory(body)
    try:
        found = ranged.metadata_bytes(source)
    except ranged.RangeError as exc:
        assert "\n" not in str(exc)
    else:
        assert len(found) <= ranged.MAX_METADATA_BYTES
    assert source.requests <= ranged.MAX_REQUESTS and source.sent <= ranged.MAX_BYTES


def test_the_reader_reads_the_untouched_zips() -> None:
    for body, requests, sent in ((SMALL, 1, len(SMALL)), (LARGE, 3, 300_000)):
        source = Memory(body)
        assert ranged.metadata_bytes(source) == META[:600]
        assert source.requests == requests and source.sent <= sent < len(LARGE)


def test_a_bomb_is_never_inflated_whole() -> None:
    bomb = wheel(meta=META + b" " * (ranged.MAX_METADATA_BYTES * 8), blob=1000, record=1000)  # 32 MiB, deflated
    member = _entry(bomb, "torch-2.8.0.dist-info/METADATA")
    said_small = _patched(bomb, member + 24, "<I", len(META))
    tracemalloc.start()
    try:
        with pytest.raises(ranged.RangeError, match="inflates past"):
            ranged.metadata_bytes(Memory(said_small))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * ranged.MAX_METADATA_BYTES  # at most the bound inflated (and the file's few KiB), not 32 MiB
