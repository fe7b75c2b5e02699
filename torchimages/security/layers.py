"""Credentials, private keys, the build's own secrets and stray files, in any layer of an image: read from the
layer tarballs of the image as the engine exports it (`docker save` of its id, `Engine.exported`), streamed
and never written to disk, so a file that a later layer deletes is still found in the layer that holds it.

A finding's `key` (what an allowlist entry names) is the path in the image, absolute: `/root/.netrc` (a stray
folder's findings are grouped under the entry directly in /tmp, /var/tmp or /root: `/tmp/build`); its
`subject` the layer, `layer 3 of 12 (sha256:0123456789ab)`, with `, deleted in layer 5` when a later layer's
whiteout removes it from the final filesystem (it is still in the pushed image); `detail` the path and what
it is (`/root/.netrc: a netrc file (logins and passwords)`).

The rules are leaks.py's (what no layer may hold, on one entry); content.py searches each regular file's
whole content; links.py follows a layer's links at its end (a link at a path judged by content, through chains
and folder links; a target not read is a note of the layer, said in the scan's note, not a finding); here,
reading the layers. Both the archive and each layer are read by tarstream.py, the way
the engine's Go reader reads them: an entry it cannot read so (an odd or broken header, a sparse file, a type
the engine does not apply, data after the end) makes that layer "not scanned" saying which, never a silent
end of the layer and never clean; what was found before it is still said.

Archives: Docker 25+'s OCI layout (blobs/sha256/...) and the older `<id>/layer.tar`, both through
manifest.json's `Layers` (read wherever it comes in the stream: each blob's hits are kept, and put in order at
the end). Layers are the uncompressed tars `docker save` writes; gzip ones (an engine on the containerd image
store may keep them so) are read too; a zstd layer, or one not read, makes the scan "not scanned" saying which,
never clean.

Bounds (Limits: wall time and bytes, per image and per layer; docs/security.md): past one, the layer (or the
image) is "not scanned" saying which. Memory is bounded whatever the layers hold: one chunk of content and its
overlap, one header (tarstream), the paths a layer's result keeps (RETAINED_MAX), the small members kept.

On the containerd image store, where the engine's content store answers (Engine.stored_layers: the image's
manifest and configuration, hashed), the layers are read from there instead, blob by blob (`read_stored`): no
`docker save`, and a layer the cache holds is not opened at all; each blob read must hash to its name as stored and
to its diff_id as a tar.

With a cache (layer_cache.LayerCache, through `Cache`), each layer's result is kept by its diff_id and read
back instead of the layer: the image's layers are asked of the engine first, and when every one is kept
nothing is exported. Otherwise the archive is read as above, but a blob `blobs/sha256/<hex>` whose diff_id is
kept is only hashed as it streams past (its content must hash to its name, else the layer is "not read");
a layer read is kept only under the digest its bytes were seen to have (the diff_id the configuration names).
"""

from __future__ import annotations

import bisect
import dataclasses
import gzip
import hashlib
import json
import posixpath
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Protocol, cast

from torchimages import settings
from torchimages.engine import Engine, StoredLayers
from torchimages.security.content import Facts, Search
from torchimages.security.leaks import (
    CREDENTIAL_FILES,
    LINK_MARKS,
    CredentialFile,
    Hit,
    Secret,
    credential_rule,
    image_path,
    python_test_data,
    secrets_of,
    stray_hits,
    stray_place,
)
from torchimages.security.links import (
    FOLDER,
    FOLLOWED_MAX,
    GONE,
    HARD,
    LINKS_KEPT_MAX,
    SPECIAL,
    STEPS_MAX,
    SYMLINK,
    WORK_MAX,
    FileIndex,
    Walk,
    cut,
    dotdot_after_link,
    follow,
    names_folder,
    shown,
    unread_note,
)
from torchimages.security.model import SECRETS, Finding, Scan
from torchimages.security.tarstream import BLOCK, Entry, Source, TarError, TarStream, is_header

KEPT = 1 << 20  # archive members up to this size that are not layers are kept (manifest.json, configurations)
KEPT_MAX = 16 << 20  # bytes of such members kept in all
CHUNK = 1 << 20  # bytes of a file's content searched at once
RETAINED_MAX = 16 << 20  # bytes of paths one layer's result may keep (whiteouts, findings, files with facts)
HITS_MAX = 10_000  # findings one layer may have
PURGED_MAX = 50_000_000  # paths looked at to drop those below the folders a layer replaces (more: not scanned)
NOTES_MAX = 100  # notes one layer may have (links whose targets were not read)
NOTES_SHOWN = 10  # of them, said in the scan's note
COUNTED = ""  # the path of a layer's last note, its detail the count of notes past NOTES_MAX (no link's path)

SELF = "\0self"  # hard_end: a hard link to its own path (the engine cannot make it: it removes the path first)
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
APPLIED = frozenset("0123456g")  # the entry types the engine applies (others: it refuses the layer)


@dataclass(frozen=True)
class Limits:
    """The scan's bounds: wall time and bytes read, for the whole image (from the start of its export; bytes
    of the `docker save` stream, or from the first layer read of the content store; bytes of the blobs read there,
    as stored) and for each layer (bytes of its uncompressed tar)."""

    image_seconds: float = 3600.0
    image_bytes: int = 1 << 40
    layer_seconds: float = 1800.0
    layer_bytes: int = 256 << 30

    @classmethod
    def configured(cls, environ: Mapping[str, str] | None = None) -> Limits:
        """The bounds the settings give (TORCHIMAGES_SCAN_SECONDS and _BYTES: the image's; a layer's are half
        the time and a quarter of the bytes); settings.SettingError on a bad value."""
        seconds = settings.seconds("TORCHIMAGES_SCAN_SECONDS", environ)
        most = settings.count("TORCHIMAGES_SCAN_BYTES", environ)
        return cls(seconds, most, seconds / 2, max(1, most // 4))


class Exceeded(Exception):
    """A bound passed; the message says which."""


class _Steps(Exception):
    """The layer's walks passed their bound of steps (links.STEPS_MAX): the rest are said, not followed."""


@dataclass(frozen=True)
class Layer:
    """One layer tarball read: its hits, the paths its whiteouts delete from the layers below, the folders it
    makes opaque (their lower contents gone), how many entries it has; `problem` why it was not read (whole:
    its hits are those found before)."""

    hits: tuple[Hit, ...] = ()
    deleted: frozenset[str] = frozenset()
    opaque: frozenset[str] = frozenset()
    entries: int = 0
    problem: str = ""
    notes: tuple[Hit, ...] = ()  # what the layer's links lead to that was not read (said, not a finding)
    # its files holding a link mark: (path, the marks' places in LINK_MARKS); its links at paths judged by
    # content that end outside it: (path, kind, target, where the chain ends), judged by the layers below
    marked: tuple[tuple[str, tuple[int, ...]], ...] = ()
    unresolved: tuple[tuple[str, str, str, str], ...] = ()


class Cache(Protocol):
    """Layers read before, by diff_id and the scan's secrets (layer_cache.LayerCache)."""

    def get(self, diff_id: str, secrets: Sequence[Secret]) -> Layer | None: ...

    def put(self, diff_id: str, secrets: Sequence[Secret], layer: Layer) -> None: ...


# --- bounds -------------------------------------------------------------------------------------------------


class Meter:
    """Wall time since it was made and bytes counted, against a bound of each (`what` names it)."""

    def __init__(self, what: str, seconds: float, most: int) -> None:
        self.what, self.seconds, self.most = what, seconds, most
        self.start = time.monotonic()
        self.count = 0

    def add(self, size: int) -> None:
        self.count += size
        if self.count > self.most:
            raise Exceeded(f"{self.what} passed its bound of {self.most} bytes read")
        if time.monotonic() - self.start > self.seconds:
            raise Exceeded(f"{self.what} passed its bound of {self.seconds:g} s")


class Metered:
    """A stream whose reads count against meters (and, with `hashed`, pass through sha256)."""

    def __init__(self, source: Source, meters: Sequence[Meter], hashed: bool = False) -> None:
        self.source, self.meters = source, meters
        self.hashed = hashlib.sha256() if hashed else None

    def read(self, size: int = -1, /) -> bytes:
        data = self.source.read(size)
        for meter in self.meters:
            meter.add(len(data))
        if self.hashed is not None:
            self.hashed.update(data)
        return data

    def digest(self) -> str:
        """The sha256 of what was read, as a digest."""
        return "sha256:" + (self.hashed.hexdigest() if self.hashed is not None else "")


class Prefixed:
    """A stream's first bytes, already read, then the rest of it."""

    def __init__(self, head: bytes, rest: Source) -> None:
        self.head, self.rest = head, rest

    def read(self, size: int = -1, /) -> bytes:
        if not self.head:
            return self.rest.read(size)
        cut = len(self.head) if size < 0 else size
        data, self.head = self.head[:cut], self.head[cut:]
        return data


# --- one layer ----------------------------------------------------------------------------------------------


class _Reading:
    """What reading one layer has found so far (read_layer)."""

    def __init__(self, secrets: Sequence[Secret]) -> None:
        self.secrets = secrets
        self.hits: list[Hit] = []
        self.stray: dict[str, tuple[int, str]] = {}  # entry in a stray place: (paths under it, the first met)
        self.deleted: set[str] = set()
        self.opaque: set[str] = set()
        self.facts: dict[str, tuple[Facts, str]] = {}  # a file with facts: them, and its credentials rule's hit
        self.links: dict[str, str] = {}  # every link of the layer (up to LINKS_KEPT_MAX): path -> target
        self.links_bytes = 0
        self.hard: dict[str, tuple[str, int]] = {}  # hard links: path -> (target, its place in the file records)
        self.made: dict[str, list[tuple[int, str]]] = {}  # hard links replaced at a path: (place, target), in order
        self.dotdot: dict[str, str] = {}  # symlinks whose target has a `..` after a folder: path -> that target
        self.dotdot_unkept = False  # more such symlinks than FOLLOWED_MAX: every walk of the layer is unsure
        self.files = FileIndex()  # every entry: a file (whether it was searched for the link marks), a folder, ...
        self.judged: dict[str, tuple[str, str]] = {}  # links at a path judged by content: path -> (kind, target)
        self.folders: dict[str, str] = {}  # symlinks at a folder whose files are judged by content: -> target
        self.notes: list[Hit] = []
        self.unsaid = 0  # notes past NOTES_MAX
        self.unresolved: list[tuple[str, str, str, str]] = []  # judged links ending outside the layer
        self.entries = 0
        self.retained = 0
        self.purged = 0  # paths looked at to drop those below a replaced folder

    def keep(self, text: str) -> str:
        """Count a path (or text) the result keeps, against RETAINED_MAX."""
        self.retained += len(text) + 64
        if self.retained > RETAINED_MAX:
            raise Exceeded(f"the layer passed its bound of {RETAINED_MAX} bytes of paths kept")
        return text

    def add(self, hits: Iterable[Hit]) -> None:
        for hit in hits:
            if len(self.hits) >= HITS_MAX:
                raise Exceeded(f"the layer passed its bound of {HITS_MAX} findings")
            self.keep(hit.path + hit.detail)
            self.hits.append(hit)

    def entry(self, tar: TarStream, entry: Entry) -> None:
        self.entries += 1
        if entry.type not in APPLIED:
            raise TarError(
                f"{entry.where()}: {entry.name!r} is of type {entry.type!r}, which the engine does not apply"
            )
        if entry.type == "g":
            return
        path = image_path(entry.name)
        base = posixpath.basename(path)
        self.files.above(path)  # the engine makes them folders of this layer, over a lower layer's link there
        if base == OPAQUE:
            self.opaque.add(self.keep(posixpath.dirname(path)))
            return
        if base.startswith(WHITEOUT):
            gone = posixpath.join(posixpath.dirname(path), base[len(WHITEOUT) :])
            self.deleted.add(self.keep(gone))
            self.replaced(gone)
            self.cut_folder(gone)
            self.files.add(gone, GONE)
            return
        self.replaced(path)
        if entry.type == "5":
            self.files.add_folder(path)
            return
        self.cut_folder(path)
        if entry.type in "346":  # a FIFO or a device, over whatever file was there
            self.files.add(path, SPECIAL)
        found = (
            self.file(tar, entry, path) if entry.type == "0" else self.link(entry, path) if entry.type in "12" else []
        )
        self.add(found)
        where = stray_place(path)
        if where and not found and not (entry.type == "0" and entry.size == 0):
            top = where[1]
            if top not in self.stray:
                self.keep(top + path)
            count, first = self.stray.get(top, (0, path))
            self.stray[top] = (count + 1, first)

    def file(self, tar: TarStream, entry: Entry, path: str) -> list[Hit]:
        """The credential, private key and build secret rules on one regular file, its whole content."""
        rule = credential_rule(path)
        search = Search(self.secrets, rule.mark if rule is not None else None, entry.size)
        while chunk := tar.read(CHUNK):
            search.feed(chunk)
        facts = search.facts()
        named = rule.what if rule is not None and (rule.mark is None or facts.marked) else ""
        if facts or named:
            self.facts[self.keep(path)] = (facts, named)
        self.files.add(path, facts.unread)
        return self.content_hits(path, facts, named)

    def content_hits(self, path: str, facts: Facts, named: str, prefix: str = "") -> list[Hit]:
        hits = [Hit(path, prefix + named)] if named else []
        if facts.key and not python_test_data(path):
            hits.append(Hit(path, f"{prefix}a private key ({facts.key})"))
        hits += [Hit(path, prefix + what) for what in facts.secrets]
        return hits

    def link(self, entry: Entry, path: str) -> list[Hit]:
        """A hard link or symlink: at a credentials file's path, refused by its path where the rule says so
        (`links`: what it points to may be in another layer; a rule by content says that the content was not
        read); to a file of this layer with facts, that file's content at this path too. One at a path judged
        by content (`links=False`), or at a folder whose files are, is followed at the layer's end (`ended`)."""
        hard = entry.type == "1"
        target = image_path(entry.link if hard else posixpath.join(posixpath.dirname(path), entry.link))
        if not hard and names_folder(entry.link) and target != "/":
            target += "/"  # `rc/`, `rc/.`: a folder, which the kernel does not open as a file
        if not hard and ".." in entry.link.split("/"):
            if len(self.dotdot) < FOLLOWED_MAX:
                self.dotdot[path] = self.keep(posixpath.join(posixpath.dirname(path), entry.link))
            else:  # not kept: no walk of this layer can know whether it passes a `..` after a link
                self.dotdot_unkept = True
        kind = "a hard link" if hard else "a symbolic link"
        if hard:  # the content of the entry its target names at this point of the layer (not a later one there)
            self.keep_hard(path, target)
        else:
            self.keep_link(path, target)
            self.files.add(path, SYMLINK)
        rule = credential_rule(path)
        hits = [Hit(path, link_finding(rule, kind, target))] if rule is not None and rule.links else []
        if rule is not None and not rule.links and rule.mark is not None:
            if len(self.judged) < FOLLOWED_MAX:
                self.judged[self.keep(path)] = (kind, self.keep(target))
            else:
                self.note(path, f"{kind} to {cut(target)}: not followed (past {FOLLOWED_MAX} such links in a layer)")
            return hits
        known = self.facts.get(target)
        if known is not None:
            hits += self.linked_hits(path, kind, target, *known)
            self.facts[self.keep(path)] = known
        elif not hard and judged_folder(path):
            if len(self.folders) < NOTES_MAX:
                self.folders[self.keep(path)] = self.keep(target.rstrip("/") or "/")
            else:
                self.note(
                    path, f"{kind} to {cut(target)} at a folder where files are judged by their content: not followed"
                )
        return hits

    def replaced(self, path: str) -> None:
        """A later entry at `path` (a file, a folder, a link, a whiteout) replaces what was there: the engine
        keeps the last entry of a path."""
        self.facts.pop(path, None)
        self.links.pop(path, None)
        self.retire_hard(path)
        self.judged.pop(path, None)
        self.dotdot.pop(path, None)
        self.folders.pop(path, None)

    def cut_folder(self, path: str) -> None:
        """An entry that is no folder (a file, a link, a whiteout) at a folder of the layer: the engine removes
        the folder with all it holds, so what the layer recorded below it is dropped too (FileIndex.cut)."""
        if not self.files.cut(path):
            return
        kept = (self.facts, self.links, self.hard, self.judged, self.dotdot, self.folders)
        self.purged += sum(len(held) for held in kept)
        if self.purged > PURGED_MAX:
            raise Exceeded(f"the layer's replaced folders took more than the scan's bound of {PURGED_MAX} paths")
        below = path.rstrip("/") + "/"
        for inside in [p for p in self.hard if p.startswith(below)]:
            self.retire_hard(inside)
        for held in kept:
            for inside in [p for p in held if p.startswith(below)]:
                del held[inside]

    def retire_hard(self, path: str) -> None:
        """A later entry replaces the hard link at `path`: kept in `made`, for the hard links made through it before
        (hard_end); its bytes were counted when it was met."""
        if (link := self.hard.pop(path, None)) is not None:
            self.made.setdefault(path, []).append((link[1], link[0]))

    def keep_hard(self, path: str, target: str) -> None:
        """Keep a hard link with the place in the file records where it was met (its target's record before it
        is its content), up to LINKS_KEPT_MAX bytes with the links; the target's facts now, at its path."""
        self.links_bytes += len(path) + len(target) + 64
        if self.links_bytes <= LINKS_KEPT_MAX:
            self.hard[path] = (target, len(self.files.records))
            self.files.add(path, HARD)
        else:
            self.files.add(path, GONE)
        known = self.facts.get(target)
        if known is not None:
            self.facts[self.keep(path)] = known

    def hard_end(self, path: str) -> tuple[str, str | None]:
        """Where a walk that ends at a hard link of the layer reads: the entry its target named when the link was
        met, through hard links to hard links (each the one at its path then, though a later entry replaced it:
        `made`), and its record there (None: no entry of the layer was there; SELF: a hard link to its own path)."""
        reason: str | None = HARD
        at = len(self.files.records)
        while reason == HARD:
            self.steps()
            if path in self.hard and self.hard[path][1] < at:  # the layer's last entry at `path`
                target, at = self.hard[path]
            else:  # one replaced later: the last met before `at`
                made = self.made.get(path, [])
                place = bisect.bisect_left(made, (at, "")) - 1
                if place < 0:
                    break
                at, target = made[place]
            if target == path:  # a hard link to itself: the engine removes the path first, and finds no file there
                return path, SELF
            path, reason = target, self.files.get(target, at)
        return path, reason

    def keep_link(self, path: str, target: str) -> None:
        """Keep a link to follow at the layer's end, up to LINKS_KEPT_MAX bytes (then `links_bytes` is past it)."""
        self.links_bytes += len(path) + len(target) + 64
        if self.links_bytes <= LINKS_KEPT_MAX:
            self.links[path] = target

    def note(self, path: str, detail: str) -> None:
        """Say a link whose target was not judged (NOTES_MAX of them; the others counted, in a last note)."""
        if len(self.notes) < NOTES_MAX:
            self.notes.append(Hit(path, self.keep(detail)))
        else:
            self.unsaid += 1

    def ended(self) -> None:
        """Follow the links at paths judged by content to the file their chain ends at: judged by its content
        at the link's path; a target not read is said (`notes`). Then the links at such folders. Past the links
        or files kept, or the layer's bound of steps (STEPS_MAX file records looked at), the rest are said."""
        full = self.links_bytes > LINKS_KEPT_MAX or self.files.full
        try:
            unsure = {r for r, raw in self.dotdot.items() if dotdot_after_link(raw, self.links, self.is_folder)}
        except _Steps:  # every walk from here on is said past the bound (walk)
            unsure = set(self.dotdot)
        work = 0
        for path, (kind, target) in self.judged.items():
            if path in unsure:  # said with its target as written
                target = self.dotdot[path]
            try:
                walk, known, reason = self.end_of(path, kind, target, path in unsure, full, WORK_MAX - work, unsure)
            except _Steps:
                walk, known, reason = Walk(target, "steps"), None, ""
            work += walk.work
            if walk.stop in ("folder", "special"):  # the kernel opens no file of the image there: nothing is
                continue  # read through the link (a FIFO or a device: what a process writes, not the image)
            if known is not None:
                self.add(self.linked_hits(path, kind, shown(target, walk), *known))
            if walk.stop or reason:
                self.note(path, unread_note(kind, target, walk, reason, full))
            if walk.stop == "absent" and len(self.unresolved) < NOTES_MAX:  # a lower layer's file, maybe
                self.unresolved.append((path, kind, target, self.keep(walk.path)))
        for path, target in self.folders.items():
            try:
                walk = self.walk(target, path in unsure, full, WORK_MAX - work, unsure, lambda _: False)
            except _Steps:
                walk = Walk(target, "steps")
            work += walk.work
            if walk.stop not in ("absent", "folder"):
                self.note(path, unread_note("a symbolic link", target, walk, "", full))
                continue
            folder = walk.path.rstrip("/") or "/"
            for inside, (facts, _) in list(self.facts.items()):
                through = path + inside[len(folder) :]
                rule = credential_rule(through) if inside.startswith(folder + "/") else None
                if rule is not None and not rule.links and facts.holds(rule.mark):
                    self.add([Hit(through, f"{rule.what} ({inside}, through the symbolic link {path} to {target})")])
            self.note(
                path,
                f"a symbolic link to {cut(target)} at a folder where files are judged by their content: only the files"
                " of this layer below its target that were searched are judged through the link",
            )

    def walk(
        self, target: str, dotdot: bool, full: bool, work_left: int, unsure: set[str], is_file: Callable[[str], bool]
    ) -> Walk:
        """Where a link's chain from `target` ends (links.follow), or why it is not followed: a `..` it holds after
        a link (`dotdot`), links or files past those kept (`full`), `..` links past those kept, the layer's
        lookups past STEPS_MAX (a folder link's walk, which looks at no file, too)."""
        if self.files.looked > STEPS_MAX:  # a folder link's walk looks at no file: said here
            return Walk(target, "steps")
        if dotdot:
            return Walk(target, "dotdot")
        if full:  # a link or a file not kept may be on its way, or replace where it ends
            return Walk(target, "unkept")
        if self.dotdot_unkept:
            return Walk(target, "dotdot-unkept")
        return follow(target, self.links, is_file, work_left, unsure)

    def end_of(
        self, path: str, kind: str, target: str, dotdot: bool, full: bool, work_left: int, unsure: set[str]
    ) -> tuple[Walk, tuple[Facts, str] | None, str]:
        """Where the judged link at `path` reads: its walk, the facts of the file there (None: not read) and why
        that file was not searched ("": it was). A hard link reads the entry its target named where it was met
        (hard_end). _Steps past the layer's bound of steps."""
        walk = self.walk(path if kind == "a hard link" else target, dotdot, full, work_left, unsure, self.is_file)
        if walk.stop:
            return walk, None, ""
        known = self.facts.get(walk.path)
        if walk.path in self.hard:
            end, record = self.hard_end(walk.path)
            if record == SELF:
                return Walk(end, "hard-self", walk.steps, walk.work), None, ""
            if record == SYMLINK or record is None:  # link() made it that symlink, or reached a file through
                return Walk(end, "hard-symlink", walk.steps, walk.work), None, ""  # a link of this or a lower layer
            if record in (FOLDER, GONE, HARD):
                return Walk(end, "absent", walk.steps, walk.work), None, ""
            if record == SPECIAL:
                return Walk(end, "special", walk.steps, walk.work), None, ""
            return Walk(end, "", walk.steps, walk.work), known, record
        if known is not None:
            return walk, known, known[0].unread
        record = self.files.get(walk.path)
        if record == SPECIAL:
            return Walk(walk.path, "special", walk.steps, walk.work), None, ""
        return walk, None, record or ""

    def is_file(self, path: str) -> bool:
        """Whether the layer's last entry at `path` is a regular file or a hard link (_Steps past STEPS_MAX)."""
        self.steps()
        return path in self.facts or self.files.is_file(path)

    def is_folder(self, path: str) -> bool:
        """Whether the layer shows `path` to be a folder (a `..` after it is resolved as text; _Steps past
        STEPS_MAX)."""
        self.steps()
        return self.files.is_folder(path)

    def steps(self) -> None:
        """_Steps when the layer's lookups have looked at more than STEPS_MAX file records."""
        if self.files.looked > STEPS_MAX:
            raise _Steps

    def linked_hits(self, path: str, kind: str, target: str, facts: Facts, named: str) -> list[Hit]:
        """What a link at `path` to a file of this layer holds: that file's findings, and its content judged by
        the rule of the link's path (one judged by content: `links=False`)."""
        rule = credential_rule(path)
        if rule is not None and not rule.links and facts.holds(rule.mark):
            named = rule.what
        return self.content_hits(path, facts, named, f"{kind} to {target}, ")

    def layer(self, problem: str = "") -> Layer:
        hits = tuple(self.hits + stray_hits(self.stray))
        if self.unsaid:
            self.notes.append(Hit(COUNTED, str(self.unsaid)))
            self.unsaid = 0
        marked = tuple(
            (path, tuple(at for at, mark in enumerate(LINK_MARKS) if mark.pattern in facts.linked))
            for path, (facts, _) in self.facts.items()
            if facts.linked
        )
        return Layer(
            hits,
            frozenset(self.deleted),
            frozenset(self.opaque),
            self.entries,
            problem,
            tuple(self.notes),
            marked,
            tuple(self.unresolved),
        )


def judged_folder(path: str) -> bool:
    """Whether files in the folder at `path`, or in folders below it, are judged by their content
    (/etc/profile.d, /etc/zsh, environment.d, condarc.d; /etc/fish and its conf.d, /etc/security, /etc/csh): a
    link there leads to them."""
    return any(
        (rule := credential_rule(f"{path}/{inside}")) is not None and not rule.links and rule.mark is not None
        for inside in FOLDER_INSIDES
    )


def _insides() -> tuple[str, ...]:
    """The paths below a folder that a rule judged by content can name (each rule's last components after its
    first, a pattern's `*` as `x`: `conf.d/x.fish`, `pam_env.conf`); a rule's first component is the folder's
    own name, so a folder of any other name takes none of them."""
    return tuple(
        dict.fromkeys(
            "/".join(rule.suffix[cut:]).replace("*", "x")
            for rule in CREDENTIAL_FILES
            if not rule.links and rule.mark is not None
            for cut in range(1, len(rule.suffix))
        )
    )


FOLDER_INSIDES = _insides()


def link_finding(rule: CredentialFile, kind: str, target: str) -> str:
    """What a link at a credentials file's path is said to be: that file, for a rule by path alone; for a rule
    by content, a link at that path (its content is not read through the link: it may not hold the mark)."""
    if rule.mark is None:
        return f"{rule.what}: {kind} to {target}"
    return f"{kind} to {target}, at a path where {rule.what} is refused (its content is not read through a link)"


def read_layer(source: Source, secrets: Sequence[Secret]) -> Layer:
    """Every rule over one layer tarball, read as a stream the way the engine reads it; a layer that cannot
    be read so, or passes a bound, has a `problem` (and the hits found before it)."""
    reading = _Reading(secrets)
    try:
        tar = TarStream(source)
        for entry in tar:
            reading.entry(tar, entry)
        reading.ended()
    except (TarError, Exceeded) as exc:
        return reading.layer(f"it could not be read as the engine reads it: {exc}")
    except (OSError, EOFError, zlib.error) as exc:
        return reading.layer(f"it could not be read as a tar ({exc})")
    return reading.layer()


# --- the archive ----------------------------------------------------------------------------------------------


def _kind(head: bytes) -> str:
    """What an archive member is, by its first bytes: a tar (a header Go reads, or an empty one: a zero
    block), gzip, zstd."""
    if is_header(head[:BLOCK]):
        return "tar"
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if head[:4] == b"\x28\xb5\x2f\xfd":
        return "zstd"
    return "other"


def _link_target(entry: Entry) -> str:
    """Where a link in the archive points, as an archive path (a symlink is relative to its folder)."""
    if entry.type == "1":
        return image_path(entry.link)
    return image_path(posixpath.join(posixpath.dirname(image_path(entry.name)), entry.link))


def _blob_digest(name: str) -> str | None:
    """The digest an OCI layout's blob is named by (`/blobs/sha256/<hex>`), or None."""
    folder, _, hex_part = name.rpartition("/")
    if folder.endswith("/blobs/sha256") and len(hex_part) == 64 and all(c in "0123456789abcdef" for c in hex_part):
        return "sha256:" + hex_part
    return None


@dataclass(frozen=True)
class Archive:
    """A `docker save` archive read once: each layer-like blob read, the small other members kept, links;
    with a cache, the sha256 of each layer's uncompressed bytes (`digests`) and the blobs taken from it."""

    layers: Mapping[str, Layer]
    kept: Mapping[str, bytes]
    links: Mapping[str, str]
    digests: Mapping[str, str] = field(default_factory=dict)
    cached: frozenset[str] = frozenset()
    compressed: Mapping[str, str] = field(default_factory=dict)  # a gzip blob's sha256, as its bytes were seen

    def resolve(self, name: str) -> str:
        name = image_path(name)
        for _ in range(40):
            if name not in self.links:
                break
            name = self.links[name]
        return name


def _drained(source: Metered) -> str:
    while source.read(CHUNK):
        pass
    return source.digest()


def _read_blob(
    data: Source, kind: str, secrets: Sequence[Secret], limits: Limits, hashed: bool
) -> tuple[Layer, str | None]:
    """One layer blob read (gzip'd or not), with the digest of its uncompressed bytes when `hashed`."""
    meter = Meter("the layer", limits.layer_seconds, limits.layer_bytes)
    try:
        unpacked = gzip.GzipFile(fileobj=cast("IO[bytes]", data), mode="rb") if kind == "gzip" else data  # read only
        source = Metered(unpacked, (meter,), hashed)
    except OSError as exc:
        return Layer(problem=f"it could not be read as a tar ({exc})"), None
    layer = read_layer(source, secrets)
    return layer, (source.digest() if hashed and not layer.problem else None)


def read_archive(
    stream: Source,
    secrets: Sequence[Secret],
    known: Mapping[str, Layer] | None = None,
    limits: Limits | None = None,
    by_blob: Callable[[str], tuple[Layer, str] | None] | None = None,
) -> Archive:
    """Read a `docker save` archive as a stream: every member that is a tar (or gzip'd tar) is read as a
    layer; small other members are kept (manifest.json and the configuration). TarError when the archive
    itself is not read as the engine writes it (or breaks off, or names a file twice), Exceeded past the image's
    bounds. With
    `known` (a cache's layers by diff_id; {}: a cache that holds none of them) each layer's bytes are hashed,
    and a tar blob named by a known digest is only hashed, not read. `by_blob` (a cache's layer by the digest of a
    compressed blob, with the diff_id its tar was seen to hash to when kept: the containerd store saves the gzip
    blobs it keeps) does the same for a gzip blob: only hashed, never unpacked; that diff_id is the one its place
    is then checked against (`checked_against`)."""
    limits = limits or Limits()
    image = Meter("the image", limits.image_seconds, limits.image_bytes)
    layers: dict[str, Layer] = {}
    kept: dict[str, bytes] = {}
    links: dict[str, str] = {}
    digests: dict[str, str] = {}
    compressed: dict[str, str] = {}
    cached: set[str] = set()
    kept_bytes = 0
    names: set[str] = set()
    saved = TarStream(Metered(stream, (image,)))
    for entry in saved:
        name = image_path(entry.name)
        if entry.type in ("0", "1", "2"):  # a save names each file once: a second one would replace what the first held
            if name in names:
                raise TarError(f"{cut(name)} is in the archive twice")
            names.add(name)
        if entry.type in ("1", "2"):
            links[name] = _link_target(entry)
            continue
        if entry.type != "0":
            continue
        head = saved.read(BLOCK)
        data = Prefixed(head, saved)
        kind = _kind(head)
        named = _blob_digest(name)
        if kind == "tar" and known is not None and named is not None and named in known:
            digests[name] = _drained(Metered(data, (), hashed=True))
            if digests[name] == named:
                layers[name] = known[named]
                cached.add(name)
            else:
                layers[name] = Layer(problem="its content does not match its digest")
        elif kind == "gzip" and by_blob is not None and named is not None and (hit := by_blob(named)) is not None:
            compressed[name] = _drained(Metered(data, (), hashed=True))  # the compressed bytes: its name's digest
            if compressed[name] == named:
                layers[name], digests[name] = hit  # its tar's digest, as the cache saw it
                cached.add(name)
            else:
                layers[name] = Layer(problem="its content does not match its digest")
        elif kind == "zstd":
            layers[name] = Layer(problem="it is zstd-compressed, which this check does not read")
        elif kind in ("tar", "gzip"):
            seen = Metered(data, (), hashed=kind == "gzip" and known is not None)
            layers[name], digest = _read_blob(seen, kind, secrets, limits, hashed=True)  # checked against the diff_id
            if digest is not None:
                digests[name] = digest
                if seen.hashed is not None:  # what gzip left unread (its trailer, padding), hashed too
                    compressed[name] = _drained(seen)
        else:
            layers[name] = Layer(problem="it is no tar, gzip or zstd stream")
            if entry.size <= KEPT and kept_bytes + entry.size <= KEPT_MAX:
                kept[name] = head + saved.read(entry.size)
                kept_bytes += entry.size
    return Archive(layers, kept, links, digests, frozenset(cached), compressed)


def read_stored(
    stored: StoredLayers, secrets: Sequence[Secret], known: Mapping[str, Layer], limits: Limits | None = None
) -> tuple[Archive, Order]:
    """Read an image's layers from the engine's content store, each blob streamed by its digest and read as
    `read_archive` reads a layer blob (gzip'd or not), never written to disk. A layer whose diff_id `known` holds
    (a cache's) is not read at all: the diff_id is its content's digest, named by a hashed configuration. A blob
    read is hashed twice: its stored bytes must hash to its name and its tar to its diff_id, else the layer is
    not read ("its content does not match its digest"). Exceeded past the image's bounds; EngineError from the
    stream (the store failed, or `cancelled` on leaving)."""
    limits = limits or Limits()
    image = Meter("the image", limits.image_seconds, limits.image_bytes)
    names = tuple(f"/blobs/sha256/{blob.partition(':')[2]}" for blob in stored.blobs)
    layers: dict[str, Layer] = {}
    digests: dict[str, str] = {}
    compressed: dict[str, str] = {}
    cached: set[str] = set()
    layer_of: dict[str, str] = {}  # each blob's diff_id: a blob named for two layers is neither
    for name, blob, diff_id in zip(names, stored.blobs, stored.diff_ids, strict=True):
        if layer_of.setdefault(name, diff_id) != diff_id:  # what its first place's read found is still said
            layers[name] = dataclasses.replace(
                layers.get(name, Layer()), problem="its blob is named for two layers of other content"
            )
            cached.discard(name)
            continue
        if name in layers:
            continue
        if diff_id in known:
            layers[name], digests[name] = known[diff_id], diff_id
            cached.add(name)
            continue
        with stored.open(blob) as stream:
            seen = Metered(stream, (image,), hashed=True)
            head = seen.read(BLOCK)
            kind = _kind(head)
            if kind == "zstd":
                layers[name] = Layer(problem="it is zstd-compressed, which this check does not read")
                continue
            if kind not in ("tar", "gzip"):
                layers[name] = Layer(problem="it is no tar, gzip or zstd stream")
                continue
            layer, digest = _read_blob(Prefixed(head, seen), kind, secrets, limits, hashed=True)
            if _drained(seen) != blob:  # what was found is still said (the layer is not read as clean)
                layer = dataclasses.replace(layer, problem="its content does not match its digest")
            elif not layer.problem and digest != diff_id:
                layer = dataclasses.replace(layer, problem="its content is not the layer its configuration names")
            layers[name] = layer
            if not layer.problem and digest is not None:
                digests[name], compressed[name] = digest, blob
    return Archive(layers, {}, {}, digests, frozenset(cached), compressed), Order(names, stored.diff_ids)


@dataclass(frozen=True)
class Order:
    """The image's layers from manifest.json, bottom first: each one's archive path and digest (its diff_id
    from the configuration, else the blob's name: `from_config` False)."""

    names: tuple[str, ...]
    digests: tuple[str, ...]
    from_config: bool = True


def layer_order(archive: Archive) -> Order:
    """The one image's layers in order; ValueError saying why not."""
    if "/manifest.json" not in archive.kept:
        raise ValueError("the archive has no manifest.json")
    try:
        (entry,) = json.loads(archive.kept["/manifest.json"])
        names = tuple(archive.resolve(str(name)) for name in entry["Layers"])
        config_name = archive.resolve(str(entry.get("Config", "")))
    except (ValueError, TypeError, KeyError, AttributeError):
        raise ValueError("manifest.json does not name one image's layers") from None
    diff_ids: list[str] = []
    try:
        config = json.loads(archive.kept.get(config_name, b"{}"))
        diff_ids = [str(d) for d in config["rootfs"]["diff_ids"]]
    except (ValueError, TypeError, KeyError):
        pass
    if len(diff_ids) != len(names):
        diff_ids = ["sha256:" + posixpath.basename(n) if "/sha256/" in n else n.lstrip("/") for n in names]
        return Order(names, tuple(diff_ids), from_config=False)
    return Order(names, tuple(diff_ids))


def checked_against(archive: Archive, order: Order) -> Archive:
    """The archive with each layer read whose tar is not the diff_id the configuration names at its place marked
    not read (what it held is still said): the save's manifest.json may name any blob for a layer. Nothing is
    checked where the configuration names no diff_ids (the order then has the blobs' own names). A gzip blob taken
    from the scan cache by its compressed digest is checked with the diff_id its tar hashed to when it was kept."""
    if not order.from_config:
        return archive
    layers = dict(archive.layers)
    places: dict[str, set[str]] = {}
    for name, diff_id in zip(order.names, order.digests, strict=True):
        places.setdefault(name, set()).add(diff_id)
    for name, diff_ids in places.items():
        layer, digest = layers.get(name), archive.digests.get(name)
        if layer is None or layer.problem or digest is None:
            continue
        if len(diff_ids) > 1:
            layers[name] = dataclasses.replace(layer, problem="its blob is named for two layers of other content")
        elif digest not in diff_ids:
            layers[name] = dataclasses.replace(layer, problem="its content is not the layer its configuration names")
    return dataclasses.replace(archive, layers=layers)


def _short(digest: str) -> str:
    algorithm, _, hex_part = digest.partition(":")
    return f"{algorithm}:{hex_part[:12]}" if hex_part else digest


def deleted_by(path: str, above: Iterable[tuple[int, Layer]]) -> int | None:
    """The first layer above (number, layer) whose whiteouts delete `path`: itself, a folder above it, or an
    opaque folder above it."""
    ancestors = [posixpath.dirname(path)]
    while ancestors[-1] != "/":
        ancestors.append(posixpath.dirname(ancestors[-1]))
    for number, layer in above:
        if path in layer.deleted or any(a in layer.deleted or a in layer.opaque for a in ancestors):
            return number
    return None


def findings(archive: Archive, order: Order) -> tuple[list[Finding], list[str]]:
    """The findings of every layer in order (subject: the layer, and where a later one deletes it; those of a
    layer not read whole too), and the problems of the layers not read."""
    found, problems = [], []
    total = len(order.names)
    read = [archive.layers.get(name) for name in order.names]
    for at, (layer, digest) in enumerate(zip(read, order.digests, strict=True)):
        where = f"layer {at + 1} of {total} ({_short(digest)})"
        if layer is None or layer.problem:
            problems.append(f"{where} not read: {layer.problem if layer else 'it is not in the archive'}")
        if layer is None:
            continue
        above = [(n + 1, lay) for n, lay in enumerate(read) if n > at and lay is not None]
        for hit in [*layer.hits, *other_hits(layer, read, at)]:
            gone = deleted_by(hit.path, above)
            subject = where + (f", deleted in layer {gone}" if gone else "")
            found.append(Finding(SECRETS, hit.path, subject, f"{hit.path}: {hit.detail}"))
    return found, problems


def other_hits(layer: Layer, read: Sequence[Layer | None], at: int) -> list[Hit]:
    """A layer's (`read[at]`) links at paths judged by content whose chain ends outside it, where another
    layer holds a file with a link mark at that path: the nearest below, else the nearest above. Said as what
    is known (that layer holds such a file at the path the link names), not that the link leads there: a
    layer between may delete or replace it, and the walk is not followed through other layers' links. None
    when no other layer holds one (the layer's note says the target was not judged)."""
    hits = []
    others = [*range(at - 1, -1, -1), *range(at + 1, len(read))]
    for path, kind, target, end in layer.unresolved:
        rule = credential_rule(path)
        if rule is None or rule.mark is None:
            continue
        for number in others:
            other = read[number]
            marks = dict(other.marked).get(end) if other is not None else None
            if marks is None:
                continue
            if any(LINK_MARKS[m].pattern == rule.mark.pattern for m in marks if m < len(LINK_MARKS)):
                shown = cut(target) if end == target else f"{cut(target)} (through links: {cut(end)})"
                hits.append(
                    Hit(
                        path,
                        f"{kind} to {shown}: layer {number + 1} holds a file at the path it names that, read"
                        f" here, is {rule.what}",
                    )
                )
            break
    return hits


def scan(
    engine: Engine,
    reference: str,
    secrets: Sequence[tuple[str, bytes]],
    cancelled: threading.Event | None = None,
    cache: Cache | None = None,
    limits: Limits | None = None,
) -> Scan:
    """What the layers of `reference` hold that no image may (see the module). EngineError when the engine
    cannot inspect or export it; not scanned (saying why) when the archive, or one of its layers, could not
    be read, or passed a bound (`limits`). With a `cache`, layers kept there are not read again (nothing is
    exported when all are). Where the engine's content store answers for the image, its layer blobs are read
    from there (`read_stored`: only those not kept), not from its `docker save`."""
    build_secrets = secrets_of(secrets)
    known: dict[str, Layer] | None = None
    diff_ids: tuple[str, ...] = ()
    if cache is not None:
        info = engine.inspect(reference)
        diff_ids = info.layers if info is not None else ()
        known = {d: layer for d in dict.fromkeys(diff_ids) if (layer := cache.get(d, build_secrets)) is not None}
        if diff_ids and all(d in known for d in diff_ids):
            return _result(Archive(known, {}, {}, cached=frozenset(known)), Order(diff_ids, diff_ids))
    stored = engine.stored_layers(reference, cancelled)
    if stored is not None:  # its diff_ids are inspect's (DockerEngine.stored_layers): `known` holds the cached ones
        try:
            archive, order = read_stored(stored, build_secrets, known or {}, limits)
        except Exceeded as exc:
            return Scan(SECRETS, scanned=False, note=f"the image's stored layers could not be read: {exc}")
        if cache is not None:
            keep(cache, build_secrets, archive, order)
        return _result(archive, order)
    try:
        by_blob = _by_blob(cache, build_secrets, diff_ids) if cache is not None else None
        with engine.exported(reference, cancelled) as stream:
            archive = read_archive(stream, build_secrets, known, limits, by_blob)
    except (TarError, Exceeded) as exc:
        return Scan(SECRETS, scanned=False, note=f"the exported image could not be read: {exc}")
    try:
        order = layer_order(archive)
    except ValueError as exc:
        return Scan(SECRETS, scanned=False, note=f"the exported image could not be read: {exc}")
    archive = checked_against(archive, order)
    if cache is not None:
        keep(cache, build_secrets, archive, order)
    return _result(archive, order)


def blob_key(blob: str, diff_id: str) -> str:
    """The cache's key for a compressed blob whose tar was seen to hash to `diff_id`."""
    return f"{blob} {diff_id}"


def _by_blob(
    cache: Cache, secrets: Sequence[Secret], diff_ids: Sequence[str]
) -> Callable[[str], tuple[Layer, str] | None]:
    """The cache's layer for a compressed blob whose tar was seen to hash to one of the image's diff_ids, with
    that diff_id."""

    def found(blob: str) -> tuple[Layer, str] | None:
        for diff_id in dict.fromkeys(diff_ids):
            if (layer := cache.get(blob_key(blob, diff_id), secrets)) is not None:
                return layer, diff_id
        return None

    return found


def keep(cache: Cache, secrets: Sequence[Secret], archive: Archive, order: Order) -> None:
    """Put each layer read (not from the cache, no problem) in the cache under its diff_id, when its bytes
    were seen to hash to it; a compressed blob's (`/blobs/sha256/<hex>` whose name is not its diff_id: a gzip
    layer the containerd store saved) under its name and that diff_id as well (`blob_key`), where its compressed
    bytes were seen to hash to that name, so the next image that holds it at a place of that diff_id only hashes
    it."""
    for name, digest in dict(zip(order.names, order.digests, strict=True)).items():
        layer = archive.layers.get(name)
        if (
            layer is not None
            and not layer.problem
            and name not in archive.cached
            and archive.digests.get(name) == digest
        ):
            cache.put(digest, secrets, layer)
            if (blob := _blob_digest(name)) is not None and blob != digest and archive.compressed.get(name) == blob:
                cache.put(blob_key(blob, digest), secrets, layer)


def link_notes(archive: Archive, order: Order) -> tuple[list[str], int]:
    """What the layers' links at paths judged by content lead to that was not read, in layer order, and how
    many more such links the layers counted without saying them (past NOTES_MAX)."""
    total = len(order.names)
    read = [archive.layers.get(n) for n in order.names]
    said, counted = [], 0
    for at, (layer, digest) in enumerate(zip(read, order.digests, strict=True)):
        judged = {hit.path for hit in other_hits(layer, read, at)} if layer is not None else set()
        for note in layer.notes if layer is not None else ():
            where = f"layer {at + 1} of {total} ({_short(digest)})"
            if note.path == COUNTED:
                counted += int(note.detail) if note.detail.isdigit() else 0
            elif note.path not in judged:  # judged by another layer's file: a finding, not a note
                said.append(f"{where}: {cut(note.path)}: {note.detail}")
    return said, counted


def _result(archive: Archive, order: Order) -> Scan:
    """The scan's answer: the findings in layer order, the layers and entries counted (and those from the
    cache), the links whose targets were not read (NOTES_SHOWN of them), the layers not read."""
    found, problems = findings(archive, order)
    entries = sum(archive.layers[n].entries for n in set(order.names) if n in archive.layers)
    note = f"{len(order.names)} layers, {entries} entries"
    from_cache = sum(1 for name in order.names if name in archive.cached)
    if from_cache:
        note += f" ({from_cache} from the cache)"
    notes, counted = link_notes(archive, order)
    if notes or counted:
        unshown = max(0, len(notes) - NOTES_SHOWN) + counted
        more = f"; and {unshown} more" if unshown else ""
        note += f"; links not judged by their target's content: {'; '.join(notes[:NOTES_SHOWN])}{more}"
    if problems:
        return Scan(SECRETS, tuple(found), scanned=False, note="; ".join([note, *problems]))
    return Scan(SECRETS, tuple(found), note=note)
