"""The Docker engine: a BuildKit-capable CLI for builds, the docker SDK for everything else."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.types

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
    """No usable engine or BuildKit client: the message says what is missing and how to get it."""


@dataclass(frozen=True)
class BuildClient:
    """How to run a BuildKit build: `[docker, buildx, build]` or `[docker, build]` with DOCKER_BUILDKIT=1."""

    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...]

    def environment(self) -> dict[str, str]:
        """The process environment for a build."""
        return {**os.environ, **dict(self.env)}


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


def connect() -> Any:
    """A docker SDK client for a running engine, or EngineError saying how to get one."""
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except docker.errors.DockerException as exc:
        raise EngineError(f"no Docker engine answers ({exc}); {HOW_TO_GET_AN_ENGINE}") from None
    return client


def image_labels(client: Any, reference: str) -> dict[str, str] | None:
    """An image's labels, or None when there is no such image."""
    try:
        image = client.images.get(reference)
    except docker.errors.ImageNotFound:
        return None
    return dict(image.labels or {})


def remove_image(client: Any, reference: str) -> None:
    """Remove an image reference if present."""
    with contextlib.suppress(docker.errors.ImageNotFound):
        client.images.remove(reference, noprune=False)


class ProbeError(Exception):
    """A program run in a throwaway container failed: the message says how."""


class DockerEngine:
    """The engine as the verification and the smoke runner see it (the docker SDK underneath)."""

    def __init__(self, client: Any | None = None) -> None:
        self.client = client if client is not None else connect()

    def run_python(self, reference: str, args: list[str]) -> str:
        """`python ARGS` in a throwaway container of the image, without network; its stdout."""
        try:
            output = self.client.containers.run(
                reference, ["python", *args], remove=True, stdout=True, stderr=False, network_disabled=True
            )
        except docker.errors.ContainerError as exc:
            stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else str(exc.stderr or "")
            raise ProbeError(f"python exited with status {exc.exit_status} in {reference}: {stderr[-2000:]}") from None
        except docker.errors.DockerException as exc:
            raise ProbeError(f"could not run python in {reference}: {exc}") from None
        return output.decode(errors="replace") if isinstance(output, bytes) else str(output)

    def start_container(self, reference: str, *, gpus: bool, shm_size: str) -> str:
        """A detached `sleep infinity` container of the image, without network; its name."""
        requests = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])] if gpus else []
        try:
            container = self.client.containers.run(
                reference,
                ["sleep", "infinity"],
                detach=True,
                name=f"torchimages-smoke-{uuid.uuid4().hex[:10]}",
                shm_size=shm_size,
                device_requests=requests,
                network_mode="none",
            )
        except docker.errors.DockerException as exc:
            raise ProbeError(f"could not start a container of {reference}: {exc}") from None
        return str(container.name)

    def remove_container(self, name: str) -> None:
        """Stop and remove a container; nothing when it is already gone."""
        with contextlib.suppress(docker.errors.NotFound):
            self.client.containers.get(name).remove(force=True)

    def gpu_runtime_available(self) -> bool:
        """Whether the engine has the NVIDIA runtime (NVIDIA Container Toolkit)."""
        return "nvidia" in (self.client.info().get("Runtimes") or {})
