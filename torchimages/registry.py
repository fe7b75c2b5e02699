"""A container registry's HTTP API (the OCI distribution spec), just enough to resolve a tag to its digest.

Not Docker: a plain HTTP(S) call to a registry, so it works on a machine without an engine (the doctor
asks it whether the bases answer). `HEAD /v2/<path>/manifests/<tag>`, with the Accept headers of an OCI
index, a Docker manifest list and both single-platform manifests, answers the digest in
`Docker-Content-Digest`; an anonymous bearer token is fetched when the registry asks for one (Docker Hub).
Loopback registries, and hosts named in TORCHIMAGES_INSECURE_REGISTRIES, are spoken to over plain HTTP.

Every question has an overall deadline (TORCHIMAGES_REGISTRY_DEADLINE_S) besides the per-read timeout: a
registry that trickles its answer a byte at a time resets a per-read timeout forever, so at the deadline
the question's sockets are shut down and the call ends with a RegistryError that says so.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.client
import ipaddress
import json
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from torchimages import settings, values

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
OFFICIAL_PREFIX = "library"  # Docker Hub's official images (`ubuntu`) live under library/
INSECURE_VARIABLE = "TORCHIMAGES_INSECURE_REGISTRIES"
DEADLINE_VARIABLE = "TORCHIMAGES_REGISTRY_DEADLINE_S"
TIMEOUT_S = 10.0  # one socket operation (connect, one read)
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
)
_CHALLENGE_FIELD = re.compile(r'(\w+)="([^"]*)"')


class RegistryError(Exception):
    """A registry could not be reached or refused to answer; the message says which and why. `login`: the
    registry's answer asked for a login this client does not have (HTTP 401 or 403, or a challenge that is not an
    anonymous token's): it cannot tell whether the image is there."""

    def __init__(self, message: str, login: bool = False) -> None:
        super().__init__(message)
        self.login = login


@dataclass(frozen=True)
class Reference:
    """An image reference split as Docker normalises it: `ubuntu:24.04` is docker.io/library/ubuntu:24.04."""

    domain: str
    path: str
    tag: str
    digest: str = ""

    @property
    def api_host(self) -> str:
        """Where the registry's API answers (Docker Hub's is not docker.io itself)."""
        return DOCKER_HUB_API if self.domain == DOCKER_HUB else self.domain

    def __str__(self) -> str:
        name = self.path.removeprefix(f"{OFFICIAL_PREFIX}/") if self.domain == DOCKER_HUB else self.path
        name = name if self.domain == DOCKER_HUB else f"{self.domain}/{name}"
        return name + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def parse(reference: str, where: str = "") -> Reference:
    """Split `[domain/]path[:tag][@digest]` by the OCI grammar (values.reference: BadValue when it is not
    one); the first component is a domain when it has a '.' or ':' or is `localhost` (Docker's rule);
    no tag means `latest`."""
    found = values.reference(reference, where)
    domain, path = found.domain or DOCKER_HUB, found.path
    if domain == DOCKER_HUB and "/" not in path:
        path = f"{OFFICIAL_PREFIX}/{path}"
    return Reference(domain, path, found.tag or ("" if found.digest else "latest"), found.digest)


def full_name(reference: str) -> str:
    """`ubuntu:24.04` -> `docker.io/library/ubuntu:24.04`: the name with its registry and full path."""
    ref = parse(reference)
    return f"{ref.domain}/{ref.path}" + (f":{ref.tag}" if ref.tag else "") + (f"@{ref.digest}" if ref.digest else "")


def is_loopback(host: str) -> bool:
    """Whether a registry host (`127.0.0.1:5000`, `localhost`, `[::1]:5000`) is this machine."""
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
    name = name.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def scheme(host: str) -> str:
    """http for loopback registries and those named in TORCHIMAGES_INSECURE_REGISTRIES, else https."""
    insecure = settings.checked_words(INSECURE_VARIABLE)
    return "http" if is_loopback(host) or host in insecure else "https"


def manifest_url(ref: Reference, what: str | None = None) -> str:
    """The manifest endpoint of a reference (by `what`: a tag or a digest)."""
    return f"{scheme(ref.api_host)}://{ref.api_host}/v2/{ref.path}/manifests/{what or ref.digest or ref.tag}"


@dataclass
class Deadline:
    """The end of one registry question: the sockets it opened are shut down when it passes, so a read that
    a trickling server keeps alive ends there. `expired` says whether that is why a call failed."""

    seconds: float
    end: float = 0.0
    expired: bool = False
    _sockets: list[socket.socket] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.end = time.monotonic() + self.seconds

    def timeout(self, per_read: float) -> float:
        """The timeout of the next socket operation: the per-read one, never past the deadline."""
        left = self.end - time.monotonic()
        if left <= 0:
            self._expire()
            raise TimeoutError("the deadline passed")
        return min(per_read, left)

    def watch(self, sock: socket.socket) -> None:
        """Shut `sock` down at the deadline (at once when it has passed)."""
        with self._lock:
            self._sockets.append(sock)
            late = self.expired
        if late:
            _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    @contextlib.contextmanager
    def running(self) -> Iterator[Deadline]:
        """While open, a timer shuts the watched sockets down at the deadline."""
        timer = threading.Timer(max(0.0, self.end - time.monotonic()), self._expire)
        timer.daemon = True
        timer.start()
        try:
            yield self
        finally:
            timer.cancel()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _Watched:
    """A connection whose socket the deadline watches (mixed into http.client's two connection classes)."""

    sock: socket.socket

    def __init__(self, *args: Any, deadline: Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline = deadline

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        self.deadline.watch(self.sock)


class _HTTPConnection(_Watched, http.client.HTTPConnection):
    """A plain connection the deadline watches."""


class _HTTPSConnection(_Watched, http.client.HTTPSConnection):
    """A TLS connection the deadline watches."""


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_HTTPConnection, deadline=self.deadline), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = functools.partial(_HTTPSConnection, deadline=self.deadline)
        return self.do_open(connection, req, context=self._context)  # type: ignore[attr-defined]


def _open(request: urllib.request.Request | str, deadline: Deadline) -> Any:
    """urlopen, its sockets watched by the deadline (each socket operation's timeout at most what is left)."""
    opener = urllib.request.build_opener(_HTTPHandler(deadline), _HTTPSHandler(deadline))
    return opener.open(request, timeout=deadline.timeout(TIMEOUT_S))


def _token(challenge: str, deadline: Deadline) -> str:
    """An anonymous bearer token for a `WWW-Authenticate: Bearer realm=...,service=...,scope=...` challenge."""
    fields = dict(_CHALLENGE_FIELD.findall(challenge))
    realm = fields.pop("realm", "")
    if not challenge.lower().startswith("bearer") or not realm:
        raise RegistryError(f"the registry asks for credentials ({challenge or 'no challenge'})", login=True)
    try:
        values.url(realm, "the registry's token realm")  # http(s) with a host: never file: or ftp: on its word
    except values.BadValue as exc:
        raise RegistryError(str(exc)) from None
    url = realm + "?" + urllib.parse.urlencode(fields)
    try:
        with _open(url, deadline) as answer:
            body = json.loads(_body(answer))
    except (OSError, ValueError, RecursionError, http.client.HTTPException) as exc:
        login = isinstance(exc, urllib.error.HTTPError) and exc.code in (401, 403)  # no anonymous pull
        raise RegistryError(f"no token from {realm}: {_why(exc, deadline)}", login=login) from None
    if not isinstance(body, dict):
        raise RegistryError(f"no token from {realm}: the answer is not a JSON object")
    token = body.get("token") or body.get("access_token")
    if not token:
        raise RegistryError(f"no token from {realm}")
    return str(token)


def _why(exc: BaseException, deadline: Deadline | None = None) -> str:
    if deadline is not None and (deadline.expired or time.monotonic() >= deadline.end - 0.05):  # a read ended at it
        return f"no complete answer within {deadline.seconds:g} s ({DEADLINE_VARIABLE})"
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc) or type(exc).__name__


MAX_MANIFEST_BYTES = 4 * 1024 * 1024  # a manifest index is kilobytes; registries refuse more (distribution: 4 MiB)


class TooLarge(ValueError):
    """An answer longer than a manifest can be."""


def _body(answer: Any) -> bytes:
    """An answer's body, read no further than MAX_MANIFEST_BYTES (TooLarge past it), and whole (IncompleteRead
    when the connection ended before its Content-Length): hashing a part of it would name a digest the
    registry never served."""
    body: bytes = answer.read(MAX_MANIFEST_BYTES + 1)
    if len(body) > MAX_MANIFEST_BYTES:
        raise TooLarge(f"more than {MAX_MANIFEST_BYTES} bytes, which no manifest is")
    missing = getattr(answer, "length", None)  # what its Content-Length promised and the connection never sent
    if missing:
        raise http.client.IncompleteRead(body, missing)
    return body


def _request(url: str, method: str, token: str | None, deadline: Deadline) -> tuple[dict[str, str], bytes]:
    headers = {"Accept": ", ".join(MANIFEST_TYPES)}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, method=method, headers=headers)
    with _open(request, deadline) as answer:
        return dict(answer.headers.items()), _body(answer) if method == "GET" else b""


def check_settings() -> None:
    """SettingError for a bad TORCHIMAGES_INSECURE_REGISTRIES or TORCHIMAGES_REGISTRY_DEADLINE_S: a command
    that asks registries checks them before it asks any (and before any thread)."""
    settings.checked_words(INSECURE_VARIABLE)
    deadline_s()


def deadline_s() -> float:
    """The overall deadline of one registry question (TORCHIMAGES_REGISTRY_DEADLINE_S; SettingError)."""
    return settings.seconds(DEADLINE_VARIABLE)


def resolve_digest(reference: str, deadline: float | None = None) -> str:
    """The digest (`sha256:...`) the registry serves for a reference's tag: of the multi-platform index
    where there is one, as `docker pull NAME@DIGEST` takes it, within `deadline` seconds in all (default
    TORCHIMAGES_REGISTRY_DEADLINE_S). RegistryError says why not."""
    try:
        ref = parse(reference)
    except values.BadValue as exc:
        raise RegistryError(str(exc)) from None
    with Deadline(deadline_s() if deadline is None else deadline).running() as clock:
        return _resolve(reference, ref, clock)


def _resolve(reference: str, ref: Reference, deadline: Deadline) -> str:
    url = manifest_url(ref)
    token = None
    for method in ("HEAD", "GET"):
        for _ in range(2):
            try:
                headers, body = _request(url, method, token, deadline)
            except urllib.error.HTTPError as exc:
                if exc.code == 401 and token is None and not deadline.expired:
                    token = _token(exc.headers.get("WWW-Authenticate", ""), deadline)
                    continue
                if exc.code == 404:
                    raise RegistryError(f"{reference}: {ref.api_host} has no such manifest (HTTP 404)") from None
                raise RegistryError(
                    f"{reference}: {ref.api_host} answered HTTP {exc.code} {exc.reason}", login=exc.code in (401, 403)
                ) from None
            except TooLarge as exc:
                raise RegistryError(f"{reference}: {ref.api_host} answered {exc}") from None
            except (OSError, ValueError, http.client.HTTPException) as exc:
                raise RegistryError(f"{reference}: {ref.api_host} does not answer ({_why(exc, deadline)})") from None
            found = {k.lower(): v for k, v in headers.items()}.get("docker-content-digest", "")
            if values.is_digest(found):
                return found
            if method == "GET" and body:
                return "sha256:" + hashlib.sha256(body).hexdigest()
            break
    raise RegistryError(f"{reference}: {ref.api_host} answered without a digest")
