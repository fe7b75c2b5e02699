"""`kb sync` and `kb check`: read each index's torch, torchvision and torchaudio (pages, then PEP 658 metadata
of one wheel per build and platform: no wheel is downloaded; where no metadata file is served, the wheel's
METADATA by range requests (ranged.py), else on pypi.org PyPI's JSON API of that version), derive the facts, and
compare them with compat.yaml. An index that does not answer is said and its facts are not read: nothing is
removed."""

from __future__ import annotations

import datetime
import hashlib
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torchimages import values
from torchimages.compat import minor_of
from torchimages.kb import derive, pages, ranged
from torchimages.kb.diff import Change, changes
from torchimages.kb.index import Client, IndexProblem, NotServed, TooBig, _shown
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
MAX_MISSES = 8  # companion versions in a row without metadata before the rest are left unread (not with --release)
PYPI_HOST = "pypi.org"
PYPI_JSON = "https://pypi.org/pypi"  # PyPI's JSON API: <project>/<version>/json
DEADLINE_S = 300.0


class NoMetadata(IndexProblem):
    """The index serves no metadata of that wheel: no `.metadata` file, and the wheel is too big to read."""


@dataclass(frozen=True)
class Miss:
    """A wheel (one version and platform) whose metadata was not read: its project, why (a short phrase said
    after "N wheels"), the file name of the first tried, and the whole detail (each URL tried and why)."""

    project: str
    reason: str
    filename: str
    detail: str


NO_METADATA = "without a metadata file"
UNREADABLE = "whose metadata could not be read"
ANOTHER = "whose metadata names another project or version"
INCONSISTENT = "whose metadata is refused as inconsistent"


def condensed(index: str, misses: Iterable[Miss]) -> tuple[str, ...]:
    """One note per project and reason: how many wheels, one file name (the first) for an example."""
    by: dict[tuple[str, str], list[Miss]] = {}
    for miss in misses:
        by.setdefault((miss.project, miss.reason), []).append(miss)
    return tuple(
        f"{_shown(index)}: {project}: {len(found)} wheel{'' if len(found) == 1 else 's'} {reason} "
        f"(e.g. {found[0].filename}): not read"
        for (project, reason), found in by.items()
    )


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
    misses: tuple[Miss, ...] = ()  # the wheels whose metadata was not read (condensed(): the notes said)
    json_api: int = 0  # how many versions' metadata came from PyPI's JSON API
    ranged: int = 0  # how many wheels' METADATA was read by range requests
    served: bool = True  # whether it serves a torch page (False: HTTP 404, such as a mistyped index URL)


@dataclass(frozen=True)
class Result:
    """Every index's reading, the changes to the knowledge base, the tag they add, the requests and seconds."""

    readings: tuple[Reading, ...]
    changes: tuple[Change, ...]
    tag: str
    requests: int
    seconds: float
    refused: str | None = None  # why the facts read are refused (indexes that disagree): no change is said
    unread: tuple[str, ...] = ()  # what no index gave facts of (an index, a release): `kb check` cannot tell

    @property
    def unanswered(self) -> tuple[Reading, ...]:
        """The indexes that did not answer (their facts are not read)."""
        return tuple(r for r in self.readings if r.problem is not None)


def source_tag(
    indexes: Iterable[str], day: datetime.date, json_api: bool = False, ranges: bool = False
) -> tuple[str, str]:
    """The `sources` key and text of facts read from `indexes` on `day` (`json_api`: some from PyPI's JSON API,
    `ranges`: some from wheels read by range requests)."""
    urls = sorted({values.mirror_without_login(url) for url in indexes})  # an index's login is never written
    suffix = "" if urls == [DEFAULT_INDEX] else "-" + hashlib.sha256(" ".join(urls).encode()).hexdigest()[:4].upper()
    how = "PEP 658 metadata"
    if ranges:
        how += f", or the wheel's METADATA by HTTP range requests where no metadata file is served ({ranged.SAID})"
    if json_api:
        how += f", or PyPI's JSON API ({PYPI_JSON}/<project>/<version>/json) where pypi.org serves no metadata file"
    text = (
        f"Requires-Dist and file names of torch, torchvision and torchaudio wheels ({how}; a wheel downloaded "
        f"whole only where it is at most 64 KiB) served by {', '.join(urls)}, read by `torchimages kb sync` on "
        f"{day.isoformat()}"
    )
    return f"KB{day.strftime('%Y%m%d')}{suffix}", text


def free_tag(sources: Mapping[str, Any], tag: str, text: str) -> str:
    """`tag`, unless the file's sources hold it with another text (the same day's read of the same indexes done
    another way): then the first of `tag-2`, `tag-3`, ... that is free or holds `text`. A fact never cites a
    source that says how another read was made."""
    candidate, n = tag, 1
    while candidate in sources and sources[candidate] != text:
        n += 1
        candidate = f"{tag}-{n}"
    return candidate


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _page(client: Client, index: str, project: str) -> tuple[Link, ...]:
    url = f"{index.rstrip('/')}/{project}/"
    answer = client.get(url, pages.ACCEPT, MAX_PAGE_BYTES)
    try:
        return pages.project_page(answer.body, answer.content_type, answer.url)
    except PageError as exc:
        raise IndexProblem(f"{_shown(url)}: {exc}") from None


def _metadata(client: Client, link: Link) -> Metadata:
    """The core metadata of one wheel (its sha256 checked where the page gives it)."""
    url = link.url + ".metadata"
    body = client.get(url, "*/*", MAX_METADATA_BYTES).body
    if link.metadata_sha256 and hashlib.sha256(body).hexdigest() != link.metadata_sha256:
        raise IndexProblem(f"{_shown(url)}: its sha256 is not the one the index's page gives")
    try:
        return pages.metadata(body)
    except PageError as exc:
        raise IndexProblem(f"{_shown(url)}: {exc}") from None


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
        raise NoMetadata(f"{_shown(link.url)}: the wheel is {link.size} bytes: only its metadata is read, never it")
    try:
        body = client.get(link.url, "*/*", MAX_WHEEL_BYTES).body
    except TooBig as exc:  # a page that gives no size: the wheel is read by ranges instead, never whole
        raise NoMetadata(str(exc)) from None
    if link.sha256 and hashlib.sha256(body).hexdigest() != link.sha256:
        raise IndexProblem(f"{_shown(link.url)}: its sha256 is not the one the index's page gives")
    try:
        return pages.wheel_metadata(body, MAX_METADATA_BYTES)
    except PageError as exc:
        raise IndexProblem(f"{_shown(link.url)}: {exc}") from None


@dataclass
class Asking:
    """What one index's reading shares: the client, PyPI's JSON API (None: not pypi.org), its answers by
    project and version, and the wheels not read."""

    client: Client
    json_api: str | None = None
    answers: dict[tuple[str, str], pages.Release | IndexProblem] = field(default_factory=dict)
    misses: list[Miss] = field(default_factory=list)
    ranged: int = 0  # wheels whose METADATA was read by range requests


def json_api_of(index: str) -> str | None:
    """PyPI's JSON API for an index on pypi.org (None: another host, which has none)."""
    return PYPI_JSON if urllib.parse.urlsplit(index).hostname == PYPI_HOST else None


def _json_metadata(asking: Asking, base: str, wheel: Wheel, filename: str) -> tuple[Metadata, str]:
    """The metadata PyPI's JSON API gives of the wheel's version (asked once per version), and its URL."""
    url = f"{base}/{wheel.project}/{wheel.version}/json"
    key = (wheel.project, wheel.version)
    if key not in asking.answers:
        try:
            answer = asking.client.get(url, "application/json", MAX_METADATA_BYTES)
            asking.answers[key] = pages.json_release(answer.body)
        except PageError as exc:
            asking.answers[key] = IndexProblem(f"{_shown(url)}: {exc}")
        except NotServed:
            asking.answers[key] = NoMetadata(f"{_shown(url)}: not served (HTTP 404)")
        except IndexProblem as exc:
            asking.answers[key] = exc
    found = asking.answers[key]
    if isinstance(found, IndexProblem):
        raise found
    if filename not in found.files:
        raise IndexProblem(f"{_shown(url)}: it lists no file {filename}")
    return found.metadata, _shown(url)


def _first_metadata(asking: Asking, group: Group) -> tuple[Link, Wheel, Metadata, str] | None:
    """The metadata of the first of the group's candidates that has it served and readable (with where it came
    from): its `.metadata` file (PEP 658), else, for a small wheel, the wheel's own, else its METADATA by range
    requests, else, on pypi.org, PyPI's JSON API of its version (a Miss when none is)."""
    tried, reason = [], NO_METADATA
    for link, wheel in _candidates(group):
        try:
            source = _shown(link.url) + ".metadata"  # where a fact is said to come from: never with a login
            try:
                if link.metadata is False:
                    raise NotServed(f"{_shown(link.url)}: the page says no metadata file is served")
                meta = _metadata(asking.client, link)
            except NotServed:
                source = _shown(link.url)
                try:
                    meta = _wheel_metadata(asking.client, link)
                except NoMetadata:
                    try:  # the wheel's METADATA by range requests, else PyPI's JSON API
                        meta = ranged.wheel_metadata(asking.client, link.url, link.size)
                        source = ranged.source(link.url)
                        asking.ranged += 1
                    except IndexProblem as exc:
                        if asking.json_api is None:
                            raise NoMetadata(str(exc)) if ranged.unserved(exc) else exc from None
                        meta, source = _json_metadata(asking, asking.json_api, wheel, link.filename)
            if canonicalize_name(meta.name) != wheel.project or _version(meta.version) != _version(wheel.version):
                tried.append(f"{link.filename}: its metadata is of {meta.name} {meta.version}")
                reason = ANOTHER
                continue
            if meta.bad:  # a requirement not known is not one absent: the wheel is unread (never a cpu build)
                raise IndexProblem(f"{source}: Requires-Dist {meta.bad[0]!r} does not parse")
            return link, wheel, meta, source
        except IndexProblem as exc:
            if asking.client.deadline.expired:
                raise
            tried.append(str(exc))
            reason = NO_METADATA if isinstance(exc, NoMetadata) else UNREADABLE
    if tried:
        first = group[0][1]
        name = _candidates(group)[0][0].filename
        asking.misses.append(Miss(first.project, reason, name, "; ".join(tried)))
    return None


def read_index(client: Client, index: str, oldest: str, release: str | None, json_api: str | None = None) -> Reading:
    """One index's torch builds from `oldest` (a minor) on, or of `release` alone (the names of its minor's other
    patches count: patches, Pythons), and the companions that pin them; a page or file it does not serve is a
    note (a Miss for a wheel), an index that does not answer is the reading's problem. `json_api`: PyPI's JSON
    API, asked where a wheel has no metadata file."""
    notes: list[str] = []
    asking = Asking(client, json_api)
    try:
        torch_links = _page(client, index, "torch")
    except NotServed:
        return Reading(index, notes=(f"{_shown(index)}: serves no torch",), served=False)
    except IndexProblem as exc:
        return Reading(index, problem=str(exc))

    def named(wheel: Wheel) -> bool:  # the wheels whose names count: every patch of the minors read
        minor = derive.version_key(minor_of(wheel.public))
        if release is not None:
            return derive.final(wheel.public) and minor == derive.version_key(minor_of(release))
        return derive.final(wheel.public) and minor >= derive.version_key(oldest)

    def reading(
        builds: list[derive.Build], companions: dict[str, tuple[Metadata, ...]], problem: str | None
    ) -> Reading:
        json_read = sum(1 for found in asking.answers.values() if isinstance(found, pages.Release))
        misses = tuple(asking.misses)
        return Reading(
            index, tuple(builds), listed, companions, tuple(notes), problem, misses, json_read, asking.ranged
        )

    builds: list[derive.Build] = []
    listed = tuple(wheel for group in _groups(torch_links, "torch", named).values() for _link, wheel in group)
    groups = _groups(torch_links, "torch", lambda w: named(w) and (release is None or w.public == release))
    try:
        for _key, group in sorted(groups.items()):
            read = _first_metadata(asking, group)
            if read is not None:
                link, wheel, meta, source = read
                try:
                    builds += derive.builds(wheel, meta, source, _shown(index))
                except derive.Refused as exc:
                    reason = INCONSISTENT if isinstance(exc, derive.Inconsistent) else UNREADABLE
                    asking.misses.append(Miss("torch", reason, link.filename, f"{source}: {exc}"))
        floor = min((w.public for w in listed), key=derive.version_key, default=None) if builds else None
        limit = MAX_MISSES if release is None else None
        companions = {p: _companions(asking, index, p, floor, limit, notes) for p in COMPANIONS} if floor else {}
    except IndexProblem as exc:
        return reading(builds, {}, str(exc))
    return reading(builds, companions, None)


def _companions(
    asking: Asking, index: str, project: str, floor: str, limit: int | None, notes: list[str]
) -> tuple[Metadata, ...]:
    """The project's releases, newest first, down to the first that pins a torch older than `floor`, at most
    MAX_COMPANION_READS, and (`limit`, None: no such limit) stopping after that many in a row without metadata."""
    try:
        links = _page(asking.client, index, project)
    except NotServed:
        notes.append(f"{_shown(index)}: serves no {project}")
        return ()
    except IndexProblem as exc:  # the torch facts stand without the pairs
        if asking.client.deadline.expired:
            raise
        notes.append(f"{exc}: no {project} pairs read")
        return ()
    groups = _groups(links, project, lambda w: derive.final(w.public))
    by_version: dict[str, list[tuple[Link, Wheel]]] = {}
    for (version, _platform), group in groups.items():
        by_version.setdefault(version, []).extend(group)
    found: list[Metadata] = []
    misses = 0
    for version in sorted(by_version, key=lambda v: Version(v), reverse=True)[:MAX_COMPANION_READS]:
        read = _first_metadata(asking, by_version[version])
        if read is None:
            misses += 1
            if misses == limit:
                notes.append(
                    f"{_shown(index)}: {project}: {limit} versions in a row without metadata, older ones not read"
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
    readings = tuple(read_index(client, url, oldest, release, json_api_of(url)) for url in urls)
    builds = [b for r in readings for b in r.builds]
    answered = [r.index for r in readings if r.problem is None]
    json_api = any(r.json_api for r in readings)
    ranges = any(r.ranged for r in readings)
    tag, text = source_tag(answered or urls, day or datetime.datetime.now(datetime.UTC).date(), json_api, ranges)
    tag = free_tag(kb.get("sources") or {}, tag, text)
    unread = unread_facts(readings, [str(m) for m in kb.get("torch") or {}], release)
    try:
        found = derive.releases(builds, (w for r in readings for w in r.listed))
    except derive.Refused as exc:
        return Result(readings, (), tag, client.requests, time.monotonic() - started, str(exc), unread)
    pairs = {p: derive.pairs(m for r in readings for m in r.companions.get(p, ())) for p in COMPANIONS}
    found_changes = changes(kb, found, pairs, tag, text)
    return Result(readings, found_changes, tag, client.requests, time.monotonic() - started, None, unread)


def unread_facts(readings: Iterable[Reading], minors: Iterable[str], release: str | None) -> tuple[str, ...]:
    """What no torch facts were read of, one line each: an index that answered but serves no torch page (a
    mistyped URL), each index that lists wheels of `release` (else of a minor of the knowledge base's `minors`)
    but gave no build of it, each index with torch wheels whose metadata was not read (a release read in part),
    and what no index lists a wheel of."""
    readings = tuple(readings)

    def key(version: str) -> str:
        return version if release is not None else minor_of(version)

    wanted = {release} if release is not None else set(minors)
    out = [f"{_shown(r.index)}: serves no torch page" for r in readings if r.problem is None and not r.served]
    listed_anywhere: set[str] = set()
    for r in readings:
        listed = {key(w.public) for w in r.listed} & wanted
        listed_anywhere |= listed
        missing = sorted(listed - {key(b.version) for b in r.builds}, key=derive.version_key)
        if missing:
            out.append(f"{_shown(r.index)}: no build of torch {', '.join(missing)} read, though it lists wheels of it")
    for r in readings:  # a release read in part is not read: "agrees" would speak of wheels never read
        torch = [m for m in r.misses if m.project == "torch"]
        if torch:
            many = "wheel" if len(torch) == 1 else "wheels"
            out.append(
                f"{_shown(r.index)}: {len(torch)} torch {many} not read (e.g. {torch[0].filename}: {torch[0].reason})"
            )
    unlisted = sorted(wanted - listed_anywhere, key=derive.version_key)
    if unlisted:
        out.append(f"no index lists a wheel of torch {', '.join(unlisted)}")
    return tuple(out)
