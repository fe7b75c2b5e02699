"""An index's HTTP: one GET at a time, its answer bounded in bytes and time, redirects only to http(s).

Everything an index sends is hostile input: a page or a metadata file longer than its bound is refused (whatever
its Content-Length says), every socket operation has a timeout, and every question an overall deadline
(registry.Deadline: a server that trickles a byte at a time is cut off there). A refusal is an IndexProblem with
one line that says which URL and why; a 404 is `NotServed` (the index does not have it: nothing is read as gone).
"""

from __future__ import annotations

import base64
import http.client
import socket
import ssl
import time
import urllib.parse
from dataclasses import dataclass

from torchimages import registry, values

TIMEOUT_S = 10.0  # one socket operation: connect, or one read
MAX_REDIRECTS = 5
CHUNK = 64 * 1024
USER_AGENT = "torchimages-kb"


class IndexProblem(Exception):
    """An index did not answer, or answered what cannot be used; the message says which URL and why."""


class Refused(IndexProblem):
    """The index answered 401 or 403: it asks for a login this client does not have, or refuses it."""


class NotServed(IndexProblem):
    """The index answered 404: it does not serve that page or file."""


class TooBig(IndexProblem):
    """The answer is longer than the bytes allowed (announced so, or sent so): none of it is read."""


@dataclass(frozen=True)
class Answer:
    """One answer: the URL it came from (after redirects), its media type and its body."""

    url: str
    content_type: str
    body: bytes


class Client:
    """Asks one question after another, all under one deadline; counts the requests it made."""

    def __init__(self, deadline_s: float, timeout_s: float = TIMEOUT_S) -> None:
        self.deadline = registry.Deadline(deadline_s)
        self.timeout_s = timeout_s
        self.requests = 0

    def get(self, url: str, accept: str, limit: int) -> Answer:
        """GET `url` (following at most MAX_REDIRECTS redirects to http or https), its body at most `limit` bytes."""
        with self.deadline.running():
            for _ in range(MAX_REDIRECTS + 1):
                found = self._once(url, accept, limit)
                if isinstance(found, Answer):
                    return found
                url = found
            raise IndexProblem(f"{_shown(url)}: more than {MAX_REDIRECTS} redirects")

    def _once(self, url: str, accept: str, limit: int) -> Answer | str:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise IndexProblem(f"{_shown(url)}: not an http or https URL")
        self.requests += 1
        try:
            connection = _connection(parts, self._timeout(url))
            try:
                connection.connect()
                self.deadline.watch(connection.sock)
                path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
                headers = {"Accept": accept, "User-Agent": USER_AGENT, **_authorization(parts)}
                connection.request("GET", path, headers=headers)
                answer = connection.getresponse()
                if answer.status in (301, 302, 303, 307, 308):
                    return _redirect(url, answer.getheader("Location") or "")
                if answer.status == 404:
                    raise NotServed(f"{_shown(url)}: not served (HTTP 404)")
                if answer.status in (401, 403):
                    raise Refused(f"{_shown(url)}: HTTP {answer.status} {_printable(answer.reason)}")
                if answer.status != 200:
                    raise IndexProblem(f"{_shown(url)}: HTTP {answer.status} {_printable(answer.reason)}")
                body = self._body(url, answer, connection, limit)
                content_type = (answer.getheader("Content-Type") or "").split(";")[0].strip().lower()
                return Answer(url=url, content_type=content_type, body=body)
            finally:
                connection.close()
        except IndexProblem:
            raise
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise IndexProblem(f"{_shown(url)}: {self._why(exc)}") from None

    def _timeout(self, url: str) -> float:
        try:
            return self.deadline.timeout(self.timeout_s)
        except TimeoutError:
            raise IndexProblem(
                f"{_shown(url)}: no complete answer within {self.deadline.seconds:g} s (the deadline)"
            ) from None

    def _body(
        self, url: str, answer: http.client.HTTPResponse, connection: http.client.HTTPConnection, limit: int
    ) -> bytes:
        """The body, read in chunks (each with the per-read timeout, never past the deadline), at most `limit`
        bytes, and whole: fewer bytes than Content-Length promised is an incomplete answer."""
        declared = answer.getheader("Content-Length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit:
            raise TooBig(f"{_shown(url)}: {int(declared)} bytes announced, more than the {limit} allowed")
        chunks: list[bytes] = []
        size = 0
        while True:
            if connection.sock is not None:
                connection.sock.settimeout(self._timeout(url))
            chunk = answer.read(min(CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise TooBig(f"{_shown(url)}: more than the {limit} bytes allowed")
        if self.deadline.expired:  # the deadline shut the socket: what came is not the whole answer
            raise IndexProblem(f"{_shown(url)}: {self._why(TimeoutError())}")
        missing = answer.length  # what its Content-Length promised and the connection never sent
        if missing:
            raise IndexProblem(f"{_shown(url)}: the answer ended early ({size} bytes of {size + missing})")
        return b"".join(chunks)

    def _why(self, exc: BaseException) -> str:
        if self.deadline.expired or time.monotonic() >= self.deadline.end - 0.05:
            return f"no complete answer within {self.deadline.seconds:g} s (the deadline)"
        if isinstance(exc, http.client.IncompleteRead):
            return f"the answer ended early ({len(exc.partial)} bytes of {len(exc.partial) + (exc.expected or 0)})"
        if isinstance(exc, socket.timeout | TimeoutError):
            return f"no answer within {self.timeout_s:g} s"
        if isinstance(exc, socket.gaierror):
            return f"the host does not resolve ({exc.strerror or exc})"
        if isinstance(exc, ssl.SSLError):
            return f"TLS failed ({exc.reason or exc})"
        if isinstance(exc, ConnectionRefusedError):
            return "the connection was refused"
        return _printable(str(exc) or type(exc).__name__)


def _authorization(parts: urllib.parse.SplitResult) -> dict[str, str]:
    """HTTP basic authentication for a URL that holds a login (`https://user:password@host/simple`), as pip sends
    it; nothing for one without."""
    if parts.username is None:
        return {}
    login = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
    return {"Authorization": "Basic " + base64.b64encode(login.encode()).decode()}


def _shown(url: str) -> str:
    """`url` without its login, as it may be said."""
    return values.hide_logins(url)


def _connection(parts: urllib.parse.SplitResult, timeout: float) -> http.client.HTTPConnection:
    host, port = parts.hostname or "", parts.port  # port: ValueError for a bad one (said as such)
    if parts.scheme == "https":
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=ssl.create_default_context())
    return http.client.HTTPConnection(host, port, timeout=timeout)


def _redirect(url: str, location: str) -> str:
    target = urllib.parse.urljoin(url, location.strip())
    if urllib.parse.urlsplit(target).scheme not in ("http", "https") or not location.strip():
        raise IndexProblem(f"{_shown(url)}: redirected to {_printable(location)!r}, which is not an http or https URL")
    return target


def _printable(text: str) -> str:
    """At most 200 characters of one line."""
    return " ".join(str(text).split())[:200]
