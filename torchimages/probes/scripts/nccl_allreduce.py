"""Probe: NCCL all_reduce with one process per visible GPU, printed as one JSON line.

Each rank fills its tensor with random small non-zero integers from a seed that
every rank knows, so each rank can rebuild all inputs and check that the sum is
exact, in bf16 too. After the check, the same buffer is all-reduced a few times
to measure bus bandwidth (nccl-tests' definition: bytes * 2(n-1)/n / time).
World size 1 still initialises NCCL and checks the (trivial) sum.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch.multiprocessing.spawn import spawn as _spawn

MARK = "SMOKE_JSON:"
spawn: Callable[..., Any] = _spawn
nccl_version: Callable[[], Any] = torch.cuda.nccl.version
# NVLink multicast off in every rank unless the caller chose otherwise.
SAFE_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
# NCCL says which network transports it found (the IB one needs the verbs userspace): the suite reads it.
NET_DEBUG = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
SIZES = {"4KiB": 4 << 10, "1MiB": 1 << 20, "256MiB": 256 << 20}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
WARMUP = 5
ITERATIONS = {"4KiB": 50, "1MiB": 30, "256MiB": 10}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rank_input(rank: int, case: int, numel: int, device: torch.device) -> torch.Tensor:
    """Random integers in [-8, -1] u [1, 8] (exact in bf16 and in any sum of 8 ranks)."""
    generator = torch.Generator(device=device)
    generator.manual_seed(1000 * case + rank)
    magnitude = torch.randint(1, 9, (numel,), generator=generator, device=device)
    sign = torch.randint(0, 2, (numel,), generator=generator, device=device) * 2 - 1
    return (magnitude * sign).to(torch.float32)


def exact_sum(case: int, world: int, numel: int, dtype: torch.dtype, device: torch.device) -> Any:
    """all_reduce one case and compare with the sum every rank can rebuild."""
    rank = dist.get_rank()
    tensor = rank_input(rank, case, numel, device).to(dtype)
    dist.all_reduce(tensor)
    expected = torch.zeros(numel, dtype=torch.float32, device=device)
    for other in range(world):
        expected += rank_input(other, case, numel, device)
    mismatches = int((tensor.float() != expected).sum().item())
    torch.cuda.synchronize(device)
    return tensor, mismatches


def bus_bandwidth(tensor: torch.Tensor, iterations: int, world: int) -> dict[str, float]:
    """Average all_reduce time after a warm-up; algorithm and bus bandwidth in GB/s."""
    for _ in range(WARMUP):
        dist.all_reduce(tensor)
    torch.cuda.synchronize()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(tensor)
    torch.cuda.synchronize()
    elapsed = torch.tensor([(time.perf_counter() - start) / iterations], device=tensor.device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    seconds = float(elapsed.item())
    size = tensor.numel() * tensor.element_size()
    algbw = size / seconds / 1e9
    return {
        "time_us": seconds * 1e6,
        "algbw_GBps": algbw,
        "busbw_GBps": algbw * 2 * (world - 1) / world,
    }


def worker(rank: int, world: int, port: int, out_dir: str) -> None:
    """One rank: init NCCL, check every case, measure, write rank<N>.json."""
    report: dict[str, Any] = {"rank": rank, "cases": {}}
    try:
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
        dist.init_process_group(
            "nccl",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=timedelta(minutes=3),
            device_id=device,
        )
        report["device"] = torch.cuda.get_device_name(device)
        report["device_index"] = torch.cuda.current_device()
        case = 0
        for size_name, size in SIZES.items():
            for dtype_name, dtype in DTYPES.items():
                case += 1
                numel = size // torch.tensor([], dtype=dtype).element_size()
                tensor, mismatches = exact_sum(case, world, numel, dtype, device)
                result: dict[str, Any] = {"mismatches": mismatches, "numel": numel}
                result.update(bus_bandwidth(tensor, ITERATIONS[size_name], world))
                report["cases"][f"{size_name}-{dtype_name}"] = result
                del tensor
        dist.barrier()
        dist.destroy_process_group()
    except Exception as exc:
        report["error"] = f"{type(exc).__name__}: {exc}"
        report["trace"] = traceback.format_exc().strip().splitlines()[-12:]
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w", encoding="utf-8") as handle:
        json.dump(report, handle)


def main() -> None:
    for key, value in {**SAFE_ENV, **NET_DEBUG}.items():
        os.environ.setdefault(key, value)
    world = torch.cuda.device_count()
    summary: dict[str, Any] = {
        "world_size": world,
        "nccl": list(nccl_version()) if world else None,
        "env": {key: os.environ[key] for key in SAFE_ENV},
        "ranks": [],
    }
    if world == 0:
        summary["error"] = "no CUDA device visible to torch"
        print(MARK + json.dumps(summary))
        return
    with tempfile.TemporaryDirectory() as out_dir:
        try:
            spawn(worker, args=(world, free_port(), out_dir), nprocs=world, join=True)
        except Exception as exc:
            summary["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        for rank in range(world):
            path = os.path.join(out_dir, f"rank{rank}.json")
            if os.path.exists(path):
                with open(path, encoding="utf-8") as handle:
                    summary["ranks"].append(json.load(handle))
    print(MARK + json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
