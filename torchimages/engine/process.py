"""Commands in their own process group, stopped as a whole when the work is cancelled; what they print read
with a bound (`MAX_OUTPUT_BYTES`): a command whose output never ends costs no more memory than that."""

from __future__ import annotations

import collections
import contextlib
import os
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, cast

from torchimages import stopping
from torchimages.engine.types import EngineError

# How often a cancellable subprocess looks at its cancel event, and how long it gets to stop after SIGINT
# (the docker CLI cancels its BuildKit session on SIGINT) before SIGTERM, then SIGKILL.
CANCEL_POLL_S = 0.2
CANCEL_GRACE_S = 10.0
TERM_GRACE_S = 5.0
MAX_OUTPUT_BYTES = 16 * 1024 * 1024  # what one pipe of a command may fill in memory (a probe says kilobytes)
_CHUNK = 65536


def escalation() -> tuple[tuple[signal.Signals, float | None], ...]:
    """The signals that stop a group, each with the time it gets: SIGINT, SIGTERM, SIGKILL; a signal the tool
    was started ignoring is skipped (its children inherit the ignoring: waiting on it only loses the grace)."""
    graces = {signal.SIGINT: CANCEL_GRACE_S, signal.SIGTERM: TERM_GRACE_S}
    heeded = tuple((sig, graces[sig]) for sig in stopping.heeded())
    return (*heeded, (signal.SIGKILL, None))


def run_cancellable(
    cmd: Sequence[str], cancelled: threading.Event | None, *, limit_bytes: int | None = None, **kwargs: Any
) -> subprocess.CompletedProcess[Any]:
    """Run a command in its own process group (a terminal's Ctrl-C does not reach it: the caller decides);
    once `cancelled` is set, stop the whole group (SIGINT, then SIGTERM, then SIGKILL) and return at once.
    `kwargs` go to Popen (stdout/stderr may be PIPE: the output comes back as with subprocess.run, at most
    `limit_bytes` (default MAX_OUTPUT_BYTES) of each: its start and its end, what lies between cut and said so)."""
    text = bool(kwargs.pop("text", False) or kwargs.pop("universal_newlines", False))
    piped = [name for name in ("stdout", "stderr") if kwargs.get(name) is subprocess.PIPE]
    process = subprocess.Popen(cmd, start_new_session=True, **kwargs)
    sinks = {name: _Sink(limit_bytes or MAX_OUTPUT_BYTES) for name in piped}
    readers = [_reader(getattr(process, name), sinks[name]) for name in piped]
    with process:
        try:
            while True:
                try:
                    process.wait(timeout=CANCEL_POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    if cancelled is not None and cancelled.is_set():
                        stop_group(process)
                        break
        except BaseException:
            stop_group(process)
            raise
        finally:
            _join(readers, process)
    out, err = (_decoded(sinks[name].value(), text) if name in sinks else None for name in ("stdout", "stderr"))
    return subprocess.CompletedProcess(list(cmd), process.returncode, out, err)


def stop_group(process: subprocess.Popen[Any]) -> None:
    """Stop a process started with start_new_session, and everything it started (`escalation`)."""
    for sig, grace in escalation():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    # What it started and left behind (a shell's background jobs ignore SIGINT) goes too; the group's id
    # cannot be reused while any member lives, and an empty group answers ProcessLookupError.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


class _Sink:
    """What one pipe said, in at most `limit` bytes: its start, and past the limit its end (what lay between
    dropped and counted); `on_full` is called once, when the limit is passed."""

    def __init__(self, limit: int, on_full: Callable[[], None] | None = None) -> None:
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.held = 0  # the bytes in `tail`
        self.dropped = 0
        self.on_full = on_full

    def add(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail.append(chunk)
        self.held += len(chunk)
        full = self.dropped
        while self.held - len(self.tail[0]) >= self.half:
            first = self.tail.popleft()
            self.held -= len(first)
            self.dropped += len(first)
        if self.held > self.half:  # the oldest chunk only partly fits: keep its end
            cut = self.held - self.half
            self.tail[0] = self.tail[0][cut:]
            self.held -= cut
            self.dropped += cut
        if self.dropped and not full and self.on_full is not None:
            self.on_full()

    def value(self) -> bytes:
        cut = f"\n...[{self.dropped} bytes cut]...\n".encode() if self.dropped else b""
        return bytes(self.head) + cut + b"".join(self.tail)


def _reader(pipe: IO[bytes] | None, sink: _Sink) -> threading.Thread:
    """A thread that reads `pipe` to its end into `sink` (it keeps reading past the limit: a writer never
    blocks on a full pipe, and its end is kept)."""

    def read() -> None:
        assert pipe is not None
        with contextlib.suppress(OSError, ValueError):
            while chunk := os.read(pipe.fileno(), _CHUNK):
                sink.add(chunk)

    thread = threading.Thread(target=read, name="output", daemon=True)
    thread.start()
    return thread


def _join(readers: Sequence[threading.Thread], process: subprocess.Popen[Any]) -> None:
    """Wait for the readers: at most a moment once the command is gone (a child it left holding the pipe
    open does not hold the caller), then the pipes are closed."""
    for thread in readers:
        thread.join(timeout=5.0)
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _decoded(output: bytes, text: bool) -> bytes | str:
    return output.decode(errors="replace") if text else output


@dataclass(frozen=True)
class Captured:
    """What a bounded run of a command gave: its exit status (None when it was stopped), its output (at most
    the limit of each pipe), and whether it was stopped at its deadline or for passing the limit."""

    status: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    overflowed: bool = False

    @property
    def stopped(self) -> str:
        """Why it was stopped, in words ("" when it ended by itself)."""
        if self.timed_out:
            return "it ran past its time limit"
        if self.overflowed:
            return "its output passed the limit"
        return ""


def captured(
    cmd: Sequence[str],
    *,
    timeout_s: float,
    limit_bytes: int | None = None,
    stdin: int | IO[Any] | None = subprocess.DEVNULL,
    env: dict[str, str] | None = None,
) -> Captured:
    """Run a command in its own process group, its stdout and stderr read into memory, at most `limit_bytes`
    (default MAX_OUTPUT_BYTES) each: past `timeout_s`, or once either pipe passes the limit, the group is
    killed (what it said until then comes back). An interrupt while it runs (Stopped, KeyboardInterrupt) kills
    it too and goes on. OSError when it cannot start."""
    process = subprocess.Popen(
        cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True
    )
    over = threading.Event()

    def full() -> None:
        over.set()
        _kill(process)

    limit = limit_bytes or MAX_OUTPUT_BYTES
    sinks = (_Sink(limit, full), _Sink(limit, full))
    readers = [_reader(process.stdout, sinks[0]), _reader(process.stderr, sinks[1])]
    timed_out = False
    with process:
        try:
            try:
                process.wait(timeout=max(timeout_s, 0.0))
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill(process)
                process.wait()
        except BaseException:
            _kill(process)
            raise
        finally:
            _join(readers, process)
    stdout, stderr = (sink.value() for sink in sinks)
    stopped = timed_out or over.is_set()
    return Captured(None if stopped else process.returncode, stdout, stderr, timed_out, over.is_set() and not timed_out)


STALL_S = 600.0  # how long a read of a streamed command may wait for its next bytes: then it is stuck


class _Timed:
    """A stream whose reads are timed: `since` is when the read in progress began (None between reads)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.since: float | None = None

    def read(self, size: int = -1) -> bytes:
        self.since = time.monotonic()
        try:
            return self.stream.read(size)
        finally:
            self.since = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextlib.contextmanager
def streamed(
    cmd: Sequence[str], cancelled: threading.Event | None = None, stall_s: float | None = None
) -> Iterator[IO[bytes]]:
    """A command's stdout as a stream read once, the command in its own process group, its stderr in a
    temporary file (never a full pipe). Leaving the context before the stream's end (the reader stopped, or
    raised) kills the command: that is no failure. EngineError on leaving when the command could not start,
    when it failed (the stream ended and its status is not 0: its stderr says why), when `cancelled` was set,
    or when a read waited `stall_s` seconds (default STALL_S) for bytes that never came: it is killed at once,
    so a reader waiting on it gets the end of the stream."""
    if cancelled is not None and cancelled.is_set():
        raise EngineError(f"`{shlex.join(cmd)}` was cancelled before it started")
    stall = STALL_S if stall_s is None else stall_s
    with tempfile.TemporaryFile() as errors:
        try:
            process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors, start_new_session=True)
        except OSError as exc:
            raise EngineError(f"could not run {cmd[0]}: {exc}") from None
        assert process.stdout is not None
        stdout = _Timed(process.stdout)
        done, stopped, stuck = threading.Event(), threading.Event(), threading.Event()
        watcher = threading.Thread(
            target=_watch, args=(process, cancelled, done, stopped, (stdout, stall, stuck)), daemon=True
        )
        watcher.start()
        raised: BaseException | None = None
        try:
            yield cast(IO[bytes], stdout)
        except BaseException as exc:  # re-raised below, once the command is gone
            raised = exc
        # An Exception leaves the stream where the reader was; an interrupt may have come during a read that
        # blocks, so it does not read again. The watcher still watches this last read.
        at_end = isinstance(raised, Exception | None) and stdout.read(1) == b""
        done.set()
        process.stdout.close()
        if not at_end:
            _kill(process)
        status = process.wait()
        watcher.join()
        if raised is not None and not isinstance(raised, Exception):
            raise raised
        if stopped.is_set():
            raise EngineError(f"`{shlex.join(cmd)}` was cancelled") from None
        if stuck.is_set():
            raise EngineError(f"`{shlex.join(cmd)}` sent nothing for {stall:g} s: stopped") from None
        if at_end and status != 0:
            said = _end_of(errors).decode(errors="replace").strip()
            raise EngineError(f"`{shlex.join(cmd)}` failed: {said or f'exit status {status}'}") from None
        if raised is not None:
            raise raised


def _end_of(file: IO[bytes], size: int = 2000) -> bytes:
    """The last `size` bytes of a file (a command's stderr: its end says why)."""
    end = file.seek(0, os.SEEK_END)
    file.seek(max(0, end - size))
    return file.read(size)


def _kill(process: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _watch(
    process: subprocess.Popen[Any],
    cancelled: threading.Event | None,
    done: threading.Event,
    stopped: threading.Event,
    reads: tuple[_Timed, float, threading.Event],
) -> None:
    """Kill the command's group once `cancelled` is set (`stopped`), or once a read has waited the stall limit
    (`stuck`), until `done`."""
    stream, stall, stuck = reads
    while not done.wait(CANCEL_POLL_S):
        if cancelled is not None and cancelled.is_set():
            stopped.set()
            break
        since = stream.since
        if since is not None and time.monotonic() - since > stall:
            stuck.set()
            break
    else:
        return
    _kill(process)
