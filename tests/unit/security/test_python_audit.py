"""The Python scan: pip-audit's JSON read into findings, a skipped package making the scan "not scanned",
and pip-audit run for real here, where its service does not answer.

The one answer that stands in for a service: pip-audit's vulnerability services cannot be reached from this
machine (PyPI's JSON API answers 404 for a release's vulnerabilities, OSV's host does not resolve), so
VULNERABLE below is written as pip-audit 2.10.1 writes its report (`--format json --aliases on --desc off`,
pip_audit/_format/json.py), not recorded from a live run, for requests 2.19.0, whose advisory PYSEC-2018-28
(CVE-2018-18074, GHSA-x84v-xcm2-53pg) is fixed in 2.20.0. SKIPPED_HERE is what pip-audit printed here.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.fakes import FakeEngine
from torchimages.engine import ImageInfo
from torchimages.security import python
from torchimages.security.model import PYTHON

VULNERABLE = json.dumps(
    {
        "dependencies": [
            {
                "name": "requests",
                "version": "2.19.0",
                "vulns": [
                    {
                        "id": "PYSEC-2018-28",
                        "fix_versions": ["2.20.0"],
                        "aliases": ["CVE-2018-18074", "GHSA-x84v-xcm2-53pg"],
                    }
                ],
            },
            {"name": "six", "version": "1.16.0", "vulns": []},
        ],
        "fixes": [],
    }
)
# What pip-audit 2.10.1 printed here (PyPI's JSON API answering 404), with exit status 0.
SKIPPED_HERE = (
    '{"dependencies": [{"name": "requests", "skip_reason": "Dependency not found on PyPI and could not be '
    'audited: requests (2.19.0)"}], "fixes": []}'
)
PACKAGES = [("requests", "2.19.0"), ("six", "1.16.0")]


def test_a_known_vulnerability_is_a_finding_with_its_aliases() -> None:
    scan = python.read_report(VULNERABLE, 1, "", PACKAGES)
    assert scan.scanned and scan.note == "2 packages"
    (finding,) = scan.findings
    assert (finding.key, finding.aliases, finding.package, finding.subject) == (
        "PYSEC-2018-28",
        ("CVE-2018-18074", "GHSA-x84v-xcm2-53pg"),
        "requests",
        "requests 2.19.0",
    )
    assert "fixed in: 2.20.0" in finding.detail


def test_a_skipped_package_is_not_scanned_never_clean() -> None:
    scan = python.read_report(SKIPPED_HERE, 0, "", PACKAGES[:1])
    assert not scan.scanned and scan.findings == ()
    assert "could not audit any packages" in scan.note and "not found on PyPI" in scan.note
    some = python.read_report(SKIPPED_HERE, 0, "", PACKAGES)
    assert not some.scanned and "1 of the 2 packages" in some.note


def test_pip_audit_failing_is_not_scanned_with_its_last_line() -> None:
    scan = python.read_report("", 1, "Traceback...\nConnectionError: api.osv.dev: Name or service not known\n", [])
    assert not scan.scanned and scan.note == "pip-audit failed: ConnectionError: api.osv.dev: Name or service not known"


def test_versions_are_audited_by_their_public_part() -> None:
    text = "torch==2.9.1+cpu\nnot a pin\nsix==1.16.0\nsix==1.16.0\n"
    assert python.parse_packages(text) == [("six", "1.16.0"), ("torch", "2.9.1")]


def test_what_the_image_prints_never_becomes_a_requirements_option() -> None:
    hostile = (
        "--index-url http://evil.example==1\n-r /etc/shadow==1\nok-pkg==1.0\nbad==1.0; rm -rf /\nx==not-a-version\n"
    )
    assert python.parse_packages(hostile) == [("ok-pkg", "1.0")]


OPTION_LINES = [
    "--index-url https://evil.example/simple",
    "--index-url=https://evil.example/simple==1",
    "-i https://evil.example/simple==1",
    "--extra-index-url https://evil.example==1.0",
    "-e git+https://evil.example/x.git#egg=x==1.0",
    "-e .==1.0",
    "--editable=./x==1.0",
    "x==1.0 --hash=sha256:" + "0" * 64,
    "x==1.0 \\",
    "--hash=sha256:00==1.0",
    "-r other.txt",
    "-r other.txt==1.0",
    "--requirement=other.txt==1.0",
    "-c constraints.txt==1.0",
    "pkg==1.0 --install-option=--prefix=/tmp",
    "pkg==1.0 --config-settings=x=y",
    "pkg==1.0 ; python_version>'3'",
    "pkg==1.0\t--trusted-host evil.example",
    "--trusted-host==1.0",
    "-f https://evil.example/wheels==1.0",
    "--pre==1.0",
    "pkg[extra]==1.0",
    "pkg @ https://evil.example/pkg.whl==1.0",
    "-==1.0",
]


def test_no_line_carrying_an_option_reaches_pip_audits_requirements_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the image prints is untrusted: of lines carrying a pip option (an index, -e, --hash, -r, `pkg --opt`),
    none reaches the file pip-audit reads; each line written is `name==version`, the good pins alone."""
    written: list[str] = []

    def audit(cmd: list[str], cancelled: object) -> subprocess.CompletedProcess[str]:
        written.extend(Path(cmd[cmd.index("--requirement") + 1]).read_text().splitlines())
        return subprocess.CompletedProcess(cmd, 0, '{"dependencies": [], "fixes": []}', "")

    monkeypatch.setattr(python, "_run", audit)
    engine = FakeEngine()
    engine.add(ImageInfo("img:1", "sha256:" + "1" * 64, {}, {}, "", ()))
    engine.venv_packages = "\n".join([*OPTION_LINES, "six==1.16.0", "torch==2.9.1+cpu"]) + "\n"
    python.scan(engine, "img:1")
    assert written == ["six==1.16.0", "torch==2.9.1"], written
    for line in OPTION_LINES:
        assert python.parse_packages(line) == [], line


def test_the_real_pip_audit_here_says_not_scanned() -> None:
    """pip-audit itself, run over what the fake image lists: its service does not answer from this machine, so
    the scan must say so (where it does answer, the scan is real and says "2 packages" or finds something)."""
    engine = FakeEngine()
    engine.add(ImageInfo("img:1", "sha256:" + "1" * 64, {}, {}, "", ()))
    engine.venv_packages = "requests==2.19.0\nsix==1.16.0\n"
    scan = python.scan(engine, "img:1")
    assert scan.check == PYTHON
    if scan.scanned:  # a machine whose pip-audit reaches its service: requests 2.19.0 is vulnerable
        assert any(f.key == "PYSEC-2018-28" or "CVE-2018-18074" in f.aliases for f in scan.findings)
    else:
        assert scan.note.startswith(("pip-audit could not audit", "pip-audit failed")), scan.note
