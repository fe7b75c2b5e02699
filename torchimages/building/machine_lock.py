"""One process at a time on this machine for a named piece of work (a base image's bootstrap).

An advisory lock (`flock`) on a file in the tool's cache folder: a second `build.py` that needs the same
base while another bootstraps it waits, then finds it made, instead of bootstrapping beside it (two imports
would retag the base under each other's builds). The lock goes with its holder, however that ends (a crash
or SIGKILL included). Where no lock file can be had (no cache folder, one not writable, a lock path that is
not a regular file) the work runs unlocked, as it would on a machine of its own.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from torchimages.engine import EngineError

FOLDER = "locks"
POLL_S = 0.5
WAIT_S = 1800.0  # a holder busy this long is stuck: say so rather than wait for ever


def path_of(folder: Path, name: str) -> Path:
    """The lock file of `name` (any text: hashed into the file name) under the tool folder `folder`."""
    return folder / FOLDER / f"{hashlib.sha256(name.encode()).hexdigest()[:24]}.lock"


def _open(path: Path) -> int | None:
    """A descriptor of the regular file at `path` (made if missing, never through a symlink); None if none."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def held(
    name: str,
    folder: Path | None,
    *,
    waiting: Callable[[str], None] = lambda _: None,
    cancelled: threading.Event | None = None,
    wait_s: float = WAIT_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[bool]:
    """Hold the lock of `name` for the block; True when held, False when the block runs without it (no lock
    file to be had, or `cancelled` was set while waiting). `waiting` hears once that another process holds
    it. EngineError once it has been held by another for `wait_s`."""
    lock = path_of(folder, name) if folder is not None else None
    fd = _open(lock) if lock is not None else None
    if fd is None:
        yield False
        return
    try:
        started, told = clock(), False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    yield False  # flock unsupported here (some network file systems): unlocked
                    return
            if cancelled is not None and cancelled.is_set():
                yield False
                return
            if clock() - started >= wait_s:
                raise EngineError(
                    f"{name}: another process has held its lock for {wait_s:.0f} s ({lock}, "
                    "held by a build.py still running?): stop that process, or try again once it is done"
                )
            if not told:
                waiting(f"{name}: another process is at it; waiting for it (lock: {lock})")
                told = True
            sleep(POLL_S)
        yield True
    finally:
        os.close(fd)  # releases the lock
