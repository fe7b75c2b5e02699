"""Network faults on loopback for the retry tests: real sockets, nothing mocked.

`ConnectionDropper` relays TCP to a target but resets every connection in the first `window_s` seconds
after the first one: one whole attempt (however many connections a client makes) fails, the next works.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

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
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


@contextmanager
def connection_dropper(target: str, window_s: float = 1.0) -> Iterator[ConnectionDropper]:
    """A `ConnectionDropper` in front of `target` ("host:port"), closed afterwards."""
    host, port = target.rsplit(":", 1)
    dropper = ConnectionDropper((host, int(port)), window_s)
    try:
        yield dropper
    finally:
        dropper.close()
