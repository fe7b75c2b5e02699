"""What the security checks find and say: `Finding`, one check's raw `Scan`, and its `CheckResult` once the
allowlist is applied."""

from __future__ import annotations

from dataclasses import dataclass

SECRETS = "secrets"  # credentials, private keys, the build's secrets, stray files: in any layer
OS_UPDATES = "os-updates"  # installed OS packages with a newer version in the security suite
PYTHON = "python"  # known vulnerabilities of the venv's Python packages
CHECKS = (SECRETS, OS_UPDATES, PYTHON)

PASSED, FAILED, NOT_SCANNED, SKIPPED = "passed", "failed", "not scanned", "skipped"


@dataclass(frozen=True)
class Finding:
    """One thing a check found: `key` is what an allowlist entry names (a path in the image for secrets, a
    package for os-updates, a vulnerability id for python); `aliases` other names of it (CVE-..., GHSA-...);
    `subject` what holds it (`libssl3 3.0.15-1~deb12u1`, `layer 3 of 12`), `detail` what it is."""

    check: str
    key: str
    subject: str
    detail: str
    aliases: tuple[str, ...] = ()
    package: str = ""  # the package a python vulnerability is of (an entry may name it)

    def names(self) -> tuple[str, ...]:
        return (self.key, *self.aliases)

    def __str__(self) -> str:
        return f"{self.check}: {self.subject}: {self.detail}"


@dataclass(frozen=True)
class Scan:
    """A check's raw answer: what it found, or that it could not look (`scanned` False, `note` says why;
    never read as clean). `note` may also say what was scanned (`412 packages`)."""

    check: str
    findings: tuple[Finding, ...] = ()
    scanned: bool = True
    note: str = ""


@dataclass(frozen=True)
class Allowed:
    """A finding an allowlist entry lets through: the entry's id, reason and expiry (ISO date)."""

    finding: Finding
    entry: str
    reason: str
    expires: str


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict on one image: `status` passed | failed | not scanned | skipped; `failing` the
    findings no entry allows, and the problems of the allowlist itself (an expired entry); `allowed` the others."""

    check: str
    status: str
    failing: tuple[str, ...] = ()
    allowed: tuple[Allowed, ...] = ()
    note: str = ""

    def line(self) -> str:
        """One line for logs and the summary: `os-updates: failed (3 pending, 1 allowed)`."""
        counts = [f"{len(self.failing)} failing"] if self.failing else []
        counts += [f"{len(self.allowed)} allowed"] if self.allowed else []
        inner = ", ".join(counts + ([self.note] if self.note else []))
        return f"{self.check}: {self.status}" + (f" ({inner})" if inner else "")
