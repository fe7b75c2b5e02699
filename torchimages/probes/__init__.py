"""Probe scripts (package data in scripts/) and running them in the host under test.

A probe runs with the host's own Python (stdlib + torch only) and prints one line
`SMOKE_JSON:{...}`; `parse_payload` reads it back. The scripts reach a testinfra host
through `/bin/sh` (`run_probe`), or a throwaway container through the engine (building.verify).
Several probes can share one interpreter (`combined_program`: one `import torch` for all of them), each
part's output after its own `SMOKE_PART:<name>` line (`split_parts`); a part that raises says so on a
`SMOKE_FAILED:` line and the next part still runs.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import testinfra.host


MARK = "SMOKE_JSON:"
PART_MARK = "SMOKE_PART:"  # a line `SMOKE_PART:<name>` starts a part of a combined run (combined_program)
FAILED_MARK = "SMOKE_FAILED:"  # a line `SMOKE_FAILED:<Type: message>`: that part raised (or exited non-zero)
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


# Runs each (name, source) of PARTS in a namespace of its own as `__main__`, in order, in this one interpreter;
# an exception (SystemExit with a status other than 0 too) ends that part alone, said on its FAILED line.
# Python 3.6 and later (the images' interpreters), standard library only.
_RUN_PARTS = """
import sys


def _one_line(exc):
    return " ".join((type(exc).__name__ + ": " + str(exc)).split())[:2000]


for _name, _source in PARTS:
    sys.stdout.flush()
    sys.stdout.write("\\n" + PART + _name + "\\n")
    sys.stdout.flush()
    _failure = None
    try:
        exec(compile(_source, _name + ".py", "exec", dont_inherit=True), {"__name__": "__main__"})
    except SystemExit as exc:
        if exc.code not in (None, 0):
            _failure = exc
    except BaseException as exc:
        _failure = exc
    sys.stdout.flush()
    if _failure is not None:
        sys.stdout.write("\\n" + FAILED + _one_line(_failure) + "\\n")
        sys.stdout.flush()
"""
_PART_NAME = re.compile(r"[a-z][a-z0-9_]*")


def combined_program(parts: Sequence[tuple[str, str]]) -> str:
    """A `python -c` program that runs each (name, source) in turn in one interpreter, each part's output
    after its `SMOKE_PART:<name>` line; a part that raises ends with a `SMOKE_FAILED:` line and the next runs."""
    for name, _ in parts:
        if not _PART_NAME.fullmatch(name):
            raise ValueError(f"a part's name is a lower-case identifier, not {name!r}")
    return f"PARTS = {list(parts)!r}\nPART = {PART_MARK!r}\nFAILED = {FAILED_MARK!r}\n{_RUN_PARTS}"


def combined_source(names: Sequence[str]) -> str:
    """`combined_program` of scripts/<name>.py for each name, in that order."""
    return combined_program([(name, probe_source(name)) for name in names])


def split_parts(stdout: str) -> dict[str, str]:
    """Each part's output in a combined run's stdout, by name: the lines after its `SMOKE_PART:<name>` line up
    to the next such line (a name given twice: its last part). What comes before the first is no part's."""
    parts: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        if line.startswith(PART_MARK):
            current = parts[line[len(PART_MARK) :].strip()] = []
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines) for name, lines in parts.items()}


def part_failure(text: str) -> str | None:
    """What a part of a combined run raised (its last `SMOKE_FAILED:` line), or None."""
    for line in reversed(text.splitlines()):
        if line.startswith(FAILED_MARK):
            return line[len(FAILED_MARK) :].strip() or "no message"
    return None


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
