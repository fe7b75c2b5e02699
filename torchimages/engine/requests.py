"""Command lines for the engine's clients: a BuildKit build of one target, a long-running test container, a
shell script in a throwaway container."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from torchimages.engine.types import BuildRequest, EngineError

# `docker run` options the tool sets itself to keep control of its test container: why each is refused.
CONTROLLED = {
    "--name": "the tool names the container itself, to run the suites in it and remove it",
    "--rm": "the tool removes the container itself, after the suites",
    "--detach": "the tool runs the container detached itself",
    "--entrypoint": "the container must keep running `sleep infinity` while the suites run in it",
}
_SHORT = {"d": "--detach"}  # docker's one-letter spellings of the options above
_SHORT_WITH_VALUE = set("aceGhlmpuvw")  # one-letter options whose value may follow in the same word (-ePATH=x)


def _controlled(token: str) -> str | None:
    """The controlled option a `docker run` word spells (`--name=x`, `--detach=true`, `-itd`), or None."""
    if token.startswith("--"):
        name = token.split("=", 1)[0]
        return name if name in CONTROLLED else None
    if token.startswith("-") and len(token) > 1:
        for letter in token[1:]:
            if letter in _SHORT:
                return _SHORT[letter]
            if letter in _SHORT_WITH_VALUE or not letter.isalpha():
                return None
    return None


def split_run_args(values: Sequence[str]) -> list[str]:
    """`--run-arg` values as `docker run` tokens: each value is shlex-split (`"--ulimit memlock=-1"` is two).
    EngineError for a value that does not split, or that sets an option the tool controls (CONTROLLED)."""
    tokens: list[str] = []
    for value in values:
        try:
            split = shlex.split(value)
        except ValueError as exc:
            raise EngineError(f"--run-arg {value!r}: {exc}") from None
        tokens += split
    value_next = False  # the word after `-e` (`-e -d`: -d is the value) is no option
    for token in tokens:
        option = None if value_next else _controlled(token)
        if option is not None:
            raise EngineError(f"--run-arg {token!r}: {option} cannot be given: {CONTROLLED[option]}")
        value_next = (
            not value_next and len(token) > 1 and token[0] == "-" != token[1] and token[-1] in _SHORT_WITH_VALUE
        )
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


def python_command(docker: str, reference: str, name: str, args: Sequence[str]) -> list[str]:
    """The `docker run` of the image's `python` with `args` (through the image's entrypoint, if it has one) in a
    throwaway container without network."""
    return [docker, "run", "--rm", "--name", name, "--network", "none", reference, "python", *args]


def shell_command(
    docker: str, reference: str, name: str, script: str, *, user: str = "", network: str | None = None
) -> list[str]:
    """The `docker run` of a throwaway container that runs `script` with /bin/sh, whatever the image's
    entrypoint: as `user` (empty: the image's), on `network` (None: none), never pulling the image."""
    cmd = [docker, "run", "--rm", "--name", name, "--pull", "never", "--network", network or "none"]
    if user:
        cmd += ["--user", user]
    return [*cmd, "--entrypoint", "/bin/sh", reference, "-c", script]


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
    for name, value in request.build_args:
        cmd += ["--build-arg", f"{name}={value}"]
    if request.platform:
        cmd += ["--platform", request.platform]
    for name, value in request.labels:
        cmd += ["--label", f"{name}={value}"]
    for name, value in request.contexts:
        cmd += ["--build-context", f"{name}={value}"]
    if request.sbom_generator and client.buildx:
        cmd += [f"--sbom=generator={request.sbom_generator}", "--provenance=mode=max"]
    if request.gzip_level is not None:
        if not client.buildx or request.gzip_level not in range(1, 10):
            raise EngineError(f"a gzip level of {request.gzip_level} cannot be given to {' '.join(client.command)}")
        # the image exporter of buildx's docker driver, named by --tag, into the engine's containerd store
        cmd += ["--output", f"type=image,compression=gzip,compression-level={request.gzip_level}"]
    return [*cmd, *_cache_options(client, request), str(request.context)]


def index_command(
    docker: str,
    repository: str,
    names: Sequence[str],
    sources: Sequence[str],
    annotations: Sequence[tuple[str, str]] = (),
) -> list[str]:
    """`docker buildx imagetools create`: the index of `sources` under each of `names`, each annotation on the
    index itself (`--annotation index:KEY=VALUE`, buildx 0.12 and later)."""
    cmd = [docker, "buildx", "imagetools", "create"]
    for name in names:
        cmd += ["--tag", f"{repository}:{name}"]
    for key, value in annotations:
        cmd += ["--annotation", f"index:{key}={value}"]
    return [*cmd, *sources]


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
