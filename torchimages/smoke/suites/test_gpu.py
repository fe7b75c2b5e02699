"""Single-GPU checks: device, driver, GPU architectures, copies, cuBLAS, cuDNN, AMP, torch.compile, nvcc.

The work runs in a few processes in the host (see torchimages/smoke/plugin.py); each test reads
its own check's result. Without a usable GPU every test here skips with the
causes (fails with --require-gpu).
"""

from __future__ import annotations

from typing import Any

import pytest
import testinfra.host

from torchimages.archs import ArchError
from torchimages.combination import ARCHS_LABEL
from torchimages.probes import ScriptResult
from torchimages.smoke import checks, gpu_archs
from torchimages.smoke.diagnosis import GIB, MIN_SHM_BYTES, GpuQuery, GpuStatus
from torchimages.smoke.document import SmokeSpec
from torchimages.smoke.hosts import find_nvcc
from torchimages.versions import driver_is_older

pytestmark = [
    pytest.mark.gpu,
    # Per-test properties (errors, timings) are outside the xunit2 schema, yet JUnit readers show them.
    pytest.mark.filterwarnings("ignore:record_property is incompatible:pytest.PytestWarning"),
]

ROUNDTRIP_DTYPES = ["fp32", "fp16", "bf16", "int64", "uint8"]
MATMUL_PRECISIONS = ["fp32", "tf32", "fp16", "bf16"]
CONV_DTYPES = ["fp32", "fp16", "bf16"]


def check_result(run: ScriptResult, name: str, what: str, hint: str, record: Any = None) -> dict[str, Any]:
    """The named check's result from a probe run; fails with the cause and what to do."""
    assert run.payload is not None, f"the GPU check process died before reporting: {run.describe()}"
    assert "error" not in run.payload, f"the GPU check process could not start: {run.payload['error']}"
    entry: dict[str, Any] | None = run.payload.get(name)
    assert entry is not None, f"check {name} did not report: {run.describe()}"
    if record is not None:
        for key, value in (entry.get("metrics") or {}).items():
            record(key, value)
    extra = "".join(f"\n  {line}" for line in entry.get("trace", []) + entry.get("warnings", []))
    assert entry["ok"], f"{what}: {entry['detail']}; {hint}{extra}"
    return entry


def test_gpu_is_usable(gpu: GpuStatus, facts: dict[str, Any]) -> None:
    names = [device["name"] for device in facts.get("devices", [])]
    assert gpu.device_count >= 1 and names, f"torch sees {gpu.device_count} GPUs"


def test_driver_meets_image_minimum(gpu: GpuStatus, gpu_query: GpuQuery, spec: SmokeSpec) -> None:
    if spec.min_driver is None:
        pytest.skip("spec has no minimum driver: not checked")
    assert gpu_query.driver is not None, "cannot read the driver version (nvidia-smi, /proc)"
    assert not driver_is_older(gpu_query.driver, spec.min_driver), (
        f"driver {gpu_query.driver} is older than {spec.min_driver}, the minimum for CUDA "
        f"{spec.cuda}: upgrade the host driver"
    )


def _devices_and_arch_list(run: ScriptResult) -> tuple[tuple[gpu_archs.Device, ...], str]:
    """The GPU probe's devices and torch's architecture list; fails saying what the probe gave instead."""
    assert run.payload is not None, f"the GPU check process died before reporting: {run.describe()}"
    assert "error" not in run.payload, f"the GPU check process could not start: {run.payload['error']}"
    try:
        return gpu_archs.read_answer(run.payload.get("_archs"))
    except ArchError as exc:
        pytest.fail(f"cannot read the GPUs' compute capabilities and torch's architectures: {exc}", pytrace=False)


def test_torch_arch_list_covers_every_gpu(gpu_checks: ScriptResult, record_property: Any) -> None:
    """torch.cuda.get_arch_list() holds code every visible GPU runs (a cubin of its major at or below it, or
    PTX the driver compiles): else its kernels fail with 'no kernel image is available'."""
    devices, listed = _devices_and_arch_list(gpu_checks)
    try:
        problems = gpu_archs.uncovered(devices, listed, "torch.cuda.get_arch_list()")
    except ArchError as exc:
        pytest.fail(f"torch.cuda.get_arch_list() is not an architecture list: {exc}", pytrace=False)
    for device, how in gpu_archs.covered_by(devices, listed).items():
        record_property(f"arch_coverage[{device}]", how)
    assert not problems, "\n".join(problems) + "\nUse an image whose CUDA build holds this GPU's architecture"


def test_archs_label_covers_every_gpu(gpu_checks: ScriptResult, spec: SmokeSpec) -> None:
    """The image's label io.torchimages.cuda.archs promises code every visible GPU runs."""
    label = spec.labels.get(ARCHS_LABEL)
    if not label:
        pytest.skip(f"the spec has no {ARCHS_LABEL} label (a list the knowledge base does not hold as certain)")
    devices, _ = _devices_and_arch_list(gpu_checks)
    try:
        problems = gpu_archs.uncovered(devices, label, f"the label {ARCHS_LABEL}")
    except ArchError as exc:
        pytest.fail(f"the label {ARCHS_LABEL} is not an architecture list: {exc}", pytrace=False)
    assert not problems, "\n".join(problems) + "\nUse an image whose label lists this GPU's architecture"


def test_dev_shm_is_large_enough(gpu: GpuStatus, gpu_query: GpuQuery) -> None:
    size = gpu_query.shm_bytes
    assert size is not None, "cannot read the size of /dev/shm (df)"
    assert size >= MIN_SHM_BYTES, (
        f"/dev/shm is {size / GIB:.2f} GiB; NCCL and DataLoader workers need >= 1 GiB: "
        "run the container with --shm-size=1g (or more) or --ipc=host"
    )


@pytest.mark.parametrize("dtype", ROUNDTRIP_DTYPES)
def test_roundtrip(gpu_checks: ScriptResult, dtype: str) -> None:
    check_result(
        gpu_checks,
        f"roundtrip_{dtype}",
        f"a random {dtype} tensor did not survive .to('cuda').cpu()",
        "the device or its memory is faulty; look at nvidia-smi -q for ECC errors",
    )


@pytest.mark.parametrize("precision", MATMUL_PRECISIONS)
def test_matmul_matches_float64(gpu_checks: ScriptResult, precision: str, record_property: Any) -> None:
    check_result(
        gpu_checks,
        f"matmul_{precision}",
        f"a {precision} 1024x1024 matmul on the GPU disagrees with float64 on the CPU",
        "cuBLAS gives wrong results: check that the cuBLAS wheel matches torch's CUDA",
        record_property,
    )


@pytest.mark.parametrize("dtype", CONV_DTYPES)
def test_conv2d_forward(gpu_checks: ScriptResult, dtype: str, record_property: Any) -> None:
    check_result(
        gpu_checks,
        f"conv2d_forward_{dtype}",
        f"cuDNN conv2d forward ({dtype}, benchmark mode) disagrees with float64 on the CPU",
        "check the cuDNN that torch loads (test_cudnn_version, test_exactly_one_copy)",
        record_property,
    )


@pytest.mark.parametrize("dtype", CONV_DTYPES)
def test_conv2d_backward(gpu_checks: ScriptResult, dtype: str, record_property: Any) -> None:
    check_result(
        gpu_checks,
        f"conv2d_backward_{dtype}",
        f"cuDNN conv2d backward ({dtype}, benchmark mode) disagrees with float64 on the CPU",
        "check the cuDNN that torch loads (test_cudnn_version, test_exactly_one_copy)",
        record_property,
    )


def test_amp_training_step_lowers_loss(gpu_checks: ScriptResult, record_property: Any) -> None:
    check_result(
        gpu_checks,
        "amp_training_step",
        "autocast(fp16) + GradScaler training did not lower the loss",
        "mixed precision is broken in this torch/CUDA combination",
        record_property,
    )


def test_torch_compile_matches_eager(
    host: testinfra.host.Host,
    gpu: GpuStatus,
    spec: SmokeSpec,
    request: pytest.FixtureRequest,
    record_property: Any,
) -> None:
    wanted = checks.expectation("torch_compile_gpu", spec.flavor, cuda=spec.cuda is not None)
    if wanted is False:
        pytest.skip(checks.reason("torch_compile_gpu", spec.flavor, cuda=spec.cuda is not None))
    if wanted is None and not host.run("command -v cc").stdout.strip():
        pytest.skip("a bare host without a C compiler: Triton needs one to build its launchers")
    check_result(
        request.getfixturevalue("compile_gpu_run"),
        "compile",
        "torch.compile (inductor/Triton) on the GPU failed or disagrees with eager",
        "Triton needs a C compiler (gcc) and the Python headers (Python.h) in every flavor",
        record_property,
    )


def test_cuda_extension_builds_and_runs(
    host: testinfra.host.Host,
    gpu: GpuStatus,
    spec: SmokeSpec,
    request: pytest.FixtureRequest,
    record_property: Any,
) -> None:
    wanted = checks.expectation("cuda_extension", spec.flavor, cuda=spec.cuda is not None)
    if wanted is False:
        pytest.skip(checks.reason("cuda_extension", spec.flavor, cuda=spec.cuda is not None))
    nvcc = find_nvcc(host)
    if not nvcc:
        assert wanted is None, "the devel image has no nvcc: a CUDA extension cannot build (see test_nvcc)"
        pytest.skip("a bare host without nvcc: CUDA extensions are built where a toolkit is")
    run: ScriptResult = request.getfixturevalue("extension_run")
    payload = run.payload or {}
    record_property("extension_build_seconds", payload.get("build_seconds"))
    trace = "\n".join(payload.get("trace", []))
    assert payload.get("built"), (
        f"the CUDA extension did not build with {nvcc}: {payload.get('error') or run.describe()}\n"
        f"{trace}\nA devel image needs nvcc of torch's CUDA, g++, ninja and CUDA_HOME."
    )
    assert payload.get("ran"), f"the CUDA extension built but did not run: {payload.get('error')}\n{trace}"
    error = float(payload["max_abs_error"])
    assert error <= 1e-5, f"the extension's kernel is wrong: max abs error {error:.3g} (bound 1e-05)"
