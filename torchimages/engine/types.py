"""What the tool asks of a container engine: the `Engine` protocol, its requests, answers and errors."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from torchimages import values
from torchimages.engine.attestation import Attested, SbomAttestation

HOW_TO_GET_AN_ENGINE = (
    "start a Docker engine (dockerd) and make sure `docker info` answers; on Debian/Ubuntu: "
    "`apt-get install docker.io` then `dockerd &` (see README, 'Set-up')"
)
HOW_TO_GET_BUILDKIT = (
    "install the buildx plugin (docker-buildx-plugin) for your docker client, or use a docker client "
    "that builds with DOCKER_BUILDKIT=1 (e.g. Debian's docker.io); name it with --docker or DOCKER=/path/to/docker"
)


class EngineError(Exception):
    """No usable engine or BuildKit client, or an engine action failed: the message says what and why
    (`reason`), then what to do (`fix`, where there is one), so a report that gives its own fix (the
    doctor) says each once."""

    def __init__(self, reason: str, fix: str = "") -> None:
        super().__init__(f"{reason}; {fix}" if fix else reason)
        self.reason, self.fix = reason, fix


class ProbeError(EngineError):
    """A probe container could not run, or its command failed."""


@dataclass(frozen=True)
class BuildRequest:
    """One BuildKit build of one target of a Dockerfile, to a reference."""

    context: Path
    dockerfile: Path
    target: str
    reference: str
    secrets: tuple[tuple[str, Path], ...] = ()  # (id, file), mounted as BuildKit secrets
    network: str | None = None
    no_cache: bool = False
    cache_from: tuple[CacheSpec, ...] = ()  # BuildKit cache sources (`--cache-from`)
    cache_to: tuple[CacheSpec, ...] = ()  # BuildKit cache exports (`--cache-to`)
    # Named build contexts (`--build-context NAME=VALUE`): `("runtime", "docker-image://REF")` builds a stage
    # named runtime as that image instead (devel on the very runtime image that was verified).
    contexts: tuple[tuple[str, str], ...] = ()
    build_args: tuple[tuple[str, str], ...] = ()  # (`--build-arg NAME=VALUE`), e.g. SOURCE_DATE_EPOCH
    platform: str | None = None  # `--platform` (linux/arm64); None: the engine's own
    labels: tuple[tuple[str, str], ...] = ()  # (`--label NAME=VALUE`): over the Dockerfile's LABEL of the same name
    # The SBOM generator image (sbom_generator.py): non-empty, the build attaches an SPDX SBOM made by it and SLSA
    # provenance (mode=max) as attestations (buildx only: attestation.sbom_attestation says where they are kept)
    sbom_generator: str = ""
    # The gzip level of the layers the export writes (`--output type=image,compression=gzip,compression-level=N`:
    # buildx's docker driver on the containerd image store only, DockerEngine.gzip_level_problem); None: BuildKit's
    gzip_level: int | None = None


# BuildKit cache types (`type=` of buildx's --cache-from/--cache-to), and what the engine's built-in BuildKit
# (the classic client with DOCKER_BUILDKIT=1, or buildx's `docker` driver without the containerd image store)
# can do: import the cache of an image (a registry's, or a local one built with inline cache) and export
# the cache inline, into the image's own configuration. The others need a buildx builder of another driver.
CACHE_TYPES = ("registry", "inline", "local", "gha", "s3", "azblob")
BUILTIN_CACHE_IMPORTS = ("registry",)


BUILTIN_CACHE_EXPORTS = ("inline",)
TAG_PLACEHOLDER = "{tag}"


@dataclass(frozen=True)
class CacheSpec:
    """A BuildKit cache import or export as buildx writes it: `type=registry,ref=REF`, `type=inline`.

    A `ref` may hold `{tag}`, replaced by each image's tag (`for_tag`), so one option serves a matrix."""

    type: str
    attrs: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str, placeholders: Sequence[str] = ()) -> CacheSpec:
        """`type=T,key=value,...`, or a bare image reference (= `type=registry,ref=REF`); ValueError says why not.
        A ref may hold `{tag}` and the `placeholders` (a bake's `{target}`) where a tag or a name goes."""
        if not text or text != text.strip() or any(c.isspace() or not c.isprintable() for c in text):
            raise ValueError("a cache spec is `type=registry,ref=REF`, `type=inline` or an image reference, no spaces")
        if '"' in text:  # without one, buildx's CSV reading (csvvalue.Fields) is the split on ',' below
            raise ValueError(QUOTED_CACHE_SPEC)
        if "=" not in text:
            text = f"type=registry,ref={text}"
        fields = [part.partition("=") for part in text.split(",")]
        if problem := _credential_problem(fields):
            raise ValueError(problem)
        if any(not key or not sep for key, sep, _ in fields):
            raise ValueError(f"{values.show(values.hide_logins(text))} is not a list of key=value fields")
        keys = [key.lower() for key, _, _ in fields]  # buildx lower-cases the keys: `REF=` is `ref=`
        if twice := sorted({key for key in keys if keys.count(key) > 1}):
            raise ValueError(f"{values.show(values.hide_logins(text))}: {twice[0]}= is given twice (keys in any case)")
        attrs = dict((key.lower(), value) for key, _, value in fields)
        kind = attrs.pop("type", "")
        if kind not in CACHE_TYPES:
            raise ValueError(f"unknown cache type '{kind}' (allowed: {', '.join(CACHE_TYPES)})")
        if kind == "registry":
            _check_reference(attrs.get("ref", ""), (TAG_PLACEHOLDER, *placeholders))
        return cls(kind, tuple(attrs.items()))

    @property
    def ref(self) -> str | None:
        """The image reference of a registry cache."""
        return dict(self.attrs).get("ref")

    def for_tag(self, tag: str) -> CacheSpec:
        """This spec with `{tag}` replaced by an image's tag."""
        return CacheSpec(self.type, tuple((k, v.replace(TAG_PLACEHOLDER, tag)) for k, v in self.attrs))

    def __str__(self) -> str:
        return ",".join([f"type={self.type}", *(f"{k}={v}" for k, v in self.attrs)])


# buildx reads a cache spec as CSV (util/buildflags/cache.go: csvvalue.Fields, then each key lower-cased): a quoted
# field may hold ',' and '"', so `"token=..."` or a second `"ref=user:password@..."` would pass a check of the
# split text. A spec is never quoted here; the message never repeats the spec (it may hold the credential).
QUOTED_CACHE_SPEC = (
    'a cache spec may not hold a double quote (`"`): buildx reads it as CSV, where a quoted field could hide a '
    "credential or a second ref= from this check; write each key=value field without quotes"
)
# Cache attributes that hold a credential (buildx's s3, azblob and gha caches), and what to do instead
CACHE_CREDENTIALS = {
    "secret_access_key": "give it to buildx through its environment instead (AWS_SECRET_ACCESS_KEY for s3)",
    "session_token": "give it to buildx through its environment instead (AWS_SESSION_TOKEN for s3)",
    "token": "give it to buildx through its environment instead (ACTIONS_RUNTIME_TOKEN for gha)",
    # gha's GitHub API token (docs.docker.com, cache backends, gha): buildx reads it from nowhere else
    "ghtoken": "leave it out: buildx reads it from no environment variable, and the gha cache works without it",
}
_DIGEST_AT_END = re.compile(r"@[A-Za-z0-9+._-]+:[^@/]*$")  # `@ALGORITHM:ENCODED` ending a reference
_HOST_THEN_PATH = re.compile(r"[A-Za-z0-9.\-\[\]:]+/")  # a registry host (and port), then the repository


def reference_login_end(ref: str) -> int:
    """Where a reference's login ends, -1 without one: the first '@' (not its digest's: the OCI grammar has an
    '@' only before `sha256:...`) that a registry host and its repository follow (`user:password@host/repo`,
    `token@host/repo`), as values.py reads a URL's login."""
    digest = _DIGEST_AT_END.search(ref)
    head = ref[: digest.start()] if digest else ref
    at = head.find("@")
    while at >= 0 and not _HOST_THEN_PATH.match(head, at + 1):
        at = head.find("@", at + 1)
    return at


def _shown_field(key: str, sep: str, value: str) -> str:
    """A cache spec's field as a message may say it: without a login, a credential's value left out."""
    if key.lower() in CACHE_CREDENTIALS:
        return f"{key}{sep}..."
    if key.lower() == "ref" and (end := reference_login_end(value)) >= 0:
        value = value[end + 1 :]
    return f"{key}{sep}{values.hide_logins(value)}"


_LEAKS = "the build's command line (its log, the process list) and BuildKit's request would hold it"


def _credential_problem(fields: Sequence[tuple[str, str, str]]) -> str | None:
    """Why a cache spec (its key, '=', value fields) may not be passed on: a login in its reference or in a URL,
    or a credential's attribute. The message never says the login nor the credential."""
    shown = values.show(",".join(_shown_field(*field) for field in fields))
    for key, _, value in fields:
        if key.lower() in CACHE_CREDENTIALS:  # buildx reads keys in any case (it lower-cases them)
            return f"{shown}: {key}= is a credential, and {_LEAKS}: {CACHE_CREDENTIALS[key.lower()]}"
        if key.lower() == "ref" and (values.has_url_login(value) or reference_login_end(value) >= 0):
            return (
                f"{shown}: the reference holds a login (USER:PASSWORD@ before the registry's host), and {_LEAKS}: "
                "log in with `docker login REGISTRY` instead (a cache's registry is read with the engine's "
                "logins) and name the cache without it"
            )
        if values.has_url_login(value):
            return (
                f"{shown}: {key}= holds a login in its URL (a user and password before its host), and {_LEAKS}: "
                "give the credentials to buildx through its environment instead"
            )
    return None


def _check_reference(ref: str, placeholders: Sequence[str]) -> None:
    """ValueError unless `ref` (each placeholder standing for a tag or a name) is an image reference
    (values.reference: the OCI grammar)."""
    if not ref:
        raise ValueError("type=registry needs ref=REF (an image reference)")
    filled = ref
    for placeholder in placeholders:
        filled = filled.replace(placeholder, "x")
    try:
        values.reference(filled)
    except values.BadValue as exc:
        raise ValueError(f"{values.show(values.hide_logins(ref))}: {exc.reason}") from None


def cache_problem(
    cache_from: Sequence[CacheSpec], cache_to: Sequence[CacheSpec], builtin: bool, client: str
) -> str | None:
    """Why a build client cannot do these cache imports and exports, or None when it can. `builtin`: it
    builds with the engine's own BuildKit (the classic client, or buildx's `docker` driver)."""
    wrong = [f"--cache-from {s}" for s in cache_from if s.type not in BUILTIN_CACHE_IMPORTS]
    wrong += [f"--cache-to {s}" for s in cache_to if s.type not in BUILTIN_CACHE_EXPORTS]
    if not builtin or not wrong:
        return None
    return (
        f"{', '.join(wrong)}: {client} builds with the Docker engine's built-in BuildKit, which imports a cache "
        "only from an image (--cache-from REF, or type=registry,ref=REF) and exports it only inline "
        "(--cache-to type=inline: the cache travels in the image's configuration, pushed with --push); other "
        "cache types need a buildx builder of the docker-container driver (`docker buildx create --use`)"
    )


@dataclass(frozen=True)
class StoredLayers:
    """An image's layers as a content store keeps them, bottom first: each layer's blob (its digest, as the image's
    manifest names it) and the configuration's diff_id of it (the digest of its uncompressed tar), as many of each;
    `open(blob)` streams a blob's bytes as stored (compressed or not), checked by no one: the reader hashes them."""

    blobs: tuple[str, ...]
    diff_ids: tuple[str, ...]
    open: Callable[[str], contextlib.AbstractContextManager[IO[bytes]]]


@dataclass(frozen=True)
class ImageInfo:
    """What the engine knows of a local image: its id, labels, environment, default user, layers, size and
    platform."""

    reference: str
    id: str
    labels: dict[str, str]
    env: dict[str, str]
    user: str
    layers: tuple[str, ...]
    tags: tuple[str, ...] = ()
    size: int = 0  # bytes, uncompressed (`docker image inspect -f {{.Size}}`)
    repo_digests: tuple[str, ...] = ()  # `repository@sha256:...`, once pushed (or pulled)
    platform: str = ""  # `os/architecture` of its configuration (`linux/amd64`); "" where it names none


@dataclass(frozen=True)
class ShellResult:
    """What a shell script in a throwaway container did: its exit status and output; `timed_out` when it was
    stopped at its time limit, `overflowed` when its output passed the engine's limit (`status` is then -1
    and the output what it wrote until then, cut). `stdout` keeps every byte (one that is not UTF-8 as a lone
    surrogate, surrogateescape): decode it for display before printing (os_updates.shown)."""

    status: int
    stdout: str
    stderr: str
    timed_out: bool = False
    overflowed: bool = False


@dataclass(frozen=True)
class HistoryEntry:
    """One step of an image's history (`docker image history`): the instruction and the bytes its layer adds."""

    created_by: str
    size: int


class Engine(Protocol):
    """Every engine action the tool takes."""

    def build(self, request: BuildRequest, log: IO[bytes], cancelled: threading.Event | None = None) -> int:
        """Build a target; its output goes to `log`; return the exit status. Returns promptly (the build
        stopped, its client gone) once `cancelled` is set."""
        ...

    def sbom_attestation(self) -> SbomAttestation:
        """Whether builds attach buildx's SBOM attestation, and why (not): attestation.sbom_attestation of what
        the build client, its builder and the engine's image store are."""
        ...

    def attestations(self, reference: str, platform: str, cancelled: threading.Event | None = None) -> Attested:
        """The attestations attached to the image's `platform` image: its manifest's digest and the predicate types
        of the statements about it. EngineError when they cannot be read (no index: none were kept); returns
        promptly once `cancelled` is set."""
        ...

    def named_contexts(self) -> bool:
        """Whether builds take named build contexts (`BuildRequest.contexts`): buildx, and a BuildKit whose
        Dockerfile frontend knows them (Docker 23 and later; not 20.10's)."""
        ...

    def import_rootfs(
        self, tar_stream: IO[bytes], reference: str, changes: Sequence[str], log: IO[bytes], platform: str | None = None
    ) -> int:
        """Import a root filesystem tar stream as an image (of `platform`; None: the engine's own); return the exit
        status."""
        ...

    def labels(self, reference: str) -> dict[str, str] | None:
        """An image's labels, or None when there is no such image."""
        ...

    def inspect(self, reference: str) -> ImageInfo | None:
        """An image's id, labels, environment, user, layers, size and digests, or None when there is no such image."""
        ...

    def pull(self, reference: str) -> list[str]:
        """Pull an image; the errors (none on success)."""
        ...

    def run_python(self, reference: str, args: list[str]) -> str:
        """Run the image's `python` with args in a throwaway container without network; its stdout. ProbeError
        when it fails, runs past its time limit or writes more than the engine's bound."""
        ...

    def run_shell(
        self, reference: str, script: str, *, user: str = "", network: str | None = None, timeout_s: float = 600.0
    ) -> ShellResult:
        """Run `script` with the image's /bin/sh (its entrypoint overridden) in a throwaway container, as
        `user` (`0:0`; empty: the image's own USER), on `network` (a `docker run --network` value: `default`,
        `host`, a network's name; None: no network); stopped and removed after `timeout_s` seconds, or once its
        output passes the engine's bound. Its exit status and output; EngineError when the engine could not run
        it (no such image, no engine)."""
        ...

    def start_container(
        self, reference: str, *, name: str, gpus: bool, shm_size: str, run_args: Sequence[str] = ()
    ) -> None:
        """Start a long-running container of the image named `name` (docker_engine.container_name: the caller
        chose it before, and removes it by it whatever happens), no network unless `run_args` (`docker run`
        options as tokens) name one. EngineError when it could not start."""
        ...

    def remove_container(self, name: str) -> None:
        """Remove a container, running or not."""
        ...

    def gpu_runtime_available(self) -> bool:
        """Whether the engine can hand GPUs to containers (the NVIDIA runtime is installed)."""
        ...

    def tag(self, reference: str, repository: str, tag: str) -> None:
        """Give an image another name."""
        ...

    def push(
        self,
        repository: str,
        tags: Sequence[str],
        say: Callable[[str], None] | None = None,
        compression: str = values.GZIP,
    ) -> list[str]:
        """Push the tags of one image, retrying transient failures (each retry told to `say`), its layers
        compressed with `compression` (values.COMPRESSIONS); the errors (none on success). A zstd push
        first proves that what it uploads is the image the tags name, and uploads nothing when it is not."""
        ...

    def create_index(
        self,
        repository: str,
        names: Sequence[str],
        sources: Sequence[str],
        annotations: Sequence[tuple[str, str]] = (),
    ) -> list[str]:
        """Write, in the registry, one index (OCI image index or Docker manifest list) of the pushed images
        `sources` (references) under each of `names` (tags of `repository`), with `annotations` on the index;
        the errors (none on success)."""
        ...

    def point_tag(self, repository: str, tag: str, digest: str) -> list[str]:
        """Make `repository:tag` name the index `repository@digest` as it is (a carbon copy: the same bytes, so
        the same digest); the errors (none on success)."""
        ...

    def manifest(self, reference: str) -> bytes | None:
        """The manifest or index a registry serves under `reference` (a tag or `repository@sha256:...`), its
        bytes as served; None when the registry has none there. EngineError when it cannot be read: no answer
        within TORCHIMAGES_REGISTRY_DEADLINE_S, more than manifests.MAX_BYTES (4 MiB), refused."""
        ...

    def answers(self) -> bool:
        """Whether the engine still answers (a ping)."""
        ...

    def address(self) -> str:
        """Where the engine is, for messages: `unix:///var/run/docker.sock`, `tcp://...`."""
        ...

    def remove_image(self, reference: str) -> None:
        """Remove an image reference if present."""
        ...

    def history(self, reference: str) -> list[HistoryEntry]:
        """An image's history, newest step first."""
        ...

    def stored_layers(self, reference: str, cancelled: threading.Event | None = None) -> StoredLayers | None:
        """The image's layers as the engine's content store keeps them, each to be streamed by its blob's digest;
        None where no content store answers for it (then `exported` is read). EngineError when there is no such
        image."""
        ...

    def stored_blob(self, digest: str) -> bytes | None:
        """A document of the engine's content store by its digest (an image's own index, or a manifest: on the
        containerd store an image's id names its own), its bytes hashed to the digest; None where no content store
        gives it (not held; the classic store; a user who may not use containerd's socket)."""
        ...

    def hold_index(self, reference: str, document: bytes) -> None:
        """Name the OCI image index `document` `reference` in the engine's image store (the containerd store
        holds an index; every manifest it names is there already). EngineError where it cannot: the classic
        store, a refusal."""
        ...

    def exported(
        self, reference: str, cancelled: threading.Event | None = None
    ) -> contextlib.AbstractContextManager[IO[bytes]]:
        """The image as the engine exports it (`docker save` of its id: a tar of manifest.json, the
        configuration and each layer's tarball), as a stream read once from the start, never written to disk.
        Leaving the context stops the export. EngineError when there is no such image or the export fails
        (on leaving, when it broke off midway); once `cancelled` is set the stream ends early and leaving
        raises EngineError saying so."""
        ...
