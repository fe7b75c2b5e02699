"""Probe: torch.compile (Inductor) of a small function agrees with eager mode, as one JSON line.

    python torch_compile.py cpu    # Inductor's C++ backend: needs gcc/g++ and Python.h
    python torch_compile.py cuda   # Triton: needs a C compiler and Python.h for its launchers

Runs inside the image (or host) under test with the standard library and torch only.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from typing import Any

import torch
import torch.nn.functional as F

MARK = "SMOKE_JSON:"
# A wrong compile is wrong by an order of magnitude; float32 rounding is not. Inductor's vectorized erf, sin and
# sum differ from eager's by CPU: 2.4e-07 on one AMD EPYC, 7.2e-05 on another machine of the same kind (2026-12).
BOUND = 1e-3


def small_function(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.gelu(x) * y + torch.sin(x).sum(dim=-1, keepdim=True)


def check(device: str) -> dict[str, Any]:
    """Compile, run, and compare with eager in float64 on the CPU."""
    torch.manual_seed(1234)
    x = torch.randn(256, 256, device=device)
    y = torch.randn(256, 256, device=device)
    start = time.perf_counter()
    out = torch.compile(small_function)(x, y)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    reference = small_function(x, y).detach().to("cpu", torch.float64)
    scale = reference.abs().max().item() or 1.0
    error = float((out.detach().to("cpu", torch.float64) - reference).abs().max().item() / scale)
    return {
        "ok": error <= BOUND,
        "detail": f"relative error {error:.3g} against eager (bound {BOUND:g}), compiled and ran in {seconds:.1f} s",
        "metrics": {"relative_error": error, "compile_seconds": round(seconds, 2)},
    }


def main(argv: list[str]) -> None:
    device = argv[1] if len(argv) > 1 else "cpu"
    try:
        if device == "cuda" and not torch.cuda.is_available():
            result: dict[str, Any] = {"ok": False, "detail": "torch.cuda.is_available() is False"}
        else:
            result = check(device)
    except Exception as exc:
        lines = traceback.format_exc().strip().splitlines()
        result = {"ok": False, "detail": f"{type(exc).__name__}: {str(exc)[-2000:]}", "trace": lines[-15:]}
    print(MARK + json.dumps({"compile": result}), flush=True)


if __name__ == "__main__":
    main(sys.argv)
