"""Containers that run together on one machine: a user-defined network of their own and one detached
container per node on it (reachable by its host name: the engine's DNS, and `--add-host` to each node started
after it, for an engine without that DNS), waited for, their output read, and removed with the
network whatever happens: a failure, a timeout, Ctrl-C or SIGTERM (turned into KeyboardInterrupt while they
run). Where the process is killed before it can (SIGKILL; or a parent, hit by the same Ctrl-C, killing it a
moment later), a reaper does it: a small process in a session of its own, started first, that removes them once
its parent is gone. Names are unique per run; everything carries the label `RUN_LABEL=<run id>`.
Through the docker CLI ($DOCKER, else the first on PATH), as `start_container` runs containers.
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
import sys
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from torchimages import settings
from torchimages.engine.process import captured
from torchimages.probes import parse_payload

RUN_LABEL = "io.torchimages.smoke-run"


@dataclass(frozen=True)
class NodeSpec:
    """One node to start: its host name on the network and its extra `docker run` options."""

    hostname: str
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Node:
    """One container's rank: its name, exit status (None: it did not end in time), output, JSON answer."""

    name: str
    hostname: str
    returncode: int | None
    output: str
    payload: Any

    def describe(self, limit: int = 2500) -> str:
        status = "did not end in time" if self.returncode is None else f"exit status {self.returncode}"
        return f"{self.hostname} ({self.name}): {status}; output ends with:\n{self.output.strip()[-limit:]}"


@dataclass(frozen=True)
class ClusterRun:
    """What a run of the nodes gave: its id, the network's name, each node; `error` when none could start."""

    run_id: str
    network: str
    nodes: tuple[Node, ...]
    error: str = ""


def docker_cli() -> str:
    """$DOCKER (the settings table), else the first docker on PATH."""
    return settings.text("DOCKER") or shutil.which("docker") or "docker"


def run_command(
    docker: str, image: str, name: str, hostname: str, network: str, run_id: str, options: Sequence[str], script: str
) -> list[str]:
    """`docker run` of one node: detached, on the run's network under its host name, labelled with the run."""
    return [
        docker,
        "run",
        "--detach",
        "--name",
        name,
        "--hostname",
        hostname,
        "--network",
        network,
        "--network-alias",
        hostname,
        "--label",
        f"{RUN_LABEL}={run_id}",
        *options,
        "--entrypoint",
        "/bin/sh",
        image,
        "-c",
        script,
    ]


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt while the nodes run (main thread only), so their cleanup runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _docker(docker: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """A docker CLI run, bounded (process.captured): TimeoutExpired past `timeout`; a node's endless output
    (`docker logs`) is cut at the limit, its status then -1."""
    found = captured([docker, *args], timeout_s=timeout)
    if found.timed_out:
        raise subprocess.TimeoutExpired([docker, *args], timeout)
    status = -1 if found.status is None else found.status
    return subprocess.CompletedProcess([docker, *args], status, _text(found.stdout), _text(found.stderr))


def _text(output: bytes) -> str:
    return output.decode(errors="replace")


def remove(docker: str, names: Sequence[str], network: str) -> None:
    """Remove the nodes and their network, each attempt on its own (one that fails does not stop the rest)."""
    for name in names:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            _docker(docker, "rm", "--force", "--volumes", name)
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        _docker(docker, "network", "rm", network)


# The reaper: argv = parent pid, docker, network, container names. It waits for its parent to end (or to
# stop it), then removes the containers and the network. Standard library only; it prints nothing.
REAPER = """
import os, subprocess, sys, time
parent, docker, network, names = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
while os.getppid() == parent:
    time.sleep(0.5)
for command in ([docker, "rm", "--force", "--volumes", *names], [docker, "network", "rm", network]):
    try:
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=False)
    except Exception:
        pass
"""


def start_reaper(docker: str, network: str, names: Sequence[str]) -> subprocess.Popen[bytes] | None:
    """The reaper of this run, in a session of its own (a signal to this process group does not reach it)."""
    try:
        return subprocess.Popen(
            [sys.executable, "-c", REAPER, str(os.getpid()), docker, network, *names],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None  # cleaning up in `finally` still holds for everything but a SIGKILL


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def run_nodes(
    image: str,
    nodes: Sequence[NodeSpec],
    script: str,
    *,
    run_id: str | None = None,
    docker: str | None = None,
    wait_s: float = 360,
) -> ClusterRun:
    """Start one container of `image` per node running the /bin/sh `script` on a new network, wait for all
    (at most `wait_s` each), read their output, remove them and the network."""
    docker = docker or docker_cli()
    run_id = run_id or new_run_id()
    network = f"torchimages-mn-{run_id}"
    names = [f"{network}-{node.hostname}" for node in nodes]
    reaper = start_reaper(docker, network, names)
    with _sigterm_interrupts():
        try:
            made = _docker(docker, "network", "create", "--internal", "--label", f"{RUN_LABEL}={run_id}", network)
            if made.returncode != 0:
                return ClusterRun(run_id, network, (), f"docker network create failed: {made.stderr.strip()}")
            known: list[str] = []  # `--add-host NAME:IP` of the nodes started so far
            for name, node in zip(names, nodes, strict=True):
                options = (*known, *node.options)
                command = run_command(docker, image, name, node.hostname, network, run_id, options, script)
                started = _docker(docker, *command[1:], timeout=120)
                if started.returncode != 0:
                    return ClusterRun(
                        run_id, network, (), f"`{shlex.join(command[:-1])} SCRIPT` failed: {started.stderr.strip()}"
                    )
                address = address_on(_docker(docker, "inspect", name).stdout, network)
                known += ["--add-host", f"{node.hostname}:{address}"] if address else []
            hosts = [node.hostname for node in nodes]
            return ClusterRun(run_id, network, tuple(_wait(docker, names, hosts, wait_s)))
        except (OSError, subprocess.TimeoutExpired) as exc:  # no docker CLI, or it did not answer in time
            return ClusterRun(run_id, network, (), f"{docker}: {exc}")
        finally:
            remove(docker, names, network)
            if reaper is not None:  # nothing left for it: stop it (its SIGTERM default ends it at once)
                reaper.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    reaper.wait(timeout=10)


def address_on(inspected: str, network: str) -> str | None:
    """A container's IP address on `network`, from `docker inspect NAME` (None when it has none there). Later
    nodes get it with `--add-host`, so they find node0 by name where the engine's embedded DNS does not
    answer (an engine run with `--iptables=false`: its DNS redirect is an iptables rule)."""
    try:
        (container,) = json.loads(inspected)
        found = container["NetworkSettings"]["Networks"][network]["IPAddress"]
    except (ValueError, TypeError, KeyError):
        return None
    return found if isinstance(found, str) and re.fullmatch(r"[0-9a-fA-F.:]+", found) else None


def _wait(docker: str, names: Sequence[str], hosts: Sequence[str], wait_s: float) -> Iterator[Node]:
    for name, host in zip(names, hosts, strict=True):
        try:
            waited = _docker(docker, "wait", name, timeout=wait_s)
            code: int | None = int(waited.stdout.strip()) if waited.returncode == 0 else None
        except (subprocess.TimeoutExpired, ValueError):
            code = None
        logs = _docker(docker, "logs", name)
        output = logs.stdout + logs.stderr
        try:
            payload = parse_payload(output)
        except ValueError:
            payload = None
        yield Node(name, host, code, output, payload)
