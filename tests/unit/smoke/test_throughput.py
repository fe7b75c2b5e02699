"""Throughput parity's verdicts (torchimages.smoke.throughput) and the knowledge base's floors: the probe's
answers are literals here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from torchimages import compat
from torchimages.problems import InputError
from torchimages.smoke import throughput

H200 = compat.load().throughput["NVIDIA H200"]
# The container's figures of issue 21 (2026-12-01), and the host's.
CONTAINER = {"gemm_bf16_tflops": 761.0, "conv_fp16_img_s": 143200.0, "amp_step_img_s": 22800.0, "h2d_pinned_gb_s": 55.2}
HOST = {"gemm_bf16_tflops": 792.0, "conv_fp16_img_s": 143100.0, "amp_step_img_s": 23100.0, "h2d_pinned_gb_s": 55.3}
ON_CUDNN: dict[str, Any] = {
    "cudnn": {"available": True, "enabled": True, "conv_ops": ["aten::_convolution", "aten::cudnn_convolution"]}
}


def test_the_measured_container_is_the_hosts_equal() -> None:
    assert throughput.parity_problems(CONTAINER, HOST) == []
    assert throughput.floor_problems(CONTAINER, H200) == []


def test_a_slower_container_fails_naming_the_figure_and_the_bound() -> None:
    slow = {**CONTAINER, "conv_fp16_img_s": 90000.0}
    (problem,) = throughput.parity_problems(slow, HOST)
    assert problem.startswith("conv_fp16_img_s (fp16 3x3 convolution")
    assert "90,000.0 img/s" in problem and "128,790.0 img/s" in problem  # 10% under the host's 143.1k


def test_a_figure_the_host_has_and_this_run_lacks_fails() -> None:
    assert throughput.parity_problems({}, {"h2d_pinned_gb_s": 55.3}) == [
        "h2d_pinned_gb_s: measured on the host, not here"
    ]


def test_the_h200_floors_are_set_where_the_probes_shape_was_measured() -> None:
    assert set(H200.floors) == {"gemm_bf16_tflops", "h2d_pinned_gb_s"}
    assert set(H200.reference) == set(throughput.METRICS)
    assert all(H200.floors[name] <= 0.9 * H200.reference[name] for name in H200.floors)
    slow = {**CONTAINER, "gemm_bf16_tflops": 400.0}
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
    written.write_text(json.dumps({"metrics": HOST, "context": {"gpus": "NVIDIA H200"}}))
    assert throughput.read_reference(written) == HOST
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"metrics": {"gemm_bf16_tflops": "fast"}}))
    with pytest.raises(InputError, match="no object of figures"):
        throughput.read_reference(bad)


def test_a_floor_without_its_reference_or_source_is_refused() -> None:
    raw = yaml.safe_load(compat.data_text())
    raw["throughput"]["NVIDIA H200"]["floors"]["amp_step_img_s_typo"] = 1.0
    with pytest.raises(ValueError, match="a floor needs the reference"):
        compat.parse(raw)
    raw = yaml.safe_load(compat.data_text())
    raw["throughput"]["NVIDIA H200"]["sources"] = ["NOWHERE"]
    with pytest.raises(ValueError, match="name its sources"):
        compat.parse(raw)
