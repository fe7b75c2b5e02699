"""Commands in their own process group, stopped as a whole when the work is cancelled."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Sequence
from typing import Any

from torchimages import stopping

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
