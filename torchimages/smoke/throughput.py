"""Throughput parity: the GPU suite's benchmark figures (probes/scripts/throughput.py) against the same probe
run on the host (`build.py test --host local` with TORCHIMAGES_THROUGHPUT_OUT, then the container's run with
TORCHIMAGES_THROUGHPUT_REFERENCE) or against the knowledge base's floors for the GPU model. Pure functions.

Each side gives several samples of each figure (the probe's repeats, in several processes). A figure fails parity
only beyond the noise the host measured: the container's median under the host's median less the wider of
TOLERANCE and the host's own relative spread ((max - min) / median); a host spread over MAX_SPREAD is too noisy
to tell a slowdown of 2x from noise, and says so instead of passing. A reference compares only where it was taken
on this run's GPU model and holds every figure this run measured, and no figure this version does not know (a
misspelt name would otherwise compare nothing and pass)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from torchimages import textfile
from torchimages.compat import GpuThroughput
from torchimages.problems import InputError, Problem
from torchimages.problems import shown as shown_text

# name -> (unit, what)
METRICS: Mapping[str, tuple[str, str]] = {
    "gemm_bf16_tflops": ("TFLOP/s", "bf16 matrix product 8192^3 (cuBLAS)"),
    "conv_fp16_img_s": ("img/s", "fp16 3x3 convolution 64->64 at 56x56, batch 256 (cuDNN)"),
    "amp_step_img_s": ("img/s", "AMP training step of a small CNN at 32x32, batch 256"),
    "h2d_pinned_gb_s": ("GB/s", "pinned host-to-device copy of 256 MiB"),
}
# The least margin under the host's median: the host and a container of the same torch differed by under 4% on
# an H200 (one run each, 2026-12-01). A noisier host widens it to its own spread (issue 42: the AMP step moved
# 63.8k-84.0k img/s over six host runs on an H100, 27% of its median).
TOLERANCE = 0.10
# A host spread above this is too wide to compare: its margin would let a container at 60% of the host pass.
MAX_SPREAD = 0.40
# Processes of the probe per suite run (each measures every figure REPEATS times): 9 samples a side.
PROCESSES = 3
# Samples of a figure the host needs for a spread (fewer measure none).
MIN_SAMPLES = 3
REFERENCE_WHAT = "the throughput reference (TORCHIMAGES_THROUGHPUT_REFERENCE)"


def shown(name: str, value: float) -> str:
    unit = METRICS.get(name, ("", ""))[0]
    return f"{value:,.1f} {unit}".strip()


@dataclass(frozen=True)
class Spread:
    """Several samples of one figure: their median, least and greatest."""

    median: float
    low: float
    high: float
    count: int

    @property
    def relative(self) -> float:
        """(high - low) / median: the measured noise, as a fraction of the median."""
        return (self.high - self.low) / self.median if self.median > 0 else math.inf

    def describe(self, name: str) -> str:
        return (
            f"median {shown(name, self.median)} of {self.count} "
            f"({shown(name, self.low)} to {shown(name, self.high)}, spread {self.relative:.0%})"
        )


def spread(samples: Sequence[float]) -> Spread:
    return Spread(statistics.median(samples), min(samples), max(samples), len(samples))


@dataclass(frozen=True)
class Verdict:
    """One figure's comparison with the host's: `ok`, and a line saying the figures, the bound and the spread."""

    name: str
    ok: bool
    line: str


def compare(name: str, measured: Sequence[float], host: Sequence[float]) -> Verdict:
    """The container's samples of a figure against the host's: fails under the host's median less the wider of
    TOLERANCE and the host's spread; a host with under MIN_SAMPLES samples or a spread over MAX_SPREAD can't
    tell, and fails saying so."""
    what = f"{name} ({METRICS.get(name, ('', name))[1]})"
    if not measured:
        return Verdict(name, False, f"{name}: measured on the host, not here")
    here, there = spread(measured), spread(host)
    if there.count < MIN_SAMPLES:
        return Verdict(
            name,
            False,
            f"{what}: the host gave {there.count} sample(s), under {MIN_SAMPLES}: its spread is "
            "unmeasured (write the reference again with this version's TORCHIMAGES_THROUGHPUT_OUT)",
        )
    if there.relative > MAX_SPREAD:
        return Verdict(
            name,
            False,
            f"{what}: the host's figures are too noisy to compare with: {there.describe(name)}, over "
            f"{MAX_SPREAD:.0%}; here {here.describe(name)}. Measure the host again on an idle GPU",
        )
    margin = max(TOLERANCE, there.relative)
    bound = there.median * (1 - margin)
    relation = "under" if here.median < bound else "at or over"
    line = (
        f"{what}: here {here.describe(name)}: {relation} the host's median less {margin:.0%} "
        f"{shown(name, bound)}; the host: {there.describe(name)}"
    )
    return Verdict(name, here.median >= bound, line)


@dataclass(frozen=True)
class Reference:
    """The host's figures (TORCHIMAGES_THROUGHPUT_OUT): the GPU model its probe ran on, and each figure's samples."""

    gpu: str
    samples: Mapping[str, Sequence[float]]


WRITE_AGAIN = "write it again with this version's TORCHIMAGES_THROUGHPUT_OUT on this GPU model"


def parity(measured: Mapping[str, Sequence[float]], reference: Reference, gpu: str) -> list[Verdict]:
    """Each figure compared with the reference's (this run on `gpu`, the probe's GPU name): a reference of another
    GPU model fails as a whole; a figure the reference names and this version does not know fails, as does one
    this run measured and the reference lacks, and one the reference has and this run lacks."""
    if reference.gpu != gpu:
        line = (
            f"the reference was measured on {shown_text(reference.gpu)}, this run on {shown_text(gpu)}: another "
            f"GPU model's figures tell nothing of this one ({WRITE_AGAIN})"
        )
        return [Verdict("gpu", False, line)]
    host = reference.samples
    verdicts = []
    for name in [*METRICS, *sorted(set(measured) - set(METRICS)), *sorted(set(host) - set(METRICS))]:
        if name not in measured and name not in host:
            continue
        if name not in METRICS and name in host:
            line = f"{shown_text(name)}: the reference names a figure this version does not measure ({WRITE_AGAIN})"
            verdicts.append(Verdict(name, False, line))
        elif name not in host:
            verdicts.append(Verdict(name, False, f"{name}: measured here, not in the reference ({WRITE_AGAIN})"))
        else:
            verdicts.append(compare(name, measured.get(name, ()), host[name]))
    return verdicts


def parity_problems(measured: Mapping[str, Sequence[float]], reference: Reference, gpu: str) -> list[str]:
    """The lines of the figures that fail parity."""
    return [verdict.line for verdict in parity(measured, reference, gpu) if not verdict.ok]


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


def samples_of(payloads: Sequence[Mapping[str, Any]]) -> dict[str, list[float]]:
    """Every sample of each figure over several runs of the probe: a run's `samples`, else its one figure."""
    merged: dict[str, list[float]] = {}
    for payload in payloads:
        metrics, samples = payload.get("metrics") or {}, payload.get("samples") or {}
        for name, value in metrics.items():
            merged.setdefault(name, []).extend(float(v) for v in samples.get(name) or [value])
    return merged


def medians(samples: Mapping[str, Sequence[float]]) -> dict[str, float]:
    return {name: statistics.median(values) for name, values in samples.items() if values}


def model_entry(gpu: str, known: Mapping[str, GpuThroughput]) -> GpuThroughput | None:
    """The knowledge base's entry for a GPU name: the exact name, else the longest model name it starts with."""
    if gpu in known:
        return known[gpu]
    matches = [model for model in known if gpu.startswith(model)]
    return known[max(matches, key=len)] if matches else None


def _figure(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _samples(value: object) -> TypeGuard[dict[str, list[float]]]:
    """A non-empty object of non-empty lists of positive finite numbers."""
    if not isinstance(value, dict) or not value:
        return False
    return all(isinstance(values, list) and values and all(map(_figure, values)) for values in value.values())


def read_reference(path: Path) -> Reference:
    """The host's figures: a JSON object whose `gpu` names the GPU model its probe ran on and whose `samples` maps
    figure names to lists of positive numbers (what TORCHIMAGES_THROUGHPUT_OUT wrote). parity judges the names."""
    data = textfile.read_json_object(path, REFERENCE_WHAT)
    samples, gpu = data.get("samples"), data.get("gpu")
    if not _samples(samples):
        raise InputError(
            [
                Problem(
                    f"{REFERENCE_WHAT}: no object `samples` of figures (name: a list of positive numbers); write it "
                    "with this version's TORCHIMAGES_THROUGHPUT_OUT",
                    file=str(path),
                )
            ]
        )
    if not isinstance(gpu, str) or not gpu.strip():
        raise InputError(
            [
                Problem(
                    f"{REFERENCE_WHAT}: no `gpu` naming the GPU model it was measured on (an older reference); "
                    "write it again with this version's TORCHIMAGES_THROUGHPUT_OUT",
                    file=str(path),
                )
            ]
        )
    return Reference(gpu, {str(name): [float(v) for v in values] for name, values in samples.items()})
