"""The facts probe (torchimages/probes/scripts/facts.py) on this host, as the image runs it: its functions loaded
from the package data, with made-up ELF headers, a made-up torch (a module of literal answers) and a made-up
site-packages; the whole script as a subprocess of this Python. No GPU and no torch needed: where this host has
torch, the tests that need its absence are skipped, said."""

from __future__ import annotations

import importlib.util
import os
import struct
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchimages.probes import parse_payload, probe_source

HAS_TORCH = importlib.util.find_spec("torch") is not None


def load() -> types.ModuleType:
    """The script as the image receives it (package data), loaded as a module."""
    module = types.ModuleType("facts_probe")
    exec(compile(probe_source("facts"), "facts.py", "exec"), module.__dict__)
    return module


LOADED = load()


@pytest.fixture(scope="module")
def probe() -> types.ModuleType:
    return load()


def elf(machine: int, little: bool = True, bits: int = 64) -> bytes:
    """An ELF header's first 20 bytes (and some more): class, data (endianness), version, e_type, e_machine."""
    order = "<" if little else ">"
    ident = b"\x7fELF" + bytes([2 if bits == 64 else 1, 1 if little else 2, 1]) + bytes(9)
    return ident + struct.pack(order + "HH", 3, machine) + bytes(44)


@pytest.mark.parametrize(
    ("header", "machine"),
    [
        (elf(62), "x86_64"),
        (elf(183), "aarch64"),
        (elf(21, little=False), "ppc64"),  # big-endian: e_machine read in the file's byte order
        (elf(22, little=False), "s390x"),
        (elf(3, bits=32), "i686"),
        (elf(0x1234), "ELF machine 4660"),
        (b"\x7fELF\x02\x01", "not an ELF file"),  # too short
        (b"#!/bin/sh\necho not an ELF file at all\n", "not an ELF file"),
        (b"", "not an ELF file"),
    ],
    ids=[
        "x86_64",
        "aarch64",
        "ppc64-big-endian",
        "s390x-big-endian",
        "i686-32-bit",
        "unknown",
        "short",
        "script",
        "empty",
    ],
)
def test_the_machine_of_an_elf_file_is_read_from_its_header(
    probe: types.ModuleType, tmp_path: Path, header: bytes, machine: str
) -> None:
    path = tmp_path / "lib.so"
    path.write_bytes(header)
    assert probe.elf_machine(str(path)) == machine


def test_an_unreadable_file_says_why(probe: types.ModuleType, tmp_path: Path) -> None:
    assert probe.elf_machine(str(tmp_path / "missing.so")) == "unreadable (FileNotFoundError)"
    assert probe.elf_machine(str(tmp_path)) == "unreadable (IsADirectoryError)"


@given(st.binary(max_size=64))
def test_any_bytes_give_a_machine_or_a_reason_never_an_exception(data: bytes) -> None:
    with tempfile.NamedTemporaryFile() as handle:
        handle.write(data)
        handle.flush()
        found = LOADED.elf_machine(handle.name)
    assert isinstance(found, str) and found


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("cuda-toolkit[cublas]==13.0.3; platform_system == 'Linux'", "cuda-toolkit"),
        ("nvidia_cudnn_cu12 (>=9.1)", "nvidia-cudnn-cu12"),
        ("  Nvidia.NCCL-cu13>=2.27", "nvidia-nccl-cu13"),
        ("torch", "torch"),
    ],
)
def test_a_requirements_name_is_its_normalized_distribution(probe: types.ModuleType, text: str, name: str) -> None:
    assert probe.requirement_name(text) == name


def test_nvidias_wheels_are_told_by_their_names(probe: types.ModuleType) -> None:
    assert (
        probe.is_nvidia("nvidia_cublas_cu12") and probe.is_nvidia("cuda-toolkit") and probe.is_nvidia("CUDA.Bindings")
    )
    assert not probe.is_nvidia("torch") and not probe.is_nvidia("nvidiax") and not probe.is_nvidia("pycuda")
    assert probe.library_name("/x/libcudnn_cnn.so.9") == "libcudnn_cnn"
    assert probe.library_name("libnccl.so.2.27.3") == "libnccl"


def made_up_torch(folder: Path, machine: int = 183) -> types.SimpleNamespace:
    """A torch of literal answers (CUDA 13.0, cuDNN 9.13, NCCL 2.27, no GPU) whose folder holds an aarch64
    extension module and library."""
    (folder / "lib").mkdir(parents=True)
    (folder / "_C.cpython-311-aarch64-linux-gnu.so").write_bytes(elf(machine))
    (folder / "lib" / "libtorch_cpu.so").write_bytes(elf(machine))
    (folder / "lib" / "README").write_text("not a library")
    cuda = types.SimpleNamespace(
        is_available=lambda: False,
        device_count=lambda: 0,
        nccl=types.SimpleNamespace(version=lambda: (2, 27, 3)),
    )
    return types.SimpleNamespace(
        __version__="2.14.1+cu130",
        __file__=str(folder / "__init__.py"),
        version=types.SimpleNamespace(cuda="13.0"),
        backends=types.SimpleNamespace(cudnn=types.SimpleNamespace(version=lambda: 91300)),
        cuda=cuda,
    )


def test_torchs_facts_are_what_it_reports(probe: types.ModuleType, tmp_path: Path) -> None:
    torch = made_up_torch(tmp_path / "torch")
    facts = probe.torch_facts(torch)
    assert facts == {
        "torch": "2.14.1+cu130",
        "torch_dir": str(tmp_path / "torch"),
        "cuda": "13.0",
        "cudnn": 91300,
        "nccl": (2, 27, 3),
        "cuda_available": False,
        "device_count": 0,
        "cuda_init_warnings": [],
        "devices": [],
    }


def test_a_torch_whose_cudnn_fails_says_why_and_reads_the_rest(probe: types.ModuleType, tmp_path: Path) -> None:
    torch = made_up_torch(tmp_path / "torch")

    def broken() -> int:
        raise RuntimeError("cuDNN not found")

    torch.backends.cudnn.version = broken
    facts = probe.torch_facts(torch)
    assert facts["cudnn"] is None and facts["cudnn_error"] == "RuntimeError: cuDNN not found"
    assert facts["nccl"] == (2, 27, 3) and facts["cuda"] == "13.0"


def test_the_machine_of_torchs_own_objects_is_read(probe: types.ModuleType, tmp_path: Path) -> None:
    torch = made_up_torch(tmp_path / "torch")
    found = probe.machine_facts(torch)
    folder = tmp_path / "torch"
    assert found["files"] == {
        os.path.realpath(sys.executable): probe.elf_machine(os.path.realpath(sys.executable)),
        str(folder / "_C.cpython-311-aarch64-linux-gnu.so"): "aarch64",
        str(folder / "lib" / "libtorch_cpu.so"): "aarch64",
    }
    assert probe.machine_facts(None)["files"] == {
        os.path.realpath(sys.executable): probe.elf_machine(os.path.realpath(sys.executable))
    }


def run_probe(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", probe_source("facts")], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    payload = parse_payload(done.stdout)
    assert isinstance(payload, dict), done.stdout[-2000:]
    return payload


def test_the_script_without_torch_says_its_import_error_and_reads_the_rest() -> None:
    if HAS_TORCH:
        pytest.skip("torch is installed here: its absence cannot be seen")
    found = run_probe({**os.environ, "PYTHONPATH": ""})
    assert found["import_torch_error"].startswith("ModuleNotFoundError: No module named 'torch'")
    assert "torch" not in found and "libraries" not in found
    assert found["python"] == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert found["torchvision"] == {"version": None, "error": None}
    assert "installed" in found["constraints"] and found["machine"]["files"]


def test_what_importing_torch_writes_to_stderr_is_captured(tmp_path: Path) -> None:
    """A made-up torch on PYTHONPATH that writes a warning as it imports (as a torch built for other GPUs does)."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(
        "import os\nos.write(2, b'UserWarning: made-up warning from the C library\\n')\n__version__ = '2.14.1'\n"
    )
    found = run_probe({**os.environ, "PYTHONPATH": str(tmp_path)})
    assert found["import_torch_stderr"] == "UserWarning: made-up warning from the C library\n"
    assert found["import_torch_error"].startswith("torch imports but its facts cannot be read")
