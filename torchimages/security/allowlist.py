"""The repository's allowlist (security-allowlist.yaml): each entry lets one finding of one check through the
gate, for a reason, until a date; an expired entry fails every image it covers until it is renewed or removed
(so nothing stays allowed by being forgotten).

    entries:
      - check: os-updates          # secrets | os-updates | python
        id: libssl3                # a path (secrets), a package (os-updates), a vulnerability id or alias (python)
        package: ""                # python only, optional: the vulnerable package
        reason: no fix for bookworm yet; not reachable from torch
        expires: 2027-01-31        # the last day it holds: YYYY-MM-DD, at most MAX_DAYS_AHEAD days ahead
        images: ["2.9.1-*"]        # optional: tag globs (default: every image)

`expires` is a day written YYYY-MM-DD alone (not a time, not YAML's other date forms, not 2027-1-31), within
a year of the day the file is read (MAX_DAYS_AHEAD), UTC: an entry is renewed, with its reason, at least
yearly. A day already past is read, and is an expired entry.
"""

from __future__ import annotations

import datetime
import fnmatch
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from torchimages import textfile, values
from torchimages.problems import InputError, Problem
from torchimages.security.model import CHECKS, FAILED, NOT_SCANNED, PASSED, PYTHON, Allowed, CheckResult, Finding, Scan

DEFAULT_FILE = "security-allowlist.yaml"
WHAT = "the security allowlist"
KEYS = ("check", "id", "package", "reason", "expires", "images")
REQUIRED = ("check", "id", "reason", "expires")
MAX_TEXT = 500  # characters of an id, package, reason or glob
MAX_DAYS_AHEAD = 366  # the latest `expires` is this many days after today (a year, a leap year's too)
DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")  # YYYY-MM-DD, ASCII digits: the one form `expires` takes


def utc_today() -> datetime.date:
    """Today in UTC: the day entries expire against, wherever the machine's clock is set."""
    return datetime.datetime.now(datetime.UTC).date()


@dataclass(frozen=True)
class Entry:
    """One allowlist entry (see the module); `line` where it starts in its file."""

    check: str
    id: str
    reason: str
    expires: datetime.date
    package: str = ""
    images: tuple[str, ...] = ()
    line: int = 0

    def covers_image(self, tag: str) -> bool:
        return not self.images or any(fnmatch.fnmatchcase(tag, glob) for glob in self.images)

    def expired(self, today: datetime.date) -> bool:
        return today > self.expires

    def allows(self, finding: Finding) -> bool:
        return (
            finding.check == self.check
            and self.id in finding.names()
            and (not self.package or _normal(self.package) == _normal(finding.package))
        )

    def __str__(self) -> str:
        return f"{self.check} {self.id}" + (f" ({self.package})" if self.package else "")


def read(path: Path, required: bool = False, today: datetime.date | None = None) -> tuple[Entry, ...]:
    """The entries of an allowlist file, every one checked against `today` (default: utc_today) (InputError
    lists each problem, located); no file means no entries unless `required` (the user named it)."""
    source = str(path)
    today = today or utc_today()
    try:
        text = textfile.read_text(path, WHAT)
    except textfile.Missing:
        if required:
            raise
        return ()
    root = textfile.compose_yaml(text, source, WHAT)
    if root is None:
        return ()
    fix = f"see the example at the top of {DEFAULT_FILE}, or docs/security.md"
    tops = [(k, v) for k, v in _pairs(root) if isinstance(k, yaml.ScalarNode)]
    names = [str(k.value) for k, _ in tops]
    if not isinstance(root, yaml.MappingNode) or names != ["entries"]:
        raise InputError(
            [
                Problem(
                    "the allowlist is a mapping with one key, `entries:` (a list)",
                    file=source,
                    line=_line(root),
                    suggestion=fix,
                )
            ]
        )
    body = tops[0][1]
    if isinstance(body, yaml.ScalarNode) and body.tag.endswith(":null"):
        return ()
    if not isinstance(body, yaml.SequenceNode):
        raise InputError([Problem("`entries:` is a list of entries", file=source, line=_line(body), suggestion=fix)])
    entries, problems = [], []
    for node in body.value:
        entry, found = _entry(node, source, today)
        problems += found
        if entry:
            entries.append(entry)
    seen: dict[tuple[str, str, str, tuple[str, ...]], int] = {}
    for entry in entries:
        key = (entry.check, entry.id, entry.package, entry.images)
        if key in seen:
            problems.append(
                Problem(f"{entry} is listed twice (first at line {seen[key]})", file=source, line=entry.line)
            )
        seen.setdefault(key, entry.line)
    if problems:
        raise InputError(problems)
    return tuple(entries)


def expiry(text: str, today: datetime.date) -> datetime.date | str:
    """An `expires` value: the day it names, or why it is none (see the module)."""
    try:
        day = datetime.date.fromisoformat(text) if DAY.fullmatch(text) else None
    except ValueError:  # 2027-02-30
        day = None
    if day is None:
        return f"expires {values.show(text)} is not a day written YYYY-MM-DD (e.g. 2027-01-31)"
    latest = today + datetime.timedelta(days=MAX_DAYS_AHEAD)
    if day > latest:
        return (
            f"expires {text} is more than {MAX_DAYS_AHEAD} days ahead (the latest is {latest.isoformat()}): "
            "an entry is renewed, with its reason, at least yearly"
        )
    return day


def _entry(node: yaml.Node, source: str, today: datetime.date) -> tuple[Entry | None, list[Problem]]:
    line = _line(node)
    if not isinstance(node, yaml.MappingNode):
        return None, [Problem("an entry is a mapping (check, id, reason, expires)", file=source, line=line)]
    fields: dict[str, yaml.Node] = {}
    problems = []
    for key, value in node.value:
        name = str(key.value) if isinstance(key, yaml.ScalarNode) else "?"
        if name not in KEYS:
            problems.append(
                Problem(f"unknown key {values.show(name)} (allowed: {', '.join(KEYS)})", file=source, line=_line(key))
            )
        elif name in fields:
            problems.append(Problem(f"`{name}` is given twice", file=source, line=_line(key)))
        else:
            fields[name] = value
    missing = [k for k in REQUIRED if k not in fields]
    if missing:
        problems.append(Problem(f"an entry needs {', '.join(missing)}", file=source, line=line))
    text: dict[str, str] = {}
    for name in ("check", "id", "package", "reason", "expires"):
        value = fields.get(name)
        if value is None:
            continue
        if not isinstance(value, yaml.ScalarNode) or not str(value.value).strip():
            problems.append(Problem(f"`{name}` is a non-empty text", file=source, line=_line(value)))
        elif len(str(value.value)) > MAX_TEXT or not str(value.value).isprintable():
            problems.append(
                Problem(
                    f"`{name}` is one printable line of at most {MAX_TEXT} characters", file=source, line=_line(value)
                )
            )
        else:
            text[name] = str(value.value).strip()
    if "check" in text and text["check"] not in CHECKS:
        problems.append(
            Problem(
                f"check {values.show(text['check'])} is none of {', '.join(CHECKS)}",
                file=source,
                line=_line(fields["check"]),
            )
        )
    if "package" in text and text.get("check") != PYTHON:
        problems.append(Problem("`package` is for python entries only", file=source, line=_line(fields["package"])))
    expires = None
    if "expires" in text:
        day = expiry(text["expires"], today)
        if isinstance(day, str):
            problems.append(Problem(day, file=source, line=_line(fields["expires"])))
        else:
            expires = day
    images: list[str] = []
    if "images" in fields:
        value = fields["images"]
        items = value.value if isinstance(value, yaml.SequenceNode) else None
        if not items or not all(isinstance(i, yaml.ScalarNode) and str(i.value).strip() for i in items):
            problems.append(Problem("`images` is a list of tag globs", file=source, line=_line(value)))
        else:
            images = [str(i.value).strip() for i in items]
            if any(len(g) > MAX_TEXT or not g.isprintable() for g in images):
                problems.append(Problem("a tag glob is one printable line", file=source, line=_line(value)))
    if problems or expires is None:
        return None, problems
    entry = Entry(text["check"], text["id"], text["reason"], expires, text.get("package", ""), tuple(images), line)
    return entry, []


def apply(scan: Scan, entries: Sequence[Entry], tag: str, today: datetime.date) -> CheckResult:
    """The verdict of one check on the image `tag`: each finding allowed by an unexpired entry that covers the
    image, or failing; each expired entry of this check that covers the image failing too; not scanned (never
    passed) when the check could not look."""
    mine = [e for e in entries if e.check == scan.check and e.covers_image(tag)]
    live = [e for e in mine if not e.expired(today)]
    failing = [
        f"allowlist entry {e} (line {e.line}) expired on {e.expires.isoformat()}: renew it with a reason, or remove it"
        for e in mine
        if e.expired(today)
    ]
    allowed = []
    for finding in scan.findings:
        entry = next((e for e in live if e.allows(finding)), None)
        if entry:
            allowed.append(Allowed(finding, str(entry), entry.reason, entry.expires.isoformat()))
        else:
            failing.append(str(finding))
    status = FAILED if failing else (PASSED if scan.scanned else NOT_SCANNED)
    return CheckResult(scan.check, status, tuple(failing), tuple(allowed), scan.note)


def expired(entries: Iterable[Entry], tag: str, today: datetime.date) -> list[Entry]:
    """The entries covering `tag` that have expired (what `outdated` reports)."""
    return [e for e in entries if e.covers_image(tag) and e.expired(today)]


def _normal(name: str) -> str:
    """A Python package name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _pairs(node: yaml.Node | None) -> list[tuple[yaml.Node, yaml.Node]]:
    return list(node.value) if isinstance(node, yaml.MappingNode) else []


def _line(node: yaml.Node | None) -> int:
    return int(node.start_mark.line) + 1 if node is not None else 0
