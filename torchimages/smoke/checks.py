"""Which checks apply to which flavor: ONE table, read by the suites.

Like docker-stacks' per-image test folders, but as data: each row names something an image
contains (`contains`: it must be there, or must not be) or a check that runs (`runs`: it runs
and must pass, or skips saying why). The suites ask `expectation(row, flavor, cuda=...)`
and never test a flavor name themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

# Where the images keep their Python environment, and who owns it.
VENV = "/opt/venv"
VENV_UID = 1000
VENV_GID = 0  # any uid of group 0 (OpenShift's random uid) writes what uid 1000 writes
C_COMPILERS = ("gcc", "cc", "g++", "c++")


@dataclass(frozen=True)
class Row:
    """What one flavor is promised: True = present / runs, False = absent / skipped, None = not checked."""

    kind: Literal["contains", "runs"]
    what: str
    devel: bool | None
    runtime: bool | None
    cuda_only: bool = False  # meaningless for a CPU-only torch: absent there (contains) or skipped (runs)


TABLE: Mapping[str, Row] = MappingProxyType(
    {
        # torch.compile (Inductor) builds C++ on the CPU and Triton launchers on the GPU:
        # every flavor carries gcc/g++ and the Python headers.
        "c_compiler": Row("contains", "a C/C++ compiler (gcc, cc, g++, c++)", devel=True, runtime=True),
        "python_headers": Row("contains", "the Python headers (Python.h)", devel=True, runtime=True),
        # The CUDA toolkit is devel's alone: the wheels bring the CUDA libraries torch needs.
        "nvcc": Row("contains", "nvcc of the spec's CUDA", devel=True, runtime=False, cuda_only=True),
        "cuda_toolkit": Row(
            "contains",
            "a CUDA toolkit (CUDA_HOME, unversioned libcudart.so development symlinks)",
            devel=None,
            runtime=False,
            cuda_only=True,
        ),
        "torch_compile_cpu": Row("runs", "torch.compile on the CPU", devel=True, runtime=True),
        "torch_compile_gpu": Row("runs", "torch.compile on the GPU", devel=True, runtime=True, cuda_only=True),
        "cuda_extension": Row("runs", "a CUDA extension built with nvcc", devel=True, runtime=False, cuda_only=True),
        "no_package_caches": Row("runs", "no apt lists, apt archives or pip cache left", devel=True, runtime=True),
        "venv_writable": Row("runs", f"the image user installs into {VENV}", devel=True, runtime=True),
        # NCCL dlopens libibverbs for InfiniBand/RoCE and falls back to TCP sockets silently without it.
        "verbs": Row(
            "contains", "the RDMA verbs userspace (libibverbs, a provider, librdmacm)", devel=True, runtime=True
        ),
    }
)


def expectation(name: str, flavor: str | None, *, cuda: bool) -> bool | None:
    """What the table promises for this flavor: True, False, or None (not checked here).

    A bare host (flavor None) promises nothing: the suite decides from what the host has.
    A row for CUDA builds only is absent from, or skipped on, a CPU-only image.
    """
    row = TABLE[name]
    if flavor is None:
        return None
    if row.cuda_only and not cuda:
        return False
    if flavor == "devel":
        return row.devel
    if flavor == "runtime":
        return row.runtime
    raise ValueError(f"unknown flavor {flavor!r} (devel or runtime)")


def reason(name: str, flavor: str | None, *, cuda: bool) -> str:
    """Why a row is not checked (or skipped) here, for a skip message."""
    row = TABLE[name]
    if flavor is None:
        return f"{row.what}: a bare host (no flavor) promises nothing here"
    if row.cuda_only and not cuda:
        return f"{row.what}: for CUDA builds only; this image is CPU-only"
    return f"{row.what}: not part of the {flavor} flavor (torchimages/smoke/checks.py)"
