"""What a command checks and makes before it writes or starts anything, so a refusal leaves the disk as it
was: output folders and files that can be written, and the folders a command makes undone when it then
refuses (`all_or_nothing`)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from torchimages import textfile
from torchimages.problems import UsageError


def _nearest_existing(path: Path) -> Path:
    """`path` itself when it exists, else its nearest ancestor that does."""
    absolute = path.absolute()
    return next(p for p in (absolute, *absolute.parents) if os.path.lexists(p))


def _kind(path: Path) -> str:
    """What is at `path` (a link followed), in words."""
    try:
        return textfile.file_kind(os.stat(path).st_mode)
    except OSError:
        return "something that cannot be read"


def _writable_folder(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def folder(option: str, path: Path | None) -> None:
    """UsageError unless `path` (when given) is a folder that can be written into, or can be made: no file
    in its place or in place of a parent, and the nearest existing one writable."""
    if path is None:
        return
    nearest = _nearest_existing(path)
    if not nearest.is_dir():
        where = "it" if nearest == path.absolute() else str(nearest)
        raise UsageError(f"{option} {path}: {where} is {_kind(nearest)}, not a folder")
    if not _writable_folder(nearest):
        raise UsageError(f"{option} {path}: cannot write there ({nearest} is not writable)")


def file(option: str, path: Path | None) -> None:
    """UsageError unless `path` (when given) is a file that can be written: not a folder, its folder there
    (or makeable) and writable."""
    if path is None:
        return
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a folder, not a file")
    if path.exists() and not path.is_file():  # a device or FIFO is never replaced by what the command writes
        raise UsageError(f"{option} {path}: it is {_kind(path)}, not a regular file")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise UsageError(f"{option} {path}: cannot write it (permission denied)")
        return
    parent = path.absolute().parent
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: its folder {parent} is not there")
    if not _writable_folder(parent):
        raise UsageError(f"{option} {path}: cannot write there ({parent} is not writable)")


@contextlib.contextmanager
def all_or_nothing(*paths: Path) -> Iterator[None]:
    """Whatever the block adds in these folders (and the folders themselves, when it makes them) is removed
    again if it raises: a refusal after a folder was made leaves the disk as it was."""
    before = {}
    for path in paths:
        absolute = path.absolute()
        made = next((p for p in (absolute, *absolute.parents) if os.path.lexists(p.parent)), absolute)
        existed = os.path.lexists(absolute)
        before[absolute] = (made, existed, set(os.listdir(absolute)) if existed and absolute.is_dir() else set())
    try:
        yield
    except BaseException:
        for absolute, (made, existed, entries) in before.items():
            if not existed:
                with contextlib.suppress(OSError):
                    shutil.rmtree(made) if made.is_dir() else made.unlink()
                continue
            with contextlib.suppress(OSError):
                for name in set(os.listdir(absolute)) - entries:
                    added = absolute / name
                    shutil.rmtree(added) if added.is_dir() and not added.is_symlink() else added.unlink()
        raise
