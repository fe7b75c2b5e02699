"""Commands in their own process group, stopped as a whole when the work is cancelled."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

from torchimages import stopping
from torchimages.engine.types import EngineError

# How often a cancellable subprocess looks at its cancel event, and how long it gets to stop after SIGINT
# (the docker CLI cancels its BuildKit session on SIGINT) before SIGTERM, then SIGKILL.
CANCEL_POLL_S = 0.2
CANCEL_GRACE_S = 10.0
TERM_GRACE_S = 5.0


def escalation() -> tuple[tuple[signal.Signals, float | None], ...]:
    """The signals that stop a group, each with the time it gets: SIGINT, SIGTERM, SIGKILL; a signal the tool
    was started ignoring is skipped (its children inherit the ignoring: waiting on it only loses the grace)."""
    graces = {signal.SIGINT: CANCEL_GRACE_S, signal.SIGTERM: TERM_GRACE_S}
    heeded = tuple((sig, graces[sig]) for sig in stopping.heeded())
    return (*heeded, (signal.SIGKILL, None))


def run_cancellable(
    cmd: Sequence[str], cancelled: threading.Event | None, **kwargs: Any
) -> subprocess.CompletedProcess[Any]:
    """Run a command in its own process group (a terminal's Ctrl-C does not reach it: the caller decides);
    once `cancelled` is set, stop the whole group (SIGINT, then SIGTERM, then SIGKILL) and return at once.
    `kwargs` go to Popen (stdout/stderr may be PIPE: the output comes back as with subprocess.run)."""
    process = subprocess.Popen(cmd, start_new_session=True, **kwargs)
    with process:
        try:
            while True:
                try:
                    out, err = process.communicate(timeout=CANCEL_POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    if cancelled is not None and cancelled.is_set():
                        out, err = stop_group(process)
                        break
        except BaseException:
            stop_group(process)
            raise
    return subprocess.CompletedProcess(list(cmd), process.returncode, out, err)


def stop_group(process: subprocess.Popen[Any]) -> tuple[Any, Any]:
    """Stop a process started with start_new_session, and everything it started (`escalation`); its remaining
    output."""
    output: tuple[Any, Any] = (None, None)
    for sig, grace in escalation():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            output = process.communicate(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    # What it started and left behind (a shell's background jobs ignore SIGINT) goes too; the group's id
    # cannot be reused while any member lives, and an empty group answers ProcessLookupError.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    return output


@contextlib.contextmanager
def streamed(cmd: Sequence[str], cancelled: threading.Event | None = None) -> Iterator[IO[bytes]]:
    """A command's stdout as a stream read once, the command in its own process group, its stderr in a
    temporary file (never a full pipe). Leaving the context before the stream's end (the reader stopped, or
    raised) kills the command: that is no failure. EngineError on leaving when the command could not start,
    when it failed (the stream ended and its status is not 0: its stderr says why), or when `cancelled` was
    set (it is killed at once, so a reader waiting on it gets the end of the stream)."""
    if cancelled is not None and cancelled.is_set():
        raise EngineError(f"`{shlex.join(cmd)}` was cancelled before it started")
    with tempfile.TemporaryFile() as errors:
        try:
            process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors, start_new_session=True)
        except OSError as exc:
            raise EngineError(f"could not run {cmd[0]}: {exc}") from None
        assert process.stdout is not None
        stdout = process.stdout
        done, stopped = threading.Event(), threading.Event()
        watcher = threading.Thread(target=_kill_on_cancel, args=(process, cancelled, done, stopped), daemon=True)
        watcher.start()
        raised: BaseException | None = None
        try:
            yield stdout
        except BaseException as exc:  # re-raised below, once the command is gone
            raised = exc
        done.set()
        # An Exception leaves the stream where the reader was; an interrupt may have come during a read that
        # blocks, so it does not read again.
        at_end = isinstance(raised, Exception | None) and stdout.read(1) == b""
        stdout.close()
        if not at_end:
            _kill(process)
        status = process.wait()
        watcher.join()
        if raised is not None and not isinstance(raised, Exception):
            raise raised
        if stopped.is_set():
            raise EngineError(f"`{shlex.join(cmd)}` was cancelled") from None
        if at_end and status != 0:
            errors.seek(0)
            said = errors.read().decode(errors="replace").strip()
            raise EngineError(f"`{shlex.join(cmd)}` failed: {said[-2000:] or f'exit status {status}'}") from None
        if raised is not None:
            raise raised


def _kill(process: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _kill_on_cancel(
    process: subprocess.Popen[Any], cancelled: threading.Event | None, done: threading.Event, stopped: threading.Event
) -> None:
    """Kill the command's group once `cancelled` is set (until `done`)."""
    if cancelled is None:
        return
    while not cancelled.is_set():
        if done.wait(CANCEL_POLL_S):
            return
    stopped.set()
    _kill(process)


@dataclass(frozen=True)
class Bounded:
    """What a command bounded in time and output did: its exit status (None: stopped), at most `limit` bytes of
    its stdout, the end of its stderr; `over` when it wrote more than the limit, `timed_out` when its time ran
    out first (either way it was stopped)."""

    status: int | None
    output: bytes
    errors: str
    over: bool = False
    timed_out: bool = False


def bounded_run(cmd: Sequence[str], limit: int, timeout_s: float) -> Bounded:
    """Run a command in its own process group, no stdin, for at most `timeout_s` seconds, reading at most `limit`
    bytes of its stdout: past either, its whole group is killed. OSError when it cannot start."""
    expired = threading.Event()
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, start_new_session=True
        )

        def expire() -> None:
            expired.set()
            _kill(process)

        timer = threading.Timer(timeout_s, expire)
        timer.daemon = True
        timer.start()
        try:
            with process:
                assert process.stdout is not None
                output = process.stdout.read(limit + 1)
                over = len(output) > limit
                if over:
                    _kill(process)
                status = process.wait()
        finally:
            timer.cancel()
            _kill(process)  # what it left behind in its group
        errors.seek(max(0, errors.seek(0, os.SEEK_END) - 2000))
        said = errors.read().decode(errors="replace").strip()
    stopped = over or (expired.is_set() and status != 0)
    return Bounded(None if stopped else status, output[:limit], said, over, expired.is_set() and not over and stopped)
