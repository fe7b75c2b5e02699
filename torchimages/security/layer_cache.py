"""The layer scan's cache: what reading one layer tarball found (layers.Layer: hits, deletions, opaque folders,
entries), kept by the layer's digest so that a layer is read once, whichever image holds it.

An entry's key is the layer's diff_id (the sha256 of its uncompressed tar, which the scan verifies before it
keeps or reuses an entry; or a compressed blob's digest with that diff_id, layers.blob_key), the rules' digest
(RULES, this format and the Python version: any change to the rules or to how a layer is read makes every entry a
miss)
and the secrets' digest (the build's secrets: a hit names one).
A layer that could not be read (`problem`) is never kept.

Each entry is one small JSON file in `<cache folder>/layer-scans/` (made 0700; a folder another user may
write is not used), written atomically. A bad entry of any kind (not JSON, another shape, another key, too
large, a link, a folder, a FIFO) is a miss, never an error; a folder that cannot be made or written keeps
nothing (the scan still reads every layer). Past the size limit (TORCHIMAGES_SCAN_CACHE_BYTES) the least
recently used entries (by mtime, touched on each hit) are removed; `clear` removes the cache's own files only.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import re
import stat
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from torchimages import settings, values
from torchimages.security import content, layers, leaks, links, tarstream
from torchimages.security.layers import Layer
from torchimages.security.leaks import Hit, Secret

FORMAT = 2  # this module's entry format; a change makes every entry a miss
FOLDER = "layer-scans"
ENTRY_MAX = 4 << 20  # bytes: an entry larger than this is neither written nor read
ENTRY_NAME = re.compile(r"[0-9a-f]{64}\.json")
TEMP_NAME = re.compile(r"\.[0-9a-f]{64}\.json\.[A-Za-z0-9_]+\.tmp")  # an entry being written (mkstemp)
FIELDS = frozenset(
    {"format", "layer", "rules", "secrets", "hits", "deleted", "opaque", "entries", "notes", "marked", "unresolved"}
)


@dataclass(frozen=True)
class Usage:
    """What the cache holds: its entries and their bytes."""

    entries: int
    bytes: int


@dataclass(frozen=True)
class Cleared:
    """What `clear` did: the files removed, and those it could not remove (path: why)."""

    removed: int
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class LayerCache:
    """The layer scans kept in `folder`, at most `limit` bytes of entries (layers.Cache)."""

    folder: Path
    limit: int

    def get(self, diff_id: str, secrets: Sequence[Secret]) -> Layer | None:
        return load(self, diff_id, secrets)

    def put(self, diff_id: str, secrets: Sequence[Secret], layer: Layer) -> None:
        store(self, diff_id, secrets, layer)


# --- where it is --------------------------------------------------------------------------------------------


def tool_folder(environ: Mapping[str, str] | None = None) -> Path | None:
    """The tool's cache folder: TORCHIMAGES_CACHE_DIR, else $XDG_CACHE_HOME/torchimages (an absolute one, as
    the XDG spec asks), else ~/.cache/torchimages; None when there is no home to put it in."""
    chosen = settings.path("TORCHIMAGES_CACHE_DIR", environ)
    if chosen is not None:
        return chosen
    xdg = settings.path("XDG_CACHE_HOME", environ)
    if xdg is not None and xdg.is_absolute():
        return xdg / "torchimages"
    try:
        return Path.home() / ".cache" / "torchimages"
    except (RuntimeError, KeyError):  # no HOME and no passwd entry
        return None


def configured(environ: Mapping[str, str] | None = None) -> LayerCache | None:
    """The cache the settings name, on or off (`build.py cache` shows it); None without a folder."""
    folder = tool_folder(environ)
    limit = settings.count("TORCHIMAGES_SCAN_CACHE_BYTES", environ)
    return LayerCache(folder / FOLDER, limit) if folder is not None else None


def from_settings(environ: Mapping[str, str] | None = None) -> LayerCache | None:
    """The cache the release gate uses; None when TORCHIMAGES_SCAN_CACHE is off (settings.SettingError on a
    bad value)."""
    cache = configured(environ)
    return None if settings.choice("TORCHIMAGES_SCAN_CACHE", environ) == "off" else cache


# --- keys and entries ---------------------------------------------------------------------------------------


RULES = (leaks, content, links, tarstream, layers, values)  # the modules whose source decides a layer's result
# (values: its patterns build leaks's marks, a login in a URL among them)


@functools.cache
def rules_digest() -> str | None:
    """sha256 of what decides a layer's result: this format, the Python version (re, gzip) and the source of
    each module of RULES; None when their source cannot be read (then nothing is cached)."""
    hashed = hashlib.sha256(f"torchimages layer scan {FORMAT} {platform.python_version()}\n".encode())
    try:
        for module in RULES:
            hashed.update(module.__name__.encode() + b"\0")
            hashed.update(Path(module.__file__ or "").read_bytes())
    except OSError:
        return None
    return hashed.hexdigest()


def secrets_digest(secrets: Sequence[Secret]) -> str:
    """sha256 over the build's secrets, sorted (name, size, sha256): a hit names a secret by its name."""
    rows = sorted((s.name, s.size, s.sha256) for s in secrets)
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def entry_name(diff_id: str, rules: str, secrets: str) -> str:
    """An entry's file name: the sha256 of its whole key."""
    return hashlib.sha256(json.dumps([diff_id, rules, secrets]).encode()).hexdigest() + ".json"


def encode(diff_id: str, rules: str, secrets: str, layer: Layer) -> bytes:
    """An entry's bytes: its key and the layer's result (deletions sorted, hits in order)."""
    return json.dumps(
        {
            "format": FORMAT,
            "layer": diff_id,
            "rules": rules,
            "secrets": secrets,
            "hits": [[hit.path, hit.detail] for hit in layer.hits],
            "deleted": sorted(layer.deleted),
            "opaque": sorted(layer.opaque),
            "entries": layer.entries,
            "notes": [[note.path, note.detail] for note in layer.notes],
            "marked": [[path, list(marks)] for path, marks in layer.marked],
            "unresolved": [list(link) for link in layer.unresolved],
        },
        separators=(",", ":"),
    ).encode()


def _strings(found: object) -> list[str] | None:
    if isinstance(found, list) and all(isinstance(item, str) for item in found):
        return found
    return None


def decode(data: bytes, diff_id: str, rules: str, secrets: str) -> Layer | None:
    """The layer an entry holds, or None for anything that is not an entry of exactly this key."""
    try:
        found = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, an integer past int()'s limit, too deep
        return None
    if not isinstance(found, dict) or set(found) != FIELDS:
        return None
    if type(found["format"]) is not int or found["format"] != FORMAT:
        return None
    if (found["layer"], found["rules"], found["secrets"]) != (diff_id, rules, secrets):
        return None
    hits, deleted, opaque, entries = (
        found["hits"],
        _strings(found["deleted"]),
        _strings(found["opaque"]),
        found["entries"],
    )
    pairs = (hits, found["notes"])
    if not all(isinstance(p, list) and all(_strings(i) is not None and len(i) == 2 for i in p) for p in pairs):
        return None
    if deleted is None or opaque is None or type(entries) is not int or entries < 0:
        return None
    marked, unresolved = found["marked"], found["unresolved"]
    if not isinstance(unresolved, list) or not all(_strings(i) is not None and len(i) == 4 for i in unresolved):
        return None
    if not isinstance(marked, list) or not all(_marked(item) for item in marked):
        return None
    return Layer(
        tuple(Hit(path, detail) for path, detail in hits),
        frozenset(deleted),
        frozenset(opaque),
        entries,
        notes=tuple(Hit(path, detail) for path, detail in found["notes"]),
        marked=tuple((path, tuple(marks)) for path, marks in marked),
        unresolved=tuple((a, b, c, d) for a, b, c, d in unresolved),
    )


def _marked(item: object) -> bool:
    """Whether an entry's item of `marked` is [path, [mark's place, ...]]."""
    return (
        isinstance(item, list)
        and len(item) == 2
        and isinstance(item[0], str)
        and isinstance(item[1], list)
        and all(type(at) is int and at >= 0 for at in item[1])
    )


# --- the folder ---------------------------------------------------------------------------------------------


def ready(cache: LayerCache) -> bool:
    """Make the folder (0700) where missing; whether it can be used: a folder of this user's that no other
    user may write, and this one may."""
    try:
        cache.folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        cache.folder.mkdir(exist_ok=True, mode=0o700)
        found = os.lstat(cache.folder)
    except (OSError, ValueError):
        return False
    mine = found.st_uid == os.geteuid() and not found.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    return stat.S_ISDIR(found.st_mode) and mine and os.access(cache.folder, os.W_OK | os.X_OK)


def _read_entry(path: Path) -> bytes | None:
    """An entry's bytes: a regular file (no link followed, a FIFO not waited on) of at most ENTRY_MAX."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode) or found.st_size > ENTRY_MAX:
            return None
        with os.fdopen(os.dup(fd), "rb") as file:
            data = file.read(ENTRY_MAX + 1)
        return data if len(data) <= ENTRY_MAX else None
    except OSError:
        return None
    finally:
        os.close(fd)


def load(cache: LayerCache, diff_id: str, secrets: Sequence[Secret]) -> Layer | None:
    """The result kept for this layer and these secrets (its entry touched), or None: a miss."""
    rules = rules_digest()
    if rules is None:
        return None
    keyed = secrets_digest(secrets)
    path = cache.folder / entry_name(diff_id, rules, keyed)
    data = _read_entry(path)
    layer = decode(data, diff_id, rules, keyed) if data is not None else None
    if layer is not None:
        with contextlib.suppress(OSError):
            os.utime(path, follow_symlinks=False)
    return layer


def store(cache: LayerCache, diff_id: str, secrets: Sequence[Secret], layer: Layer) -> bool:
    """Keep a layer's result (never one with a problem), then evict past the limit; whether it was kept."""
    rules = rules_digest()
    if layer.problem or rules is None or not ready(cache):
        return False
    keyed = secrets_digest(secrets)
    data = encode(diff_id, rules, keyed, layer)
    if len(data) > min(ENTRY_MAX, cache.limit):
        return False
    name = entry_name(diff_id, rules, keyed)
    temp = None
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=cache.folder)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temp, cache.folder / name)
    except OSError:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        return False
    evict(cache, keep=name)
    return True


def _entries(folder: Path) -> list[tuple[float, str, int]]:
    """The regular entry files in the folder: (mtime, name, bytes)."""
    found = []
    try:
        with os.scandir(folder) as listing:
            for item in listing:
                if ENTRY_NAME.fullmatch(item.name):
                    with contextlib.suppress(OSError):
                        info = item.stat(follow_symlinks=False)
                        if stat.S_ISREG(info.st_mode):
                            found.append((info.st_mtime, item.name, info.st_size))
    except (OSError, ValueError):
        return []
    return found


def evict(cache: LayerCache, keep: str = "") -> int:
    """Remove the least recently used entries (but `keep`) until the rest fit the limit; how many went."""
    entries = sorted(_entries(cache.folder))
    total = sum(size for _, _, size in entries)
    removed = 0
    for _, name, size in entries:
        if total <= cache.limit:
            break
        if name == keep:
            continue
        try:
            os.unlink(cache.folder / name)
        except FileNotFoundError:
            pass
        except OSError:
            continue
        total -= size
        removed += 1
    return removed


def usage(cache: LayerCache) -> Usage:
    """The entries the folder holds now (none when it is not there)."""
    entries = _entries(cache.folder)
    return Usage(len(entries), sum(size for _, _, size in entries))


def clear(cache: LayerCache) -> Cleared:
    """Remove the cache's own files (entries, and entries left half-written), nothing else in the folder."""
    removed, problems = 0, []
    try:
        with os.scandir(cache.folder) as listing:
            names = [item.name for item in listing if not item.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return Cleared(0)
    except (OSError, ValueError) as exc:
        return Cleared(0, (f"{cache.folder}: {exc.strerror if isinstance(exc, OSError) else exc}",))
    for name in names:
        if ENTRY_NAME.fullmatch(name) or TEMP_NAME.fullmatch(name):
            try:
                os.unlink(cache.folder / name)
                removed += 1
            except FileNotFoundError:
                pass
            except OSError as exc:
                problems.append(f"{cache.folder / name}: {exc.strerror or exc}")
    return Cleared(removed, tuple(problems))
