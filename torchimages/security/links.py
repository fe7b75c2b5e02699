"""What one layer's links lead to (layers.py): a link at a path judged by content (a shell's startup file, a
wgetrc, a curlrc, a condarc: leaks.CredentialFile's `links=False`) is judged by the file its chain of links
ends at, in whatever order the layer holds them. Kept while the layer streams past: every link (its path and
target, up to LINKS_KEPT_MAX bytes of paths: not of memory, which is about 70 bytes more per symbolic link and
165 per hard link) and, for every entry and each folder above entries once, 9 bytes (its path's digest and
whether it is a file whose content was searched for the link marks, or why not, a folder, a hard link, a
symbolic link or no file; up to FILES_MAX), each distinct folder's digest (up to FOLDERS_MAX) and the folders
replaced (with what is below them: the engine removes a folder a later file, link or whiteout replaces).
At the layer's end each such link is followed (through links to files and to folders, at most LINK_DEPTH,
PATH_MAX bytes, WORK_MAX bytes of paths and STEPS_MAX records looked at for the layer): to a file of the
layer, judged by its content; a target not read (not a file of this layer, a binary, too large, a loop, a walk
cut short, a `..` after a link or after a folder the layer does not show) is said. A path's last entry in the
layer is the one kept; a hard link reads the entry its target named where it was met."""

from __future__ import annotations

import bisect
import hashlib
import posixpath
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass

LINK_DEPTH = 40  # links followed at most in one chain (Linux's own bound on a path's symlinks)
LINKS_KEPT_MAX = 32 << 20  # bytes of links (paths and targets, 64 more each; not their memory) one layer keeps
FILES_MAX = 4_000_000  # records (its files, folders, links, whiteouts) one layer keeps (9 bytes each)
FOLDERS_MAX = 1_000_000  # distinct folders one layer keeps (about 85 bytes each in memory)
CUTS_CHECKED = 64  # folders cut since a folder was recorded that are checked (more: it is recorded again)
FOLLOWED_MAX = 1000  # links at paths judged by content one layer follows (more: said, not followed)
PATH_MAX = 4096  # bytes of a path a walk may reach (Linux's PATH_MAX): past it, the walk stops, said
WORK_MAX = 256 << 20  # bytes of paths one layer's walks may look at in all (past it: they stop, said)
SHOWN_MAX = 200  # characters of a path a note says (the rest counted)
STEPS_MAX = 200_000_000  # file records one layer's walks may look at in all (past it: the rest said, not judged)
SEARCHED = ""  # a file's content searched for the link marks (content.Facts.unread)
FOLDER = "\0folder"  # FileIndex: the path is a folder of the layer (an entry there, or one below it)
GONE = "\0gone"  # FileIndex: a later link or whiteout replaced whatever file the layer held there
SYMLINK = "\0symlink"  # FileIndex: a symbolic link (no file; what a hard link to it reads is not judged)
HARD = "\0hard"  # FileIndex: a hard link, whose content is its target's record before it (layers.hard_end)
SPECIAL = "\0special"  # FileIndex: a FIFO or a device: a link to it reads nothing the image holds


class FileIndex:
    """The entries of a layer, by the digest of their path: for a regular file, whether it was searched for the
    link marks, or why not (content.Facts.unread); FOLDER, HARD, SYMLINK, SPECIAL and GONE for a folder, a hard
    link, a symbolic link, a FIFO or a device, no file. Each folder above an entry is recorded once (`folders`,
    up to FOLDERS_MAX: a layer's records grow with its folders, not its entries times their depth), again after a
    folder above it was cut. A cut (`cut`: a whiteout, a file or a link replacing a folder of the layer) deletes
    what was recorded below it before (the engine removes the folder with its contents). Past FILES_MAX records or
    FOLDERS_MAX folders, `full` and no more kept. `looked` counts the records lookups have looked at (the
    walks' steps)."""

    def __init__(self) -> None:
        self.records = bytearray()
        self.reasons: list[str] = [SEARCHED]
        self.full = False
        self.looked = 0
        self.folders: dict[bytes, int] = {}  # folder recorded: its digest -> how many cuts there were then
        self.cuts: dict[str, list[int]] = {}  # folder cut: its path -> the records' lengths at its cuts
        self.cut_order: list[str] = []  # the cut folders, in order

    @staticmethod
    def _digest(path: str) -> bytes:
        return hashlib.blake2b(path.encode("utf-8", "surrogateescape"), digest_size=8).digest()

    def add(self, path: str, unread: str) -> None:
        if len(self.records) >= 9 * FILES_MAX:
            self.full = True
            return
        if unread not in self.reasons:
            self.reasons.append(unread)
        self.records += self._digest(path) + bytes((self.reasons.index(unread) % 256,))

    def cut(self, path: str) -> bool:
        """Whether an entry at `path` that is no folder cuts a folder of the layer there (said so: what was
        recorded below it before is no more)."""
        if self.folders.pop(self._digest(path), None) is None:
            return False
        self.cuts.setdefault(path, []).append(len(self.records))
        self.cut_order.append(path)
        return True

    def add_folder(self, path: str) -> None:
        """Record a folder entry at `path`."""
        self.add(path, FOLDER)
        self.folder(self._digest(path))

    def folder(self, digest: bytes) -> None:
        if len(self.folders) >= FOLDERS_MAX:
            self.full = True
            return
        self.folders[digest] = len(self.cut_order)

    def above(self, path: str) -> None:
        """Record the folders above an entry as the layer's, up to the first one recorded and not cut since."""
        if self.full:  # no walk of the layer is judged: nothing more to record
            return
        folder = posixpath.dirname(path)
        while folder != "/":
            digest = self._digest(folder)
            cuts = self.folders.get(digest)
            if cuts is not None and self.uncut(folder, cuts):
                self.folders[digest] = len(self.cut_order)
                return
            self.add(folder, FOLDER)
            self.folder(digest)
            folder = posixpath.dirname(folder)

    def uncut(self, folder: str, cuts: int) -> bool:
        """Whether no folder cut after the `cuts`th is `folder` or above it (more than CUTS_CHECKED: not known)."""
        if len(self.cut_order) - cuts > CUTS_CHECKED:
            return False
        return not any(folder == c or folder.startswith(c + "/") for c in self.cut_order[cuts:])

    def get(self, path: str, before: int | None = None) -> str | None:
        """Why the file at `path` was not searched ("" when it was), or None when no file of the layer is there
        (the last record of the path before the byte `before` of the records: a file written twice is the later
        one; none when a folder above it was cut after it, before `before`)."""
        digest, at = self._digest(path), len(self.records) if before is None else before
        end = at
        while (at := self.records.rfind(digest, 0, at)) >= 0:
            if at % 9 == 0:
                self.looked += (len(self.records) - at) // 9
                return None if self.cut_below(path, at, end) else self.reasons[self.records[at + 8]]
        self.looked += len(self.records) // 9
        return None

    def cut_below(self, path: str, start: int, end: int) -> bool:
        """Whether a folder above `path` was cut between the bytes `start` and `end` of the records."""
        if not self.cuts:
            return False
        folder = posixpath.dirname(path)
        while folder != "/":
            self.looked += 1
            cuts = self.cuts.get(folder, ())  # in the order made: the records only grow
            after = bisect.bisect_right(cuts, start)
            if after < len(cuts) and cuts[after] < end:
                return True
            folder = posixpath.dirname(folder)
        return False

    def is_file(self, path: str) -> bool:
        """Whether the layer's last entry at `path` is a regular file (or a hard link to one)."""
        return self.get(path) not in (None, FOLDER, GONE, SYMLINK)

    def is_folder(self, path: str) -> bool:
        """Whether the layer shows `path` to be a folder (its last record: a folder entry, or an entry below it)."""
        return path == "/" or self.get(path) == FOLDER


@dataclass(frozen=True)
class Walk:
    """Where a chain of links ends: `path`, and `stop` why it ends there ("" at a file of the layer)."""

    path: str
    stop: str = ""
    steps: int = 0
    work: int = 0  # bytes of paths looked at


def through_folder(path: str, links: Mapping[str, str]) -> tuple[str | None, str, int]:
    """`path` with its deepest folder that is a link replaced by that link's target (None: no such folder),
    that folder, and the bytes of paths looked at."""
    folder, work = posixpath.dirname(path), 0
    while folder != "/":
        work += len(folder)
        if folder in links:
            return posixpath.normpath(links[folder] + "/" + path[len(folder) + 1 :]), folder, work
        folder = posixpath.dirname(folder)
    return None, folder, work


def follow(
    target: str,
    links: Mapping[str, str],
    is_file: Callable[[str], bool],
    work_left: int = WORK_MAX,
    unsure: Container[str] = frozenset(),
) -> Walk:
    """Follow the links of a layer from `target` (a link's target, absolute) to a file of the layer; else
    where it stops: "absent" (no file or link of the layer there), "loop", "deep" (past LINK_DEPTH), "long" (a
    path past PATH_MAX), "work" (past `work_left` bytes of paths looked at), "dotdot" (through a link of
    `unsure`: its target has a `..` after a link, which text cannot resolve), "folder" (a target written with a
    trailing `/` names a folder: the kernel opens no file through it, whatever is there)."""
    path, seen, work = target, {target}, 0
    for steps in range(LINK_DEPTH + 1):
        if path.endswith("/") and path != "/":
            return Walk(path, "folder", steps, work)
        if len(path.encode("utf-8", "surrogateescape")) > PATH_MAX:
            return Walk(path, "long", steps, work)
        work += len(path)
        if work > work_left:
            return Walk(path, "work", steps, work)
        after, through = links.get(path), path
        if after is None and is_file(path):  # asked only at a chain's end: a file's record is searched for
            return Walk(path, "", steps, work)
        if after is None:
            after, through, looked = through_folder(path, links)
            work += looked
            if work > work_left:
                return Walk(path, "work", steps, work)
        if after is None:
            return Walk(path, "absent", steps, work)
        if through in unsure:
            return Walk(path, "dotdot", steps, work)
        if after in seen:
            return Walk(path, "loop", steps, work)
        seen.add(after)
        path = after
    return Walk(path, "deep", LINK_DEPTH, work)


def names_folder(raw: str) -> bool:
    """Whether a symlink's target as written names a folder (`rc/`, `rc/.`, `rc/..`): the kernel opens no file
    through it, whatever is at `rc`."""
    return raw.endswith("/") or raw.rsplit("/", 1)[-1] in (".", "..")


def dotdot_after_link(raw: str, links: Container[str], is_folder: Callable[[str], bool] = lambda _: True) -> bool:
    """Whether a link's target as written (absolute, not normalized) has a `..` after a folder that is a link of
    the layer, or that the layer does not show to be a folder (`is_folder`: a lower layer's link, maybe, as
    merged-usr's /lib -> usr/lib): the kernel goes up from where that link leads, not from the folder the text
    names. A target past PATH_MAX is not resolved either (True)."""
    if len(raw.encode("utf-8", "surrogateescape")) > PATH_MAX:
        return True
    folders = [("/", False)]  # the folders the text names, each with whether it or one above it is a link
    for part in raw.split("/"):
        if part == ".." and (folders[-1][1] or (folders[-1][0] != "/" and not is_folder(folders[-1][0]))):
            return True
        if part == "..":
            folders[-1:] = folders[-1:] if len(folders) == 1 else []
        elif part not in ("", "."):
            folder = posixpath.join(folders[-1][0], part)
            folders.append((folder, folders[-1][1] or folder in links))
    return False


def cut(path: str) -> str:
    """A path as a note says it: at most SHOWN_MAX characters, the rest counted."""
    if len(path) <= SHOWN_MAX:
        return path
    return f"{path[:SHOWN_MAX]}... ({len(path) - SHOWN_MAX} more characters)"


def shown(target: str, walk: Walk) -> str:
    """A link's target as said: itself, and where its chain of links ends when that is elsewhere."""
    return cut(target) if walk.path == target else f"{cut(target)} (through links: {cut(walk.path)})"


def unread_note(kind: str, target: str, walk: Walk, reason: str, full: bool) -> str:
    """What a link at a path judged by content is said to be when its target's content was not read for it."""
    if walk.stop == "loop":
        why = "its links make a loop"
    elif walk.stop == "deep":
        why = f"it passes through more than {LINK_DEPTH} links"
    elif walk.stop == "long":
        why = f"its walk reaches a path longer than {PATH_MAX} bytes"
    elif walk.stop == "work":
        why = f"this layer's links took more than the scan's bound of {WORK_MAX} bytes of paths to follow"
    elif walk.stop == "dotdot":
        why = (
            "not judged: a `..` after a link, or after a folder this layer does not show to be one (a lower"
            " layer's link, maybe), which the scan does not resolve"
        )
    elif walk.stop == "unkept":
        why = "not judged: this layer has more links or files than the scan keeps to follow"
    elif walk.stop == "steps":
        why = f"not judged: this layer's links took more than the scan's bound of {STEPS_MAX} steps to follow"
    elif walk.stop == "dotdot-unkept":
        why = f"not judged: this layer has more than {FOLLOWED_MAX} links with a `..`, more than the scan keeps"
    elif walk.stop == "hard-symlink":
        why = (
            "not judged: a hard link to a symbolic link, or to a path this layer holds no file at when the link is"
            " made (one reached through a link of this or a lower layer), which the scan does not follow"
        )
    elif walk.stop == "hard-self":
        why = (
            f"not judged: {cut(walk.path)} on its way is a hard link to its own path, which the engine cannot make"
            " (it removes the path first)"
        )
    elif walk.stop == "absent":
        why = "no file of this layer is there"
        if full:
            why += "; this layer had more links or files than the scan keeps to follow"
    else:
        why = f"the file was not searched: {reason}"
    return f"{kind} to {shown(target, walk)}: its content was not judged through the link ({why})"
