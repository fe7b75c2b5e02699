"""The constraints file keeps the promise in derived images: what the image was built with is what it has.

Every image writes CONSTRAINTS_PATH once its venv is complete (templates/macros.j2 `constraints`): a first
line HEADER, then `name==version` of torch, its companions, triton and NVIDIA's wheels (nvidia-*, cuda-*), as
installed. PIP_CONSTRAINT and UV_CONSTRAINT name it, so pip and uv hold every later install, in the image and
in an image built FROM it, to those pins. One that lifted them on purpose and replaced a pinned distribution
is told here: the facts probe reads the file (within bounds) and every installed distribution's version;
`check` lists each pin the image no longer keeps, by the exact version: another local label of it is
another build (`2.14.1+cpu` does not keep `torch==2.14.1`, though pip and uv would install it). No file (an
older image, a foreign one), one torchimages did not write, or one that cannot be read is said, never failed:
there is no promise to hold it to.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torchimages.problems import shown

CONSTRAINTS_PATH = "/etc/pip/constraint.txt"
HEADER = "# torchimages: the versions this image was built with; pip (PIP_CONSTRAINT) and uv (UV_CONSTRAINT) keep them"
VARIABLES = ("PIP_CONSTRAINT", "UV_CONSTRAINT")
MAX_LINES = 10_000  # the probe reads at most 1 MiB (facts.py CONSTRAINTS_BYTES); a real file has ~40 lines
# `name[extras]==version`: PEP 508's name (ASCII), optional extras, one exact version; nothing else on the line.
_PIN = re.compile(
    r"(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?:\[[A-Za-z0-9._,\s-]*\])?\s*==\s*(?P<version>\S+)",
    re.ASCII,
)
_COMMENT = re.compile(r"(^|\s)#.*$")  # as pip strips them: a `#` at the start or after white space


@dataclass(frozen=True)
class Pin:
    """One `name==version` line: the distribution's normalized name and the exact version."""

    name: str
    version: str


@dataclass(frozen=True)
class ConstraintsFile:
    """A constraints file as read: whether torchimages wrote it (its first line), its pins, and how many
    other lines (options such as `-r x.txt`, ranges, markers, what is not a requirement) were passed over."""

    ours: bool
    pins: tuple[Pin, ...]
    skipped: int


@dataclass(frozen=True)
class Drift:
    """A pinned distribution the image no longer has at its pinned version (`found` None: not installed)."""

    name: str
    pinned: str
    found: str | None

    def __str__(self) -> str:
        now = f"it now has {shown(self.found)}" if self.found is not None else "it is no longer installed"
        return f"{self.name}: the image was built with {self.pinned}, {now}"


@dataclass(frozen=True)
class ConstraintsVerdict:
    """What `check` found: whether the pins were checked, the drifts (each a problem), and what is said
    without failing (why not checked, the variables a derived image lifted, lines passed over)."""

    checked: bool
    drifts: tuple[Drift, ...]
    notes: tuple[str, ...]


def parse(text: str) -> ConstraintsFile:
    """The pins of a constraints file's text (read from an image: anything). Never raises."""
    lines = text.splitlines()[:MAX_LINES]
    ours = bool(lines) and lines[0].rstrip() == HEADER
    pins: dict[Pin, None] = {}
    skipped = 0
    for line in lines:
        body = _COMMENT.sub("", line).strip()
        if not body:
            continue
        pin = _pin(body)
        if pin is None:
            skipped += 1
        else:
            pins[pin] = None
    return ConstraintsFile(ours, tuple(pins), skipped)


def _pin(body: str) -> Pin | None:
    match = _PIN.fullmatch(body)
    if match is None:
        return None
    try:
        version = Version(match["version"])
    except InvalidVersion:
        return None
    return Pin(canonicalize_name(match["name"]), str(version))


def _keeps(pin: Pin, installed: str) -> bool:
    """Whether the installed version is the pinned one exactly, local label included: `torch==2.14.1` admits
    `2.14.1+cpu` and `2.14.1+cu126` in pip and uv alike (PEP 440 ignores a candidate's local label when the
    pin has none, and no form refuses every other label in both: uv's `===` is reported to admit them,
    uv#14981), so the check holds the image to the build it was made with. Versions compare by PEP 440
    (13.0.3 is 13.0.3.0)."""
    try:
        return Version(installed) == Version(pin.version)
    except InvalidVersion:
        return False


def _installed(answer: Mapping[str, Any]) -> dict[str, str] | None:
    found = answer.get("installed")
    if not isinstance(found, Mapping):
        return None
    out: dict[str, str] = {}
    for name, version in found.items():
        if not isinstance(name, str) or not isinstance(version, str):
            return None
        out[canonicalize_name(name)] = version
    return out


def _lifted(answer: Mapping[str, Any], path: str) -> list[str]:
    """Which of the two variables no longer name the file (said: a derived image may lift them on purpose)."""
    environment = answer.get("environment")
    if not isinstance(environment, Mapping):
        return []
    notes = []
    for variable in VARIABLES:
        value = environment.get(variable)
        if value != path:
            now = "is not set" if value is None else ("is empty" if value == "" else f"is {shown(str(value))}")
            notes.append(f"{variable} {now} (the image set it to {path}): installs are not held to the pins")
    return notes


def check(raw: Mapping[str, Any]) -> ConstraintsVerdict:
    """Every pin of the image's constraints file that the image no longer keeps (the facts probe's answer,
    `constraints`), and what is said instead of checked: no file, a foreign one, one that cannot be read."""
    answer = raw.get("constraints")
    if not isinstance(answer, Mapping):
        return ConstraintsVerdict(
            False, (), ("the facts probe read no constraints file (an older probe): not checked",)
        )
    path = str(answer.get("path") or CONSTRAINTS_PATH)
    where = shown(path)
    if answer.get("missing"):
        return ConstraintsVerdict(
            False, (), (f"no {where} (an image older than it, or not built by torchimages): its pins are not checked",)
        )
    text, error, installed = answer.get("text"), answer.get("error"), _installed(answer)
    if error or not isinstance(text, str) or installed is None:
        why = shown(str(error)) if error else "a malformed answer"
        return ConstraintsVerdict(False, (), (f"{where} was not read ({why}): its pins are not checked",))
    found = parse(text)
    if not found.ours:
        return ConstraintsVerdict(False, (), (f"{where} was not written by torchimages: its pins are not checked",))
    drifts = tuple(
        Drift(pin.name, pin.version, installed.get(pin.name))
        for pin in found.pins
        if pin.name not in installed or not _keeps(pin, installed[pin.name])
    )
    notes = _lifted(answer, path) if drifts else []
    if found.skipped:
        notes.append(f"{where}: {found.skipped} line(s) that are not `name==version` were passed over")
    return ConstraintsVerdict(True, drifts, tuple(notes))
