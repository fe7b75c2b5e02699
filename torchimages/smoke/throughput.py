"""Throughput parity: the GPU suite's benchmark figures (probes/scripts/throughput.py) against the same probe
run on the host (`build.py test --host local` with TORCHIMAGES_THROUGHPUT_OUT, then the container's run with
TORCHIMAGES_THROUGHPUT_REFERENCE) or against the knowledge base's floors for the GPU model. Pure functions."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torchimages import textfile
from torchimages.compat import GpuThroughput
from torchimages.problems import InputError, Problem

# name -> (unit, what)
METRICS: Mapping[str, tuple[str, str]] = {
    "gemm_bf16_tflops": ("TFLOP/s", "bf16 matrix product 8192^3 (cuBLAS)"),
    "conv_fp16_img_s": ("img/s", "fp16 3x3 convolution 64->64 at 56x56, batch 256 (cuDNN)"),
    "amp_step_img_s": ("img/s", "AMP training step of a small CNN at 32x32, batch 256"),
    "h2d_pinned_gb_s": ("GB/s", "pinned host-to-device copy of 256 MiB"),
}
# Below the host's figure by more than this fraction fails: the host and a container of the same torch
# differed by under 4% on an H200 (one run each, 2026-12-01).
TOLERANCE = 0.10
REFERENCE_WHAT = "the throughput reference (TORCHIMAGES_THROUGHPUT_REFERENCE)"


def shown(name: str, value: float) -> str:
    unit = METRICS.get(name, ("", ""))[0]
    return f"{value:,.1f} {unit}".strip()


def conv_problem(payload: Mapping[str, Any]) -> str | None:
    """Why the convolution did not run on cuDNN (a fall-back path), or None."""
    cudnn = payload.get("cudnn") or {}
    if not cudnn.get("available"):
        return "cuDNN is not available to torch (torch.backends.cudnn.is_available() is False)"
    if not cudnn.get("enabled"):
        return "cuDNN is disabled (torch.backends.cudnn.enabled is False)"
    ops = cudnn.get("conv_ops") or []
    if not any("cudnn" in op for op in ops):
        return f"the convolution ran without cuDNN: the profiler saw {', '.join(ops) or 'no conv operator'}"
    return None


def below(measured: Mapping[str, float], bounds: Mapping[str, float], what: str) -> list[str]:
    """Each figure under its bound, saying both."""
    return [
        f"{name} ({METRICS.get(name, ('', name))[1]}): {shown(name, measured[name])}, under {what} {shown(name, bound)}"
        for name, bound in bounds.items()
        if name in measured and measured[name] < bound
    ]


def floor_problems(measured: Mapping[str, float], entry: GpuThroughput) -> list[str]:
    """Figures under the knowledge base's floors of this GPU model."""
    return below(measured, entry.floors, f"the floor for {entry.model} (measured {entry.measured})")


def parity_problems(
    measured: Mapping[str, float], host: Mapping[str, float], tolerance: float = TOLERANCE
) -> list[str]:
    """Figures more than `tolerance` under the host's, and figures the host has that this run lacks."""
    missing = [f"{name}: measured on the host, not here" for name in host if name not in measured]
    bounds = {name: value * (1 - tolerance) for name, value in host.items() if name in METRICS}
    return missing + below(measured, bounds, f"the host's figure less {tolerance:.0%}:")


def model_entry(gpu: str, known: Mapping[str, GpuThroughput]) -> GpuThroughput | None:
    """The knowledge base's entry for a GPU name: the exact name, else the longest model name it starts with."""
    if gpu in known:
        return known[gpu]
    matches = [model for model in known if gpu.startswith(model)]
    return known[max(matches, key=len)] if matches else None


def read_reference(path: Path) -> dict[str, float]:
    """The host's figures: a JSON object of METRICS names to numbers (what TORCHIMAGES_THROUGHPUT_OUT wrote)."""
    data = textfile.read_json_object(path, REFERENCE_WHAT)
    figures = data.get("metrics", data)
    if not isinstance(figures, dict) or not all(isinstance(v, int | float) for v in figures.values()):
        raise InputError([Problem(f"{REFERENCE_WHAT}: no object of figures (name: number)", file=str(path))])
    return {str(k): float(v) for k, v in figures.items()}
