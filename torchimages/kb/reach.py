"""Does this machine reach the wheels a selection needs? Before a build starts anything: for each pinned wheel of
each selected image (torch, torchvision, torchaudio at the image's Python and platform), the sources the build
would search (the combination's own index unless `--index-url` replaces it, the extra indexes, the find-links)
are asked whether one of them lists that exact file. Every question has one deadline; an index that does not
answer, or that answers without the file, is said by name, with the ways out.

A wheel file counts where its tags install on the image's CPython (interpreter `cpXY`, `pyX` or `pyXY`; abi
`cpXY` of that very Python, `abi3` from an older one, or `none`: never a free-threaded `cp313t`) and Linux
architecture; the glibc level of a manylinux tag (`manylinux_2_99`) is not checked. A `file://` index is read as
pip reads it: its project page `<project>/index.html` where there is one (its links may point elsewhere), else the
wheel files of the project's folder.

The answer (`Findings`) is one line per group of wheels that no source serves (empty: none is known missing), and
one line per group that no source served but a source asking for a login this check does not have might serve
(not known: such a source refuses nothing, and is never said to serve)."""

from __future__ import annotations

import concurrent.futures
import functools
import os
import re
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion

from torchimages import stopping, values
from torchimages.building.wheels import WheelSources
from torchimages.kb import index, pages
from torchimages.planning.plan import Selected

DEADLINE_S = 15.0  # all the questions of one check together: an unanswering index fails the check in seconds
PAGE_LIMIT = 32 * 1024 * 1024  # PyPI's torch page is a few MB
MAX_FOLDER_ENTRIES = 200_000  # a find-links folder or a file:// project folder


@dataclass(frozen=True)
class Need:
    """One wheel a selected image installs: the project, its exact version (local label included), the Python and
    the platform, and the sources its build searches, in order."""

    project: str
    version: str
    python: str
    platform: str
    sources: tuple[str, ...]
    own_index: str  # the combination's index, searched only where no --index-url replaces it
    tags: tuple[str, ...]
    # `torch==2.14.1,!=2.14.1+cpu`: any build of the public version `version` but these (pip's reading)
    excluded: tuple[str, ...] | None = None

    @property
    def wanted(self) -> str:
        """`torch 2.7.0+cu118`, or `torch 2.14.1 (not +cpu, +cu126)`."""
        if self.excluded is None:
            return f"{self.project} {self.version}"
        labels = ", ".join("+" + v.partition("+")[2] for v in self.excluded)
        return f"{self.project} {self.version} (not {labels})" if labels else f"{self.project} {self.version}"

    def __str__(self) -> str:
        return f"{self.wanted} (Python {self.python}, {self.platform})"


@dataclass(frozen=True)
class Answer:
    """What one source said of one project: the wheel files it lists (None: it could not be asked) and why not."""

    files: tuple[str, ...] | None
    why: str = ""
    refused: bool = False  # it asks for a login the check does not have (401, 403): it cannot tell


def pinned(requirement: str) -> tuple[str, str, tuple[str, ...] | None] | None:
    """`name==version` read as (canonical name, version, None); `name==2.14.1,!=2.14.1+cpu,...` (one public
    version, some of its builds excluded: the Dockerfiles' pin where an index serves several) as (name, `2.14.1`,
    the excluded versions); None for anything else (no exact pin to look for)."""
    name, sep, rest = requirement.partition("==")
    version, *others = [part.strip() for part in rest.split(",")]
    if not sep or not name.strip() or not version or any(c in version for c in "*;=<>!~ "):
        return None
    excluded = []
    for other in others:
        build = other.removeprefix("!=").strip()
        if not other.startswith("!=") or build.partition("+")[0] != version or not build.partition("+")[2]:
            return None  # only exclusions of builds of that very version are read
        if any(c in build for c in "*;=<>!~ ,"):
            return None
        excluded.append(build)
    if others and "+" in version:
        return None
    return str(canonicalize_name(name.strip())), version, tuple(excluded) if others else None


def needs(chosen: Iterable[Selected], sources: WheelSources) -> tuple[Need, ...]:
    """The pinned wheels of the selected images, one Need per distinct wheel and list of sources."""
    Key = tuple[str, str, tuple[str, ...] | None, str, str, tuple[str, ...]]
    found: dict[Key, list[str]] = {}
    owners: dict[Key, str] = {}
    for selected in chosen:
        for image in selected.images:
            combination, platform = selected.combination, image.platform
            tag, python, pins = image.own_tag, combination.python, combination.pins_for(platform)
            own = combination.index_url_for(platform)
            searched = (sources.index_url or own, *sources.extra_index_urls, *sources.find_links)
            for requirement in pins:
                read = pinned(requirement)
                if read is None:
                    continue
                key = (*read, python, platform, searched)
                found.setdefault(key, []).append(tag)
                owners[key] = own
    return tuple(
        Need(project, version, python, platform, sources, owners[key], tuple(tags), excluded)
        for key, tags in found.items()
        for project, version, excluded, python, platform, sources in [key]
    )


def _installs(tag: Tag, python: str, platform: str) -> bool:
    """Whether a wheel tag installs on CPython `python` (3.12) on Linux `platform` (linux/amd64): the abi is that
    Python's own (`cp312`, never the free-threaded `cp312t`), `abi3` or `none`; the glibc level is not checked."""
    major, minor = python.split(".", 1)
    if tag.abi not in (f"cp{major}{minor}", "abi3", "none"):
        return False
    abi3 = re.fullmatch(rf"cp{major}(\d+)", tag.interpreter) if tag.abi == "abi3" else None
    if not (
        tag.interpreter in (f"cp{major}{minor}", f"py{major}", f"py{major}{minor}")
        or (abi3 is not None and int(abi3.group(1)) <= int(minor))
    ):
        return False
    arch = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}.get(platform)
    return tag.platform == "any" or (
        arch is not None and re.fullmatch(rf"(manylinux[_0-9]*|linux)_{arch}", tag.platform) is not None
    )


def matches(filename: str, need: Need) -> bool:
    """Whether `filename` is a wheel of this project whose version pip's pin takes (`==2.7.0+cu118` only that build;
    `==2.7.0` or `==2.7` any build of 2.7.0, a local label included; `!=2.14.1+cpu` not that one) and that installs
    on the Python and platform."""
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
        pin = _pin(need.version, need.excluded)
    except (InvalidWheelFilename, InvalidVersion, InvalidSpecifier, ValueError):
        return False
    right = pin.contains(version, prereleases=True)
    return str(name) == need.project and right and any(_installs(tag, need.python, need.platform) for tag in tags)


@functools.lru_cache(maxsize=1024)
def _pin(version: str, excluded: tuple[str, ...] | None) -> SpecifierSet:
    """pip's reading of `==version` (and `!=` each excluded build), made once per Need: an index page lists
    thousands of files, each matched against it."""
    return SpecifierSet(",".join([f"=={version}", *(f"!={e}" for e in excluded or ())]))


def _local(source: str) -> Path | None:
    """The folder of a local source (a path, or a file:// URL); None for a remote one."""
    parts = urllib.parse.urlsplit(source)
    if parts.scheme == "file":
        return Path(urllib.parse.unquote(parts.path))
    if parts.scheme in ("http", "https"):
        return None
    return Path(source)


def _listing(folder: Path) -> Answer:
    try:
        names = []
        with os.scandir(folder) as entries:
            for entry in entries:
                names.append(entry.name)
                if len(names) > MAX_FOLDER_ENTRIES:
                    return Answer(None, f"{folder}: more than {MAX_FOLDER_ENTRIES} entries")
    except FileNotFoundError:
        return Answer(())
    except OSError as exc:
        return Answer(None, f"{folder}: cannot be read ({exc.strerror or exc})")
    return Answer(tuple(n for n in names if n.endswith(".whl")))


def _local_page(page: Path) -> Answer:
    """A `file://` index's project page (PEP 503 HTML), its links read as pip reads them (relative ones included)."""
    try:
        with page.open("rb") as file:
            body = file.read(PAGE_LIMIT + 1)
    except OSError as exc:
        return Answer(None, f"{page}: cannot be read ({exc.strerror or exc})")
    if len(body) > PAGE_LIMIT:
        return Answer(None, f"{page}: more than {PAGE_LIMIT} bytes")
    try:
        links = pages.html_page(body, page.absolute().as_uri())
    except pages.PageError as exc:
        return Answer(None, f"{page}: {exc}")
    return Answer(tuple(link.filename for link in links if not link.yanked and _there(link.url)))


def _there(url: str) -> bool:
    """Whether a local page's link names a file that is there (a link off this machine is taken as listed)."""
    if not url.startswith("file:"):
        return True
    path = Path(urllib.parse.unquote(urllib.parse.urlsplit(url).path))
    try:
        return path.is_file()
    except OSError:
        return False


def _project(folder: Path) -> Answer:
    """A `file://` (or folder) index's project: its index.html where there is one, else its folder's wheels."""
    page = folder / "index.html"
    return _local_page(page) if page.is_file() else _listing(folder)


def ask(source: str, project: str, as_index: bool, client: index.Client) -> Answer:
    """The wheel files `source` lists for `project`: an index's project page (`<index>/<project>/`), a
    find-links page or folder as it is. Never raises: what could not be asked is said in `why`."""
    folder = _local(source)
    if folder is not None:
        return _project(folder / project) if as_index else _listing(folder)
    url = source.rstrip("/") + f"/{project}/" if as_index else source
    try:
        answer = client.get(url, pages.ACCEPT, PAGE_LIMIT)
        links = pages.project_page(answer.body, answer.content_type, answer.url)
    except index.NotServed:
        return Answer(())
    except index.Refused as exc:
        return Answer(None, str(exc), refused=True)
    except index.IndexProblem as exc:
        return Answer(None, str(exc))
    except pages.PageError as exc:
        return Answer(None, f"{url}: {exc}")
    return Answer(tuple(link.filename for link in links if not link.yanked))


def _asked(source: str, project: str, as_index: bool, client: index.Client) -> Answer:
    """`ask`, once more where the source did not answer (a dropped connection is not yet a refusal)."""
    answer = ask(source, project, as_index, client)
    again = answer.files is None and not answer.refused and not client.deadline.expired
    return ask(source, project, as_index, client) if again else answer


def _answers(
    questions: Iterable[tuple[str, str]], find_links: Sequence[str], client: index.Client
) -> dict[tuple[str, str], Answer]:
    links = set(find_links)
    ordered = sorted(set(questions))
    if not ordered:
        return {}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(ordered)))
    try:
        futures = {q: pool.submit(_asked, q[0], q[1], q[0] not in links, client) for q in ordered}
        return dict(zip(futures, stopping.results(futures.values()), strict=True))
    finally:  # a signal stops the check: it does not wait for the indexes
        pool.shutdown(wait=False, cancel_futures=True)


def _served(need: Need, answers: dict[tuple[str, str], Answer]) -> bool:
    return any(
        (found := answers.get((source, need.project))) is not None
        and found.files is not None
        and any(matches(name, need) for name in found.files)
        for source in need.sources
    )


def _said(source: str, answer: Answer | None) -> str:
    if answer is None:
        return f"{source} (not asked)"
    return f"{source} ({answer.why})" if answer.files is None else f"{source} (answers, without it)"


@dataclass(frozen=True)
class Findings:
    """What the check found: `missing`, one line per group of images whose wheels no source serves; `unknown`,
    one line per group of wheels no source served where a source asking for a login might (not refused, never
    said to be served)."""

    missing: tuple[str, ...]
    unknown: tuple[str, ...]


def problems(
    wanted: Sequence[Need], find_links: Sequence[str], deadline_s: float = DEADLINE_S, replaced: bool = False
) -> list[str]:
    """`check`'s missing lines."""
    return list(check(wanted, find_links, deadline_s, replaced).missing)


def _unknown(needs_: Sequence[Need], refusing: tuple[str, ...]) -> str:
    wheels = ", ".join(dict.fromkeys(f"{n.wanted} (Python {n.python}, {n.platform})" for n in needs_))
    count = len(needs_)
    asks = "asks" if len(refusing) == 1 else "ask"
    line = (
        f"{count} wheel{'s' * (count != 1)} not known ({wheels}): {', '.join(refusing)} {asks} for a login this "
        "check does not have (HTTP 401/403); pip may have it (netrc, keyring)"
    )
    return values.mirror_without_login(line)


def check(
    wanted: Sequence[Need], find_links: Sequence[str], deadline_s: float = DEADLINE_S, replaced: bool = False
) -> Findings:
    """One line per group of images whose wheels no source serves: the wheels, each source searched and what it
    said; `replaced`: an --index-url replaced the combinations' own indexes. Local sources are read first; an
    index on the network is asked only for a wheel no local source holds. A wheel no source served where one
    asked for a login is `unknown`, not missing."""
    client = index.Client(deadline_s)
    local = {(s, n.project) for n in wanted for s in n.sources if _local(s) is not None}
    answers = _answers(local, find_links, client)
    remote = {(s, n.project) for n in wanted if not _served(n, answers) for s in n.sources if _local(s) is None}
    answers |= _answers(remote, find_links, client)
    missing: dict[tuple[tuple[str, ...], tuple[str, ...], str], list[Need]] = {}
    unknown: dict[tuple[str, ...], list[Need]] = {}
    for need in wanted:
        if _served(need, answers):
            continue
        refusing = tuple(s for s in need.sources if (a := answers.get((s, need.project))) is not None and a.refused)
        if refusing:  # a source that wants a login may serve it: not refused, not said to be served either
            unknown.setdefault(refusing, []).append(need)
        else:
            missing.setdefault((need.tags, need.sources, need.own_index), []).append(need)
    lines = []
    for (tags, sources, own), needs_ in missing.items():
        first = needs_[0]
        wheels = ", ".join(n.wanted for n in needs_)
        asked = "; ".join(_said(s, answers.get((s, first.project))) for s in sources)
        hint = (
            f"; its own index {own} is not searched (--index-url replaces it)"
            if replaced and own not in sources
            else ""
        )
        line = (
            f"{', '.join(tags)}: no source serves {wheels} (Python {first.python}, {first.platform}): "
            f"searched {asked}{hint}"
        )
        lines.append(values.mirror_without_login(line))  # a source's login is never said
    return Findings(tuple(lines), tuple(_unknown(n, refusing) for refusing, n in unknown.items()))
