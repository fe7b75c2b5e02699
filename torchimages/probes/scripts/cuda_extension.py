"""A tiny CUDA extension (one kernel and its binding), built with load_inline and nvcc.

Shared source: the smoke suite sends this file into the host under test and runs
it there (build, load, run, compare with the CPU); the build end-to-end tests can
import CPP_SOURCE / CUDA_SOURCE / build() or run the file to check that it compiles
in a devel image without a GPU:

    python cuda_extension.py              # build, load and run; needs a GPU
    python cuda_extension.py --build-only # compile and load only; no GPU needed
    python cuda_extension.py --build-only --arch-list 9.0   # one architecture: faster

The script prints one line `SMOKE_JSON:{...}` and exits 0 when all it was asked
to do worked. It needs torch, nvcc (CUDA_HOME or PATH), a C++ compiler and ninja.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import Any

MARK = "SMOKE_JSON:"
NAME = "torchimages_smoke_ext"
FUNCTIONS = ["scaled_add"]
# Compiled when no GPU is there to ask (build-only): Ampere and Hopper, which
# every CUDA 12 and 13 nvcc knows.
DEFAULT_ARCH_LIST = "8.0;9.0"

CPP_SOURCE = """
torch::Tensor scaled_add(torch::Tensor x, torch::Tensor y, double alpha);
"""

CUDA_SOURCE = r"""
#include <algorithm>
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

__global__ void scaled_add_kernel(const float* __restrict__ x,
                                  const float* __restrict__ y,
                                  float alpha,
                                  float* __restrict__ out,
                                  int64_t n) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = x[i] + alpha * y[i];
  }
}

at::Tensor scaled_add(at::Tensor x, at::Tensor y, double alpha) {
  TORCH_CHECK(x.is_cuda() && y.is_cuda(), "scaled_add: x and y must be CUDA tensors");
  TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat,
              "scaled_add: x and y must be float32");
  TORCH_CHECK(x.sizes() == y.sizes(), "scaled_add: x and y must have the same shape");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor xc = x.contiguous();
  at::Tensor yc = y.contiguous();
  at::Tensor out = at::empty_like(xc);
  const int64_t n = xc.numel();
  if (n > 0) {
    const int threads = 256;
    const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 4096));
    scaled_add_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), yc.data_ptr<float>(), static_cast<float>(alpha),
        out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return out;
}
"""


def find_nvcc() -> str | None:
    """nvcc as torch.utils.cpp_extension finds it: CUDA_HOME, PATH, /usr/local/cuda."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    candidates = [os.path.join(home, "bin", "nvcc")] if home else []
    on_path = shutil.which("nvcc")
    candidates += [on_path] if on_path else []
    candidates.append("/usr/local/cuda/bin/nvcc")
    return next((path for path in candidates if os.access(path, os.X_OK)), None)


def build(build_dir: str, verbose: bool = False, arch_list: str | None = None) -> ModuleType:
    """Compile and load the extension into build_dir (an existing, empty folder).

    arch_list sets TORCH_CUDA_ARCH_LIST (fewer architectures build faster); without
    it the environment's value is used, else the visible GPUs', else DEFAULT_ARCH_LIST.
    """
    import torch
    from torch.utils.cpp_extension import load_inline

    if arch_list:
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch_list
    elif not torch.cuda.is_available():
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_ARCH_LIST)
    compile_and_load: Callable[..., ModuleType] = load_inline
    return compile_and_load(
        name=NAME,
        cpp_sources=[CPP_SOURCE],
        cuda_sources=[CUDA_SOURCE],
        functions=FUNCTIONS,
        build_directory=build_dir,
        extra_cuda_cflags=["-O2"],
        with_cuda=True,
        verbose=verbose,
    )


def run_check(module: ModuleType) -> float:
    """Run the kernel on random inputs; the max abs error against float64 on the CPU."""
    import torch

    x = torch.randn(1 << 20, device="cuda")
    y = torch.randn(1 << 20, device="cuda")
    alpha = 0.75
    out = module.scaled_add(x, y, alpha)
    torch.cuda.synchronize()
    reference = x.double().cpu() + alpha * y.double().cpu()
    return float((out.double().cpu() - reference).abs().max().item())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-only", action="store_true", help="compile and load, no GPU run")
    parser.add_argument("--build-dir", help="build folder (default: a new temporary one)")
    parser.add_argument("--arch-list", help="TORCH_CUDA_ARCH_LIST for this build, e.g. '9.0'")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"nvcc": find_nvcc(), "built": False, "ran": False}
    build_dir = args.build_dir or tempfile.mkdtemp(prefix="smoke-ext-")
    os.makedirs(build_dir, exist_ok=True)
    try:
        start = time.perf_counter()
        module = build(build_dir, verbose=args.verbose, arch_list=args.arch_list)
        result.update(built=True, build_seconds=round(time.perf_counter() - start, 1))
        if not args.build_only:
            result["max_abs_error"] = run_check(module)
            result["ran"] = True
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"[-3000:]
        result["trace"] = traceback.format_exc().strip().splitlines()[-15:]
    finally:
        if not args.build_dir:
            shutil.rmtree(build_dir, ignore_errors=True)
    print(MARK + json.dumps(result), flush=True)
    return 0 if result["built"] and (args.build_only or result["ran"]) else 1


if __name__ == "__main__":
    sys.exit(main())
