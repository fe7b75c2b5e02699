"""A registry that trickles its answer cannot hold a command forever: every question has an overall deadline.

The server is real (a TCP socket on 127.0.0.1 in a thread): it answers the status line, then one header line
every 0.2 s, which a per-read timeout alone never ends. It stops by itself after TRICKLE_S, so a client
without a deadline fails the test instead of hanging it."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from torchimages import registry

TRICKLE_S = 8.0
DEADLINE_S = 1.0


class _Trickle(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.recv(65536)
        self.request.sendall(b"HTTP/1.1 200 OK\r\n")
        end = time.monotonic() + TRICKLE_S
        with contextlib.suppress(OSError):
            while time.monotonic() < end:
                self.request.sendall(b"X-Slow: 1\r\n")
                time.sleep(0.2)


@contextlib.contextmanager
def trickling_registry() -> Iterator[str]:
    """`127.0.0.1:PORT` of a registry that never finishes its headers."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Trickle)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_trickling_registry_ends_at_the_deadline() -> None:
    with trickling_registry() as host:
        started = time.monotonic()
        with pytest.raises(registry.RegistryError) as caught:
            registry.resolve_digest(f"{host}/library/ubuntu:24.04", deadline=DEADLINE_S)
        took = time.monotonic() - started
    assert DEADLINE_S * 0.9 <= took < DEADLINE_S + 1.5, took
    assert f"no complete answer within {DEADLINE_S:g} s (TORCHIMAGES_REGISTRY_DEADLINE_S)" in str(caught.value)
    assert str(caught.value).startswith(f"{host}/library/ubuntu:24.04: {host} does not answer")


def test_a_refused_connection_is_not_called_a_deadline() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(registry.RegistryError) as caught:
        registry.resolve_digest(f"127.0.0.1:{port}/a:1", deadline=5)
    assert "refused" in str(caught.value) and "within" not in str(caught.value)


def test_lock_bases_against_a_trickling_mirror_ends_with_one_line_per_base(
    cli: Callable[..., tuple[int, str, str]], write_matrix: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_matrix("matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8'}\n")
    monkeypatch.setenv("TORCHIMAGES_REGISTRY_DEADLINE_S", str(DEADLINE_S))
    with trickling_registry() as host:
        started = time.monotonic()
        code, out, err = cli("lock", "--bases", "--matrix", str(path), "--base-registry", f"{host}/hub")
        took = time.monotonic() - started
    assert code == 1 and out == "" and took < DEADLINE_S + 2.5, (code, took, err)
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert errors and all(f"within {DEADLINE_S:g} s" in line for line in errors), err
    assert err.splitlines()[-1].startswith("nothing written") and not (path.parent / "matrix.bases.lock").exists()


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf", "nan"])
def test_a_bad_deadline_is_refused_before_any_question(
    cli: Callable[..., tuple[int, str, str]], monkeypatch: pytest.MonkeyPatch, value: str, tmp_path: Path
) -> None:
    monkeypatch.setenv("TORCHIMAGES_REGISTRY_DEADLINE_S", value)
    code, out, err = cli("lock", "--bases", "--matrix", str(tmp_path / "none.yaml"))
    assert code == 2 and out == ""
    rule = "must be a number of seconds above 0, e.g. 60 (default 30)"
    assert err == f"error: TORCHIMAGES_REGISTRY_DEADLINE_S={value!r} {rule}\n"


class _FileRealm(socketserver.BaseRequestHandler):
    """A registry whose token challenge names a realm on this machine's disk."""

    def handle(self) -> None:
        self.request.recv(65536)
        self.request.sendall(
            b'HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm="file:///etc/hostname",service=x\r\n'
            b"Content-Length: 0\r\nConnection: close\r\n\r\n"
        )


def test_a_token_realm_is_fetched_over_http_only() -> None:
    """urllib opens file: and ftp: URLs too: a registry's word must not make the tool read a local file."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _FileRealm)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(registry.RegistryError) as caught:
            registry.resolve_digest(f"127.0.0.1:{server.server_address[1]}/a:1", deadline=5)
    finally:
        server.shutdown()
        server.server_close()
    assert "the registry's token realm 'file:///etc/hostname': a URL here is http/https://" in str(caught.value)


class _Silent(socketserver.BaseRequestHandler):
    """Takes the connection and the request, and never says a word (until the test ends it)."""

    def handle(self) -> None:
        self.request.recv(65536)
        self.request.settimeout(TRICKLE_S)
        with contextlib.suppress(OSError):
            self.request.recv(1)  # returns when the client goes (or TRICKLE_S passes)


class _Huge(socketserver.BaseRequestHandler):
    """Answers every manifest question with 50 MB (no digest header): no manifest is that large."""

    SIZE = 50 * 1024 * 1024

    def handle(self) -> None:
        self.request.recv(65536)
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {self.SIZE}\r\n\r\n"
        with contextlib.suppress(OSError):
            self.request.sendall(head.encode())
            chunk = b" " * 65536
            for _ in range(self.SIZE // len(chunk)):
                self.request.sendall(chunk)


@contextlib.contextmanager
def serving(handler: type[socketserver.BaseRequestHandler]) -> Iterator[str]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_registry_that_takes_the_connection_and_never_answers_ends_at_the_deadline() -> None:
    with serving(_Silent) as host:
        started = time.monotonic()
        with pytest.raises(registry.RegistryError) as caught:
            registry.resolve_digest(f"{host}/a:1", deadline=DEADLINE_S)
        took = time.monotonic() - started
    assert took < DEADLINE_S + 1.5, took
    assert f"does not answer (no complete answer within {DEADLINE_S:g} s" in str(caught.value)


def test_a_manifest_of_megabytes_is_refused_not_hashed_nor_held(monkeypatch: pytest.MonkeyPatch) -> None:
    """A body past MAX_MANIFEST_BYTES is no manifest: hashing its first part would name a digest the registry
    never served, and reading it all would hold 50 MB."""
    monkeypatch.setattr(registry, "MAX_MANIFEST_BYTES", 1024 * 1024)
    with serving(_Huge) as host:
        started = time.monotonic()
        with pytest.raises(registry.RegistryError) as caught:
            registry.resolve_digest(f"{host}/a:1", deadline=20)
    assert time.monotonic() - started < 10
    assert str(caught.value) == f"{host}/a:1: {host} answered more than 1048576 bytes, which no manifest is"


class _Truncated(socketserver.BaseRequestHandler):
    """Promises a manifest of 1000 bytes, sends 10 and hangs up."""

    def handle(self) -> None:
        self.request.recv(65536)
        self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"{" * 10)


def test_a_manifest_cut_short_is_said_not_hashed() -> None:
    with serving(_Truncated) as host, pytest.raises(registry.RegistryError) as caught:
        registry.resolve_digest(f"{host}/a:1", deadline=10)
    assert str(caught.value).startswith(f"{host}/a:1: {host} does not answer (IncompleteRead(10 bytes read")
