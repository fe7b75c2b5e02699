"""Links at paths judged by content (a shell's startup file, a wgetrc, /etc/profile.d): followed through chains
of links and links to folders within the layer, in any order of the layer's entries; a target whose content
was not read (another layer's, a binary, a file past the bound, a loop, a chain too long) is said in the scan's
note, never passed silently. Literal layers through the fake engine (test_layers' helpers)."""

from __future__ import annotations

import io
import itertools
import tarfile
from pathlib import Path

import pytest

from tests.unit.security.test_layer_cache import engine_with
from tests.unit.security.test_layers import BASE, REFERENCE, layer, scan
from torchimages.security import layer_cache, leaks, links
from torchimages.security.layer_cache import LayerCache
from torchimages.security.layers import Layer
from torchimages.security.layers import scan as layers_scan
from torchimages.security.leaks import Hit

RC = b"export http_proxy=http://bob:hunter2hunter2@proxy:3128\n"
CLEAN = b"# ~/.bashrc\nalias ll='ls -l'\n"
Entry = tuple[str, bytes | None, str | None]  # (name, content, symlink target): a file or a symlink


def ordered(*entries: Entry) -> bytes:
    """A layer of these files and symlinks, in this order."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data, target in entries:
            info = tarfile.TarInfo(name)
            if target is not None:
                info.type, info.linkname = tarfile.SYMTYPE, target
                tar.addfile(info)
            else:
                assert data is not None
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def scanned(*entries: Entry, lower: tuple[tuple[str, bytes], ...] = ()) -> tuple[list[tuple[str, str]], str]:
    """The findings (key, detail) and the note of an image of a base layer (and `lower`'s files) and one layer."""
    result = scan(layer(*BASE, *lower), ordered(*entries))
    assert result.scanned, result.note
    return [(f.key, f.detail) for f in result.findings], result.note


CHAIN = (("home/u/.bashrc", None, "/opt/z"), ("opt/z", None, "/opt/a"), ("opt/a", RC, None))


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_a_chain_of_links_to_a_login_is_found_in_any_order(order: tuple[int, ...]) -> None:
    found, note = scanned(*(CHAIN[at] for at in order))
    assert [key for key, _ in found] == ["/home/u/.bashrc"]
    assert "a shell startup file with a login in a URL" in found[0][1]
    assert "not judged" not in note


@pytest.mark.parametrize("link_first", [True, False])
def test_a_link_to_a_small_text_file_with_a_login_is_found_before_and_after_it(link_first: bool) -> None:
    entries = [("etc/wgetrc", None, "/opt/cfg/wgetrc.real"), ("opt/cfg/wgetrc.real", b"http_passwd = s3cret\n", None)]
    found, note = scanned(*(entries if link_first else entries[::-1]))
    assert found == [
        (
            "/etc/wgetrc",
            "/etc/wgetrc: a symbolic link to /opt/cfg/wgetrc.real, a wgetrc with a password or a login in a URL",
        )
    ]
    assert "not judged" not in note


def test_a_link_through_a_folder_link_is_followed() -> None:
    found, _ = scanned(("home/u/.bashrc", None, "/opt/cfg/rc"), ("opt/cfg", None, "/srv/cfg"), ("srv/cfg/rc", RC, None))
    assert [key for key, _ in found] == ["/home/u/.bashrc"]
    assert "(through links: /srv/cfg/rc)" in found[0][1]


def test_a_link_to_a_clean_text_file_is_no_finding_and_no_note() -> None:
    found, note = scanned(("home/u/.bashrc", None, "/etc/skel/.bashrc"), ("etc/skel/.bashrc", CLEAN, None))
    assert (found, note) == ([], "2 layers, 5 entries")


def test_a_link_to_another_layer_s_file_is_said() -> None:
    found, note = scanned(("home/u/.bashrc", None, "/opt/cfg/rc"), lower=(("opt/cfg/rc", CLEAN),))
    assert found == []
    assert "/home/u/.bashrc: a symbolic link to /opt/cfg/rc: its content was not judged through the link" in note
    assert "no file of this layer is there" in note


def test_a_link_to_a_lower_layer_s_file_with_a_login_is_found() -> None:
    found, note = scanned(
        ("home/u/.bashrc", None, "/opt/z"), ("opt/z", None, "/opt/cfg/rc"), lower=(("opt/cfg/rc", RC),)
    )
    assert found == [
        (
            "/home/u/.bashrc",
            "/home/u/.bashrc: a symbolic link to /opt/z (through links: /opt/cfg/rc): layer 1 holds a file at the"
            " path it names that, read here, is a shell startup file with a login in a URL",
        )
    ]
    assert "not judged" not in note
    found, _ = scanned(("etc/wgetrc", None, "/opt/cfg/rc"), lower=(("opt/cfg/rc", b"# no password\n"),))
    assert found == []


def test_a_lower_layer_s_marks_go_through_the_cache(tmp_path: Path) -> None:
    engine = engine_with([layer(*BASE, ("opt/cfg/rc", RC)), ordered(("home/u/.bashrc", None, "/opt/cfg/rc"))])
    cache = LayerCache(tmp_path / "cache", 1 << 30)
    first = layers_scan(engine, REFERENCE, (), cache=cache)
    again = layers_scan(engine, REFERENCE, (), cache=cache)
    assert "(2 from the cache)" in again.note
    assert [f.detail for f in again.findings] == [f.detail for f in first.findings] != []


@pytest.mark.parametrize(
    ("content", "why"),
    [(RC + b"\0", "it is a binary file (a NUL byte)"), (RC + b"#" * leaks.LINK_READ_MAX, "it is larger than 1 MiB")],
)
def test_a_link_to_a_binary_or_large_file_is_said(content: bytes, why: str) -> None:
    found, note = scanned(("home/u/.curlrc", None, "/opt/x"), ("opt/x", content, None))
    assert found == []
    assert "/home/u/.curlrc: a symbolic link to /opt/x: its content was not judged through the link" in note
    assert f"the file was not searched: {why}" in note


def test_a_loop_and_a_chain_too_long_are_said() -> None:
    _, note = scanned(("home/u/.bashrc", None, "/opt/a"), ("opt/a", None, "/opt/b"), ("opt/b", None, "/opt/a"))
    assert "its links make a loop" in note
    chain = [(f"opt/l{at}", None, f"/opt/l{at + 1}") for at in range(links.LINK_DEPTH + 1)]
    _, note = scanned(("home/u/.bashrc", None, "/opt/l0"), *chain, (f"opt/l{links.LINK_DEPTH + 1}", RC, None))
    assert f"more than {links.LINK_DEPTH} links" in note
    chain = [(f"opt/l{at}", None, f"/opt/l{at + 1}") for at in range(links.LINK_DEPTH - 1)]
    found, _ = scanned(("home/u/.bashrc", None, "/opt/l0"), *chain, (f"opt/l{links.LINK_DEPTH - 1}", RC, None))
    assert [key for key, _ in found] == ["/home/u/.bashrc"]


def test_a_link_at_a_folder_judged_by_content_judges_its_files_and_is_said() -> None:
    found, note = scanned(("etc/profile.d", None, "/opt/pd"), ("opt/pd/proxy.sh", RC, None))
    assert [key for key, _ in found] == ["/etc/profile.d/proxy.sh"]
    assert "through the symbolic link /etc/profile.d to /opt/pd" in found[0][1]
    assert "/etc/profile.d: a symbolic link to /opt/pd at a folder where files are judged by their content" in note
    found, note = scanned(("opt/pd/proxy.sh", CLEAN, None), ("etc/profile.d", None, "/opt/pd"))
    assert found == []
    assert "/etc/profile.d: a symbolic link to /opt/pd" in note


def test_the_notes_go_through_the_cache() -> None:
    kept = Layer(
        (Hit("/root/.netrc", "a netrc file"),),
        entries=3,
        notes=(Hit("/home/u/.bashrc", "a link"),),
        marked=(("/opt/cfg/rc", (0, 2)),),
        unresolved=(("/home/u/.bashrc", "a symbolic link", "/opt/z", "/opt/cfg/rc"),),
    )
    data = layer_cache.encode("sha256:" + "0" * 64, "r", "s", kept)
    assert layer_cache.decode(data, "sha256:" + "0" * 64, "r", "s") == kept


def test_the_file_index_finds_a_path_only_at_a_record_s_start() -> None:
    index = links.FileIndex()
    for at in range(1000):
        index.add(f"/usr/lib/f{at}", "it is a binary file (a NUL byte)" if at % 2 else "")
    assert index.get("/usr/lib/f7") == "it is a binary file (a NUL byte)"
    assert index.get("/usr/lib/f8") == ""
    assert index.get("/usr/lib/f1000") is None
    index.add("/usr/lib/f7", "")  # written again: the later one
    assert index.get("/usr/lib/f7") == ""
