"""Run the smoke suites against an image (a fresh container each, removed afterwards) or against
this machine (`local://`); JUnit out. The suites are found as a package, never by a path:
`python -m pytest -p torchimages.smoke.plugin --pyargs torchimages.smoke.suites ...`."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from torchimages import stopping, textfile
from torchimages.building.overlap import NO_START, SmokeStart
from torchimages.engine import EngineError, container_name, run_cancellable
from torchimages.probes import parse_payload, probe_source
from torchimages.smoke import SUITES
from torchimages.smoke.document import host_document as document_of_host
from torchimages.smoke.document import image_document

if TYPE_CHECKING:
    from torchimages.building.verify import Facts
    from torchimages.combination import Combination, Image

PLUGIN = "torchimages.smoke.plugin"
SUITES_PACKAGE = "torchimages.smoke.suites"
DEFAULT_SHM = "2g"


class ContainerEngine(Protocol):
    """What the runner needs from the engine (engine.DockerEngine)."""

    def start_container(
        self, reference: str, *, name: str, gpus: bool, shm_size: str, run_args: Sequence[str] = ()
    ) -> None: ...

    def remove_container(self, name: str) -> None: ...

    def gpu_runtime_available(self) -> bool: ...


@dataclass(frozen=True)
class SmokeOptions:
    """How to run the suites."""

    suites: tuple[str, ...] = SUITES
    gpus: str = "auto"  # all | none | auto
    require_gpu: bool = False
    shm_size: str = DEFAULT_SHM
    python_exe: str = "python"
    run_args: tuple[str, ...] = ()  # extra `docker run` options, one token each (engine.split_run_args)


def junit_path(base: Path | None, tag: str, several: bool) -> Path | None:
    """One JUnit file per image: FILE as given for one image, FILE-<tag>.xml for several."""
    if base is None or not several:
        return base
    return base.with_name(f"{base.stem}-{tag}{base.suffix or '.xml'}")


def junit_in(folder: Path, tag: str) -> Path:
    """The JUnit file of one image's suites in a folder (the builder's gate and `--report` write there)."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in tag)
    return folder / f"{safe}.xml"


def package_dir() -> str:
    """The installed torchimages.smoke folder: the suites' rootdir (short node ids, no stray config)."""
    return str(resources.files("torchimages.smoke"))


def pytest_command(
    host: str, spec_file: Path, options: SmokeOptions, junit: Path | None, facts_file: Path | None = None
) -> list[str]:
    """The pytest invocation of the suites (see docs/smoke-suites.md)."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        PLUGIN,
        "--pyargs",
        SUITES_PACKAGE,
        "-p",
        "no:cacheprovider",
        "-c",
        os.devnull,
        "--rootdir",
        package_dir(),
        "--confcutdir",
        package_dir(),
        f"--hosts={host}",
        "--image-spec",
        str(spec_file),
        "--python-exe",
        options.python_exe,
        "-m",
        " or ".join(options.suites),
        "-ra",
    ]
    if facts_file is not None:
        cmd += ["--facts", str(facts_file)]
    if options.require_gpu:
        cmd.append("--require-gpu")
    if junit:
        cmd += ["--junitxml", str(junit)]
    return cmd


def run_suites(
    host: str,
    document: Mapping[str, Any],
    options: SmokeOptions,
    junit: Path | None,
    capture: bool = False,
    facts: Mapping[str, Any] | None = None,
    cancelled: threading.Event | None = None,
) -> subprocess.CompletedProcess[str]:
    """Write the spec (and facts already read), run the suites against a testinfra host URL; once
    `cancelled` is set, pytest (in its own process group, with what it started) is stopped. pytest writes
    its JUnit file beside `junit`, which it replaces once pytest has ended: whole, or not at all."""
    written = junit.with_name(f".{junit.name}.{os.getpid()}.tmp") if junit else None
    with tempfile.TemporaryDirectory() as tmp:
        spec_file = Path(tmp) / "spec.json"
        spec_file.write_text(json.dumps(document, indent=2))
        facts_file = None
        if facts is not None:
            facts_file = Path(tmp) / "facts.json"
            facts_file.write_text(json.dumps(dict(facts)))
        command = pytest_command(host, spec_file, options, written, facts_file)
        try:
            if cancelled is None:
                result = subprocess.run(command, text=True, check=False, capture_output=capture)
            else:
                pipe = subprocess.PIPE if capture else None
                result = run_cancellable(command, cancelled, text=True, stdout=pipe, stderr=pipe)
            if junit and written and written.exists():
                with stopping.held():
                    textfile.put_in_place(written, junit)
            return result
        finally:
            if written:
                written.unlink(missing_ok=True)


def wants_gpus(engine: ContainerEngine, gpus: str) -> bool:
    """`all` asks, `none` does not, `auto` asks when the engine has the NVIDIA runtime."""
    if gpus == "auto":
        return engine.gpu_runtime_available()
    return gpus == "all"


def run_suites_in_container(
    engine: ContainerEngine,
    document: Mapping[str, Any],
    options: SmokeOptions,
    junit: Path | None,
    capture: bool = False,
    facts: Facts | None = None,
    cancelled: threading.Event | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the suites in a fresh container of the document's image (which may be a temporary reference).

    `facts`, the facts probe's answer verification already read from the same image, is
    reused instead of probing again when the container has no GPU (then torch sees the same).
    The container is removed whatever happens: failure, `cancelled`, KeyboardInterrupt.
    """
    reference = str(document["image"])
    gpus = wants_gpus(engine, options.gpus)
    name = container_name("smoke")  # named before it is made: removed by this name, however its start ends
    try:
        try:
            engine.start_container(
                reference, name=name, gpus=gpus, shm_size=options.shm_size, run_args=options.run_args
            )
        except EngineError as exc:
            return subprocess.CompletedProcess([], 1, "", f"could not start a container of {reference}: {exc}")
        reused = None if gpus or facts is None else facts.raw
        return run_suites(f"docker://{name}", document, options, junit, capture, reused, cancelled)
    finally:
        with stopping.held():  # a second signal does not cut the removal short
            engine.remove_container(name)


def host_document(python_exe: str, tag: str = "local-host") -> dict[str, Any]:
    """The spec of this machine's own Python: the facts probe run with it, decoded."""
    result = subprocess.run([python_exe, "-c", probe_source("facts")], capture_output=True, text=True, check=True)
    raw = parse_payload(result.stdout)
    if not isinstance(raw, dict) or raw.get("import_torch_error"):
        reason = raw.get("import_torch_error") if isinstance(raw, dict) else result.stdout[-500:]
        raise ValueError(f"{python_exe} cannot describe its torch: {reason}")
    return document_of_host(raw, tag)


class Gate(Protocol):
    """The builder's smoke gate (builder.SmokeGate); `start` is told when its suites wait for the GPUs and run."""

    def __call__(
        self, combination: Combination, image: Image, reference: str, facts: Facts, start: SmokeStart = ..., /
    ) -> list[str]: ...


def smoke_gate(
    options: SmokeOptions,
    engine: ContainerEngine,
    cancelled: threading.Event | None = None,
    junit_dir: Path | None = None,
) -> Gate:
    """The builder's smoke gate: the suites must pass on the temporary image before it is tagged.
    `cancelled` (the builder's) stops a running gate: its pytest and container go at once. With `junit_dir`,
    each image's results go to its JUnit file there (`junit_in`). Suites whose containers get the GPUs run one at a
    time (devel's checks overlap runtime's, `--jobs` overlaps combinations): two at once on the same GPUs would halve
    each other's throughput figures and fail an image for a slowness that is not its own."""
    gpus_held = threading.Lock()

    def gate(
        combination: Combination, image: Image, reference: str, facts: Facts, start: SmokeStart = NO_START
    ) -> list[str]:
        document = image_document(combination, image, reference)
        junit = junit_in(junit_dir, image.own_tag) if junit_dir else None
        with _held(gpus_held, start) if wants_gpus(engine, options.gpus) else contextlib.nullcontext():
            start.started()  # the smoke phase's own time starts here, not while waiting for the GPUs
            result = run_suites_in_container(engine, document, options, junit, True, facts, cancelled)
        if result.returncode == 0:
            return []
        output = (result.stdout + result.stderr).splitlines()
        # One summary line per failed test (-ra); the assertion lines only when there is none.
        lines = [ln for ln in output if ln.startswith(("FAILED", "ERROR"))] or [
            ln for ln in output if ln.startswith("E ")
        ][-12:]
        return [f"smoke suites ({', '.join(options.suites)}) failed:", *(lines[:40] or [_no_failed_test(result)])]

    return gate


@contextlib.contextmanager
def _held(lock: threading.Lock, start: SmokeStart) -> Iterator[None]:
    """`lock` held; `start.waiting()` said first when another image's suites hold it."""
    if not lock.acquire(blocking=False):
        start.waiting()
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


# pytest's exit statuses other than 0 (passed) and 1 (tests failed).
_PYTEST_EXITS = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no test ran"}


def _no_failed_test(result: subprocess.CompletedProcess[str]) -> str:
    """Why a run that names no failed test is no pass: its stderr's end, else its exit status."""
    status = result.returncode
    meaning = _PYTEST_EXITS.get(status) or (f"killed by signal {-status}" if status < 0 else "")
    said = result.stderr.strip()[-2000:]
    return said or f"pytest exited with status {status}{f' ({meaning})' if meaning else ''} and named no failed test"


def summary(results: Sequence[tuple[str, int]]) -> str:
    """One line per image tested."""
    return "\n".join(f"{'passed' if code == 0 else 'FAILED':7} {name}" for name, code in results)
