"""machine_lock: one holder at a time (a second waits, says so once, then goes on), given up on a cancel or
after its bound, released however the holder ends; no lock file to be had means the work runs unlocked."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from torchimages.building import machine_lock
from torchimages.engine import EngineError

NAME = "the bootstrap of base torchimages/bootstrap-debian:12 for engine default"


def release_after(event: threading.Event, seconds: float) -> None:
    threading.Timer(seconds, event.set).start()


def test_the_lock_is_a_regular_file_in_the_folder_named_by_a_hash(tmp_path: Path) -> None:
    with machine_lock.held(NAME, tmp_path) as locked:
        assert locked
    (lock,) = (tmp_path / machine_lock.FOLDER).iterdir()
    assert lock == machine_lock.path_of(tmp_path, NAME) and lock.is_file() and lock.suffix == ".lock"
    assert machine_lock.path_of(tmp_path, NAME + " ") != lock, "another name, another lock"


def test_a_second_holder_waits_says_so_once_and_goes_on_when_the_first_is_done(tmp_path: Path) -> None:
    done, said, order = threading.Event(), list[str](), list[str]()

    def first() -> None:
        with machine_lock.held(NAME, tmp_path):
            order.append("first in")
            done.wait(10)
            order.append("first out")

    thread = threading.Thread(target=first)
    thread.start()
    while not order:
        time.sleep(0.01)
    release_after(done, 0.6)
    with machine_lock.held(NAME, tmp_path, waiting=said.append) as locked:
        order.append("second in")
    thread.join()
    assert locked and order == ["first in", "first out", "second in"]
    assert len(said) == 1 and said[0].startswith(f"{NAME}: another process is at it; waiting")
    assert str(machine_lock.path_of(tmp_path, NAME)) in said[0]


def test_other_names_do_not_wait(tmp_path: Path) -> None:
    said: list[str] = []
    with machine_lock.held(NAME, tmp_path), machine_lock.held("another base", tmp_path, waiting=said.append) as ok:
        assert ok and said == []


def test_a_cancel_while_waiting_gives_up_unlocked(tmp_path: Path) -> None:
    cancelled = threading.Event()
    release_after(cancelled, 0.3)
    with machine_lock.held(NAME, tmp_path):
        started = time.monotonic()
        with machine_lock.held(NAME, tmp_path, cancelled=cancelled) as locked:
            assert not locked
        assert time.monotonic() - started < 5


def test_a_holder_stuck_past_the_bound_is_a_clear_error(tmp_path: Path) -> None:
    now = [0.0]
    clock = {"clock": lambda: now[0], "sleep": lambda s: now.__setitem__(0, now[0] + s)}
    with (
        machine_lock.held(NAME, tmp_path),
        pytest.raises(EngineError) as raised,
        machine_lock.held(NAME, tmp_path, wait_s=60, **clock),  # type: ignore[arg-type]
    ):
        pytest.fail("entered while another held the lock")
    message = str(raised.value)
    assert "has held its lock for 60 s" in message and "stop that process" in message
    assert now[0] >= 60, "it waited the whole bound first"


def test_the_lock_is_released_when_the_block_raises(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), machine_lock.held(NAME, tmp_path):
        raise RuntimeError("boom")
    with machine_lock.held(NAME, tmp_path, wait_s=0) as locked:
        assert locked


def test_the_lock_goes_with_a_holder_killed_by_sigkill(tmp_path: Path) -> None:
    code = (
        "import sys, time; from pathlib import Path; from torchimages.building import machine_lock\n"
        f"with machine_lock.held({NAME!r}, Path({str(tmp_path)!r})):\n"
        "    print('held', flush=True); time.sleep(600)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(EngineError), machine_lock.held(NAME, tmp_path, wait_s=0.2):
            pass
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        with machine_lock.held(NAME, tmp_path, wait_s=5) as locked:
            assert locked
    finally:
        holder.kill()
        holder.wait()


def test_no_folder_runs_unlocked(tmp_path: Path) -> None:
    with machine_lock.held(NAME, None) as locked:
        assert not locked


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory", "folder is a file", "unwritable"])
def test_a_lock_path_that_is_no_regular_file_of_ours_runs_unlocked_at_once(tmp_path: Path, kind: str) -> None:
    lock = machine_lock.path_of(tmp_path, NAME)
    lock.parent.mkdir()
    target = tmp_path / "elsewhere"
    if kind == "fifo":
        os.mkfifo(lock)
    elif kind == "symlink":
        lock.symlink_to(target)
    elif kind == "directory":
        lock.mkdir()
    elif kind == "folder is a file":
        lock.parent.rmdir()
        lock.parent.write_text("not a folder")
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into a read-only folder")
        lock.parent.chmod(0o500)
    try:
        started = time.monotonic()
        with machine_lock.held(NAME, tmp_path) as locked:
            assert not locked
        assert time.monotonic() - started < 5, "no wait on a special file"
        assert not target.exists(), "a symlink is never followed"
    finally:
        lock.parent.chmod(0o700) if lock.parent.is_dir() else None
