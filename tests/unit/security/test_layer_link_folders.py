"""The layer scan's links against the fifth outside attack: a folder replaced later in its layer (by a whiteout,
a file or a link) takes what the layer recorded below it along (the engine removes it with its contents); past
the layer's bound of steps every walk says so (a folder link's too); a hard link to a symbolic link (or through a
folder that is one) is said not judged, truly; the folders above entries are recorded once each. Literal layers
through the fake engine."""

from __future__ import annotations

import io
import posixpath
import tarfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.security.test_layer_link_kernel import DOTDOT
from tests.unit.security.test_layer_link_walks import Item, scanned
from tests.unit.security.test_layer_links import CLEAN, RC
from torchimages.security import layers, links
from torchimages.security.tarstream import TarStream

LOGIN = "a shell startup file with a login in a URL"
NO_FILE = "(no file of this layer is there)"
HARD_TO_SYMLINK = "not judged: a hard link to a symbolic link, or to a path this layer holds no file at"


# --- findings 2, 3: a folder replaced later in its layer takes what is below it ----------------------------------


@pytest.mark.parametrize(
    "replacement",
    [("opt/.wh.d", "file", b""), ("opt/d", "file", b"x"), ("opt/d", "link", "/srv"), ("opt/d", "hard", "etc/x")],
)
def test_a_file_below_a_folder_replaced_later_is_no_finding(replacement: Item) -> None:
    """The engine removes /opt/d with its rc: a shell reads nothing there (no false finding)."""
    found, note = scanned(
        (("etc/x", "file", b""), ("opt/d/rc", "file", RC), replacement, ("root/.bashrc", "link", "/opt/d/rc"))
    )
    assert found == []
    assert "/root/.bashrc: a symbolic link to /opt/d/rc" in note


def test_a_folder_replaced_by_a_link_is_read_through_the_link() -> None:
    """/opt/d -> /srv after opt/d/rc: a shell reads /srv/rc, with the login (no false clean by the old rc)."""
    found, _ = scanned(
        (
            ("opt/d/rc", "file", CLEAN),
            ("opt/d", "link", "/srv"),
            ("srv/rc", "file", RC),
            ("root/.bashrc", "link", "/opt/d/rc"),
        )
    )
    assert found == [
        ("/root/.bashrc", f"/root/.bashrc: a symbolic link to /opt/d/rc (through links: /srv/rc), {LOGIN}")
    ]


def test_a_link_below_a_folder_whited_out_later_is_not_followed() -> None:
    found, note = scanned(
        (
            ("srv/rc", "file", RC),
            ("opt/d/l", "link", "/srv/rc"),
            ("opt/.wh.d", "file", b""),
            ("root/.bashrc", "link", "/opt/d/l"),
        )
    )
    assert found == []
    assert f"/root/.bashrc: a symbolic link to /opt/d/l: its content was not judged through the link {NO_FILE}" in note


def test_a_file_written_below_a_folder_after_its_whiteout_is_judged() -> None:
    found, _ = scanned(
        (
            ("opt/d/old", "file", b""),
            ("opt/.wh.d", "file", b""),
            ("opt/d/rc", "file", RC),
            ("root/.bashrc", "link", "/opt/d/rc"),
        )
    )
    assert found == [("/root/.bashrc", f"/root/.bashrc: a symbolic link to /opt/d/rc, {LOGIN}")]


def test_a_folder_made_again_below_a_whited_out_one_is_a_folder_again() -> None:
    """/opt/d/e is a folder of the layer again after /opt/d's whiteout: its `..` is resolved as text."""
    found, note = scanned(
        (
            ("opt/d/e/x", "file", b""),
            ("opt/.wh.d", "file", b""),
            ("opt/d/e/y", "file", b""),
            ("opt/d/rc", "file", RC),
            ("root/.bashrc", "link", "/opt/d/e/../rc"),
        )
    )
    assert [key for key, _ in found] == ["/root/.bashrc"]
    assert DOTDOT not in note


def test_a_folder_cut_below_it_keeps_its_file_records() -> None:
    """A whiteout of /opt/d/e leaves /opt/d's other files (a cut takes only what is below it)."""
    found, _ = scanned(
        (
            ("opt/d/rc", "file", RC),
            ("opt/d/e/x", "file", b""),
            ("opt/d/.wh.e", "file", b""),
            ("root/.bashrc", "link", "/opt/d/rc"),
        )
    )
    assert [key for key, _ in found] == ["/root/.bashrc"]


# --- finding 4: past the bound of steps, a folder link's walk is said too --------------------------------------

MERGED_USR = (("lib", "link", "usr/lib"), ("usr/lib/x", "file", b""))


def test_past_the_bound_of_steps_a_folder_link_is_said_not_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound passes in the `..` check: /etc/profile.d -> /lib/../pd reads /usr/pd (the login), never /pd."""
    monkeypatch.setattr(layers, "STEPS_MAX", 120)
    monkeypatch.setattr(links, "STEPS_MAX", 120)
    filler = tuple((f"data/f{k}", "file", b"") for k in range(40))
    found, note = scanned(
        MERGED_USR,
        (
            ("opt/cfg", "dir", None),
            *filler,
            ("junk/l1", "link", "/opt/cfg/../cfg/../cfg/../cfg/../cfg/../x"),
            ("pd/proxy.sh", "file", CLEAN),
            ("usr/pd/proxy.sh", "file", RC),
            ("etc/profile.d", "link", "/lib/../pd"),
        ),
    )
    assert found == []
    assert "/etc/profile.d: a symbolic link to /pd: its content was not judged through the link" in note
    assert "took more than the scan's bound of 120 steps to follow" in note
    assert "only its files of this layer that were searched are judged" not in note


# --- finding 8: a hard link to a symbolic link --------------------------------------------------------------------


@pytest.mark.parametrize(
    "layers_items",
    [
        ((("etc/real", "file", RC), ("etc/sym", "link", "/etc/real"), ("root/.bashrc", "hard", "etc/sym")),),
        ((("etc/real", "file", RC),), (("etc/sym", "link", "/etc/real"), ("root/.bashrc", "hard", "etc/sym"))),
        (
            (("etc/sym", "file", CLEAN),),
            (("etc/real", "file", RC), ("etc/sym", "link", "/etc/real"), ("root/.bashrc", "hard", "etc/sym")),
        ),
        ((("opt/real/rc", "file", RC), ("opt/l", "link", "real"), ("root/.bashrc", "hard", "opt/l/rc")),),
        # the sixth attack's 6 and 7: through a lower layer's folder link (merged-usr), and through a folder link
        # this layer replaces later by a folder
        ((("lib", "link", "usr/lib"),), (("usr/lib/rc", "file", RC), ("root/.bashrc", "hard", "lib/rc"))),
        (
            (
                ("opt/d", "link", "/srv"),
                ("srv/rc", "file", RC),
                ("root/.bashrc", "hard", "opt/d/rc"),
                ("opt/d", "dir", None),
            ),
        ),
    ],
    ids=["in-layer", "target-below", "clean-file-below", "through-folder-link", "lower-folder-link", "link-replaced"],
)
def test_a_hard_link_to_a_symbolic_link_is_said_not_judged(layers_items: tuple[tuple[Item, ...], ...]) -> None:
    """link() makes .bashrc that symlink (a shell reads the login): said not judged, never "no file there"."""
    found, note = scanned(*layers_items)
    assert found == []
    assert HARD_TO_SYMLINK in note
    assert NO_FILE not in note


def test_a_symlink_to_a_hard_link_to_a_symbolic_link_is_said_not_judged() -> None:
    found, note = scanned(
        (
            ("etc/real", "file", RC),
            ("etc/sym", "link", "/etc/real"),
            ("etc/h", "hard", "etc/sym"),
            ("root/.bashrc", "link", "/etc/h"),
        )
    )
    assert found == []
    assert HARD_TO_SYMLINK in note


# --- finding 12: each folder above the entries is recorded once ---------------------------------------------------


def test_entries_alternating_between_two_deep_folders_record_each_folder_once() -> None:
    """400 entries alternating between a/a/.../a and b/b/.../b (200 deep): about 400 folders and 400 entries
    recorded, not 400 x 200."""
    index = links.FileIndex()
    for k in range(400):
        path = "/" + ("a/" if k % 2 else "b/") * 200 + f"f{k}"
        index.above(path)
        index.add(path, links.SEARCHED)
    assert len(index.records) // 9 == 800
    assert index.is_folder("/" + "a/" * 199 + "a") and index.is_file("/" + "b/" * 200 + "f0")


def test_a_crafted_deep_layer_keeps_its_records_by_its_folders() -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for k in range(100):
            tar.addfile(tarfile.TarInfo(("a/" if k % 2 else "b/") * 100 + f"f{k}"))
        tar.addfile(tarfile.TarInfo("root/.bashrc"), io.BytesIO(b""))
    reading = layers._Reading([])
    stream = TarStream(io.BytesIO(out.getvalue()))
    for entry in stream:
        reading.entry(stream, entry)
    assert len(reading.files.records) // 9 == 200 + 100 + 2
    assert not reading.files.full


def test_a_walk_that_passes_the_bound_of_steps_midway_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    """About 210 records, a bound of 300: the walk's second lookup passes it, its third is not made (said)."""
    monkeypatch.setattr(layers, "STEPS_MAX", 300)
    monkeypatch.setattr(links, "STEPS_MAX", 300)
    files = tuple((f"data/f{k}", "file", b"") for k in range(200))
    found, note = scanned(
        (*files, ("d", "link", "/e"), ("e", "link", "/f"), ("f/x", "file", RC), ("home/u/.bashrc", "link", "/d/x"))
    )
    assert found == []
    assert "/home/u/.bashrc: a symbolic link to /d/x: its content was not judged" in note
    assert "took more than the scan's bound of 300 steps to follow" in note


def test_a_folder_made_again_after_more_cuts_than_checked_is_a_folder_again() -> None:
    """Past the CUTS_CHECKED cuts since /opt/d/e was recorded, it is recorded again (not taken as uncut)."""
    others = tuple(
        item for k in range(links.CUTS_CHECKED) for item in ((f"c{k}/f", "file", b""), (f".wh.c{k}", "file", b""))
    )
    found, note = scanned(
        (
            ("opt/d/e/x", "file", b""),
            ("opt/.wh.d", "file", b""),
            *others,
            ("opt/d/e/y", "file", b""),
            ("opt/d/rc", "file", RC),
            ("root/.bashrc", "link", "/opt/d/e/../rc"),
        )
    )
    assert [key for key, _ in found] == ["/root/.bashrc"]
    assert DOTDOT not in note


# --- the file records against the engine's own rules, by property --------------------------------------------------

PATHS = ["/a", "/b", "/a/a", "/a/b", "/b/a", "/a/a/a", "/a/a/b", "/a/b/a"]
OPS = st.lists(st.tuples(st.sampled_from(["file", "dir", "whiteout", "link"]), st.sampled_from(PATHS)), max_size=30)


def _model(ops: list[tuple[str, str]]) -> dict[str, str]:
    """What the engine leaves of one layer's entries: its folders made above each entry, an entry that is no
    folder at a folder removing it with all it holds."""
    seen: dict[str, str] = {}
    for kind, path in ops:
        folder = posixpath.dirname(path)
        while folder != "/":
            seen[folder] = "dir"
            folder = posixpath.dirname(folder)
        if kind != "dir" and seen.get(path) == "dir":
            seen = {p: k for p, k in seen.items() if not p.startswith(path + "/")}
        seen[path] = kind
    return seen


@given(OPS, st.sampled_from([0, 1, 64]))
def test_the_file_records_show_what_the_engine_leaves(ops: list[tuple[str, str]], checked: int) -> None:
    saved, links.CUTS_CHECKED = links.CUTS_CHECKED, checked
    try:
        index = links.FileIndex()
        for kind, path in ops:
            index.above(path)
            if kind == "dir":
                index.add_folder(path)
                continue
            index.cut(path)
            index.add(path, {"file": links.SEARCHED, "whiteout": links.GONE, "link": links.SYMLINK}[kind])
    finally:
        links.CUTS_CHECKED = saved
    expected = _model(ops)
    assert {p for p in PATHS if index.is_file(p)} == {p for p, k in expected.items() if k == "file"}
    assert {p for p in PATHS if index.is_folder(p)} == {p for p, k in expected.items() if k == "dir"}
