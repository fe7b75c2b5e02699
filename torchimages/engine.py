"""The Docker engine: the only module that talks to Docker.

`Engine` is the interface the rest of the tool uses (build a target, import a root filesystem, run a
probe, start and remove a test container, tag, push, remove); `DockerEngine` implements it with a
BuildKit-capable CLI for builds and imports and the docker SDK for everything else. Unit tests use
an in-memory fake with the same methods.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from .reference import repository_problem

BUILDKIT_PROBE = "FROM scratch\nLABEL io.torchimages.probe=1\n"
HOW_TO_GET_AN_ENGINE = (
    "start a Docker engine (dockerd) and make sure `docker info` answers; on Debian/Ubuntu: "
    "`apt-get install docker.io` then `dockerd &` (see README, 'Set-up')"
)
HOW_TO_GET_BUILDKIT = (
    "install the buildx plugin (docker-buildx-plugin) for your docker client, or use a docker client "
    "that builds with DOCKER_BUILDKIT=1 (e.g. Debian's docker.io); name it with --docker or DOCKER=/path/to/docker"
)


class EngineError(Exception):
    """No usable engine or BuildKit client, or an engine action failed: the message says what and why."""


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
    def parse(cls, text: str) -> CacheSpec:
        """`type=T,key=value,...`, or a bare image reference (= `type=registry,ref=REF`); ValueError says why not."""
        if not text or text != text.strip() or any(c.isspace() or not c.isprintable() for c in text):
            raise ValueError("a cache spec is `type=registry,ref=REF`, `type=inline` or an image reference, no spaces")
        if "=" not in text:
            text = f"type=registry,ref={text}"
        fields = [part.partition("=") for part in text.split(",")]
        if any(not key or not sep for key, sep, _ in fields):
            raise ValueError(f"'{text}' is not a list of key=value fields")
        attrs = dict((key, value) for key, _, value in fields)
        kind = attrs.pop("type", "")
        if kind not in CACHE_TYPES:
            raise ValueError(f"unknown cache type '{kind}' (allowed: {', '.join(CACHE_TYPES)})")
        if kind == "registry":
            _check_reference(attrs.get("ref", ""))
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


def _check_reference(ref: str) -> None:
    """ValueError unless `ref` (with `{tag}` standing for a tag) is `REPOSITORY[:TAG][@DIGEST]`."""
    if not ref:
        raise ValueError("type=registry needs ref=REF (an image reference)")
    name = ref.replace(TAG_PLACEHOLDER, "tag").partition("@")[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name, _, tag = name.rpartition(":")
        if not re.fullmatch(r"[\w][\w.-]{0,127}", tag):
            raise ValueError(f"'{ref}': the tag '{tag}' is not a valid tag")
    problem = repository_problem(name)
    if problem:
        raise ValueError(f"'{ref}' is not an image reference: {problem}")


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
class ImageInfo:
    """What the engine knows of a local image: its id, labels, environment, default user, layers and size."""

    reference: str
    id: str
    labels: dict[str, str]
    env: dict[str, str]
    user: str
    layers: tuple[str, ...]
    tags: tuple[str, ...] = ()
    size: int = 0  # bytes, uncompressed (`docker image inspect -f {{.Size}}`)
    repo_digests: tuple[str, ...] = ()  # `repository@sha256:...`, once pushed (or pulled)


@dataclass(frozen=True)
class HistoryEntry:
    """One step of an image's history (`docker image history`): the instruction and the bytes its layer adds."""

    created_by: str
    size: int


def split_run_args(values: Sequence[str]) -> list[str]:
    """`--run-arg` values as `docker run` tokens: each value is shlex-split (`"--ulimit memlock=-1"` is two)."""
    tokens: list[str] = []
    for value in values:
        try:
            tokens += shlex.split(value)
        except ValueError as exc:
            raise EngineError(f"--run-arg {value!r}: {exc}") from None
    return tokens


def _sets_network(tokens: Sequence[str]) -> bool:
    return any(t in ("--network", "--net") or t.startswith(("--network=", "--net=")) for t in tokens)


def run_command(
    docker: str, reference: str, name: str, *, gpus: bool, shm_size: str, run_args: Sequence[str] = ()
) -> list[str]:
    """The `docker run` of a long-running test container: no network unless `run_args` name one
    (docker refuses two --network options), the run args (already split into tokens) before the image."""
    cmd = [docker, "run", "--detach", "--name", name]
    if not _sets_network(run_args):
        cmd += ["--network", "none"]
    cmd += ["--shm-size", shm_size]
    if gpus:
        cmd += ["--gpus", "all"]
    return [*cmd, *run_args, reference, "sleep", "infinity"]


class Engine(Protocol):
    """Every engine action the tool takes."""

    def build(self, request: BuildRequest, log: IO[bytes], cancelled: threading.Event | None = None) -> int:
        """Build a target; its output goes to `log`; return the exit status. Returns promptly (the build
        stopped, its client gone) once `cancelled` is set."""
        ...

    def import_rootfs(self, tar_stream: IO[bytes], reference: str, changes: Sequence[str], log: IO[bytes]) -> int:
        """Import a root filesystem tar stream as an image; return the exit status."""
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
        """Run the image's `python` with args in a throwaway container without network; its stdout."""
        ...

    def start_container(self, reference: str, *, gpus: bool, shm_size: str, run_args: Sequence[str] = ()) -> str:
        """Start a long-running container of the image (no network unless `run_args`, `docker run` options
        as tokens, name one); return its name."""
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

    def push(self, repository: str, tag: str, say: Callable[[str], None] | None = None) -> list[str]:
        """Push one tag, retrying transient failures (each retry told to `say`); the errors (none on success)."""
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


@dataclass(frozen=True)
class BuildClient:
    """How to run a BuildKit build: `[docker, buildx, build]` or `[docker, build]` with DOCKER_BUILDKIT=1."""

    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...]

    @property
    def docker(self) -> str:
        """The docker CLI binary."""
        return self.command[0]

    @property
    def buildx(self) -> bool:
        """Whether this is `docker buildx build` (else the classic client with DOCKER_BUILDKIT=1)."""
        return "buildx" in self.command[1:2]

    def environment(self) -> dict[str, str]:
        """The process environment for a build."""
        return {**os.environ, **dict(self.env)}


def build_command(client: BuildClient, request: BuildRequest) -> list[str]:
    """The BuildKit invocation of one build request."""
    cmd = [
        *client.command,
        "--file",
        str(request.dockerfile),
        "--target",
        request.target,
        "--tag",
        request.reference,
        "--progress",
        "plain",
    ]
    for secret_id, path in request.secrets:
        cmd += ["--secret", f"id={secret_id},src={path}"]
    if request.network:
        cmd += ["--network", request.network]
    if request.no_cache:
        cmd.append("--no-cache")
    return [*cmd, *_cache_options(client, request), str(request.context)]


def _cache_options(client: BuildClient, request: BuildRequest) -> list[str]:
    """buildx takes cache specs as written; the classic client takes image references (`--cache-from REF`)
    and exports inline through a build argument. ValueError for what the classic client cannot express."""
    options: list[str] = []
    if client.buildx:
        for option, specs in (("--cache-from", request.cache_from), ("--cache-to", request.cache_to)):
            for spec in specs:
                options += [option, str(spec)]
        return options
    for spec in request.cache_from:
        if spec.type != "registry" or not spec.ref:
            raise ValueError(f"the classic docker client cannot import a cache of type {spec.type}")
        options += ["--cache-from", spec.ref]
    for spec in request.cache_to:
        if spec.type != "inline":
            raise ValueError(f"the classic docker client cannot export a cache of type {spec.type}")
    if request.cache_to:
        options += ["--build-arg", "BUILDKIT_INLINE_CACHE=1"]
    return options


# How often a cancellable subprocess looks at its cancel event, and how long it gets to stop after SIGINT
# (the docker CLI cancels its BuildKit session on SIGINT) before SIGTERM, then SIGKILL.
CANCEL_POLL_S = 0.2
CANCEL_GRACE_S = 10.0


def run_cancellable(
    cmd: Sequence[str], cancelled: threading.Event | None, **kwargs: Any
) -> subprocess.CompletedProcess[Any]:
    """Run a command in its own process group (a terminal's Ctrl-C does not reach it: the caller decides);
    once `cancelled` is set, stop the whole group (SIGINT, then SIGTERM, then SIGKILL) and return at once.
    `kwargs` go to Popen (stdout/stderr may be PIPE: the output comes back as with subprocess.run)."""
    process = subprocess.Popen(cmd, start_new_session=True, **kwargs)
    with process:
        try:
            while True:
                try:
                    out, err = process.communicate(timeout=CANCEL_POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    if cancelled is not None and cancelled.is_set():
                        out, err = stop_group(process)
                        break
        except BaseException:
            stop_group(process)
            raise
    return subprocess.CompletedProcess(list(cmd), process.returncode, out, err)


def stop_group(process: subprocess.Popen[Any]) -> tuple[Any, Any]:
    """Stop a process started with start_new_session, and everything it started; its remaining output."""
    output: tuple[Any, Any] = (None, None)
    for sig, grace in ((signal.SIGINT, CANCEL_GRACE_S), (signal.SIGTERM, 5.0), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            output = process.communicate(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    # What it started and left behind (a shell's background jobs ignore SIGINT) goes too; the group's id
    # cannot be reused while any member lives, and an empty group answers ProcessLookupError.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    return output


# A push is tried at most PUSH_TRIES times; the n-th retry waits PUSH_BACKOFF_S * 2**(n-1) seconds.
PUSH_TRIES = 3
PUSH_BACKOFF_S = 2.0
# A registry's or the network's passing trouble (worth another try); an auth or "denied"/"unknown" error is not.
_TRANSIENT = re.compile(
    r"connection (?:refused|reset|aborted)|broken pipe|timed? ?out|timeout|\bEOF\b|temporar(?:y|ily)|"
    r"no such host|network is unreachable|\b50[0234]\b|internal server error|bad gateway|service unavailable|"
    r"gateway time|too many requests|\b429\b",
    re.IGNORECASE,
)
_PERMANENT = re.compile(
    r"denied|unauthori[sz]ed|authentication required|forbidden|\bunknown\b|not found", re.IGNORECASE
)


def transient(error: str) -> bool:
    """Whether a push error is worth another try: a connection or server (5xx, 429) error, never an auth,
    "denied" or "unknown" one."""
    return bool(_TRANSIENT.search(error)) and not _PERMANENT.search(error)


def push_with_retries(
    attempt: Callable[[], list[str]],
    what: str,
    say: Callable[[str], None],
    tries: int = PUSH_TRIES,
    backoff_s: float = PUSH_BACKOFF_S,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Run `attempt` (one push: its errors, or EngineError) until it succeeds, fails for good or has been
    tried `tries` times; exponential backoff between tries, each retry told to `say`. The last errors."""
    for n in range(1, tries + 1):
        try:
            errors = attempt()
        except EngineError as exc:
            errors = [str(exc)]
        if not errors or n == tries or not all(map(transient, errors)):
            return errors
        delay = backoff_s * 2 ** (n - 1)
        say(f"{what}: push failed ({errors[-1]}); retry {n}/{tries - 1} in {delay:.0f} s")
        sleep(delay)
    return errors


def stored_size(manifest: Any) -> int | None:
    """The bytes a registry stores for one image: its config and compressed layers, from an image manifest
    (OCI or Docker v2); None for anything else (a manifest list names several images)."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("layers"), list):
        return None
    parts = [manifest.get("config") or {}, *manifest["layers"]]
    sizes = [part.get("size") if isinstance(part, dict) else None for part in parts]
    if not all(isinstance(size, int) for size in sizes):
        return None
    return sum(int(size) for size in sizes if size is not None)


def _loopback(reference: str) -> bool:
    """Whether a reference names a registry on this machine (which Docker, too, lets speak plain HTTP)."""
    first = reference.split("/", 1)[0] if "/" in reference else ""
    host = first.rsplit(":", 1)[0] if ":" in first else first
    return host in ("localhost", "::1", "[::1]") or host.startswith("127.")


def _candidates(explicit: str | None) -> list[str]:
    if explicit:
        return [explicit]
    found = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        path = Path(folder) / "docker"
        if path.is_file() and os.access(path, os.X_OK) and str(path.resolve()) not in found:
            found.append(str(path.resolve()))
    return found


def _builds(client: BuildClient) -> bool:
    """Whether the client really builds with BuildKit (a tiny build that pulls nothing)."""
    with tempfile.TemporaryDirectory() as context:
        Path(context, "Dockerfile").write_text(BUILDKIT_PROBE)
        result = subprocess.run(
            [*client.command, "--output", "type=tar,dest=" + os.devnull, context],
            env=client.environment(),
            capture_output=True,
            check=False,
        )
    return result.returncode == 0


def find_build_client(explicit: str | None = None) -> BuildClient:
    """The first docker client that builds with BuildKit: buildx where present, else DOCKER_BUILDKIT=1."""
    explicit = explicit or os.environ.get("DOCKER")
    candidates = _candidates(explicit)
    if explicit and not shutil.which(explicit):
        raise EngineError(f"the docker client '{explicit}' was not found; {HOW_TO_GET_BUILDKIT}")
    if not candidates:
        raise EngineError(f"no docker client on PATH; {HOW_TO_GET_BUILDKIT}")
    for path in candidates:
        for client in (
            BuildClient((path, "buildx", "build"), ()),
            BuildClient((path, "build"), (("DOCKER_BUILDKIT", "1"),)),
        ):
            if _builds(client):
                return client
    tried = ", ".join(candidates)
    raise EngineError(f"no docker client here builds with BuildKit (tried {tried}); {HOW_TO_GET_BUILDKIT}")


def find_buildx(explicit: str | None = None) -> str:
    """The docker client that runs the buildx plugin (`docker buildx bake`): the one named (`--docker`,
    $DOCKER), else the first on PATH whose `buildx version` answers. Any client finds the plugin in its
    cli-plugins folders (Debian's docker-buildx: /usr/libexec/docker/cli-plugins), a 28.x one as well
    as Debian's 20.10 one; both drive the engine's own BuildKit through the `docker` driver."""
    explicit = explicit or os.environ.get("DOCKER")
    candidates = _candidates(explicit)
    for path in candidates:
        try:
            result = subprocess.run([path, "buildx", "version"], capture_output=True, check=False, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if result.returncode == 0:
            return path
    tried = ", ".join(candidates) or "no docker client on PATH"
    raise EngineError(
        f"no docker client here runs `docker buildx` (tried {tried}): install the buildx plugin "
        "(Debian: docker-buildx, which scripts/start-docker.sh installs; Docker's: docker-buildx-plugin)"
    )


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
    )


def _sdk_client() -> Any:
    import docker  # the SDK is imported only by commands that talk to an engine
    import docker.errors

    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except (docker.errors.DockerException, *CONNECTION_ERRORS) as exc:
        raise EngineError(f"no Docker engine answers ({exc}); {HOW_TO_GET_AN_ENGINE}") from None
    return client


def _connection_errors() -> tuple[type[BaseException], ...]:
    """What the SDK raises, besides its DockerException, when the engine is gone: requests' errors
    (connection refused, reset, read timeout) and the OSErrors beneath them."""
    try:
        import requests.exceptions
    except ImportError:  # no SDK (nor requests) on this machine: commands that need no engine still run
        return (OSError,)
    return (requests.exceptions.RequestException, OSError)


CONNECTION_ERRORS = _connection_errors()


def _short(exc: BaseException) -> str:
    """A connection error's cause (`[Errno 111] Connection refused`), not requests' paragraph around it."""
    found = re.findall(r"\[Errno -?\d+\] [^'\")]+", str(exc))
    return found[-1] if found else f"{type(exc).__name__}: {str(exc)[:200]}"


def engine_address() -> str:
    """The engine the SDK and CLI talk to: DOCKER_HOST, else the default socket."""
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


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
        client = _sdk_client()
        info = client.info()
        present = set()
        for reference in references:
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.images.get(reference)
                present.add(reference)
    except EngineError as exc:
        return EngineFacts(address, None, str(exc))
    except (docker.errors.DockerException, *CONNECTION_ERRORS) as exc:
        return EngineFacts(address, None, f"the engine at {address} failed to answer ({_short(exc)})")
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
        named = self._docker_cli or os.environ.get("DOCKER")
        return named or shutil.which("docker") or "docker"

    def check_cache(self, cache_from: Sequence[CacheSpec], cache_to: Sequence[CacheSpec]) -> None:
        """EngineError naming every cache import or export the build client cannot do (before any build)."""
        if not cache_from and not cache_to:
            return
        client = self.build_client
        builtin, name = True, "docker build (DOCKER_BUILDKIT=1)"
        if client.buildx:
            found = subprocess.run(
                [client.docker, "buildx", "inspect"], capture_output=True, text=True, env=client.environment()
            )
            driver = re.search(r"^Driver:\s*(\S+)", found.stdout, re.MULTILINE)
            builtin = driver is None or driver.group(1) == "docker"
            name = f"docker buildx ({driver.group(1) if driver else 'unknown'} driver)"
        problem = cache_problem(cache_from, cache_to, builtin, name)
        if problem:
            raise EngineError(problem)

    def build(self, request: BuildRequest, log: IO[bytes], cancelled: threading.Event | None = None) -> int:
        cmd = build_command(self.build_client, request)
        log.write((" ".join(cmd) + "\n").encode())
        log.flush()
        env = self.build_client.environment()
        return run_cancellable(cmd, cancelled, stdout=log, stderr=subprocess.STDOUT, env=env).returncode

    def import_rootfs(self, tar_stream: IO[bytes], reference: str, changes: Sequence[str], log: IO[bytes]) -> int:
        cmd = [self.build_client.docker, "import"]
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
            return _image_info(reference, image.attrs)

    def pull(self, reference: str) -> list[str]:
        try:
            with self._failures(f"pulling {reference}"):
                self.sdk.images.pull(reference)
        except EngineError as exc:
            return [str(exc)]
        return []

    def history(self, reference: str) -> list[HistoryEntry]:
        with self._failures(f"reading the history of {reference}"):
            steps = self.sdk.images.get(reference).history()
            return [HistoryEntry(str(s.get("CreatedBy") or ""), int(s.get("Size") or 0)) for s in steps]

    def save(self, reference: str, path: Path) -> None:
        """Write an image to a `docker save` archive (what syft reads as `docker-archive:PATH`)."""
        cmd = [self.docker_cli, "save", "--output", str(path), reference]
        try:
            result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        except OSError as exc:
            raise EngineError(f"could not run {cmd[0]}: {exc}") from None
        if result.returncode != 0:
            raise EngineError(f"`{shlex.join(cmd)}` failed: {result.stderr.strip() or result.returncode}")

    def compressed_size(self, reference: str) -> int | None:
        """What the registry stores for a pushed image (`docker manifest inspect`: config and compressed
        layers); None when the registry does not answer or the manifest is not one image's."""
        insecure = ["--insecure"] if _loopback(reference) else []
        cmd = [self.docker_cli, "manifest", "inspect", *insecure, reference]
        try:
            result = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
            return stored_size(json.loads(result.stdout)) if result.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired, ValueError):
            return None

    def images_labelled(self, key: str, value: str) -> list[ImageInfo]:
        """Every local image carrying the label `key=value`."""
        with self._failures(f"listing images labelled {key}={value}"):
            found = self.sdk.images.list(filters={"label": f"{key}={value}"})
            return [_image_info(image.id, image.attrs) for image in found]

    def run_python(self, reference: str, args: list[str]) -> str:
        try:
            output = self.sdk.containers.run(
                reference, ["python", *args], remove=True, stdout=True, stderr=False, network_disabled=True
            )
        except self._errors.ContainerError as exc:
            stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else str(exc.stderr)
            raise ProbeError(f"python exited with status {exc.exit_status} in {reference}: {stderr[-2000:]}") from None
        except (self._errors.DockerException, *CONNECTION_ERRORS) as exc:
            raise ProbeError(f"could not run a container of {reference}: {exc}") from None
        return output.decode(errors="replace") if isinstance(output, bytes) else str(output)

    def start_container(self, reference: str, *, gpus: bool, shm_size: str, run_args: Sequence[str] = ()) -> str:
        """Through the docker CLI (the SDK takes no CLI options, and `run_args` are CLI options)."""
        name = f"torchimages-smoke-{uuid.uuid4().hex[:10]}"
        cmd = run_command(self.docker_cli, reference, name, gpus=gpus, shm_size=shm_size, run_args=run_args)
        try:
            result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        except OSError as exc:
            raise EngineError(f"could not run {cmd[0]}: {exc}") from None
        if result.returncode != 0:
            self.remove_container(name)  # `docker run` may leave a created container behind
            stderr = result.stderr.strip() or f"exit status {result.returncode}"
            raise EngineError(f"`{shlex.join(cmd)}` failed: {stderr}")
        return name

    def remove_container(self, name: str) -> None:
        with self._failures(f"removing container {name}"), contextlib.suppress(self._errors.NotFound):
            self.sdk.containers.get(name).remove(force=True)

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

    def push(self, repository: str, tag: str, say: Callable[[str], None] | None = None) -> list[str]:
        def attempt() -> list[str]:
            errors = []
            with self._failures(f"pushing {repository}:{tag}"):
                for line in self.sdk.images.push(repository, tag, stream=True, decode=True):
                    if "error" in line:
                        errors.append(f"{repository}:{tag}: {line['error']}")
            return errors

        return push_with_retries(attempt, f"{repository}:{tag}", say or print)

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

    def remove_image(self, reference: str) -> None:
        with self._failures(f"removing {reference}"), contextlib.suppress(self._errors.ImageNotFound):
            self.sdk.images.remove(reference, noprune=False)
