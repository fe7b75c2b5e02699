"""All subcommands in one table: the core ones plus build and test."""

from __future__ import annotations

from collections.abc import Sequence

from . import cli


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of build.py."""
    return cli.main(argv)
