"""Blobs of the engine's containerd content store, read one by one by their digest through containerd's own client
(`ctr content get`): an image's index, attestation manifests and in-toto statements are a few small JSON blobs
beside gigabytes of layers, which `docker save` would stream past (a minute for a CUDA image; here milliseconds).

Only an engine on the containerd image store keeps its images there, in the namespace `moby` (dockerd's default
`--containerd-namespace`), behind the socket of the containerd it uses: the system's (containerd's default
address) or its own (dockerd's default exec root), each tried in turn where this process may use it (root, as a
rule: a user of the `docker` group may not, and reads `docker save`). TORCHIMAGES_CONTAINERD_ADDRESS names the
one to read instead.
A blob counts only where its bytes hash to its digest, so a containerd other than the engine's (a remote engine,
another namespace) can only fail to answer, never answer falsely; a caller then reads the image's `docker save`.
(Asked whether a blob is there at all, as the local index asks of each manifest it names, a second containerd that
holds it would answer for the engine's: the default sockets are the engine's own and the system's.)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from torchimages import settings, values
from torchimages.engine import manifests
from torchimages.engine.process import captured, streamed
from torchimages.engine.types import StoredLayers

ADDRESS_VARIABLE = "TORCHIMAGES_CONTAINERD_ADDRESS"
ADDRESSES = ("/run/containerd/containerd.sock", "/var/run/docker/containerd/containerd.sock")
NAMESPACE = "moby"
GET_TIMEOUT_S = 60.0  # one blob of a local store: a JSON document, megabytes at most
CONFIG_BYTES = 64 << 20  # an image's configuration (its history and labels: kilobytes, as a rule)


class Unreadable(Exception):
    """A blob the content store did not give (not there, not reachable, or bytes that are not the digest's)."""


@dataclass(frozen=True)
class ContentStore:
    """containerd's client `ctr` and the socket of the engine's containerd."""

    ctr: str
    address: str
    namespace: str = NAMESPACE

    def command(self, digest: str) -> list[str]:
        """The `ctr content get` of one blob."""
        return [self.ctr, "--address", self.address, "--namespace", self.namespace, "content", "get", digest]

    def get(self, digest: str, limit_bytes: int) -> bytes:
        """The blob named `digest` (`sha256:` and 64 hex digits), at most `limit_bytes`; Unreadable when it
        is not there, `ctr` fails, or its bytes do not hash to the digest."""
        if not values.is_digest(digest):
            raise Unreadable(f"{values.show(digest)} is not a sha256 digest")
        try:
            result = captured(self.command(digest), timeout_s=GET_TIMEOUT_S, limit_bytes=limit_bytes)
        except OSError as exc:
            raise Unreadable(f"could not run {self.ctr}: {exc.strerror or exc}") from None
        if result.status != 0:
            said = result.stopped or result.stderr.decode(errors="replace").strip()[-300:]
            raise Unreadable(f"`ctr content get {digest}`: {said or f'exit status {result.status}'}")
        if "sha256:" + hashlib.sha256(result.stdout).hexdigest() != digest:
            raise Unreadable(f"the content store's {digest} does not hash to its name")
        return result.stdout


def _socket(path: str) -> bool:
    """Whether `path` is a socket this process may connect to."""
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode) and os.access(path, os.R_OK | os.W_OK)
    except (OSError, ValueError):
        return False


def find_content_stores(environ: Mapping[str, str] | None = None) -> tuple[ContentStore, ...]:
    """The content stores to read, in turn (TORCHIMAGES_CONTAINERD_ADDRESS alone, else each of ADDRESSES that is
    a socket this process may use: a system containerd may run beside the engine's own), with `ctr` on PATH;
    none where there is none (then the caller reads `docker save`: a user who may not use the socket, not root)."""
    ctr = shutil.which("ctr")
    named = settings.text(ADDRESS_VARIABLE, environ)
    addresses = [named] if named else [a for a in ADDRESSES if _socket(a)]
    return tuple(ContentStore(ctr, address) for address in addresses) if ctr is not None else ()


@dataclass
class Blobs(Mapping[str, bytes]):
    """The content store's blobs as a mapping, each read when first asked for and kept; a blob that cannot be
    read, or any asked once `cancelled` is set, raises Unreadable (not KeyError: the store's silence says
    nothing of the image)."""

    store: ContentStore
    limit_bytes: int
    cancelled: threading.Event | None = None
    read: dict[str, bytes] = field(default_factory=dict)

    def __getitem__(self, digest: str) -> bytes:
        if self.cancelled is not None and self.cancelled.is_set():
            raise Unreadable("cancelled")
        if digest not in self.read:
            self.read[digest] = self.store.get(digest, self.limit_bytes)
        return self.read[digest]

    def __contains__(self, digest: object) -> bool:
        """Whether the blob is there: asking reads it (Unreadable when it cannot be read)."""
        return isinstance(digest, str) and isinstance(self[digest], bytes)

    def __iter__(self) -> Iterator[str]:
        return iter(self.read)

    def __len__(self) -> int:
        return len(self.read)


def _document(blobs: Mapping[str, bytes], digest: str, what: str) -> dict[str, Any]:
    try:
        found = json.loads(blobs[digest])
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise Unreadable(f"the {what} {digest} is not JSON") from None
    if not isinstance(found, dict):
        raise Unreadable(f"the {what} {digest} is not a JSON object")
    return found


def stored_layers(
    store: ContentStore, image_id: str, platform: str, cancelled: threading.Event | None = None
) -> StoredLayers:
    """The layers of `platform`'s image under `image_id` (an index, the containerd store's image id, or an image
    manifest): its manifest's layer blobs and its configuration's diff_ids, each document hashed to its digest.
    Unreadable when a document is not there or not what an image's is (the caller reads `docker save`)."""
    blobs = Blobs(store, manifests.MAX_BYTES, cancelled)
    try:
        top = manifests.parse(blobs[image_id], image_id)
        chosen = manifests.platform_entry(top, platform, image_id).digest if top.is_index else image_id
        if chosen != image_id and manifests.parse(blobs[chosen], chosen).is_index:
            raise Unreadable(f"{chosen} is an index, not an image manifest")
    except manifests.ManifestError as exc:
        raise Unreadable(str(exc)) from None
    manifest = _document(blobs, chosen, "image manifest")
    config, layers = manifest.get("config"), manifest.get("layers")
    config_digest = config.get("digest") if isinstance(config, dict) else None
    if not isinstance(config_digest, str) or not values.is_digest(config_digest) or not isinstance(layers, list):
        raise Unreadable(f"the image manifest {chosen} names no configuration or no list of layers")
    blob_digests = tuple(layer.get("digest") if isinstance(layer, dict) else None for layer in layers)
    configuration = _document(Blobs(store, CONFIG_BYTES, cancelled), config_digest, "configuration")
    rootfs = configuration.get("rootfs")
    diff_ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
    if not isinstance(diff_ids, list) or len(diff_ids) != len(blob_digests):
        raise Unreadable(f"the configuration {config_digest} names another count of layers than its manifest")
    if not all(values.is_digest(d) for d in (*blob_digests, *diff_ids)):
        raise Unreadable(f"the image manifest {chosen} or its configuration names a layer by no sha256 digest")

    def opened(blob: str) -> contextlib.AbstractContextManager[IO[bytes]]:
        return streamed(store.command(blob), cancelled)

    return StoredLayers(tuple(str(b) for b in blob_digests), tuple(str(d) for d in diff_ids), opened)
