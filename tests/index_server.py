"""A loopback simple-API index for the kb tests: http.server on 127.0.0.1 in a thread, serving the answers a
test writes (path -> Reply), and the hostile ones (a trickle, a lying Content-Length, a redirect, a status)."""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Reply:
    """One answer: its body, media type, status, extra headers; `trickle`: seconds between bytes; `length`: the
    Content-Length to claim (None: the body's, -1: none); `asked`: an event set when it starts."""

    body: bytes = b""
    content_type: str = "application/octet-stream"
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    trickle: float = 0.0
    length: int | None = None
    asked: threading.Event | None = None  # set when the answer starts


def served(replies: Mapping[str, Reply]) -> contextlib.AbstractContextManager[str]:
    """Serve `replies` (by path, such as `/simple/torch/`); yields the base URL (`http://127.0.0.1:PORT`)."""
    return _serving(dict(replies))


@contextlib.contextmanager
def _serving(replies: dict[str, Reply]) -> Iterator[str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            reply = replies.get(self.path.split("?")[0], Reply(b"not here", "text/plain", 404))
            if reply.asked is not None:
                reply.asked.set()
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            if reply.length != -1:  # -1: no Content-Length (the end of the connection ends the body)
                self.send_header("Content-Length", str(len(reply.body) if reply.length is None else reply.length))
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            try:
                if reply.trickle:
                    for byte in reply.body:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(reply.trickle)
                else:
                    self.wfile.write(reply.body)
            except OSError:
                pass  # the client hung up (as it should on a trickle)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
