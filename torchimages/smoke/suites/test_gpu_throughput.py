"""Throughput parity on one GPU: a short benchmark (bf16 GEMM, a cuDNN fp16 convolution, an AMP training step,
pinned host-to-device copies) whose figures go to the terminal summary and the JUnit file, the convolution
proven to run on cuDNN (a fall-back fails), and the figures against the knowledge base's floors for the GPU
model and against the same probe run on the host, beyond the host's own measured spread
(torchimages.smoke.throughput)."""

from __future__ import annotations

from typing import Any

import pytest

from torchimages import compat, settings
from torchimages.probes import ScriptResult
from torchimages.problems import InputError
from torchimages.smoke import throughput

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.filterwarnings("ignore:record_property is incompatible:pytest.PytestWarning"),
]


@pytest.fixture(scope="module")
def figures(
    throughput_runs: list[ScriptResult],
    throughput_figures: dict[str, list[float]],
    throughput_gpu: dict[str, str],
    record_testsuite_property: Any,
) -> dict[str, Any]:
    """The probe's last answer, its `metrics` the medians of every process's samples and `samples` those; the
    figures recorded once (summary, JUnit test-suite properties), with the GPU the probe ran on."""
    for run in throughput_runs:
        payload = run.payload
        assert payload is not None, f"the throughput probe died before reporting: {run.describe()}"
        trace = "\n  ".join(payload.get("trace", []))
        assert "error" not in payload, f"the throughput probe failed: {payload['error']}\n  {trace}"
    samples = throughput.samples_of([run.payload or {} for run in throughput_runs])
    throughput_figures.update(samples)
    throughput_gpu["gpu"] = str((throughput_runs[-1].payload or {}).get("gpu", ""))
    medians = throughput.medians(samples)
    for name, value in medians.items():
        record_testsuite_property(f"throughput_{name}", f"{value:.1f}")
        record_testsuite_property(f"throughput_{name}_samples", " ".join(f"{v:.1f}" for v in samples[name]))
    return {**(throughput_runs[-1].payload or {}), "metrics": medians, "samples": samples}


def test_throughput_figures(figures: dict[str, Any], record_property: Any) -> None:
    measured = figures["metrics"]
    assert set(measured) == set(throughput.METRICS), f"the probe measured {sorted(measured)}"
    for name, value in measured.items():
        record_property(name, round(value, 1))
        assert value > 0, f"{name}: {value}"
    assert figures.get("pinned"), "the host buffer of the copy was not pinned (pin_memory)"


def test_convolution_runs_on_cudnn(figures: dict[str, Any]) -> None:
    problem = throughput.conv_problem(figures)
    assert problem is None, (
        f"{problem}: convolutions fall back to a slow path. Check that the image's cuDNN loads "
        "(test_cpu_libraries) and that nothing sets torch.backends.cudnn.enabled = False"
    )


def test_throughput_floors(figures: dict[str, Any]) -> None:
    entry = throughput.model_entry(figures["gpu"], compat.load().throughput)
    if entry is None or not entry.floors:
        pytest.skip(f"no throughput floors for {figures['gpu']} in the knowledge base: the figures are reported only")
    problems = throughput.floor_problems(figures["metrics"], entry)
    assert not problems, (
        "slower than this GPU model runs the same probe:\n  " + "\n  ".join(problems) + "\nA library loaded from "
        "the wrong place, a fall-back path, a throttled or shared GPU? Compare with the host (--host local)"
    )


def test_throughput_equals_the_hosts(figures: dict[str, Any], record_property: Any) -> None:
    """Each figure's median at least the host's median less the wider of 10% and the host's own spread (a host
    spread over 40% is too noisy to compare, and fails saying so): the verdicts go to the JUnit file. A reference
    of another GPU model, one lacking a figure measured here or naming one this version does not know fails."""
    path = settings.path("TORCHIMAGES_THROUGHPUT_REFERENCE")
    if path is None:
        pytest.skip(
            "no host figures to compare with: run `build.py test --host local --suites gpu` with "
            "TORCHIMAGES_THROUGHPUT_OUT=FILE, then this run with TORCHIMAGES_THROUGHPUT_REFERENCE=FILE"
        )
    try:
        host = throughput.read_reference(path)
    except InputError as exc:
        pytest.fail("; ".join(str(p) for p in exc.problems), pytrace=False)
    verdicts = throughput.parity(figures["samples"], host, str(figures.get("gpu", "")))
    for verdict in verdicts:
        record_property(f"parity_{verdict.name}", verdict.line)
    problems = [verdict.line for verdict in verdicts if not verdict.ok]
    assert not problems, "throughput not shown equal to the host's, beyond the host's own spread:\n  " + "\n  ".join(
        problems
    )
