"""Pushes with zstd-compressed layers, proven to be the verified image before anything is uploaded.

`docker push` from the engine's classic (graphdriver) image store always sends gzip layers, and buildx's
`compression=zstd` is ignored by its `docker` driver there (the engine pushes; measured with Docker 26.1.5
and buildx 0.13.1, docs/benchmarks.md). So a zstd push goes around the engine's push:

1. `docker save IMAGE-ID` (by id, never by a name that could move) is read as a stream, once; each file in
   it is hashed and each layer compressed with the `zstd` program (level 3, all cores) as it streams by;
2. the image is proven to be the verified one: the saved configuration's sha256 is the image id the
   tags name (so its labels, environment and `rootfs.diff_ids` are the verified image's, byte for byte),
   and every saved layer's sha256 is its diff_id there;
3. an OCI image layout is written: that configuration unchanged (OCI config media type), the zstd layers
   (`application/vnd.oci.image.layer.v1.tar+zstd`), an OCI manifest;
4. `skopeo copy --preserve-digests` uploads the layout under each tag (skopeo brings registry logins,
   certificates and retries of single requests; --preserve-digests makes it refuse to change a byte), and
   the manifest digest it reports must be the layout's.

A pull of the result decompresses each layer and checks it against the diff_ids of that configuration,
so what a puller gets is the verified image or nothing. Both formats of `docker save` are read: Docker
25+'s OCI-style archive (`blobs/sha256/...`) and 20.10's (`<id>/layer.tar`, `<id>.json`).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, cast

from torchimages.engine.attestation import oci_annotations
from torchimages.engine.process import captured, streamed
from torchimages.engine.types import EngineError, ImageInfo

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
ZSTD_LAYER = "application/vnd.oci.image.layer.v1.tar+zstd"
LAYOUT_REF = "verified"  # the one manifest's name in the layout (oci:DIR:verified)
ZSTD_LEVEL = 3  # zstd's own default, and containers/image's and BuildKit's
KEPT = 1 << 20  # files up to this size are held in memory (configs, manifest.json, small layers)
CHUNK = 1 << 20
HOW_TO_GET_THEM = (
    "install skopeo (1.6 or newer: `copy --preserve-digests`) and zstd (Debian/Ubuntu: "
    "`apt-get install skopeo zstd`), or push with --compression gzip (the default)"
)

# Compress a stream into a file; returns the sha256 of what it read (the uncompressed bytes).
Compressor = Callable[[IO[bytes], Path], str]


def zstd_problem(which: Callable[[str], str | None] = shutil.which) -> str | None:
    """Why `--compression zstd` cannot push from this machine, or None: the `zstd` and `skopeo` programs
    must be there, and skopeo must have `copy --preserve-digests`. Asked before any build."""
    missing = [name for name in ("skopeo", "zstd") if which(name) is None]
    if missing:
        return f"--compression zstd needs {' and '.join(missing)} on PATH (not found); {HOW_TO_GET_THEM}"
    skopeo = which("skopeo") or "skopeo"
    try:
        found = subprocess.run([skopeo, "copy", "--help"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"--compression zstd: `{skopeo} copy --help` could not run ({exc}); {HOW_TO_GET_THEM}"
    if "--preserve-digests" not in found.stdout + found.stderr:
        return f"--compression zstd: {skopeo} has no `copy --preserve-digests` (too old); {HOW_TO_GET_THEM}"
    return None


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as read:
        while chunk := read.read(CHUNK):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def zstd_compress(stream: IO[bytes], out: Path) -> str:
    """The `zstd` program (level 3, one thread per core) compresses `stream` into `out`; the sha256 of
    the bytes it was given. EngineError when it fails."""
    digest = hashlib.sha256()
    with out.open("wb") as written:
        try:
            zstd = subprocess.Popen(
                ["zstd", "-q", f"-{ZSTD_LEVEL}", "-T0", "-c"],
                stdin=subprocess.PIPE,
                stdout=written,
                stderr=subprocess.PIPE,
            )
        except OSError as exc:
            raise EngineError(f"could not run zstd: {exc}", HOW_TO_GET_THEM) from None
        assert zstd.stdin is not None and zstd.stderr is not None
        try:
            while chunk := stream.read(CHUNK):
                digest.update(chunk)
                zstd.stdin.write(chunk)
        except BrokenPipeError:
            pass  # zstd stopped: its status and message say why
        finally:
            zstd.stdin.close()
        error = zstd.stderr.read().decode(errors="replace").strip()
        if zstd.wait() != 0:
            raise EngineError(f"zstd failed (status {zstd.returncode}): {error[-500:]}")
    return "sha256:" + digest.hexdigest()


@dataclass(frozen=True)
class Layout:
    """An OCI image layout of one verified image, zstd layers: where it is and what its manifest names."""

    path: Path
    manifest_digest: str
    config_digest: str  # the image id on the classic store (the containerd store's is its index's digest)
    layers: tuple[tuple[str, int], ...]  # (digest, size) of each zstd layer, in order
    diff_ids: tuple[str, ...]

    @property
    def source(self) -> str:
        """skopeo's name of it."""
        return f"oci:{self.path}:{LAYOUT_REF}"


GZIP_MAGIC = b"\x1f\x8b"


class _Prefixed(io.RawIOBase):
    """A stream whose first bytes were read already (`head`), then the rest of it."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self.head, self.rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self.head:
            n = min(len(buffer), len(self.head))
            buffer[:n], self.head = self.head[:n], self.head[n:]
            return n
        data = self.rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def uncompressed(stream: IO[bytes]) -> IO[bytes]:
    """A saved layer as its tar: the containerd image store saves the gzip blobs it keeps (the classic store the
    tars), and a layer's diff_id is the digest of its tar. Anything else is read as it is."""
    head = stream.read(2)
    prefixed = io.BufferedReader(_Prefixed(head, stream), CHUNK)
    if head == GZIP_MAGIC:
        return cast(IO[bytes], gzip.GzipFile(fileobj=prefixed, mode="rb"))
    return cast(IO[bytes], prefixed)


def _unpacked(compress: Compressor, stream: IO[bytes], out: Path, name: str) -> str:
    """`compress` of a saved layer's tar (a gzip blob unpacked); EngineError where its gzip is broken or cut."""
    try:
        return compress(uncompressed(stream), out)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise EngineError(f"`docker save` gave a layer {name} whose gzip cannot be read ({exc}): not pushed") from None


def index_names_config(kept: dict[str, bytes], index_digest: str, config_digest: str) -> bool:
    """Whether the saved archive holds the image index `index_digest` (the containerd store's image id: the
    digest of its index) whose bytes hash to it, naming an image manifest (whose bytes hash to its name) of
    configuration `config_digest`. The proof, on that store, that the saved configuration is the verified image's."""

    def blob(digest: object) -> object:
        if not isinstance(digest, str) or not digest.startswith("sha256:"):
            return None
        data = kept.get(f"blobs/sha256/{digest.removeprefix('sha256:')}")
        if data is None or "sha256:" + hashlib.sha256(data).hexdigest() != digest:
            return None
        try:
            return json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None

    index = blob(index_digest)
    entries = index.get("manifests") if isinstance(index, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        manifest = blob(entry.get("digest")) if isinstance(entry, dict) else None
        config = manifest.get("config") if isinstance(manifest, dict) else None
        if isinstance(config, dict) and config.get("digest") == config_digest:
            return True
    return False


def _member_path(member: tarfile.TarInfo) -> str:
    return str(PurePosixPath(member.name))


def _link_target(member: tarfile.TarInfo) -> str:
    """Where a link in the archive points, as an archive path (a symlink is relative to its folder)."""
    if member.islnk():
        return str(PurePosixPath(member.linkname))
    parts: list[str] = []
    for part in (*PurePosixPath(member.name).parent.parts, *PurePosixPath(member.linkname).parts):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)


def write_layout(archive: IO[bytes], verified: ImageInfo, folder: Path, compress: Compressor = zstd_compress) -> Layout:
    """Read a `docker save` archive of one image from `archive` (a stream, read once), prove it is the
    `verified` image (its configuration's digest is the verified id, each layer's digest the verified
    diff_id, in order), and write an OCI layout of it with compressed layers into `folder` (empty, made by
    the caller). EngineError saying what differs when it is not the verified image."""
    blobs = folder / "blobs" / "sha256"
    work = folder / "work"
    blobs.mkdir(parents=True)
    work.mkdir()
    kept: dict[str, bytes] = {}
    compressed: dict[str, tuple[str, Path]] = {}  # archive path -> (sha256 of its bytes, compressed file)
    links: dict[str, str] = {}
    with tarfile.open(fileobj=archive, mode="r|") as saved:
        for number, member in enumerate(saved):
            name = _member_path(member)
            if member.issym() or member.islnk():
                links[name] = _link_target(member)
            elif member.isfile():
                read = saved.extractfile(member)
                assert read is not None
                if member.size <= KEPT:
                    kept[name] = read.read()
                else:
                    out = work / str(number)
                    compressed[name] = (_unpacked(compress, read, out, name), out)

    def resolve(name: str) -> str:
        seen = 0
        while name in links and seen < 40:
            name, seen = links[name], seen + 1
        return name

    if "manifest.json" not in kept:
        raise EngineError("`docker save` gave no manifest.json: not an image archive")
    try:
        (entry,) = json.loads(kept["manifest.json"])
        config_name, layer_names = resolve(str(entry["Config"])), [resolve(str(n)) for n in entry["Layers"]]
    except (ValueError, TypeError, KeyError):
        raise EngineError("`docker save` gave a manifest.json that does not name one image") from None
    config = kept.get(config_name)
    if config is None:
        raise EngineError(f"`docker save` gave no configuration {config_name} (or one over {KEPT} bytes)")
    config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
    if config_digest != verified.id and not index_names_config(kept, verified.id, config_digest):
        raise EngineError(
            f"the saved image's configuration is {config_digest}, not the verified image {verified.id}: not pushed"
        )
    layers: list[tuple[str, int]] = []
    diff_ids: list[str] = []
    done: dict[str, tuple[str, int]] = {}
    for layer_name in layer_names:
        if layer_name in kept and layer_name not in compressed:
            out = work / f"kept-{len(compressed)}"
            compressed[layer_name] = (_unpacked(compress, io.BytesIO(kept[layer_name]), out, layer_name), out)
        if layer_name not in compressed:
            raise EngineError(f"`docker save` gave no layer {layer_name}")
        diff_id, path = compressed[layer_name]
        diff_ids.append(diff_id)
        if layer_name not in done:
            digest, size = _sha256_file(path), path.stat().st_size
            os.replace(path, blobs / digest.removeprefix("sha256:"))
            done[layer_name] = (digest, size)
        layers.append(done[layer_name])
    if tuple(diff_ids) != verified.layers:
        raise EngineError(
            f"the saved image's layers ({', '.join(d[:19] for d in diff_ids)}) are not the verified image's "
            f"({', '.join(d[:19] for d in verified.layers)}): not pushed"
        )
    (blobs / config_digest.removeprefix("sha256:")).write_bytes(config)
    manifest = json.dumps(manifest_document(config_digest, len(config), layers, verified.labels), separators=(",", ":"))
    return _finish(folder, work, manifest.encode(), config_digest, layers, diff_ids)


def manifest_document(
    config_digest: str, config_size: int, layers: Sequence[tuple[str, int]], labels: dict[str, str]
) -> dict[str, object]:
    """The OCI image manifest of the layout: the configuration, the zstd layers, and the image's OCI labels as its
    annotations (`org.opencontainers.image.*`: what `docker push` of the classic store cannot carry)."""
    document: dict[str, object] = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config_size},
        "layers": [{"mediaType": ZSTD_LAYER, "digest": d, "size": s} for d, s in layers],
    }
    if annotations := oci_annotations(labels):
        document["annotations"] = annotations
    return document


def _finish(
    folder: Path, work: Path, manifest: bytes, config_digest: str, layers: list[tuple[str, int]], diff_ids: list[str]
) -> Layout:
    """Write the manifest, the layout's index.json and oci-layout, drop the work folder."""
    blobs = folder / "blobs" / "sha256"
    manifest_digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    (blobs / manifest_digest.removeprefix("sha256:")).write_bytes(manifest)
    descriptor = {
        "mediaType": OCI_MANIFEST,
        "digest": manifest_digest,
        "size": len(manifest),
        "annotations": {"org.opencontainers.image.ref.name": LAYOUT_REF},
    }
    (folder / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [descriptor]}))
    (folder / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    shutil.rmtree(work)
    return Layout(folder, manifest_digest, config_digest, tuple(layers), tuple(diff_ids))


def save_layout(docker: str, verified: ImageInfo, folder: Path, compress: Compressor = zstd_compress) -> Layout:
    """`docker save` of the verified image's id, streamed into `write_layout` (process.streamed: an export that
    stalls ends, docker save's own failure is said)."""
    cmd = [docker, "save", verified.id]
    try:
        with streamed(cmd) as stream:
            return write_layout(stream, verified, folder, compress)
    except tarfile.TarError as exc:  # the archive broke off, and docker save said nothing of it
        raise EngineError(f"`{' '.join(cmd)}` failed: {exc}") from None


def upload_command(layout: Layout, destination: str, digest_file: Path, *, tls_verify: bool) -> list[str]:
    """skopeo's upload of the layout to `destination` (`registry/repository:tag`), changing nothing."""
    cmd = ["skopeo", "--insecure-policy", "copy", "--quiet", "--preserve-digests", "--digestfile", str(digest_file)]
    if not tls_verify:
        cmd.append("--dest-tls-verify=false")
    return [*cmd, layout.source, f"docker://{destination}"]


UPLOAD_TIMEOUT_S = 7200.0  # one upload of a whole image (its layers: gigabytes) by skopeo
_NOISE = re.compile(r'^time="[^"]*" level=\w+ msg="(.*)"$')


def upload(layout: Layout, destination: str, *, tls_verify: bool) -> list[str]:
    """Upload the layout under `destination`; the errors (none when the registry holds its manifest)."""
    digest_file = layout.path / f"pushed-{hashlib.sha256(destination.encode()).hexdigest()[:12]}"
    cmd = upload_command(layout, destination, digest_file, tls_verify=tls_verify)
    try:
        result = captured(cmd, timeout_s=UPLOAD_TIMEOUT_S)
    except OSError as exc:
        return [f"{destination}: could not run skopeo: {exc}"]
    if result.stopped:
        return [f"{destination}: skopeo was stopped: {result.stopped} ({UPLOAD_TIMEOUT_S:g} s)"]
    if result.status != 0:
        stderr = result.stderr.decode(errors="replace")
        lines = (stderr.strip() or f"skopeo exited with status {result.status}").splitlines()
        said = [_NOISE.sub(r"\1", line) for line in lines]
        return [f"{destination}: {said[-1]}"]
    pushed = digest_file.read_text().strip() if digest_file.exists() else ""
    if pushed != layout.manifest_digest:
        return [f"{destination}: the registry holds manifest {pushed or '(none said)'}, not {layout.manifest_digest}"]
    return []


def same_image(infos: Sequence[tuple[str, ImageInfo | None]]) -> ImageInfo:
    """The one image every name is (EngineError naming a missing one, or names of different images)."""
    missing = [name for name, info in infos if info is None]
    if missing:
        raise EngineError(f"no image {', '.join(missing)} here to push")
    ids = {info.id for _, info in infos if info is not None}
    if len(ids) != 1:
        raise EngineError(f"{', '.join(name for name, _ in infos)} are not one image ({', '.join(sorted(ids))})")
    found = infos[0][1]
    assert found is not None
    return found
