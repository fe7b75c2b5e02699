"""The os-updates check against the fake engine: the script's answers are literals of apt's own output
(captured from bookworm and noble images, hosts replaced by placeholders), never computed by the code."""

from __future__ import annotations

import datetime

import pytest

from tests.fakes import FakeEngine
from torchimages.engine import EngineError, ShellResult
from torchimages.security import allowlist, gate, os_updates
from torchimages.security.model import FAILED, NOT_SCANNED, OS_UPDATES, PASSED, PYTHON, SECRETS, Finding, Scan

TODAY = datetime.date(2026, 12, 1)

DEBIAN_RELEASE = """\
PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
"""

DEBIAN_TARGETS = """\
bookworm http://deb.example.org/debian bookworm/main amd64 Packages
bookworm http://deb.example.org/debian bookworm/main all Packages
bookworm-updates http://deb.example.org/debian bookworm-updates/main amd64 Packages
bookworm-updates http://deb.example.org/debian bookworm-updates/main all Packages
bookworm-security http://security.example.org/debian-security bookworm-security/main amd64 Packages
bookworm-security http://security.example.org/debian-security bookworm-security/main all Packages
"""

DEBIAN_UPDATE = """\
Get:1 http://deb.example.org/debian bookworm InRelease [151 kB]
Get:2 http://security.example.org/debian-security bookworm-security InRelease [34.8 kB]
Get:3 http://deb.example.org/debian bookworm-updates InRelease [55.4 kB]
Get:4 http://security.example.org/debian-security bookworm-security/main amd64 Packages [384 kB]
Get:5 http://deb.example.org/debian bookworm/main amd64 Packages [8790 kB]
Get:6 http://deb.example.org/debian bookworm-updates/main amd64 Packages [6924 B]
Fetched 9423 kB in 3s (2863 kB/s)
Reading package lists...
"""

DEBIAN_FILES = """\
Package files:
 100 /var/lib/dpkg/status
     release a=now
 500 http://security.example.org/debian-security bookworm-security/main amd64 Packages
     release v=12,o=Debian,a=oldstable-security,n=bookworm-security,l=Debian-Security,c=main,b=amd64
     origin security.example.org
 500 http://security.example.org/debian-security bookworm-security/main i386 Packages
     release v=12,o=Debian,a=oldstable-security,n=bookworm-security,l=Debian-Security,c=main,b=i386
     origin security.example.org
 500 http://deb.example.org/debian bookworm-updates/main amd64 Packages
     release v=12-updates,o=Debian,a=oldstable-updates,n=bookworm-updates,l=Debian,c=main,b=amd64
     origin deb.example.org
 500 http://deb.example.org/debian bookworm/main amd64 Packages
     release v=12.15,o=Debian,a=oldstable,n=bookworm,l=Debian,c=main,b=amd64
     origin deb.example.org
Pinned packages:
"""

# libc6: the security suite's version is older than the installed one (from the point release): not pending.
# libssl3: newer in security, older in bookworm-updates: pending. libexpat1: pending.
DEBIAN_INSTALLED = """\
base-files:
  Installed: 12.4+deb12u15
  Candidate: 12.4+deb12u15
  Version table:
 *** 12.4+deb12u15 500
        500 http://deb.example.org/debian bookworm/main amd64 Packages
        100 /var/lib/dpkg/status
libc6:
  Installed: 2.36-9+deb12u14
  Candidate: 2.36-9+deb12u14
  Version table:
 *** 2.36-9+deb12u14 500
        500 http://deb.example.org/debian bookworm/main amd64 Packages
        100 /var/lib/dpkg/status
     2.36-9+deb12u7 500
        500 http://security.example.org/debian-security bookworm-security/main amd64 Packages
libexpat1:
  Installed: 2.5.0-1+deb12u2
  Candidate: 2.5.0-1+deb12u5
  Version table:
     2.5.0-1+deb12u5 500
        500 http://security.example.org/debian-security bookworm-security/main amd64 Packages
 *** 2.5.0-1+deb12u2 500
        500 http://deb.example.org/debian bookworm/main amd64 Packages
        100 /var/lib/dpkg/status
libssl3:
  Installed: 3.0.20-1~deb12u2
  Candidate: 3.0.22-1~deb12u2
  Version table:
     3.0.22-1~deb12u2 500
        500 http://security.example.org/debian-security bookworm-security/main amd64 Packages
 *** 3.0.20-1~deb12u2 500
        500 http://deb.example.org/debian bookworm/main amd64 Packages
        100 /var/lib/dpkg/status
     3.0.17-1~deb12u2 500
        500 http://deb.example.org/debian bookworm-updates/main amd64 Packages
libgcc-s1:i386:
  Installed: 12.2.0-14
  Candidate: 12.2.0-14+deb12u1
  Version table:
     12.2.0-14+deb12u1 500
        500 http://security.example.org/debian-security bookworm-security/main i386 Packages
 *** 12.2.0-14 500
        500 http://deb.example.org/debian bookworm/main i386 Packages
        100 /var/lib/dpkg/status
"""

# What apt read when no security index was there (not named, or not answering).
WITHOUT_SECURITY = "".join(
    line + "\n" for line in DEBIAN_FILES.splitlines() if "security" not in line and "Debian-Security" not in line
)


def framed(text: str) -> str:
    """Lines as the scripts print a section's text: each prefixed `|`."""
    return "".join(f"|{line}\n" for line in text.splitlines())


# The first look at a bookworm image (apt-config dump shortened): its one-line sources, the security entry with
# its options, and the installed packages.
DEBIAN_LOOK = f"""\
### os-release
{framed(DEBIAN_RELEASE)}### config
|APT "";
|APT::Architecture "amd64";
|Dir::Etc::sourcelist "sources.list";
|Dir::Etc::sourceparts "sources.list.d";
### sourced
|bookworm /etc/apt/sources.list:1 http://deb.example.org/debian bookworm/main amd64 Packages
|bookworm /etc/apt/sources.list:1 http://deb.example.org/debian bookworm/main all Packages
|bookworm-updates /etc/apt/sources.list:2 http://deb.example.org/debian bookworm-updates/main amd64 Packages
|bookworm-updates /etc/apt/sources.list:2 http://deb.example.org/debian bookworm-updates/main all Packages
|bookworm-security /etc/apt/sources.list:4 http://security.example.org/debian-security bookworm-security/main amd64 Packages
|bookworm-security /etc/apt/sources.list:4 http://security.example.org/debian-security bookworm-security/main all Packages
### source
|@/etc/apt/sources.list
||deb http://deb.example.org/debian bookworm main
||deb http://deb.example.org/debian bookworm-updates main
||# the security suite, signed by the archive's key
||deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://security.example.org/debian-security bookworm-security main

### keys
|521e9f6a9f9b92ee8d5ce74345e8cfd04028dae9db6f571259d584b293549824 /etc/apt/trusted.gpg.d/debian-archive-bookworm-stable.asc
|506b815cbb32d9b6066b4a2aa524071e071761e7e7f68c3ac74f3061ba852017 /usr/share/keyrings/debian-archive-keyring.gpg
### auth
|none /etc/apt/auth.conf
|eec30745bade42a3f3f792e4d4192e57d2bcfe8e472433b1de426fe39a39cddb /etc/nsswitch.conf
### packages
|installed base-files amd64 12.4+deb12u15
|installed libc6 amd64 2.36-9+deb12u14
|installed libexpat1 amd64 2.5.0-1+deb12u2
|installed libssl3 amd64 3.0.20-1~deb12u2
|installed libgcc-s1 i386 12.2.0-14
### look-status 0
"""  # noqa: E501
LOOKS = "echo '### sourced'"  # a line of the first look's script only


def answer(
    os_release: str = DEBIAN_RELEASE,
    targets: str = DEBIAN_TARGETS,
    update: str = DEBIAN_UPDATE,
    files: str = DEBIAN_FILES,
    installed: str = DEBIAN_INSTALLED,
    update_status: int = 0,
    policy_status: int = 0,
) -> str:
    """The scan script's stdout, as it prints it, around apt's literal answers."""
    return (
        f"### os-release\n{framed(os_release)}### targets\n{framed(targets)}### update\n{framed(update)}"
        f"### update-status {update_status}\n"
        f"### files\n{framed(files)}### installed\n{framed(installed)}### policy-status {policy_status}\n"
    )


def scan_of(
    stdout: str, status: int = 0, stderr: str = "", network: str | None = None, look: str = DEBIAN_LOOK
) -> Scan:
    engine = FakeEngine()
    engine.shell_answers[LOOKS] = ShellResult(0, look, "")
    engine.shell_answer = ShellResult(status, stdout, stderr)
    return os_updates.scan(engine, "img:1", network)


def test_each_installed_package_with_a_newer_security_version_is_a_finding() -> None:
    scan = scan_of(answer())
    assert scan.scanned and scan.note == "5 packages against bookworm-security"
    assert scan.findings == (
        Finding(OS_UPDATES, "libexpat1", "libexpat1 2.5.0-1+deb12u2", "newer in bookworm-security: 2.5.0-1+deb12u5"),
        Finding(OS_UPDATES, "libssl3", "libssl3 3.0.20-1~deb12u2", "newer in bookworm-security: 3.0.22-1~deb12u2"),
        Finding(OS_UPDATES, "libgcc-s1", "libgcc-s1:i386 12.2.0-14", "newer in bookworm-security: 12.2.0-14+deb12u1"),
    )


def test_an_up_to_date_image_passes_and_says_what_it_scanned() -> None:
    clean = "\n".join(DEBIAN_INSTALLED.splitlines()[:14]) + "\n"  # base-files and libc6 only
    scan = scan_of(answer(installed=clean))
    assert scan.scanned and scan.findings == () and scan.note == "2 packages against bookworm-security"
    assert allowlist.apply(scan, (), "t", TODAY).status == PASSED


def test_the_scan_runs_as_root_on_the_builds_network_within_a_time_limit() -> None:
    for network, used in ((None, "default"), ("host", "host")):
        engine = FakeEngine()
        engine.shell_answers[LOOKS] = ShellResult(0, DEBIAN_LOOK, "")
        engine.shell_answer = ShellResult(0, answer(), "")
        os_updates.scan(engine, "img:1", network)
        (first, (reference, script, user, on, limit)) = engine.shells
        assert first[1:] == (os_updates.LOOK, "0:0", None, os_updates.LOOK_LIMIT_S)  # the look: no network
        assert (reference, user, on, limit) == ("img:1", "0:0", used, os_updates.TIME_LIMIT_S)
        assert "Dir::State::Lists=$scratch/lists" in script and "Acquire::http::Timeout=" in script
        assert "timeout 240" in script and "indextargets" in script


def test_the_allowlist_lets_the_findings_through_and_fails_the_rest() -> None:
    scan = scan_of(answer())
    entry = allowlist.Entry(OS_UPDATES, "libssl3", "no fix reachable", datetime.date(2027, 1, 31))
    result = allowlist.apply(scan, (entry,), "2.9.1-cpu", TODAY)
    assert result.status == FAILED and [a.finding.key for a in result.allowed] == ["libssl3"]
    assert len(result.failing) == 2 and "libexpat1 2.5.0-1+deb12u2" in result.failing[0]
    every = [allowlist.Entry(OS_UPDATES, k, "reviewed", datetime.date(2027, 1, 31)) for k in ("libssl3", "libexpat1")]
    every.append(allowlist.Entry(OS_UPDATES, "libgcc-s1", "reviewed", datetime.date(2027, 1, 31)))
    assert allowlist.apply(scan, every, "2.9.1-cpu", TODAY).status == PASSED


def test_sources_without_the_security_suite_are_not_scanned_and_say_so() -> None:
    no_security = "".join(line + "\n" for line in DEBIAN_TARGETS.splitlines() if "security" not in line)
    scan = scan_of(answer(targets=no_security, files=WITHOUT_SECURITY))
    assert not scan.scanned and scan.findings == ()
    assert "name no bookworm-security suite" in scan.note
    assert allowlist.apply(scan, (), "t", TODAY).status == NOT_SCANNED


def test_an_archive_that_does_not_answer_is_not_scanned_with_apts_reason() -> None:
    update = """\
Ign:1 http://security.example.org/debian-security bookworm-security InRelease
Err:1 http://security.example.org/debian-security bookworm-security InRelease
  Could not connect to security.example.org:80 (192.0.2.1). - connect (111: Connection refused)
Reading package lists...
W: http://deb.example.org/debian/dists/bookworm/InRelease: Key is stored in legacy trusted.gpg keyring
W: Failed to fetch http://security.example.org/debian-security/dists/bookworm-security/InRelease  Could not connect to security.example.org:80 (192.0.2.1). - connect (111: Connection refused)
W: Some index files failed to download. They have been ignored, or old ones used instead.
"""  # noqa: E501
    scan = scan_of(answer(update=update, files=WITHOUT_SECURITY))
    assert not scan.scanned and scan.findings == ()
    assert scan.note.startswith("bookworm-security did not answer: W: Failed to fetch http://security.example.org/")
    assert "Connection refused" in scan.note


def test_a_security_suite_named_by_its_alias_counts_by_its_release_codename() -> None:
    """`deb URI stable-security main`: the index's Release file says n=bookworm-security."""
    alias = DEBIAN_FILES.replace("bookworm-security/main", "stable-security/main")
    installed = DEBIAN_INSTALLED.replace("bookworm-security/main", "stable-security/main")
    targets = DEBIAN_TARGETS.replace("bookworm-security", "stable-security")
    scan = scan_of(answer(targets=targets, files=alias, installed=installed))
    assert scan.scanned and [f.key for f in scan.findings] == ["libexpat1", "libssl3", "libgcc-s1"]


NOBLE_RELEASE = (
    'PRETTY_NAME="Ubuntu 24.04.1 LTS"\nNAME="Ubuntu"\nVERSION_ID="24.04"\nID=ubuntu\nUBUNTU_CODENAME=noble\n'
)
NOBLE_FILES = """\
Package files:
 100 /var/lib/dpkg/status
     release a=now
 500 http://ports.example.org/ubuntu noble-security/main amd64 Packages
     release v=24.04,o=Ubuntu,a=noble-security,n=noble,l=Ubuntu,c=main,b=amd64
     origin ports.example.org
 500 http://ports.example.org/ubuntu noble-updates/main amd64 Packages
     release v=24.04,o=Ubuntu,a=noble-updates,n=noble,l=Ubuntu,c=main,b=amd64
     origin ports.example.org
 500 http://ports.example.org/ubuntu noble/main amd64 Packages
     release v=24.04,o=Ubuntu,a=noble,n=noble,l=Ubuntu,c=main,b=amd64
     origin ports.example.org
Pinned packages:
"""
# libc6: the same version in -updates and -security (pending). gzip: newer in -updates only, phased (not
# pending: no security fix). libssl3t64: a security version, and a newer one in -updates above it (pending).
NOBLE_INSTALLED = """\
libc6:
  Installed: 2.39-0ubuntu8
  Candidate: 2.39-0ubuntu8.3
  Version table:
     2.39-0ubuntu8.3 500
        500 http://ports.example.org/ubuntu noble-updates/main amd64 Packages
        500 http://ports.example.org/ubuntu noble-security/main amd64 Packages
 *** 2.39-0ubuntu8 500
        500 http://ports.example.org/ubuntu noble/main amd64 Packages
        100 /var/lib/dpkg/status
gzip:
  Installed: 1.12-1ubuntu3
  Candidate: 1.12-1ubuntu3
  Version table:
     1.12-1ubuntu3.1 500 (phased 10%)
        500 http://ports.example.org/ubuntu noble-updates/main amd64 Packages
 *** 1.12-1ubuntu3 500
        500 http://ports.example.org/ubuntu noble/main amd64 Packages
        100 /var/lib/dpkg/status
libssl3t64:
  Installed: 3.0.13-0ubuntu3
  Candidate: 3.0.13-0ubuntu3.5
  Version table:
     3.0.13-0ubuntu3.5 500
        500 http://ports.example.org/ubuntu noble-updates/main amd64 Packages
     3.0.13-0ubuntu3.4 500
        500 http://ports.example.org/ubuntu noble-security/main amd64 Packages
 *** 3.0.13-0ubuntu3 500
        500 http://ports.example.org/ubuntu noble/main amd64 Packages
        100 /var/lib/dpkg/status
"""


def test_an_ubuntu_image_is_checked_against_its_codenames_security_pocket() -> None:
    targets = "noble-security http://ports.example.org/ubuntu noble-security/main amd64 Packages\n"
    scan = scan_of(answer(os_release=NOBLE_RELEASE, targets=targets, files=NOBLE_FILES, installed=NOBLE_INSTALLED))
    assert scan.scanned and scan.note == "3 packages against noble-security"
    assert [(f.subject, f.detail) for f in scan.findings] == [
        ("libc6 2.39-0ubuntu8", "newer in noble-security: 2.39-0ubuntu8.3"),
        ("libssl3t64 3.0.13-0ubuntu3", "newer in noble-security: 3.0.13-0ubuntu3.4"),
    ]


@pytest.mark.parametrize(
    ("result", "why"),
    [
        (ShellResult(-1, "### os-release\n|ID=debian\n### update\n|Ign:1 ...", "", timed_out=True), "did not finish"),
        (ShellResult(0, "### os-release\n|ID=alpine\n### no-apt\n", ""), "has no apt"),
        (ShellResult(1, "### os-release\n", "mktemp: failed to create directory"), "exit 1): mktemp: failed"),
        (ShellResult(137, answer(), ""), "exit 137"),
        (ShellResult(0, answer(os_release="ID=debian\nVERSION_ID=13\n"), ""), "no VERSION_CODENAME"),
        (
            ShellResult(
                0,
                answer(installed="E: Could not open lock file - open (13: Permission denied)\n", policy_status=100),
                "",
            ),
            "apt-cache policy failed (exit 100): E: Could not open lock file",
        ),
        (ShellResult(0, answer(policy_status=100), ""), "apt-cache policy failed (exit 100)"),
        (ShellResult(0, answer(installed=""), ""), "apt-cache policy failed (exit 0): no output"),
    ],
    ids=[
        "timed out",
        "no apt",
        "script failed",
        "killed",
        "no codename",
        "apt-cache failed",
        "apt-cache failed midway",
        "nothing listed",
    ],
)
def test_apt_failing_is_not_scanned_and_says_why(result: ShellResult, why: str) -> None:
    scan = os_updates.read(result)
    assert not scan.scanned and scan.findings == () and why in scan.note, scan.note


def test_the_engine_failing_leaves_the_gate_not_scanned() -> None:
    engine = FakeEngine()
    engine.shell_answer = EngineError("could not run a container of img:1: No such image")
    options = gate.GateOptions(skip=frozenset({SECRETS, PYTHON}))
    results = {r.check: r for r in gate.run(engine, "t", "img:1", options)}
    assert results[OS_UPDATES].status == NOT_SCANNED and "No such image" in results[OS_UPDATES].note


def test_the_parsers_read_apts_layout() -> None:
    assert os_updates.codename('VERSION_CODENAME="trixie"\n') == "trixie"
    assert os_updates.codename("UBUNTU_CODENAME=jammy\nVERSION_CODENAME=\n") == "jammy"
    assert os_updates.sections("noise\n### a\n|x\nunframed\n### b 3\n### a\n|y\n") == {"a": "x\ny", "b": "3"}
    tables = os_updates.version_tables(DEBIAN_INSTALLED)
    assert [t.package for t in tables] == ["base-files", "libc6", "libexpat1", "libssl3", "libgcc-s1:i386"]
    assert [(v.version, v.installed, len(v.sources)) for v in tables[3].versions] == [
        ("3.0.22-1~deb12u2", False, 1),
        ("3.0.20-1~deb12u2", True, 2),
        ("3.0.17-1~deb12u2", False, 1),
    ]
    phased = os_updates.version_tables(NOBLE_INSTALLED)[1]  # `     1.12-1ubuntu3.1 500 (phased 10%)`
    assert [(v.version, v.sources[0].split()[1]) for v in phased.versions] == [
        ("1.12-1ubuntu3.1", "noble-updates/main"),
        ("1.12-1ubuntu3", "noble/main"),
    ]
    files = os_updates.index_files(DEBIAN_FILES)
    assert [f.release.get("n") for f in files] == [
        None,
        "bookworm-security",
        "bookworm-security",
        "bookworm-updates",
        "bookworm",
    ]
