"""The command line: one module per command (its options and a short run()), the option groups they
share (options), the command table (commands), and the parser and main() (entry).

This module is light on purpose: `main` turns SIGINT and SIGTERM into `stopping.Stopped` before the command
line's modules are imported (a quarter of a second of imports), so a signal then is said as one later is."""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence

from torchimages import stopping  # records the inherited signal dispositions, before any handler is installed

PROG = "torchimages"  # the console script; build.py and `python -m` pass their own

__all__ = ["PROG", "main"]


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Run one command (entry.main: its exit statuses). The stopping signals are heeded from the first moment:
    one that comes while the modules load says the same one line and 128 + N as one that comes later."""
    early = stopping.install()
    try:
        from torchimages.cli.entry import main as run  # the parser, the command table, what they import

        return run(argv, prog)
    except (stopping.Stopped, KeyboardInterrupt) as exc:  # before entry.main took over, or after it let go
        stopping.quiet()
        from torchimages.problems import shown

        stop = exc if isinstance(exc, stopping.Stopped) else stopping.Stopped(signal.SIGINT)
        words = list(sys.argv[1:] if argv is None else argv)
        command = next((word for word in words if not word.startswith("-")), None)
        return stopping.say(shown(f"{prog or PROG} {command}" if command else prog or PROG), stop)
    finally:
        stopping.restore(early)
