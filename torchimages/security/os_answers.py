"""The os-updates answers of one run of the tool: an image whose first look (os-release, apt's configuration,
its sources' entries and files, byte for byte, the checksums of its keyrings (through links, wherever apt's
options put them), of apt's auth.conf files, CA bundles and any file an apt option names, the
installed packages by name, architecture and version) and whose proxies (Env) are those of an image already
scanned in this run, on the same network, gets that scan's answer instead of a second refresh. A look that
cannot stand for its image (os_updates.look: `unshared`) is kept under no key.

Held by the run's GateOptions (cli/common.py makes one per command), never written anywhere: it never outlives
the run. Only an answer that looked is kept (a scan that could not look is tried again for the next image).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass

from torchimages.security.model import Scan


@dataclass(frozen=True)
class Answer:
    """A scan's answer and the tag of the image it was made for."""

    scan: Scan
    tag: str


def key(network: str, look: str, env: str = "") -> str:
    """What an answer is kept under: the network the refresh used, the first look's whole text and the image's
    Env that apt heeds (os_updates.proxies)."""
    return hashlib.sha256(f"{network}\0{look}\0{env}".encode("utf-8", "surrogateescape")).hexdigest()


class Answers:
    """The answers of one run, by `key` (thread-safe: the builder gates several images at once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._found: dict[str, Answer] = {}

    def get(self, found: str) -> Answer | None:
        with self._lock:
            return self._found.get(found)

    def put(self, found: str, scan: Scan, tag: str) -> None:
        """Keep the first answer that looked (scanned) under `found`."""
        if not scan.scanned:
            return
        with self._lock:
            self._found.setdefault(found, Answer(scan, tag))
