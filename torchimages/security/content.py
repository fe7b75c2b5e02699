"""One file's whole content searched as it streams past (leaks.py's content rules): a private key, the build's
secrets and their logins, a credentials file's mark. The content comes in chunks; each is searched with the
last bytes of the one before (the overlap: at least leaks.MATCH_MAX, and the longest needle), so what is split
between two chunks is still found, and memory stays one chunk and the overlap whatever the file's size. The
byte before the overlap is kept too, and the search starts after it: a mark anchored at a line's start (`^`)
matches where the overlap starts only where a line does (after a newline), never mid-line. A key
is judged with what follows it (to know a published one), so one that starts in the overlap is judged with
the next chunk, or at the file's end.

The marks a link is judged by (leaks.LINK_MARKS: a login in a shell's startup file, a wgetrc, a curlrc, a condarc)
are searched only in a file that can be such a configuration: at most LINK_READ_MAX bytes, no NUL byte (a
binary); each part of a mark only where its literals are (leaks.LINK_PARTS). Why a file was not searched for
them is kept (`Facts.unread`): a link to it at a path judged by content says that its target was not read."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from torchimages.security.leaks import LINK_PARTS, LINK_READ_MAX, MATCH_MAX, MarkPart, Secret, private_key


@dataclass(frozen=True)
class Facts:
    """What one file's content holds: the private key's mark (whatever its path), what of the build's secrets
    (`the content of pip.conf`, `a login from uv.toml`), whether the path's credentials mark was found."""

    key: str | None = None
    secrets: tuple[str, ...] = ()
    marked: bool = False
    linked: frozenset[bytes] = frozenset()  # the marks of LINK_MARKS found (their patterns): a link's rule's
    unread: str = ""  # why the content was not searched for LINK_MARKS ("": it was); not a fact by itself

    def __bool__(self) -> bool:
        return bool(self.key or self.secrets or self.marked or self.linked)

    def holds(self, mark: re.Pattern[bytes] | None) -> bool:
        """Whether the content matches `mark`, one of LINK_MARKS (what a link to this file at a path judged by
        its content is judged by)."""
        return mark is not None and mark.pattern in self.linked


TOKEN_LONG = 4096  # bytes: past this without a blank after a `://`, the rest of the text is searched at once
_BLANK = re.compile(rb"\s")


def found(part: MarkPart, data: bytes, view: bytes, pos: int = 0) -> bool:
    """Whether `part.pattern` matches in `data` from `pos` (the bytes before it are context: a `^` matches at
    `pos` only after a newline), searched where the part says (leaks.MarkPart.locate); `view` is `data` as the
    part's literals are looked for (the same length for "line")."""
    if part.locate == "line":
        return _in_lines(part, data, view, pos)
    if part.locate == "url":
        return _around_schemes(part.pattern, data, pos)
    return part.pattern.search(data, pos) is not None


def _in_lines(part: MarkPart, data: bytes, view: bytes, pos: int = 0) -> bool:
    """A pattern of one line anchored at a line's start, searched in each line where a literal of the part's
    first group is (a line without one cannot match), from `pos`."""
    for literal in part.needs[0]:
        at = view.find(literal, pos)
        while at >= 0:
            start = max(pos, data.rfind(b"\n", 0, at) + 1)
            end = data.find(b"\n", at)
            end = len(data) if end < 0 else end
            if part.pattern.search(data, start, end) is not None:
                return True
            at = view.find(literal, end)
    return False


def _around_schemes(pattern: re.Pattern[bytes], data: bytes, pos: int = 0) -> bool:
    """leaks.USERINFO's shape (a scheme of at most 257 characters, `://`, a login and host without a blank,
    one `://` in a match), searched around each `://`: from 258 bytes before it to the blank after it (a
    match ends before it; its lookahead ends there), or, past TOKEN_LONG bytes without one, to the end; from
    `pos`."""
    at = data.find(b"://", pos)
    while at >= 0:
        start = max(pos, at - 258)
        blank = _BLANK.search(data, at, at + TOKEN_LONG)
        if blank is None:
            return pattern.search(data, start) is not None
        if pattern.search(data, start, blank.end()) is not None:
            return True
        at = data.find(b"://", blank.end())
    return False


class Search:
    """Feed a file's content in order (`feed`), then ask what it holds (`facts`)."""

    def __init__(self, secrets: Sequence[Secret], mark: re.Pattern[bytes] | None, size: int) -> None:
        self.mark = mark
        self.needles = [(needle, f"{what} the build's secret {s.name}") for s in secrets for needle, what in s.needles]
        self.whole = [s for s in secrets if s.size == size]  # a file as large as a secret: compared whole
        self.hashed = hashlib.sha256() if self.whole else None
        self.overlap = max([MATCH_MAX, *(len(needle) for needle, _ in self.needles)])
        self.tail = b""
        self.fed = 0  # bytes of the file fed so far
        self.key: str | None = None
        self.found: dict[str, None] = {}
        self.marked = False
        self.linked: dict[bytes, None] = {}
        self.unread = "" if size <= LINK_READ_MAX else f"it is larger than {LINK_READ_MAX >> 20} MiB"

    def feed(self, chunk: bytes) -> None:
        if self.hashed is not None:
            self.hashed.update(chunk)
        data = self.tail + chunk if self.tail else chunk
        pos = 1 if self.fed > len(self.tail) else 0  # data[0] is the byte before the overlap, context only
        self.fed += len(chunk)
        if self.key is None:  # a key starting in the overlap is judged with the next chunk, or at the end
            self.key = private_key(data, len(data) - self.overlap)
        if self.mark is not None and not self.marked:
            self.marked = self.mark.search(data, pos) is not None
        if not self.unread and b"\0" in chunk:
            self.unread, self.linked = "it is a binary file (a NUL byte)", {}
        if not self.unread:
            self.link_marks(data, pos)
        for needle, what in self.needles:
            if what not in self.found and needle in data:
                self.found[what] = None
        self.tail = data[-(self.overlap + 1) :]

    def link_marks(self, data: bytes, pos: int = 0) -> None:
        """Search `data` from `pos` for the link marks not yet found, each part where its literals are."""
        views = {"raw": data}
        held: dict[tuple[str, bytes], bool] = {}  # each literal looked for once in each view
        searched: dict[re.Pattern[bytes], bool] = {}  # a part shared by marks (a URL's login) searched once

        def holds(view: str, literal: bytes) -> bool:
            if len(literal) == 1 and literal == literal.lower().translate(None, b"-_"):
                view = "raw"  # one byte that no view changes: in each view where it is in the text
            if (view, literal) not in held:
                if view not in views:
                    lower = views.setdefault("lower", data.lower())
                    if view == "folded":
                        views["folded"] = lower.translate(None, b"-_")
                held[view, literal] = literal in views[view]
            return held[view, literal]

        for pattern, parts in LINK_PARTS.items():
            if pattern in self.linked:
                continue
            for part in parts:
                if not all(any(holds(part.view, literal) for literal in group) for group in part.needs):
                    continue
                text = views[part.view]
                if part.pattern not in searched:
                    searched[part.pattern] = found(part, data, text, pos)
                if searched[part.pattern]:
                    self.linked[pattern] = None
                    break

    def facts(self) -> Facts:
        if self.key is None:
            self.key = private_key(self.tail)
        if self.hashed is not None:
            digest = self.hashed.hexdigest()
            for secret in self.whole:
                if secret.sha256 == digest:
                    self.found.setdefault(f"the content of the build's secret {secret.name}", None)
        whole = {what.removeprefix("the content of") for what in self.found if what.startswith("the content of")}
        said = tuple(
            w for w in self.found if not (w.startswith("a login from") and w.removeprefix("a login from") in whole)
        )
        return Facts(self.key, said, self.marked, frozenset(self.linked), self.unread)
