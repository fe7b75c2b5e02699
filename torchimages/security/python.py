"""Known vulnerabilities of the packages in an image's venv, by pip-audit (the PyPI package, run on this
machine over the `name==version` list read from the image: no network inside the image, and the image is
not changed).

pip-audit asks a vulnerability service (PyPI's JSON API by default). A package the service does not answer
for is *skipped* by pip-audit, which still says "No known vulnerabilities found" and exits 0; here a skipped
package makes the scan "not scanned" (never clean), and the note says how many and why. Versions are audited
by their public part (`2.9.1+cpu` as 2.9.1): advisories name public releases.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from torchimages.engine import Engine, run_cancellable
from torchimages.security.model import PYTHON, Finding, Scan

AUDIT_TIMEOUT_S = 600.0  # pip-audit's whole run; a service that stalls makes the scan "not scanned"
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")  # a distribution's name (PEP 508)
PACKAGES_PROBE = """
import importlib.metadata as m
for d in m.distributions():
    print(f"{d.metadata['Name']}=={d.version}")
"""


def scan(engine: Engine, reference: str, cancelled: threading.Event | None = None) -> Scan:
    """The known vulnerabilities of the venv's packages in `reference` (see the module)."""
    packages = parse_packages(engine.run_python(reference, ["-c", PACKAGES_PROBE]))
    if not packages:
        return Scan(PYTHON, scanned=False, note="the image's Python lists no installed packages")
    with tempfile.TemporaryDirectory(prefix="torchimages-audit-") as folder:
        requirements = Path(folder) / "requirements.txt"
        requirements.write_text("".join(f"{name}=={version}\n" for name, version in packages))
        done = _run(audit_command(requirements), cancelled)
    if done is None:
        return Scan(PYTHON, scanned=False, note=f"pip-audit did not finish in {AUDIT_TIMEOUT_S:.0f} s")
    return read_report(done.stdout, done.returncode, done.stderr, packages)


def parse_packages(text: str) -> list[tuple[str, str]]:
    """`name==version` lines as (name, public version), sorted, each once. What the image prints is not trusted:
    a line whose name is not a distribution name (PEP 508) or whose version is not a version (PEP 440) is left
    out, so nothing it prints becomes an option of the requirements file pip-audit reads."""
    found = set()
    for line in text.splitlines():
        name, sep, version = line.strip().partition("==")
        if not sep or not _NAME.fullmatch(name):
            continue
        try:
            found.add((name, Version(version).public))
        except InvalidVersion:
            continue
    return sorted(found)


def audit_command(requirements: Path) -> list[str]:
    """pip-audit over a requirements file of exact pins, without resolving or installing anything."""
    return [
        sys.executable,
        "-m",
        "pip_audit",
        "--requirement",
        str(requirements),
        "--no-deps",
        "--disable-pip",
        "--format",
        "json",
        "--aliases",
        "on",
        "--desc",
        "off",
        "--progress-spinner",
        "off",
    ]


def read_report(stdout: str, status: int, stderr: str, packages: Sequence[tuple[str, str]]) -> Scan:
    """The Scan pip-audit's JSON report says: a finding per vulnerability (its id the key, CVE and GHSA ids
    its aliases); not scanned when pip-audit failed or skipped any package (how many, and why)."""
    try:
        report: Any = json.loads(stdout)
        dependencies = report["dependencies"]
        if not isinstance(dependencies, list):
            raise TypeError("dependencies is not a list")
    except (ValueError, KeyError, TypeError):
        why = _last_line(stderr) or f"exit status {status}, no report"
        return Scan(PYTHON, scanned=False, note=f"pip-audit failed: {why}")
    findings, skipped = [], []
    for dependency in dependencies:
        if not isinstance(dependency, dict):
            continue
        name = str(dependency.get("name", "?"))
        if "skip_reason" in dependency:
            skipped.append(f"{name}: {dependency['skip_reason']}")
            continue
        version = str(dependency.get("version", "?"))
        for vuln in dependency.get("vulns") or []:
            fixed = ", ".join(str(v) for v in vuln.get("fix_versions") or []) or "no fixed release yet"
            findings.append(
                Finding(
                    PYTHON,
                    str(vuln.get("id", "?")),
                    f"{name} {version}",
                    f"known vulnerability {vuln.get('id', '?')} (fixed in: {fixed})",
                    aliases=tuple(str(a) for a in vuln.get("aliases") or []),
                    package=name,
                )
            )
    audited = f"{len(packages)} packages"
    if skipped:
        how = "any" if len(skipped) >= len(packages) else f"{len(skipped)} of the {len(packages)}"
        note = f"pip-audit could not audit {how} packages (first: {skipped[0]})"
        return Scan(PYTHON, tuple(findings), scanned=False, note=note)
    return Scan(PYTHON, tuple(findings), note=audited)


def _run(cmd: list[str], cancelled: threading.Event | None) -> subprocess.CompletedProcess[str] | None:
    """The command's result, or None when it ran past AUDIT_TIMEOUT_S (stopped) or was cancelled."""
    stop = _Either(cancelled)
    timer = threading.Timer(AUDIT_TIMEOUT_S, stop.set)
    timer.start()
    try:
        done = run_cancellable(cmd, stop, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        timer.cancel()
    return None if stop.is_set() else done


class _Either(threading.Event):
    """Set by itself (the deadline) or by the caller's cancel event."""

    def __init__(self, other: threading.Event | None) -> None:
        super().__init__()
        self.other = other

    def is_set(self) -> bool:
        return super().is_set() or (self.other is not None and self.other.is_set())


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""
