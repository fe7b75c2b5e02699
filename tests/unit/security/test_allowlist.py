"""The allowlist: each refusal of a bad file, located; an entry lets exactly its finding through, for the
images it names, until its date; an expired entry fails the image; "not scanned" never becomes a pass."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from torchimages.problems import InputError
from torchimages.security import allowlist
from torchimages.security.model import FAILED, NOT_SCANNED, PASSED, Finding, Scan

TODAY = datetime.date(2026, 12, 2)
OPENSSL = Finding("os-updates", "libssl3", "libssl3 3.0.15-1~deb12u1", "newer in bookworm-security: 3.0.17-1~deb12u2")
REQUESTS = Finding(
    "python",
    "PYSEC-2018-28",
    "requests 2.19.0",
    "known vulnerability PYSEC-2018-28 (fixed in: 2.20.0)",
    aliases=("CVE-2018-18074", "GHSA-x84v-xcm2-53pg"),
    package="requests",
)
GOOD = """\
entries:
  - check: os-updates
    id: libssl3
    reason: no fix needed before the next rebuild
    expires: 2027-01-31
    images: ["2.9.1-*"]
  - check: python
    id: CVE-2018-18074
    package: Requests
    reason: not reachable from torch
    expires: 2026-12-02
"""


def read(tmp_path: Path, text: str) -> tuple[allowlist.Entry, ...]:
    path = tmp_path / "security-allowlist.yaml"
    path.write_text(text)
    return allowlist.read(path)


def test_a_good_file_reads_every_field(tmp_path: Path) -> None:
    ssl, req = read(tmp_path, GOOD)
    assert (ssl.check, ssl.id, ssl.expires, ssl.images, ssl.line) == (
        "os-updates",
        "libssl3",
        datetime.date(2027, 1, 31),
        ("2.9.1-*",),
        2,
    )
    assert (req.package, req.images, req.reason) == ("Requests", (), "not reachable from torch")


def test_no_file_is_no_entries_unless_named(tmp_path: Path) -> None:
    assert allowlist.read(tmp_path / "absent.yaml") == ()
    with pytest.raises(InputError):
        allowlist.read(tmp_path / "absent.yaml", required=True)
    assert read(tmp_path, "entries: []\n") == () and read(tmp_path, "entries:\n") == ()


@pytest.mark.parametrize(
    ("text", "said", "line"),
    [
        ("- check: python\n", "a mapping with one key, `entries:`", 1),
        ("entries: {}\n", "`entries:` is a list", 1),
        ("entries:\n  - check: python\n    id: X\n    reason: r\n", "needs expires", 2),
        ("entries:\n  - {check: pip, id: X, reason: r, expires: 2027-01-01}\n", "is none of secrets", 2),
        ("entries:\n  - {check: python, id: X, reason: r, expires: soon}\n", "is not a date", 2),
        ("entries:\n  - {check: python, id: X, reason: '', expires: 2027-01-01}\n", "`reason` is a non-empty", 2),
        ("entries:\n  - {check: python, id: X, reason: r, expires: 2027-01-01, why: x}\n", "unknown key", 2),
        ("entries:\n  - {check: secrets, id: X, package: p, reason: r, expires: 2027-01-01}\n", "python entries", 2),
        ("entries:\n  - {check: python, id: X, reason: r, expires: 2027-01-01, images: []}\n", "tag globs", 2),
        ("entries:\n  - {check: python, id: [X], reason: r, expires: 2027-01-01}\n", "`id` is a non-empty", 2),
        (
            "entries:\n  - {check: python, id: X, reason: r, expires: 2027-01-01}\n"
            "  - {check: python, id: X, reason: s, expires: 2027-02-01}\n",
            "listed twice (first at line 2)",
            3,
        ),
    ],
)
def test_a_bad_file_is_refused_naming_the_line(tmp_path: Path, text: str, said: str, line: int) -> None:
    with pytest.raises(InputError) as refused:
        read(tmp_path, text)
    problems = refused.value.problems
    assert any(said in p.message and p.line == line for p in problems), [str(p) for p in problems]


def test_an_entry_allows_its_finding_for_the_images_it_names(tmp_path: Path) -> None:
    entries = read(tmp_path, GOOD)
    result = allowlist.apply(Scan("os-updates", (OPENSSL,)), entries, "2.9.1-cpu-py3.11-debian12", TODAY)
    assert result.status == PASSED and [a.entry for a in result.allowed] == ["os-updates libssl3"]
    assert result.allowed[0].expires == "2027-01-31"
    other = allowlist.apply(Scan("os-updates", (OPENSSL,)), entries, "2.14.1-cuda13.0-cudnn9-runtime", TODAY)
    assert other.status == FAILED and other.failing == (str(OPENSSL),)


def test_a_python_entry_matches_an_alias_and_its_package_by_normal_name(tmp_path: Path) -> None:
    entries = read(tmp_path, GOOD)
    result = allowlist.apply(Scan("python", (REQUESTS,)), entries, "any", TODAY)  # expires today: still holds
    assert result.status == PASSED and len(result.allowed) == 1
    numpy = Finding("python", "PYSEC-2018-28", "numpy 1.0", "x", aliases=("CVE-2018-18074",), package="numpy")
    assert allowlist.apply(Scan("python", (numpy,)), entries, "any", TODAY).status == FAILED


def test_an_expired_entry_fails_every_image_it_covers(tmp_path: Path) -> None:
    entries = read(tmp_path, GOOD)
    tomorrow = TODAY + datetime.timedelta(days=1)
    result = allowlist.apply(Scan("python", ()), entries, "any", tomorrow)  # nothing found, still refused
    assert result.status == FAILED
    assert result.failing == (
        "allowlist entry python CVE-2018-18074 (Requests) (line 7) expired on 2026-12-02: renew it with a reason, "
        "or remove it",
    )
    with_finding = allowlist.apply(Scan("python", (REQUESTS,)), entries, "any", tomorrow)
    assert with_finding.allowed == () and str(REQUESTS) in with_finding.failing
    assert [str(e) for e in allowlist.expired(entries, "any", tomorrow)] == ["python CVE-2018-18074 (Requests)"]


def test_not_scanned_stays_not_scanned(tmp_path: Path) -> None:
    result = allowlist.apply(Scan("python", scanned=False, note="no service"), read(tmp_path, GOOD), "x", TODAY)
    assert (result.status, result.note) == (NOT_SCANNED, "no service")


def test_an_id_that_is_a_prefix_of_another_allows_nothing_of_it(tmp_path: Path) -> None:
    text = "entries:\n  - {check: secrets, id: /root/.ne, reason: r, expires: 2027-01-01}\n"
    netrc = Finding("secrets", "/root/.netrc", "layer 2 of 2", "/root/.netrc: a netrc file")
    cve = Finding("python", "PYSEC-2018-2", "requests 2.19.0", "x", aliases=("CVE-2018-1807",))
    for finding, entries in ((netrc, read(tmp_path, text)), (REQUESTS, read(tmp_path, GOOD.replace("18074", "1807")))):
        result = allowlist.apply(Scan(finding.check, (finding,)), entries, "any", TODAY)
        assert result.status == FAILED and result.allowed == ()
    assert allowlist.apply(Scan("python", (cve,)), read(tmp_path, GOOD), "any", TODAY).status == FAILED
