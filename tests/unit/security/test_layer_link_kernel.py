"""The layer scan's links against the fourth outside attack: a link is judged by exactly the bytes a container
would read there, or said not judged. A `..` after a folder the layer does not show to be one (a lower layer's
link: merged-usr's /lib -> usr/lib) or in a folder link's target; folder links at the folders of fish's, csh's
and pam_env's files; a target with a trailing `/`; a hard link's content at the point of the archive it is met;
the links or files past those kept; a folder or a whiteout replacing a file; the layer's bound of steps.
Literal layers through the fake engine."""

from __future__ import annotations

import io
import posixpath
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.security.test_layer_link_walks import Item, scanned, tarball
from tests.unit.security.test_layer_links import CLEAN, RC
from torchimages.security import layers, links

DOTDOT = "not judged: a `..` after a link, or after a folder this layer does not show to be one"

# --- 1: a `..` the kernel resolves from where a link leads ----------------------------------------------------

MERGED_USR = (("lib", "link", "usr/lib"), ("usr/lib/x", "file", b""))


def test_a_dotdot_after_a_lower_layer_s_folder_link_is_no_false_finding() -> None:
    """/lib/../etc/rc reads /usr/etc/rc (/lib -> usr/lib below): not the /etc/rc with a login that the text names."""
    found, note = scanned(MERGED_USR, (("etc/rc", "file", RC), ("root/.bashrc", "link", "/lib/../etc/rc")))
    assert found == []
    assert "/root/.bashrc: a symbolic link to /lib/../etc/rc: its content was not judged" in note
    assert DOTDOT in note


def test_a_dotdot_after_a_lower_layer_s_folder_link_is_no_false_clean() -> None:
    """The login is in /usr/etc/rc, which the kernel reads; the text's /etc/rc is clean: said, never passed."""
    found, note = scanned(
        MERGED_USR, (("etc/rc", "file", CLEAN), ("usr/etc/rc", "file", RC), ("root/.bashrc", "link", "/lib/../etc/rc"))
    )
    assert found == []
    assert DOTDOT in note


def test_a_dotdot_after_a_folder_the_layer_holds_is_judged() -> None:
    found, note = scanned(
        (("opt/cfg", "dir", None), ("opt/rc", "file", RC), ("root/.bashrc", "link", "/opt/cfg/../rc"))
    )
    assert [key for key, _ in found] == ["/root/.bashrc"]
    assert "`..`" not in note


def test_a_folder_link_whose_target_has_a_dotdot_after_a_link_is_not_judged_as_text() -> None:
    """/etc/profile.d -> /opt/link/../pd reads /srv/pd (/opt/link -> /srv/x), not the text's /opt/pd."""
    found, note = scanned(
        (
            ("opt/link", "link", "/srv/x"),
            ("srv/x/f", "file", b""),
            ("opt/pd/proxy.sh", "file", RC),
            ("etc/profile.d", "link", "/opt/link/../pd"),
        )
    )
    assert found == []
    assert "/etc/profile.d: a symbolic link to /opt/pd" in note
    assert DOTDOT in note


# --- 2: folder links at the folders of fish's, csh's and pam_env's files ---------------------------------------


@pytest.mark.parametrize(
    ("folder", "inside"),
    [
        ("etc/fish", "config.fish"),
        ("etc/fish/conf.d", "proxy.fish"),
        ("etc/security", "pam_env.conf"),
        ("etc/csh", "cshrc.d/proxy"),
    ],
)
def test_a_link_at_a_folder_of_startup_files_judges_its_files_through_it(folder: str, inside: str) -> None:
    found, note = scanned((("opt/shared/" + inside, "file", RC), (folder, "link", "/opt/shared")))
    assert [key for key, _ in found] == [f"/{folder}/{inside}"]
    assert f"/{folder}: a symbolic link to /opt/shared at a folder where files are judged by their content" in note


def test_a_link_at_another_folder_is_not_judged_as_one_of_startup_files() -> None:
    assert not layers.judged_folder("/usr/lib")
    assert not layers.judged_folder("/root")
    assert layers.judged_folder("/etc/fish")


# --- 3: a target with a trailing `/` names a folder -------------------------------------------------------------


@pytest.mark.parametrize("target", ["/etc/rc/", "/etc/rc/.", "../etc/rc/"])
def test_a_link_to_a_folder_by_its_trailing_slash_is_not_judged_by_the_file(target: str) -> None:
    """The kernel refuses to open `rc/` as a file: a shell reads nothing there."""
    found, note = scanned((("etc/rc", "file", RC), ("root/.bashrc", "link", target)))
    assert found == []
    assert "/root/.bashrc" not in note


def test_a_link_to_a_folder_by_its_trailing_slash_is_not_judged_by_a_lower_file() -> None:
    found, note = scanned((("etc/rc", "file", RC),), (("root/.bashrc", "link", "/etc/rc/"),))
    assert found == []
    assert "/root/.bashrc" not in note


# --- 4: a hard link holds its target's content at the point of the archive it is met ------------------------


def test_a_hard_link_is_not_judged_by_a_later_file_at_its_target_s_path() -> None:
    found, note = scanned((("opt/rc", "file", CLEAN), ("home/u/.bashrc", "hard", "opt/rc"), ("opt/rc", "file", RC)))
    assert found == []
    assert "/home/u/.bashrc" not in note


def test_a_hard_link_is_judged_by_the_file_it_was_made_of() -> None:
    found, _ = scanned((("opt/rc", "file", RC), ("home/u/.bashrc", "hard", "opt/rc"), ("opt/rc", "file", CLEAN)))
    assert [key for key, _ in found] == ["/home/u/.bashrc"]
    assert "a hard link to /opt/rc" in found[0][1]


def test_a_symlink_to_a_hard_link_reads_the_hard_link_s_content() -> None:
    found, _ = scanned(
        (
            ("opt/rc", "file", RC),
            ("opt/h", "hard", "opt/rc"),
            ("opt/rc", "file", CLEAN),
            ("home/u/.bashrc", "link", "/opt/h"),
        )
    )
    assert [key for key, _ in found] == ["/home/u/.bashrc"]


def test_a_hard_link_through_a_hard_link_re_linked_later_reads_what_that_link_named_then() -> None:
    """The kernel gives .bashrc the inode /opt/h1 named when .bashrc was made: /opt/c's (clean), though /opt/h1
    is re-linked later; a lower layer's file at /opt/h1 does not judge it (seventh attack, finding 1)."""
    found, note = scanned(
        (("opt/h1", "file", RC),),
        (
            ("opt/c", "file", CLEAN),
            ("opt/h1", "hard", "opt/c"),
            ("home/u/.bashrc", "hard", "opt/h1"),
            ("opt/c2", "file", CLEAN),
            ("opt/h1", "hard", "opt/c2"),
        ),
    )
    assert found == []
    assert "/home/u/.bashrc" not in note


@pytest.mark.parametrize(
    "replacements",
    [
        (("opt/h1", "hard", "opt/clean"),),
        (("opt/h1", "file", CLEAN),),
        (("opt/s", "link", "/opt/clean"), ("opt/h1", "hard", "opt/s"), ("opt/h1", "hard", "opt/clean")),
    ],
    ids=["re-linked", "a file", "re-linked twice"],
)
def test_a_hard_link_through_a_replaced_hard_link_is_judged_by_the_file_it_was_made_of(
    replacements: tuple[Item, ...],
) -> None:
    found, note = scanned(
        (
            ("opt/rc", "file", RC),
            ("opt/h1", "hard", "opt/rc"),
            ("home/u/.bashrc", "hard", "opt/h1"),
            ("opt/clean", "file", CLEAN),
            *replacements,
        )
    )
    assert [key for key, _ in found] == ["/home/u/.bashrc"]
    assert "/home/u/.bashrc" not in note


def test_a_hard_link_through_a_hard_link_whose_folder_is_removed_later_reads_what_it_named() -> None:
    found, note = scanned(
        (
            ("opt/rc", "file", RC),
            ("opt/d/h", "hard", "opt/rc"),
            ("home/u/.bashrc", "hard", "opt/d/h"),
            ("opt/.wh.d", "file", b""),
        )
    )
    assert [key for key, _ in found] == ["/home/u/.bashrc"]
    assert "/home/u/.bashrc" not in note


def test_a_hard_link_to_its_own_path_is_said_not_judged() -> None:
    """The engine removes the path, then links it to what is there: nothing; said, never judged clean."""
    found, note = scanned(
        (
            ("opt/rc", "file", RC),
            ("opt/h", "hard", "opt/rc"),
            ("opt/h", "hard", "opt/h"),
            ("root/.bashrc", "hard", "opt/h"),
        )
    )
    assert found == []
    assert "/root/.bashrc: a hard link to /opt/h: its content was not judged" in note
    assert "not judged: /opt/h on its way is a hard link to its own path, which the engine cannot make" in note
    alone, note = scanned((("opt/rc", "file", RC), ("home/u/.bashrc", "hard", "/home/u/.bashrc")))
    assert alone == []
    assert "/home/u/.bashrc: a hard link to /home/u/.bashrc: its content was not judged through the link (not" in note
    assert "not judged: /home/u/.bashrc on its way is a hard link to its own path" in note


@pytest.mark.parametrize("kind", ["fifo", "file"])
def test_a_folder_link_to_a_file_or_fifo_is_not_said_to_lead_to_a_folder(kind: str) -> None:
    """The note says the link is at a folder judged by content (/etc/profile.d), not that its target is a folder:
    a file at the target's spelling may have become a folder through a link above it (`/opt -> /srv`)."""
    found, note = scanned((("opt/pd", kind, None if kind == "fifo" else CLEAN), ("etc/profile.d", "link", "/opt/pd")))
    assert found == []
    assert "/etc/profile.d: a symbolic link to /opt/pd at a folder where files are judged by their content" in note


def test_a_folder_link_to_a_file_made_a_folder_through_a_link_above_it_is_said() -> None:
    """The engine writes /opt/pd/x.sh through /opt -> /srv, so /srv/pd is a folder holding the login: the folder
    link to /srv/pd is said (not judged by the scan, which keys paths as written), never silent."""
    _, note = scanned(
        (
            ("srv/pd", "file", CLEAN),
            ("opt", "link", "/srv"),
            ("opt/pd", "dir", None),
            ("opt/pd/x.sh", "file", RC),
            ("etc/profile.d", "link", "/srv/pd"),
        )
    )
    assert "/etc/profile.d: a symbolic link to /srv/pd at a folder where files are judged" in note


@pytest.mark.parametrize(
    "layers",
    [
        ((("opt/rc", "file", RC),), (("opt/rc", "fifo", None), ("home/u/.bashrc", "link", "/opt/rc"))),
        ((("opt/rc", "file", RC), ("opt/rc", "chr", None), ("home/u/.bashrc", "link", "/opt/rc")),),
        ((("opt/rc", "file", RC),), (("opt/rc", "chr", None), ("home/u/.bashrc", "hard", "opt/rc"))),
        (
            (
                ("opt/rc", "file", RC),
                ("opt/h", "hard", "opt/rc"),
                ("opt/h", "fifo", None),
                ("home/u/.bashrc", "hard", "opt/h"),
            ),
        ),
    ],
    ids=["fifo-over-a-lower-file", "device-over-its-layer-s-file", "hard-to-a-device", "hard-through-a-replaced-link"],
)
def test_a_link_to_a_fifo_or_device_reads_nothing_of_the_image(layers: tuple[tuple[Item, ...], ...]) -> None:
    """A FIFO or a device replaces the file at its path: a link to it reads what a process writes, not the
    image (neither the file it replaced nor a lower layer's is judged for it), and nothing is said."""
    found, note = scanned(*layers)
    assert found == []
    assert "/home/u/.bashrc" not in note


# --- 5: past the links or files kept, a link is said not judged -----------------------------------------------


def test_past_the_links_kept_a_replaced_file_does_not_make_a_link_look_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layers, "LINKS_KEPT_MAX", 600)
    filler = tuple((f"junk/l{k}", "link", f"/junk/t{k}") for k in range(10))
    found, note = scanned(
        (
            ("opt/rc", "file", CLEAN),
            *filler,
            ("opt/rc", "link", "/opt/real"),  # past the bound: not kept
            ("opt/real", "file", RC),
            ("home/u/.bashrc", "link", "/opt/rc"),
        )
    )
    assert found == []
    assert "/home/u/.bashrc: a symbolic link to /opt/rc: its content was not judged" in note
    assert "not judged: this layer has more links or files than the scan keeps to follow" in note


# --- 6: a folder or a whiteout replaces a file's facts --------------------------------------------------------


@pytest.mark.parametrize("replacement", [("opt/rc", "dir", None), ("opt/.wh.rc", "file", b"")])
def test_a_folder_or_whiteout_replacing_a_file_drops_its_facts(replacement: Item) -> None:
    found, note = scanned((("opt/rc", "file", RC), replacement, ("home/u/.bashrc", "link", "/opt/rc")))
    assert found == []
    assert "/home/u/.bashrc: a symbolic link to /opt/rc: its content was not judged" in note
    assert "(no file of this layer is there)" in note


# --- 7: the layer's walks are bounded in steps --------------------------------------------------------------


def test_the_layer_s_walks_stop_past_the_bound_of_steps_and_are_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layers, "STEPS_MAX", 50)
    monkeypatch.setattr(links, "STEPS_MAX", 50)
    files = tuple((f"data/f{k}", "file", b"") for k in range(20))
    rcs = tuple((f"home/u{k}/.bashrc", "link", "/d/x") for k in range(5))
    found, note = scanned((*files, ("d", "link", "/e"), ("e/x", "file", RC), *rcs))
    assert len(found) < 5
    assert f"took more than the scan's bound of {50} steps to follow" in note


def test_a_crafted_many_link_layer_ends_within_seconds() -> None:
    """Each walk passes 40 folder links, a lookup of every file record at each: 1000 walks of 41 lookups of
    60,000 records (2.5 G records looked at) stop at the bound of steps, said (within the 100 notes)."""
    folders = tuple((f"f{k}", "link", f"/f{k + 1}") for k in range(links.LINK_DEPTH))
    files = tuple((f"data/f{k}", "dir", None) for k in range(60_000))
    rcs = tuple((f"home/u{k}/.bashrc", "link", "/f0/x") for k in range(links.FOLLOWED_MAX))
    started = time.monotonic()
    result = layers.read_layer(io.BytesIO(tarball(*files, *folders, *rcs)), [])
    assert time.monotonic() - started < 30
    assert any(f"bound of {links.STEPS_MAX} steps" in n.detail for n in result.notes)


# --- the text of a link's target, by property ----------------------------------------------------------------

PARTS = st.lists(st.sampled_from(["a", "b", "..", ".", ""]), max_size=12)


@given(PARTS, st.sets(st.sampled_from(["/a", "/b", "/a/a", "/a/b", "/b/a", "/b/b"])))
def test_a_dotdot_is_resolved_as_text_only_after_folders_the_layer_shows(
    parts: list[str], shown_folders: set[str]
) -> None:
    """With no link of the layer, a target is unsure exactly where a `..` comes after a folder (the text before
    it, normalized) that is not the root nor one the layer shows."""
    raw = "/" + "/".join(parts)
    expected = any(
        part == ".." and posixpath.normpath("/" + "/".join(p for p in parts[:at] if p)) not in shown_folders | {"/"}
        for at, part in enumerate(parts)
    )
    assert links.dotdot_after_link(raw, set(), lambda folder: folder in shown_folders) == expected


@given(st.text(alphabet="ab./", max_size=12))
def test_a_target_names_a_folder_where_its_text_ends_so(raw: str) -> None:
    ends = raw.endswith("/") or raw.split("/")[-1] in (".", "..")
    assert links.names_folder(raw) == ends
