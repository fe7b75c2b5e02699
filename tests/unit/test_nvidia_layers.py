"""NVIDIA's libraries in several layers (render.NVIDIA_GROUPS): the rendered step script's own functions (the
Dockerfile's nvidia steps, as it names them), run with a uv that answers literal `uv pip compile` outputs,
install each nvidia-* pin exactly once; a group torch pins nothing of installs nothing; the last step fails
where torch pins no nvidia-* at all; no layer of a default-matrix CUDA line is near 1.5 GB (literal installed
sizes)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from torchimages import render
from torchimages.planning import plan

# What `uv pip compile` of torch prints (--no-header --no-annotate), with each nvidia-* wheel's installed size (MB).
# torch 2.14.1+cu130: the unzipped sizes of the pinned wheels (Python's zipfile, 2026-12-04).
CU130 = {
    "nvidia-cudnn-cu13==9.24.0.43": 966,
    "nvidia-cublas==13.1.1.3": 597,
    "nvidia-cufft==12.0.0.61": 288,
    "nvidia-nccl-cu13==2.30.7": 253,
    "nvidia-cusolver==12.0.4.66": 245,
    "nvidia-cusparselt-cu13==0.8.1": 234,
    "nvidia-cuda-nvrtc==13.0.88": 228,
    "nvidia-cusparse==12.6.3.3": 163,
    "nvidia-curand==10.4.0.35": 135,
    "nvidia-nvjitlink==13.4.92": 104,
    "nvidia-nvshmem-cu13==3.4.5": 81,
    "nvidia-cuda-cupti==13.0.85": 45,
    "nvidia-cuda-runtime==13.0.96": 7,
    "nvidia-cufile==1.15.1.6": 3,
    "nvidia-nvtx==13.0.85": 1,
}
# A CUDA 12.x bound: each family's largest cu12 wheel on PyPI (2026-12-04) times that family's unzip ratio measured
# on the cu13 wheels above (cuDNN 1.75, cuBLAS 1.41, NCCL 1.17, ...); larger than any default-matrix cu12x pin.
CU12_BOUND = {
    "nvidia-cudnn-cu12==9.24.1.1": 1398,
    "nvidia-cublas-cu12==12.8.3.14": 860,
    "nvidia-nccl-cu12==2.32.3": 411,
    "nvidia-nvshmem-cu12==3.8.0": 376,
    "nvidia-curand-cu12==10.3.10.19": 154,
    "nvidia-cufft-cu12==11.2.1.3": 283,
    "nvidia-cusparse-cu12==12.5.10.65": 410,
    "nvidia-cusparselt-cu12==0.7.1": 396,
    "nvidia-cusolver-cu12==11.7.5.82": 413,
    "nvidia-cuda-nvrtc-cu12==12.9.86": 227,
    "nvidia-nvjitlink-cu12==12.9.41": 97,
    "nvidia-cuda-cupti-cu12==12.1.62": 60,
    "nvidia-cuda-runtime-cu12==12.9.79": 10,
    "nvidia-cufile-cu12==1.14.1.1": 3,
    "nvidia-nvtx-cu12==12.9.79": 1,
}
# torch 2.7.x+cu118 (no NVSHMEM, cuSPARSELt, nvJitLink or cuFile wheels: those groups install nothing).
CU118 = {
    "nvidia-cudnn-cu11==9.1.0.70": 1160,
    "nvidia-cublas-cu11==11.11.3.6": 589,
    "nvidia-nccl-cu11==2.21.5": 173,
    "nvidia-curand-cu11==10.3.0.86": 131,
    "nvidia-cufft-cu11==10.9.0.58": 226,
    "nvidia-cusparse-cu11==11.7.5.86": 229,
    "nvidia-cusolver-cu11==11.4.1.48": 156,
    "nvidia-cuda-nvrtc-cu11==11.8.89": 59,
    "nvidia-cuda-cupti-cu11==11.8.87": 55,
    "nvidia-cuda-runtime-cu11==11.8.89": 3,
    "nvidia-nvtx-cu11==11.8.86": 1,
}
OTHERS = ("torch==2.14.1+cu130", "triton==3.6.0", "sympy==1.14.0", "cuda-toolkit==13.0.3.0", "filelock==3.20.0")
LIMIT_MB = 1500


# A stand-in for uv: `pip compile` reads its input (as uv does) and prints the resolution (the file $RESOLUTION),
# `pip install` prints each requirement it is given as `install PIN`.
FAKE_UV = """#!/bin/bash
if [ "$1 $2" = "pip compile" ]; then cat > /dev/null; cat "$RESOLUTION"; exit 0; fi
for arg in "${@:3}"; do case "$arg" in -*|/*) ;; *) echo "install $arg" ;; esac; done
"""


@pytest.fixture(scope="module")
def steps(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str, Path]]:
    """Each nvidia-* step of the rendered Dockerfile: (venv.sh function, its families, the rendered venv.sh)."""
    folder = tmp_path_factory.mktemp("matrix")
    path = folder / "matrix.yaml"
    path.write_text("matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0', os: debian12}\n")
    rendered = render.render_all(plan.load(path).combinations, render.DEFAULT_TEMPLATES)
    for name, text in rendered.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (dockerfile,) = (p for p in rendered if p.endswith("/Dockerfile"))
    venv = (folder / dockerfile).parent / "steps" / "venv.sh"
    found = re.findall(r"bash /mnt/venv\.sh (nvidia|nvidia-rest) '([^']*)'", rendered[dockerfile])
    (folder / "uv").write_text(FAKE_UV)
    (folder / "uv").chmod(0o755)
    return [(step.replace("-", "_"), families, venv) for step, families in found]


def run_step(step: tuple[str, str, Path], resolution: list[str]) -> tuple[int, list[str], str]:
    """The rendered venv.sh's step function under bash, with a uv that resolves to `resolution`."""
    function, families, venv = step
    folder = venv.parents[2]
    (folder / "resolution.txt").write_text("".join(f"{line}\n" for line in resolution))
    script = f'source "{venv}"; uv="{folder}/uv"; {function} "{families}" "torch==2.14.1"'
    done = subprocess.run(
        [shutil.which("bash") or "bash", "-c", script],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "RESOLUTION": str(folder / "resolution.txt")},
    )
    return done.returncode, [line.removeprefix("install ") for line in done.stdout.splitlines()], done.stderr


def layers(steps: list[tuple[str, str, Path]], pins: dict[str, int]) -> list[list[str]]:
    resolution = [*OTHERS[:2], *sorted(pins), *OTHERS[2:]]
    out = []
    for step in steps:
        code, installed, err = run_step(step, resolution)
        assert code == 0, err
        out.append(installed)
    return out


def test_five_nvidia_steps_the_groups_then_the_rest(steps: list[tuple[str, str, Path]]) -> None:
    assert len(steps) == len(render.NVIDIA_GROUPS) + 1 == 5


@pytest.mark.parametrize("pins", [CU130, CU12_BOUND, CU118], ids=["cu130", "cu12-bound", "cu118"])
def test_each_nvidia_pin_is_installed_once_and_nothing_else(
    steps: list[tuple[str, str, Path]], pins: dict[str, int]
) -> None:
    found = layers(steps, pins)
    installed = [pin for layer in found for pin in layer]
    assert sorted(installed) == sorted(pins)


def test_the_groups_as_chosen(steps: list[tuple[str, str, Path]]) -> None:
    assert layers(steps, CU130) == [
        ["nvidia-cudnn-cu13==9.24.0.43"],
        ["nvidia-cublas==13.1.1.3"],
        [
            "nvidia-cufft==12.0.0.61",
            "nvidia-curand==10.4.0.35",
            "nvidia-nccl-cu13==2.30.7",
            "nvidia-nvshmem-cu13==3.4.5",
        ],
        ["nvidia-cusparse==12.6.3.3", "nvidia-cusparselt-cu13==0.8.1"],
        [
            "nvidia-cuda-cupti==13.0.85",
            "nvidia-cuda-nvrtc==13.0.88",
            "nvidia-cuda-runtime==13.0.96",
            "nvidia-cufile==1.15.1.6",
            "nvidia-cusolver==12.0.4.66",
            "nvidia-nvjitlink==13.4.92",
            "nvidia-nvtx==13.0.85",
        ],
    ]


def test_a_family_is_matched_by_its_whole_name(steps: list[tuple[str, str, Path]]) -> None:
    """`cusparse` is not `cusparselt`, `cublas` not a `cublasmp`; pip's spellings of a name (`_`, `.`, capitals) are."""
    venv = steps[0][2]

    def pattern(families: str) -> re.Pattern[str]:
        script = f'source "{venv}"; families "{families}"'
        done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
        return re.compile(done.stdout.strip(), re.IGNORECASE)  # grep -E's syntax here is Python's too

    cusparse, cublas = pattern("cusparse"), pattern("cublas")
    assert cusparse.match("nvidia-cusparse-cu12==12.5.4.2") and cusparse.match("NVIDIA_CUSPARSE==12.6.3.3")
    assert not cusparse.match("nvidia-cusparselt-cu12==0.6.3")
    assert cublas.match("nvidia.cublas.cu11==11.11.3.6") and not cublas.match("nvidia-cublasmp-cu12==0.4.0")
    assert pattern("nccl nvshmem").match("nvidia-nvshmem-cu13==3.4.5")


@pytest.mark.parametrize("pins", [CU130, CU12_BOUND, CU118], ids=["cu130", "cu12-bound", "cu118"])
def test_no_nvidia_layer_is_near_the_limit(steps: list[tuple[str, str, Path]], pins: dict[str, int]) -> None:
    sizes = [sum(pins[pin] for pin in layer) for layer in layers(steps, pins)]
    assert max(sizes) < LIMIT_MB, sizes


def test_a_group_torch_pins_nothing_of_installs_nothing_and_does_not_fail(steps: list[tuple[str, str, Path]]) -> None:
    code, installed, _ = run_step(steps[3], [*OTHERS, "nvidia-cudnn-cu11==9.1.0.70"])  # cuSPARSE: none
    assert (code, installed) == (0, [])


def test_the_last_step_fails_where_torch_pins_no_nvidia_library(steps: list[tuple[str, str, Path]]) -> None:
    code, installed, err = run_step(steps[-1], list(OTHERS))
    assert code == 1 and installed == []
    assert "torchimages: error: torch's resolution pins no nvidia-* library" in err
    code, installed, _ = run_step(steps[-1], [*OTHERS, "nvidia-cudnn-cu13==9.24.0.43"])  # every pin taken before
    assert (code, installed) == (0, [])


def test_the_groups_shape_the_input_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    before = render.template_fingerprint(render.DEFAULT_TEMPLATES)
    monkeypatch.setattr(render, "NVIDIA_GROUPS", (("cudnn",),))
    assert render.template_fingerprint(render.DEFAULT_TEMPLATES) != before
