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
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import tarfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

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


@dataclass(frozen=True)
class Archive:
    """A `docker save` archive read once: each layer-like blob read, the small other members kept, links."""

    layers: Mapping[str, Layer]
    kept: Mapping[str, bytes]
    links: Mapping[str, str]

    def resolve(self, name: str) -> str:
        name = image_path(name)
        for _ in range(40):
            if name not in self.links:
                break
            name = self.links[name]
        return name


def read_archive(stream: IO[bytes], secrets: Sequence[Secret]) -> Archive:
    """Read a `docker save` archive as a stream: every member that is a tar (or gzip'd tar) is read as a
    layer; small other members are kept (manifest.json and the configuration). tarfile.TarError when the
    archive itself breaks off."""
    layers: dict[str, Layer] = {}
    kept: dict[str, bytes] = {}
    links: dict[str, str] = {}
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
            if kind == "zstd":
                layers[name] = Layer(problem="it is zstd-compressed, which this check does not read")
            elif kind in ("tar", "gzip"):
                try:
                    with tarfile.open(fileobj=file, mode="r|gz" if kind == "gzip" else "r|") as layer:
                        layers[name] = read_layer(layer, secrets)
                except (tarfile.TarError, EOFError, OSError) as exc:
                    layers[name] = Layer(problem=f"it could not be read as a tar ({exc})")
            elif member.size <= KEPT:
                kept[name] = file.read()
    return Archive(layers, kept, links)


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
    engine: Engine, reference: str, secrets: Sequence[tuple[str, bytes]], cancelled: threading.Event | None = None
) -> Scan:
    """What the layers of `reference` hold that no image may (see the module). EngineError when the engine
    cannot export it; not scanned (saying why) when the archive, or one of its layers, could not be read."""
    try:
        with engine.exported(reference, cancelled) as stream:
            archive = read_archive(stream, secrets_of(secrets))
    except tarfile.TarError as exc:
        return Scan(SECRETS, scanned=False, note=f"the exported image could not be read: {exc}")
    try:
        order = layer_order(archive)
    except ValueError as exc:
        return Scan(SECRETS, scanned=False, note=f"the exported image could not be read: {exc}")
    found, problems = findings(archive, order)
    entries = sum(archive.layers[n].entries for n in set(order.names) if n in archive.layers)
    note = f"{len(order.names)} layers, {entries} entries"
    if problems:
        return Scan(SECRETS, tuple(found), scanned=False, note="; ".join([note, *problems]))
    return Scan(SECRETS, tuple(found), note=note)
