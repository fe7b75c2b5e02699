"""Command lines for the engine's clients: a BuildKit build of one target, a long-running test container."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from torchimages.engine.types import BuildRequest, EngineError


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
