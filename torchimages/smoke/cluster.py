"""Several nodes on one machine: containers of the same image on a user-defined Docker network of their own,
one rank each, started by torchrun with a c10d rendezvous on node0 (the multi_node suite).

The command lines and the reading of the results are pure functions; `run_nodes` alone starts anything, and
it removes what it made (the containers, then the network) whatever happens: a failure, a timeout, Ctrl-C or
SIGTERM (turned into KeyboardInterrupt while it runs). Where its process is killed before it can (SIGKILL; or
`build.py`, hit by the same Ctrl-C, kills the suites' pytest a moment later), a reaper does it: a small
process in a session of its own, started first, that removes them once its parent is gone. Names are unique
per run, and everything carries the label `RUN_LABEL=<run id>`.
Like testinfra's docker backend, this talks to the docker CLI ($DOCKER, else the first on PATH).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from torchimages import settings
from torchimages.probes import parse_payload, probe_source, script_command

RUN_LABEL = "io.torchimages.smoke-run"
PORT = 29400
NODE_TIMEOUT_S = 300  # each rank's torchrun, inside its container (rendezvous, init, all_reduce)
# NCCL's own account of its transports, in the output: what the suite checks of the verbs userspace.
NCCL_ENV: Mapping[str, str] = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_SOCKET_IFNAME": "eth0"}


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


@dataclass(frozen=True)
class Transport:
    """What NCCL said of its network transports (NCCL_DEBUG=INFO)."""

    ib_library_missing: bool  # libibverbs could not be opened: the verbs userspace is missing
    ib_no_device: bool  # the IB transport loaded and found no device (this machine has none)
    network: str | None  # the transport NCCL chose ("Socket", "IB"), if it said


def docker_cli() -> str:
    """$DOCKER (the settings table), else the first docker on PATH."""
    return settings.text("DOCKER") or shutil.which("docker") or "docker"


def hostnames(nnodes: int) -> list[str]:
    return [f"node{i}" for i in range(nnodes)]


def torchrun(python_exe: str, nnodes: int, run_id: str) -> str:
    """The launcher, in front of the script's name (probes.script_command runs `<this> script.py ARGS`)."""
    return (
        f"{python_exe} -m torch.distributed.run --nnodes {nnodes} --nproc-per-node 1 --max-restarts 0 "
        f"--rdzv-backend c10d --rdzv-endpoint node0:{PORT} --rdzv-id {run_id} --rdzv-conf join_timeout=120"
    )


def node_command(python_exe: str, nnodes: int, run_id: str, backend: str) -> str:
    """The /bin/sh script each container runs: the probe written to a temporary folder, run by torchrun."""
    env = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    if backend == "nccl":
        env |= NCCL_ENV
    launcher = torchrun(python_exe, nnodes, run_id)
    return script_command(launcher, probe_source("multi_node"), (backend,), NODE_TIMEOUT_S, env)


def inherited_options(inspected: Mapping[str, Any]) -> list[str]:
    """The suite container's `docker run` choices the nodes share (from its `docker inspect`): the user, a
    read-only root and its tmpfs mounts, the size of /dev/shm. Its network (none) and devices are not."""
    config, host = inspected.get("Config") or {}, inspected.get("HostConfig") or {}
    options: list[str] = []
    if config.get("User"):
        options += ["--user", str(config["User"])]
    if host.get("ReadonlyRootfs"):
        options.append("--read-only")
    for path, mount in sorted((host.get("Tmpfs") or {}).items()):
        options += ["--tmpfs", f"{path}:{mount}" if mount else path]
    if host.get("ShmSize"):
        options += ["--shm-size", str(host["ShmSize"])]
    return options


def gpu_options(inspected: Mapping[str, Any], index: int) -> list[str]:
    """The GPU `index` alone for one node, the way the suite container got its GPUs: `--gpus` (the NVIDIA
    runtime) or device nodes passed by hand (/dev/nvidia<index> and the control nodes)."""
    host = inspected.get("HostConfig") or {}
    if host.get("DeviceRequests"):
        return ["--gpus", f"device={index}"]
    nodes = [str(d.get("PathOnHost", "")) for d in host.get("Devices") or []]
    gpus = [n for n in nodes if re.fullmatch(r"/dev/nvidia\d+", n)]
    if not gpus:
        return []
    chosen = [n for n in nodes if n.startswith("/dev/nvidia") and (n not in gpus or n == f"/dev/nvidia{index}")]
    return [option for node in chosen for option in ("--device", node)]


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


def nccl_transport(output: str) -> Transport:
    """Read NCCL's INFO lines: was libibverbs missing, did IB find no device, which network was used."""
    missing = bool(re.search(r"Failed to open libibverbs|libibverbs\.so[^\n]*(cannot open|No such file)", output))
    no_device = bool(re.search(r"NET/IB ?: No device found", output))
    chosen = re.search(r"Using network (\w+)", output)
    return Transport(missing, no_device, chosen.group(1) if chosen else None)


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
    return subprocess.run([docker, *args], capture_output=True, text=True, check=False, timeout=timeout)


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


def run_nodes(
    image: str,
    python_exe: str,
    backend: str,
    node_options: Sequence[Sequence[str]],
    *,
    docker: str | None = None,
    wait_s: float = NODE_TIMEOUT_S + 60,
) -> ClusterRun:
    """Start one container per entry of `node_options` (extra `docker run` options of that node) on a new
    network, wait for all (at most `wait_s`), read their output, remove them and the network."""
    docker = docker or docker_cli()
    run_id = uuid.uuid4().hex[:12]
    network = f"torchimages-mn-{run_id}"
    names = [f"{network}-{host}" for host in hostnames(len(node_options))]
    script = node_command(python_exe, len(node_options), run_id, backend)
    reaper = start_reaper(docker, network, names)
    with _sigterm_interrupts():
        try:
            made = _docker(docker, "network", "create", "--internal", "--label", f"{RUN_LABEL}={run_id}", network)
            if made.returncode != 0:
                return ClusterRun(run_id, network, (), f"docker network create failed: {made.stderr.strip()}")
            for name, host, options in zip(names, hostnames(len(node_options)), node_options, strict=True):
                command = run_command(docker, image, name, host, network, run_id, options, script)
                started = _docker(docker, *command[1:], timeout=120)
                if started.returncode != 0:
                    return ClusterRun(
                        run_id, network, (), f"`{shlex.join(command[:-1])} SCRIPT` failed: {started.stderr.strip()}"
                    )
            return ClusterRun(run_id, network, tuple(_wait(docker, names, wait_s)))
        finally:
            remove(docker, names, network)
            if reaper is not None:  # nothing left for it: stop it (its SIGTERM default ends it at once)
                reaper.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    reaper.wait(timeout=10)


def _wait(docker: str, names: Sequence[str], wait_s: float) -> Iterator[Node]:
    for name, host in zip(names, hostnames(len(names)), strict=True):
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
