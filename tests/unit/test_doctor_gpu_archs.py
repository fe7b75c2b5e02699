"""The doctor's GPU architectures: each local GPU's compute capability against the selected images' CUDA code,
on literal facts (the GPUs as nvidia-smi lists them, the images' lists as the knowledge base holds them), and
nvidia-smi's answer read however it comes."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchimages import doctor
from torchimages.archs import Capability
from torchimages.combination import MIN_DRIVER_LABEL
from torchimages.doctor import FAIL, OK, SKIP, WARN, GpuDevice, HostFacts, ImageNeed, Needs
from torchimages.planning import plan

ROOT = Path(__file__).resolve().parents[2]
CU126 = "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"
CU130 = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_120"
GB = doctor.GB
OLD = ImageNeed("2.6.0-cuda12.6-cudnn9-runtime", "12.6", "525.60.13", "560.35.05", 6 * GB, archs=CU126)
NEW = ImageNeed("2.14.1-cuda13.0-cudnn9-runtime", "13.0", "580.65.06", "580.65.06", 6 * GB, archs=CU130)
NEW_DEVEL = dataclasses.replace(NEW, tag="2.14.1-cuda13.0-cudnn9-devel")
CU132 = ImageNeed("2.14.1-cuda13.2-cudnn9-runtime", "13.2", "580.65.06", "595.45.04", 6 * GB, archs=CU130)
GUESSED = ImageNeed("2.15.0-cuda13.2-cudnn9-runtime", "13.2", "580.65.06", "595.45.04", 6 * GB, archs=CU130,
                    archs_uncertain=True)  # fmt: skip
UNKNOWN = ImageNeed("2.5.1-cuda12.1-cudnn9-runtime", "12.1", "525.60.13", "530.30.02", 6 * GB)
ARM64 = dataclasses.replace(NEW, platform="linux/arm64", archs="sm_80 sm_90 sm_100 sm_110 sm_120 compute_120")
CPU = ImageNeed("2.13.0-cpu-runtime", None, None, None, 2 * GB)
H200 = GpuDevice("0", "NVIDIA H200", Capability(9, 0))
RTX5090 = GpuDevice("1", "NVIDIA GeForce RTX 5090", Capability(12, 0))
FUTURE = GpuDevice("2", "NVIDIA Next", Capability(13, 0))  # newer than any cubin: PTX only
V100 = GpuDevice("3", "Tesla V100-SXM2-32GB", Capability(7, 0))


def host(*gpus: GpuDevice, driver: str = "595.45.04", **kwargs: Any) -> HostFacts:
    return HostFacts(
        driver=driver, gpus=tuple(g.name for g in gpus), gpu_devices=gpus, machine="x86_64", page_size=4096, **kwargs
    )


def need(*images: ImageNeed, matrix: tuple[ImageNeed, ...] = (), **kwargs: Any) -> Needs:
    return Needs(images, (), (), matrix_images=matrix, **kwargs)


def test_every_gpu_covered_by_a_cubin_passes_naming_it_and_the_tags() -> None:
    check = doctor.check_gpu_archs(host(H200, H200), need(NEW, NEW_DEVEL))
    assert check.status == OK
    assert check.message == ("NVIDIA H200 (9.0): sm_90 in 2.14.1-cuda13.0-cudnn9-runtime, 2.14.1-cuda13.0-cudnn9-devel")


def test_a_capability_the_image_lacks_is_refused_naming_the_gpu_and_images_that_run_there() -> None:
    """cu126 builds stop at sm_90: an RTX 5090 (12.0) has no kernel image in them."""
    check = doctor.check_gpu_archs(host(RTX5090), need(OLD, NEW))
    assert check.status == FAIL
    assert check.message == (
        "NVIDIA GeForce RTX 5090 (12.0): no kernel image in 2.6.0-cuda12.6-cudnn9-runtime; sm_120 in "
        "2.14.1-cuda13.0-cudnn9-runtime; images of the selection that run there: 2.14.1-cuda13.0-cudnn9-runtime"
    )
    assert "sm_XY" in check.fix


def test_where_none_selected_runs_the_matrix_images_that_do_are_named() -> None:
    check = doctor.check_gpu_archs(host(RTX5090), need(OLD, matrix=(NEW, GUESSED, OLD, NEW_DEVEL)))
    assert check.status == FAIL
    assert check.message.endswith(
        "none selected runs there; images of the matrix that do: 2.14.1-cuda13.0-cudnn9-runtime, "
        "2.14.1-cuda13.0-cudnn9-devel"
    )  # not the guessed list, not the one refused
    nowhere = doctor.check_gpu_archs(host(V100), need(NEW, matrix=(NEW, NEW_DEVEL)))
    assert nowhere.status == FAIL
    assert nowhere.message == (
        "Tesla V100-SXM2-32GB (7.0): no kernel image in 2.14.1-cuda13.0-cudnn9-runtime; no image of the matrix runs "
        "there"
    )


def test_ptx_only_is_a_warning_of_the_jit_at_first_use() -> None:
    check = doctor.check_gpu_archs(host(FUTURE), need(NEW))
    assert check.status == WARN
    assert check.message == (
        "NVIDIA Next (13.0): only PTX (compute_120), JIT-compiled by the driver at first use (a slow start), in "
        "2.14.1-cuda13.0-cudnn9-runtime"
    )
    assert "CUDA_CACHE_PATH" in check.fix and "test --suites gpu" not in check.fix


def test_ptx_only_under_minor_version_compatibility_fails() -> None:
    """Driver 580 runs CUDA 13.2's images under minor-version compatibility: it cannot JIT-compile their PTX."""
    check = doctor.check_gpu_archs(host(FUTURE, driver="580.159.04"), need(CU132, matrix=(NEW, CU132)))
    assert check.status == FAIL
    assert (
        "only PTX (compute_120), which driver 580.159.04, older than CUDA 13.2's 595.45.04 (minor-version "
        "compatibility) cannot JIT-compile, in 2.14.1-cuda13.2-cudnn9-runtime"
    ) in check.message
    assert check.message.endswith("images of the matrix that do: 2.14.1-cuda13.0-cudnn9-runtime")
    assert "upgrade the driver" in check.fix
    # the same driver compiles CUDA 13.0's PTX (its own toolkit driver): a warning only
    assert doctor.check_gpu_archs(host(FUTURE, driver="580.159.04"), need(NEW)).status == WARN
    # a cubin needs no JIT: minor-version compatibility does not matter
    assert doctor.check_gpu_archs(host(H200, driver="580.159.04"), need(CU132)).status == OK


@pytest.mark.parametrize("gpu", [H200, V100, FUTURE])
def test_an_uncertain_list_is_a_warning_whatever_it_says(gpu: GpuDevice) -> None:
    check = doctor.check_gpu_archs(host(gpu), need(GUESSED))
    assert check.status == WARN
    assert "by a list not verified (compat.yaml cuda_archs, confidence U)" in check.message
    assert "torchimages test --suites gpu" in check.fix


def test_no_compute_cap_is_unknown_and_skipped_not_failed() -> None:
    """Driver 470's nvidia-smi refuses the query: the capability is unknown, the check skips, saying so."""
    said = 'Field "compute_cap" is not a valid field to query.'
    facts = dataclasses.replace(host(driver="470.182.03"), gpus=("Tesla T4",), gpu_devices_error=said)
    check = doctor.check_gpu_archs(facts, need(OLD, NEW, require_gpu=True))
    assert check.status == SKIP
    assert check.message.startswith(f"compute capability unknown (nvidia-smi: {said}): not checked")
    partly = doctor.check_gpu_archs(host(H200, GpuDevice("1", "NVIDIA A100", None)), need(NEW))
    assert partly.status == OK and partly.message.endswith("| NVIDIA A100: capability unknown, not checked")


def test_several_gpus_of_different_capabilities_are_each_checked() -> None:
    check = doctor.check_gpu_archs(host(H200, RTX5090, H200, V100), need(OLD, NEW))
    assert check.status == FAIL
    parts = check.message.split(" | ")
    assert parts == [
        "NVIDIA H200 (9.0): sm_90 in 2.6.0-cuda12.6-cudnn9-runtime, 2.14.1-cuda13.0-cudnn9-runtime",
        "NVIDIA GeForce RTX 5090 (12.0): no kernel image in 2.6.0-cuda12.6-cudnn9-runtime; sm_120 in "
        "2.14.1-cuda13.0-cudnn9-runtime; images of the selection that run there: 2.14.1-cuda13.0-cudnn9-runtime",
        "Tesla V100-SXM2-32GB (7.0): sm_70 in 2.6.0-cuda12.6-cudnn9-runtime; no kernel image in "
        "2.14.1-cuda13.0-cudnn9-runtime; images of the selection that run there: 2.6.0-cuda12.6-cudnn9-runtime",
    ]


def test_images_whose_architectures_are_not_known_are_skipped_with_why() -> None:
    check = doctor.check_gpu_archs(host(H200), need(UNKNOWN))
    assert check.status == SKIP
    assert "not known for 2.5.1-cuda12.1-cudnn9-runtime: the knowledge base does not hold" in check.message
    mixed = doctor.check_gpu_archs(host(H200), need(UNKNOWN, NEW))
    assert mixed.status == OK and "sm_90 in 2.14.1-cuda13.0-cudnn9-runtime" in mixed.message
    assert "not known for 2.5.1-cuda12.1-cudnn9-runtime" in mixed.message
    garbled = dataclasses.replace(NEW, archs="sm_90 \x1b[2J")  # not a list: not known, never a traceback
    assert doctor.check_gpu_archs(host(H200), need(garbled)).status == SKIP


def test_no_gpu_cpu_images_and_foreign_images_skip() -> None:
    assert doctor.check_gpu_archs(host(H200), need(CPU)).status == SKIP
    no_gpu = doctor.check_gpu_archs(HostFacts(nvidia_smi_error="not found"), need(NEW))
    assert no_gpu.status == SKIP and "no NVIDIA GPU here (nvidia-smi: not found)" in no_gpu.message
    foreign = doctor.check_gpu_archs(host(H200), need(ARM64))
    assert foreign.status == SKIP and "linux/arm64" in foreign.message
    gh200 = dataclasses.replace(host(H200), machine="aarch64")  # the arm64 build's list on an aarch64 machine
    check = doctor.check_gpu_archs(gh200, need(NEW, ARM64))
    assert check.status == OK and check.message == "NVIDIA H200 (9.0): sm_90 in 2.14.1-cuda13.0-cudnn9-runtime"


def test_the_check_comes_after_the_driver() -> None:
    names = [c.name for c in doctor.run_checks(host(H200), need(NEW))]
    assert names.index("GPU architectures") == names.index("NVIDIA driver") + 1


# nvidia-smi's answer, as it comes


def test_nvidia_smi_devices_are_parsed() -> None:
    devices, error = doctor.parse_gpu_devices("0, NVIDIA H200, 9.0\n1, NVIDIA GeForce RTX 5090, 12.0\n")
    assert error is None
    assert devices == (H200, dataclasses.replace(RTX5090, index="1"))
    (na,), _ = doctor.parse_gpu_devices("0, Weird, GPU, [N/A]\n")
    assert na == GpuDevice("0", "Weird, GPU", None)


@pytest.mark.parametrize(
    ("output", "said"),
    [
        ("", "nvidia-smi listed no GPU"),
        ("\n \n", "nvidia-smi listed no GPU"),
        ("garbage", "is not INDEX, NAME, COMPUTE_CAP"),
        ("0, NVIDIA H200, 9.0\nx, y, 9.0\n", "'x, y, 9.0' is not INDEX, NAME, COMPUTE_CAP"),
        ("0,,9.0", "is not INDEX, NAME, COMPUTE_CAP"),
        ("0, A, 9.0\n" * 65, "65 lines, more than 64 GPUs"),
        ("\x1b[31m0, A, 9.0", "'?[31m0, A, 9.0' is not"),
    ],
)
def test_an_unreadable_nvidia_smi_answer_is_said(output: str, said: str) -> None:
    devices, error = doctor.parse_gpu_devices(output)
    assert devices == () and error is not None and said in error


def test_control_characters_and_huge_names_do_not_reach_the_line() -> None:
    (device,), _ = doctor.parse_gpu_devices("0, NVIDIA\x1b]0;owned\x07 H200" + "x" * 500 + ", 9.0\n")
    assert device.name.startswith("NVIDIA?]0;owned? H200") and len(device.name) == 100
    assert device.capability == Capability(9, 0)


@given(st.text(max_size=400))
def test_parsing_any_text_gives_devices_or_why(output: str) -> None:
    devices, error = doctor.parse_gpu_devices(output)
    assert (devices == ()) == (error is not None)
    for device in devices:
        assert device.name.isprintable() and len(device.name) <= 100 and device.index.isdigit()


FAKE_SMI = """#!/bin/sh
case "$1" in
  --query-gpu=name,driver_version) printf 'NVIDIA H200, 580.159.04\\n' ;;
  --query-gpu=index,name,compute_cap) {devices} ;;
  *) exit 9 ;;
esac
"""


def fake_smi(folder: Path, devices: str) -> Path:
    """A `nvidia-smi` on PATH whose GPU query answers with the shell text `devices`."""
    folder.mkdir(exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text(FAKE_SMI.format(devices=devices))
    script.chmod(0o755)
    return folder


@pytest.mark.parametrize(
    ("devices", "said"),
    [
        ("""echo 'Field "compute_cap" is not a valid field to query.'; echo; echo Run --help; exit 2""",
         'Field "compute_cap" is not a valid field to query. Run --help'),
        ("printf '\\377\\376 garbage\\n'", "is not INDEX, NAME, COMPUTE_CAP"),
        ("exec sleep 30", "it ran past its time limit"),
        ("exec yes '0, NVIDIA H200, 9.0'", "its output passed the limit"),
        ("exit 0", "nvidia-smi listed no GPU"),
        ("printf '\\033[2J' >&2; exit 3", "?[2J"),
    ],
)  # fmt: skip
def test_a_hostile_nvidia_smi_gives_a_reason_never_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, devices: str, said: str
) -> None:
    from torchimages.doctor import facts

    monkeypatch.setenv("PATH", f"{fake_smi(tmp_path / 'bin', devices)}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(facts, "SMI_TIMEOUT_S", 1.0)
    gathered = facts.gather(need(NEW, host_only=True))
    assert gathered.driver == "580.159.04" and gathered.gpu_devices == ()
    assert gathered.gpu_devices_error is not None and said in gathered.gpu_devices_error
    assert doctor.check_gpu_archs(gathered, need(NEW, host_only=True)).status == SKIP


def test_gather_reads_each_gpus_capability(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    smi = fake_smi(tmp_path / "bin", "printf '0, NVIDIA H200, 9.0\\n1, NVIDIA GeForce RTX 5090, 12.0\\n'")
    monkeypatch.setenv("PATH", f"{smi}{os.pathsep}{os.environ['PATH']}")
    gathered = doctor.gather(need(NEW, host_only=True))
    assert gathered.gpu_devices == (H200, RTX5090) and gathered.gpu_devices_error is None
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    gone = doctor.gather(need(NEW, host_only=True))
    assert gone.driver is None and gone.gpu_devices == () and gone.nvidia_smi_error == "not found"


def test_a_non_utf8_driver_answer_is_read_not_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\nprintf 'NVIDIA \\377 H200, 580.159.04\\n'\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    gathered = doctor.gather(need(NEW, host_only=True))
    assert gathered.gpus == ("NVIDIA \ufffd H200",) and gathered.driver == "580.159.04"


def test_the_doctor_says_an_uncovered_gpu_through_the_cli(tmp_path: Path, write_matrix: Callable[[str], Path]) -> None:
    """The real command line on a machine whose nvidia-smi lists an RTX 5090: a cu126 image is refused, the
    matrix's cu130 image named."""
    path = write_matrix(
        "matrix:\n  include:\n    - {torch: 2.14.1, cuda: '12.6', os: ubuntu24.04}\n"
        "    - {torch: 2.14.1, cuda: '13.0', os: ubuntu24.04}\n"
    )
    smi = fake_smi(tmp_path / "bin", "printf '0, NVIDIA GeForce RTX 5090, 12.0\\n'")
    env = {**os.environ, "PATH": f"{smi}{os.pathsep}{os.environ['PATH']}"}
    args = ["doctor", "--host-only", "--matrix", str(path), "2.14.1-cuda12.6-cudnn9-runtime"]
    script = f"import sys\nfrom torchimages.cli import main\nsys.exit(main({args!r}))\n"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT)
    assert result.returncode == 1, result.stdout + result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert line.split()[:3] == ["FAIL", "GPU", "architectures"]
    assert line.endswith(
        "  NVIDIA GeForce RTX 5090 (12.0): no kernel image in 2.14.1-cuda12.6-cudnn9-runtime; none selected runs "
        "there; images of the matrix that do: 2.14.1-cuda13.0-cudnn9-devel, 2.14.1-cuda13.0-cudnn9-runtime"
    )
    assert "Traceback" not in result.stderr


# what the selection needs: the knowledge base's lists and the driver floor of the labels


def test_needs_carry_each_images_architectures_for_its_platform(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(
        "matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0', os: ubuntu24.04, flavors: [runtime],"
        " platforms: [linux/amd64, linux/arm64]}\n"
        "    - {torch: 2.15.0, cuda: '13.2', os: ubuntu24.04, flavors: [runtime]}\n"
        "    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}\n"
    )
    loaded = plan.load(path)
    need = doctor.needs(plan.select(loaded, ["2.14.1"]), matrix=loaded)
    assert [(i.platform, i.archs, i.archs_uncertain) for i in need.images] == [
        ("linux/amd64", "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120", False),  # the knowledge base's: torch holds no PTX
        ("linux/arm64", "sm_80 sm_90 sm_100 sm_110 sm_120", False),
    ]
    newest_first = ["2.15.0-cuda13.2-cudnn9-runtime", "2.14.1-cuda13.0-cudnn9-runtime"]
    assert [i.tag for i in need.matrix_images][:2] == newest_first
    guessed = next(i for i in need.matrix_images if i.tag.startswith("2.15.0"))
    assert guessed.archs == "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120" and guessed.archs_uncertain
    cpu = next(i for i in need.matrix_images if i.cuda is None)
    assert cpu.archs is None
    assert doctor.needs(plan.select(loaded, ["2.14.1"])).matrix_images == ()


def test_the_driver_floor_is_the_one_the_min_driver_label_promises(write_matrix: Callable[[str], Path]) -> None:
    """`doctor` checks the driver against the value of io.torchimages.cuda.min-driver (Combination.min_driver),
    not the toolkit's own driver."""
    path = write_matrix(
        "matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.2', os: ubuntu24.04}\n"
        "    - {torch: 2.6.0, cuda: '12.6', os: ubuntu24.04}\n"
    )
    loaded = plan.load(path)
    chosen = plan.select(loaded, ["2.14.1", "2.6.0"])
    need = doctor.needs(chosen)
    labels = {image.tag: image.label_map()[MIN_DRIVER_LABEL] for s in chosen for image in s.images}
    assert {i.tag: i.min_driver for i in need.images} == labels
    assert labels["2.14.1-cuda13.2-cudnn9-runtime"] == "580.65.06"  # CUDA 13.2's floor, below its 595.45.04
    check = doctor.check_driver(host(H200, driver="590.44.01"), need)
    assert check.status == WARN  # above the label's floor: runs, under minor-version compatibility
    assert doctor.check_driver(host(H200, driver="575.57.08"), need).status == FAIL
