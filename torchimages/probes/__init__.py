"""Probe scripts (package data in scripts/) and running them in the host under test.

A probe runs with the host's own Python (stdlib + torch only) and prints one line
`SMOKE_JSON:{...}`; `parse_payload` reads it back. The scripts reach a testinfra host
through `/bin/sh` (`run_probe`), or a throwaway container through the engine (building.verify).
Several probes can share one interpreter (`combined_program`: one `import torch` for all of them), each
part's output after its own `SMOKE_PART:<nonce>:<name>` line and the run's end on `SMOKE_END:<nonce>`
(`split_parts`); a part that raises says so on a `SMOKE_FAILED:` line and the next part still runs. The nonce
is the host's, new for each run (`new_nonce`): a mark without it is the image's noise, not a part. The nonce
guards against accidents only (a mark in the image's own output, a part repeated, output after the end); it is
no defence against code in the image written to deceive, which runs in the same interpreter, can read the
nonce (it is in the program's text, so in argv: /proc/self/cmdline, sys.orig_argv), print parts of its own
and the end mark, and exit: a probe's answer is the image's word.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import testinfra.host


MARK = "SMOKE_JSON:"
PART_MARK = "SMOKE_PART:"  # a line `SMOKE_PART:<nonce>:<name>` starts a part of a combined run (combined_program)
END_MARK = "SMOKE_END:"  # a line `SMOKE_END:<nonce>`: the combined program ran all its parts; what follows is no part's
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
sys.stdout.write("\\n" + END + "\\n")
sys.stdout.flush()
"""
_PART_NAME = re.compile(r"[a-z][a-z0-9_]*")
_NONCE = re.compile(r"[0-9a-f]{32}")
_PROGRAM_NONCE = re.compile(r"^PART = 'SMOKE_PART:([0-9a-f]{32}):'$", re.MULTILINE)


def new_nonce() -> str:
    """A fresh random nonce for one combined run's marks (32 hex digits)."""
    return secrets.token_hex(16)


def combined_program(parts: Sequence[tuple[str, str]], nonce: str) -> str:
    """A `python -c` program that runs each (name, source) in turn in one interpreter, each part's output
    after its `SMOKE_PART:<nonce>:<name>` line, then `SMOKE_END:<nonce>`; a part that raises ends with a
    `SMOKE_FAILED:` line and the next runs."""
    if not _NONCE.fullmatch(nonce):
        raise ValueError(f"a run's nonce is 32 hex digits (new_nonce), not {nonce!r}")
    for name, _ in parts:
        if not _PART_NAME.fullmatch(name):
            raise ValueError(f"a part's name is a lower-case identifier, not {name!r}")
    return (
        f"PARTS = {list(parts)!r}\nPART = {PART_MARK + nonce + ':'!r}\nFAILED = {FAILED_MARK!r}\n"
        f"END = {END_MARK + nonce!r}\n{_RUN_PARTS}"
    )


def program_nonce(program: str) -> str | None:
    """The nonce a `combined_program` text carries, or None (for a fake engine that answers as the program)."""
    found = _PROGRAM_NONCE.search(program)
    return found.group(1) if found else None


def combined_source(names: Sequence[str], nonce: str) -> str:
    """`combined_program` of scripts/<name>.py for each name, in that order."""
    return combined_program([(name, probe_source(name)) for name in names], nonce)


@dataclass(frozen=True)
class Split:
    """A combined run's stdout read by its marks: each part's outputs by name (more than one: the name was
    given twice, which no honest run does) and whether the run's end mark came."""

    outputs: Mapping[str, tuple[str, ...]]
    ended: bool


def split_parts(stdout: str, nonce: str) -> Split:
    """Each part's output in a combined run's stdout, by name: the lines after its `SMOKE_PART:<nonce>:<name>`
    line up to the next such line or `SMOKE_END:<nonce>`. Lines without the nonce are the part's text, never
    marks; what comes before the first part and after the end is no part's."""
    part, end = PART_MARK + nonce + ":", END_MARK + nonce
    outputs: dict[str, list[list[str]]] = {}
    current: list[str] | None = None
    ended = False
    for line in stdout.splitlines():
        if line.strip() == end:
            ended = True
        elif ended:
            continue  # after the program's own end: an atexit hook's, the image's, never a part's
        elif line.startswith(part):
            current = []
            outputs.setdefault(line[len(part) :].strip(), []).append(current)
        elif current is not None:
            current.append(line)
    joined = {name: tuple("\n".join(lines) for lines in blocks) for name, blocks in outputs.items()}
    return Split(joined, ended)


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
