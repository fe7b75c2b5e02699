"""Probe: the facts of the host's Python and torch, printed as one JSON line.

Runs inside the image (or host) under test with only the standard library and
torch; the smoke suite sends it through testinfra and reads the last line that
starts with SMOKE_JSON:.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import platform
import sys
import tempfile
import warnings
from types import ModuleType
from typing import Any

MARK = "SMOKE_JSON:"


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


def os_release() -> dict[str, str]:
    """ID and VERSION_ID from /etc/os-release."""
    values: dict[str, str] = {}
    try:
        with open("/etc/os-release", encoding="utf-8") as handle:
            for line in handle:
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
        facts.update(torch_facts(torch))
    print(MARK + json.dumps(facts), flush=True)


if __name__ == "__main__":
    main()
