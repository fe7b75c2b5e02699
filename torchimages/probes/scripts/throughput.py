"""Probe: a short throughput benchmark of one GPU, printed as one JSON line (torch only, about 10 s).

- gemm_bf16_tflops: an 8192 x 8192 x 8192 bf16 matrix product on random data (cuBLAS);
- conv_fp16_img_s: a 3x3 convolution, 64 -> 64 channels, 56 x 56, batch 256, fp16, channels_last, forward, with
  cudnn.benchmark (cuDNN); the profiler names the aten operator that ran it, so a fall-back (no cuDNN) shows;
- amp_step_img_s: a training step (forward, backward, SGD) of a small CNN on 3 x 32 x 32 images, batch 256,
  under autocast fp16 with a GradScaler;
- h2d_pinned_gb_s: 256 MiB copied from pinned host memory to the GPU (1e9 bytes per GB).

Each sample of a figure is the median of 5 timed rounds (CUDA events) after warm-up; the four benchmarks are
set up once, then measured REPEATS times in turn (GEMM, convolution, AMP step, copy, GEMM, ...), so that a drift
of the GPU's clocks or the host's load shows in every figure's spread. `samples` holds each figure's REPEATS
samples, `metrics` their medians.
"""

from __future__ import annotations

import json
import statistics
import sys
import traceback
from collections.abc import Callable
from typing import Any

import torch

MARK = "SMOKE_JSON:"
ROUNDS = 5
REPEATS = 3


def timed(step: Callable[[], Any], iterations: int, warmup: int = 3) -> float:
    """Median seconds per iteration of `step` over ROUNDS rounds."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    rounds = []
    for _ in range(ROUNDS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iterations):
            step()
        end.record()
        end.synchronize()
        rounds.append(start.elapsed_time(end) / 1e3 / iterations)
    return statistics.median(rounds)


def gemm() -> Callable[[], float]:
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    return lambda: 2 * n**3 / timed(lambda: torch.mm(a, b), 10) / 1e12


def conv() -> tuple[Callable[[], float], list[str]]:
    torch.backends.cudnn.benchmark = True
    batch = 256
    layer = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False).cuda().half().to(memory_format=torch.channels_last)
    x = torch.randn(batch, 64, 56, 56, device="cuda", dtype=torch.float16).to(memory_format=torch.channels_last)
    with torch.no_grad():
        for _ in range(5):
            layer(x)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
            layer(x)
            torch.cuda.synchronize()
    ops = sorted({event.key for event in profiler.key_averages() if "conv" in event.key})

    def measure() -> float:
        with torch.no_grad():
            return batch / timed(lambda: layer(x), 10, warmup=5)

    return measure, ops


def amp_step() -> Callable[[], float]:
    batch = 256
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 64, 3, padding=1),
        torch.nn.BatchNorm2d(64),
        torch.nn.ReLU(),
        torch.nn.Conv2d(64, 128, 3, stride=2, padding=1),
        torch.nn.BatchNorm2d(128),
        torch.nn.ReLU(),
        torch.nn.Conv2d(128, 256, 3, stride=2, padding=1),
        torch.nn.BatchNorm2d(256),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(256, 10),
    ).cuda()
    model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    x = torch.randn(batch, 3, 32, 32, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (batch,), device="cuda")

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    return lambda: batch / timed(step, 10, warmup=5)


def h2d() -> tuple[Callable[[], float], bool]:
    size = 256 << 20
    host = torch.empty(size, dtype=torch.uint8).pin_memory()
    device = torch.empty(size, dtype=torch.uint8, device="cuda")
    return lambda: size / timed(lambda: device.copy_(host, non_blocking=True), 5) / 1e9, bool(host.is_pinned())


def main() -> int:
    result: dict[str, Any] = {"metrics": {}}
    try:
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no GPU")
        result["gpu"] = torch.cuda.get_device_name(0)
        result["cudnn"] = {
            "available": torch.backends.cudnn.is_available(),
            "enabled": torch.backends.cudnn.enabled,
            "version": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        }
        benches: dict[str, Callable[[], float]] = {"gemm_bf16_tflops": gemm()}
        benches["conv_fp16_img_s"], result["cudnn"]["conv_ops"] = conv()
        benches["amp_step_img_s"] = amp_step()
        benches["h2d_pinned_gb_s"], result["pinned"] = h2d()
        samples: dict[str, list[float]] = {name: [] for name in benches}
        for _ in range(REPEATS):
            for name, measure in benches.items():
                samples[name].append(measure())
        result["samples"] = samples
        result["metrics"] = {name: statistics.median(values) for name, values in samples.items()}
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["trace"] = traceback.format_exc().splitlines()[-12:]
    print(MARK + json.dumps(result), flush=True)
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
