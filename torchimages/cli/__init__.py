"""The command line: one table of commands, each a small function."""

from torchimages.cli.app import main

__all__ = ["main"]
