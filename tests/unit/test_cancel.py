"""engine.run_cancellable: the subprocess a build or a smoke gate runs stops, with what it started,
promptly once the cancel event is set (real processes, no Docker)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

from torchimages.engine import run_cancellable


def test_it_runs_to_the_end_and_captures_without_a_cancel() -> None:
    result = run_cancellable(
        ["sh", "-c", "echo out; echo err >&2; exit 3"], None, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")


def test_a_cancel_stops_the_process_group_promptly(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    cancelled = threading.Event()
    threading.Timer(0.5, cancelled.set).start()
    start = time.monotonic()
    # a shell's background job ignores SIGINT: the sweep after the leader exits must take it too
    result = run_cancellable(["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"], cancelled)
    assert time.monotonic() - start < 5 and result.returncode != 0
    child = int(pid_file.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2:3], (
        f"background job {child} survived"
    )


def test_its_process_group_is_its_own() -> None:
    result = run_cancellable(["sh", "-c", "ps -o pgid= -p $$"], None, text=True, stdout=subprocess.PIPE)
    assert int(result.stdout) != os.getpgid(0)
