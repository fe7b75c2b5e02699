"""What every bench script does with its command line and with SIGINT and SIGTERM (issue 42): a bad argument is one
line and exit 2; a stopping signal, from the script's first instruction on, is one line and exit 128 + N
(130 for SIGINT), never a traceback, as the main command line does (torchimages/stopping.py).

A script imports this module first and calls `early(__name__, NAME)` at once (until its imports are done, a signal
ends it there: nothing is written yet); its parser comes from `parser()`; its `__main__` block is
`sys.exit(run(NAME, main))`, which turns a signal into `stopping.Stopped` for main's `finally` blocks.
Importing this module changes nothing (a test imports the scripts).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from torchimages import stopping  # records the inherited dispositions before any handler is installed

if TYPE_CHECKING:
    import argparse

    from torchimages.engine import DockerEngine


def early(module: str, name: str) -> None:
    """Where `module` is `__main__`: from now until `run`, a stopping signal the script was not started ignoring
    says its one line and ends the script with 128 + N (SystemExit: no traceback)."""
    if module != "__main__":
        return

    def stop(signum: int, _frame: FrameType | None) -> None:
        raise SystemExit(say(name, stopping.Stopped(signum)))

    for sig in stopping.heeded():
        signal.signal(sig, stop)


def run(name: str, main: Callable[[], int | None]) -> int:
    """main()'s exit status; a stopping signal raises `Stopped` in it (its `finally` blocks run), then one line
    on standard error and 128 + N."""
    try:
        stopping.install()
        return main() or 0
    except (stopping.Stopped, KeyboardInterrupt) as exc:
        stop = exc if isinstance(exc, stopping.Stopped) else stopping.Stopped(signal.SIGINT)
        return say(name, stop)


def say(name: str, stop: stopping.Stopped) -> int:
    """One line on standard error, `NAME: stopped by SIGINT` (quiet from now on); 128 + N."""
    stopping.quiet()
    if sys.stderr is not None:
        print(f"{name}: stopped by {stop.name}", file=sys.stderr, flush=True)
    return stop.exit_status


def parser(description: str | None = None, **options: object) -> argparse.ArgumentParser:
    """An argparse parser whose refusal is one line, `PROG: error: WHAT (--help lists the options)`, exit 2."""
    import argparse

    class OneLine(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            self.exit(2, f"{self.prog}: error: {one_line(message)} (--help lists the options)\n")

    return OneLine(description=description, **options)  # type: ignore[arg-type]


def whole_number(least: int, most: int) -> Callable[[str], int]:
    """An argparse type: a whole number from `least` to `most`."""
    import argparse

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
        if not least <= value <= most:
            raise argparse.ArgumentTypeError(f"{value} is not from {least} to {most}")
        return value

    return parse


def seconds(most: float) -> Callable[[str], float]:
    """An argparse type: a number of seconds above 0, at most `most`."""
    import argparse
    import math

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of seconds") from None
        if not (math.isfinite(value) and 0 < value <= most):
            raise argparse.ArgumentTypeError(f"{text[:40]} is not above 0 and at most {most:g} seconds")
        return value

    return parse


def one_line(message: str) -> str:
    """A message as one line that is safe to print: its whitespace runs one blank, any other control character
    (an argument's ESC, a CSI) escaped (torchimages.problems.shown): `a\\x1b[2J`, never the terminal's escape."""
    from torchimages.problems import shown

    return shown(" ".join(message.split()))


def fail(name: str, message: str) -> NoReturn:
    """A bad argument found after parsing: one line, exit 2."""
    print(f"{name}: error: {one_line(message)}", file=sys.stderr)
    raise SystemExit(2)


def engine_holding(name: str, references: Sequence[str], docker: str | None = None) -> DockerEngine:
    """The Docker engine (`docker`: its client), holding every image of `references`; else one line and exit 2:
    no engine answers, it holds no such image, or it refuses the name (the SDK's error, never a traceback)."""
    from torchimages.engine import DockerEngine, EngineError

    try:
        engine = DockerEngine(docker)
        for reference in references:
            if engine.inspect(reference) is None:
                fail(name, f"IMAGE {reference!r}: no such image on this engine")
    except EngineError as exc:
        fail(name, str(exc))
    return engine


def image(text: str) -> str:
    """An argparse type: a local image reference (torchimages.values.reference's rules)."""
    import argparse

    from torchimages import values

    try:
        values.reference(text, "")
    except values.BadValue as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text
