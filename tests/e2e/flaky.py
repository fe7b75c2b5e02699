"""Network faults on loopback for the retry tests: real sockets, nothing mocked.

`ConnectionDropper` relays TCP to a target but resets every connection in the first `window_s` seconds
after the first one: one whole attempt (however many connections a client makes) fails, the next works.
`OutageProxy` is an HTTP proxy for apt that is down for a few seconds after a trigger request.
"""

from __future__ import annotations

import http.client
import http.server
import socket
import struct
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager, suppress

# SO_LINGER on, 0 s: close() sends a reset, as a crashed or overloaded server's network does.
_RESET = struct.pack("ii", 1, 0)


class ConnectionDropper:
    """A TCP relay on 127.0.0.1 that resets the connections of the first `window_s` seconds."""

    def __init__(self, target: tuple[str, int], window_s: float = 1.0) -> None:
        self.target = target
        self.window_s = window_s
        self.first_at: float | None = None
        self.dropped = 0
        self.relayed = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            now = time.monotonic()
            self.first_at = self.first_at if self.first_at is not None else now
            if now - self.first_at < self.window_s:
                self.dropped += 1
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
                client.close()
                continue
            self.relayed += 1
            upstream = socket.create_connection(self.target)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(source, sink), daemon=True).start()

    def close(self) -> None:
        self._listener.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(1 << 16):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@contextmanager
def connection_dropper(target: str, window_s: float = 1.0) -> Iterator[ConnectionDropper]:
    """A `ConnectionDropper` in front of `target` ("host:port"), closed afterwards."""
    host, port = target.rsplit(":", 1)
    dropper = ConnectionDropper((host, int(port)), window_s)
    try:
        yield dropper
    finally:
        dropper.close()


class _ForwardingHandler(http.server.BaseHTTPRequestHandler):
    """A plain-HTTP forward proxy (absolute-URI GETs, as apt sends to its http_proxy), keep-alive."""

    protocol_version = "HTTP/1.1"
    server: _ProxyServer

    def do_GET(self) -> None:
        if self.server.owner.should_fail(self.path):
            self.close_connection = True  # no answer, and the proxy is gone for a while
            return
        url = urllib.parse.urlsplit(self.path)
        upstream = http.client.HTTPConnection(url.hostname or "", url.port or 80, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        upstream.request("GET", url.path + (f"?{url.query}" if url.query else ""), headers=headers)
        answer = upstream.getresponse()
        body = answer.read()
        self.send_response(answer.status, answer.reason)
        for key, value in answer.getheaders():
            if key.lower() not in (*_HOP_BY_HOP, "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        upstream.close()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


_HOP_BY_HOP = ("connection", "keep-alive", "proxy-connection", "transfer-encoding", "proxy-authorization")


class _ProxyServer(http.server.ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, port: int, owner: OutageProxy) -> None:
        super().__init__(("127.0.0.1", port), _ForwardingHandler)
        self.owner = owner


class OutageProxy:
    """An HTTP proxy for apt that goes down once: the first request whose path contains `trigger` gets no
    answer and the proxy stops listening for `outage_s` seconds (connections are refused, as when a
    mirror or proxy restarts), then it serves again on the same port."""

    def __init__(self, trigger: str, outage_s: float = 2.5) -> None:
        self.trigger = trigger
        self.outage_s = outage_s
        self.failed: list[str] = []
        self.served_after = 0
        self._lock = threading.Lock()
        self._server = _ProxyServer(0, self)
        self.port = int(self._server.server_address[1])
        self._serve(self._server)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self, server: _ProxyServer) -> None:
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def should_fail(self, path: str) -> bool:
        with self._lock:
            if self.failed or self.trigger not in path:
                self.served_after += bool(self.failed)
                return False
            self.failed.append(path)
        threading.Thread(target=self._outage, daemon=True).start()
        return True

    def _outage(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        time.sleep(self.outage_s)
        self._server = _ProxyServer(self.port, self)
        self._serve(self._server)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
