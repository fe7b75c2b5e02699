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
        return "".join(parts)


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
