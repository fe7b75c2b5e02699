"""The smoke gate's verdicts, with the real pytest plugin and suites run on this machine (`local://`) against
facts written out here (no Docker, no torch, no GPU): a companion or NCCL that differs fails, a missing
companion fails (never a skip), `--require-gpu` without a GPU fails, an NCCL run must have one rank per
visible GPU, and a pytest that ran nothing or crashed is no pass.

The gate's container goes to this machine instead (`runner.run_suites` is given `local://`), and one suite
module is collected at a time (`runner.SUITES_PACKAGE`), so a run takes a second or two.
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import CONSTRAINTS_HEADER, FakeEngine, Raw, constraints_answer, probe_answer
from torchimages.building import overlap, verify
from torchimages.combination import Combination, Image
from torchimages.planning import plan
from torchimages.probes import probe_source
from torchimages.smoke import runner
from torchimages.smoke.document import image_document

MATRIX = "matrix:\n  include:\n    - {torch: 2.8.0, cuda: '12.6'}\n"
TEMPORARY = "torchimages-tmp/2.8.0-cu126-py3.12-ubuntu24.04:runtime-0123456789"
# What a true 2.8.0+cu126 image holds, as the facts probe reports it: the wheel pins cuDNN 9.10.2.21 (torch
# says 91002) and NCCL 2.27.3; torchvision 0.23.0 and torchaudio 2.8.0 of the same CUDA; ubuntu24.04's 3.12.
HOLDS = probe_answer(
    "2.8.0+cu126",
    cuda="12.6",
    cudnn=91002,
    nccl=[2, 27, 3],
    python="3.12",
    os=("ubuntu", "24.04"),
    torchvision="0.23.0+cu126",
    torchaudio="2.8.0+cu126",
)


@pytest.fixture
def runtime(write_matrix: Callable[[str], Path]) -> tuple[Combination, Image]:
    (selected,) = plan.select(plan.load(write_matrix(MATRIX)), [])
    return selected.combination, selected.combination.image("runtime")


@pytest.fixture
def on_this_machine(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """The suites run on `local://` instead of the gate's container; collect only the named module."""
    real = runner.run_suites

    def run_suites(host: str, *args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return real("local://", *args, **kwargs)

    monkeypatch.setattr(runner, "run_suites", run_suites)

    def module(name: str) -> None:
        monkeypatch.setattr(runner, "SUITES_PACKAGE", f"torchimages.smoke.suites.{name}")

    return module


KINDS = {"failure": "failed", "error": "error", "skipped": "skipped"}


def results(junit: Path) -> dict[str, str]:
    """Each test case of a JUnit file (`test_version[nccl]`, the host's id dropped) and its result."""
    found = {}
    for case in ElementTree.parse(junit).iter("testcase"):
        kinds = [KINDS[child.tag] for child in case if child.tag in KINDS]
        found[case.get("name", "").replace("[local-", "[").replace("[local]", "")] = (kinds or ["passed"])[0]
    return found


def gate(
    runtime: tuple[Combination, Image], holds: Raw, tmp_path: Path, options: runner.SmokeOptions | None = None
) -> tuple[list[str], dict[str, str]]:
    """Run the builder's smoke gate on an image holding `holds`: its problems and the JUnit results."""
    combination, image = runtime
    engine = FakeEngine()
    problems = runner.smoke_gate(options or runner.SmokeOptions(suites=("cpu",)), engine, None, tmp_path)(
        combination, image, TEMPORARY, verify.decode(holds)
    )
    assert engine.containers == [], "the gate's container is removed"
    return problems, results(runner.junit_in(tmp_path, image.tag))


# --- versions: what the gate expects is everything the tag says ----------------------------------------


def test_a_true_image_passes_the_version_suite(
    runtime: tuple[Combination, Image], on_this_machine: Callable[[str], None], tmp_path: Path
) -> None:
    on_this_machine("test_cpu_versions")
    problems, found = gate(runtime, HOLDS, tmp_path)
    assert problems == []
    for fact in ("torch", "cuda", "cudnn", "nccl", "python", "os"):
        assert found[f"test_version[{fact}]"] == "passed", found
    assert found["test_companion_version[torchvision]"] == found["test_companion_version[torchaudio]"] == "passed"


def test_a_replaced_pin_fails_the_version_suite_and_no_file_skips_it(
    runtime: tuple[Combination, Image], on_this_machine: Callable[[str], None], tmp_path: Path
) -> None:
    """`test --image` of a derived image: each pin it no longer keeps is named; an image without the file
    (older, or foreign) is said (a skip), never failed."""
    on_this_machine("test_cpu_versions")
    pins = f"{CONSTRAINTS_HEADER}\nnvidia-cudnn-cu12==9.10.2.21\ntorch==2.8.0+cu126\n"
    replaced = constraints_answer(pins, {"nvidia-cudnn-cu12": "9.10.2.21", "torch": "2.9.0"})
    problems, found = gate(runtime, {**HOLDS, "constraints": replaced}, tmp_path / "replaced")
    assert found["test_pinned_distributions_are_kept"] == "failed", found
    assert "test_pinned_distributions_are_kept" in problems[1]
    said = runner.junit_in(tmp_path / "replaced", runtime[1].tag).read_text(encoding="utf-8")
    assert "torch: the image was built with 2.8.0+cu126, it now has 2.9.0" in said
    for answer, result in (
        (None, "skipped"),
        (constraints_answer(pins, {"nvidia-cudnn-cu12": "9.10.2.21", "torch": "2.8.0+cu126"}), "passed"),
    ):
        holds = HOLDS if answer is None else {**HOLDS, "constraints": answer}
        _, found = gate(runtime, holds, tmp_path / result)
        assert found["test_pinned_distributions_are_kept"] == result, found


# Wrong in the image, each on its own test: NCCL 2.27.5 and cuDNN 9.10.1 for the pins 2.27.3 and 9.10.2.21,
# a torchvision that only begins with the spec's, the torchaudio of torch 2.7.1.
WRONG = {
    "nccl": [2, 27, 5],
    "cudnn": 91001,
    "torchvision": {"version": "0.23.01+cu126", "error": None},  # begins with the spec's 0.23.0
    "torchaudio": {"version": "2.7.1+cu126", "error": None},
}
FAILS = {
    "nccl": "test_version[nccl]",
    "cudnn": "test_version[cudnn]",
    "torchvision": "test_companion_version[torchvision]",
    "torchaudio": "test_companion_version[torchaudio]",
}


def test_each_field_that_differs_fails_the_gate(
    runtime: tuple[Combination, Image], on_this_machine: Callable[[str], None], tmp_path: Path
) -> None:
    on_this_machine("test_cpu_versions")
    problems, found = gate(runtime, {**HOLDS, **WRONG}, tmp_path)
    assert {field: found[test] for field, test in FAILS.items()} == dict.fromkeys(FAILS, "failed"), found
    assert [found[f"test_version[{fact}]"] for fact in ("torch", "cuda", "python", "os")] == ["passed"] * 4
    assert problems[0] == "smoke suites (cpu) failed:"
    for test in FAILS.values():
        assert any(test.replace("[", "[local-") in p for p in problems[1:]), (test, problems)


def test_a_cpu_spec_fails_on_an_image_holding_cuda_torch(
    write_matrix: Callable[[str], Path], on_this_machine: Callable[[str], None], tmp_path: Path
) -> None:
    """No CUDA, no cuDNN, no NCCL in the tag is a claim the suite checks, not a skip."""
    on_this_machine("test_cpu_versions")
    (selected,) = plan.select(plan.load(write_matrix("matrix:\n  include:\n    - {torch: 2.8.0, cuda: cpu}\n")), [])
    cpu = (selected.combination, selected.combination.image("runtime"))
    holds = {**HOLDS, "torchvision": {"version": "0.23.0+cpu", "error": None}}
    problems, found = gate(cpu, holds, tmp_path)
    assert [found[f"test_version[{fact}]"] for fact in ("cuda", "cudnn", "nccl")] == ["failed"] * 3, found
    assert [found[f"test_version[{fact}]"] for fact in ("torch", "python", "os")] == ["passed"] * 3, found
    assert problems[0] == "smoke suites (cpu) failed:"


def test_a_missing_companion_fails_the_gate_and_is_no_skip(
    runtime: tuple[Combination, Image], on_this_machine: Callable[[str], None], tmp_path: Path
) -> None:
    on_this_machine("test_cpu_versions")
    missing = {package: {"version": None, "error": None} for package in ("torchvision", "torchaudio")}
    problems, found = gate(runtime, {**HOLDS, **missing}, tmp_path)
    for package in ("torchvision", "torchaudio"):
        assert found[f"test_companion_version[{package}]"] == "failed", found
        assert any(f"test_companion_version[local-{package}]" in p for p in problems), problems
    error = {
        package: {"version": None, "error": f"ModuleNotFoundError: No module named '{package}'"}
        for package in ("torchvision", "torchaudio")
    }
    found = gate(runtime, {**HOLDS, **error}, tmp_path)[1]
    assert [found[f"test_companion_version[{p}]"] for p in ("torchvision", "torchaudio")] == ["failed"] * 2


# --- what counts as a pass ---------------------------------------------------------------------------------


def test_a_run_of_no_test_is_no_pass(
    runtime: tuple[Combination, Image], on_this_machine: Callable[[str], None], tmp_path: Path
) -> None:
    """The module has no cpu test: pytest selects none (exit 5), and the gate fails."""
    on_this_machine("test_multi_gpu")
    combination, image = runtime
    problems = runner.smoke_gate(runner.SmokeOptions(suites=("cpu",)), FakeEngine())(
        combination, image, TEMPORARY, verify.decode(HOLDS)
    )
    assert problems[0] == "smoke suites (cpu) failed:"
    assert problems[1:] == ["pytest exited with status 5 (no test ran) and named no failed test"], problems


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr"),
    [
        (5, "collected 0 items\n\n============================ no tests ran in 0.01s =====", ""),
        (-11, "torchimages/smoke/suites/test_cpu_versions.py ..", ""),  # pytest died (SIGSEGV): no summary
        (1, "", "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):"),
        (2, "", "ERROR: usage: python -m pytest [options] [file_or_dir] ..."),
        (3, "INTERNALERROR> Traceback (most recent call last):\nINTERNALERROR> KeyError: 'x'", ""),
        (137, "", ""),  # killed, nothing said
    ],
)
def test_a_run_that_crashed_without_a_failed_line_is_no_pass(
    monkeypatch: pytest.MonkeyPatch,
    runtime: tuple[Combination, Image],
    returncode: int,
    stdout: str,
    stderr: str,
) -> None:
    def crashed(*args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess([], returncode, stdout, stderr)

    monkeypatch.setattr(runner, "run_suites", crashed)
    combination, image = runtime
    problems = runner.smoke_gate(runner.SmokeOptions(suites=("cpu",)), FakeEngine())(
        combination, image, TEMPORARY, verify.decode(HOLDS)
    )
    assert problems, f"pytest exit {returncode} passed the gate"
    assert problems[0] == "smoke suites (cpu) failed:" and len(problems) >= 2 and all(problems[1:]), problems
    if not stderr and returncode in (5, -11, 137):
        assert f"pytest exited with status {returncode}" in problems[1], problems


# --- GPUs: --require-gpu, and NCCL over every visible GPU ----------------------------------------------------


def run_gpu_suite(
    tmp_path: Path,
    runtime: tuple[Combination, Image],
    module: str,
    facts: Raw,
    suites: tuple[str, ...],
    require_gpu: bool = False,
    python_exe: str = "python",
) -> tuple[int, dict[str, str]]:
    """The suites of one module on this machine, as `build.py test` runs them: exit status and JUnit results."""
    combination, image = runtime
    options = runner.SmokeOptions(suites=suites, require_gpu=require_gpu, python_exe=python_exe)
    junit = tmp_path / "junit.xml"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "SUITES_PACKAGE", f"torchimages.smoke.suites.{module}")
        result = runner.run_suites(
            "local://", image_document(combination, image, TEMPORARY), options, junit, True, facts
        )
    return result.returncode, results(junit)


NO_GPU = {**HOLDS, "cuda_available": False, "device_count": 0, "devices": [], "driver_library_loadable": False}


@pytest.mark.parametrize("require_gpu", [True, False])
def test_require_gpu_without_a_usable_gpu_fails_and_never_skips(
    tmp_path: Path, runtime: tuple[Combination, Image], require_gpu: bool
) -> None:
    code, found = run_gpu_suite(tmp_path, runtime, "test_gpu", NO_GPU, ("gpu",), require_gpu=require_gpu)
    gpu_tests = {name: result for name, result in found.items() if name != "test_dev_shm_is_large_enough"}
    assert gpu_tests, found
    if require_gpu:
        assert code == 1 and set(gpu_tests.values()) == {"failed"}, found
    else:
        assert code == 0 and set(gpu_tests.values()) == {"skipped"}, found
    code, found = run_gpu_suite(tmp_path, runtime, "test_multi_gpu", NO_GPU, ("multi_gpu",), require_gpu=require_gpu)
    assert found and set(found.values()) == ({"failed"} if require_gpu else {"skipped"}), found
    assert code == (1 if require_gpu else 0)


CASES = [f"{size}-{dtype}" for size in ("4KiB", "1MiB", "256MiB") for dtype in ("fp32", "bf16")]
CASE = {"mismatches": 0, "numel": 1024, "time_us": 10.0, "algbw_GBps": 1.0, "busbw_GBps": 1.0}


def nccl_payload(world: int, devices: list[int]) -> dict[str, Any]:
    """What the NCCL probe prints: `world` ranks asked for, one report per device in `devices`."""
    ranks = [
        {"rank": n, "device": "NVIDIA H200", "device_index": d, "cases": dict.fromkeys(CASES, CASE)}
        for n, d in enumerate(devices)
    ]
    return {"world_size": world, "nccl": [2, 27, 3], "env": {}, "ranks": ranks}


# What NCCL_DEBUG=INFO says of the IB transport on a machine without an adapter (the verbs userspace loaded).
IB_NO_DEVICE = "node:1:1 [0] NCCL INFO NET/IB : No device found."


@pytest.fixture
def fake_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """A `python` for the probes that prints the log, then the payload it is given (the NCCL probe's, here)."""
    script = tmp_path / "python"
    script.write_text('#!/bin/sh\nprintf "%s\\n" "$FAKE_PROBE_LOG"\nprintf "SMOKE_JSON:%s\\n" "$FAKE_PROBE_PAYLOAD"\n')
    script.chmod(0o755)

    def answering(payload: dict[str, Any], log: str = IB_NO_DEVICE) -> str:
        monkeypatch.setenv("FAKE_PROBE_PAYLOAD", json.dumps(payload))
        monkeypatch.setenv("FAKE_PROBE_LOG", log)
        return str(script)

    return answering


def gpus(count: int) -> Raw:
    devices = [{"name": "NVIDIA H200", "capability": [9, 0]}] * count
    return {**HOLDS, "cuda_available": True, "device_count": count, "devices": devices}


def test_an_nccl_run_over_every_visible_gpu_passes(
    tmp_path: Path, runtime: tuple[Combination, Image], fake_python: Callable[[dict[str, Any]], str]
) -> None:
    python = fake_python(nccl_payload(4, [0, 1, 2, 3]))
    code, found = run_gpu_suite(tmp_path, runtime, "test_multi_gpu", gpus(4), ("multi_gpu",), python_exe=python)
    assert code == 0 and set(found.values()) == {"passed"} and len(found) == 8, found


def test_an_nccl_that_cannot_open_libibverbs_fails(
    tmp_path: Path, runtime: tuple[Combination, Image], fake_python: Callable[..., str]
) -> None:
    log = "node:1:1 [0] NCCL INFO Failed to open libibverbs.so[.1]\nnode:1:1 [0] NCCL INFO Using network Socket"
    python = fake_python(nccl_payload(2, [0, 1]), log)
    code, found = run_gpu_suite(tmp_path, runtime, "test_multi_gpu", gpus(2), ("multi_gpu",), python_exe=python)
    assert code == 1 and [n for n, r in found.items() if r != "passed"] == ["test_nccl_finds_its_ib_transport_library"]


def test_an_nccl_run_with_a_wrong_sum_fails(
    tmp_path: Path, runtime: tuple[Combination, Image], fake_python: Callable[[dict[str, Any]], str]
) -> None:
    payload = nccl_payload(2, [0, 1])
    payload["ranks"][1]["cases"] = {**payload["ranks"][1]["cases"], "1MiB-bf16": {**CASE, "mismatches": 3}}
    python = fake_python(payload)
    code, found = run_gpu_suite(tmp_path, runtime, "test_multi_gpu", gpus(2), ("multi_gpu",), python_exe=python)
    assert code == 1 and found["test_all_reduce_exact_sum[1MiB-bf16]"] == "failed", found
    assert [name for name, result in found.items() if result != "passed"] == ["test_all_reduce_exact_sum[1MiB-bf16]"]


@pytest.mark.parametrize(
    ("world", "devices", "visible"),
    [
        (1, [0], 4),  # world size 1 on a 4-GPU host: it did not follow the visible GPUs
        (2, [0, 1], 4),
        (4, [0, 1, 2], 4),  # fewer ranks reported than the world size
        (4, [0, 0, 1, 1], 4),  # four ranks, two devices
        (1, [0, 1], 2),  # two ranks, the run's world size 1: each summed its own tensor alone
    ],
)
def test_an_nccl_run_without_one_rank_per_visible_gpu_fails(
    tmp_path: Path,
    runtime: tuple[Combination, Image],
    fake_python: Callable[[dict[str, Any]], str],
    world: int,
    devices: list[int],
    visible: int,
) -> None:
    python = fake_python(nccl_payload(world, devices))
    code, found = run_gpu_suite(tmp_path, runtime, "test_multi_gpu", gpus(visible), ("multi_gpu",), python_exe=python)
    assert code == 1, found
    assert found["test_all_reduce_spans_several_gpus"] in ("failed", "error"), found
    if len(devices) < world:  # a rank that did not report: no all_reduce result of the run counts
        assert "passed" not in found.values(), found


# --- the NCCL probe itself: one rank per GPU torch sees ------------------------------------------------------


@pytest.fixture
def nccl_probe(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """scripts/nccl_allreduce.py, imported with a stand-in `torch` (no torch here)."""
    torch = types.ModuleType("torch")
    cuda = types.SimpleNamespace(device_count=lambda: 3, nccl=types.SimpleNamespace(version=lambda: (2, 27, 3)))
    torch.__dict__.update(cuda=cuda, float32="float32", bfloat16="bfloat16", Tensor=object, device=object)
    distributed = types.ModuleType("torch.distributed")
    multiprocessing = types.ModuleType("torch.multiprocessing")
    spawn = types.ModuleType("torch.multiprocessing.spawn")
    spawn.__dict__["spawn"] = lambda *a, **k: None
    torch.__dict__.update(distributed=distributed, multiprocessing=multiprocessing)
    for name, module in {
        "torch": torch,
        "torch.distributed": distributed,
        "torch.multiprocessing": multiprocessing,
        "torch.multiprocessing.spawn": spawn,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    probe = types.ModuleType("nccl_allreduce_probe")
    exec(compile(probe_source("nccl_allreduce"), "nccl_allreduce.py", "exec"), probe.__dict__)
    yield probe


def test_the_nccl_probe_starts_one_rank_per_visible_gpu(
    nccl_probe: types.ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    started: list[dict[str, Any]] = []

    def spawn(worker: Any, args: tuple[Any, ...], nprocs: int, join: bool) -> None:
        started.append({"nprocs": nprocs, "world": args[0]})
        for rank in range(nprocs):
            Path(args[2], f"rank{rank}.json").write_text(json.dumps({"rank": rank, "device_index": rank}))

    nccl_probe.spawn = spawn  # type: ignore[attr-defined]
    nccl_probe.main()
    payload = json.loads(capsys.readouterr().out.split("SMOKE_JSON:", 1)[1])
    assert started == [{"nprocs": 3, "world": 3}]
    assert payload["world_size"] == 3 and [r["rank"] for r in payload["ranks"]] == [0, 1, 2]
    assert payload["nccl"] == [2, 27, 3]


# The throughput probe's answer on an H200 (issue 21's container figures), on cuDNN.
FIGURES = {"gemm_bf16_tflops": 761.0, "conv_fp16_img_s": 143200.0, "amp_step_img_s": 22800.0, "h2d_pinned_gb_s": 55.2}
# Each process's three repeats of each figure (the fake answers every process alike).
SAMPLES = {name: [value * 0.98, value, value * 1.01] for name, value in FIGURES.items()}
CUDNN: dict[str, Any] = {"available": True, "enabled": True, "version": 91900, "conv_ops": ["aten::cudnn_convolution"]}
THROUGHPUT: dict[str, Any] = {
    "gpu": "NVIDIA H200",
    "metrics": FIGURES,
    "samples": SAMPLES,
    "cudnn": CUDNN,
    "pinned": True,
}


def test_throughput_figures_are_written_for_the_host_and_held_to_the_floors(
    tmp_path: Path, runtime: tuple[Combination, Image], fake_python: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "host.json"
    monkeypatch.setenv("TORCHIMAGES_THROUGHPUT_OUT", str(out))
    python = fake_python(THROUGHPUT, "")
    code, found = run_gpu_suite(tmp_path, runtime, "test_gpu_throughput", gpus(1), ("gpu",), python_exe=python)
    assert code == 0, found
    assert found == {
        "test_throughput_figures": "passed",
        "test_convolution_runs_on_cudnn": "passed",
        "test_throughput_floors": "passed",
        "test_throughput_equals_the_hosts": "skipped",
    }
    written = json.loads(out.read_text())
    assert written["gpu"] == "NVIDIA H200"  # the probe's GPU: a container run on another model is refused
    assert written["metrics"] == FIGURES
    assert written["samples"] == {name: values * 3 for name, values in SAMPLES.items()}  # three processes' samples


def test_a_slower_container_than_the_host_or_a_conv_off_cudnn_fails(
    tmp_path: Path, runtime: tuple[Combination, Image], fake_python: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    host = tmp_path / "host.json"
    host.write_text(
        json.dumps({"gpu": "NVIDIA H200", "samples": {**SAMPLES, "amp_step_img_s": [39000.0, 40000.0, 41000.0]}})
    )
    monkeypatch.setenv("TORCHIMAGES_THROUGHPUT_REFERENCE", str(host))
    slow = {**THROUGHPUT, "cudnn": {**CUDNN, "conv_ops": ["aten::_slow_conv2d_forward"]}}
    slow["metrics"] = {**FIGURES, "gemm_bf16_tflops": 300.0}
    slow["samples"] = {**SAMPLES, "gemm_bf16_tflops": [300.0, 301.0, 299.0]}
    code, found = run_gpu_suite(
        tmp_path, runtime, "test_gpu_throughput", gpus(1), ("gpu",), python_exe=fake_python(slow, "")
    )
    assert code == 1
    assert found == {
        "test_throughput_figures": "passed",
        "test_convolution_runs_on_cudnn": "failed",
        "test_throughput_floors": "failed",  # 300 TFLOP/s under the H200's floor
        "test_throughput_equals_the_hosts": "failed",  # and under the host's, as the AMP step is
    }
    message = failure_message(tmp_path / "junit.xml", "test_throughput_equals_the_hosts")
    assert "beyond the host's own spread" in message and "here median 300.0 TFLOP/s of 9" in message
    assert "the host: median 761.0 TFLOP/s of 3 (745.8 TFLOP/s to 768.6 TFLOP/s, spread 3%)" in message


def test_the_hosts_figures_of_another_gpu_model_fail_parity(
    tmp_path: Path, runtime: tuple[Combination, Image], fake_python: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host's reference was taken on an H100; this run's probe says H200: nothing is compared, parity fails."""
    host = tmp_path / "host.json"
    host.write_text(json.dumps({"gpu": "NVIDIA H100 80GB HBM3", "samples": SAMPLES}))
    monkeypatch.setenv("TORCHIMAGES_THROUGHPUT_REFERENCE", str(host))
    code, found = run_gpu_suite(
        tmp_path, runtime, "test_gpu_throughput", gpus(1), ("gpu",), python_exe=fake_python(THROUGHPUT, "")
    )
    assert code == 1 and found["test_throughput_equals_the_hosts"] == "failed", found
    message = failure_message(tmp_path / "junit.xml", "test_throughput_equals_the_hosts")
    assert "the reference was measured on NVIDIA H100 80GB HBM3, this run on NVIDIA H200" in message


# --- GPU architectures: every visible GPU covered by torch's list and by the image's label ---------------------

CU126_ARCHS = "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"  # 2.8.0+cu126's list, which its label promises


def archs_payload(capability: list[int], arch_list: str) -> dict[str, Any]:
    """The GPU probe's `_archs` answer for one GPU of `capability`, torch built for `arch_list`."""
    devices = [{"index": 0, "name": "NVIDIA GPU", "capability": capability}]
    return {"_archs": {"arch_list": arch_list.split(), "devices": devices}}


def failure_message(junit: Path, name: str) -> str:
    case = next(c for c in ElementTree.parse(junit).iter("testcase") if c.get("name", "").startswith(name))
    return next((child.get("message") or "" for child in case if child.tag == "failure"), "")


ARCH_TESTS = ("test_torch_arch_list_covers_every_gpu", "test_archs_label_covers_every_gpu")


@pytest.mark.parametrize(
    ("capability", "arch_list", "torch_result", "label_result"),
    [
        ([9, 0], CU126_ARCHS, "passed", "passed"),  # an H200 runs the cu126 build
        ([12, 0], CU126_ARCHS, "failed", "failed"),  # an RTX 5090 does not
        ([12, 0], CU126_ARCHS + " sm_120", "passed", "failed"),  # torch holds sm_120, the label does not promise it
        ([13, 0], CU126_ARCHS + " compute_90", "passed", "failed"),  # PTX of 9.0: the driver compiles it
    ],
)
def test_every_visible_gpu_must_be_covered_by_torchs_list_and_the_label(
    tmp_path: Path,
    runtime: tuple[Combination, Image],
    fake_python: Callable[..., str],
    capability: list[int],
    arch_list: str,
    torch_result: str,
    label_result: str,
) -> None:
    assert runtime[1].label_map()["io.torchimages.cuda.archs"] == CU126_ARCHS
    python = fake_python(archs_payload(capability, arch_list), "")
    _, found = run_gpu_suite(tmp_path, runtime, "test_gpu", gpus(1), ("gpu",), python_exe=python)
    assert (found[ARCH_TESTS[0]], found[ARCH_TESTS[1]]) == (torch_result, label_result), found
    if torch_result == "failed":
        said = failure_message(tmp_path / "junit.xml", ARCH_TESTS[0])
        assert (
            f"GPU 0 NVIDIA GPU (capability 12.0) is not covered by torch.cuda.get_arch_list() ({CU126_ARCHS})" in said
        )
    if label_result == "failed":
        said = failure_message(tmp_path / "junit.xml", ARCH_TESTS[1])
        assert "is not covered by the label io.torchimages.cuda.archs (sm_50 sm_60" in said


def test_a_probe_without_the_architectures_fails_saying_so(
    tmp_path: Path, runtime: tuple[Combination, Image], fake_python: Callable[..., str]
) -> None:
    python = fake_python({"_archs": {"error": "RuntimeError: CUDA error: unknown error"}}, "")
    _, found = run_gpu_suite(tmp_path, runtime, "test_gpu", gpus(1), ("gpu",), python_exe=python)
    assert (found[ARCH_TESTS[0]], found[ARCH_TESTS[1]]) == ("failed", "failed"), found
    said = failure_message(tmp_path / "junit.xml", ARCH_TESTS[0])
    assert "could not read them: RuntimeError: CUDA error: unknown error" in said


# --- GPU suites one at a time ----------------------------------------------------------------------------------


@pytest.mark.parametrize("gpu_runtime", [True, False])
def test_suites_on_the_gpus_never_run_at_once(
    monkeypatch: pytest.MonkeyPatch, runtime: tuple[Combination, Image], gpu_runtime: bool
) -> None:
    """Two images' gates called at once (devel's checks beside runtime's, --jobs): where the containers get the
    GPUs, the second suite starts only after the first ended (their throughput figures would halve each other);
    without GPUs they may run together."""
    import threading

    inside, most, both_in = [0], [0], threading.Event()
    lock = threading.Lock()

    def suites(*args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            if inside[0] == 2:
                both_in.set()
        both_in.wait(timeout=0.5)  # without GPUs both are inside here; with them, the first waits in vain
        with lock:
            inside[0] -= 1
        return subprocess.CompletedProcess([], 0, "", "")

    monkeypatch.setattr(runner, "run_suites_in_container", suites)
    engine = FakeEngine()
    engine.gpu_runtime = gpu_runtime
    gate = runner.smoke_gate(runner.SmokeOptions(suites=("cpu",)), engine)
    combination, image = runtime
    threads = [
        threading.Thread(target=gate, args=(combination, image, TEMPORARY, verify.decode(HOLDS))) for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] == (1 if gpu_runtime else 2), most


@pytest.mark.parametrize("gpu_runtime", [True, False])
def test_a_suite_waiting_for_the_gpus_says_so_and_starts_its_clock_only_once_it_holds_them(
    monkeypatch: pytest.MonkeyPatch, runtime: tuple[Combination, Image], gpu_runtime: bool
) -> None:
    """The smoke phase's seconds start at `started` (builder.py): a second image's gate calls `waiting` while the
    first's suites hold the GPUs, and `started` only after they ended; without GPUs, neither waits."""
    import threading

    first_in, first_may_end, said = threading.Event(), threading.Event(), []

    def suites(*args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if not first_in.is_set():
            first_in.set()
            first_may_end.wait(timeout=10)
            said.append("first ended")
        return subprocess.CompletedProcess([], 0, "", "")

    monkeypatch.setattr(runner, "run_suites_in_container", suites)
    engine = FakeEngine()
    engine.gpu_runtime = gpu_runtime
    gate = runner.smoke_gate(runner.SmokeOptions(suites=("cpu",)), engine)
    combination, image = runtime
    facts = verify.decode(HOLDS)
    first = threading.Thread(target=gate, args=(combination, image, TEMPORARY, facts))
    first.start()
    assert first_in.wait(timeout=10)
    start = overlap.SmokeStart(waiting=lambda: said.append("waiting"), started=lambda: said.append("started"))
    second = threading.Thread(target=gate, args=(combination, image, TEMPORARY, facts, start))
    second.start()
    if gpu_runtime:
        for _ in range(200):  # until the second gate found the GPUs held
            if said:
                break
            threading.Event().wait(0.01)
    else:
        second.join(timeout=10)
    first_may_end.set()
    first.join(timeout=10)
    second.join(timeout=10)
    assert said == (["waiting", "first ended", "started"] if gpu_runtime else ["started", "first ended"]), said
