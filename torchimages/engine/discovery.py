"""Finding a docker client that builds with BuildKit, and one that runs `docker buildx`."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from torchimages import settings
from torchimages.engine.process import captured
from torchimages.engine.requests import BuildClient
from torchimages.engine.types import HOW_TO_GET_BUILDKIT, EngineError
from torchimages.problems import shown

BUILDKIT_PROBE = "FROM scratch\nLABEL io.torchimages.probe=1\n"
# Builds only where named contexts work: without them, `probectx` is an image to pull (and no registry has it).
CONTEXTS_PROBE = "FROM scratch\nCOPY --from=probectx marker /marker\n"
CONTEXTS_PROBE_TIMEOUT_S = 60
SERVER_ANSWER_BYTES = 64 * 1024  # what `docker info --format` may say: an ID or a version string
BUILDKIT_PROBE_TIMEOUT_S = 120  # a tiny build from scratch: seconds, where an engine answers


def _candidates(explicit: str | None) -> list[str]:
    if explicit:
        return [explicit]
    found = []
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        path = Path(folder) / "docker"
        if path.is_file() and os.access(path, os.X_OK) and str(path.resolve()) not in found:
            found.append(str(path.resolve()))
    return found


def client_problem(named: str) -> str | None:
    """Why the docker client named (--docker, $DOCKER: a path, or a name looked up on PATH) cannot be run,
    or None: not there, a folder, or not executable, each said as it is."""
    if os.sep not in named:
        return None if shutil.which(named) else f"the docker client '{named}' was not found on PATH"
    path = Path(named)
    if not path.exists():
        return f"the docker client '{named}' was not found"
    if path.is_dir():
        return f"the docker client '{named}' is a folder, not a program"
    if not os.access(path, os.X_OK):
        return f"the docker client '{named}' is not executable (chmod +x it, or name another)"
    return None


SERVER_ASK_TIMEOUT_S = 60.0  # `docker info`: a second where the engine answers


def server_problem(
    docker: str, expected: tuple[str, str], address: str = "", timeout_s: float = SERVER_ASK_TIMEOUT_S
) -> str | None:
    """Why the docker client `docker` does not answer for the engine the SDK asks (None: it does). `expected` is
    that engine's (field, value) of `docker info`: its ID (its ServerVersion where it gives none); the client's
    `docker info --format {{.FIELD}}` must say the same. A client that exits 0 and says nothing (/bin/true), echoes
    its arguments (/bin/echo) or asks another engine (another DOCKER_HOST or context) would check nothing.
    `address` names the SDK's engine in the message. Bounded by `timeout_s`."""
    field, value = expected
    cmd = [docker, "info", "--format", "{{." + field + "}}"]
    shown_cmd = shlex.join(cmd)
    try:
        result = captured(cmd, timeout_s=timeout_s, limit_bytes=SERVER_ANSWER_BYTES)
    except OSError as exc:
        return f"the docker client {docker} cannot ask the engine: `{shown_cmd}` did not run ({exc})"
    said = result.stdout.decode(errors="replace").strip() if isinstance(result.stdout, bytes) else ""
    if result.stopped:
        return f"the docker client {docker} cannot ask the engine: `{shown_cmd}` {result.stopped}"
    if result.status == 0 and said == value:
        return None
    if result.status == 0:
        answer, at = (f"'{shown(said)}'" if said else "nothing"), (f" ({address})" if address else "")
        return (
            f"the docker client {docker} does not answer for the engine the tool asks{at}: "
            f"`{shown_cmd}` says {answer}, the engine's {field} is '{shown(value)}' "
            "(name the client of that engine: --docker, DOCKER; or point DOCKER_HOST at the client's engine)"
        )
    stderr = result.stderr.decode(errors="replace") if isinstance(result.stderr, bytes) else ""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    why = shown(lines[-1][:300]) if lines else f"exit status {result.status}, no {field}"
    return f"the docker client {docker} cannot ask the engine: `{shown_cmd}` failed ({why})"


def _builds(client: BuildClient) -> bool:
    """Whether the client really builds with BuildKit (a tiny build that pulls nothing)."""
    with tempfile.TemporaryDirectory() as context:
        Path(context, "Dockerfile").write_text(BUILDKIT_PROBE)
        try:
            result = subprocess.run(
                [*client.command, "--output", "type=tar,dest=" + os.devnull, context],
                env=client.environment(),
                capture_output=True,
                check=False,
                timeout=BUILDKIT_PROBE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:  # an engine that does not answer builds nothing
            return False
    return result.returncode == 0


def takes_named_contexts(client: BuildClient) -> bool:
    """Whether the client's builds take named build contexts (`--build-context`): buildx on a BuildKit whose
    Dockerfile frontend knows them (Docker 23 and later; 20.10's does not). A tiny build that pulls nothing
    where they work (where they do not, BuildKit asks a registry for `probectx`: bounded, a no)."""
    if not client.buildx:
        return False
    with tempfile.TemporaryDirectory() as context:
        Path(context, "Dockerfile").write_text(CONTEXTS_PROBE)
        Path(context, "marker").write_text("1\n")
        command = [*client.command, "--build-context", f"probectx={context}"]
        try:
            result = subprocess.run(
                [*command, "--output", "type=tar,dest=" + os.devnull, context],
                env=client.environment(),
                capture_output=True,
                check=False,
                timeout=CONTEXTS_PROBE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return False
    return result.returncode == 0


def find_build_client(explicit: str | None = None) -> BuildClient:
    """The first docker client that builds with BuildKit: buildx where present, else DOCKER_BUILDKIT=1."""
    explicit = explicit or settings.text("DOCKER")
    candidates = _candidates(explicit)
    if explicit and (problem := client_problem(explicit)):
        raise EngineError(problem, HOW_TO_GET_BUILDKIT)
    if not candidates:
        raise EngineError("no docker client on PATH", HOW_TO_GET_BUILDKIT)
    for path in candidates:
        for client in (
            BuildClient((path, "buildx", "build"), ()),
            BuildClient((path, "build"), (("DOCKER_BUILDKIT", "1"),)),
        ):
            if _builds(client):
                return client
    tried = ", ".join(candidates)
    raise EngineError(f"no docker client here builds with BuildKit (tried {tried})", HOW_TO_GET_BUILDKIT)


def find_buildx(explicit: str | None = None) -> str:
    """The docker client that runs the buildx plugin (`docker buildx bake`): the one named (`--docker`,
    $DOCKER), else the first on PATH whose `buildx version` answers. Any client finds the plugin in its
    cli-plugins folders (Debian's docker-buildx: /usr/libexec/docker/cli-plugins), a 28.x one as well
    as Debian's 20.10 one; both drive the engine's own BuildKit through the `docker` driver."""
    explicit = explicit or settings.text("DOCKER")
    if explicit and (problem := client_problem(explicit)):
        raise EngineError(problem, "name a docker client with the buildx plugin (--docker, DOCKER=/path/to/docker)")
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
