"""Probe: the user running this Python can install a package into its environment (no network).

Builds a minimal wheel by hand (zipfile) in a temporary folder, installs it with
`pip install --no-index --no-deps --no-cache-dir`, imports it, uninstalls it; prints one
JSON line. Standard library and pip only.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from typing import Any

MARK = "SMOKE_JSON:"
NAME = "torchimages_smoke_probe"
VERSION = "0.0.1"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(folder: str) -> str:
    """A pure-Python wheel holding one module; its path."""
    dist_info = f"{NAME}-{VERSION}.dist-info"
    files = {
        f"{NAME}.py": b"ANSWER = 42\n",
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n".encode(),
        f"{dist_info}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: torchimages-smoke\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = [_record_line(path, data) for path, data in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = os.path.join(folder, f"{NAME}-{VERSION}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
    return path


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PIP_NO_CACHE_DIR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, env=env, check=False, timeout=300
    )


def main() -> None:
    result: dict[str, Any] = {"prefix": sys.prefix, "uid": os.getuid(), "installed": False, "uninstalled": False}
    result["read_only"] = bool(os.statvfs(sys.prefix).f_flag & os.ST_RDONLY)
    if result["read_only"]:  # docker run --read-only: nothing can be installed; the suite says so
        print(MARK + json.dumps(result), flush=True)
        return
    with tempfile.TemporaryDirectory() as folder:
        wheel = build_wheel(folder)
        install = pip("install", "--no-index", "--no-deps", "--no-cache-dir", wheel)
        result["install_output"] = (install.stdout + install.stderr)[-2000:]
        if install.returncode == 0:
            check = subprocess.run(
                [sys.executable, "-c", f"import {NAME}; print({NAME}.__file__)"],
                capture_output=True,
                text=True,
                check=False,
                cwd=folder,
            )
            result["module_file"] = check.stdout.strip()
            result["installed"] = check.returncode == 0 and check.stdout.startswith(sys.prefix)
            remove = pip("uninstall", "-y", NAME)
            result["uninstall_output"] = (remove.stdout + remove.stderr)[-2000:]
            result["uninstalled"] = remove.returncode == 0
    print(MARK + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
