"""What happened to each image a build or promotion handled (`Outcome`), and the summary table
printed at the end, one row per image with why it failed."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from torchimages.combination import Combination, Image
from torchimages.problems import shown
from torchimages.security.model import CheckResult
from torchimages.sizes import format_size

# The first words of a failed build's detail when the cause is the machine, not the build: the summary's reason.
ENGINE_GONE = "the Docker engine at"
NO_SPACE = "no space left on device"


@dataclass(frozen=True)
class Outcome:
    """What happened to one image (built, promoted, skipped: up to date, failed, interrupted), why, and how long
    each step took."""

    combination: Combination
    image: Image
    status: str  # built | promoted | skipped | failed | interrupted
    seconds: float
    detail: str = ""
    build_seconds: float | None = None  # the BuildKit build, when one ran
    test_seconds: float | None = None  # the checks before tagging (size budget, verification, smoke gate)
    size_bytes: int | None = None  # the image's size (uncompressed), when it was read
    security: tuple[CheckResult, ...] = ()  # the security gate's results, when it ran
    cuda_archs: str | None = None  # the GPU architectures verification read of torch (archs label text; None: none)
    verify_seconds: float | None = None  # of test_seconds: size budgets, versions, libraries, pins, GPU architectures
    gate_seconds: float | None = None  # of test_seconds: the security gate, when it ran
    smoke_seconds: float | None = None  # of test_seconds: the smoke suites, when they ran
    image_id: str = ""  # the id of the image verified and tagged (built, promoted) or found up to date (skipped)


def summary(outcomes: Sequence[Outcome], always: tuple[str, ...] = ("built", "skipped", "failed")) -> str:
    """A table, one row per image: its result, total time, reference, size, build and test time (a failed
    or interrupted image with why, under its row from the image column on); then a count of each status:
    those in `always` even when none, the others (interrupted, promoted) only when some are. Plain text, one
    line per row however wide (a CI log is read a line at a time); rich lays out the columns."""
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=None, pad_edge=False, padding=(0, 1), header_style="", show_edge=False)
    for name in ("result", "total", "image", "size", "build", "test"):
        table.add_column(name, justify="left" if name in ("result", "image") else "right")
    for o in outcomes:
        size = format_size(o.size_bytes) if o.size_bytes else "-"
        build, test = (f"{s:.0f} s" if s is not None else "-" for s in (o.build_seconds, o.test_seconds))
        cells = (o.status, f"{o.seconds:.0f} s", o.image.platform_reference, size, build, test)
        table.add_row(*(Text(shown(cell)) for cell in cells))  # as they are: no markup read in them
    text = io.StringIO()
    Console(file=text, width=1_000_000, color_system=None, highlight=False, emoji=False).print(table)
    header, *rows = (line.rstrip() for line in text.getvalue().splitlines())
    lines = [header]
    for o, row in zip(outcomes, rows, strict=True):
        lines.append(row)
        if o.status in ("failed", "interrupted"):
            lines.append(" " * header.index("image") + _reason(o.detail))
    statuses = ("built", "promoted", "skipped", "failed", "interrupted")
    counts = {s: sum(o.status == s for o in outcomes) for s in statuses}
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items() if n or s in always))
    return "\n".join(lines)


# A build log's own error lines (uv's, pip's, apt's, a RUN's), not BuildKit's report of the failed step.
STEP_ERROR = re.compile(r"^\s*#\d+ [\d.]+ (.*\b(?:ERROR|Error|error)\b.*)$")
# uv says why on the lines after its error: `  cause: Because there is no version of numpy==0.0.1 ...`.
_UV_CAUSE = re.compile(r"^\s*#\d+ [\d.]+ +cause: (.*)$")


def step_errors(lines: Iterable[str]) -> list[str]:
    """A build log's own error lines, as logged (`#9 0.56 ERROR: No matching distribution ...`), uv's first
    cause joined to its error (`#9 0.56 error: No solution found when resolving dependencies: Because ...`),
    its further causes (`tcp connect error`) left out: they say less, and are no error of their own."""
    found: list[str] = []
    chain = joined = False  # right after an error line, through uv's causes; whether one was joined
    for line in lines:
        line = line.rstrip("\n")
        cause = _UV_CAUSE.match(line)
        if cause and chain:
            if not joined:
                found[-1] += ": " + cause.group(1)
                joined = True
            continue
        chain = bool(STEP_ERROR.match(line))
        joined = False
        if chain:
            found.append(line)
    return found


def _reason(detail: str) -> str:
    """The line of an outcome's detail that says why: the last error line its build step printed
    (`ERROR: No matching distribution found for numpy==0.0.1`), else the detail's first line."""
    first = detail.strip().splitlines()[0] if detail.strip() else ""
    errors = [m.group(1) for m in map(STEP_ERROR.match, step_errors(detail.splitlines())) if m]
    if first.startswith((ENGINE_GONE, NO_SPACE)):
        line = first
    elif errors:
        line = errors[-1]
    else:
        lines = [line.strip() for line in detail.strip().splitlines()]
        # `not tagged:` then the problems: the first problem says why
        line = f"{lines[0]} {lines[1]}" if len(lines) > 1 and lines[0].endswith(":") else (lines or [""])[0]
    line = shown(line)
    return line if len(line) <= 200 else line[:197] + "..."
