"""Issue 43, the layer scan reads a file's content in chunks (layers.CHUNK) with an overlap: what is split between
two chunks is found as in the whole file. The overlap is the longest needle (a build secret longer than
leaks.MATCH_MAX, embedded across the boundary, is found); the private key's BEGIN line is searched in the whole
window (the overlap and the chunk), not in the chunk alone; a credentials file's mark split in two is found.

Each file is made here, its parts placed at literal offsets from the real chunk size; the scan is the real one."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.unit.security.test_layers import RSA_4096, layer, scan
from torchimages.security import content, layers, leaks
from torchimages.security.leaks import secrets_of

CHUNK = layers.CHUNK  # 1 MiB: the first chunk of a larger file ends there
TAIL = 200_000  # bytes after the split part: more than any overlap, so the last window alone cannot hold it


def text_secret(size: int, seed: int = 7) -> bytes:
    """A build secret of `size` bytes, no URL login in it (only its whole content is a needle)."""
    rng = random.Random(seed)
    lines: list[str] = []
    while sum(len(line) for line in lines) < size:
        lines.append(f"extra-{rng.randrange(10**12):012d} = {rng.randbytes(24).hex()}\n")
    return "".join(lines).encode()[:size]


SECRET = text_secret(leaks.MATCH_MAX + 8_000)  # 24 KiB: longer than the default match length


@pytest.mark.parametrize("before", [leaks.MATCH_MAX + 100, len(SECRET) - 50, len(SECRET) // 2])
def test_a_secret_longer_than_the_match_length_split_between_two_chunks_is_found(tmp_path: Path, before: int) -> None:
    """`before` bytes of the secret are the first chunk's last, the rest the second chunk's first."""
    secret = tmp_path / "pip.conf"
    secret.write_bytes(SECRET)
    embedded = b"#" * (CHUNK - before) + SECRET + b"#" * TAIL
    result = scan(layer(("etc/app/settings.ini", embedded)), secret_files=(secret,))
    assert [(f.key, f.detail) for f in result.findings] == [
        ("/etc/app/settings.ini", "/etc/app/settings.ini: the content of the build's secret pip.conf")
    ]


def test_the_overlap_is_the_longest_needle() -> None:
    (secret,) = secrets_of([("pip.conf", SECRET)])
    search = content.Search([secret], None, CHUNK * 2)
    assert search.overlap == len(SECRET) > leaks.MATCH_MAX
    assert content.Search([], None, 10).overlap == leaks.MATCH_MAX


@pytest.mark.parametrize("into", [0, 5, 11, 40, 200])
def test_a_private_key_split_between_two_chunks_is_found_whatever_follows(into: int) -> None:
    """The key's first `into` bytes end the first chunk; a large file follows it (the last window lacks it)."""
    split = b"\0" * (CHUNK - into) + RSA_4096 + b"\0" * TAIL
    result = scan(layer(("opt/app/model.bin", split)))
    assert [f.detail for f in result.findings] == [
        "/opt/app/model.bin: a private key (-----BEGIN RSA PRIVATE KEY-----)"
    ]


def test_a_private_key_fed_in_small_chunks_is_found_in_the_window() -> None:
    data = b"\0" * 5_000 + RSA_4096 + b"\0" * 60_000
    search = content.Search([], None, len(data))
    for at in range(0, len(data), 1000):  # chunks smaller than the key: its BEGIN line is never in one alone
        search.feed(data[at : at + 1000])
    assert search.facts().key == "-----BEGIN RSA PRIVATE KEY-----"


@pytest.mark.parametrize("into", [1, 6, 10])
def test_a_credentials_mark_split_between_two_chunks_is_found(into: int) -> None:
    """The mark's (`_authToken=`) first `into` bytes end the first chunk."""
    line = b"//registry.npmjs.org/:"
    npmrc = b"; " + b"x" * (CHUNK - into - len(line) - 2) + line + b"_authToken=npm_0123456789\n" + b";" * TAIL
    assert npmrc[CHUNK - into : CHUNK] == b"_authToken="[:into]
    result = scan(layer(("home/dev/.npmrc", npmrc)))
    assert [f.detail for f in result.findings] == [
        "/home/dev/.npmrc: an .npmrc with an auth token or credentials in a URL"
    ]
