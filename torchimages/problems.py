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


def escaped(text: str, keep: str = "") -> str:
    """`text` with every character that is not printable, other than those in `keep`, as its escape: a
    control character of C0 or C1 (an escape sequence's ESC or CSI, a newline, a carriage return), DEL, a
    zero-width or line separator, a surrogate standing for an undecodable byte (`\\x1b`, `\\n`, `\\udcff`).
    What reaches a terminal or a machine-read line through it cannot move the cursor, recolour, or start a
    line of its own."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)


def shown(text: str) -> str:
    """Text safe to print as one line: `escaped` (a newline too), and a line longer than MAX_SHOWN keeps its
    start and end (a huge value is not printed whole). Every text from outside (an image's labels and output,
    a registry's or cosign's or the engine's words, a file's name) goes through it where it is printed."""
    text = escaped(text)
    if len(text) > MAX_SHOWN:
        head, tail = MAX_SHOWN * 2 // 3, MAX_SHOWN // 4
        text = f"{text[:head]}...[{len(text) - head - tail} characters cut]...{text[-tail:]}"
    return text


def shown_lines(text: str) -> str:
    """A message of several lines (the tool's own line breaks, its items each `shown` already) safe to print:
    each line `shown`, the breaks kept."""
    return "\n".join(shown(line) for line in text.split("\n"))


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
