"""The host doctor's checks, each a pure function of gathered facts: fed fake facts here."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from torchimages import doctor
from torchimages.combination import RegistryBase
from torchimages.doctor import FAIL, OK, SKIP, WARN, BinfmtHandler, Check, HostFacts, ImageNeed, Needs
from torchimages.planning import plan

Cli = Callable[..., tuple[int, str, str]]
ROOT = Path(__file__).resolve().parents[2]
H200 = ("NVIDIA H200",)
ENGINE: dict[str, Any] = {"engine_version": "20.10.24", "engine_address": "unix:///var/run/docker.sock"}
CUDA13 = ImageNeed("2.14.1-cuda13.0-cudnn9-runtime", "13.0", "580.65.06", "580.65.06", 6 * doctor.GB)
CUDA132 = ImageNeed("2.15.0-cuda13.2-cudnn9-runtime", "13.2", "580.65.06", "595.45.04", 6 * doctor.GB)
CPU = ImageNeed("2.13.0-cpu-runtime-debian12", None, None, None, 2 * doctor.GB)
UBUNTU = RegistryBase("ubuntu:24.04", "ubuntu:24.04")


def need(*images: ImageNeed, bases: tuple[RegistryBase, ...] = (), **kwargs: Any) -> Needs:
    return Needs(images, bases, (), **kwargs)


def test_driver_580_runs_a_cuda_13_0_image() -> None:
    check = doctor.check_driver(HostFacts(driver="580.159.04", gpus=H200), need(CUDA13))
    assert check.status == OK
    assert "driver 580.159.04 (NVIDIA H200) >= 580.65.06, the minimum of CUDA 13.0" in check.message


def test_a_newer_minimum_fails_naming_both_versions() -> None:
    check = doctor.check_driver(HostFacts(driver="575.57.08", gpus=H200), need(CUDA13, CPU))
    assert check.status == FAIL
    assert "driver 575.57.08 (NVIDIA H200) is older than 580.65.06, the minimum of 2.14.1-cuda13.0" in check.message
    assert ">= 580.65.06" in check.fix


def test_minor_version_compatibility_is_a_warning() -> None:
    check = doctor.check_driver(HostFacts(driver="580.159.04", gpus=H200), need(CUDA13, CUDA132))
    assert check.status == WARN
    assert "CUDA 13.2 runs under minor-version compatibility" in check.message


def test_no_gpu_is_said_and_skipped_unless_required() -> None:
    facts = HostFacts(nvidia_smi_error="not found")
    skipped = doctor.check_driver(facts, need(CUDA13))
    assert skipped.status == SKIP
    assert "no NVIDIA GPU here (nvidia-smi: not found): fine for building" in skipped.message
    required = doctor.check_driver(facts, need(CUDA13, require_gpu=True))
    assert required.status == FAIL and "driver >= 580.65.06" in required.fix
    assert doctor.check_driver(facts, need(CPU)).status == SKIP


def test_no_engine_fails_and_points_at_host_only() -> None:
    facts = HostFacts(engine_error="the docker SDK (Python package `docker`) is not installed")
    check = doctor.check_engine(facts, need(CUDA13))
    assert check.status == FAIL
    assert "pip install docker" in check.fix and "--host-only" in check.fix
    assert doctor.check_engine(facts, need(CUDA13, host_only=True)).status == SKIP
    assert doctor.check_build_client(facts, need(CUDA13)).status == SKIP
    assert doctor.check_engine(HostFacts(**ENGINE), need(CUDA13)).status == OK


def test_unreachable_registry_bases_fail_with_the_mirror_fix() -> None:
    facts = HostFacts(base_errors=(("ubuntu:24.04", "registry-1.docker.io does not answer (no such host)"),))
    check = doctor.check_registry_bases(facts, need(CUDA13, bases=(UBUNTU,)))
    assert check.status == FAIL
    assert "ubuntu:24.04: registry-1.docker.io does not answer" in check.message
    assert "--base-registry HOST/PREFIX" in check.fix and "debian12" in check.fix


def test_a_base_present_here_or_answering_passes() -> None:
    present = HostFacts(present_images=frozenset({"ubuntu:24.04"}))
    assert doctor.check_registry_bases(present, need(CUDA13, bases=(UBUNTU,))).status == WARN  # not locked
    locked = RegistryBase("ubuntu:24.04", "ubuntu:24.04", "sha256:" + "a" * 64)
    answers = HostFacts(base_errors=((locked.reference, None),))
    assert doctor.check_registry_bases(answers, need(CUDA13, bases=(locked,))).status == OK
    assert doctor.check_registry_bases(HostFacts(), need(CPU)).status == OK


def test_too_little_disk_fails_with_how_much_more() -> None:
    facts = HostFacts(**ENGINE, disk_path="/var/lib/docker", free_bytes=10 * doctor.GB)
    check = doctor.check_disk(facts, need(CUDA13, CPU))
    assert check.status == FAIL  # 6 + 2 + the largest (6) again = 14 GB
    assert "14.0 GB estimated for 2 images" in check.message and "free 4.0 GB more" in check.fix
    roomy = HostFacts(**ENGINE, disk_path="/var/lib/docker", free_bytes=100 * doctor.GB)
    assert doctor.check_disk(roomy, need(CUDA13, CPU)).status == OK


def test_the_container_toolkit_is_needed_only_with_a_gpu() -> None:
    gpu: dict[str, Any] = {"driver": "580.159.04", "gpus": H200}
    missing = doctor.check_container_toolkit(HostFacts(**gpu), need(CUDA13))
    assert missing.status == WARN and "nvidia-ctk" in missing.fix
    assert doctor.check_container_toolkit(HostFacts(**gpu), need(CUDA13, require_gpu=True)).status == FAIL
    runtime = HostFacts(runtimes=("nvidia", "runc"), **gpu)
    assert doctor.check_container_toolkit(runtime, need(CUDA13)).status == OK
    cdi = HostFacts(cdi_specs=("/etc/cdi/nvidia.yaml",), **gpu)
    assert "CDI spec /etc/cdi/nvidia.yaml" in doctor.check_container_toolkit(cdi, need(CUDA13)).message
    assert doctor.check_container_toolkit(HostFacts(), need(CUDA13)).status == SKIP


def test_a_small_dev_shm_matters_for_multi_gpu_runs_on_the_host() -> None:
    two = ("NVIDIA H200", "NVIDIA H200")
    small = HostFacts(gpus=two, driver="580.159.04", shm_bytes=64 << 20)
    check = doctor.check_shm(small, need(CUDA13, host_only=True, require_gpu=True))
    assert check.status == FAIL and "0.06 GiB, under the 1 GiB that NCCL across 2 GPUs needs" in check.message
    assert doctor.check_shm(small, need(CUDA13)).status == OK  # containers get --shm-size
    assert doctor.check_shm(HostFacts(gpus=H200), need(CUDA13, host_only=True)).status == SKIP


def test_nvidia_smi_output_is_parsed() -> None:
    names, driver = doctor.parse_nvidia_smi("NVIDIA H200, 580.159.04\nNVIDIA H200, 580.159.04\n")
    assert names == ("NVIDIA H200", "NVIDIA H200") and driver == "580.159.04"
    assert doctor.parse_nvidia_smi("") == ((), None)


def test_the_report_puts_each_fix_under_its_failure() -> None:
    lines = doctor.report([Check("a", OK, "fine"), Check("longer name", FAIL, "broken", "mend it")])
    assert lines == ["ok    a            fine", "FAIL  longer name  broken", "                   fix: mend it"]


def test_needs_follow_the_selection(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(
        "matrix:\n  include:\n    - {torch: 2.14.1, cuda: '12.6', os: ubuntu24.04}\n"
        "    - {torch: 2.14.1, cuda: '13.0', os: ubuntu24.04}\n"
        "    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}\n"
    )
    loaded = plan.load(path)
    runtime = doctor.needs(plan.select(loaded, ["2.14.1-cuda12.6-cudnn9-runtime"]))
    assert [b.name for b in runtime.registry_bases] == ["ubuntu:24.04"]  # runtime alone needs no toolkit image
    both = doctor.needs(plan.select(loaded, ["2.14.1-cuda12.6"]))
    assert [b.name for b in both.registry_bases] == ["ubuntu:24.04", "nvidia/cuda:12.6.3-devel-ubuntu24.04"]
    wheels = doctor.needs(plan.select(loaded, ["2.14.1-cuda13.0-cudnn9-devel"]))  # nvcc from CUDA 13.0's wheels
    assert [b.name for b in wheels.registry_bases] == ["ubuntu:24.04"]
    cpu = doctor.needs(plan.select(loaded, ["2.13.0"]))
    assert cpu.registry_bases == () and cpu.bootstrapped_bases == ("torchimages/bootstrap-debian:12",)
    assert cpu.cuda_images == ()


@pytest.mark.parametrize(
    ("present", "mmdebstrap", "status"), [(True, False, OK), (False, True, OK), (False, False, FAIL)]
)
def test_bootstrapped_bases_need_mmdebstrap_unless_present(present: bool, mmdebstrap: bool, status: str) -> None:
    base = "torchimages/bootstrap-debian:12"
    facts = HostFacts(present_images=frozenset({base} if present else ()), mmdebstrap=mmdebstrap)
    assert doctor.check_bootstrap(facts, Needs((CPU,), (), (base,))).status == status


def test_a_bootstrapped_ubuntu_base_needs_its_archives_keyring() -> None:
    base, keyring = "torchimages/bootstrap-ubuntu:24.04", "/usr/share/keyrings/ubuntu-archive-keyring.gpg"
    needs = Needs((CUDA13,), (), (base,), keyrings=(keyring,))
    missing = doctor.check_bootstrap(HostFacts(mmdebstrap=True, missing_keyrings=(keyring,)), needs)
    assert missing.status == FAIL and keyring in missing.message and "ubuntu-keyring" in (missing.fix or "")
    assert doctor.check_bootstrap(HostFacts(mmdebstrap=True), needs).status == OK
    present = HostFacts(present_images=frozenset({base}), missing_keyrings=(keyring,))
    assert doctor.check_bootstrap(present, needs).status == OK  # made already: nothing to verify


def test_under_bootstrap_the_ubuntu_base_is_made_not_pulled(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(
        "matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0', os: ubuntu24.04, flavors: [runtime]}\n"
    )
    made = doctor.needs(plan.select(plan.load(path, os_bases="bootstrap"), ["2.14.1"]))
    assert made.registry_bases == () and made.bootstrapped_bases == ("torchimages/bootstrap-ubuntu:24.04",)
    assert made.keyrings == ("/usr/share/keyrings/ubuntu-archive-keyring.gpg",)
    pulled = doctor.needs(plan.select(plan.load(path), ["2.14.1"]))
    assert [b.name for b in pulled.registry_bases] == ["ubuntu:24.04"] and pulled.bootstrapped_bases == ()


def test_doctor_without_the_docker_sdk_says_so_and_still_checks_the_driver(
    write_matrix: Callable[[str], Path],
) -> None:
    """The GPU machine has no Docker and no SDK: the doctor still runs, through the real CLI."""
    path = write_matrix("matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0', os: debian12}\n")
    script = (
        "import sys; sys.modules['docker'] = None; sys.modules['docker.errors'] = None\n"
        "from torchimages.cli import main\n"
        f"sys.exit(main(['doctor', '--matrix', {str(path)!r}, '2.14.1-cuda13.0-cudnn9-runtime']))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, cwd=ROOT)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL  Docker engine" in result.stdout
    assert "the docker SDK (Python package `docker`) is not installed" in result.stdout
    assert "NVIDIA driver" in result.stdout and "Traceback" not in result.stderr
    host_only = script.replace("'doctor', ", "'doctor', '--host-only', ")
    result = subprocess.run([sys.executable, "-c", host_only], capture_output=True, text=True, check=False, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_lock_without_selectors_or_bases_is_a_usage_error(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix("matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0', os: debian12}\n")
    code, _, err = cli("lock", "--matrix", str(path))
    assert code == 2 and "SELECTOR" in err and "lock --bases" in err
    code, _, err = cli("lock", "--matrix", str(path), "--check", "2.14.1")
    assert code == 2 and "--check applies to --bases" in err
    code, out, _ = cli("lock", "--bases", "--matrix", str(path))
    assert code == 0 and "no registry bases in the selection" in out


def test_a_bare_doctor_checks_the_first_build_else_the_most_demanding_combination(
    write_matrix: Callable[[str], Path],
) -> None:
    """Not every image of the matrix at once (68 images, 600 GB): the README's first build where the matrix
    has it, else the one combination that asks most of the machine."""
    path = write_matrix(
        "matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0', os: debian12}\n    - {torch: 2.11.0, cuda: '13.0'}\n"
        "    - {torch: 2.13.0, cuda: cpu}\n"
    )
    chosen, why = doctor.default_selection(plan.load(path))
    assert [i.tag for s in chosen for i in s.images] == [
        "2.11.0-cuda13.0-cudnn9-devel",
        "2.11.0-cuda13.0-cudnn9-runtime",
    ]
    assert doctor.FIRST_BUILD in why
    path = write_matrix("matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu}\n    - {torch: 2.14.1, cuda: '13.0'}\n")
    ((largest,), why) = doctor.default_selection(plan.load(path))
    assert largest.combination.cuda == "13.0" and "most demanding" in why


def test_a_fifo_among_the_cdi_specs_does_not_hang_the_doctor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchimages.doctor import facts

    os.mkfifo(tmp_path / "a.yaml")  # opened without O_NONBLOCK, this would wait for a writer forever
    (tmp_path / "b.yaml").write_text(f"kind: {facts.CDI_GPU_KIND}\n")
    (tmp_path / "c.json").write_text('{"kind": "other.com/thing"}')
    monkeypatch.setattr(facts, "CDI_DIRS", (str(tmp_path),))
    found: list[tuple[str, ...]] = []
    scan = threading.Thread(target=lambda: found.append(facts._cdi_specs()), daemon=True)  # a hang fails, not hangs
    scan.start()
    scan.join(timeout=10)
    assert found == [(str(tmp_path / "b.yaml"),)], "the CDI scan blocked on the FIFO"


# the machine and its emulators: literal facts, as `gather` would find them on x86_64 and on a GH200

X86: dict[str, Any] = {"machine": "x86_64", "page_size": 4096}
GH200: dict[str, Any] = {"machine": "aarch64", "page_size": 65536}
ARM64 = ImageNeed("2.9.1-cpu-runtime", None, None, None, 2 * doctor.GB, "linux/arm64")
QEMU_10 = "qemu-aarch64 version 10.0.13 (Debian 1:10.0.13+ds-0+deb13u1)"
AARCH64_P = "/usr/libexec/qemu-binfmt/aarch64-binfmt-P"
QEMU = BinfmtHandler("qemu-aarch64", True, AARCH64_P, "POF", QEMU_10)
EMULATING = HostFacts(**X86, binfmt_mounted=True, binfmt_handlers=(QEMU,))


def test_the_machine_and_its_4_kib_pages_are_said() -> None:
    check = doctor.check_machine(HostFacts(**X86), need(CPU))
    assert (check.status, check.message) == (OK, "x86_64 (linux/amd64), 4 KiB memory pages")
    assert doctor.check_machine(HostFacts(), need(CPU)).status == SKIP  # not known
    riscv = doctor.check_machine(HostFacts(machine="riscv64", page_size=4096), need(CPU))
    assert riscv.message == "riscv64 (neither linux/amd64 nor linux/arm64), 4 KiB memory pages"


@pytest.mark.parametrize("host_only", [False, True])
def test_pages_over_4_kib_are_a_warning_that_names_the_risk_whatever_the_selection(host_only: bool) -> None:
    check = doctor.check_machine(HostFacts(**GH200), need(CPU, host_only=host_only))
    assert check.status == WARN
    assert check.message.startswith("aarch64 (linux/arm64), 64 KiB memory pages: programs built for 4 KiB pages")
    assert "jemalloc" in check.message and "GH200" in check.message
    assert "4 KiB pages" in check.fix
    sixteen = doctor.check_machine(HostFacts(machine="aarch64", page_size=16384), need(ARM64))
    assert sixteen.status == WARN and "16 KiB memory pages" in sixteen.message


def test_emulation_is_not_needed_where_the_machine_runs_the_selection_natively() -> None:
    check = doctor.check_emulation(HostFacts(**X86), need(CPU, CUDA13))
    assert (check.status, check.message) == (SKIP, "not needed: this x86_64 machine runs linux/amd64 images natively")
    native = doctor.check_emulation(HostFacts(**GH200), need(ARM64))
    assert (native.status, native.message) == (
        SKIP,
        "not needed: this aarch64 machine runs linux/arm64 images natively",
    )
    assert doctor.check_emulation(HostFacts(**X86), need()).message == "not needed: no images"
    assert doctor.check_emulation(HostFacts(), need(ARM64)).status == SKIP  # the machine is not known
    assert doctor.check_emulation(HostFacts(**X86), need(ARM64, host_only=True)).status == SKIP


def test_linux_arm64_images_on_x86_64_run_under_an_enabled_qemu_handler_with_f() -> None:
    check = doctor.check_emulation(EMULATING, need(CPU, ARM64))
    assert check.status == OK
    assert check.message == (
        "linux/arm64 images run under emulation on this x86_64 machine: qemu-aarch64 enabled, interpreter "
        f"{AARCH64_P}, flags POF, {QEMU_10}"
    )


@pytest.mark.parametrize(
    ("facts", "said"),
    [
        (HostFacts(**X86), "binfmt_misc is not mounted on /proc/sys/fs/binfmt_misc"),
        (HostFacts(**X86, binfmt_mounted=True), "no qemu-aarch64 handler is registered in /proc/sys/fs/binfmt_misc"),
        (
            dataclasses.replace(EMULATING, binfmt_handlers=(dataclasses.replace(QEMU, enabled=False),)),
            f"qemu-aarch64 ({AARCH64_P}) is registered but disabled",
        ),
        (
            dataclasses.replace(EMULATING, binfmt_handlers=(dataclasses.replace(QEMU, flags="PO"),)),
            f"qemu-aarch64 ({AARCH64_P}) is registered without the F (fix-binary) flag (flags: PO): containers",
        ),
        (
            dataclasses.replace(EMULATING, binfmt_handlers=(dataclasses.replace(QEMU, name="qemu-arm"),)),
            "no qemu-aarch64 handler is registered",
        ),
    ],
)
def test_a_missing_disabled_or_unfixed_handler_fails_with_make_emulation(facts: HostFacts, said: str) -> None:
    check = doctor.check_emulation(facts, need(ARM64))
    assert check.status == FAIL
    assert check.message.startswith("linux/arm64 images need emulation on this x86_64 machine: ")
    assert said in check.message, check.message
    assert "`make emulation` as root" in check.fix


def test_linux_amd64_images_on_aarch64_need_qemu_x86_64() -> None:
    """The other way round (a GH200 building the default matrix): the handler is qemu-x86_64."""
    arm_host = HostFacts(**GH200, binfmt_mounted=True, binfmt_handlers=(QEMU,))
    check = doctor.check_emulation(arm_host, need(CPU, ARM64))
    assert check.status == FAIL and "linux/amd64 images need emulation on this aarch64 machine" in check.message
    assert "no qemu-x86_64 handler" in check.message
    x86_64 = BinfmtHandler("qemu-x86_64", True, "/usr/libexec/qemu-binfmt/x86_64-binfmt-P", "POF", "qemu-x86_64 10.0")
    check = doctor.check_emulation(dataclasses.replace(arm_host, binfmt_handlers=(x86_64,)), need(CPU, ARM64))
    assert check.status == OK and "interpreter /usr/libexec/qemu-binfmt/x86_64-binfmt-P, flags POF" in check.message


def test_a_machine_of_neither_platform_needs_both_handlers() -> None:
    facts = HostFacts(machine="riscv64", page_size=4096, binfmt_mounted=True, binfmt_handlers=(QEMU,))
    check = doctor.check_emulation(facts, need(CPU, ARM64))
    assert check.status == FAIL and "linux/amd64 and linux/arm64 images need emulation" in check.message
    assert "no qemu-x86_64 handler" in check.message and "qemu-aarch64" not in check.message


def test_an_old_qemu_or_one_that_does_not_answer_is_a_warning() -> None:
    old = dataclasses.replace(QEMU, version="qemu-aarch64 version 7.2.19 (Debian 1:7.2+dfsg-7+deb12u18+b3)")
    check = doctor.check_emulation(dataclasses.replace(EMULATING, binfmt_handlers=(old,)), need(ARM64))
    assert check.status == WARN and "uncaught target signal 11" in check.message
    assert "QEMU of 8 or newer" in check.fix
    eight = dataclasses.replace(QEMU, version="qemu-aarch64 version 8.0.0")
    assert doctor.check_emulation(dataclasses.replace(EMULATING, binfmt_handlers=(eight,)), need(ARM64)).status == OK
    mute = dataclasses.replace(QEMU, version=None, version_error="/usr/bin/qemu-aarch64 is not an executable here")
    check = doctor.check_emulation(dataclasses.replace(EMULATING, binfmt_handlers=(mute,)), need(ARM64))
    assert check.status == WARN
    assert "its version unknown (/usr/bin/qemu-aarch64 is not an executable here)" in check.message


def test_todays_checks_keep_their_order_and_the_machine_checks_come_last() -> None:
    names = [c.name for c in doctor.run_checks(HostFacts(**X86), need(CPU))]
    assert names == [
        "Docker engine",
        "BuildKit client",
        "free disk",
        "registry bases",
        "bootstrapped bases",
        "NVIDIA driver",
        "GPU architectures",
        "NVIDIA Container Toolkit",
        "/dev/shm",
        "InfiniBand/RoCE",
        "locked memory",
        "temporary folder",
        "machine",
        "emulation",
    ]


def test_needs_carry_each_images_platform(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(
        "matrix:\n  include:\n    - {torch: 2.9.1, cuda: cpu, os: debian12, platforms: [linux/arm64, linux/amd64],"
        " flavors: [runtime]}\n    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}\n"
    )
    loaded = plan.load(path)
    both = doctor.needs(plan.select(loaded, ["2.9.1"]))
    assert [i.platform for i in both.images] == ["linux/amd64", "linux/arm64"]
    assert both.platforms == ("linux/amd64", "linux/arm64")
    assert both.foreign_platforms("x86_64") == ("linux/arm64",) and both.foreign_platforms("aarch64") == (
        "linux/amd64",
    )
    amd64 = doctor.needs(plan.select(loaded, ["2.13.0"]))
    assert amd64.platforms == ("linux/amd64",) and amd64.foreign_platforms("x86_64") == ()
    assert [doctor.emulator(p) for p in both.platforms] == ["qemu-x86_64", "qemu-aarch64"]


def test_a_binfmt_handler_is_read_from_its_file() -> None:
    text = f"enabled\ninterpreter {AARCH64_P}\nflags: POF\noffset 0\nmagic 7f454c46\nmask ffffffff\n"
    assert doctor.parse_binfmt_handler("qemu-aarch64", text) == BinfmtHandler("qemu-aarch64", True, AARCH64_P, "POF")
    off = doctor.parse_binfmt_handler("qemu-aarch64", f"disabled\ninterpreter {AARCH64_P}\nflags: \n")
    assert (off.enabled, off.flags) == (False, "")
    assert doctor.parse_binfmt_handler("qemu-aarch64", "") == BinfmtHandler("qemu-aarch64", False, "", "")


def test_the_emulators_are_gathered_and_the_binary_behind_the_p_link_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Debian's interpreter is a link `aarch64-binfmt-P` that refuses to run outside binfmt_misc: its target is
    asked for the version. Only the handlers of the selection's foreign platforms are read."""
    from torchimages.doctor import facts

    qemu = tmp_path / "qemu-aarch64"
    qemu.write_text(
        f"#!/bin/sh\ncase $0 in *-binfmt-P) echo 'has to be run by binfmt_misc' >&2; exit 1;; esac\necho '{QEMU_10}'\n"
    )
    qemu.chmod(0o755)
    (tmp_path / "aarch64-binfmt-P").symlink_to(qemu)
    binfmt = tmp_path / "binfmt_misc"
    binfmt.mkdir()
    monkeypatch.setattr(facts, "BINFMT_DIR", str(binfmt))
    assert facts._binfmt(need(ARM64), "x86_64") == (False, ())  # not mounted
    (binfmt / "status").write_text("enabled\n")
    assert facts._binfmt(need(ARM64), "x86_64") == (True, ())  # not registered
    (binfmt / "qemu-aarch64").write_text(f"enabled\ninterpreter {tmp_path / 'aarch64-binfmt-P'}\nflags: POF\n")
    (binfmt / "qemu-x86_64").write_text("enabled\ninterpreter /gone\nflags: POF\n")
    mounted, (handler,) = facts._binfmt(need(CPU, ARM64), "x86_64")
    assert mounted and handler == BinfmtHandler(
        "qemu-aarch64", True, str(tmp_path / "aarch64-binfmt-P"), "POF", QEMU_10
    )
    assert facts._binfmt(need(CPU), "x86_64") == (True, ())  # nothing foreign: no interpreter is run
    qemu.unlink()
    (gone,) = facts._binfmt(need(ARM64), "x86_64")[1]
    assert gone.version is None and gone.version_error == f"{qemu} is not an executable here"


RDMA_HOST = HostFacts(infiniband=("rdma_cm", "uverbs0"), rdma_adapters=("mlx5_0",), memlock_bytes=-1)


def test_rdma_is_checked_only_where_the_selection_asks() -> None:
    for check in (doctor.checks.check_infiniband, doctor.checks.check_memlock):
        result = check(HostFacts(), need())
        assert result.status == SKIP and "--rdma" in result.message


def test_no_dev_infiniband_fails_with_the_driver_fix_and_the_sockets_fallback() -> None:
    for facts in (HostFacts(), HostFacts(infiniband=())):
        result = doctor.checks.check_infiniband(facts, need(rdma=True))
        assert result.status == FAIL and "/dev/infiniband" in result.message
        assert "mlx5_ib" in result.fix and "NCCL_IB_DISABLE=1" in result.fix


def test_dev_infiniband_without_uverbs_fails() -> None:
    result = doctor.checks.check_infiniband(HostFacts(infiniband=("rdma_cm",)), need(rdma=True))
    assert result.status == FAIL and "uverbs" in result.message and "ib_uverbs" in result.fix


def test_an_rdma_device_passes_naming_what_containers_need() -> None:
    result = doctor.checks.check_infiniband(RDMA_HOST, need(rdma=True))
    assert result.status == OK and "uverbs0" in result.message and "mlx5_0" in result.message
    assert "--device /dev/infiniband" in result.message and "IPC_LOCK" in result.message


def test_a_locked_memory_limit_fails_on_the_host_and_not_for_containers() -> None:
    limited = dataclasses.replace(RDMA_HOST, memlock_bytes=8 * 1024 * 1024)
    host = doctor.checks.check_memlock(limited, need(rdma=True, host_only=True))
    assert host.status == FAIL and "8192 KiB" in host.message and "unlimited" in host.fix
    containers = doctor.checks.check_memlock(limited, need(rdma=True))
    assert containers.status == OK and "--ulimit memlock=-1" in containers.message
    assert doctor.checks.check_memlock(RDMA_HOST, need(rdma=True, host_only=True)).status == OK
    assert doctor.checks.check_memlock(HostFacts(), need(rdma=True)).status == SKIP


def test_gather_reads_this_machines_rdma_facts() -> None:
    facts = doctor.gather(need(rdma=True, host_only=True))
    import resource

    soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    assert facts.memlock_bytes == (-1 if soft == resource.RLIM_INFINITY else soft)
    assert facts.infiniband == (
        tuple(sorted(os.listdir("/dev/infiniband"))) if os.path.isdir("/dev/infiniband") else None
    )


def test_a_noexec_temporary_folder_fails_on_the_host_with_the_remount() -> None:
    noexec = HostFacts(temp_dir="/tmp", temp_noexec=True)
    result = doctor.checks.check_temp(noexec, need(host_only=True))
    assert result.status == FAIL and "/tmp is mounted noexec" in result.message
    assert "mount -o remount,exec /tmp" in result.fix and "TORCHINDUCTOR_CACHE_DIR" in result.fix
    assert doctor.checks.check_temp(HostFacts(temp_dir="/tmp"), need(host_only=True)).status == OK
    assert doctor.checks.check_temp(HostFacts(), need(host_only=True)).status == FAIL
    containers = doctor.checks.check_temp(noexec, need())
    assert containers.status == SKIP and "--tmpfs /tmp:exec" in containers.message
