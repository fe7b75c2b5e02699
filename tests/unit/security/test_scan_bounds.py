"""The layer scan cannot be fooled or held: a planted private key, netrc or build secret in what the engine
would apply is found or the layer is "not scanned", whatever headers surround it (a property over generated
tar streams); past a bound of time, bytes, findings or kept paths the layer or image is "not scanned" saying
which; memory stays bounded whatever the members' sizes and headers."""

from __future__ import annotations

import hashlib
import io
import json
import time
import tracemalloc
from collections.abc import Iterator
from types import SimpleNamespace
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes import FakeEngine
from tests.unit.security.handmade import END, gnu_long, header, member, pad, pax
from tests.unit.security.test_layers import NETRC, REFERENCE, RSA_4096, docker_26_save, layer
from torchimages import settings as tool_settings
from torchimages.security import layers
from torchimages.security.layers import Limits
from torchimages.security.leaks import secrets_of
from torchimages.security.model import Scan

SECRET = b"[global]\nindex-url = https://ci:0123456789abcdef@pypi.example.org/simple\n"


def scan(tarball: bytes, limits: Limits | None = None, secrets: tuple[tuple[str, bytes], ...] = ()) -> Scan:
    engine = FakeEngine()
    engine.archives[REFERENCE] = docker_26_save([tarball])
    return layers.scan(engine, REFERENCE, secrets, limits=limits)


# --- the property: never clean while the planted item is applied -------------------------------------------------

names = st.sampled_from([b"etc/a", b"opt/x/y.py", b"usr/lib/libz.so", b"srv/" + b"d" * 90, b"var/lib/f"])
contents = st.one_of(st.binary(max_size=3000), st.integers(0, 9000).map(lambda n: b"\0" * n))


@st.composite
def pieces(draw: st.DrawFn) -> tuple[str, bytes]:
    """One piece of a layer: ("ok", bytes) that Go reads (odd or not), or ("broken", bytes) that it refuses."""
    name, data = draw(names), draw(contents)
    kind = draw(
        st.sampled_from(
            ["file", "v7", "signed", "base256", "spaces", "pax", "global", "long", "hardlink", "folder", "broken"]
        )
    )
    if kind == "file":
        return "ok", member(name, data)
    if kind == "v7":
        return "ok", member(name, data, magic=b"\xffJUNK\0", uname=b"\xfe" * 20)
    if kind == "signed":
        return "ok", member(name + b"\xc3\xa9", data, checksum="signed")
    if kind == "base256":
        return "ok", header(name, 0, size=b"\x80" + len(data).to_bytes(11, "big")) + pad(data)
    if kind == "spaces":
        return "ok", header(name, 0, size=b" \0%o  " % len(data)) + pad(data)
    if kind == "pax":
        records = draw(
            st.lists(st.tuples(st.sampled_from([b"comment", b"mtime", b"SCHILY.x"]), st.binary(max_size=40)))
        )
        records = [(k, v.replace(b"\0", b"") if k != b"SCHILY.x" else v) for k, v in records]
        records = [(k, b"12.5" if k == b"mtime" else v) for k, v in records]
        return "ok", pax([*records, (b"path", b"opt/" + name)]) + member(b"short", data)
    if kind == "global":
        return "ok", pax(draw(st.binary(max_size=200)).replace(b"\n", b"") and b"", type=b"g") + member(name, data)
    if kind == "long":
        return "ok", gnu_long(b"opt/" + b"l" * draw(st.integers(90, 3000))) + member(b"x", data)
    if kind == "hardlink":
        return "ok", header(name + b".lnk", draw(st.integers(0, 5000)), b"1", link=b"etc/a")
    if kind == "folder":
        return "ok", header(name + b"/", draw(st.integers(0, 5000)), b"5")
    broken = draw(st.sampled_from(["checksum", "zero", "pax", "size", "type"]))
    if broken == "checksum":
        block = bytearray(header(name))
        block[148:156] = b"0000001\0"
        return "broken", bytes(block)
    if broken == "zero":
        return "broken", bytes(512) + member(name, data)
    if broken == "pax":
        return "broken", pax(b"99 path=x\n") + member(name, data)
    if broken == "size":
        return "broken", header(name, 0, size=b"9x\0")
    return "broken", member(name, data, b"7")


planted_items = st.sampled_from(
    [
        ("key", b"opt/app/server.dat", "a private key"),
        ("netrc", b"home/u/.netrc", "a netrc file"),
        ("secret", b"etc/copied.ini", "the build's secret pip.conf"),
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    before=st.lists(pieces(), max_size=6),
    after=st.lists(pieces(), max_size=4),
    planted=planted_items,
    padding=st.tuples(st.binary(max_size=3000), st.integers(4100, 20_000)),
    split=st.integers(1, 90),
    ending=st.sampled_from([END, b"", bytes(512), END + bytes(4096)]),
)
def test_a_planted_item_is_found_or_the_layer_is_not_scanned(
    before: list[tuple[str, bytes]],
    after: list[tuple[str, bytes]],
    planted: tuple[str, bytes, str],
    padding: tuple[bytes, int],
    split: int,
    ending: bytes,
) -> None:
    what, name, said = planted
    noise, zeros = padding
    body = {"key": RSA_4096, "netrc": NETRC, "secret": SECRET}[what]
    before_item = noise.replace(b"-", b"") + bytes(zeros)
    content = before_item + body + noise[:100].replace(b"-", b"")
    chunk = len(before_item) + split  # the content is searched in chunks: one ends inside the planted item
    stream = b"".join(p for _, p in before) + member(name, content) + b"".join(p for _, p in after) + ending
    applied = all(state == "ok" for state, _ in before)  # Go stops at the first header it refuses
    clean = all(state == "ok" for state, _ in before + after)
    tracemalloc.start()
    start = time.monotonic()
    try:
        with mock.patch.object(layers, "CHUNK", chunk):
            result = scan(stream, secrets=(("pip.conf", SECRET),))
        seconds = time.monotonic() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    found = [f for f in result.findings if f.key == "/" + name.decode() and said in f.detail]
    if applied:
        assert found or not result.scanned, result
    if clean:
        assert result.scanned and found, result
    assert seconds < 5 and peak < 16 << 20


# --- bounds -------------------------------------------------------------------------------------------------------


def test_past_the_layer_s_bytes_it_is_not_scanned_saying_which() -> None:
    big = layer(("root/.netrc", NETRC), ("opt/big", b"x" * 300_000))
    result = scan(big, Limits(layer_bytes=200_000))
    assert not result.scanned and "the layer passed its bound of 200000 bytes read" in result.note
    assert [f.key for f in result.findings] == ["/root/.netrc"]  # found before the bound


def test_past_the_image_s_bytes_it_is_not_scanned_saying_which() -> None:
    result = scan(layer(("opt/big", b"x" * 300_000)), Limits(image_bytes=100_000))
    assert not result.scanned and "the image passed its bound of 100000 bytes read" in result.note


def test_past_the_time_bounds_it_is_not_scanned_saying_which(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter(range(0, 10**9, 10))
    monkeypatch.setattr(layers, "time", SimpleNamespace(monotonic=lambda: next(ticks)))
    tarball = layer(*[(f"opt/f{n}", b"x" * 600) for n in range(2000)])  # read in about 50 reads
    result = scan(tarball, Limits(layer_seconds=100))
    assert not result.scanned and "the layer passed its bound of 100 s" in result.note
    result = scan(tarball, Limits(image_seconds=100))
    assert not result.scanned and "the image passed its bound of 100 s" in result.note


def test_past_the_findings_or_kept_paths_bound_it_is_not_scanned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layers, "HITS_MAX", 3)
    result = scan(layer(*[(f"home/u{n}/.netrc", NETRC) for n in range(5)]))
    assert not result.scanned and "bound of 3 findings" in result.note and len(result.findings) == 3
    monkeypatch.setattr(layers, "RETAINED_MAX", 4000)
    result = scan(layer(*[(f"usr/share/doc/p{n}/.wh.{'x' * 50}", b"") for n in range(60)]))
    assert not result.scanned and "bytes of paths kept" in result.note


class Lazy:
    """A stream of parts (bytes, or a count of zeros) made as it is read: large without being in memory."""

    def __init__(self, *parts: bytes | int) -> None:
        self.parts = iter(parts)
        self.current: bytes | int = b""

    def read(self, size: int = -1, /) -> bytes:
        while not self.current:
            try:
                self.current = next(self.parts)
            except StopIteration:
                return b""
        if isinstance(self.current, int):
            take = min(size, self.current, 1 << 20)
            self.current -= take
            return bytes(take)
        data, self.current = self.current[:size], self.current[size:]
        return data


def lazy_archive(*layer_parts: bytes | int) -> Iterator[Lazy]:
    """Two streams of one `docker save` archive (made twice: once for its digest, once to be read) of one layer
    made of these parts."""
    size = sum(p if isinstance(p, int) else len(p) for p in layer_parts)
    hashed = hashlib.sha256()
    source = Lazy(*layer_parts)
    while chunk := source.read(1 << 20):
        hashed.update(chunk)
    blob = f"blobs/sha256/{hashed.hexdigest()}"
    config = json.dumps({"rootfs": {"diff_ids": [f"sha256:{hashed.hexdigest()}"]}}).encode()
    manifest = json.dumps([{"Config": "blobs/sha256/config", "Layers": [blob]}]).encode()
    tail = pad(b"") + member(b"blobs/sha256/config", config) + member(b"manifest.json", manifest) + END
    yield Lazy(header(blob.encode(), size), *layer_parts, bytes(-size % 512), tail)


def test_memory_stays_bounded_whatever_the_members_sizes_and_headers() -> None:
    huge = 96 << 20
    parts = (
        header(b"opt/huge.bin", huge),
        huge,  # zeros: a member far larger than any buffer
        pax([(b"comment", b"y" * ((1 << 20) - 40))]),  # a PAX header just under Go's limit
        member(b"x", b"1"),
        gnu_long(b"opt/" + b"n" * 4000),
        member(b"y", RSA_4096),
        member(b"root/.netrc", NETRC),
        END,
    )
    (stream,) = lazy_archive(*parts)
    tracemalloc.start()
    try:
        archive = layers.read_archive(stream, secrets_of([("pip.conf", SECRET)]))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    found, problems = layers.findings(archive, layers.layer_order(archive))
    assert problems == [] and sorted(f.key for f in found) == ["/opt/" + "n" * 4000, "/root/.netrc"]
    assert peak < 12 << 20, peak


def test_a_gzip_bomb_meets_the_layer_s_bound() -> None:
    import gzip

    bomb = io.BytesIO()
    with gzip.GzipFile(fileobj=bomb, mode="wb", mtime=0) as packed:
        packed.write(header(b"opt/zeros", 50 << 20))
        for _ in range(50):
            packed.write(bytes(1 << 20))
    result = scan(bomb.getvalue(), Limits(layer_bytes=8 << 20))
    assert not result.scanned and "the layer passed its bound of 8388608 bytes read" in result.note


def test_the_settings_give_the_bounds() -> None:
    assert Limits.configured({}) == Limits(3600, 1 << 40, 1800, 1 << 38)
    mine = Limits.configured({"TORCHIMAGES_SCAN_SECONDS": "60", "TORCHIMAGES_SCAN_BYTES": "4096"})
    assert mine == Limits(60, 4096, 30, 1024)
    with pytest.raises(tool_settings.SettingError, match="TORCHIMAGES_SCAN_SECONDS"):
        Limits.configured({"TORCHIMAGES_SCAN_SECONDS": "0"})
