"""Problems found in user input, reported all at once."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Severity(Enum):
    """How bad a problem is: errors refuse the input, warnings only inform."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input, located and explained."""

    message: str
    file: str = ""
    line: int = 0
    key: str = ""
    allowed: str = ""
    suggestion: str = ""
    severity: Severity = Severity.ERROR

    def __str__(self) -> str:
        where = self.file
        if self.line:
            where += f":{self.line}"
        parts = [f"{where}: " if where else "", f"{self.severity.value}: "]
        if self.key:
            parts.append(f"{self.key}: ")
        parts.append(self.message)
        if self.allowed:
            parts.append(f" (allowed: {self.allowed})")
        if self.suggestion:
            parts.append(f"; {self.suggestion}")
        return shown("".join(parts))


MAX_SHOWN = 1000


def shown(text: str) -> str:
    """Text safe to print: every character that is not printable (NUL, a zero-width space, a line or
    paragraph separator, an escape, a newline) is shown as its escape, so a message is one honest line;
    a line longer than MAX_SHOWN keeps its start and end (a huge value is not printed whole)."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(text) > MAX_SHOWN:
        head, tail = MAX_SHOWN * 2 // 3, MAX_SHOWN // 4
        text = f"{text[:head]}...[{len(text) - head - tail} characters cut]...{text[-tail:]}"
    return text


def distinct(problems: list[Problem]) -> list[Problem]:
    """The problems without repeats (the same problem found once per combination is told once)."""
    seen: set[str] = set()
    out = []
    for problem in problems:
        if str(problem) not in seen:
            seen.add(str(problem))
            out.append(problem)
    return out


class InputError(Exception):
    """Raised with every problem found in the input (exit status 2)."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def errors(problems: list[Problem]) -> list[Problem]:
    """The problems that refuse the input."""
    return [p for p in problems if p.severity is Severity.ERROR]


def warnings(problems: list[Problem]) -> list[Problem]:
    """The problems that only inform."""
    return [p for p in problems if p.severity is Severity.WARNING]


class UsageError(Exception):
    """A command cannot run as asked (exit status 2); the message says why and what to do."""
