"""The security entries of an image's apt sources, copied for a refresh of the security suite's lists only.

apt says which entry of which file names each package index (`apt-get indextargets`, `$(SOURCESENTRY)`:
`FILE:N`, the N-th line of a one-line file, the N-th stanza of a deb822 `.sources` file). The entries whose
suite is a security one are copied verbatim (their options: `[signed-by=... arch=...]`, `Signed-By:` with
an inline key, `Trusted:`), a deb822 stanza's `Suites:` narrowed to its security suites. Where an entry
cannot be copied faithfully (a file apt read but the look did not, a folded `Suites:` field, a control
character) there is no copy, and the reason; the container also checks that the copy names exactly the
security indexes the image's own sources name before it is used (os_updates.SCRIPT).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

MAX_COPY_BYTES = 32768  # the copy travels in the script (one argument of `docker run`)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_ENTRY = re.compile(r"^(\S+) (.+):(\d+) (\S.*)$")  # `noble-security /etc/apt/sources.list:7 http://... Packages`
_SUITES = re.compile(r"^suites:(.*)$", re.IGNORECASE)


@dataclass(frozen=True)
class Target:
    """A package index the sources name: its suite, the entry naming it (file, number), apt's description."""

    suite: str
    path: str
    number: int
    description: str


@dataclass(frozen=True)
class Copy:
    """The security entries copied: one-line entries, deb822 stanzas, and the indexes they must name
    (`SUITE DESCRIPTION` lines, as `$(RELEASE) $(DESCRIPTION)` prints them). `why` says why there is none."""

    one_line: tuple[str, ...] = ()
    deb822: tuple[str, ...] = ()
    expected: tuple[str, ...] = ()
    why: str = ""

    @property
    def usable(self) -> bool:
        return not self.why and bool(self.expected)


def is_security(suite: str, codename_suite: str) -> bool:
    """Whether an entry's suite is a security one (`bookworm-security`, `stable-security`)."""
    return suite == codename_suite or suite.endswith("-security")


def sourced_targets(text: str) -> list[Target]:
    """`apt-get indextargets --format '$(RELEASE) $(SOURCESENTRY) $(DESCRIPTION)'`: the Packages indexes,
    each with its entry; a line of another shape (apt's warnings) is left out."""
    found = []
    for line in text.split("\n"):  # apt's lines (splitlines would also split at \x85, \u2028...)
        match = _ENTRY.match(line.strip(" \t\r"))
        if match and match.group(4).endswith("Packages"):
            suite, path, number, description = match.groups()
            found.append(Target(suite, path, int(number), description))
    return found


def source_files(text: str) -> dict[str, str]:
    """The look's `source` section: `@PATH` lines, each followed by the file's lines prefixed `|` (so that no
    line of a file reads as a section of the answer)."""
    files: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.split("\n"):  # the shell's lines (splitlines would also split at \x85, \u2028...)
        if line.startswith("@"):
            current = files.setdefault(line[1:], [])
        elif line.startswith("|") and current is not None:
            current.append(line[1:])
    return {path: "\n".join(lines) for path, lines in files.items()}


def copy(targets: list[Target], files: Mapping[str, str], suite: str) -> Copy:
    """The entries of `targets` whose suite is a security one (see `is_security`), from `files` (path: text);
    a Copy with `why` where there is none to use (the refresh then reads every list)."""
    chosen = [t for t in targets if is_security(t.suite, suite)]
    if not chosen:
        return Copy(why="no entry of the sources names a -security suite by name")
    one_line: list[str] = []
    deb822: list[str] = []
    for path, number in dict.fromkeys((t.path, t.number) for t in chosen):
        text = files.get(path)
        if text is None:
            return Copy(why=f"{path} could not be read")
        entry = _stanza(text, number) if path.endswith(".sources") else _line(text, number)
        if entry is None or _CONTROL.search(entry):
            return Copy(why=f"entry {number} of {path} could not be copied")
        if path.endswith(".sources"):
            narrowed = _narrowed(entry, suite)
            if narrowed is None:
                return Copy(why=f"the Suites of entry {number} of {path} could not be narrowed")
            deb822.append(narrowed)
        else:
            one_line.append(entry)
    expected = tuple(sorted({f"{t.suite} {t.description}" for t in chosen}))
    if sum(len(e) + 1 for e in (*one_line, *deb822, *expected)) > MAX_COPY_BYTES:
        return Copy(why=f"the security entries pass {MAX_COPY_BYTES} bytes")
    return Copy(tuple(one_line), tuple(deb822), expected)


def _line(text: str, number: int) -> str | None:
    lines = text.split("\n")
    return lines[number - 1].strip() if 0 < number <= len(lines) else None


def _stanza(text: str, number: int) -> str | None:
    """The N-th stanza (1-based) of a deb822 file as apt 2.6 counts them: only an empty line (or a lone `\r`)
    ends a stanza; a whitespace-only line inside one continues it (it does not split it in two), one before a
    stanza is skipped; comment lines (`#` first) are dropped; a paragraph of comments only is not counted."""
    paragraphs: list[list[str]] = [[]]
    for line in text.split("\n"):
        if line in ("", "\r"):
            paragraphs.append([])
        elif line.startswith("#") or (not line.strip() and not paragraphs[-1]):
            continue
        else:
            paragraphs[-1].append(line)
    stanzas = [p for p in paragraphs if p]
    return "\n".join(stanzas[number - 1]) if 0 < number <= len(stanzas) else None


def _narrowed(stanza: str, suite: str) -> str | None:
    """The stanza with only its security suites in `Suites:` (apt's: the last where it is named twice, the
    others left out); None where that field is folded or missing."""
    lines = stanza.split("\n")
    at = [i for i, line in enumerate(lines) if _SUITES.match(line)]
    if not at or (at[-1] + 1 < len(lines) and lines[at[-1] + 1][:1] in (" ", "\t")):
        return None
    match = _SUITES.match(lines[at[-1]])  # a field named twice: apt reads the last (the others are left out)
    assert match is not None
    kept = [s for s in match.group(1).split() if is_security(s, suite)]
    if not kept:
        return None
    lines[at[-1]] = "Suites: " + " ".join(kept)
    return "\n".join(line for i, line in enumerate(lines) if i not in at[:-1])
