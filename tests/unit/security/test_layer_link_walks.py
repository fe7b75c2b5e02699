"""The walks of a layer's links (links.py, layers.py) against the third outside attack: a path written twice in
one layer is its last entry; a walk is bounded and a walk cut short is said; a `..` after a link is not judged
as text; a note's reason claims only what is known; a lower layer's file under a later deletion or file is
said as what it is; the count of notes not shown stays right. Literal layers through the fake engine."""

from __future__ import annotations

import io
import tarfile
import time

import pytest

from tests.unit.security.test_layer_links import CLEAN, RC
from tests.unit.security.test_layers import BASE, layer, scan
from torchimages.security import layers, links

Item = tuple[
    str, str, bytes | str | None
]  # (name, "file" | "link" | "hard" | "dir" | "fifo" | "chr", content or target)


def tarball(*items: Item) -> bytes:
    """A layer of these files, links, folders, FIFOs and devices, in this order (a whiteout: a file `.wh.NAME`)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, payload in items:
            info = tarfile.TarInfo(name)
            if kind in ("link", "hard"):
                assert isinstance(payload, str)
                info.type, info.linkname = (tarfile.SYMTYPE if kind == "link" else tarfile.LNKTYPE), payload
                tar.addfile(info)
            elif kind in ("dir", "fifo", "chr"):
                info.type = {"dir": tarfile.DIRTYPE, "fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE}[kind]
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
        (
            ("home/u/.bashrc", "link", "/opt/a"),
            ("opt/a", "link", "/opt/rc"),
            ("opt/rc", "file", RC),
            ("opt/.wh.a", "file", b""),
        )
    )
    assert found == []
    assert "/home/u/.bashrc: a symbolic link to /opt/a: its content was not judged through the link" in note


def test_a_later_file_at_a_judged_link_s_path_is_judged_alone() -> None:
    found, note = scanned(
        (("home/u/.bashrc", "link", "/opt/rc"), ("opt/rc", "file", RC), ("home/u/.bashrc", "file", CLEAN))
    )
    assert found == []
    assert "not judged" not in note


# --- finding 4: a walk is bounded, and one cut short is said ---------------------------------------------------


def test_a_walk_past_path_max_stops_and_is_said_with_its_paths_cut() -> None:
    deep = "/d" + "/a" * 2000  # each step through /d lengthens the walk's path by 4000 bytes: past PATH_MAX
    found, note = scanned((("d", "link", deep), ("home/u/.bashrc", "link", "/d/x")))
    assert found == []
    assert f"its walk reaches a path longer than {links.PATH_MAX} bytes" in note
    assert len(note) < 2000, len(note)
    assert "more characters)" in note


def test_a_walk_within_path_max_is_followed() -> None:
    deep = "/d" + "/a" * 2000  # 4002 bytes, and /x: within PATH_MAX
    found, _ = scanned((("d", "link", deep), ("home/u/.bashrc", "link", "/d/x"), (deep[1:] + "/x", "file", RC)))
    assert [key for key, _ in found] == ["/home/u/.bashrc"]


def test_the_layer_s_walks_stop_past_the_work_bound_and_are_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(links, "WORK_MAX", 1000)
    monkeypatch.setattr(layers, "WORK_MAX", 1000)
    deep = "/d" + "/a" * 300
    rcs = tuple((f"home/u{at}/.bashrc", "link", "/d/x") for at in range(3))
    found, note = scanned((("d", "link", deep), *rcs, (deep[1:] + "/x", "file", RC)))
    assert [key for key, _ in found] == ["/home/u0/.bashrc"]
    assert note.count("took more than the scan's bound of 1000 bytes of paths to follow") == 2


def test_many_long_walks_end_in_bounded_time() -> None:
    deep = "/d" + "/a" * 2000
    rcs = tuple((f"home/u{at}/.bashrc", "link", "/d/x") for at in range(links.FOLLOWED_MAX))
    started = time.monotonic()
    _, note = scanned((("d", "link", deep), *rcs))
    assert time.monotonic() - started < 60
    assert "not judged" in note


# --- finding 2: a `..` after a link is not resolved as text ------------------------------------------------------


def test_a_dotdot_after_a_folder_link_is_said_not_judged_as_text() -> None:
    found, note = scanned(
        (
            ("etc/profile.d/p.sh", "link", "/opt/link/../real.sh"),
            ("opt/link", "link", "/srv/deep/dir"),
            ("srv/deep/dir/x", "file", b""),
            ("srv/deep/real.sh", "file", RC),
            ("opt/real.sh", "file", CLEAN),
        )
    )
    assert found == []  # the kernel reads /srv/deep/real.sh; the scan does not claim either file
    assert "/etc/profile.d/p.sh: a symbolic link to /opt/link/../real.sh: its content was not judged" in note
    assert "not judged: a `..` after a link" in note


def test_a_dotdot_after_a_link_on_the_way_is_said() -> None:
    _, note = scanned(
        (
            ("home/u/.bashrc", "link", "/opt/a"),
            ("opt/a", "link", "/opt/link/../real.sh"),
            ("opt/link", "link", "/srv/deep/dir"),
            ("opt/real.sh", "file", RC),
        )
    )
    assert "not judged: a `..` after a link" in note


def test_a_plain_dotdot_is_still_judged() -> None:
    found, note = scanned(
        (
            ("home/u/.bashrc", "link", "../../opt/cfg/../real.sh"),
            ("opt/cfg/x", "file", b""),
            ("opt/real.sh", "file", RC),
        )
    )
    assert [key for key, _ in found] == ["/home/u/.bashrc"]
    assert "`..`" not in note


def test_dotdot_after_link_reads_the_text_s_folders() -> None:
    assert links.dotdot_after_link("/opt/link/../x", {"/opt/link"})
    assert links.dotdot_after_link("/opt/link/sub/../x", {"/opt/link"})
    assert not links.dotdot_after_link("/opt/link/../x", {"/opt/other"})
    assert not links.dotdot_after_link("/../../opt/x/../y", {"/opt"} - {"/opt"})
    assert links.dotdot_after_link("/a" * 2100 + "/x", set())  # past PATH_MAX: not resolved


# --- findings 1 and 9: what another layer's file is said to be ---------------------------------------------------

HOLDS = "layer {n} holds a file at the path it names that, read here, is a shell startup file with a login in a URL"


def test_a_link_to_a_higher_layer_s_file_with_a_login_is_found() -> None:
    found, _ = scanned(
        (("etc/profile.d/proxy.sh", "link", "/opt/conf/proxy.sh"),), (("opt/conf/proxy.sh", "file", RC),)
    )
    assert found == [
        (
            "/etc/profile.d/proxy.sh",
            "/etc/profile.d/proxy.sh: a symbolic link to /opt/conf/proxy.sh: " + HOLDS.format(n=3),
        )
    ]


def test_a_chain_across_layers_is_not_followed_and_the_note_claims_no_place() -> None:
    found, note = scanned((("opt/a", "link", "/opt/b"), ("opt/b", "file", RC)), (("home/u/.bashrc", "link", "/opt/a"),))
    assert found == []
    assert "/home/u/.bashrc: a symbolic link to /opt/a: its content was not judged through the link" in note
    assert "(no file of this layer is there)" in note
    assert "lower layer" not in note


def test_a_lower_file_deleted_or_replaced_between_is_said_as_what_is_known() -> None:
    for between in (("opt/.wh.a", "file", b""), ("opt/a", "file", CLEAN)):
        found, _ = scanned((("opt/a", "file", RC),), (between,), (("home/u/.bashrc", "link", "/opt/a"),))
        assert found == [("/home/u/.bashrc", "/home/u/.bashrc: a symbolic link to /opt/a: " + HOLDS.format(n=2))]


# --- finding 10: the count of notes not shown ---------------------------------------------------------------------


def test_the_count_of_notes_past_the_bound_survives_a_noted_link_judged_below() -> None:
    absent = [(f"etc/profile.d/a{at:03}.sh", "link", f"/nothing/{at}") for at in range(layers.NOTES_MAX - 1)]
    judged_below = ("etc/profile.d/z.sh", "link", "/opt/t")
    more = [(f"etc/profile.d/zz{at}.sh", "link", f"/nothing/more{at}") for at in range(7)]
    found, note = scanned((("opt/t", "file", RC),), (*absent, judged_below, *more))
    assert [key for key, _ in found] == ["/etc/profile.d/z.sh"]
    assert note.endswith(f"; and {layers.NOTES_MAX - 1 - layers.NOTES_SHOWN + 7} more")  # 99 said, 7 counted


def test_a_later_folder_at_a_judged_folder_link_s_path_replaces_the_link() -> None:
    found, note = scanned(
        (("etc/profile.d", "link", "/opt/pd"), ("opt/pd/proxy.sh", "file", RC), ("etc/profile.d", "dir", None))
    )
    assert found == []  # /etc/profile.d is a folder of its own: /opt/pd's files are not read there
    assert "not judged" not in note


def test_a_layer_with_more_dotdot_links_than_kept_says_its_judged_links_unsure(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past FOLLOWED_MAX links with a `..`, those not kept could be on any walk: a judged link is said, never
    resolved as text (/a/../secret reads /x/secret through /a -> /x/y; as text it is the clean /secret)."""
    from torchimages.security import layers as layers_module

    monkeypatch.setattr(layers_module, "FOLLOWED_MAX", 3)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:

        def add(name: str, kind: bytes, data: bytes = b"", target: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.type, info.linkname, info.size = kind, target, len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)

        for k in range(5):
            add(f"junk/l{k}", tarfile.SYMTYPE, target="../x")
        add("x/secret", tarfile.REGTYPE, b"export http_proxy=http://user:hunter2@proxy:3128\n")
        add("secret", tarfile.REGTYPE, b"echo hi\n")
        add("a", tarfile.SYMTYPE, target="/x/y")
        add("root/.bashrc", tarfile.SYMTYPE, target="/a/../secret")
    buffer.seek(0)
    layer = layers_module.read_layer(buffer, [])
    assert layer.hits == ()
    assert [n.path for n in layer.notes] == ["/root/.bashrc"]
    assert "links with a `..`, more than the scan keeps" in layer.notes[0].detail
