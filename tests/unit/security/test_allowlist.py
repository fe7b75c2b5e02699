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
    return allowlist.read(path, today=TODAY)


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
    "written",
    [
        "2027-01-31T00:00:00",  # a YAML timestamp, and datetime's ISO forms
        "2027-01-31 10:00:00",
        "2027-01-31t00:00:00z",
        "20270131",  # date.fromisoformat's other forms
        "2027-W05-2",
        "2027-1-31",  # no padding
        "2027-01-1",
        "27-01-31",
        "2027/01/31",
        "31.01.2027",
        "'\uff12\uff10\uff12\uff17-01-31'",  # digits that are not ASCII (fullwidth, Arabic-Indic)
        "'\u0662\u0660\u0662\u0667-01-31'",
        "2027-02-30",  # no such day
        "2027-13-01",
        "2027-01-31 # today",  # a comment is no part of the value (YAML): this one is the next case
        "'2027-01-31 # today'",
    ],
)
def test_expires_takes_yyyy_mm_dd_alone(tmp_path: Path, written: str) -> None:
    text = f"entries:\n  - check: python\n    id: X\n    reason: r\n    expires: {written}\n"
    if written == "2027-01-31 # today":
        assert read(tmp_path, text)[0].expires == datetime.date(2027, 1, 31)
        return
    with pytest.raises(InputError) as refused:
        read(tmp_path, text)
    (problem,) = refused.value.problems
    assert problem.line == 5 and "written YYYY-MM-DD" in problem.message, problem


def test_expires_is_within_a_year_of_today_and_a_past_day_is_an_expired_entry(tmp_path: Path) -> None:
    latest = TODAY + datetime.timedelta(days=allowlist.MAX_DAYS_AHEAD)
    entry = "entries:\n  - {{check: python, id: X, reason: r, expires: {}}}\n"
    assert read(tmp_path, entry.format(latest.isoformat()))[0].expires == latest
    for late in (latest + datetime.timedelta(days=1), datetime.date(9999, 12, 31)):
        with pytest.raises(InputError) as refused:
            read(tmp_path, entry.format(late.isoformat()))
        (problem,) = refused.value.problems
        assert f"more than 366 days ahead (the latest is {latest.isoformat()})" in problem.message, problem
    (past,) = read(tmp_path, entry.format("2000-01-01"))  # read, and expired: it fails what it covers
    assert past.expired(TODAY) and allowlist.expired([past], "any", TODAY) == [past]
    (last,) = read(tmp_path, entry.format(TODAY.isoformat()))  # its last day is today: it still holds
    assert not last.expired(TODAY) and last.expired(TODAY + datetime.timedelta(days=1))


def test_the_horizon_counts_from_the_day_read_in_utc(tmp_path: Path) -> None:
    """The default day is UTC's, whatever the machine's zone: the same file reads the same everywhere."""
    today = allowlist.utc_today()
    assert today == datetime.datetime.now(datetime.UTC).date()
    entry = "entries:\n  - {{check: python, id: X, reason: r, expires: {}}}\n"
    (tmp_path / "a.yaml").write_text(entry.format((today + datetime.timedelta(days=366)).isoformat()))
    assert allowlist.read(tmp_path / "a.yaml")
    (tmp_path / "a.yaml").write_text(entry.format((today + datetime.timedelta(days=367)).isoformat()))
    with pytest.raises(InputError):
        allowlist.read(tmp_path / "a.yaml")


@pytest.mark.parametrize(
    ("text", "said", "line"),
    [
        ("- check: python\n", "a mapping with one key, `entries:`", 1),
        ("entries: {}\n", "`entries:` is a list", 1),
        ("entries:\n  - check: python\n    id: X\n    reason: r\n", "needs expires", 2),
        ("entries:\n  - {check: pip, id: X, reason: r, expires: 2027-01-01}\n", "is none of secrets", 2),
        ("entries:\n  - {check: python, id: X, reason: r, expires: soon}\n", "is not a day written YYYY-MM-DD", 2),
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
