"""Probe: one rank of an all_reduce across nodes, started by torchrun (c10d rendezvous) in each container.

Usage: torchrun --nnodes N --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint HOST:PORT script.py BACKEND
BACKEND is gloo (CPU tensors) or nccl (this container's GPU). Each rank fills its tensors with random small
non-zero integers from a seed every rank knows, so each checks the sum exactly (fp32 and, on NCCL, bf16);
the ranks' host names are gathered (distinct names: the ranks ran in distinct containers). Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import traceback
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

MARK = "SMOKE_JSON:"
NUMEL = {"4KiB": 1 << 10, "4MiB": 1 << 20}  # gloo, CPU tensors
# NCCL: the sizes of the single-container multi_gpu suite, so the two transports' figures sit side by side.
NCCL_NUMEL = {"4KiB": 1 << 10, "1MiB": 1 << 18, "256MiB": 1 << 26}
WARMUP = 2


def timed(tensor: torch.Tensor, device: torch.device, iterations: int) -> float:
    """Microseconds per all_reduce of `tensor` (its values are not checked: repeated sums), after WARMUP."""
    for _ in range(WARMUP):
        dist.all_reduce(tensor)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.monotonic()
    for _ in range(iterations):
        dist.all_reduce(tensor)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.monotonic() - start) / iterations * 1e6


def rank_input(rank: int, case: int, numel: int) -> torch.Tensor:
    """Random integers in [-8, -1] u [1, 8]: exact in bf16 and in any sum of a few ranks."""
    generator = torch.Generator()
    generator.manual_seed(1000 * case + rank)
    magnitude = torch.randint(1, 9, (numel,), generator=generator)
    sign = torch.randint(0, 2, (numel,), generator=generator) * 2 - 1
    return (magnitude * sign).to(torch.float32)


def run(backend: str) -> dict[str, Any]:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    result: dict[str, Any] = {"rank": rank, "world_size": world, "backend": backend, "host": socket.gethostname()}
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        result["gpu"] = torch.cuda.get_device_name(device)
        result["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    start = time.monotonic()
    dist.init_process_group(backend, timeout=timedelta(seconds=120))
    result["init_s"] = round(time.monotonic() - start, 3)
    hosts: list[Any] = [None] * world
    dist.all_gather_object(hosts, socket.gethostname())
    result["hosts"] = hosts
    dtypes = {"fp32": torch.float32, **({"bf16": torch.bfloat16} if backend == "nccl" else {})}
    cases: dict[str, Any] = {}
    sizes = NCCL_NUMEL if backend == "nccl" else NUMEL
    for case, (size, numel) in enumerate(sizes.items()):
        for name, dtype in dtypes.items():
            tensor = rank_input(rank, case, numel).to(dtype).to(device)
            start = time.monotonic()
            dist.all_reduce(tensor)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            seconds = time.monotonic() - start
            expected = sum(rank_input(r, case, numel) for r in range(world)).to(dtype)
            wrong = int((tensor.cpu() != expected).sum())
            time_us = timed(tensor, device, 20 if numel < 1 << 24 else 5)
            algbw = numel * tensor.element_size() / time_us / 1e3  # GB/s
            cases[f"{size}-{name}"] = {
                "exact": wrong == 0,
                "wrong": wrong,
                "numel": numel,
                "ms": seconds * 1e3,
                "time_us": time_us,
                "algbw_GBps": algbw,
            }
    result["cases"] = cases
    dist.barrier()
    dist.destroy_process_group()
    return result


def main() -> int:
    backend = sys.argv[1] if len(sys.argv) > 1 else "gloo"
    try:
        result = run(backend)
    except Exception as exc:
        result = {"rank": os.environ.get("RANK"), "error": f"{type(exc).__name__}: {exc}"}
        result["trace"] = traceback.format_exc().splitlines()[-12:]
    print(MARK + json.dumps(result), flush=True)
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
