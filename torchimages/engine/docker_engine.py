"""`DockerEngine`: the `Engine` through the docker SDK, with a BuildKit CLI client for builds and imports."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from torchimages import registry, settings, stopping, values
from torchimages.engine import content_store, manifests, oci_layout, sbom_generator, zstd_push
from torchimages.engine.attestation import (
    JSON_BLOB_BYTES,
    AttestationError,
    Attested,
    SbomAttestation,
    attested_in,
    read_attested,
    sbom_attestation,
    uses_containerd_store,
)
from torchimages.engine.discovery import find_build_client, server_problem, takes_named_contexts
from torchimages.engine.process import MAX_OUTPUT_BYTES, Captured, captured, run_cancellable, streamed
from torchimages.engine.push import push_with_retries
from torchimages.engine.requests import (
    BuildClient,
    build_command,
    index_command,
    python_command,
    run_command,
    shell_command,
)
from torchimages.engine.types import (
    HOW_TO_GET_AN_ENGINE,
    HOW_TO_GET_BUILDKIT,
    BuildRequest,
    CacheSpec,
    EngineError,
    HistoryEntry,
    ImageInfo,
    ProbeError,
    ShellResult,
    StoredLayers,
    cache_problem,
)


def stored_size(manifest: Any) -> int | None:
    """The bytes a registry stores for one image: its config and compressed layers, from an image manifest
    (OCI or Docker v2); None for anything else (a manifest list names several images)."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("layers"), list):
        return None
    parts = [manifest.get("config") or {}, *manifest["layers"]]
    sizes = [part.get("size") if isinstance(part, dict) else None for part in parts]
    if not all(isinstance(size, int) and not isinstance(size, bool) and size >= 0 for size in sizes):
        return None
    return sum(int(size) for size in sizes if size is not None)


def verbose_stored_size(found: Any) -> int | None:
    """The bytes a registry stores for one image from `docker manifest inspect --verbose`: an image manifest's
    entry (an object), or an index's entries (a list), of which the one image that is not an attestation
    (`unknown/unknown`: the containerd store pushes an image with its attestations as an index); None when
    there is not exactly one such image."""
    entries = found if isinstance(found, list) else [found]
    images = []
    for entry in entries:
        if not isinstance(entry, dict):
            return None
        platform = (
            (entry.get("Descriptor") or {}).get("platform") if isinstance(entry.get("Descriptor"), dict) else None
        )
        if isinstance(platform, dict) and (platform.get("os"), platform.get("architecture")) == ("unknown", "unknown"):
            continue
        images.append(entry.get("OCIManifest") or entry.get("SchemaV2Manifest"))
    return stored_size(images[0]) if len(images) == 1 else None


def _loopback(reference: str) -> bool:
    """Whether a reference names a registry on this machine (which Docker, too, lets speak plain HTTP)."""
    first = reference.split("/", 1)[0] if "/" in reference else ""
    host = first.rsplit(":", 1)[0] if ":" in first else first
    return host in ("localhost", "::1", "[::1]") or host.startswith("127.")


IMAGETOOLS_OUTPUT_BYTES = 1024 * 1024  # what `imagetools create` may print (progress lines): more is read no further
DOCKER_RUN_FAILED = 125  # `docker run`'s status when docker itself failed (the container did not run)
# The time limits of the docker CLI's runs (each stopped there: its container removed, if it made one).
ASK_TIMEOUT_S = 120.0  # a question (`buildx inspect`, `manifest inspect`; imagetools: the registry deadline)
PROBE_TIMEOUT_S = 600.0  # a probe: the image's python in a throwaway container
START_TIMEOUT_S = 600.0  # `docker run --detach` of a test container (it may pull the image)
SAVE_TIMEOUT_S = 3600.0  # `docker save --output` of a whole image
TIMEOUT_VARIABLE = "TORCHIMAGES_ENGINE_TIMEOUT_S"
NO_FOREIGN_HISTORY = (
    "the engine gives no history of another platform's image kept in an index (Docker 26 on the containerd image "
    "store), so its layers' sizes cannot be read here: check its size and largest layer on an engine of its platform"
)


def _text(output: bytes | str | None) -> str:
    """A process's captured output as text (undecodable bytes replaced)."""
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


def _exact(output: bytes | str | None) -> str:
    """A process's captured output as text that keeps every byte (an undecodable one as a lone surrogate,
    surrogateescape): two outputs that differ in any byte read differently. Not for printing as it is."""
    if isinstance(output, bytes):
        return output.decode(errors="surrogateescape")
    return output or ""


REMOVE_AGAIN_S = 0.5
LANDING_S = 30.0  # how long a create on its way to the engine (its name taken) may take to land
CONFLICT = 409  # the engine's answer to a create whose name is taken


def container_name(purpose: str) -> str:
    """A new container's name (`torchimages-smoke-1a2b3c4d5e`): chosen before it is made, so whoever makes it
    can remove it by name whatever cuts the making short."""
    return f"torchimages-{purpose}-{uuid.uuid4().hex[:10]}"


def _image_info(reference: str, attrs: dict[str, Any]) -> ImageInfo:
    config = attrs.get("Config") or {}
    env = dict(item.split("=", 1) if "=" in item else (item, "") for item in config.get("Env") or [])
    return ImageInfo(
        reference=reference,
        id=str(attrs.get("Id", "")),
        labels=dict(config.get("Labels") or {}),
        env=env,
        user=str(config.get("User") or ""),
        layers=tuple((attrs.get("RootFS") or {}).get("Layers") or ()),
        tags=tuple(attrs.get("RepoTags") or ()),
        size=int(attrs.get("Size") or 0),
        repo_digests=tuple(attrs.get("RepoDigests") or ()),
        platform=_platform(attrs.get("Os"), attrs.get("Architecture")),
    )


def _platform(os_name: object, architecture: object) -> str:
    """`os/architecture` from an image's inspect, or "" where either is not a plain name."""
    names = (os_name, architecture)
    if all(isinstance(n, str) and n and n.isascii() and n.isalnum() for n in names):
        return f"{os_name}/{architecture}"
    return ""


def api_timeout_s() -> float:
    """How long one request to the engine's API may wait for its next word (TORCHIMAGES_ENGINE_TIMEOUT_S); the
    first contact (its version, a ping) waits a tenth of that, at most 30 s. SettingError for a bad value."""
    return settings.seconds(TIMEOUT_VARIABLE)


def _connected() -> Any:
    """An SDK client whose engine answered a ping (the SDK's own errors when none does): an engine that takes
    the connection and says nothing is given up after the first contact's time, not waited on."""
    import docker  # the SDK is imported only by commands that talk to an engine

    timeout = api_timeout_s()
    client = docker.from_env(timeout=min(timeout / 10, 30.0))  # asks the engine its API version first
    client.ping()
    client.api.timeout = timeout
    return client


def _sdk_client() -> Any:
    import docker.errors

    try:
        return _connected()
    except (docker.errors.DockerException, *CONNECTION_ERRORS) as exc:
        raise EngineError(f"no Docker engine answers ({exc})", HOW_TO_GET_AN_ENGINE) from None


def _connection_errors() -> tuple[type[BaseException], ...]:
    """What the SDK raises, besides its DockerException, when the engine is gone: requests' errors
    (connection refused, reset, read timeout), urllib3's where the SDK reads a stream itself (a pull's progress:
    a connection dropped mid-answer is urllib3's ProtocolError, which requests never wraps there) and the
    OSErrors beneath them."""
    try:
        import requests.exceptions
        import urllib3.exceptions
    except ImportError:  # no SDK (nor requests) on this machine: commands that need no engine still run
        return (OSError,)
    return (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, OSError)


CONNECTION_ERRORS = _connection_errors()


def _short(exc: BaseException) -> str:
    """A connection error's cause (`[Errno 111] Connection refused`), not requests' paragraph around it."""
    found = re.findall(r"\[Errno -?\d+\] [^'\")]+", str(exc))
    return found[-1] if found else f"{type(exc).__name__}: {str(exc)[:200]}"


def engine_address() -> str:
    """The engine the SDK and CLI talk to: DOCKER_HOST, else the default socket."""
    return settings.text("DOCKER_HOST") or "unix:///var/run/docker.sock"


@dataclass(frozen=True)
class EngineFacts:
    """What `build.py doctor` asks of the engine: whether one answers (else why not), its version, where it
    keeps images, its container runtimes, and which of the asked references it holds."""

    address: str
    version: str | None  # None: no engine answers
    error: str | None
    data_root: str | None = None
    runtimes: tuple[str, ...] = ()
    present: frozenset[str] = frozenset()


def engine_facts(references: Sequence[str] = ()) -> EngineFacts:
    """The engine's facts without raising: on a machine without Docker, or without the docker SDK, the
    error says which (and how to get it)."""
    address = engine_address()
    try:
        import docker.errors
    except ImportError as exc:
        return EngineFacts(address, None, f"the docker SDK (Python package `docker`) is not installed ({exc})")
    try:
        client = _connected()
        info = client.info()
        present = set()
        for reference in references:
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.images.get(reference)
                present.add(reference)
    except (docker.errors.DockerException, *CONNECTION_ERRORS) as exc:
        return EngineFacts(address, None, f"no Docker engine answers at {address} ({_short(exc)})")
    except settings.SettingError as exc:
        return EngineFacts(address, None, str(exc))
    return EngineFacts(
        address,
        str(info.get("ServerVersion") or "unknown"),
        None,
        str(info.get("DockerRootDir") or "") or None,
        tuple(sorted(info.get("Runtimes") or {})),
        frozenset(present),
    )


class DockerEngine:
    """The Docker engine through its SDK, and a BuildKit CLI client for builds and imports."""

    def __init__(self, docker_cli: str | None = None) -> None:
        import docker.errors

        self._errors = docker.errors
        self.sdk = _sdk_client()
        self._docker_cli = docker_cli
        self._client: BuildClient | None = None
        self._named_contexts: bool | None = None

    @property
    def build_client(self) -> BuildClient:
        """The BuildKit-capable client, found on first use (a probe build)."""
        if self._client is None:
            self._client = find_build_client(self._docker_cli)
        return self._client

    @property
    def docker_cli(self) -> str:
        """The docker CLI binary for `docker run`: the build client's once found, else the one named or on PATH
        (no probe build)."""
        if self._client is not None:
            return self._client.docker
        named = self._docker_cli or settings.text("DOCKER")
        return named or shutil.which("docker") or "docker"

    def check_cache(self, cache_from: Sequence[CacheSpec], cache_to: Sequence[CacheSpec]) -> None:
        """EngineError naming every cache import or export the build client cannot do (before any build); the
        build client is found first, so one that cannot build is refused before anything is written."""
        client = self.build_client
        if not cache_from and not cache_to:
            return
        builtin, name = True, "docker build (DOCKER_BUILDKIT=1)"
        if client.buildx:
            driver = self._driver()
            builtin = driver is None or driver == "docker"
            name = f"docker buildx ({driver or 'unknown'} driver)"
        problem = cache_problem(cache_from, cache_to, builtin, name)
        if problem:
            raise EngineError(problem)

    def gzip_level_problem(self) -> str | None:
        """Why a build here cannot set the gzip level of the layers it exports, or None: it needs the containerd
        image store (the classic one keeps layers unpacked and gzips them at push) and buildx's docker driver
        (whose image exporter writes into that store; another driver's would stay in its builder)."""
        if not self.containerd_store:
            return (
                "this engine keeps images in its classic image store, which stores layers unpacked and gzips them "
                "when it pushes, at its own level (`make engine` starts one on the containerd image store)"
            )
        if not self.build_client.buildx:
            return "the build client is `docker build` (DOCKER_BUILDKIT=1), which sets no export compression"
        driver = self._driver()
        if driver is None:
            return "`docker buildx inspect` names no driver for its builder: where its export lands is not known"
        if driver != "docker":
            return f"buildx's builder has the {driver} driver: its image export would not land in this engine"
        return None

    def _driver(self) -> str | None:
        """The driver of buildx's current builder (`docker`, `docker-container`, ...), None when it names none."""
        client = self.build_client
        try:
            found = captured([client.docker, "buildx", "inspect"], timeout_s=ASK_TIMEOUT_S, env=client.environment())
        except OSError:
            return None
        driver = re.search(r"^Driver:\s*(\S+)", _text(found.stdout), re.MULTILINE)
        return driver.group(1) if driver else None

    def sbom_attestation(self) -> SbomAttestation:
        """From the build client (found first), its builder's driver and `docker info`'s image store; where the
        engine can keep attestations, the SBOM generator image is made in it (once: sbom_generator.py)."""
        client = self.build_client
        if not client.buildx:
            return sbom_attestation(False, None, False)
        with self._failures("asking the engine for its image store"):
            info = self.sdk.info()
        driver, store = self._driver(), uses_containerd_store(info)
        if driver != "docker" or not store:
            return sbom_attestation(True, driver, store)
        reference, problem = self._sbom_generator(str(info.get("Architecture") or ""))
        return sbom_attestation(True, driver, store, reference, problem)

    def _sbom_generator(self, architecture: str) -> tuple[str, str]:
        """The SBOM generator image for this engine's `architecture`, built from its files every time (BuildKit's
        cache makes a second build take seconds; an image someone else put under its tag is not taken): its
        reference (sbom_generator.REPOSITORY: a name that no registry answers for, so never a substitute pulled
        from one), or "" and why it could not be made."""
        syft, busybox = sbom_generator.find_syft(), sbom_generator.find_busybox(architecture)
        if syft.path is None or busybox.path is None:
            return "", syft.problem or busybox.problem
        if problem := sbom_generator.static_for(syft.path, architecture):
            return "", f"syft {syft.path}: {problem}"
        files = sbom_generator.context_files(busybox.path, syft.path)
        reference = sbom_generator.generator_reference(files)
        client = self.build_client
        with tempfile.TemporaryDirectory(prefix="torchimages-sbom-generator-") as folder:
            sbom_generator.write_context(files, Path(folder))
            cmd = [*client.command, "--provenance=false", "--sbom=false", "--tag", reference, folder]
            try:
                made = captured(cmd, timeout_s=PROBE_TIMEOUT_S, env=client.environment())
            except OSError as exc:
                return "", f"{cmd[0]} could not run ({exc.strerror or exc})"
        if made.status != 0:
            why = made.stopped or _text(made.stderr).strip()[-2000:] or f"exit status {made.status}"
            return "", f"its build failed: {values.show(why)}"
        if self.inspect(reference) is None:
            return "", f"{reference} is not here after its build"
        return reference, ""

    def named_contexts(self) -> bool:
        """Whether builds take named build contexts (found on first use: a probe build)."""
        if self._named_contexts is None:
            self._named_contexts = takes_named_contexts(self.build_client)
        return self._named_contexts

    def build(self, request: BuildRequest, log: IO[bytes], cancelled: threading.Event | None = None) -> int:
        cmd = build_command(self.build_client, request)
        log.write((" ".join(cmd) + "\n").encode())
        log.flush()
        env = self.build_client.environment()
        return run_cancellable(cmd, cancelled, stdout=log, stderr=subprocess.STDOUT, env=env).returncode

    def import_rootfs(
        self, tar_stream: IO[bytes], reference: str, changes: Sequence[str], log: IO[bytes], platform: str | None = None
    ) -> int:
        cmd = [self.build_client.docker, "import", *(["--platform", platform] if platform else [])]
        for change in changes:
            cmd += ["--change", change]
        cmd += ["-", reference]
        return subprocess.run(cmd, stdin=tar_stream, stdout=log, stderr=log, check=False).returncode

    def labels(self, reference: str) -> dict[str, str] | None:
        with self._failures(f"inspecting {reference}"):
            try:
                image = self.sdk.images.get(reference)
            except self._errors.ImageNotFound:
                return None
            return dict(image.labels or {})

    def inspect(self, reference: str) -> ImageInfo | None:
        """An image's id, labels, environment, user and layers, or None when there is no such image."""
        with self._failures(f"inspecting {reference}"):
            try:
                image = self.sdk.images.get(reference)
            except self._errors.ImageNotFound:
                return None
            info = _image_info(reference, image.attrs)
            if self._containerd_store:  # its Size is the compressed content's: the layers' own sizes, added
                try:
                    size = sum(int(s.get("Size") or 0) for s in image.history())
                except self._errors.NotFound:  # Docker 26 reads the history of an index's image of the engine's
                    size = 0  # own platform only: another platform's size is not known (0), never the compressed
                info = dataclasses.replace(info, size=size)
            return info

    @property
    def containerd_store(self) -> bool:
        """Whether the engine keeps images in the containerd image store (asked once)."""
        return self._containerd_store

    @functools.cached_property
    def _containerd_store(self) -> bool:
        """Whether the engine keeps images in the containerd image store, where `docker image inspect`'s Size is
        the compressed content's (the classic store's is the uncompressed layers')."""
        with self._failures("asking the engine for its image store"):
            return uses_containerd_store(self.sdk.info())

    def pull(self, reference: str) -> list[str]:
        try:
            with self._failures(f"pulling {reference}"):
                self.sdk.images.pull(reference)
        except EngineError as exc:
            return [str(exc)]
        return []

    def history(self, reference: str) -> list[HistoryEntry]:
        with self._failures(f"reading the history of {reference}"):
            image = self.sdk.images.get(reference)
            try:
                steps = image.history()
            except self._errors.NotFound:
                raise EngineError(f"reading the history of {reference} failed: {NO_FOREIGN_HISTORY}") from None
            return [HistoryEntry(str(s.get("CreatedBy") or ""), int(s.get("Size") or 0)) for s in steps]

    @contextlib.contextmanager
    def exported(self, reference: str, cancelled: threading.Event | None = None) -> Iterator[IO[bytes]]:
        """`docker save` of the image's id (so a name moved meanwhile changes nothing), streamed through the CLI
        (process.streamed: killed on leaving early or on cancel)."""
        info = self.inspect(reference)
        if info is None:
            raise EngineError(f"no image {reference} here to export")
        with streamed([self.docker_cli, "save", info.id], cancelled) as stream:
            yield stream

    def stored_layers(self, reference: str, cancelled: threading.Event | None = None) -> StoredLayers | None:
        """The image's layers as the engine's containerd content store keeps them (content_store.stored_layers:
        its platform's manifest and configuration, each hashed), where a store answers for it and names the
        layers `docker image inspect` does; None elsewhere (the classic store, a socket this process may not
        use, an image of no plain platform): the layer scan then reads `docker save`."""
        if not self._content_stores:
            return None
        info = self.inspect(reference)
        if info is None:
            raise EngineError(f"no image {reference} here to read its layers")
        if not info.platform:
            return None
        for store in self._content_stores:
            try:
                found = content_store.stored_layers(store, info.id, info.platform, cancelled)
            except content_store.Unreadable:
                continue  # not this image's documents here: the next store, else its docker save
            if found.diff_ids == info.layers:
                return found
        return None

    def stored_blob(self, digest: str) -> bytes | None:
        """A document of the content store by its digest, hashed to it (content_store); None where no store
        gives it (then no local index is made, or a manifest it would name is not held)."""
        for store in self._content_stores:
            try:
                return store.get(digest, manifests.MAX_BYTES)
            except content_store.Unreadable:
                continue  # another containerd's, or none reachable: the next
        return None

    def hold_index(self, reference: str, document: bytes) -> None:
        """`docker load` of an OCI layout holding only the index (oci_layout): containerd's import takes the
        manifests it names from the content store, where they are; the classic store holds no index."""
        if not self.containerd_store:
            raise EngineError(f"{reference}: the engine's classic image store holds no index")
        try:
            archive = oci_layout.layout(reference, document)
        except (manifests.ManifestError, values.BadValue) as exc:
            raise EngineError(str(exc)) from None
        with self._failures(f"loading the index {manifests.digest_of(document)} as {reference}"):
            self.sdk.images.load(archive)

    def attestations(self, reference: str, platform: str, cancelled: threading.Event | None = None) -> Attested:
        """The attestations of the image's `platform` image: its index (the image's id on the containerd store)
        and the JSON blobs it names, read from the engine's content store by digest where it answers
        (content_store.py), else from the image's `docker save`; each blob kept only where its bytes hash to
        its name; stopped by `cancelled` (between two blobs of the store, each `ctr` call within its time limit;
        the save at once)."""
        info = self.inspect(reference)
        if info is None:
            raise EngineError(f"no image {reference} here to read its attestations")
        for store in self._content_stores:
            try:
                return attested_in(info.id, content_store.Blobs(store, JSON_BLOB_BYTES, cancelled), platform)
            except content_store.Unreadable:
                continue  # not this engine's store, not reachable, or cancelled: the next, else docker save
            except AttestationError as exc:
                raise EngineError(f"the image {reference}: {exc}") from None
        return self._saved_attestations(reference, platform, cancelled)

    @functools.cached_property
    def _content_stores(self) -> tuple[content_store.ContentStore, ...]:
        """The containerd content stores to read, where this engine keeps images in one and they can be read."""
        return content_store.find_content_stores() if self.containerd_store else ()

    def _saved_attestations(self, reference: str, platform: str, cancelled: threading.Event | None) -> Attested:
        """The attestations read from the image's `docker save` (an OCI layout on the containerd image store: its
        index.json and its JSON blobs; the layers are read past, not kept)."""
        layout, blobs = b"", {}
        try:
            with self.exported(reference, cancelled) as stream, tarfile.open(fileobj=stream, mode="r|") as archive:
                for member in archive:
                    name = member.name.removeprefix("./")
                    if not member.isfile() or member.size > JSON_BLOB_BYTES:
                        continue
                    file = archive.extractfile(member)
                    if file is None or not (name == "index.json" or name.startswith("blobs/sha256/")):
                        continue
                    head = file.read(1)  # a layer (compressed) is read past; a manifest or statement is JSON
                    if name == "index.json":
                        layout = head + file.read()
                    elif head == b"{":
                        data, named = head + file.read(), "sha256:" + name.rsplit("/", 1)[1]
                        if "sha256:" + hashlib.sha256(data).hexdigest() == named:
                            blobs[named] = data
        except (tarfile.TarError, OSError) as exc:
            raise EngineError(f"reading the saved image {reference} for its attestations: {exc}") from None
        if not layout:
            raise EngineError(f"the saved image {reference} has no index.json: not an OCI layout")
        try:
            return read_attested(layout, blobs, platform)
        except AttestationError as exc:
            raise EngineError(f"the saved image {reference}: {exc}") from None

    def save(self, reference: str, path: Path) -> None:
        """Write an image to a `docker save` archive (what syft reads as `docker-archive:PATH`)."""
        cmd = [self.docker_cli, "save", "--output", str(path), reference]
        try:
            result = captured(cmd, timeout_s=SAVE_TIMEOUT_S)
        except OSError as exc:
            raise EngineError(f"could not run {cmd[0]}: {exc}") from None
        if result.status != 0:
            why = result.stopped or _text(result.stderr).strip()[-2000:] or f"exit status {result.status}"
            raise EngineError(f"`{shlex.join(cmd)}` failed: {why}")

    def compressed_size(self, reference: str) -> int | None:
        """What the registry stores for a pushed image (`docker manifest inspect --verbose`: config and compressed
        layers of its one image, its attestations left out); None when the registry does not answer or it does
        not name one image."""
        insecure = ["--insecure"] if _loopback(reference) else []
        cmd = [self.docker_cli, "manifest", "inspect", "--verbose", *insecure, reference]
        try:
            result = captured(cmd, timeout_s=ASK_TIMEOUT_S)
            return verbose_stored_size(json.loads(result.stdout)) if result.status == 0 else None
        except (OSError, ValueError, RecursionError):
            return None

    def images_labelled(self, key: str, value: str) -> list[ImageInfo]:
        """Every local image carrying the label `key=value`."""
        with self._failures(f"listing images labelled {key}={value}"):
            found = self.sdk.images.list(filters={"label": f"{key}={value}"})
            return [_image_info(image.id, image.attrs) for image in found]

    def run_python(self, reference: str, args: list[str]) -> str:
        """Through the docker CLI (`docker run --rm`), bounded: stopped at PROBE_TIMEOUT_S or once its output
        passes MAX_OUTPUT_BYTES (an image whose files are endless), its container removed whatever happens."""
        name = container_name("probe")
        result = self._contained(
            name, reference, python_command(self.docker_cli, reference, name, args), PROBE_TIMEOUT_S
        )
        stderr = _text(result.stderr).strip()
        if result.timed_out:
            raise ProbeError(f"python did not finish within {PROBE_TIMEOUT_S:g} s in {reference}: stopped")
        if result.overflowed:
            raise ProbeError(f"python in {reference} wrote more than {MAX_OUTPUT_BYTES} bytes: stopped")
        if result.status == DOCKER_RUN_FAILED:
            raise ProbeError(f"could not run a container of {reference}: {stderr[-2000:] or 'exit 125'}")
        if result.status != 0:
            raise ProbeError(f"python exited with status {result.status} in {reference}: {stderr[-2000:]}")
        return _text(result.stdout)

    def run_shell(
        self, reference: str, script: str, *, user: str = "", network: str | None = None, timeout_s: float = 600.0
    ) -> ShellResult:
        """Through the docker CLI (`docker run --rm`); at the time limit, or once its output passes
        MAX_OUTPUT_BYTES, the client is killed and the container removed. Exit status 125 is docker's own
        failure (no such image, a network that is not there). Its stdout keeps every byte (`_exact`): the
        os-updates check keys shared answers on it."""
        name = container_name("shell")
        cmd = shell_command(self.docker_cli, reference, name, script, user=user, network=network)
        result = self._contained(name, reference, cmd, timeout_s)
        stderr = _text(result.stderr)
        if result.stopped:
            return ShellResult(-1, _exact(result.stdout), stderr, result.timed_out, result.overflowed)
        if result.status == DOCKER_RUN_FAILED:
            self.remove_container(name)
            raise EngineError(f"could not run a container of {reference}: {stderr.strip()[-2000:] or 'exit 125'}")
        return ShellResult(result.status or 0, _exact(result.stdout), stderr)

    def _contained(self, name: str, reference: str, cmd: list[str], timeout_s: float) -> Captured:
        """A `docker run` of a container named `name`, bounded (process.captured); the container is removed
        when the run is stopped (time, output) or interrupted (removal held against a second signal)."""
        try:
            result = captured(cmd, timeout_s=timeout_s)
        except OSError as exc:
            raise EngineError(f"could not run {cmd[0]}: {exc}") from None
        except BaseException:  # interrupted: the container may be running still, or about to be
            self._remove_after_interrupt(name, reference)
            raise
        if result.stopped:
            self.remove_container(name)
        return result

    def _remove_after_interrupt(self, name: str, reference: str) -> None:
        """Remove a container whose `docker run` was cut short (its client killed by now). A create the client
        sent may still be on its way to the engine, so a look that finds nothing proves nothing: the name is then
        claimed by a container of ours (made, never started). Either ours gets it (a create landing later is
        refused the name by the engine) and is removed, or the engine says the name is taken, by the create on
        its way, and that container is looked for until it lands (LANDING_S) and removed. Where no claim can be
        made (the image is not here), a second look a moment later. A second signal waits for the end
        (stopping.held)."""
        with stopping.held(), contextlib.suppress(EngineError):
            if self._removed(name):
                return
            claimed = self._claimed(name, reference)
            if claimed:
                self._removed(name)
                return
            end = time.monotonic() + (LANDING_S if claimed is False else REMOVE_AGAIN_S)
            while not self._removed(name) and time.monotonic() < end:
                time.sleep(REMOVE_AGAIN_S)

    def _claimed(self, name: str, reference: str) -> bool | None:
        """Make a container named `name` of `reference`, never started: True when made, False when the engine
        says the name is taken (409), None when it made none for another reason (no such image here)."""
        with self._failures(f"claiming the container name {name}"):
            try:
                self.sdk.containers.create(reference, ["true"], name=name, entrypoint=[], network_disabled=True)
            except self._errors.APIError as exc:
                return False if exc.status_code == CONFLICT else None
            return True

    def _removed(self, name: str) -> bool:
        """Remove a container; whether there was one."""
        with self._failures(f"removing container {name}"):
            try:
                self.sdk.containers.get(name).remove(force=True)
            except self._errors.NotFound:
                return False
            return True

    def start_container(
        self, reference: str, *, name: str, gpus: bool, shm_size: str, run_args: Sequence[str] = ()
    ) -> None:
        """Through the docker CLI (the SDK takes no CLI options, and `run_args` are CLI options), bounded by
        START_TIMEOUT_S; the caller names it (container_name) and removes it by that name whatever happens."""
        cmd = run_command(self.docker_cli, reference, name, gpus=gpus, shm_size=shm_size, run_args=run_args)
        result = self._contained(name, reference, cmd, START_TIMEOUT_S)
        if result.status != 0:
            self.remove_container(name)  # `docker run` may leave a created container behind
            stderr = result.stopped or _text(result.stderr).strip()[-2000:] or f"exit status {result.status}"
            raise EngineError(f"`{shlex.join(cmd)}` failed: {stderr}")

    def remove_container(self, name: str) -> None:
        self._removed(name)

    def check_client(self) -> None:
        """EngineError unless the docker CLI that runs the checks' containers (`docker_cli`) answers for the
        engine the SDK asks (discovery.server_problem: the same `docker info` ID, or ServerVersion where the engine
        gives no ID): a `--docker /bin/false` or `/bin/echo`, or a client of another engine, would check nothing."""
        with self._failures("asking the engine for its ID"):
            info = self.sdk.info()
        expected = ("ID", str(info["ID"])) if info.get("ID") else ("ServerVersion", str(info.get("ServerVersion", "")))
        if not expected[1]:
            raise EngineError(f"the engine at {engine_address()} gives neither an ID nor a version in its info")
        problem = server_problem(self.docker_cli, expected, engine_address())
        if problem:
            raise EngineError(problem)

    def gpu_runtime_available(self) -> bool:
        with self._failures("asking the engine for its runtimes"):
            return "nvidia" in (self.sdk.info().get("Runtimes") or {})

    def answers(self) -> bool:
        try:
            return bool(self.sdk.ping())
        except (self._errors.DockerException, *CONNECTION_ERRORS):
            return False

    def address(self) -> str:
        return engine_address()

    def tag(self, reference: str, repository: str, tag: str) -> None:
        with self._failures(f"tagging {reference} as {repository}:{tag}"):
            self.sdk.images.get(reference).tag(repository, tag)

    def push(
        self,
        repository: str,
        tags: Sequence[str],
        say: Callable[[str], None] | None = None,
        compression: str = values.GZIP,
    ) -> list[str]:
        """gzip: `docker push` of each tag (the engine compresses); zstd: zstd_push, around the engine."""
        said = say or print
        if compression == values.ZSTD:
            return self._push_zstd(repository, tags, said)
        errors = []
        for tag in tags:
            errors += push_with_retries(functools.partial(self._push_one, repository, tag), f"{repository}:{tag}", said)
        return errors

    def _push_one(self, repository: str, tag: str) -> list[str]:
        errors = []
        with self._failures(f"pushing {repository}:{tag}"):
            for line in self.sdk.images.push(repository, tag, stream=True, decode=True):
                if "error" in line:
                    errors.append(f"{repository}:{tag}: {line['error']}")
        return errors

    def _push_zstd(self, repository: str, tags: Sequence[str], say: Callable[[str], None]) -> list[str]:
        """Save the one image the tags name, prove it is that image and write it with zstd layers
        (zstd_push.save_layout), then upload it under each tag; nothing is uploaded unless the proof holds."""
        names = [f"{repository}:{tag}" for tag in tags]
        try:
            verified = zstd_push.same_image([(name, self.inspect(name)) for name in names])
            with tempfile.TemporaryDirectory(prefix="torchimages-zstd-") as folder:
                layout = zstd_push.save_layout(self.docker_cli, verified, Path(folder) / "layout")
                errors = []
                for name in names:
                    upload = functools.partial(zstd_push.upload, layout, name, tls_verify=not _loopback(name))
                    errors += push_with_retries(upload, name, say)
        except (EngineError, OSError) as exc:
            return [f"{', '.join(names)}: not pushed with zstd: {exc}"]
        return errors or self._read_back(repository, layout.manifest_digest, verified, say)

    def _read_back(self, repository: str, digest: str, verified: ImageInfo, say: Callable[[str], None]) -> list[str]:
        """Pull what the registry now holds by its digest: the engine finds the configuration it has (the
        verified image's), downloads no layer, and records `repository@digest` in RepoDigests, as after
        `docker push`; it must be the verified image (the same id; on the containerd store, where the id is the
        manifest's or the index's digest, the same layers, labels, environment and user). An engine that cannot
        read it back (one before 23 does not know zstd) is said."""
        pushed = f"{repository}@{digest}"
        try:
            with self._failures(f"reading back {pushed}"):
                found = self.sdk.images.pull(repository, tag=digest)
        except EngineError as exc:
            say(f"{pushed}: pushed; this engine did not read it back, so its RepoDigests lack it ({exc})")
            return []
        if self._containerd_store:  # ids are manifest or index digests there: the zstd manifest is not the index
            pulled = _image_info(pushed, found.attrs)
            kept = (pulled.layers, pulled.labels, pulled.env, pulled.user)
            if kept != (verified.layers, verified.labels, verified.env, verified.user):
                return [f"{pushed}: the registry holds an image of other layers or configuration than the verified one"]
            say(f"{pushed}: pushed with zstd and read back (this store records it apart from the image's own names)")
            return []
        if found.id != verified.id:
            return [f"{pushed}: the registry holds image {found.id}, not the verified {verified.id}"]
        return []

    @contextlib.contextmanager
    def _failures(self, action: str) -> Iterator[None]:
        """Turn the SDK's errors into EngineError naming the action."""
        try:
            yield
        except self._errors.DockerException as exc:
            raise EngineError(f"{action} failed: {exc}") from None
        except CONNECTION_ERRORS as exc:  # the engine stopped answering (or never did)
            raise EngineError(
                f"{action} failed: the Docker engine at {engine_address()} does not answer ({_short(exc)})"
            ) from None

    def create_index(
        self,
        repository: str,
        names: Sequence[str],
        sources: Sequence[str],
        annotations: Sequence[tuple[str, str]] = (),
    ) -> list[str]:
        """`docker buildx imagetools create`: the registry copies nothing, it only gets the index."""
        return self._imagetools_create(index_command(self.build_client.docker, repository, names, sources, annotations))

    def point_tag(self, repository: str, tag: str, digest: str) -> list[str]:
        """`docker buildx imagetools create` of one index and no annotation: a carbon copy (the same bytes)."""
        source = f"{repository}@{digest}"
        return self._imagetools_create(index_command(self.build_client.docker, repository, [tag], [source]))

    def _imagetools_create(self, cmd: list[str]) -> list[str]:
        """Run `imagetools create` within the registry deadline; its errors."""
        seconds = registry.deadline_s()
        try:
            result = captured(cmd, timeout_s=seconds, limit_bytes=IMAGETOOLS_OUTPUT_BYTES)
        except OSError as exc:
            return [f"`{shlex.join(cmd)}` did not run: {exc}"]
        if result.timed_out:
            return [f"`{shlex.join(cmd)}` did not finish within {seconds:g} s ({registry.DEADLINE_VARIABLE})"]
        if result.stopped:
            return [f"`{shlex.join(cmd)}` was stopped: {result.stopped}"]
        if result.status != 0:
            why = (_text(result.stderr).strip() or f"exit status {result.status}").splitlines()[-1]
            hint = f" (an index is written by buildx: {HOW_TO_GET_BUILDKIT})" if "buildx" in why else ""
            return [f"`{shlex.join(cmd)}` failed: {why}{hint}"]
        return []

    def manifest(self, reference: str) -> bytes | None:
        """`docker buildx imagetools inspect --raw`, within the registry deadline, at most manifests.MAX_BYTES."""
        cmd = [self.build_client.docker, "buildx", "imagetools", "inspect", "--raw", reference]
        seconds = registry.deadline_s()
        try:
            result = captured(cmd, timeout_s=seconds, limit_bytes=manifests.MAX_BYTES)
        except OSError as exc:
            raise EngineError(f"`{shlex.join(cmd)}` did not run: {exc}") from None
        if result.overflowed:
            size = manifests.MAX_BYTES // 2**20
            raise EngineError(f"{reference}: the registry serves more than {size} MiB there, which no manifest is")
        if result.timed_out:
            raise EngineError(
                f"{reference}: no answer from its registry within {seconds:g} s ({registry.DEADLINE_VARIABLE})"
            )
        if result.status != 0:
            why = (_text(result.stderr).strip() or f"exit status {result.status}").splitlines()[-1]
            if why.endswith(": not found") or "manifest unknown" in why:
                return None
            raise EngineError(f"{reference} could not be read from its registry: {why.removeprefix('ERROR: ')}")
        return result.stdout

    def remove_image(self, reference: str) -> None:
        with self._failures(f"removing {reference}"), contextlib.suppress(self._errors.ImageNotFound):
            self.sdk.images.remove(reference, noprune=False)
