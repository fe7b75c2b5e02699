"""The os-updates check's shared answers stand only where apt trusts the same keys (keyrings through links,
keyrings apt is told to read elsewhere, files any apt option names), and every reading of the image's text
splits its lines as the shell and apt do (at `\\n` only). The look's shell code runs in a real sh; the sums are
literals (`printf 'key A\\n' | sha256sum`), never computed by the code under test."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.unit.security.look_harness import look_sections
from tests.unit.security.test_os_updates import DEBIAN_TARGETS, WITHOUT_SECURITY, answer, scan_of
from torchimages.security import apt_sources, os_updates

KEY_A = "ad028a6d95351c866f74a7f60913d3cef6b12085e5761e34ad113153e0174ba5"  # sha256 of "key A\n"
KEY_B = "ab220f90ccb59356948e1fd6168f5b06cbb11b15d48219a2299672346da44696"  # sha256 of "key B\n"
TRUSTED = "7bd39a7cbcf687fd60f819645b8bcaf731a9f19cb102484a7b84530516d7e8b8"  # sha256 of "trusted\n"
APT_KEY = "d27191768ef3731c75792fb9100350bf81297e68cbcb5ad8e2043c2760ab4c74"  # sha256 of "apt-key\n"


def keys_through_a_link(tmp_path: Path, target: str, folder_link: bool) -> str:
    """The `keys` of an image whose keyring folder (apt's TrustedParts) holds corp.gpg as a link to `target`
    (or is itself a link to a folder holding it as a file, `folder_link`)."""
    (tmp_path / "a.gpg").write_text("key A\n")
    (tmp_path / "b.gpg").write_text("key B\n")
    parts = tmp_path / "trusted.gpg.d"
    if folder_link:
        real = tmp_path / f"real-{target}"
        real.mkdir()
        (real / "corp.gpg").write_text((tmp_path / target).read_text())
        parts.symlink_to(real)
    else:
        parts.mkdir()
        (parts / "corp.gpg").symlink_to(tmp_path / target)
    return look_sections(tmp_path, shell=f"TRUSTEDPARTS='{parts}/'\n")["keys"]


def test_a_keyring_that_is_a_link_is_summed_by_what_it_points_to(tmp_path: Path) -> None:
    """trusted.gpg.d/corp.gpg a link to key A or to key B: two images apt trusts differently, two keys."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with_a = keys_through_a_link(tmp_path / "a", "a.gpg", folder_link=False)
    with_b = keys_through_a_link(tmp_path / "b", "b.gpg", folder_link=False)
    assert f"{KEY_A} {tmp_path}/a/trusted.gpg.d/corp.gpg" in with_a.split("\n")
    assert f"{KEY_B} {tmp_path}/b/trusted.gpg.d/corp.gpg" in with_b.split("\n")


def test_a_keyring_folder_that_is_a_link_is_summed_through_it(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with_a = keys_through_a_link(tmp_path / "a", "a.gpg", folder_link=True)
    with_b = keys_through_a_link(tmp_path / "b", "b.gpg", folder_link=True)
    assert f"{KEY_A} {tmp_path}/a/trusted.gpg.d/corp.gpg" in with_a.split("\n")
    assert f"{KEY_B} {tmp_path}/b/trusted.gpg.d/corp.gpg" in with_b.split("\n")


def test_keyrings_apt_is_told_to_read_elsewhere_are_summed(tmp_path: Path) -> None:
    """Dir::Etc::Trusted and Dir::Etc::TrustedParts naming a file and a folder outside /etc/apt (apt-config
    shell resolves them to absolute paths): each keyring there is summed."""
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "corp.asc").write_text("key A\n")
    (tmp_path / "ring.gpg").write_text("trusted\n")
    keys = look_sections(tmp_path, shell=f"TRUSTED='{tmp_path}/ring.gpg'\n")["keys"].split("\n")
    assert f"{TRUSTED} {tmp_path}/ring.gpg" in keys
    keys = look_sections(tmp_path, shell=f"TRUSTEDPARTS='{tmp_path}/keys/'\n")["keys"].split("\n")
    assert f"{KEY_A} {tmp_path}/keys/corp.asc" in keys


def test_every_file_an_apt_option_names_by_an_absolute_path_is_summed(tmp_path: Path) -> None:
    """Not only Acquire:: options: apt-key's program (Dir::Bin::apt-key), gpgv's (APT::Key::gpgvcommand) and
    apt-key's older keyring option (Apt::GPGV::TrustedKeyring) decide what apt trusts as much as a keyring does."""
    (tmp_path / "apt-key").write_text("apt-key\n")
    (tmp_path / "gpgv").write_text("trusted\n")
    (tmp_path / "old.gpg").write_text("key B\n")
    dump = (
        f'Dir::Bin::apt-key "{tmp_path}/apt-key";\nAPT::Key::gpgvcommand "{tmp_path}/gpgv";\n'
        f'Apt::GPGV::TrustedKeyring "{tmp_path}/old.gpg";\n'
    )
    auth = look_sections(tmp_path, dump=dump)["auth"].split("\n")
    assert f"{APT_KEY} {tmp_path}/apt-key" in auth
    assert f"{TRUSTED} {tmp_path}/gpgv" in auth
    assert f"{KEY_B} {tmp_path}/old.gpg" in auth


def ca_folder(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    """A folder `name` holding `files` (relative name: text)."""
    folder = tmp_path / name
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    return folder


def test_a_folder_an_apt_option_names_is_summed_by_its_files(tmp_path: Path) -> None:
    """Acquire::https::CaPath naming a folder (outside attack 6, finding 20): each regular file below it, by
    name and sha256, so two images whose CA folders differ (a file's content, or its name) are two keys."""
    a = ca_folder(tmp_path, "a", {"corp.pem": "key A\n", "sub/old.pem": "key B\n"})
    b = ca_folder(tmp_path, "b", {"corp.pem": "key B\n", "sub/old.pem": "key B\n"})
    c = ca_folder(tmp_path, "c", {"other.pem": "key A\n", "sub/old.pem": "key B\n"})
    sums = {}
    for folder in (a, b, c):
        auth = look_sections(tmp_path, dump=f'Acquire::https::CaPath "{folder}/";\n')["auth"].split("\n")
        assert f"folder {folder}/" in auth and f"none {folder}/" not in auth
        sums[folder.name] = [line.replace(str(folder), "F") for line in auth if str(folder) in line]
    assert sums["a"] == ["folder F/", f"{KEY_A} F/corp.pem", f"{KEY_B} F/sub/old.pem"]
    assert sums["b"] == ["folder F/", f"{KEY_B} F/corp.pem", f"{KEY_B} F/sub/old.pem"]
    assert sums["c"] == ["folder F/", f"{KEY_A} F/other.pem", f"{KEY_B} F/sub/old.pem"]


def test_a_folder_an_apt_option_names_is_summed_through_its_links(tmp_path: Path) -> None:
    """Links followed as in the keyring folders: a file that links elsewhere, and the folder itself a link."""
    ca_folder(tmp_path, "real", {"corp.pem": "key A\n"})
    (tmp_path / "ca").symlink_to(tmp_path / "real")
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "linked.pem").symlink_to(tmp_path / "real" / "corp.pem")
    dump = f'Acquire::https::CaPath "{tmp_path}/ca";\nAcquire::https::example.org::CaPath "{tmp_path}/more";\n'
    auth = look_sections(tmp_path, dump=dump)["auth"].split("\n")
    assert f"{KEY_A} {tmp_path}/ca/corp.pem" in auth and f"{KEY_A} {tmp_path}/more/linked.pem" in auth


def test_a_folder_too_big_or_with_a_newline_in_a_name_shares_no_answer(tmp_path: Path) -> None:
    """A folder of more files than the look sums, or a name that would read as two lines: the look cannot stand
    for the image (`unshared`). apt's root (`Dir "/"`) is no such folder: it is not walked."""
    many = ca_folder(tmp_path, "many", {f"{n}.pem": "key A\n" for n in range(os_updates.FOLDER_FILES + 1)})
    found = look_sections(tmp_path, dump=f'Acquire::https::CaPath "{many}";\n')
    assert f"more than {os_updates.FOLDER_FILES} files" in found["unshared"]
    fewer = ca_folder(tmp_path, "fewer", {f"{n}.pem": "key A\n" for n in range(os_updates.FOLDER_FILES)})
    assert "unshared" not in look_sections(tmp_path, dump=f'Acquire::https::CaPath "{fewer}";\n')
    odd = ca_folder(tmp_path, "odd", {"a.pem\nb.pem": "key A\n"})
    found = look_sections(tmp_path, dump=f'Acquire::https::CaPath "{odd}";\n')
    assert "a newline" in found["unshared"]
    found = look_sections(tmp_path, dump='Dir "/";\n')
    assert "unshared" not in found and "none /" in found["auth"].split("\n")


def test_an_auth_file_that_is_a_link_is_summed_by_what_it_points_to(tmp_path: Path) -> None:
    (tmp_path / "auth.conf.d").mkdir()
    (tmp_path / "secret").write_text("key A\n")
    (tmp_path / "auth.conf.d" / "corp.conf").symlink_to(tmp_path / "secret")
    auth = look_sections(tmp_path, shell=f"NETRCPARTS='{tmp_path}/auth.conf.d/'\n")["auth"].split("\n")
    assert f"{KEY_A} {tmp_path}/auth.conf.d/corp.conf" in auth


def test_a_note_of_text_that_is_not_utf8_can_be_printed() -> None:
    """The engine keeps an undecodable byte as a lone surrogate (the look's key must see it); a note made of
    apt's words shows it replaced, so printing or writing the note as UTF-8 never fails."""
    update = "Err:4 http://security.example.org/debian-security bookworm-security InRelease\n  \udcff\nE: bad \udcfe"
    scan = scan_of(answer(files=WITHOUT_SECURITY, update=update))
    assert not scan.scanned and "E: bad \ufffd" in scan.note
    assert scan.note.encode("utf-8")


# Where str.splitlines splits and the shell does not.
SPLITTERS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
# Texts that read as a record of some answer where they start a line.
FRAGMENTS = (
    "VERSION_CODENAME=sid",
    "bookworm-security http://x.example.org/d bookworm-security/main amd64 Packages",
    "bookworm-security /etc/apt/sources.list:1 http://x.example.org/d bookworm-security/main amd64 Packages",
    " 500 http://x.example.org/d bookworm-security/main amd64 Packages",
    "     release n=bookworm-security",
    "libc6:",
    " *** 2.36 500",
    "        500 http://x.example.org/d bookworm-security/main amd64 Packages",
    "|",
    "@/etc/apt/sources.list.d/x.list",
)
one_line = st.lists(
    st.one_of(
        st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\n"), max_size=12),
        st.sampled_from(SPLITTERS),
        st.sampled_from(FRAGMENTS),
    ),
    max_size=8,
).map("".join)
one_line = st.tuples(st.sampled_from(("", *FRAGMENTS)), one_line).map("".join)  # a record, and then?


@settings(max_examples=150, deadline=None)
@given(one_line)
@example('HOME_URL="https://example.org/\x85VERSION_CODENAME=sid"')
@example("x\x85 500 http://x.example.org/d bookworm-security/main amd64 Packages")
@example("x\u2028libc6:\u2028 *** 2.36 500\u2028        500 http://x/d bookworm-security/main amd64 Packages")
@example("x\x0bbookworm-security /etc/apt/sources.list:1 http://x/d bookworm-security/main amd64 Packages")
@example("x\x85bookworm-security http://x/d bookworm-security/main amd64 Packages")
@example("a\r|b")
@example(" 500 http://x/d bookworm/main amd64 Packages\u2028 500 http://x/d bookworm-security/main amd64 Packages")
@example("a /f:1 b Packages\x0bbookworm-security /etc/apt/sources.list:1 http://x/d bookworm-security/main Packages")
def test_one_line_of_image_text_is_read_as_one_line(line: str) -> None:
    """No character but `\\n` ends a line of the image's text (sh and apt split there only): one line is
    at most one record of each answer, and a field's line is that field only."""
    assert os_updates.codename(f"VERSION_CODENAME=bookworm\nHOME_URL={line}\n") == "bookworm"
    assert len(os_updates.targets(line)) <= 1
    assert len(os_updates.index_files(line)) <= 1
    tables = os_updates.version_tables(f"libc6:\n *** 2.36 500\n{line}")  # 2 records, and at most one more
    assert len(tables) + sum(len(v.sources) + 1 for table in tables for v in table.versions) <= 3
    assert len(apt_sources.sourced_targets(line)) <= 1
    assert apt_sources.source_files(f"@/etc/apt/sources.list\n|{line}") == {"/etc/apt/sources.list": line}
    assert os_updates.targets(f"{DEBIAN_TARGETS}{line}")[: len(os_updates.targets(DEBIAN_TARGETS))] == (
        os_updates.targets(DEBIAN_TARGETS)
    )


def sh_codename(tmp_path: Path, os_release: bytes) -> str:
    """VERSION_CODENAME as a real sh reads the os-release file (sourced, as /etc/os-release is meant to be)."""
    (tmp_path / "os-release").write_bytes(os_release)
    done = subprocess.run(
        ["sh", "-c", '. "$1" 2>/dev/null; printf %s "$VERSION_CODENAME"', "-", str(tmp_path / "os-release")],
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
    )
    return done.stdout.decode()


def test_the_codename_is_read_as_sh_reads_os_release(tmp_path: Path) -> None:
    """A code name hidden after a character str.splitlines splits at (U+0085 here, UTF-8 `\\xc2\\x85`), in a
    field's value or where a field would start: sh reads bookworm, and so does the scan."""
    for text in (
        'VERSION_CODENAME=bookworm\nHOME_URL="https://example.org/\x85VERSION_CODENAME=sid"\n',
        "VERSION_CODENAME=bookworm\n\x85VERSION_CODENAME=sid\n",
        "VERSION_CODENAME=bookworm\n\u2028VERSION_CODENAME=sid\n",
    ):
        assert sh_codename(tmp_path, text.encode()) == "bookworm"
        assert os_updates.codename(text) == "bookworm"
    hidden = '|HOME_URL="https://example.org/\x85VERSION_CODENAME=sid"\n'
    stdout = answer().replace("|VERSION_CODENAME=bookworm\n", f"|VERSION_CODENAME=bookworm\n{hidden}", 1)
    assert hidden in stdout
    assert scan_of(stdout).note.startswith("5 packages against bookworm-security")
