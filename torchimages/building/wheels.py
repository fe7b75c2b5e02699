"""Where the wheels come from: index URLs, extra indexes, find-links; local folders are served
on loopback for the duration of a build only, and the whole configuration reaches the build as
BuildKit secrets, so no URL or credential lands in a layer or the image history. One description
gives both: uv's settings (a uv.toml: uv installs the venv) and a pip.conf (pip fetches uv itself,
and on Ubuntu 22.04 the venv's newer pip)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import json
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from torchimages import settings, textfile

# Where pip fetches the build's tools (uv, and pip itself on Ubuntu 22.04) when no index is given: they
# are PyPI's, not PyTorch's index's.
PYPI = "https://pypi.org/simple"
# uv's index strategy: pip's. uv's default (`first-index`) takes a package only from the first index that
# has it, so an index holding some versions (a mirror, PyTorch's index with its copies of sympy or numpy)
# would hide the versions of the others; `unsafe-best-match` takes the best version of all sources, as pip
# does. Every requirement the build names is pinned; their dependencies resolve as pip resolved them.
UV_INDEX_STRATEGY = "unsafe-best-match"


@dataclass(frozen=True)
class WheelSources:
    """What the user asked for; None index_url means each image's own variant index."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()

    @classmethod
    def from_environment(cls) -> WheelSources:
        """TORCHIMAGES_INDEX_URL, TORCHIMAGES_EXTRA_INDEX_URLS and TORCHIMAGES_FIND_LINKS (space-separated)."""
        return cls(
            settings.checked("TORCHIMAGES_INDEX_URL"),
            settings.checked_words("TORCHIMAGES_EXTRA_INDEX_URLS"),
            settings.checked_words("TORCHIMAGES_FIND_LINKS"),
        )

    @property
    def local_folders(self) -> list[Path]:
        """Every source that is a folder on this machine."""
        urls = [u for u in (self.index_url, *self.extra_index_urls, *self.find_links) if u]
        return [p for u in urls if (p := local_path(u))]


@dataclass(frozen=True)
class Served:
    """The sources as the build sees them (loopback URLs for local folders)."""

    index_url: str | None
    extra_index_urls: tuple[str, ...]
    find_links: tuple[str, ...]
    needs_host_network: bool
    trusted_hosts: tuple[str, ...] = ()  # plain-http hosts pip may use (loopback needs none)

    def pip_conf(self, default_index: str) -> str:
        """A pip.conf for one image (its variant index unless one was given)."""
        lines = ["[global]", f"index-url = {self.index_url or default_index}"]
        if self.extra_index_urls:
            lines.append("extra-index-url = " + " ".join(self.extra_index_urls))
        if self.find_links:
            lines.append("find-links = " + " ".join(self.find_links))
        if self.trusted_hosts:
            lines.append("trusted-host = " + " ".join(self.trusted_hosts))
        return "\n".join(lines) + "\n"

    def uv_toml(self, default_index: str) -> str:
        """uv's settings for one image (a uv.toml, read through UV_CONFIG_FILE): the sources of `pip_conf`, each
        image's variant index unless one was given, searched as pip searches them. uv asks the extra indexes
        before the index and, among files of one version, takes the first source's; pip takes the last one's
        (scripts/host-pip-sources lists a local copy last for that): the extra indexes are written last first."""
        lines = [f"index-url = {_toml(self.index_url or default_index)}"]
        if self.extra_index_urls:
            lines.append(f"extra-index-url = {_toml(list(reversed(self.extra_index_urls)))}")
        if self.find_links:
            lines.append(f"find-links = {_toml(list(self.find_links))}")
        lines.append(f"index-strategy = {_toml(UV_INDEX_STRATEGY)}")
        if self.trusted_hosts:
            lines.append(f"allow-insecure-host = {_toml(list(self.trusted_hosts))}")
        return "\n".join(lines) + "\n"


def _toml(value: str | list[str]) -> str:
    """A TOML string or array of strings (JSON's escapes are TOML's: a URL's quote or backslash stays text)."""
    return json.dumps(value)


def local_path(url: str) -> Path | None:
    """The folder a `file://` URL or a plain path names, or None for a remote URL."""
    parsed = urlparse(url)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "" and url:
        return Path(url).resolve()
    return None


def missing_folders(sources: WheelSources) -> list[str]:
    """The local sources that are no folder (checked before anything is built or served)."""
    urls = [u for u in (sources.index_url, *sources.extra_index_urls, *sources.find_links) if u]
    return [u for u in urls if (folder := local_path(u)) is not None and not folder.is_dir()]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    """A client that goes away mid-download (pip killed by a full disk or a stopped engine) is no
    error of ours: no traceback for it; anything else is reported as usual."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextlib.contextmanager
def _serve(root: Path, host: str = "127.0.0.1") -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = _QuietServer((host, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _index_root(folder: Path) -> tuple[Path, str]:
    """Serve an index from its parent, so page links such as `../../files/x.whl` resolve."""
    return folder.parent, folder.name + "/"


@contextlib.contextmanager
def serve(sources: WheelSources, host: str = "127.0.0.1") -> Iterator[Served]:
    """Serve local folders on `host` (loopback: builds reach it with host network) while the context is
    open; remote URLs pass through. Another address (an engine's bridge gateway) serves builds that run
    without host network, such as a bake's on buildx older than 0.14, which ignores a target's `network`."""
    with contextlib.ExitStack() as stack:

        def expose(url: str, as_index: bool) -> str:
            folder = local_path(url)
            if folder is None:
                return url
            if not folder.is_dir():
                raise FileNotFoundError(f"wheel source {url} is not a folder")
            root, below = _index_root(folder) if as_index else (folder, "")
            return stack.enter_context(_serve(root, host)) + "/" + below

        index = expose(sources.index_url, True) if sources.index_url else None
        extras = tuple(expose(u, True) for u in sources.extra_index_urls)
        links = tuple(expose(u, False) for u in sources.find_links)
        local = bool(sources.local_folders)
        loopback = host.startswith("127.") or host in ("localhost", "::1")
        trusted = (host,) if local and not loopback else ()
        yield Served(index, extras, links, needs_host_network=loopback and local, trusted_hosts=trusted)


@contextlib.contextmanager
def secret_file(text: str) -> Iterator[Path]:
    """A private temporary file holding a secret, removed afterwards."""
    fd, name = tempfile.mkstemp(prefix="torchimages-", suffix=".secret")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        yield Path(name)
    finally:
        Path(name).unlink(missing_ok=True)


def write_secret(folder: Path, text: str, name: str = "pip-{digest}.conf") -> Path:
    """A file in `folder` holding `text` (a pip.conf or uv.toml: index URLs may hold credentials), private (0600
    in a 0700 folder) and named by its content (`{digest}` in `name`), so the same text is one file. OSError when
    it cannot be written."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / name.format(digest=hashlib.sha256(text.encode()).hexdigest()[:12])
    textfile.write_atomically(path, text, mode=0o600)  # mkstemp makes it 0600 from the start
    return path
