"""Signal handling of the long runs (build, promote): SIGINT or SIGTERM during the work cancels it and is said
once. Everywhere else a signal raises `stopping.Stopped`, which cli.entry.main turns into one line and 128 + N;
this replaces that handler for the work's duration (the work's threads are stopped, not unwound)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from torchimages import stopping

T = TypeVar("T")
MESSAGE = "\n{name}: stopping; running builds are cancelled, nothing more is tagged\n"


@dataclass(frozen=True)
class Interrupted(Generic[T]):
    """What the work returned, and the signals received while it ran (the first decides the exit status)."""

    result: T
    signals: tuple[int, ...]

    @property
    def exit_status(self) -> int | None:
        """The shell's convention, 128 + N (130 for SIGINT, 143 for SIGTERM); None when no signal came."""
        return 128 + self.signals[0] if self.signals else None


def until_interrupted(cancel: Callable[[], None], work: Callable[[], T]) -> Interrupted[T]:
    """Run `work`; SIGINT or SIGTERM calls `cancel` (running builds stopped, nothing more tagged) and is said
    once on standard error (a signal the tool was started ignoring stays ignored). The previous handlers are
    restored afterwards."""
    received: list[int] = []

    def interrupt(signum: int, _frame: object) -> None:
        if not received:  # os.write: print may be mid-line in this very thread
            os.write(2, MESSAGE.format(name=signal.Signals(signum).name).encode())
        received.append(signum)
        cancel()

    previous = {sig: signal.signal(sig, interrupt) for sig in stopping.heeded()}
    try:
        result = work()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return Interrupted(result, tuple(received))
