"""Throughput parity's verdicts (torchimages.smoke.throughput) and the knowledge base's floors: the probe's
answers are literals here."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchimages import compat
from torchimages.problems import InputError
from torchimages.smoke import throughput

H200 = compat.load().throughput["NVIDIA H200"]
# The container's figures of issue 21 (2026-12-01), and the host's (one run each, given three times: a spread of 0).
CONTAINER = {
    "gemm_bf16_tflops": [761.0] * 3,
    "conv_fp16_img_s": [143200.0] * 3,
    "amp_step_img_s": [22800.0] * 3,
    "h2d_pinned_gb_s": [55.2] * 3,
}
HOST = {
    "gemm_bf16_tflops": [792.0] * 3,
    "conv_fp16_img_s": [143100.0] * 3,
    "amp_step_img_s": [23100.0] * 3,
    "h2d_pinned_gb_s": [55.3] * 3,
}
H200_NAME, H100_NAME = "NVIDIA H200", "NVIDIA H100 80GB HBM3"  # torch.cuda.get_device_name's answers


def parity(measured: dict[str, list[float]], host: dict[str, list[float]], gpu: str = H200_NAME) -> list[str]:
    """parity_problems against a reference taken on `gpu`, this run on the same."""
    return throughput.parity_problems(measured, throughput.Reference(gpu, host), gpu)


ON_CUDNN: dict[str, Any] = {
    "cudnn": {"available": True, "enabled": True, "conv_ops": ["aten::_convolution", "aten::cudnn_convolution"]}
}


# Issue 42, an H100 host, six runs of the probe back to back: the least and greatest figure of each are the
# issue's; the four between are made up inside that range (the issue gave the ranges only), h2d made up.
H100_HOST = {
    "gemm_bf16_tflops": [718.0, 795.0, 760.0, 741.0, 779.0, 752.0],
    "conv_fp16_img_s": [1_600_000.0, 1_720_000.0, 1_650_000.0, 1_690_000.0, 1_630_000.0, 1_700_000.0],
    "amp_step_img_s": [63_800.0, 84_000.0, 71_200.0, 77_500.0, 68_900.0, 80_100.0],
    "h2d_pinned_gb_s": [53.1, 53.4, 53.2, 53.6, 53.3, 53.5],
}
# A container of the same image, as noisy: its AMP step's median (67.0k) is 10.5% under the host's (74.35k), where
# the old bound (one run each, 10%) failed it.
H100_CONTAINER = {
    "gemm_bf16_tflops": [725.0, 788.0, 749.0],
    "conv_fp16_img_s": [1_610_000.0, 1_700_000.0, 1_660_000.0],
    "amp_step_img_s": [64_100.0, 67_000.0, 82_500.0],
    "h2d_pinned_gb_s": [53.0, 53.5, 53.3],
}
# A slowdown planted, made up as a container limited to one CPU would give it: the launch-bound AMP step at 45% of
# the host's, one lucky sample at the host's figure; the GPU-bound figures as the host's.
ONE_CPU = {**H100_CONTAINER, "amp_step_img_s": [33_100.0, 74_000.0, 31_900.0]}


def test_the_measured_container_is_the_hosts_equal() -> None:
    assert parity(CONTAINER, HOST) == []
    assert throughput.floor_problems(throughput.medians(CONTAINER), H200) == []


def test_a_container_as_noisy_as_its_host_passes_where_a_fixed_10_percent_failed() -> None:
    verdicts = throughput.parity(H100_CONTAINER, throughput.Reference(H100_NAME, H100_HOST), H100_NAME)
    assert [v.name for v in verdicts] == list(throughput.METRICS) and all(v.ok for v in verdicts), verdicts
    amp = verdicts[2].line
    assert "67,000.0 img/s of 3" in amp and "at or over the host's median less 27% 54,150.0 img/s" in amp
    assert "the host: median 74,350.0 img/s of 6 (63,800.0 img/s to 84,000.0 img/s, spread 27%)" in amp


def test_a_2x_slower_container_fails_though_the_host_is_noisy_saying_its_spread() -> None:
    halved = {name: [v / 2 for v in values] for name, values in H100_CONTAINER.items()}
    problems = parity(halved, H100_HOST, H100_NAME)
    assert [p.split(" ")[0] for p in problems] == list(throughput.METRICS)
    amp = problems[2]
    assert amp.startswith("amp_step_img_s (AMP training step") and "here median 33,500.0 img/s of 3" in amp
    assert "under the host's median less 27% 54,150.0 img/s" in amp and "spread 27%" in amp


def test_a_planted_one_cpu_slowdown_of_the_launch_bound_step_fails_alone() -> None:
    (problem,) = parity(ONE_CPU, H100_HOST, H100_NAME)
    assert problem.startswith("amp_step_img_s") and "here median 33,100.0 img/s of 3" in problem


def test_a_quiet_host_keeps_the_10_percent_bound() -> None:
    host = {"gemm_bf16_tflops": [790.0, 800.0, 795.0]}  # 1% spread
    assert parity({"gemm_bf16_tflops": [720.0, 722.0, 721.0]}, host) == []  # 9.3% under
    (problem,) = parity({"gemm_bf16_tflops": [710.0, 712.0, 711.0]}, host)  # 10.6% under
    assert "under the host's median less 10% 715.5 TFLOP/s" in problem and "spread 1%" in problem


def test_a_host_too_noisy_to_tell_a_2x_slowdown_fails_saying_so() -> None:
    host = {"amp_step_img_s": [40_000.0, 84_000.0, 70_000.0]}  # 63% of its median
    (problem,) = parity({"amp_step_img_s": [70_000.0, 71_000.0, 69_000.0]}, host)
    assert "too noisy to compare with" in problem and "spread 63%), over 40%" in problem


def test_a_host_figure_of_too_few_samples_has_no_spread_and_fails() -> None:
    (problem,) = parity(H100_CONTAINER, {**H100_HOST, "amp_step_img_s": [74_000.0, 75_000.0]}, H100_NAME)
    assert "the host gave 2 sample(s), under 3: its spread is unmeasured" in problem


def test_a_slower_container_fails_naming_the_figure_and_the_bound() -> None:
    slow = {**CONTAINER, "conv_fp16_img_s": [90000.0, 91000.0, 89000.0]}
    (problem,) = parity(slow, HOST)
    assert problem.startswith("conv_fp16_img_s (fp16 3x3 convolution")
    assert "90,000.0 img/s of 3" in problem and "128,790.0 img/s" in problem  # 10% under the host's 143.1k


def test_a_figure_the_host_has_and_this_run_lacks_fails() -> None:
    assert parity({}, {"h2d_pinned_gb_s": [55.3, 55.2, 55.4]}) == ["h2d_pinned_gb_s: measured on the host, not here"]


def test_a_reference_with_a_misspelt_figure_compares_nothing_and_fails() -> None:
    """Issue 42: `gemm_bf16_tflop` (no s) read fine and parity said nothing: every figure passed unchecked."""
    problems = parity(CONTAINER, {"gemm_bf16_tflop": [700.0, 710.0, 720.0]})
    assert problems == [
        f"{name}: measured here, not in the reference (write it again with this version's "
        "TORCHIMAGES_THROUGHPUT_OUT on this GPU model)"
        for name in throughput.METRICS
    ] + [
        "gemm_bf16_tflop: the reference names a figure this version does not measure (write it again with this "
        "version's TORCHIMAGES_THROUGHPUT_OUT on this GPU model)"
    ]


def test_a_reference_of_one_figure_fails_each_other_figure_measured() -> None:
    problems = parity(CONTAINER, {"gemm_bf16_tflops": HOST["gemm_bf16_tflops"]})
    assert [p.split(":")[0] for p in problems] == ["conv_fp16_img_s", "amp_step_img_s", "h2d_pinned_gb_s"]
    assert all("measured here, not in the reference" in p for p in problems)


def test_a_reference_of_another_gpu_model_fails_naming_both() -> None:
    verdicts = throughput.parity(CONTAINER, throughput.Reference(H100_NAME, HOST), H200_NAME)
    assert [(v.name, v.ok) for v in verdicts] == [("gpu", False)]
    assert verdicts[0].line.startswith(
        "the reference was measured on NVIDIA H100 80GB HBM3, this run on NVIDIA H200: another GPU model's figures"
    )
    hostile = throughput.parity(CONTAINER, throughput.Reference("H\x1b[2J", HOST), H200_NAME)
    assert "H\\x1b[2J" in hostile[0].line and "\x1b" not in hostile[0].line


def test_the_samples_of_several_probe_runs_are_pooled() -> None:
    runs: list[dict[str, Any]] = [
        {"metrics": {"amp_step_img_s": 70.0}, "samples": {"amp_step_img_s": [69.0, 70.0, 71.0]}},
        {"metrics": {"amp_step_img_s": 80.0}},  # an answer without samples: its one figure
    ]
    assert throughput.samples_of(runs) == {"amp_step_img_s": [69.0, 70.0, 71.0, 80.0]}
    assert throughput.medians({"amp_step_img_s": [69.0, 70.0, 71.0, 80.0]}) == {"amp_step_img_s": 70.5}


def test_the_h200_floors_are_set_where_the_probes_shape_was_measured() -> None:
    assert set(H200.floors) == {"gemm_bf16_tflops", "h2d_pinned_gb_s"}
    assert set(H200.reference) == set(throughput.METRICS)
    assert all(H200.floors[name] <= 0.9 * H200.reference[name] for name in H200.floors)
    slow = {**throughput.medians(CONTAINER), "gemm_bf16_tflops": 400.0}
    (problem,) = throughput.floor_problems(slow, H200)
    assert "400.0 TFLOP/s" in problem and "NVIDIA H200" in problem and "2026-12-01" in problem


def test_a_gpu_name_finds_its_model() -> None:
    known = compat.load().throughput
    assert throughput.model_entry("NVIDIA H200", known) is H200
    assert throughput.model_entry("NVIDIA H200 NVL", known) is H200
    assert throughput.model_entry("NVIDIA A100-SXM4-80GB", known) is None


def test_a_convolution_off_cudnn_is_a_fall_back() -> None:
    assert throughput.conv_problem(ON_CUDNN) is None
    slow = {"cudnn": {"available": True, "enabled": True, "conv_ops": ["aten::_slow_conv2d_forward"]}}
    assert "without cuDNN" in str(throughput.conv_problem(slow)) and "_slow_conv2d_forward" in str(
        throughput.conv_problem(slow)
    )
    assert "not available" in str(throughput.conv_problem({"cudnn": {"available": False}}))
    assert "disabled" in str(throughput.conv_problem({"cudnn": {"available": True, "enabled": False}}))


def test_the_host_reference_is_read_from_what_the_host_run_wrote(tmp_path: Path) -> None:
    written = tmp_path / "host.json"
    document = {"gpu": H200_NAME, "metrics": throughput.medians(HOST), "samples": HOST, "context": {"gpus": "x"}}
    written.write_text(json.dumps(document))
    assert throughput.read_reference(written) == throughput.Reference(H200_NAME, HOST)


@pytest.mark.parametrize("gpu", [None, "", "  ", 7, ["NVIDIA H200"]])
def test_a_reference_without_its_gpu_model_is_refused(tmp_path: Path, gpu: Any) -> None:
    older = tmp_path / "older.json"
    older.write_text(json.dumps({"samples": HOST, "context": {"gpus": "NVIDIA H200"}, "gpu": gpu}))
    with pytest.raises(InputError, match="no `gpu` naming the GPU model it was measured on"):
        throughput.read_reference(older)


@pytest.mark.parametrize(
    "document",
    [
        {"metrics": {"gemm_bf16_tflops": 792.0}},  # an older reference: one figure, no spread
        {"samples": {"gemm_bf16_tflops": "fast"}},
        {"samples": {"gemm_bf16_tflops": []}},
        {"samples": {"gemm_bf16_tflops": [792.0, True]}},
        {"samples": {"gemm_bf16_tflops": [792.0, -1.0]}},
        {"samples": {"gemm_bf16_tflops": [792.0, 0]}},
        {"samples": {}},
        {"samples": [792.0]},
    ],
)
def test_a_reference_without_samples_of_positive_figures_is_refused(tmp_path: Path, document: Any) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(document))
    with pytest.raises(InputError, match="no object `samples` of figures"):
        throughput.read_reference(bad)


@pytest.mark.parametrize("figure", ["NaN", "Infinity", "-Infinity"])
def test_a_reference_of_nan_or_infinite_figures_is_refused(tmp_path: Path, figure: str) -> None:
    """Refused for its figures (a reference that names its GPU: nothing else is wrong with it)."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"gpu": "NVIDIA H100 80GB HBM3", "samples": {"x": [' + figure + ", 1.0]}}")
    with pytest.raises(InputError, match="no object `samples` of figures"):
        throughput.read_reference(bad)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(samples=JSON)
def test_any_reference_is_read_as_positive_figures_or_refused(tmp_path: Path, samples: Any) -> None:
    path = tmp_path / "any.json"
    path.write_text(json.dumps({"gpu": H200_NAME, "samples": samples}))
    try:
        read = throughput.read_reference(path)
    except InputError:
        return
    figures = read.samples
    assert figures and all(values and all(math.isfinite(v) and v > 0 for v in values) for values in figures.values())
    for name, values in figures.items():  # a comparison of what was read says a line, never raises
        assert throughput.compare(name, values, values).line
    verdicts = throughput.parity(figures, read, H200_NAME)  # a name it does not know fails, never passes
    assert not any(v.ok for v in verdicts if v.name not in throughput.METRICS)


def test_a_floor_without_its_reference_or_source_is_refused() -> None:
    raw = yaml.safe_load(compat.data_text())
    raw["throughput"]["NVIDIA H200"]["floors"]["amp_step_img_s_typo"] = 1.0
    with pytest.raises(ValueError, match="a floor needs the reference"):
        compat.parse(raw)
    raw = yaml.safe_load(compat.data_text())
    raw["throughput"]["NVIDIA H200"]["sources"] = ["NOWHERE"]
    with pytest.raises(ValueError, match="name its sources"):
        compat.parse(raw)
