"""What each flavor carries to build code, as promised by the flavor table (torchimages.smoke.checks):
C/C++ compilers and Python headers (torch.compile), nvcc and the CUDA toolkit (devel only),
and torch.compile on the CPU giving eager's result."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest
import testinfra.host

from torchimages.probes import ScriptResult
from torchimages.smoke import checks, platform
from torchimages.smoke.document import SmokeSpec
from torchimages.smoke.hosts import find_nvcc

pytestmark = [
    pytest.mark.cpu,
    pytest.mark.filterwarnings("ignore:record_property is incompatible:pytest.PytestWarning"),
]

# Python.h of the interpreter that runs torch (Inductor and Triton include it).
PYTHON_HEADER = "import os, sysconfig; p = os.path.join(sysconfig.get_paths()['include'], 'Python.h'); print(p)"
# The unversioned development symlink of the CUDA runtime: a toolkit's, never the wheels' (the
# nvidia-cuda-runtime wheel does carry libcudart_static.a, so that is no sign of a toolkit).
FIND_CUDART_DEV = (
    "find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -name 'libcudart.so' -print 2>/dev/null"
)


def promise(spec: SmokeSpec, name: str) -> bool:
    """The table's promise for this image; skips where it promises nothing."""
    expected = checks.expectation(name, spec.flavor, cuda=spec.cuda is not None)
    if expected is None:
        pytest.skip(checks.reason(name, spec.flavor, cuda=spec.cuda is not None))
    return expected


@pytest.mark.parametrize("compiler", checks.C_COMPILERS)
def test_c_compiler(image_host: testinfra.host.Host, spec: SmokeSpec, compiler: str) -> None:
    wanted = promise(spec, "c_compiler")
    found = image_host.run(f"command -v {shlex.quote(compiler)}").stdout.strip()
    if wanted:
        assert found, (
            f"the {spec.flavor} image has no {compiler}: torch.compile (Inductor, Triton) needs a C/C++ "
            "compiler; install gcc and g++"
        )
        assert image_host.run(f"{shlex.quote(found)} --version").rc == 0, f"{found} --version fails"
    else:
        assert not found, f"the {spec.flavor} image contains {compiler} at {found}; remove the package that brings it"


def test_python_headers(image_host: testinfra.host.Host, spec: SmokeSpec, python_exe: str) -> None:
    wanted = promise(spec, "python_headers")
    header = image_host.run(f"{shlex.quote(python_exe)} -c {shlex.quote(PYTHON_HEADER)}").stdout.strip()
    present = bool(header) and image_host.file(header).exists
    assert present == wanted, (
        f"Python.h ({header or 'path unknown'}) is {'missing' if wanted else 'present'} in the {spec.flavor} image; "
        + ("install the Python development headers (python3-dev): torch.compile needs them" if wanted else "remove it")
    )


def test_nvcc(image_host: testinfra.host.Host, spec: SmokeSpec) -> None:
    wanted = promise(spec, "nvcc")
    nvcc = find_nvcc(image_host)
    if not wanted:
        assert not nvcc, (
            f"the {spec.flavor} image contains nvcc at {nvcc}: the CUDA toolkit belongs to devel images; "
            "remove the package that brings it"
        )
        return
    assert nvcc, "the devel image has no nvcc on PATH or in $CUDA_HOME/bin: install the toolkit"
    output = image_host.run(f"{shlex.quote(nvcc)} --version").stdout
    match = re.search(r"release (\d+\.\d+)", output)
    found = match.group(1) if match else f"unreadable ({output.strip()[-200:]!r})"
    assert found == spec.cuda, (
        f"{nvcc} is CUDA {found} but torch is built for CUDA {spec.cuda}: extensions would "
        "not build or not load; install the toolkit of the wheels' CUDA"
    )


def test_cuda_toolkit(image_host: testinfra.host.Host, spec: SmokeSpec) -> None:
    wanted = promise(spec, "cuda_toolkit")
    assert not wanted, "the table promises no toolkit check for this flavor"  # devel: None (skipped above)
    found = []
    cuda_home = image_host.environment().get("CUDA_HOME")
    if cuda_home:
        found.append(f"CUDA_HOME={cuda_home}")
    found += image_host.run(FIND_CUDART_DEV).stdout.split()
    assert not found, (
        f"the {spec.flavor} image carries a CUDA toolkit: {', '.join(found)}. The torch wheels bring the CUDA "
        "libraries they need; the toolkit belongs to devel images"
    )


def test_torch_compile_on_cpu_matches_eager(
    spec: SmokeSpec, host: testinfra.host.Host, request: pytest.FixtureRequest, record_property: Any
) -> None:
    wanted = checks.expectation("torch_compile_cpu", spec.flavor, cuda=spec.cuda is not None)
    if wanted is False:
        pytest.skip(checks.reason("torch_compile_cpu", spec.flavor, cuda=spec.cuda is not None))
    if wanted is None and not host.run("command -v cc").stdout.strip():
        pytest.skip("a bare host without a C compiler: torch.compile on the CPU needs one")
    run: ScriptResult = request.getfixturevalue("compile_cpu_run")
    assert run.payload is not None, f"the torch.compile probe died before reporting: {run.describe()}"
    entry = run.payload["compile"]
    for key, value in (entry.get("metrics") or {}).items():
        record_property(key, value)
    trace = "".join(f"\n  {line}" for line in entry.get("trace", []))
    if not entry["ok"]:
        advice = platform.compile_advice(request.getfixturevalue("platform_run").payload)
        pytest.fail(
            f"torch.compile (Inductor, C++ backend) on the CPU failed or disagrees with eager: {entry['detail']}"
            + (advice or f"; it needs gcc/g++ and the Python headers (Python.h) in the image{trace}"),
            pytrace=False,
        )
