"""summary.md: the report as a Markdown heading and table, for a CI step summary
($GITHUB_STEP_SUMMARY)."""

from __future__ import annotations

from torchimages.building.renderers import format_seconds
from torchimages.problems import escaped
from torchimages.reporting.model import TEST_RESULTS, ImageReport, Report, headline
from torchimages.sizes import format_size

_MARKS = {"built": "✅", "passed": "✅", "skipped": "⏭️", "failed": "❌", "interrupted": "⏹️"}


def duration(seconds: float | None) -> str:
    """As the terminal's summary shows it (`42 s`, `3m07s`, `1h02m`); `-` when it did not run."""
    return "-" if seconds is None else format_seconds(seconds)


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped, what is not printable as its escape."""
    return escaped(" ".join(text.split())).replace("|", "\\|")


def _result_cell(image: ImageReport) -> str:
    text = f"{_MARKS.get(image.result, '')} {image.result}"
    if image.smoke is not None:
        counts = [f"{n} {r}" for r in TEST_RESULTS if (n := image.smoke.count(r))]
        text += f" ({', '.join(counts) or 'no tests'})"
    if image.reason and image.result != "built":
        reason = headline(image.reason)
        text += ": " + (reason if len(reason) <= 160 else reason[:157] + "...")
    return _cell(text)


def summary_markdown(report: Report) -> str:
    """summary.md: a heading with the counts and a table of image, result, size, build and test time (for
    GitHub's $GITHUB_STEP_SUMMARY)."""
    counts = ", ".join(f"{n} {r}" for r, n in report.counts().items()) or "no images"
    lines = [
        f"### torchimages {report.command}: {counts}",
        "",
        "| image | result | size | build | test | security |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for image in report.images:
        size = format_size(image.stored.size) if image.stored and image.stored.size else "-"
        if image.size_budget is not None:
            size += f" (budget {format_size(image.size_budget)})"
        lines.append(
            f"| `{_cell(image.reference)}` | {_result_cell(image)} | {size} | "
            f"{duration(image.build_seconds)} | {duration(image.test_seconds)} | {_security_cell(image)} |"
        )
    gpus = sorted({f"{i.smoke.gpu}, driver {i.smoke.driver}" for i in report.images if i.smoke and _real(i.smoke.gpu)})
    if gpus:
        lines += ["", "GPU: " + "; ".join(_cell(g) for g in gpus)]
    return "\n".join(lines) + "\n"


def _security_cell(image: ImageReport) -> str:
    """Each check of the gate and how it ended (`secrets ✅ · os-updates ❌ 2 · python not scanned`); `-`
    where the gate did not run."""
    marks = {"passed": "✅", "failed": "❌"}
    cells = []
    for r in image.security:
        text = f"{r.check} {marks.get(r.status, r.status)}"
        if r.failing:
            text += f" {len(r.failing)}"
        if r.allowed:
            text += f" ({len(r.allowed)} allowed)"
        cells.append(text)
    return _cell(" · ".join(cells)) or "-"


def _real(gpu: str | None) -> bool:
    return bool(gpu) and gpu not in ("none", "none visible") and not str(gpu).startswith("unknown")
