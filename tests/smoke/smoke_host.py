"""Running probe scripts and shell queries in the host under test through testinfra."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import testinfra.host

MARK = "SMOKE_JSON:"
PROBES = Path(__file__).resolve().parent / "probes"
_EOF = "SMOKE_SCRIPT_EOF_4e1f"

# NVLink multicast (NVLS) stays off in everything the suites start: on shared
# multi-GPU hosts a program that uses it can take the GPUs out of service. A
# value the caller already set wins; the scripts set the same defaults for the
# processes they spawn.
SAFE_GPU_ENV: Mapping[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


@dataclass(frozen=True)
class ScriptResult:
    """What one script run in the host returned."""

    rc: int
    stdout: str
    stderr: str
    payload: Any

    @property
    def ok(self) -> bool:
        """Exit status 0 and a JSON payload."""
        return self.rc == 0 and self.payload is not None

    def describe(self, limit: int = 3000) -> str:
        """Exit status and the end of the output, for assertion messages."""
        tail = (self.stdout + "\n" + self.stderr).strip()[-limit:]
        return f"exit status {self.rc}; output ends with:\n{tail}"


def parse_payload(stdout: str) -> Any:
    """The JSON after the last SMOKE_JSON: marker line, or None."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARK):
            return json.loads(line[len(MARK) :])
    return None


def script_command(
    python: str,
    script: str,
    args: Sequence[str] = (),
    timeout_s: int = 900,
    env: Mapping[str, str] = SAFE_GPU_ENV,
) -> str:
    """A /bin/sh command that writes the script to a temporary folder and runs it there."""
    if _EOF in script:
        raise ValueError("the script contains the heredoc delimiter")
    exports = "".join(f'export {key}="${{{key}:-{shlex.quote(value)}}}"\n' for key, value in env.items())
    argv = " ".join(shlex.quote(arg) for arg in args)
    return (
        f"{exports}"
        'd=$(mktemp -d "${TMPDIR:-/tmp}/smoke.XXXXXX") || exit 97\n'
        f"cat > \"$d/script.py\" <<'{_EOF}'\n{script}\n{_EOF}\n"
        "limit=''\n"
        f"if command -v timeout >/dev/null 2>&1; then limit='timeout -k 10 {timeout_s}'; fi\n"
        f'(cd "$d" && $limit {python} script.py {argv})\n'
        'rc=$?; rm -rf "$d"; exit $rc\n'
    )


def run_script(
    host: testinfra.host.Host,
    python: str,
    script: str,
    args: Sequence[str] = (),
    timeout_s: int = 900,
) -> ScriptResult:
    """Run a Python script in the host and decode its JSON payload."""
    result = host.run(script_command(python, script, args, timeout_s))
    try:
        payload = parse_payload(result.stdout)
    except json.JSONDecodeError:
        payload = None
    return ScriptResult(result.rc, result.stdout, result.stderr, payload)


def run_probe(
    host: testinfra.host.Host,
    python: str,
    name: str,
    args: Sequence[str] = (),
    timeout_s: int = 900,
) -> ScriptResult:
    """Run probes/<name>.py in the host."""
    script = (PROBES / f"{name}.py").read_text(encoding="utf-8")
    return run_script(host, python, script, args, timeout_s)


@dataclass(frozen=True)
class GpuQuery:
    """What nvidia-smi and the file system of the host say about GPUs."""

    names: tuple[str, ...]
    driver: str | None
    device_nodes: tuple[str, ...]
    shm_bytes: int | None
    nvidia_smi_error: str | None


def _driver_from_proc(host: testinfra.host.Host) -> str | None:
    result = host.run("cat /proc/driver/nvidia/version 2>/dev/null")
    for word in result.stdout.split():
        if word.count(".") >= 1 and word.replace(".", "").isdigit():
            return str(word)
    return None


def _shm_bytes(host: testinfra.host.Host) -> int | None:
    result = host.run("df -Pk /dev/shm 2>/dev/null | awk 'NR==2 {print $2}'")
    text = result.stdout.strip()
    return int(text) * 1024 if text.isdigit() else None


def query_gpus(host: testinfra.host.Host) -> GpuQuery:
    """GPU names and driver (nvidia-smi, else /proc), device nodes and /dev/shm size."""
    smi = host.run("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader")
    names: list[str] = []
    driver: str | None = None
    error: str | None = None
    if smi.rc == 0:
        for line in smi.stdout.splitlines():
            name, _, version = line.rpartition(",")
            if name.strip():
                names.append(name.strip())
                driver = version.strip()
    else:
        error = (smi.stderr or smi.stdout).strip()[-300:] or f"exit status {smi.rc}"
        driver = _driver_from_proc(host)
    nodes = host.run("ls /dev/nvidia[0-9]* 2>/dev/null").stdout.split()
    return GpuQuery(tuple(names), driver, tuple(nodes), _shm_bytes(host), error)


FIND_NVCC = 'command -v nvcc || { n="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"; [ -x "$n" ] && echo "$n"; }'


def find_nvcc(host: testinfra.host.Host) -> str:
    """nvcc's path in the host (PATH, then $CUDA_HOME/bin, /usr/local/cuda/bin), or ''."""
    return str(host.run(FIND_NVCC).stdout.strip())


def host_id(host: testinfra.host.Host) -> str:
    """A stable key for per-host caches."""
    return str(host.backend.get_pytest_id())


def is_local(host: testinfra.host.Host) -> bool:
    """True for testinfra's local:// backend."""
    return str(host.backend.NAME) == "local"


def is_docker(host: testinfra.host.Host) -> bool:
    """True for testinfra's docker:// backend."""
    return str(host.backend.NAME) == "docker"
