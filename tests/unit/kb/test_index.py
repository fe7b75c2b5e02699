"""An index is hostile: the client bounds every answer in bytes and time and follows redirects only to http(s).
A loopback server in a thread (tests/index_server.py) gives each hostile answer; each ends in an IndexProblem
whose one line says why, within the deadline."""

from __future__ import annotations

import time

import pytest

from tests.index_server import Reply, served
from torchimages.kb.index import Client, IndexProblem, NotServed

LIMIT = 1000


def _get(reply: Reply, deadline: float = 5.0, timeout: float = 5.0, path: str = "/p/") -> bytes:
    with served({"/p/": reply, "/q/": Reply(b"ok", "text/plain")}) as base:
        return Client(deadline, timeout).get(base + path, "*/*", LIMIT).body


def test_an_answer() -> None:
    assert _get(Reply(b"<html></html>", "text/html")) == b"<html></html>"


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (Reply(b"x" * (LIMIT + 1), length=-1), "more than the 1000 bytes"),
        (Reply(b"x" * 10, length=LIMIT * 10), "announced, more than"),
        (Reply(b"x" * 10, length=500), "ended early"),  # a lying Content-Length
        (Reply(b"", status=500), "HTTP 500"),
        (Reply(b"", status=302, headers=(("Location", "file:///etc/passwd"),)), "redirected to 'file:///etc/passwd'"),
        (Reply(b"", status=301, headers=(("Location", "ftp://h/x"),)), "redirected to 'ftp://h/x', which is not"),
        (Reply(b"", status=302, headers=(("Location", "/p/"),)), "more than 5 redirects"),
        (Reply(b"", status=302), "not an http or https URL"),
    ],
)
def test_hostile_answers(reply: Reply, why: str) -> None:
    with pytest.raises(IndexProblem, match=why) as caught:
        _get(reply)
    assert "\n" not in str(caught.value)


def test_a_redirect_to_http_is_followed() -> None:
    assert _get(Reply(b"", status=302, headers=(("Location", "/q/"),))) == b"ok"


def test_not_served() -> None:
    with pytest.raises(NotServed):
        _get(Reply(b"", status=200), path="/nothing/")


def test_a_trickle_ends_at_the_deadline() -> None:
    started = time.monotonic()
    with pytest.raises(IndexProblem, match=r"no complete answer within 0\.8 s"):
        _get(Reply(b"x" * 200, trickle=0.05), deadline=0.8, timeout=5.0)
    assert time.monotonic() - started < 3


def test_nothing_listening() -> None:
    with served({}) as base:
        port = base.rsplit(":", 1)[1]
    with pytest.raises(IndexProblem, match="refused"):
        Client(2.0).get(f"http://127.0.0.1:{port}/x/", "*/*", LIMIT)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://h/x", "http:///x", "http://h:99999/x"])
def test_bad_urls(url: str) -> None:
    with pytest.raises(IndexProblem):
        Client(2.0).get(url, "*/*", LIMIT)
