"""Probe scripts (package data in scripts/) and running them in the host under test.

A probe runs with the host's own Python (stdlib + torch only) and prints one line
`SMOKE_JSON:{...}`; `parse_payload` reads it back. The scripts reach a testinfra host
through `/bin/sh` (`run_probe`), or a throwaway container through the engine (building.verify).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import testinfra.host


MARK = "SMOKE_JSON:"
SCRIPTS_PACKAGE = "torchimages.probes"


SCRIPTS_FOLDER = "scripts"
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


def probe_source(name: str) -> str:
    """The text of scripts/<name>.py, read from the installed package."""
    return (resources.files(SCRIPTS_PACKAGE) / SCRIPTS_FOLDER / f"{name}.py").read_text(encoding="utf-8")


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
    """Run scripts/<name>.py in the host."""
    return run_script(host, python, probe_source(name), args, timeout_s)
