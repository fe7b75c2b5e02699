"""How SIGINT and SIGTERM stop the tool: the dispositions it inherited (recorded at import, before any handler:
`cli.entry` imports this first), the handler that turns either signal into `Stopped`, and the sections a
signal waits out (a file being written and put in place).

A signal the tool was started ignoring (`nohup`, a CI wrapper, `cmd &` in a non-interactive shell) stays
ignored, as the convention is; its children inherit that, so a cancel escalates from a signal they heed.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from types import FrameType
from typing import TypeVar

STOPPING = (signal.SIGINT, signal.SIGTERM)
_INHERITED = {sig: signal.getsignal(sig) for sig in STOPPING}

Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None
T = TypeVar("T")
WAKE_S = 0.1  # how often the main thread, waiting on other threads, wakes to run a signal's handler


class Stopped(BaseException):
    """SIGINT or SIGTERM arrived (a BaseException, as KeyboardInterrupt: `except Exception` lets it through)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        """SIGINT or SIGTERM."""
        return signal.Signals(self.signum).name

    @property
    def exit_status(self) -> int:
        """The shell's convention, 128 + N: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum


def ignored_at_start(sig: signal.Signals) -> bool:
    """Whether the tool was started with `sig` ignored (its children then inherit that)."""
    return bool(_INHERITED.get(sig) == signal.SIG_IGN)


def heeded() -> tuple[signal.Signals, ...]:
    """The stopping signals the tool's children heed: those the tool was not started ignoring."""
    return tuple(sig for sig in STOPPING if not ignored_at_start(sig))


_held = 0
_pending: list[int] = []


def _raise(signum: int, _frame: FrameType | None) -> None:
    if _held:
        _pending.append(signum)
        return
    raise Stopped(signum)


def install() -> dict[int, Handler]:
    """Make SIGINT and SIGTERM raise `Stopped` in the main thread (not a signal the tool was started ignoring);
    the previous handlers, for `restore`."""
    _pending.clear()
    return {sig: signal.signal(sig, _raise) for sig in heeded()}


def restore(previous: dict[int, Handler]) -> None:
    """Put back the handlers `install` replaced."""
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def say(command: str, stop: Stopped) -> int:
    """Say on standard error, in one line, that a signal stopped `command` (quiet from now on); 128 + N."""
    quiet()
    if sys.stderr is not None:  # started with it closed (`2>&-`): print would write to stdout
        newline = "\n" if sys.stderr.isatty() else ""  # after the terminal's ^C
        print(f"{newline}{command}: stopped by {stop.name}; nothing was left half-written", file=sys.stderr)
    return stop.exit_status


def quiet() -> None:
    """From now on a stopping signal is only noted: the tool is already stopping and saying so."""
    for sig in heeded():
        signal.signal(sig, lambda _signum, _frame: None)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """A section a stopping signal does not cut short: `Stopped` is raised when it ends (main thread only:
    signals never interrupt the others)."""
    global _held
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _held += 1
    try:
        yield
    finally:
        _held -= 1
        if not _held and _pending:
            signum = _pending[0]
            _pending.clear()
            raise Stopped(signum)


def results(futures: Iterable[concurrent.futures.Future[T]]) -> list[T]:
    """Each future's result, in order, waited for in short slices. A process-directed signal may be delivered to
    any thread: one that lands on a worker (blocked in a socket read) runs its Python handler only when the main
    thread next runs bytecode, which a plain `result()` would put off until the worker's answer came.
    `futures` is taken whole first: a generator's submits all happen before any wait (they run at once)."""
    out = []
    for future in list(futures):
        while True:
            try:
                out.append(future.result(timeout=WAKE_S))
                break
            except concurrent.futures.TimeoutError:
                continue
    return out
