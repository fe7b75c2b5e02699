"""`kb sync` and `kb check`: read each index's torch, torchvision and torchaudio (pages, then PEP 658 metadata
of one wheel per build and platform: no wheel is downloaded), derive the facts, and compare them with
compat.yaml. An index that does not answer is said and its facts are not read: nothing is removed."""

from __future__ import annotations

import datetime
import hashlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torchimages.kb import derive, pages
from torchimages.kb.diff import Change, changes
from torchimages.kb.index import Client, IndexProblem, NotServed
from torchimages.kb.pages import Link, Metadata, PageError, Wheel

DEFAULT_INDEX = "https://pypi.org/simple"
COMPANIONS = ("torchvision", "torchaudio")
MAX_PAGE_BYTES = 32 * 1024 * 1024  # PyPI's torch page is about 1 MiB
MAX_METADATA_BYTES = 4 * 1024 * 1024  # torch's METADATA is tens of KiB (its description included)
# A wheel read whole where the index serves no .metadata file: one of metadata only, as a test or a mirror makes
# (no torch, torchvision or torchaudio wheel is near this: torchaudio's smallest are about 1 MiB, torch's 100s of MiB).
MAX_WHEEL_BYTES = 64 * 1024
MAX_COMPANION_READS = 30  # companion versions read per index, newest first
MAX_TRIES = 3  # wheels of one build and platform whose metadata is asked for before giving up on it
MAX_MISSES = 8  # companion versions in a row without metadata before the rest are left unread
DEADLINE_S = 300.0


@dataclass(frozen=True)
class Reading:
    """What one index gave: torch builds, companions' metadata, the notes (skipped files, pages not served),
    and the problem that stopped it (None: it answered)."""

    index: str
    builds: tuple[derive.Build, ...] = ()
    listed: tuple[Wheel, ...] = ()  # the torch wheels its page names (of the releases read)
    companions: dict[str, tuple[Metadata, ...]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    problem: str | None = None


@dataclass(frozen=True)
class Result:
    """Every index's reading, the changes to the knowledge base, the tag they add, the requests and seconds."""

    readings: tuple[Reading, ...]
    changes: tuple[Change, ...]
    tag: str
    requests: int
    seconds: float

    @property
    def unanswered(self) -> tuple[Reading, ...]:
        """The indexes that did not answer (their facts are not read)."""
        return tuple(r for r in self.readings if r.problem is not None)


def source_tag(indexes: Iterable[str], day: datetime.date) -> tuple[str, str]:
    """The `sources` key and text of facts read from `indexes` on `day`."""
    urls = sorted(set(indexes))
    suffix = "" if urls == [DEFAULT_INDEX] else "-" + hashlib.sha256(" ".join(urls).encode()).hexdigest()[:4].upper()
    text = (
        f"Requires-Dist and file names of torch, torchvision and torchaudio wheels (PEP 658 metadata, no wheel "
        f"downloaded) served by {', '.join(urls)}, read by `torchimages kb sync` on {day.isoformat()}"
    )
    return f"KB{day.strftime('%Y%m%d')}{suffix}", text


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _stable(version: str) -> bool:
    try:
        parsed = Version(version)
    except InvalidVersion:
        return False
    return not (parsed.is_prerelease or parsed.is_devrelease)


def _page(client: Client, index: str, project: str) -> tuple[Link, ...]:
    url = f"{index.rstrip('/')}/{project}/"
    answer = client.get(url, pages.ACCEPT, MAX_PAGE_BYTES)
    try:
        return pages.project_page(answer.body, answer.content_type, answer.url)
    except PageError as exc:
        raise IndexProblem(f"{url}: {exc}") from None


def _metadata(client: Client, link: Link) -> Metadata:
    """The core metadata of one wheel (its sha256 checked where the page gives it)."""
    url = link.url + ".metadata"
    body = client.get(url, "*/*", MAX_METADATA_BYTES).body
    if link.metadata_sha256 and hashlib.sha256(body).hexdigest() != link.metadata_sha256:
        raise IndexProblem(f"{url}: its sha256 is not the one the index's page gives")
    try:
        return pages.metadata(body)
    except PageError as exc:
        raise IndexProblem(f"{url}: {exc}") from None


def _candidates(links: list[tuple[Link, Wheel]]) -> list[tuple[Link, Wheel]]:
    """The wheels whose metadata may stand for their group (cp311 first, those whose metadata the page says is
    served before the others), each with the group's Pythons."""

    def rank(item: tuple[Link, Wheel]) -> tuple[bool, bool, bool, str]:
        link, wheel = item
        return (link.metadata is False, link.metadata is not True, "3.11" not in wheel.pythons, link.filename)

    pythons = tuple(sorted({p for _, w in links for p in w.pythons}, key=derive.version_key))
    return [(link, replace(wheel, pythons=pythons)) for link, wheel in sorted(links, key=rank)[:MAX_TRIES]]


Group = list[tuple[Link, Wheel]]  # the wheels of one version and platform


def _groups(links: Iterable[Link], project: str, wanted: Callable[[Wheel], bool]) -> dict[tuple[str, str], Group]:
    """The project's Linux wheels, by (version, platform)."""
    out: dict[tuple[str, str], Group] = {}
    for link in links:
        wheel = pages.wheel(link.filename)
        if wheel is None or link.yanked or wheel.project != project or not wheel.platforms or not wanted(wheel):
            continue
        for platform in wheel.platforms:
            out.setdefault((wheel.version, platform), []).append((link, replace(wheel, platforms=(platform,))))
    return out


def _wheel_metadata(client: Client, link: Link) -> Metadata:
    """The metadata inside a small wheel, read whole (its sha256 checked where the page gives it)."""
    if link.size is not None and link.size > MAX_WHEEL_BYTES:
        raise IndexProblem(f"{link.url}: the wheel is {link.size} bytes: only its metadata is read, never it")
    body = client.get(link.url, "*/*", MAX_WHEEL_BYTES).body
    if link.sha256 and hashlib.sha256(body).hexdigest() != link.sha256:
        raise IndexProblem(f"{link.url}: its sha256 is not the one the index's page gives")
    try:
        return pages.wheel_metadata(body, MAX_METADATA_BYTES)
    except PageError as exc:
        raise IndexProblem(f"{link.url}: {exc}") from None


def _first_metadata(client: Client, group: Group, notes: list[str]) -> tuple[Link, Wheel, Metadata] | None:
    """The metadata of the first of the group's candidates that has it served and readable: its `.metadata` file
    (PEP 658), else, for a small wheel, the wheel's own (a note when none is)."""
    tried = []
    for link, wheel in _candidates(group):
        try:
            try:
                if link.metadata is False:
                    raise NotServed(f"{link.url}: the page says no metadata file is served")
                meta = _metadata(client, link)
            except NotServed:
                meta = _wheel_metadata(client, link)
            if canonicalize_name(meta.name) != wheel.project or _version(meta.version) != _version(wheel.version):
                tried.append(f"{link.filename}: its metadata is of {meta.name} {meta.version}")
                continue
            return link, wheel, meta
        except IndexProblem as exc:
            if client.deadline.expired:
                raise
            tried.append(str(exc))
    if tried:
        notes.append(f"not read: {'; '.join(tried)}")
    return None


def read_index(client: Client, index: str, oldest: str, release: str | None) -> Reading:
    """One index's torch builds from `oldest` (a minor) on, or of `release` alone (the names of its minor's other
    patches count: patches, Pythons), and the companions that pin them; a page or file it does not serve is a
    note, an index that does not answer is the reading's problem."""
    notes: list[str] = []
    try:
        torch_links = _page(client, index, "torch")
    except NotServed:
        return Reading(index, notes=(f"{index}: serves no torch",))
    except IndexProblem as exc:
        return Reading(index, problem=str(exc))

    def named(wheel: Wheel) -> bool:  # the wheels whose names count: every patch of the minors read
        minor = derive.version_key(derive.minor_of(wheel.public))
        if release is not None:
            return _stable(wheel.public) and minor == derive.version_key(derive.minor_of(release))
        return _stable(wheel.public) and minor >= derive.version_key(oldest)

    builds: list[derive.Build] = []
    listed = tuple(wheel for group in _groups(torch_links, "torch", named).values() for _link, wheel in group)
    groups = _groups(torch_links, "torch", lambda w: named(w) and (release is None or w.public == release))
    try:
        for _key, group in sorted(groups.items()):
            read = _first_metadata(client, group, notes)
            if read is not None:
                link, wheel, meta = read
                builds += derive.builds(wheel, meta, link.url + ".metadata")
                notes += [f"{link.url}.metadata: Requires-Dist {bad!r} does not parse: skipped" for bad in meta.bad]
        floor = min((w.public for w in listed), key=derive.version_key, default=None) if builds else None
        companions = {p: _companions(client, index, p, floor, notes) for p in COMPANIONS} if floor else {}
    except IndexProblem as exc:
        return Reading(index, tuple(builds), listed, notes=tuple(notes), problem=str(exc))
    return Reading(index, tuple(builds), listed, companions, tuple(notes))


def _companions(client: Client, index: str, project: str, floor: str, notes: list[str]) -> tuple[Metadata, ...]:
    """The project's releases, newest first, down to the first that pins a torch older than `floor`."""
    try:
        links = _page(client, index, project)
    except NotServed:
        notes.append(f"{index}: serves no {project}")
        return ()
    except IndexProblem as exc:  # the torch facts stand without the pairs
        if client.deadline.expired:
            raise
        notes.append(f"{exc}: no {project} pairs read")
        return ()
    groups = _groups(links, project, lambda w: _stable(w.public))
    by_version: dict[str, list[tuple[Link, Wheel]]] = {}
    for (version, _platform), group in groups.items():
        by_version.setdefault(version, []).extend(group)
    found: list[Metadata] = []
    misses = 0
    for version in sorted(by_version, key=lambda v: Version(v), reverse=True)[:MAX_COMPANION_READS]:
        read = _first_metadata(client, by_version[version], notes)
        if read is None:
            misses += 1
            if misses == MAX_MISSES:
                notes.append(
                    f"{index}: {project}: {MAX_MISSES} versions in a row without metadata, older ones not read"
                )
                break
            continue
        misses = 0
        meta = read[2]
        found.append(meta)
        pinned = derive.companion_pin(meta)
        if pinned is not None and derive.version_key(pinned) < derive.version_key(floor):
            break
    return tuple(found)


def sync(
    kb: dict[str, Any],
    indexes: Iterable[str],
    release: str | None = None,
    deadline_s: float = DEADLINE_S,
    day: datetime.date | None = None,
) -> Result:
    """Read every index and compare what they serve with the knowledge base's document `kb`."""
    started = time.monotonic()
    urls = list(dict.fromkeys(indexes)) or [DEFAULT_INDEX]
    client = Client(deadline_s)
    oldest = min((str(m) for m in kb.get("torch") or {}), key=derive.version_key, default="0.0")
    readings = tuple(read_index(client, url, oldest, release) for url in urls)
    builds = [b for r in readings for b in r.builds]
    found = derive.releases(builds, (w for r in readings for w in r.listed))
    pairs = {p: derive.pairs(m for r in readings for m in r.companions.get(p, ())) for p in COMPANIONS}
    answered = [r.index for r in readings if r.problem is None]
    tag, text = source_tag(answered or urls, day or datetime.datetime.now(datetime.UTC).date())
    return Result(readings, changes(kb, found, pairs, tag, text), tag, client.requests, time.monotonic() - started)
