"""Credentials, private keys, the build's own secrets and stray files, in any layer of an image: read from the
layer tarballs of the image as the engine exports it (`docker save` of its id, `Engine.exported`), streamed
and never written to disk, so a file that a later layer deletes is still found in the layer that holds it.

A finding's `key` (what an allowlist entry names) is the path in the image, absolute: `/root/.netrc` (a stray
folder's findings are grouped under the entry directly in /tmp, /var/tmp or /root: `/tmp/build`); its
`subject` the layer, `layer 3 of 12 (sha256:0123456789ab)`, with `, deleted in layer 5` when a later layer's
whiteout removes it from the final filesystem (it is still in the pushed image); `detail` the path and what
it is (`/root/.netrc: a netrc file (logins and passwords)`).

The rules are leaks.py's (what no layer may hold, on one entry); here, reading the layers.

Archives: Docker 25+'s OCI layout (blobs/sha256/...) and the older `<id>/layer.tar`, both through
manifest.json's `Layers` (read wherever it comes in the stream: each blob's hits are kept, and put in order at
the end). Layers are the uncompressed tars `docker save` writes; gzip ones (an engine on the containerd image
store may keep them so) are read too; a zstd layer, or one not read, makes the scan "not scanned" saying which,
never clean.

With a cache (layer_cache.LayerCache, through `Cache`), each layer's result is kept by its diff_id and read
back instead of the layer: the image's layers are asked of the engine first, and when every one is kept
nothing is exported. Otherwise the archive is read as above, but a blob `blobs/sha256/<hex>` whose diff_id is
kept is only hashed as it streams past (its content must hash to its name, else the layer is "not read");
a layer read is kept only under the digest its bytes were seen to have (the diff_id the configuration names).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import posixpath
import tarfile
import threading
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Protocol, cast

from torchimages.engine import Engine
from torchimages.security.leaks import (
    HEAD,
    MARK_MAX,
    Hit,
    Secret,
    credential_rule,
    image_path,
    key_candidate,
    private_key,
    secrets_of,
    stray_hits,
    stray_place,
)
from torchimages.security.model import SECRETS, Finding, Scan

KEPT = 1 << 20  # archive members up to this size that are not layers are kept (manifest.json, configurations)
CHUNK = 1 << 20

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


@dataclass(frozen=True)
class Layer:
    """One layer tarball read: its hits, the paths its whiteouts delete from the layers below, the folders it
    makes opaque (their lower contents gone), how many entries it has; `problem` why it was not read."""

    hits: tuple[Hit, ...] = ()
    deleted: frozenset[str] = frozenset()
    opaque: frozenset[str] = frozenset()
    entries: int = 0
    problem: str = ""


class Cache(Protocol):
    """Layers read before, by diff_id and the scan's secrets (layer_cache.LayerCache)."""

    def get(self, diff_id: str, secrets: Sequence[Secret]) -> Layer | None: ...

    def put(self, diff_id: str, secrets: Sequence[Secret], layer: Layer) -> None: ...


# --- one layer ----------------------------------------------------------------------------------------------


def _read(file: IO[bytes], want: int, digest: bool) -> tuple[bytes, str | None]:
    """A member's first `want` bytes, and the sha256 of all of it when `digest`."""
    head = file.read(want) if want else b""
    if not digest:
        return head, None
    hashed = hashlib.sha256(head)
    while chunk := file.read(CHUNK):
        hashed.update(chunk)
    return head, hashed.hexdigest()


def read_layer(layer: tarfile.TarFile, secrets: Sequence[Secret]) -> Layer:
    """Every rule over one layer tarball, read as a stream (mode 'r|')."""
    by_size: dict[int, list[Secret]] = {}
    for secret in secrets:
        by_size.setdefault(secret.size, []).append(secret)
    hits: list[Hit] = []
    stray: dict[str, list[str]] = {}
    deleted, opaque = set(), set()
    entries = 0
    for member in layer:
        entries += 1
        path = image_path(member.name)
        base = posixpath.basename(path)
        if base == OPAQUE:
            opaque.add(posixpath.dirname(path))
            continue
        if base.startswith(WHITEOUT):
            deleted.add(posixpath.join(posixpath.dirname(path), base[len(WHITEOUT) :]))
            continue
        if member.isdir():
            continue
        found = _file_hits(layer, member, path, by_size) if member.isfile() or member.islnk() else []
        hits += found
        where = stray_place(path)
        if where and not found and not (member.isfile() and member.size == 0):
            stray.setdefault(where[1], []).append(path)
    return Layer(tuple(hits + stray_hits(stray)), frozenset(deleted), frozenset(opaque), entries)


def _file_hits(
    layer: tarfile.TarFile, member: tarfile.TarInfo, path: str, by_size: Mapping[int, list[Secret]]
) -> list[Hit]:
    """The credential, private key and build secret rules on one file (a hard link: by its path only)."""
    rule = credential_rule(path)
    regular = member.isfile()
    want = 0
    if regular and rule is not None and rule.mark is not None:
        want = MARK_MAX
    elif regular and key_candidate(path, member.size):
        want = HEAD
    matching = by_size.get(member.size, []) if regular else []
    if not want and not matching:
        return [Hit(path, rule.what)] if rule is not None and rule.mark is None else []
    file = layer.extractfile(member)
    assert file is not None
    head, digest = _read(file, want, bool(matching))
    hits = []
    if rule is not None and (rule.mark is None or rule.mark.search(head)):
        hits.append(Hit(path, rule.what))
    key = private_key(head) if regular and key_candidate(path, member.size) else None
    if key:
        hits.append(Hit(path, f"a private key ({key})"))
    hits += [Hit(path, f"the content of the build's secret {s.name}") for s in matching if s.sha256 == digest]
    return hits


# --- the archive ----------------------------------------------------------------------------------------------


def _kind(head: bytes) -> str:
    """What an archive member is, by its first bytes: a tar (or an empty one: zero blocks), gzip, zstd."""
    if head[257:262] == b"ustar" or (len(head) >= 512 and not any(head[:512])):
        return "tar"
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if head[:4] == b"\x28\xb5\x2f\xfd":
        return "zstd"
    return "other"


def _link_target(member: tarfile.TarInfo) -> str:
    """Where a link in the archive points, as an archive path (a symlink is relative to its folder)."""
    if member.islnk():
        return image_path(member.linkname)
    return image_path(posixpath.join(posixpath.dirname(image_path(member.name)), member.linkname))


class _Hashed:
    """A file read through sha256: every byte read passes the hash (`drained` reads the rest)."""

    def __init__(self, file: IO[bytes]) -> None:
        self.file = file
        self.hashed = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self.file.read(size)
        self.hashed.update(data)
        return data

    def drained(self) -> str:
        """The rest read; the sha256 of all of it, as a digest."""
        while self.read(CHUNK):
            pass
        return "sha256:" + self.hashed.hexdigest()


def _blob_digest(name: str) -> str | None:
    """The digest an OCI layout's blob is named by (`/blobs/sha256/<hex>`), or None."""
    folder, _, hex_part = name.rpartition("/")
    if folder.endswith("/blobs/sha256") and len(hex_part) == 64 and all(c in "0123456789abcdef" for c in hex_part):
        return "sha256:" + hex_part
    return None


@dataclass(frozen=True)
class Archive:
    """A `docker save` archive read once: each layer-like blob read, the small other members kept, links;
    with a cache, the sha256 of each layer's uncompressed bytes (`digests`) and the blobs taken from it."""

    layers: Mapping[str, Layer]
    kept: Mapping[str, bytes]
    links: Mapping[str, str]
    digests: Mapping[str, str] = field(default_factory=dict)
    cached: frozenset[str] = frozenset()

    def resolve(self, name: str) -> str:
        name = image_path(name)
        for _ in range(40):
            if name not in self.links:
                break
            name = self.links[name]
        return name


def read_archive(stream: IO[bytes], secrets: Sequence[Secret], known: Mapping[str, Layer] | None = None) -> Archive:
    """Read a `docker save` archive as a stream: every member that is a tar (or gzip'd tar) is read as a
    layer; small other members are kept (manifest.json and the configuration). tarfile.TarError when the
    archive itself breaks off. With `known` (a cache's layers by diff_id; {}: a cache that holds none of
    them) each layer's bytes are hashed, and a tar blob named by a known digest is only hashed, not read."""
    layers: dict[str, Layer] = {}
    kept: dict[str, bytes] = {}
    links: dict[str, str] = {}
    digests: dict[str, str] = {}
    cached: set[str] = set()
    with tarfile.open(fileobj=stream, mode="r|") as saved:
        for member in saved:
            name = image_path(member.name)
            if member.issym() or member.islnk():
                links[name] = _link_target(member)
                continue
            if not member.isfile():
                continue
            file = saved.extractfile(member)
            assert file is not None
            kind = _kind(file.peek(512)[:512])  # type: ignore[attr-defined]  # an io.BufferedReader
            named = _blob_digest(name)
            if kind == "tar" and known is not None and named is not None and named in known:
                digests[name] = _Hashed(file).drained()
                if digests[name] == named:
                    layers[name] = known[named]
                    cached.add(name)
                else:
                    layers[name] = Layer(problem="its content does not match its digest")
            elif kind == "zstd":
                layers[name] = Layer(problem="it is zstd-compressed, which this check does not read")
            elif kind in ("tar", "gzip") and known is None:
                try:
                    with tarfile.open(fileobj=file, mode="r|gz" if kind == "gzip" else "r|") as layer:
                        layers[name] = read_layer(layer, secrets)
                except (tarfile.TarError, EOFError, OSError) as exc:
                    layers[name] = Layer(problem=f"it could not be read as a tar ({exc})")
            elif kind in ("tar", "gzip"):
                try:
                    source = gzip.GzipFile(fileobj=file, mode="rb") if kind == "gzip" else file
                    hashed = _Hashed(cast(IO[bytes], source))
                    with tarfile.open(fileobj=cast(IO[bytes], hashed), mode="r|") as layer:
                        read = read_layer(layer, secrets)
                    digests[name] = hashed.drained()
                    layers[name] = read
                except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
                    layers[name] = Layer(problem=f"it could not be read as a tar ({exc})")
            elif member.size <= KEPT:
                kept[name] = file.read()
    return Archive(layers, kept, links, digests, frozenset(cached))


@dataclass(frozen=True)
class Order:
    """The image's layers from manifest.json, bottom first: each one's archive path and digest (its diff_id
    from the configuration, else the blob's name)."""

    names: tuple[str, ...]
    digests: tuple[str, ...]


def layer_order(archive: Archive) -> Order:
    """The one image's layers in order; ValueError saying why not."""
    if "/manifest.json" not in archive.kept:
        raise ValueError("the archive has no manifest.json")
    try:
        (entry,) = json.loads(archive.kept["/manifest.json"])
        names = tuple(archive.resolve(str(name)) for name in entry["Layers"])
        config_name = archive.resolve(str(entry.get("Config", "")))
    except (ValueError, TypeError, KeyError, AttributeError):
        raise ValueError("manifest.json does not name one image's layers") from None
    diff_ids: list[str] = []
    try:
        config = json.loads(archive.kept.get(config_name, b"{}"))
        diff_ids = [str(d) for d in config["rootfs"]["diff_ids"]]
    except (ValueError, TypeError, KeyError):
        pass
    if len(diff_ids) != len(names):
        diff_ids = ["sha256:" + posixpath.basename(n) if "/sha256/" in n else n.lstrip("/") for n in names]
    return Order(names, tuple(diff_ids))


def _short(digest: str) -> str:
    algorithm, _, hex_part = digest.partition(":")
    return f"{algorithm}:{hex_part[:12]}" if hex_part else digest


def deleted_by(path: str, above: Iterable[tuple[int, Layer]]) -> int | None:
    """The first layer above (number, layer) whose whiteouts delete `path`: itself, a folder above it, or an
    opaque folder above it."""
    ancestors = [posixpath.dirname(path)]
    while ancestors[-1] != "/":
        ancestors.append(posixpath.dirname(ancestors[-1]))
    for number, layer in above:
        if path in layer.deleted or any(a in layer.deleted or a in layer.opaque for a in ancestors):
            return number
    return None


def findings(archive: Archive, order: Order) -> tuple[list[Finding], list[str]]:
    """The findings of every layer in order (subject: the layer, and where a later one deletes it), and the
    problems of the layers not read."""
    found, problems = [], []
    total = len(order.names)
    read = [archive.layers.get(name) for name in order.names]
    for at, (layer, digest) in enumerate(zip(read, order.digests, strict=True)):
        where = f"layer {at + 1} of {total} ({_short(digest)})"
        if layer is None or layer.problem:
            problems.append(f"{where} not read: {layer.problem if layer else 'it is not in the archive'}")
            continue
        above = [(n + 1, lay) for n, lay in enumerate(read) if n > at and lay is not None]
        for hit in layer.hits:
            gone = deleted_by(hit.path, above)
            subject = where + (f", deleted in layer {gone}" if gone else "")
            found.append(Finding(SECRETS, hit.path, subject, f"{hit.path}: {hit.detail}"))
    return found, problems


def scan(
    engine: Engine,
    reference: str,
    secrets: Sequence[tuple[str, bytes]],
    cancelled: threading.Event | None = None,
    cache: Cache | None = None,
) -> Scan:
    """What the layers of `reference` hold that no image may (see the module). EngineError when the engine
    cannot inspect or export it; not scanned (saying why) when the archive, or one of its layers, could not
    be read. With a `cache`, layers kept there are not read again (nothing is exported when all are)."""
    build_secrets = secrets_of(secrets)
    known: dict[str, Layer] | None = None
    if cache is not None:
        info = engine.inspect(reference)
        diff_ids = info.layers if info is not None else ()
        known = {d: layer for d in dict.fromkeys(diff_ids) if (layer := cache.get(d, build_secrets)) is not None}
        if diff_ids and all(d in known for d in diff_ids):
            return _result(Archive(known, {}, {}, cached=frozenset(known)), Order(diff_ids, diff_ids))
    try:
        with engine.exported(reference, cancelled) as stream:
            archive = read_archive(stream, build_secrets, known)
    except tarfile.TarError as exc:
        return Scan(SECRETS, scanned=False, note=f"the exported image could not be read: {exc}")
    try:
        order = layer_order(archive)
    except ValueError as exc:
        return Scan(SECRETS, scanned=False, note=f"the exported image could not be read: {exc}")
    if cache is not None:
        keep(cache, build_secrets, archive, order)
    return _result(archive, order)


def keep(cache: Cache, secrets: Sequence[Secret], archive: Archive, order: Order) -> None:
    """Put each layer read (not from the cache, no problem) in the cache under its diff_id, when its bytes
    were seen to hash to it."""
    for name, digest in dict(zip(order.names, order.digests, strict=True)).items():
        layer = archive.layers.get(name)
        if (
            layer is not None
            and not layer.problem
            and name not in archive.cached
            and archive.digests.get(name) == digest
        ):
            cache.put(digest, secrets, layer)


def _result(archive: Archive, order: Order) -> Scan:
    """The scan's answer: the findings in layer order, the layers and entries counted (and those from the
    cache), the layers not read."""
    found, problems = findings(archive, order)
    entries = sum(archive.layers[n].entries for n in set(order.names) if n in archive.layers)
    note = f"{len(order.names)} layers, {entries} entries"
    from_cache = sum(1 for name in order.names if name in archive.cached)
    if from_cache:
        note += f" ({from_cache} from the cache)"
    if problems:
        return Scan(SECRETS, tuple(found), scanned=False, note="; ".join([note, *problems]))
    return Scan(SECRETS, tuple(found), note=note)
