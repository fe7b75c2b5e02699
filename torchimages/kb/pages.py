"""Parsers of what an index serves, all hostile input: a project page (PEP 691 JSON or PEP 503 HTML), a wheel's
file name, a wheel's core metadata (PEP 658) and PyPI's JSON API answer of one version. What cannot be read is a
PageError with one line that says why; a file name that is not a wheel, a version that does not parse or a
Requires-Dist line that does not parse is skipped (kept as `bad`), never a traceback."""

from __future__ import annotations

import html.parser
import io
import json
import re
import urllib.parse
import zipfile
import zlib
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
HTML_TYPES = ("application/vnd.pypi.simple.v1+html", "text/html")
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
SHA256 = re.compile(r"[0-9a-f]{64}")
MAX_LINKS = 100_000  # no project page lists more files
ARCHES = {"x86_64": "linux/amd64", "aarch64": "linux/arm64"}


class PageError(ValueError):
    """What an index served cannot be read; the message says why in one line."""


@dataclass(frozen=True)
class Link:
    """One file a project page lists: its name, absolute URL, sha256 (None: not given), whether its core metadata
    is served (True, False, None: the page does not say) and that metadata's sha256."""

    filename: str
    url: str
    sha256: str | None = None
    metadata: bool | None = None
    metadata_sha256: str | None = None
    yanked: bool = False
    size: int | None = None  # the file's size in bytes where the page gives it (PEP 700)


@dataclass(frozen=True)
class Wheel:
    """A wheel's file name, read: the project, the version (`public` without the local label `+cu126`), the Python
    versions of its `cpXY` tags and the Linux platforms (linux/amd64, linux/arm64) of its manylinux tags."""

    project: str
    version: str
    public: str
    local: str | None
    pythons: tuple[str, ...]
    platforms: tuple[str, ...]


@dataclass(frozen=True)
class Metadata:
    """A core metadata file, read: its Name, Version, the Requires-Dist lines that parse and those that do not."""

    name: str
    version: str
    requires: tuple[Requirement, ...]
    bad: tuple[str, ...]


def _text(body: bytes, what: str) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PageError(f"{what} is not UTF-8 (byte {exc.start})") from None


def _absolute(page_url: str, href: str) -> str | None:
    """The link's absolute URL: http(s); file only on a page that is itself a local file (a `file://` index)."""
    url = urllib.parse.urljoin(page_url, href.strip())
    schemes = ("http", "https", "file") if urllib.parse.urlsplit(page_url).scheme == "file" else ("http", "https")
    return url if urllib.parse.urlsplit(url).scheme in schemes else None


def _sha(value: object) -> str | None:
    return value.lower() if isinstance(value, str) and SHA256.fullmatch(value.lower()) else None


def json_page(body: bytes, page_url: str) -> tuple[Link, ...]:
    """The files of a PEP 691 JSON project page; entries that are not well formed are skipped."""
    try:
        page = json.loads(_text(body, "the JSON page"))
    except RecursionError:
        raise PageError("the JSON page is nested too deeply") from None
    except ValueError as exc:
        raise PageError(f"the JSON page does not parse ({_short(exc)})") from None
    if not isinstance(page, dict) or not isinstance(page.get("files"), list):
        raise PageError("the JSON page is not an object with a list of `files`")
    links = []
    for entry in page["files"][:MAX_LINKS]:
        if not isinstance(entry, dict):
            continue
        name, href = entry.get("filename"), entry.get("url")
        url = _absolute(page_url, href) if isinstance(href, str) and isinstance(name, str) else None
        if url is None or not isinstance(name, str) or "/" in name:
            continue
        hashes = entry["hashes"] if isinstance(entry.get("hashes"), dict) else {}
        meta = entry.get("core-metadata", entry.get("dist-info-metadata"))
        links.append(
            Link(
                filename=name,
                url=url,
                sha256=_sha(hashes.get("sha256")),
                metadata=None if meta is None else bool(meta),
                metadata_sha256=_sha(meta.get("sha256")) if isinstance(meta, dict) else None,
                yanked=bool(entry.get("yanked")),
                size=entry["size"] if type(entry.get("size")) is int and entry["size"] >= 0 else None,
            )
        )
    return tuple(links)


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[tuple[dict[str, str | None], str]] = []
        self._open: dict[str, str | None] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a" and len(self.anchors) < MAX_LINKS:
            self._close()
            self._open, self._text = dict(attrs), []

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._close()

    def handle_data(self, data: str) -> None:
        if self._open is not None and sum(map(len, self._text)) < 1000:
            self._text.append(data)

    def _close(self) -> None:
        if self._open is not None:
            self.anchors.append((self._open, "".join(self._text).strip()))
        self._open = None


def _metadata_attr(value: str | None) -> tuple[bool | None, str | None]:
    """`data-core-metadata` / `data-dist-info-metadata`: `true`, `sha256=<hex>`, or no value (served)."""
    if value is None:
        return True, None
    if value.strip().lower() == "false":
        return False, None
    algorithm, _, digest = value.strip().partition("=")
    return True, _sha(digest) if algorithm.lower() == "sha256" else None


def html_page(body: bytes, page_url: str) -> tuple[Link, ...]:
    """The files of a PEP 503 HTML project page (anchors; `#sha256=` fragments; PEP 714 metadata attributes).
    A file's name is its URL's last path component, unquoted, as pip takes it: never the anchor's text, which may
    be a path (`cpu/torch-...whl`, PyTorch's torch_stable.html) or cut short (nginx's autoindex)."""
    parser = _Anchors()
    try:
        parser.feed(_text(body, "the HTML page"))
        parser.close()
    except (AssertionError, ValueError) as exc:  # html.parser refuses a few malformed declarations
        raise PageError(f"the HTML page does not parse ({_short(exc)})") from None
    links = []
    for attrs, _text_shown in parser.anchors:
        href = attrs.get("href")
        url = _absolute(page_url, href) if href else None
        if url is None:
            continue
        split = urllib.parse.urlsplit(url)
        name = urllib.parse.unquote(split.path.rsplit("/", 1)[-1])
        algorithm, _, digest = split.fragment.partition("=")
        key = next((k for k in ("data-core-metadata", "data-dist-info-metadata") if k in attrs), None)
        served, meta_sha = (None, None) if key is None else _metadata_attr(attrs[key])
        if not name or "/" in name:
            continue
        links.append(
            Link(
                filename=name,
                url=urllib.parse.urlunsplit(split._replace(fragment="")),
                sha256=_sha(digest) if algorithm == "sha256" else None,
                metadata=served,
                metadata_sha256=meta_sha,
                yanked="data-yanked" in attrs,
            )
        )
    return tuple(links)


def project_page(body: bytes, content_type: str, page_url: str) -> tuple[Link, ...]:
    """A project page by its media type (JSON, else HTML: an index that ignores Accept sends HTML)."""
    if content_type == JSON_TYPE or (content_type.endswith("json") and body.lstrip()[:1] == b"{"):
        return json_page(body, page_url)
    if content_type in HTML_TYPES or not content_type or body.lstrip()[:1] == b"<":
        return html_page(body, page_url)
    raise PageError(f"the page is {content_type!r}, neither a simple API JSON nor HTML page")


def _python(tag: Tag) -> str | None:
    found = re.fullmatch(r"cp3(\d{1,2})", tag.interpreter)
    return f"3.{int(found.group(1))}" if found else None


def _platform(tag: Tag) -> str | None:
    if not tag.platform.startswith("manylinux"):
        return None
    return next((name for arch, name in ARCHES.items() if tag.platform.endswith("_" + arch)), None)


def wheel(filename: str) -> Wheel | None:
    """A wheel's file name read (None: not a wheel, or a name or version that does not parse)."""
    try:
        name, version, _build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion, ValueError):
        return None
    return Wheel(
        project=str(name),
        version=str(version),
        public=version.public,
        local=version.local,
        pythons=tuple(sorted({p for t in tags if (p := _python(t))}, key=lambda v: int(v.split(".")[1]))),
        platforms=tuple(sorted({p for t in tags if (p := _platform(t))})),
    )


MAX_METADATA_LINES = 20_000


def metadata(body: bytes) -> Metadata:
    """A core metadata file (RFC 822 headers; the description after the first blank line is not read)."""
    text = _text(body, "the metadata file")
    fields: list[tuple[str, str]] = []
    for line in text.splitlines()[:MAX_METADATA_LINES]:
        if not line.strip():
            break
        if line[:1] in (" ", "\t") and fields:
            fields[-1] = (fields[-1][0], fields[-1][1] + " " + line.strip())
            continue
        key, colon, value = line.partition(":")
        if colon:
            fields.append((key.strip().lower(), value.strip()))
    name = next((v for k, v in fields if k == "name"), "")
    version = next((v for k, v in fields if k == "version"), "")
    if not name or not version:
        raise PageError("the metadata file has no Name or no Version")
    try:
        Version(version)
    except InvalidVersion:
        raise PageError(f"the metadata's Version {_short(version)!r} does not parse") from None
    requires, bad = [], []
    for k, v in fields:
        if k != "requires-dist":
            continue
        try:
            requires.append(Requirement(v))
        except InvalidRequirement:
            bad.append(_short(v))
    return Metadata(name=str(canonicalize_name(name)), version=version, requires=tuple(requires), bad=tuple(bad))


def _short(value: object) -> str:
    return " ".join(str(value).split())[:120]


def wheel_metadata(body: bytes, limit: int) -> Metadata:
    """The core metadata inside a wheel (its one top-level `*.dist-info/METADATA`, at most `limit` bytes once
    inflated): where an index serves no `.metadata` file, a small wheel (one of metadata only) is read whole."""
    try:
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            names = [n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(names) != 1:
                raise PageError(f"the wheel holds {len(names)} .dist-info/METADATA files, not one")
            with archive.open(names[0]) as member:
                data = member.read(limit + 1)
    except PageError:
        raise
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        zlib.error,
        EOFError,
        RuntimeError,
        NotImplementedError,
        ValueError,
        OSError,
    ) as exc:
        raise PageError(f"the wheel is not a readable zip file ({_short(exc)})") from None
    if len(data) > limit:
        raise PageError(f"the wheel's METADATA inflates past {limit} bytes")
    return metadata(data)


MAX_JSON_FILES = 10_000  # no version of a project has more files


@dataclass(frozen=True)
class Release:
    """PyPI's JSON API answer of one version (https://pypi.org/pypi/<project>/<version>/json), read as the
    metadata of its wheels: `info`'s name, version, requires_dist (as Requires-Dist) and requires_python, and
    the file names its `urls` list."""

    metadata: Metadata
    requires_python: str | None
    files: tuple[str, ...]


def json_release(body: bytes) -> Release:
    """PyPI's JSON API answer of one version; `info` not an object, or no name or version, is a PageError; a
    requires_dist entry that is not a string is skipped (kept as `bad`), a `urls` entry not well formed too."""
    try:
        document = json.loads(_text(body, "the JSON API answer"))
    except RecursionError:
        raise PageError("the JSON API answer is nested too deeply") from None
    except ValueError as exc:
        raise PageError(f"the JSON API answer does not parse ({_short(exc)})") from None
    info = document.get("info") if isinstance(document, dict) else None
    if not isinstance(info, dict):
        raise PageError("the JSON API answer is not an object with an `info` object")
    name, version = info.get("name"), info.get("version")
    if not isinstance(name, str) or not isinstance(version, str) or not name.strip() or not version.strip():
        raise PageError("the JSON API answer's info has no name or no version")
    lines = [
        f"Name: {_one_line(name)}",
        f"Version: {_one_line(version)}",
    ]
    listed = info.get("requires_dist")
    requires = listed if isinstance(listed, list) else []
    bad = [] if listed is None or isinstance(listed, list) else [f"requires_dist is {type(listed).__name__}"]
    for entry in requires[:MAX_METADATA_LINES]:
        if isinstance(entry, str) and _one_line(entry) == entry.strip() and entry.strip():
            lines.append(f"Requires-Dist: {entry.strip()}")
        else:
            bad.append(_short(entry))
    meta = metadata("\n".join(lines).encode())
    python = info.get("requires_python")
    urls = document.get("urls") if isinstance(document.get("urls"), list) else []
    files = tuple(
        entry["filename"]
        for entry in urls[:MAX_JSON_FILES]
        if isinstance(entry, dict) and isinstance(entry.get("filename"), str) and "/" not in entry["filename"]
    )
    return Release(
        metadata=Metadata(meta.name, meta.version, meta.requires, (*meta.bad, *bad)),
        requires_python=_short(python) if isinstance(python, str) else None,
        files=files,
    )


def _one_line(text: str) -> str:
    """The text with every control character and line break made a space (a value must stay one header)."""
    return "".join(" " if ord(c) < 32 or ord(c) == 127 or c in "\u2028\u2029\x85" else c for c in text).strip()
