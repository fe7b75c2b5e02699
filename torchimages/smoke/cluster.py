"""Several nodes on one machine for the multi_node suite: containers of the same image on a Docker network of
their own (torchimages.engine.nodes starts, waits for and removes them), one rank each, started by torchrun with
a c10d rendezvous on node0. The command lines and the readings here are pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torchimages.engine import nodes
from torchimages.engine.nodes import ClusterRun, Node
from torchimages.probes import probe_source, script_command

__all__ = ["RUN_LABEL", "ClusterRun", "Node", "Transport"]
RUN_LABEL = nodes.RUN_LABEL
PORT = 29400
NODE_TIMEOUT_S = 300  # each rank's torchrun, inside its container (rendezvous, init, all_reduce)
# NCCL's own account of its transports, in the output: what the suite checks of the verbs userspace.
NCCL_ENV: Mapping[str, str] = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_SOCKET_IFNAME": "eth0"}


@dataclass(frozen=True)
class Transport:
    """What NCCL said of its network transports (NCCL_DEBUG=INFO)."""

    ib_library_missing: bool  # libibverbs could not be opened: the verbs userspace is missing
    ib_no_device: bool  # the IB transport loaded and found no device (this machine has none)
    network: str | None  # the transport NCCL chose ("Socket", "IB"), if it said


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
    paths = [str(d.get("PathOnHost", "")) for d in host.get("Devices") or []]
    gpus = [n for n in paths if re.fullmatch(r"/dev/nvidia\d+", n)]
    if not gpus:
        return []
    chosen = [n for n in paths if n.startswith("/dev/nvidia") and (n not in gpus or n == f"/dev/nvidia{index}")]
    return [option for path in chosen for option in ("--device", path)]


def nccl_transport(output: str) -> Transport:
    """Read NCCL's INFO lines: was libibverbs missing, did IB find no device, which network was used."""
    missing = bool(re.search(r"Failed to open libibverbs|libibverbs\.so[^\n]*(cannot open|No such file)", output))
    no_device = bool(re.search(r"NET/IB ?: No device found", output))
    chosen = re.search(r"Using network (\w+)", output)
    return Transport(missing, no_device, chosen.group(1) if chosen else None)


def run(image: str, python_exe: str, backend: str, node_options: Sequence[Sequence[str]]) -> ClusterRun:
    """The nodes, one rank each under torchrun (c10d on node0), each with its extra `docker run` options."""
    run_id = nodes.new_run_id()
    names = hostnames(len(node_options))
    specs = [nodes.NodeSpec(host, tuple(options)) for host, options in zip(names, node_options, strict=True)]
    script = node_command(python_exe, len(node_options), run_id, backend)
    return nodes.run_nodes(image, specs, script, run_id=run_id, wait_s=NODE_TIMEOUT_S + 60)
