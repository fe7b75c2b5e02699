"""A loopback file server for the kb's range-request tests: http.server on 127.0.0.1 in a thread, each path
answered by a function of the request's Range header (`ranges(body)` answers as a server with range support
does; a test writes the hostile ones), and what it sent counted (bytes written, requests) by path."""

from __future__ import annotations

import base64
import contextlib
import http.server
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Answer:
    """One answer: its status, headers (Content-Length is the body's unless given) and body."""

    status: int
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()


Answering = Callable[[str | None], Answer]  # the request's Range header (None: none) -> the answer


@dataclass
class Log:
    """What the server did: requests and bytes written by path, and the Range headers asked."""

    requests: dict[str, int] = field(default_factory=dict)
    sent: dict[str, int] = field(default_factory=dict)
    ranges: list[str | None] = field(default_factory=list)
    authorizations: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Authorization header)
    done: threading.Event = field(default_factory=threading.Event)  # set when an answer ends


def asked(header: str | None, size: int) -> tuple[int, int] | None:
    """The byte range (first, last) a `Range: bytes=` header asks of a `size`-byte file (None: none it holds)."""
    found = re.fullmatch(r"bytes=(\d*)-(\d*)", header or "")
    if found is None or found.groups() == ("", ""):
        return None
    first, last = found.groups()
    if not first:
        return max(0, size - int(last)), size - 1
    end = size - 1 if not last else min(int(last), size - 1)
    return (int(first), end) if int(first) <= end else None


def basic(login: str) -> str:
    """The Authorization header of HTTP basic authentication with `login` (`USER:PASSWORD`)."""
    return "Basic " + base64.b64encode(login.encode()).decode()


def ranges(body: bytes) -> Answering:
    """Answers as a server with range support: 206 with the bytes asked and their Content-Range, 416 for a range
    outside the file, 200 with the whole body without a Range header."""

    def answer(header: str | None) -> Answer:
        if header is None:
            return Answer(200, body)
        span = asked(header, len(body))
        if span is None:
            return Answer(416, b"", (("Content-Range", f"bytes */{len(body)}"),))
        first, last = span
        return Answer(206, body[first : last + 1], (("Content-Range", f"bytes {first}-{last}/{len(body)}"),))

    return answer


@contextlib.contextmanager
def serving(files: Mapping[str, Answering], log: Log | None = None, login: str | None = None) -> Iterator[str]:
    """Serve `files` (by path); yields the base URL (`http://127.0.0.1:PORT`); `log` records what was sent;
    `login` (`USER:PASSWORD`): every request without it as HTTP basic authentication is answered 401."""
    record = log if log is not None else Log()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            header = self.headers.get("Range")
            record.ranges.append(header)
            record.requests[path] = record.requests.get(path, 0) + 1
            record.authorizations.append((path, self.headers.get("Authorization")))
            answering = files.get(path)
            answer = answering(header) if answering else Answer(404, b"not here")
            if login is not None and self.headers.get("Authorization") != basic(login):
                answer = Answer(401, b"a login is needed", (("WWW-Authenticate", 'Basic realm="index"'),))
            self.send_response(answer.status)
            names = {name.lower() for name, _ in answer.headers}
            if "content-length" not in names:
                self.send_header("Content-Length", str(len(answer.body)))
            for name, value in answer.headers:
                self.send_header(name, value)
            self.end_headers()
            try:
                for at in range(0, len(answer.body), 64 * 1024):
                    self.wfile.write(answer.body[at : at + 64 * 1024])
                    record.sent[path] = record.sent.get(path, 0) + len(answer.body[at : at + 64 * 1024])
            except OSError:
                pass  # the client hung up (as it should on a whole file)
            finally:
                record.done.set()

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
