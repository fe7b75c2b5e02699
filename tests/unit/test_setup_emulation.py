"""scripts/setup-emulation.sh against a fake Debian machine: fake id, uname, dpkg-query, apt-cache, apt-get, mount
and update-binfmts on PATH record what they are asked, apt's folder, binfmt_misc and os-release are folders of
the test. What a run changes, that a second run changes nothing, and what it says without root."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.unit.conftest import ROOT

SCRIPT = ROOT / "scripts" / "setup-emulation.sh"
START_DOCKER = ROOT / "scripts" / "start-docker.sh"
TRIXIE, BOOKWORM = "1:10.0.13+ds-0+deb13u1", "1:7.2+dfsg-7+deb12u18+b3"
QEMU_LINE = "qemu-aarch64 version 10.0.13 (Debian 1:10.0.13+ds-0+deb13u1)"
PIN = (
    "# torchimages (scripts/setup-emulation.sh): from trixie, qemu-user-static qemu-user qemu-user-binfmt only.\n"
    "Package: *\nPin: release n=trixie\nPin-Priority: 1\n\n"
    "Package: qemu-user-static qemu-user qemu-user-binfmt\nPin: release n=trixie\nPin-Priority: 500\n"
)
# the commands that change the machine: a run that has nothing to do calls none of them
CHANGES = re.compile(r"^(mount|apt-get|update-binfmts --enable)\b", re.M)

pytestmark = pytest.mark.skipif(shutil.which("dpkg") is None, reason="the script compares versions with dpkg")

FAKES = {
    "id": 'case $1 in -u) echo "$FAKE_UID" ;; *) exec /usr/bin/id "$@" ;; esac',
    "uname": 'case $1 in -m) echo x86_64 ;; *) exec /bin/uname "$@" ;; esac',
    "dpkg-query": textwrap.dedent(
        """\
        pkg=${!#}
        [ -f "$FAKE/installed/$pkg" ] || { echo "dpkg-query: no packages found matching $pkg" >&2; exit 1; }
        printf 'install ok installed %s' "$(cat "$FAKE/installed/$pkg")"
        """
    ),
    # the candidate: trixie's where this script's pin gives it 500, else bookworm's
    "apt-cache": textwrap.dedent(
        """\
        candidate() {
          if [ -f "$FAKE/trixie/$1" ] && grep -qs 'Pin-Priority: 500' "$APT_ETC/preferences.d/torchimages-trixie-qemu"
          then cat "$FAKE/trixie/$1"
          elif [ -f "$FAKE/bookworm/$1" ]; then cat "$FAKE/bookworm/$1"
          else echo '(none)'; fi
        }
        case $1 in
          policy) printf '%s:\\n  Installed: (none)\\n  Candidate: %s\\n' "$2" "$(candidate "$2")" ;;
          madison) for s in trixie bookworm; do [ -f "$FAKE/$s/$2" ] &&
              printf ' %s | %s | http://deb.example.org/debian %s/main amd64 Packages\\n' \\
                "$2" "$(cat "$FAKE/$s/$2")" "$s"
            done; exit 0 ;;
        esac
        """
    ),
    "apt-get": textwrap.dedent(
        """\
        echo "apt-get $*" >>"$FAKE/calls"
        [ "$1" = install ] || exit 0
        if [ "$2" = -s ]; then
          [ ! -f "$FAKE/dry-run-fails" ] && exit 0
          echo ' qemu-user : Depends: libc6 (>= 2.41) but 2.36-9 is to be installed'
          echo 'E: Unable to correct problems, you have held broken packages.'
          exit 100
        fi
        for p in "$@"; do case $p in -*) ;; *)
          apt-cache policy "$p" | sed -n 's/^ *Candidate: //p' >"$FAKE/installed/$p" ;; esac; done
        """
    ),
    "mount": 'echo "mount $*" >>"$FAKE/calls"; : >"${!#}/status"',
    # binfmt-support's registration, as bookworm's qemu-user-static has it: with the F flag
    "update-binfmts": textwrap.dedent(
        """\
        echo "update-binfmts $*" >>"$FAKE/calls"
        [ -f "$FAKE/installed/qemu-user-static" ] || exit 2
        [ "$1" = --enable ] && printf 'enabled\\ninterpreter %s\\nflags: OCF\\noffset 0\\n' "$FAKE/qemu-aarch64" \\
          >"$BINFMT_DIR/qemu-aarch64"
        exit 0
        """
    ),
}


@dataclass
class Machine:
    """A fake Debian machine in a folder; `run` runs the script on it."""

    root: Path

    @property
    def calls(self) -> str:
        path = self.root / "fake" / "calls"
        return path.read_text() if path.exists() else ""

    def entry(self, flags: str = "OCF", state: str = "enabled") -> None:
        (self.root / "binfmt" / "qemu-aarch64").write_text(
            f"{state}\ninterpreter {self.root / 'fake' / 'qemu-aarch64'}\nflags: {flags}\noffset 0\n"
        )

    def mounted(self) -> None:
        (self.root / "binfmt" / "status").write_text("enabled\n")

    def installed(self, package: str, version: str) -> None:
        (self.root / "fake" / "installed" / package).write_text(version)

    def run(self, uid: int = 0, **more: str) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": f"{self.root / 'bin'}:{os.environ['PATH']}",
            "FAKE": str(self.root / "fake"),
            "FAKE_UID": str(uid),
            "APT_ETC": str(self.root / "apt"),
            "BINFMT_DIR": str(self.root / "binfmt"),
            "BINFMT_CONF_DIRS": str(self.root / "binfmt.d"),
            "OS_RELEASE": str(self.root / "os-release"),
        } | more
        return subprocess.run(
            [shutil.which("bash") or "bash", str(SCRIPT)], env=env, capture_output=True, text=True, check=False
        )


def machine(tmp_path: Path, codename: str = "bookworm") -> Machine:
    """Nothing mounted, nothing installed; bookworm's and trixie's QEMU offered, one Debian source."""
    for folder in ("bin", "fake/installed", "fake/trixie", "fake/bookworm", "apt/sources.list.d", "apt/preferences.d"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "binfmt").mkdir()
    (tmp_path / "binfmt.d").mkdir()
    for name, body in FAKES.items():
        (tmp_path / "bin" / name).write_text(f"#!/bin/bash\n{body}\n")
        (tmp_path / "bin" / name).chmod(0o755)
    interpreter = tmp_path / "fake" / "qemu-aarch64"
    interpreter.write_text(f"#!/bin/sh\necho '{QEMU_LINE}'\necho 'Copyright (c) 2003-2025'\n")
    interpreter.chmod(0o755)
    (tmp_path / "fake" / "trixie" / "qemu-user-static").write_text(TRIXIE)
    (tmp_path / "fake" / "bookworm" / "qemu-user-static").write_text(BOOKWORM)
    (tmp_path / "fake" / "bookworm" / "binfmt-support").write_text("2.2.2-2")
    (tmp_path / "fake" / "bookworm" / "arch-test").write_text("0.20-1")
    (tmp_path / "os-release").write_text(f"ID=debian\nVERSION_CODENAME={codename}\n")
    (tmp_path / "apt" / "sources.list.d" / "debian.sources").write_text(
        f"Types: deb\nURIs: http://deb.example.org/debian\nSuites: {codename} {codename}-updates\nComponents: main\n"
    )
    return Machine(tmp_path)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    return lines[0]


def test_setup_emulation_names_no_host() -> None:
    assert not re.search(r"https?://", SCRIPT.read_text())


def test_both_scripts_take_the_trixie_uri_from_one_place() -> None:
    """The trixie source both scripts write takes its URI from debian_uri() in debian-sources.sh (tested in
    test_scripts.py), which each sources: neither has a copy of its own."""
    for script in (SCRIPT, START_DOCKER):
        text = script.read_text()
        assert '/debian-sources.sh"' in text and "debian_uri() {" not in text, script


def test_a_bare_bookworm_machine_gets_trixies_qemu_pinned_alone_and_a_second_run_does_nothing(
    tmp_path: Path,
) -> None:
    m = machine(tmp_path)
    line = one_line(m.run())
    assert line == (
        "setup-emulation: mounted binfmt_misc; installed qemu-user-static binfmt-support arch-test (qemu-user-static "
        f"{TRIXIE} from trixie); registered qemu-aarch64; qemu-aarch64 enabled ({tmp_path}/fake/qemu-aarch64, "
        f"flags OCF, {QEMU_LINE}): linux/arm64 containers run under emulation"
    )
    assert (tmp_path / "apt" / "preferences.d" / "torchimages-trixie-qemu").read_text() == PIN
    source = (tmp_path / "apt" / "sources.list.d" / "torchimages-trixie.sources").read_text()
    assert "URIs: http://deb.example.org/debian\nSuites: trixie\n" in source  # the machine's own mirror
    assert "mount -t binfmt_misc binfmt_misc" in m.calls
    before = m.calls
    again = one_line(m.run())
    assert again.startswith(
        "setup-emulation: nothing to do: binfmt_misc mounted, qemu-user-static binfmt-support arch-test"
    )
    assert f"qemu-aarch64 enabled ({tmp_path}/fake/qemu-aarch64, flags OCF, {QEMU_LINE})" in again
    assert not CHANGES.search(m.calls.removeprefix(before)), m.calls.removeprefix(before)
    assert one_line(m.run(uid=1000)) == again  # nothing to do needs no root


def test_start_dockers_trixie_source_is_used_as_it_is(tmp_path: Path) -> None:
    m = machine(tmp_path)
    source = tmp_path / "apt" / "sources.list.d" / "torchimages-trixie.sources"
    source.write_text("Types: deb\nURIs: http://other.example/debian\nSuites: trixie\nComponents: main\n")
    assert f"qemu-user-static {TRIXIE} from trixie" in one_line(m.run())
    assert source.read_text() == "Types: deb\nURIs: http://other.example/debian\nSuites: trixie\nComponents: main\n"


def test_where_trixies_qemu_cannot_be_installed_bookworms_is_and_the_pin_says_why(tmp_path: Path) -> None:
    m = machine(tmp_path)
    (tmp_path / "fake" / "dry-run-fails").write_text("")
    line = one_line(m.run())
    assert f"(qemu-user-static {BOOKWORM} from bookworm: trixie's qemu-user-static {TRIXIE} cannot be installed" in line
    assert "(qemu-user : Depends: libc6 (>= 2.41) but 2.36-9 is to be installed), so bookworm's)" in line
    pin = (tmp_path / "apt" / "preferences.d" / "torchimages-trixie-qemu").read_text()
    assert "Pin-Priority: 500" not in pin and "Package: *\nPin: release n=trixie\nPin-Priority: 1\n" in pin
    assert "cannot be installed here" in pin
    before = m.calls
    assert "nothing to do" in one_line(m.run())  # and it does not try trixie again
    assert not CHANGES.search(m.calls.removeprefix(before))


def test_on_trixie_nothing_is_pinned(tmp_path: Path) -> None:
    m = machine(tmp_path, codename="trixie")
    (tmp_path / "fake" / "trixie" / "qemu-user-static").unlink()
    (tmp_path / "fake" / "bookworm" / "qemu-user-static").write_text(TRIXIE)  # what this machine's suite has
    assert f"qemu-user-static {TRIXIE}" in one_line(m.run())
    assert list((tmp_path / "apt" / "preferences.d").iterdir()) == []
    assert sorted(p.name for p in (tmp_path / "apt" / "sources.list.d").iterdir()) == ["debian.sources"]


def test_bookworms_qemu_is_upgraded_and_its_handler_registered_again(tmp_path: Path) -> None:
    """With F the kernel keeps the interpreter it opened: after an upgrade the handler is registered anew."""
    m = machine(tmp_path)
    m.mounted()
    m.installed("qemu-user-static", BOOKWORM)
    m.installed("binfmt-support", "2.2.2-2")
    m.installed("arch-test", "0.20-1")
    m.entry()
    line = one_line(m.run())
    assert line.startswith(
        f"setup-emulation: installed qemu-user-static (qemu-user-static {TRIXIE} from trixie); "
        "registered qemu-aarch64 again; qemu-aarch64 enabled"
    )
    assert "update-binfmts --enable qemu-aarch64" in m.calls


@pytest.mark.parametrize(
    ("flags", "state", "said"),
    [
        ("OC", "enabled", "registered qemu-aarch64 again (it was registered without the F (fix-binary) flag)"),
        ("OCF", "disabled", "enabled qemu-aarch64"),
    ],
)
def test_a_handler_without_f_or_disabled_is_mended(tmp_path: Path, flags: str, state: str, said: str) -> None:
    m = machine(tmp_path)
    m.mounted()
    (tmp_path / "apt" / "preferences.d" / "torchimages-trixie-qemu").write_text(PIN)
    m.installed("qemu-user-static", TRIXIE)
    m.installed("binfmt-support", "2.2.2-2")
    m.installed("arch-test", "0.20-1")
    m.entry(flags, state)
    line = one_line(m.run())
    assert line.startswith(f"setup-emulation: {said}; qemu-aarch64 enabled (")
    assert "flags OCF" in line


@pytest.mark.parametrize(
    ("mend", "needs"),
    [
        ("mount", "mount binfmt_misc on"),
        ("package", "install binfmt-support"),
        ("pin", "pin trixie's qemu-user-static in"),
        ("upgrade", f"upgrade qemu-user-static {BOOKWORM} to {TRIXIE}"),
        ("no-entry", "register and enable qemu-aarch64 (not registered)"),
        ("no-f", "register and enable qemu-aarch64 (registered without the F (fix-binary) flag)"),
        ("disabled", "register and enable qemu-aarch64 (disabled)"),
    ],
)
def test_without_root_it_names_what_root_must_do_and_changes_nothing(tmp_path: Path, mend: str, needs: str) -> None:
    m = machine(tmp_path)
    if mend != "mount":
        m.mounted()
    m.installed("qemu-user-static", BOOKWORM if mend == "upgrade" else TRIXIE)
    if mend != "package":
        m.installed("binfmt-support", "2.2.2-2")
        m.installed("arch-test", "0.20-1")
    if mend != "pin":
        (tmp_path / "apt" / "preferences.d" / "torchimages-trixie-qemu").write_text(PIN)
    else:
        m.installed("qemu-user-static", BOOKWORM)
    if mend != "no-entry":
        m.entry("OC" if mend == "no-f" else "OCF", "disabled" if mend == "disabled" else "enabled")
    apt = sorted(p.relative_to(tmp_path) for p in (tmp_path / "apt").rglob("*"))
    result = m.run(uid=1000)
    assert result.returncode == 1 and result.stdout == ""
    assert "ERROR: must run as root to " in result.stderr and needs in result.stderr, result.stderr
    assert "(sudo make emulation)" in result.stderr
    assert m.calls == ""
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "apt").rglob("*")) == apt


def test_a_machine_that_is_neither_platform_is_told_so(tmp_path: Path) -> None:
    m = machine(tmp_path)
    (tmp_path / "bin" / "uname").write_text("#!/bin/sh\necho riscv64\n")
    result = m.run()
    assert result.returncode == 1
    assert "this machine is riscv64: the platforms are linux/amd64 (x86_64) and linux/arm64 (aarch64)" in result.stderr
    assert m.calls == ""


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("x86_64", "QEMU_TARGET=x86_64 is this machine's own architecture: nothing to emulate"),
        ("arm64; rm -rf /", "QEMU_TARGET=arm64; rm -rf /: must be aarch64 (linux/arm64) or x86_64 (linux/amd64)"),
    ],
)
def test_a_target_that_is_this_machine_or_no_platform_is_refused(tmp_path: Path, target: str, said: str) -> None:
    m = machine(tmp_path)
    result = m.run(QEMU_TARGET=target)
    assert result.returncode == 1 and said in result.stderr, result.stderr
    assert m.calls == ""


def test_a_machine_without_apt_is_told_what_to_install_itself(tmp_path: Path) -> None:
    """No apt-get, dpkg-query or apt-cache on PATH at all (not Debian): the machine's own tools are hidden."""
    m = machine(tmp_path)
    for name in ("apt-get", "apt-cache", "dpkg-query"):
        (tmp_path / "bin" / name).unlink()
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in ("awk", "sed", "grep", "head", "cat", "readlink", "dpkg"):
        found = shutil.which(tool)
        assert found, tool
        (tools / tool).symlink_to(found)
    m.mounted()
    result = m.run(PATH=f"{tmp_path / 'bin'}:{tools}")
    assert result.returncode == 1, result.stderr
    assert (
        "installing qemu-user-static binfmt-support arch-test takes apt-get (Debian, Ubuntu), which is not here"
        in result.stderr
    )
    assert "register qemu-aarch64 with the F flag" in result.stderr
