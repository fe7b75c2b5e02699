"""Run the testinfra smoke suites (tests/smoke) against images, through a container each, or
against this machine (`--host local`); JUnit out, containers removed afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .combination import Combination, Image
from .engine import EngineError
from .verify import PythonRunner

SMOKE_DIR = Path(__file__).resolve().parent.parent / "tests" / "smoke"
SUITES = ("cpu", "gpu", "multi_gpu")
DEFAULT_SHM = "2g"
IMAGE_USER = "torch"


@dataclass(frozen=True)
class SmokeOptions:
    """How to run the suites."""

    suites: tuple[str, ...] = SUITES
    gpus: str = "auto"  # all | none | auto
    require_gpu: bool = False
    shm_size: str = DEFAULT_SHM
    python_exe: str = "python"


class ContainerEngine(PythonRunner, Protocol):
    """What the suites need of the engine."""

    def start_container(self, reference: str, *, gpus: bool, shm_size: str) -> str: ...

    def remove_container(self, name: str) -> None: ...

    def gpu_runtime_available(self) -> bool: ...


def image_document(combination: Combination, image: Image, reference: str) -> dict[str, Any]:
    """The SPEC.json the suites compare an image with (`reference` may be a temporary one)."""
    return {
        "tag": image.tag,
        "image": reference,
        "flavor": image.flavor,
        "torch": combination.torch,
        "torchvision": combination.torchvision,
        "torchaudio": combination.torchaudio,
        "cuda": combination.cuda,
        "cudnn": combination.cudnn,
        "nccl": combination.nccl,
        "python": combination.python,
        "os": combination.os.name,
        "min_driver": combination.min_driver,
        "user": IMAGE_USER,
        "labels": image.label_map(),
        "env": combination.nvidia_environment(),
    }


def junit_path(base: Path | None, tag: str, several: bool) -> Path | None:
    """One JUnit file per image: FILE as given for one image, FILE-<tag>.xml for several."""
    if base is None or not several:
        return base
    return base.with_name(f"{base.stem}-{tag}{base.suffix or '.xml'}")


def pytest_command(host: str, spec_file: Path, options: SmokeOptions, junit: Path | None) -> list[str]:
    """The pytest invocation of the suites (see tests/smoke/README.md)."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(SMOKE_DIR),
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(SMOKE_DIR),
        "--confcutdir",
        str(SMOKE_DIR),
        "-c",
        str(SMOKE_DIR / "pytest.ini"),
        f"--hosts={host}",
        "--image-spec",
        str(spec_file),
        "--python-exe",
        options.python_exe,
        "-m",
        " or ".join(options.suites),
        "-ra",
    ]
    if options.require_gpu:
        cmd.append("--require-gpu")
    if junit:
        cmd += ["--junitxml", str(junit)]
    return cmd


def run_pytest(
    host: str, document: dict[str, Any], options: SmokeOptions, junit: Path | None, capture: bool = False
) -> subprocess.CompletedProcess[str]:
    """Write the spec, run the suites; stream output unless captured."""
    with tempfile.TemporaryDirectory() as tmp:
        spec_file = Path(tmp) / "spec.json"
        spec_file.write_text(json.dumps(document, indent=2))
        return subprocess.run(
            pytest_command(host, spec_file, options, junit), text=True, check=False, capture_output=capture
        )


def wants_gpus(engine: ContainerEngine, gpus: str) -> bool:
    """`all` asks, `none` does not, `auto` asks when the engine has the NVIDIA runtime."""
    return engine.gpu_runtime_available() if gpus == "auto" else gpus == "all"


def run_suites_in_container(
    engine: ContainerEngine,
    document: dict[str, Any],
    options: SmokeOptions,
    junit: Path | None,
    capture: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run the suites in a fresh container of the document's image, removed afterwards."""
    reference = str(document["image"])
    try:
        name = engine.start_container(reference, gpus=wants_gpus(engine, options.gpus), shm_size=options.shm_size)
    except EngineError as exc:
        return subprocess.CompletedProcess([], 1, "", str(exc))
    try:
        return run_pytest(f"docker://{name}", document, options, junit, capture)
    finally:
        engine.remove_container(name)


def host_document(python_exe: str) -> dict[str, Any]:
    """The spec of this machine's own Python (tests/smoke/host_spec.py)."""
    result = subprocess.run([python_exe, str(SMOKE_DIR / "host_spec.py")], capture_output=True, text=True, check=True)
    return dict(json.loads(result.stdout))


def gate(engine: ContainerEngine, options: SmokeOptions) -> Any:
    """The builder's smoke gate: the suites must pass on the temporary image before it is tagged."""

    def run(combination: Combination, image: Image, reference: str) -> list[str]:
        document = image_document(combination, image, reference)
        result = run_suites_in_container(engine, document, options, None, capture=True)
        if result.returncode == 0:
            return []
        lines = [ln for ln in (result.stdout + result.stderr).splitlines() if ln.startswith(("FAILED", "ERROR", "E "))]
        return [f"smoke suites ({', '.join(options.suites)}) failed:", *(lines[-12:] or [result.stderr.strip()])]

    return run


def summary(results: Sequence[tuple[str, int]]) -> str:
    """One line per image tested."""
    return "\n".join(f"{'passed' if code == 0 else 'FAILED':7} {name}" for name, code in results)
