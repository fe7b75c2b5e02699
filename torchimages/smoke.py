"""Run the testinfra smoke suites (tests/smoke) against images, through a container each, or
against this machine (`--host local`); JUnit out, containers removed afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker.errors
import docker.types

from .spec import ImageSpec

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


def spec_document(spec: ImageSpec, image: str) -> dict[str, Any]:
    """The SPEC.json the suites compare an image with."""
    return {
        "tag": spec.tag,
        "image": image,
        "flavor": spec.flavor,
        "torch": spec.torch,
        "torchvision": spec.torchvision,
        "torchaudio": spec.torchaudio,
        "cuda": spec.cuda,
        "cudnn": spec.cudnn,
        "nccl": spec.nccl,
        "python": spec.python,
        "os": spec.os.name,
        "min_driver": spec.min_driver,
        "user": IMAGE_USER,
        "labels": spec.labels(),
        "env": spec.environment(),
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


def wants_gpus(client: Any, gpus: str) -> bool:
    """`all` asks, `none` does not, `auto` asks when the engine has the NVIDIA runtime."""
    if gpus == "auto":
        return "nvidia" in (client.info().get("Runtimes") or {})
    return gpus == "all"


def start_container(client: Any, image: str, options: SmokeOptions) -> Any:
    """A long-running container of the image, with GPUs and shared memory as asked."""
    requests = (
        [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])] if wants_gpus(client, options.gpus) else []
    )
    return client.containers.run(
        image,
        ["sleep", "infinity"],
        detach=True,
        name=f"torchimages-smoke-{uuid.uuid4().hex[:10]}",
        shm_size=options.shm_size,
        device_requests=requests,
        network_mode="none",
    )


def test_image(
    client: Any, spec: ImageSpec, image: str, options: SmokeOptions, junit: Path | None, capture: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the suites in a fresh container of `image` (which may be a temporary reference)."""
    try:
        container = start_container(client, image, options)
    except docker.errors.APIError as exc:
        return subprocess.CompletedProcess([], 1, "", f"could not start a container of {image}: {exc}")
    try:
        return run_pytest(f"docker://{container.name}", spec_document(spec, image), options, junit, capture)
    finally:
        container.remove(force=True)


def host_document(python_exe: str) -> dict[str, Any]:
    """The spec of this machine's own Python (tests/smoke/host_spec.py)."""
    result = subprocess.run([python_exe, str(SMOKE_DIR / "host_spec.py")], capture_output=True, text=True, check=True)
    return dict(json.loads(result.stdout))


def check(options: SmokeOptions, client: Any) -> Any:
    """A pre-tag check for the builder: the suites must pass on the temporary image."""

    def run(spec: ImageSpec, reference: str) -> list[str]:
        result = test_image(client, spec, reference, options, None, capture=True)
        if result.returncode == 0:
            return []
        lines = [ln for ln in (result.stdout + result.stderr).splitlines() if ln.startswith(("FAILED", "ERROR", "E "))]
        return [f"smoke suites ({', '.join(options.suites)}) failed:", *lines[-12:]]

    return run


def summary(results: Sequence[tuple[str, int]]) -> str:
    """One line per image tested."""
    return "\n".join(f"{'passed' if code == 0 else 'FAILED':7} {name}" for name, code in results)
