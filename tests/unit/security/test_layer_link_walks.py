"""The walks of a layer's links (links.py, layers.py) against the third outside attack: a path written twice in
one layer is its last entry; a walk is bounded and a walk cut short is said; a `..` after a link is not judged
as text; a note's reason claims only what is known; a lower layer's file under a later deletion or file is
said as what it is; the count of notes not shown stays right. Literal layers through the fake engine."""

from __future__ import annotations

import io
import tarfile

from tests.unit.security.test_layer_links import CLEAN, RC
from tests.unit.security.test_layers import BASE, layer, scan

Item = tuple[str, str, bytes | str | None]  # (name, "file" | "link" | "dir", content or target)


def tarball(*items: Item) -> bytes:
    """A layer of these files, symlinks and folders, in this order (a whiteout: a file `.wh.NAME`)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, payload in items:
            info = tarfile.TarInfo(name)
            if kind == "link":
                assert isinstance(payload, str)
                info.type, info.linkname = tarfile.SYMTYPE, payload
                tar.addfile(info)
            elif kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                assert isinstance(payload, bytes)
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
    return out.getvalue()


def scanned(*layers: tuple[Item, ...]) -> tuple[list[tuple[str, str]], str]:
    """The findings (key, detail) and the note of an image of a base layer and these layers."""
    result = scan(layer(*BASE), *(tarball(*items) for items in layers))
    assert result.scanned, result.note
    return [(f.key, f.detail) for f in result.findings], result.note


# --- finding 3: a path written twice in one layer is its last entry ------------------------------------------


def test_a_later_file_at_a_link_s_path_replaces_the_link() -> None:
    found, _ = scanned(
        (
            ("home/u/.bashrc", "link", "/opt/a"),
            ("opt/a", "link", "/opt/clean"),
            ("opt/clean", "file", CLEAN),
            ("opt/a", "file", RC),
        )
    )
    assert [key for key, _ in found] == ["/home/u/.bashrc"]
    assert "a symbolic link to /opt/a, a shell startup file with a login in a URL" in found[0][1]


def test_a_later_folder_at_a_folder_link_s_path_replaces_the_link() -> None:
    found, _ = scanned(
        (
            ("home/u/.bashrc", "link", "/opt/a/rc"),
            ("opt/a", "link", "/opt/clean"),
            ("opt/clean/rc", "file", CLEAN),
            ("opt/a", "dir", None),
            ("opt/a/rc", "file", RC),
        )
    )
    assert [key for key, _ in found] == ["/home/u/.bashrc"]


def test_a_later_whiteout_of_a_link_leaves_the_walk_at_nothing() -> None:
    found, note = scanned(
        (("home/u/.bashrc", "link", "/opt/a"), ("opt/a", "link", "/opt/rc"), ("opt/rc", "file", RC), ("opt/.wh.a", "file", b""))
    )
    assert found == []
    assert "/home/u/.bashrc: a symbolic link to /opt/a: its content was not judged through the link" in note


def test_a_later_file_at_a_judged_link_s_path_is_judged_alone() -> None:
    found, note = scanned((("home/u/.bashrc", "link", "/opt/rc"), ("opt/rc", "file", RC), ("home/u/.bashrc", "file", CLEAN)))
    assert found == []
    assert "not judged" not in note
