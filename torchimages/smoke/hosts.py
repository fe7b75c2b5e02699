"""What the suites ask of a testinfra host: its id and backend, nvcc's path, a root view, `docker inspect`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import testinfra.host


FIND_NVCC = 'command -v nvcc || { n="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"; [ -x "$n" ] && echo "$n"; }'


def find_nvcc(host: testinfra.host.Host) -> str:
    """nvcc's path in the host (PATH, then $CUDA_HOME/bin, /usr/local/cuda/bin), or ''."""
    return str(host.run(FIND_NVCC).stdout.strip())


def host_id(host: testinfra.host.Host) -> str:
    """A stable key for per-host caches."""
    return str(host.backend.get_pytest_id())


def is_local(host: testinfra.host.Host) -> bool:
    """True for testinfra's local:// backend."""
    return str(host.backend.NAME) == "local"


def is_docker(host: testinfra.host.Host) -> bool:
    """True for testinfra's docker:// backend."""
    return str(host.backend.NAME) == "docker"


def root_host(host: testinfra.host.Host) -> testinfra.host.Host:
    """The same container as root (docker backend), to read files the image user may not; else the host."""
    if not is_docker(host):
        return host
    import testinfra

    return testinfra.get_host(f"docker://root@{host.backend.name}")


def container_inspect(host: testinfra.host.Host, template: str) -> str:
    """`docker inspect --format TEMPLATE` of the host's container, through the channel testinfra's
    docker backend already uses (the docker CLI); '' when it cannot be read."""
    result = host.backend.run_local("docker inspect --format %s %s", template, host.backend.name)
    return str(result.stdout.strip()) if result.rc == 0 else ""
