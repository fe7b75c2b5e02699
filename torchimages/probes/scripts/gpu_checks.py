"""Probe: single-GPU correctness checks, all in one process, printed as one JSON line.

`python gpu_checks.py` runs the round trips, matmuls, cuDNN convolutions and the AMP
training step (torch.compile has its own probe, torch_compile.py), and reports torch's
architecture list with each visible GPU's compute capability (`_archs`). Every
check uses random inputs (never zeros), synchronises the device and reports
CUDA errors as its own failure; a check never stops the ones after it.
"""

from __future__ import annotations

import json
import sys
import traceback
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F

MARK = "SMOKE_JSON:"
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# Error bounds, as max |gpu - ref| / max |ref| against a float64 CPU reference
# computed from the same (already rounded) inputs: fp32 must be exact to a few
# ulps of the accumulated sums; TF32 rounds inputs to 10 mantissa bits; fp16 and
# bf16 round the outputs (2^-11, 2^-8) and may accumulate in reduced precision.
MATMUL_TOLERANCE = {"fp32": 1e-5, "tf32": 5e-3, "fp16": 5e-3, "bf16": 2e-2}
CONV_TOLERANCE = {"fp32": 1e-4, "fp16": 5e-3, "bf16": 3e-2}

Result = dict[str, Any]


def relative_error(value: torch.Tensor, reference: torch.Tensor) -> float:
    """max |value - reference| / max |reference|, on the CPU in float64."""
    value64 = value.detach().to("cpu", torch.float64)
    scale = reference.abs().max().item() or 1.0
    return float((value64 - reference).abs().max().item() / scale)


def set_tf32(enabled: bool) -> None:
    """Allow or forbid TF32 in cuBLAS and cuDNN, with the API this torch has."""
    matmul = torch.backends.cuda.matmul
    conv = getattr(torch.backends.cudnn, "conv", None)
    if hasattr(matmul, "fp32_precision") and hasattr(conv, "fp32_precision"):
        precision = "tf32" if enabled else "ieee"
        matmul.fp32_precision = precision
        conv.fp32_precision = precision  # type: ignore[union-attr]
    else:
        matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled


def random_tensor(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Random CPU tensor with no zeros (normal floats, integers 1..100)."""
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    return torch.randint(1, 101, shape).to(dtype)


def check_roundtrip(dtype: torch.dtype) -> Result:
    host = random_tensor((1024, 1024), dtype)
    back = host.to("cuda").cpu()
    torch.cuda.synchronize()
    equal = torch.equal(host, back)
    return {"ok": equal, "detail": "" if equal else "tensor changed on the way to the GPU and back"}


def check_matmul(precision: str) -> Result:
    dtype = torch.float32 if precision in ("fp32", "tf32") else DTYPES[precision]
    set_tf32(precision == "tf32")
    a, b = random_tensor((1024, 1024), dtype), random_tensor((1024, 1024), dtype)
    out = a.to("cuda") @ b.to("cuda")
    torch.cuda.synchronize()
    error = relative_error(out, a.double() @ b.double())
    bound = MATMUL_TOLERANCE[precision]
    set_tf32(False)
    return {
        "ok": error <= bound,
        "detail": f"relative error {error:.3g} (bound {bound:g})",
        "metrics": {"relative_error": error, "bound": bound},
    }


def _conv_case(dtype: torch.dtype) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """GPU results and float64 CPU references: [out, grad_input, grad_weight, grad_bias]."""
    x = random_tensor((8, 16, 32, 32), dtype)
    w = random_tensor((32, 16, 3, 3), dtype) * 0.1
    b = random_tensor((32,), dtype)
    grad = random_tensor((8, 32, 32, 32), dtype)
    results = _conv_forward_backward(x, w, b, grad, "cuda")
    torch.cuda.synchronize()
    references = _conv_forward_backward(x.double(), w.double(), b.double(), grad.double(), "cpu")
    return results, references


def _conv_forward_backward(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, grad: torch.Tensor, device: str
) -> list[torch.Tensor]:
    """[conv2d output, grad_input, grad_weight, grad_bias] on the device."""
    inputs = [t.to(device).requires_grad_() for t in (x, w, b)]
    out = F.conv2d(inputs[0], inputs[1], inputs[2], padding=1)
    grads = torch.autograd.grad(out, inputs, grad.to(device))
    return [out.detach(), *grads]


def check_conv2d(name: str) -> dict[str, Result]:
    """cuDNN conv2d forward and backward (benchmark mode) in one dtype."""
    torch.backends.cudnn.benchmark = True
    set_tf32(False)
    bound = CONV_TOLERANCE[name]
    results, references = _conv_case(DTYPES[name])
    errors = [relative_error(r, ref) for r, ref in zip(results, references, strict=True)]
    forward, backward = errors[0], max(errors[1:])
    return {
        f"conv2d_forward_{name}": {
            "ok": forward <= bound,
            "detail": f"relative error {forward:.3g} (bound {bound:g})",
            "metrics": {"relative_error": forward, "bound": bound},
        },
        f"conv2d_backward_{name}": {
            "ok": backward <= bound and len(errors) == 4,
            "detail": f"largest gradient relative error {backward:.3g} (bound {bound:g})",
            "metrics": {"relative_error": backward, "bound": bound},
        },
    }


def check_amp_training() -> Result:
    """Autocast (fp16) + GradScaler steps on a small MLP lower the loss."""
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)).cuda()
    x = torch.randn(512, 64, device="cuda")
    y = torch.sin(x[:, :8].sum(dim=1, keepdim=True))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    scaler = torch.amp.GradScaler("cuda")
    with torch.no_grad():
        before = F.mse_loss(model(x), y).item()
    out_dtype = None
    for _ in range(20):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            out = model(x)
            loss = F.mse_loss(out.float(), y)
        out_dtype = out.dtype
        torch.autograd.backward(scaler.scale(loss))
        scaler.step(optimizer)
        scaler.update()
    with torch.no_grad():
        after = F.mse_loss(model(x), y).item()
    torch.cuda.synchronize()
    ok = after < before and out_dtype == torch.float16
    return {
        "ok": ok,
        "detail": f"loss {before:.4f} -> {after:.4f} in 20 steps, autocast output {out_dtype}",
        "metrics": {"loss_before": before, "loss_after": after, "scale": scaler.get_scale()},
    }


def guarded(check: Callable[[], Result]) -> Result:
    """Run one check; turn exceptions and CUDA errors into a failed result."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = check()
            torch.cuda.synchronize()
        except Exception as exc:
            lines = traceback.format_exc().strip().splitlines()
            result = {"ok": False, "detail": f"{type(exc).__name__}: {exc}", "trace": lines[-12:]}
    if caught:
        result["warnings"] = sorted({str(w.message)[:300] for w in caught})
    return result


def _conv_pair(name: str) -> Result:
    return {"ok": True, "pair": check_conv2d(name)}


def basic_checks() -> dict[str, Result]:
    results: dict[str, Result] = {}
    for name, dtype in {**DTYPES, "int64": torch.int64, "uint8": torch.uint8}.items():
        results[f"roundtrip_{name}"] = guarded(partial(check_roundtrip, dtype))
    for precision in MATMUL_TOLERANCE:
        results[f"matmul_{precision}"] = guarded(partial(check_matmul, precision))
    for name in CONV_TOLERANCE:
        outcome = guarded(partial(_conv_pair, name))
        pair: dict[str, Result] = outcome.get("pair") or {
            f"conv2d_{part}_{name}": dict(outcome) for part in ("forward", "backward")
        }
        for result in pair.values():
            result.setdefault("warnings", outcome.get("warnings", []))
        results.update(pair)
    results["amp_training_step"] = guarded(check_amp_training)
    return results


def arch_report() -> Result:
    """What torch's CUDA code was built for (`get_arch_list()`: `sm_90`, `compute_120`) and every visible GPU's
    compute capability; the suite applies NVIDIA's rules (torchimages/smoke/gpu_archs.py)."""
    try:
        return {
            "arch_list": list(torch.cuda.get_arch_list()),
            "devices": [
                {
                    "index": index,
                    "name": torch.cuda.get_device_name(index),
                    "capability": list(torch.cuda.get_device_capability(index)),
                }
                for index in range(torch.cuda.device_count())
            ],
        }
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def main(argv: list[str]) -> None:
    torch.manual_seed(1234)
    if not torch.cuda.is_available():
        print(MARK + json.dumps({"error": "torch.cuda.is_available() is False"}))
        return
    archs = arch_report()  # before the checks, whatever state a failing one leaves the CUDA context in
    results = basic_checks()
    results["_archs"] = archs
    results["_device"] = {"name": torch.cuda.get_device_name(), "torch": torch.__version__}
    print(MARK + json.dumps(results), flush=True)


if __name__ == "__main__":
    main(sys.argv)
