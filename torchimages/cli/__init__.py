"""The command line: one module per command (its options and a short run()), the option groups they
share (options), the command table (commands), and the parser and main() (entry)."""

from torchimages.cli.entry import main

__all__ = ["main"]
