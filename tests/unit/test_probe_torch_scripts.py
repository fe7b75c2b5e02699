"""The probe scripts that need torch (gpu_checks, multi_node, nccl_allreduce, throughput, torch_compile,
cuda_extension), on this host as the image runs them: every script compiles and prints the mark `parse_payload`
reads; without torch none prints an answer that could pass (a missing torch is a failure, never an `ok`);
cuda_extension finds nvcc as torch does and says its import error as JSON. Their CPU parts run where torch is
installed in this environment, their GPU parts where a GPU is: each skipped, said, otherwise."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import subprocess
import sys
import types
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from torchimages.probes import MARK, SCRIPTS_FOLDER, SCRIPTS_PACKAGE, parse_payload, probe_source

SCRIPTS = sorted(
    entry.name.removesuffix(".py")
    for entry in (resources.files(SCRIPTS_PACKAGE) / SCRIPTS_FOLDER).iterdir()
    if entry.name.endswith(".py")
)
TORCH_AT_IMPORT = ("gpu_checks", "multi_node", "nccl_allreduce", "throughput", "torch_compile")
HAS_TORCH = importlib.util.find_spec("torch") is not None
NO_TORCH = "torch is not installed in this environment (.venv): the scripts' torch parts are not run here"
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason=NO_TORCH)


def gpu() -> bool:
    if not HAS_TORCH:
        return False
    torch: Any = importlib.import_module("torch")

    return bool(torch.cuda.is_available())


def test_every_script_is_found() -> None:
    assert {*TORCH_AT_IMPORT, "cuda_extension", "facts", "platform", "venv_install", "cuda_archs"} <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_script_compiles_and_prints_the_mark_that_is_read(name: str) -> None:
    tree = ast.parse(probe_source(name), f"{name}.py")
    marks = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [getattr(t, "id", None) for t in node.targets] == ["MARK"]
        and isinstance(node.value, ast.Constant)
    ]
    assert marks == [MARK], f"{name}.py: its MARK is not {MARK!r}"
    compile(tree, f"{name}.py", "exec")


def run(name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", probe_source(name), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env or dict(os.environ),
    )


@pytest.mark.parametrize("name", TORCH_AT_IMPORT)
def test_without_torch_a_script_gives_no_answer_that_could_pass(name: str) -> None:
    if HAS_TORCH:
        pytest.skip("torch is installed here: its absence cannot be seen")
    done = run(name)
    assert done.returncode != 0 and parse_payload(done.stdout) is None
    assert "ModuleNotFoundError: No module named 'torch'" in done.stderr


# --- cuda_extension: torch imported only to build ------------------------------------------------------------


@pytest.fixture(scope="module")
def extension() -> types.ModuleType:
    module = types.ModuleType("cuda_extension_probe")
    exec(compile(probe_source("cuda_extension"), "cuda_extension.py", "exec"), module.__dict__)
    return module


def made_up_nvcc(folder: Path, executable: bool = True) -> Path:
    nvcc = folder / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\necho made-up nvcc\n")
    nvcc.chmod(0o755 if executable else 0o644)
    return nvcc


def test_nvcc_is_found_in_cuda_home_first_then_on_path(
    extension: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = made_up_nvcc(tmp_path / "cuda")
    on_path = made_up_nvcc(tmp_path / "path")
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert extension.find_nvcc() == str(home)
    monkeypatch.delenv("CUDA_HOME")
    assert extension.find_nvcc() == str(on_path)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "absent"))
    assert extension.find_nvcc() == str(on_path)  # a CUDA_HOME without nvcc is passed over


def test_an_nvcc_that_cannot_run_is_none(
    extension: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made_up_nvcc(tmp_path / "cuda", executable=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    found = extension.find_nvcc()
    assert found != str(tmp_path / "cuda" / "bin" / "nvcc")
    assert found is None or found == "/usr/local/cuda/bin/nvcc"  # this host's own toolkit, where it has one


def test_the_extension_without_torch_says_its_import_error_and_fails(tmp_path: Path) -> None:
    if HAS_TORCH:
        pytest.skip("torch is installed here: its absence cannot be seen")
    build = tmp_path / "build"
    done = run("cuda_extension", "--build-only", "--build-dir", str(build))
    found: Any = parse_payload(done.stdout)
    assert done.returncode == 1 and isinstance(found, dict), done.stderr[-2000:]
    assert found["built"] is False and found["ran"] is False
    assert found["error"] == "ModuleNotFoundError: No module named 'torch'"
    assert build.is_dir()  # a build folder given is kept


# --- the CPU parts, where torch is installed ------------------------------------------------------------------


def load(name: str) -> types.ModuleType:
    module = types.ModuleType(f"{name}_probe")
    exec(compile(probe_source(name), f"{name}.py", "exec"), module.__dict__)
    return module


@needs_torch
def test_the_collectives_inputs_are_exact_small_integers_without_zero() -> None:
    """What each rank all-reduces: integers in [-8, -1] u [1, 8], the same for a rank wherever it is rebuilt, and
    any sum of 8 ranks exact in bf16 (a wrong sum is a wrong reduction, never rounding)."""
    torch: Any = importlib.import_module("torch")
    cpu = torch.device("cpu")
    multi_node, nccl = load("multi_node"), load("nccl_allreduce")

    def made(name: str, rank: int) -> Any:
        return multi_node.rank_input(rank, 1, 4096) if name == "multi_node" else nccl.rank_input(rank, 1, 4096, cpu)

    for name in ("multi_node", "nccl_allreduce"):

        def rank_input(rank: int, name: str = name) -> Any:
            return made(name, rank)

        values = rank_input(3)
        assert values.dtype == torch.float32 and bool((values != 0).all()), name
        assert bool((values.abs() <= 8).all()) and bool((values == values.round()).all()), name
        assert torch.equal(values, rank_input(3)) and not torch.equal(values, rank_input(4)), name
        summed: Any = sum(rank_input(rank) for rank in range(8))
        assert torch.equal(summed.to(torch.bfloat16).float(), summed), name


@needs_torch
def test_the_relative_error_is_against_the_references_largest_value() -> None:
    torch: Any = importlib.import_module("torch")

    checks = load("gpu_checks")
    reference = torch.tensor([1.0, -4.0, 2.0], dtype=torch.float64)
    assert checks.relative_error(torch.tensor([1.0, -4.0, 2.5]), reference) == pytest.approx(0.125)
    assert checks.relative_error(reference.float(), reference) == 0.0
    assert bool((checks.random_tensor((64,), torch.int32) != 0).all())


@needs_torch
def test_torch_compile_on_the_cpu_agrees_with_eager() -> None:
    done = run("torch_compile", "cpu")
    found: Any = parse_payload(done.stdout)
    assert done.returncode == 0 and found["compile"]["ok"] is True, (done.stdout + done.stderr)[-2000:]


@pytest.mark.skipif(not gpu(), reason="needs a GPU (torch.cuda.is_available() is False or no torch here)")
@pytest.mark.parametrize("name", ["gpu_checks", "torch_compile"])
def test_the_gpu_scripts_pass_on_this_gpu(name: str) -> None:
    done = run(name, "cuda")
    assert done.returncode == 0 and parse_payload(done.stdout) is not None, (done.stdout + done.stderr)[-2000:]
