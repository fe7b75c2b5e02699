"""Probe: the facts of the host's Python and torch, printed as one JSON line.

Runs inside the image (or host) under test with only the standard library and
torch; the smoke suite sends it through testinfra and reads the last line that
starts with SMOKE_JSON:.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.metadata
import json
import os
import platform
import re
import stat
import sys
import tempfile
import warnings
from types import ModuleType
from typing import Any

MARK = "SMOKE_JSON:"
# The NVIDIA libraries verification checks (torchimages/building/libraries.py), by the start of their file
# names. libtorch_cuda links libcudnn, libnccl, libcublas and libcublasLt, so `import torch` maps them;
# cuDNN 9 opens its sub-libraries (libcudnn_graph, libcudnn_cnn, ...) only when first used: those are
# loaded here by path, from the distribution whose RECORD lists them.
CHECKED_LIBRARIES = ("libcudnn", "libnccl", "libcublas")


def import_torch() -> tuple[ModuleType | None, str, str | None]:
    """Import torch with file descriptor 2 captured: (module, stderr text, error)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        module: ModuleType | None = None
        error: str | None = None
        try:
            module = importlib.import_module("torch")
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        text = captured.read().decode("utf-8", errors="replace")
    return module, text, error


OS_RELEASE_BYTES = 65536  # an os-release file is a few hundred bytes; one that never ends is read no further


def os_release() -> dict[str, str]:
    """ID and VERSION_ID from /etc/os-release (its first OS_RELEASE_BYTES: a link to /dev/zero ends there)."""
    values: dict[str, str] = {}
    try:
        with open("/etc/os-release", encoding="utf-8", errors="replace") as handle:
            for line in handle.read(OS_RELEASE_BYTES).splitlines():
                key, sep, value = line.strip().partition("=")
                if sep:
                    values[key] = value.strip().strip('"')
    except OSError:
        pass
    return {"id": values.get("ID", ""), "version_id": values.get("VERSION_ID", "")}


def package_version(name: str) -> dict[str, str | None]:
    """Import a companion package (torchvision, torchaudio): version or the error."""
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError:
        return {"version": None, "error": None}
    except Exception as exc:
        return {"version": None, "error": f"{type(exc).__name__}: {exc}"}
    return {"version": str(getattr(module, "__version__", "")), "error": None}


def driver_library_loadable() -> bool:
    """Whether the dynamic loader finds the driver's libcuda.so.1."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def torch_facts(torch: Any) -> dict[str, Any]:
    """Versions that torch reports and what it sees of the GPUs."""
    facts: dict[str, Any] = {
        "torch": torch.__version__,
        "torch_dir": os.path.dirname(torch.__file__),
        "cuda": torch.version.cuda,
        "cudnn": None,
        "nccl": None,
    }
    try:
        facts["cudnn"] = torch.backends.cudnn.version()
    except Exception as exc:
        facts["cudnn_error"] = f"{type(exc).__name__}: {exc}"
    try:
        facts["nccl"] = torch.cuda.nccl.version()
    except Exception as exc:
        facts["nccl_error"] = f"{type(exc).__name__}: {exc}"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = bool(torch.cuda.is_available())
        count = torch.cuda.device_count() if available else 0
    facts["cuda_available"] = available
    facts["device_count"] = count
    facts["cuda_init_warnings"] = [str(item.message) for item in caught]
    facts["devices"] = [
        {
            "name": torch.cuda.get_device_name(index),
            "capability": list(torch.cuda.get_device_capability(index)),
        }
        for index in range(count)
    ]
    return facts


def library_name(path: str) -> str:
    """'/x/libcudnn_cnn.so.9' -> 'libcudnn_cnn': a shared object's name without its version."""
    return os.path.basename(path).split(".so", 1)[0]


def mapped_libraries() -> list[str]:
    """The shared objects (lib*.so*) this process has mapped, from /proc/self/maps, in order."""
    found: dict[str, None] = {}
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            fields = line.split(None, 5)
            path = fields[5].strip() if len(fields) == 6 else ""
            name = os.path.basename(path)
            if path.startswith("/") and name.startswith("lib") and ".so" in name:
                found[path] = None
    return list(found)


def shipped_libraries() -> dict[str, tuple[str, str]]:
    """Every lib*.so* file an installed distribution's RECORD lists (real path) -> (distribution, version)."""
    owners: dict[str, tuple[str, str]] = {}
    for dist in importlib.metadata.distributions():
        for file in dist.files or ():
            if file.name.startswith("lib") and ".so" in file.name:
                path = os.path.realpath(str(dist.locate_file(file)))
                owners.setdefault(path, (dist.metadata["Name"], dist.version))
    return owners


def requirement_name(text: str) -> str:
    """'cuda-toolkit[cublas]==13.0.3; ...' -> 'cuda-toolkit' (normalized)."""
    return normalized(re.split(r"[\s\[;(<>=!~]", text.strip(), maxsplit=1)[0])


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def nvidia_distributions() -> dict[str, dict[str, Any]]:
    """torch and the nvidia-*/cuda-* distributions: each one's version and its requirements that name
    another of them (torch's pins, through the cuda-toolkit meta-package for CUDA 13)."""
    found = {}
    for dist in importlib.metadata.distributions():
        name = normalized(dist.metadata["Name"])
        if name == "torch" or is_nvidia(name):
            found.setdefault(name, dist)
    return {
        name: {
            "version": dist.version,
            "requires": [text for text in dist.requires or () if requirement_name(text) in found],
        }
        for name, dist in sorted(found.items())
    }


def marker_environment() -> dict[str, str]:
    """The values environment markers read (PEP 508), for evaluating the requirements outside the image."""
    return {
        "implementation_name": sys.implementation.name,
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_python_implementation": platform.python_implementation(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "python_full_version": platform.python_version(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    }


def is_nvidia(distribution: str) -> bool:
    """NVIDIA's wheels (nvidia-*, cuda-*)."""
    return normalized(distribution).startswith(("nvidia-", "cuda-"))


def libraries() -> dict[str, Any]:
    """The shared objects verification checks, as this process mapped them (/proc/self/maps) at
    `import torch` and the calls above, or loaded here by path (those torch loads lazily): every file of
    the checked libraries, every file of NVIDIA's wheels, and any other copy of a library those ship.
    Each with the distribution whose RECORD lists it; with the venv, torch's pins, and the markers' values."""
    try:
        owners = shipped_libraries()
        before = mapped_libraries()
    except OSError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    mapped = {library_name(path) for path in before}
    failed = []
    for path in sorted(owners):
        name = library_name(path)
        if name.startswith(CHECKED_LIBRARIES) and name not in mapped:
            mapped.add(name)
            try:
                ctypes.CDLL(path)
            except OSError as exc:
                owner, version = owners[path]
                failed.append({"path": path, "distribution": owner, "version": version, "error": str(exc)})
    nvidia_names = {library_name(path) for path, (owner, _) in owners.items() if is_nvidia(owner)}
    loaded = []
    for path in mapped_libraries():
        name = library_name(path)
        owner, version = owners.get(os.path.realpath(path), (None, None))
        if name.startswith(CHECKED_LIBRARIES) or name in nvidia_names or (owner and is_nvidia(owner)):
            how = "import" if path in before else "by path"
            loaded.append({"path": path, "distribution": owner, "version": version, "how": how})
    return {
        "prefix": os.path.realpath(sys.prefix),
        "environment": marker_environment(),
        "distributions": nvidia_distributions(),
        "loaded": loaded,
        "failed": failed,
    }


# The constraints file every image writes (torchimages/building/constraints.py reads the answer).
CONSTRAINTS_PATH = "/etc/pip/constraint.txt"
CONSTRAINTS_BYTES = 1 << 20  # a real one is ~2 KB; read no further (a link to /dev/zero is not a regular file)


def read_bounded(path: str, limit: int) -> dict[str, Any]:
    """A regular file's first `limit` bytes as text (bytes that are not UTF-8 replaced): {"text"}, or
    {"missing": True}, or {"error"}; never blocks (a FIFO is opened non-blocking and refused)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return {"missing": True}
    except OSError as exc:
        return {"error": f"{type(exc).__name__}: {exc.strerror}"}
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return {"error": "not a regular file"}
        data = os.read(descriptor, limit + 1)
    except OSError as exc:
        return {"error": f"{type(exc).__name__}: {exc.strerror}"}
    finally:
        os.close(descriptor)
    if len(data) > limit:
        return {"error": f"larger than {limit} bytes"}
    return {"text": data.decode("utf-8", errors="replace")}


def constraints() -> dict[str, Any]:
    """The image's constraints file (within bounds), every installed distribution's version (by normalized
    name), and what PIP_CONSTRAINT and UV_CONSTRAINT say here (None: not set)."""
    answer: dict[str, Any] = {"path": CONSTRAINTS_PATH, **read_bounded(CONSTRAINTS_PATH, CONSTRAINTS_BYTES)}
    installed: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        metadata = dist.metadata  # None, or one without a Name or Version: a broken install, left out
        name = metadata["Name"] if metadata is not None else None
        version = metadata["Version"] if metadata is not None else None
        if isinstance(name, str) and isinstance(version, str):
            installed.setdefault(normalized(name), version)
    answer["installed"] = dict(sorted(installed.items()))
    answer["environment"] = {name: os.environ.get(name) for name in ("PIP_CONSTRAINT", "UV_CONSTRAINT")}
    return answer


# ELF e_machine values (the ELF specification's EM_* numbers) as `uname -m` names those machines.
ELF_MACHINES = {3: "i686", 40: "arm", 62: "x86_64", 183: "aarch64", 243: "riscv64", 21: "ppc64", 22: "s390x"}


def elf_machine(path: str) -> str:
    """The machine an ELF file is built for (`x86_64`, `aarch64`), read from its header; why not, where it is none."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(20)
    except OSError as exc:
        return f"unreadable ({type(exc).__name__})"
    if len(header) < 20 or header[:4] != b"\x7fELF":
        return "not an ELF file"
    number = int.from_bytes(header[18:20], "little" if header[5] == 1 else "big")
    return ELF_MACHINES.get(number, f"ELF machine {number}")


def machine_facts(torch: Any) -> dict[str, Any]:
    """The machine the kernel reports, and the machine the interpreter and torch's own shared objects (its
    extension module and lib/*.so*) are built for: under emulation `uname -m` says the emulated one."""
    files = [os.path.realpath(sys.executable)]
    if torch is not None:
        folder = os.path.dirname(torch.__file__)
        names = sorted(os.listdir(folder)) + [f"lib/{n}" for n in sorted(os.listdir(os.path.join(folder, "lib")))]
        files += [os.path.join(folder, n) for n in names if n.startswith(("_C.", "lib/lib")) and ".so" in n]
    return {"uname": platform.machine(), "files": {path: elf_machine(path) for path in files}}


def main() -> None:
    torch, stderr_text, error = import_torch()
    facts: dict[str, Any] = {
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "python_full": platform.python_version(),
        "executable": sys.executable,
        "os": os_release(),
        "import_torch_stderr": stderr_text,
        "import_torch_error": error,
        "driver_library_loadable": driver_library_loadable(),
        "torchvision": package_version("torchvision"),
        "torchaudio": package_version("torchaudio"),
    }
    if torch is not None:
        try:
            facts.update(torch_facts(torch))
            facts["libraries"] = libraries()
        except Exception as exc:  # a torch that imports but is not one (a derived image replaced it): said, and
            # the rest is still read (the constraints file names what changed)
            version = getattr(torch, "__version__", None)
            facts["torch"] = version if isinstance(version, str) else None
            facts["import_torch_error"] = f"torch imports but its facts cannot be read: {type(exc).__name__}: {exc}"
    facts["constraints"] = constraints()
    try:
        facts["machine"] = machine_facts(torch)
    except Exception as exc:
        facts["machine"] = {"error": f"{type(exc).__name__}: {exc}"}
    print(MARK + json.dumps(facts), flush=True)


if __name__ == "__main__":
    main()
