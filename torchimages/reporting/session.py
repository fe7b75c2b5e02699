"""A report's life around one command: checked and started before any build or test, finished after."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from torchimages.problems import UsageError
from torchimages.reporting import model, sbom, writer


@dataclass(frozen=True)
class Finished:
    """A written report: the problems met (an SBOM not made) and the line saying where it is."""

    problems: tuple[str, ...]
    where: str

    @property
    def complete(self) -> bool:
        """Whether every SBOM was made."""
        return not self.problems


def check(directory: Path | None) -> None:
    """For `--report DIR`: UsageError unless syft is there (cli.preflight checks DIR can be written). Writes
    nothing (a later refusal must leave the disk as it was)."""
    if directory is None:
        return
    try:
        sbom.syft_binary()
    except sbom.SbomError as exc:
        raise UsageError(f"--report: {exc}") from None


def start(directory: Path | None) -> Path | None:
    """For `--report DIR`, once every check passed (`check`, cli.preflight) and before any build or test:
    make DIR and the folder the smoke suites write their JUnit files into; that folder (None without one)."""
    if directory is None:
        return None
    try:
        return writer.prepare(directory)
    except writer.ReportError as exc:
        raise UsageError(str(exc)) from None


def finish(
    directory: Path,
    command: str,
    images: Sequence[tuple[model.ImageReport, bytes | None]],
    engine: writer.ReportEngine,
    junit_dir: Path,
    sboms: bool = True,
) -> Finished:
    """Write the report folder (writer.write); what it met and where it is."""
    try:
        problems = writer.write(directory, command, images, engine, junit_dir, sboms)
    except writer.ReportError as exc:
        raise UsageError(str(exc)) from None
    where = f"{directory / writer.MANIFEST}, {writer.SUMMARY}, {writer.JUNIT}, {writer.SBOM_DIR}/"
    return Finished(tuple(problems), where)
