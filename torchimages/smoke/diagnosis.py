"""Why no GPU is usable in the host (no device, an old driver, a small /dev/shm): the diagnosis
behind every GPU skip or failure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchimages.smoke.document import SmokeSpec
from torchimages.versions import driver_is_older

if TYPE_CHECKING:
    import testinfra.host

MIN_SHM_BYTES = 1 << 30
GIB = float(1 << 30)


@dataclass(frozen=True)
class GpuQuery:
    """What nvidia-smi and the file system of the host say about GPUs."""

    names: tuple[str, ...]
    driver: str | None
    device_nodes: tuple[str, ...]
    shm_bytes: int | None
    nvidia_smi_error: str | None


def _driver_from_proc(host: testinfra.host.Host) -> str | None:
    result = host.run("cat /proc/driver/nvidia/version 2>/dev/null")
    for word in result.stdout.split():
        if word.count(".") >= 1 and word.replace(".", "").isdigit():
            return str(word)
    return None


def _shm_bytes(host: testinfra.host.Host) -> int | None:
    result = host.run("df -Pk /dev/shm 2>/dev/null | awk 'NR==2 {print $2}'")
    text = result.stdout.strip()
    return int(text) * 1024 if text.isdigit() else None


def query_gpus(host: testinfra.host.Host) -> GpuQuery:
    """GPU names and driver (nvidia-smi, else /proc), device nodes and /dev/shm size."""
    smi = host.run("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader")
    names: list[str] = []
    driver: str | None = None
    error: str | None = None
    if smi.rc == 0:
        for line in smi.stdout.splitlines():
            name, _, version = line.rpartition(",")
            if name.strip():
                names.append(name.strip())
                driver = version.strip()
    else:
        error = (smi.stderr or smi.stdout).strip()[-300:] or f"exit status {smi.rc}"
        driver = _driver_from_proc(host)
    nodes = host.run("ls /dev/nvidia[0-9]* 2>/dev/null").stdout.split()
    return GpuQuery(tuple(names), driver, tuple(nodes), _shm_bytes(host), error)


@dataclass(frozen=True)
class GpuStatus:
    """Whether torch can use a GPU in the host, and if not, every cause found."""

    usable: bool
    device_count: int
    causes: tuple[str, ...]
    shm_problem: str | None

    def message(self) -> str:
        """One line per cause, for a skip reason or a failure."""
        return "no usable GPU: " + " | ".join(self.causes)


def shm_problem(shm_bytes: int | None) -> str | None:
    """A cause when /dev/shm is smaller than NCCL and DataLoader workers need."""
    if shm_bytes is None or shm_bytes >= MIN_SHM_BYTES:
        return None
    return (
        f"/dev/shm is {shm_bytes / GIB:.2f} GiB, under the 1 GiB that NCCL and "
        "DataLoader workers need: run the container with --shm-size=1g (or more) or --ipc=host"
    )


def _no_device_cause(query: GpuQuery, facts: Mapping[str, Any]) -> str | None:
    if query.names or query.device_nodes or facts.get("driver_library_loadable"):
        return None
    detail = f" (nvidia-smi: {query.nvidia_smi_error})" if query.nvidia_smi_error else ""
    return (
        "no NVIDIA device is visible: no /dev/nvidia* device node, no driver library "
        f"libcuda.so.1 and no GPU from nvidia-smi{detail}; start the container with "
        "`--gpus all` (needs the NVIDIA Container Toolkit on the host)"
    )


def _old_driver_cause(query: GpuQuery, spec: SmokeSpec) -> str | None:
    if query.driver is None or spec.min_driver is None:
        return None
    if not driver_is_older(query.driver, spec.min_driver):
        return None
    return (
        f"the NVIDIA driver {query.driver} is older than {spec.min_driver}, the minimum "
        f"that CUDA {spec.cuda} in this image needs: upgrade the host driver to "
        f">= {spec.min_driver} or use an image built for an older CUDA"
    )


def diagnose(facts: Mapping[str, Any], query: GpuQuery, spec: SmokeSpec) -> GpuStatus:
    """Combine torch's view (facts probe) with nvidia-smi's into one GPU status."""
    shm = shm_problem(query.shm_bytes)
    if facts.get("cuda_available"):
        return GpuStatus(True, int(facts.get("device_count", 0)), (), shm)
    causes: list[str] = []
    if facts.get("import_torch_error"):
        causes.append(f"`import torch` failed: {facts['import_torch_error']}")
    elif facts.get("cuda") is None:
        causes.append(
            f"torch {facts.get('torch')} is a CPU-only build (torch.version.cuda is None); "
            "install a CUDA build of torch to use a GPU"
        )
    for cause in (_no_device_cause(query, facts), _old_driver_cause(query, spec)):
        if cause:
            causes.append(cause)
    warnings = facts.get("cuda_init_warnings") or []
    if warnings:
        causes.append("torch said: " + " / ".join(str(w) for w in warnings)[:500])
    if len(causes) == 0:
        causes.append(
            f"torch.cuda.is_available() is False although a driver {query.driver} and "
            f"devices {list(query.names) or list(query.device_nodes)} are present; "
            "check CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES"
        )
    if shm:
        causes.append(shm)
    return GpuStatus(False, 0, tuple(causes), shm)
