"""`build.py test --image REF`: the smoke suites against any local image, not only matrix images.

One CPU runtime image is built for the module; an image built FROM it (one extra layer) stands for a
team's derived image, and the bootstrapped debian12 base for a foreign image without our labels.
"""

from __future__ import annotations

import base64
import hashlib
import json
import signal
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from torchimages import engine

from .conftest import ROOT, Built, run_cli

pytestmark = pytest.mark.e2e
FOREIGN = "torchimages/bootstrap-debian:12"  # built by the module's build (the debian12 base): no torch labels
NULLS = dict.fromkeys(("image", "flavor", "torchvision", "torchaudio", "cuda", "cudnn", "nccl", "min_driver", "user"))


@pytest.fixture(scope="module")
def built(cpu_built: Built) -> Built:
    """The run's one build of the CPU combination (conftest.cpu_built); this module uses its runtime."""
    return cpu_built


@pytest.fixture(scope="module")
def runtime(built: Built) -> str:
    assert built.status == 0, built.output
    return built.image("runtime").reference


@pytest.fixture(scope="module")
def derived(runtime: str, docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A team's image: FROM ours plus one layer, built with BuildKit (it inherits our labels)."""
    context = tmp_path_factory.mktemp("derived")
    (context / "Dockerfile").write_text(f"FROM {runtime}\nRUN echo hi > /tmp/x\n")
    reference = f"torchimages-e2e-derived-{uuid.uuid4().hex[:8]}:1"
    client = engine.find_build_client()
    command = [*client.command, "--tag", reference, str(context)]
    result = subprocess.run(command, env=client.environment(), capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    try:
        yield reference
    finally:
        docker_client.images.remove(reference)


def test_our_image_by_reference_passes_with_the_spec_from_its_labels(runtime: str, tmp_path: Path) -> None:
    junit = tmp_path / "j.xml"
    result = run_cli("test", "--image", runtime, "--suites", "cpu", "--junit", junit)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert f"{runtime}: spec read from its io.torchimages.* labels" in result.stdout
    assert "inherited" not in result.stdout
    assert f"passed  {runtime}" in result.stdout
    assert 'failures="0"' in junit.read_text() and "test_cpu_versions" in junit.read_text()


def test_a_derived_image_passes_with_the_labels_inherited_from_its_base(derived: str, built: Built) -> None:
    result = run_cli("test", "--image", derived, "--suites", "cpu")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # the base named by its image id: another test's identical build may hold the same image under its own tag
    base = built.ids["runtime"][:19]
    assert f"{derived}: spec read from its io.torchimages.* labels (inherited from its base " in output
    assert f", {base}: it was built FROM one of ours)" in output
    assert f"passed  {derived}" in result.stdout


def test_a_foreign_image_without_labels_or_spec_is_refused_naming_both_ways(built: Built) -> None:
    result = run_cli("test", "--image", FOREIGN, "--suites", "cpu")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "has no io.torchimages.* labels" in result.stderr
    assert "build it FROM one of our images" in result.stderr and "--spec FILE" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_foreign_image_with_a_spec_file_is_tested(built: Built, tmp_path: Path) -> None:
    """Accepted and its suites run (they fail: the base has no Python with torch)."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"tag": "foreign", "torch": "2.13.0", "python": "3.11", "os": "debian12"} | NULLS))
    result = run_cli("test", "--image", FOREIGN, "--spec", spec, "--suites", "cpu")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert f"{FOREIGN}: spec read from {spec}" in result.stdout
    assert f"FAILED  {FOREIGN}" in result.stdout and "test_cpu_versions.py" in result.stdout


def test_a_bad_spec_file_or_a_missing_image_is_a_usage_error(runtime: str, tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"tag": "x", "torch": "two"}))
    bad = run_cli("test", "--image", runtime, "--spec", spec)
    assert bad.returncode == 2 and f"{spec}: error: the spec file (--spec): key" in bad.stderr, bad.stderr
    missing = run_cli("test", "--image", "torchimages-e2e-no-such-image:nope")
    assert missing.returncode == 2
    assert "no such image here: torchimages-e2e-no-such-image:nope" in missing.stderr
    assert "Traceback" not in bad.stderr + missing.stderr


@dataclass(frozen=True)
class Run:
    """A `build.py test` run and the image's containers before it."""

    result: subprocess.CompletedProcess[str]
    containers_before: set[str]


@pytest.fixture(scope="module")
def as_root(runtime: str, docker_client: Any) -> Run:
    """The module's one run whose suites fail: `--run-arg=--user=0 --ipc=host` (the not-root check fails)."""
    before = containers_of(docker_client, runtime)
    return Run(run_cli("test", "--image", runtime, "--suites", "cpu", "--run-arg=--user=0 --ipc=host"), before)


def test_run_args_reach_docker_run(as_root: Run) -> None:
    """--user=0 makes the suite's not-root check fail naming uid 0: the option was applied."""
    result = as_root.result
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "the image runs as root (uid 0, root)" in output
    assert "FAILED" in result.stdout and "test_default_user_is_not_root" in result.stdout


def test_an_invalid_run_arg_is_a_clear_error_for_matrix_images_too(built: Built) -> None:
    tag = built.image("runtime").tag
    result = run_cli("test", "--matrix", built.plan.matrix_path, "--suites", "cpu", "--run-arg=--no-such-flag", tag)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "could not start a container" in result.stderr and "--no-such-flag" in result.stderr
    assert "Traceback" not in result.stderr
    assert f"FAILED  {built.image('runtime').reference}" in result.stdout


def containers_of(client: Any, image: str) -> set[str]:
    """Containers started from the reference `image` (this run's own repository). Not `ancestor`: that matches
    the image id, which another test's identical build (in another worker, at the same time) shares."""
    listed = client.containers.list(all=True, sparse=True)
    return {str((c.attrs.get("Names") or [c.id])[0]).lstrip("/") for c in listed if c.attrs.get("Image") == image}


@pytest.mark.parametrize("run_arg", ["--name=torchimages-e2e-taken", "--name torchimages-e2e-taken", "-itd", "--rm"])
def test_run_args_that_take_the_container_are_refused_before_any_starts(
    runtime: str, docker_client: Any, run_arg: str
) -> None:
    before = containers_of(docker_client, runtime)
    result = run_cli("test", "--image", runtime, "--suites", "cpu", f"--run-arg={run_arg}")
    assert result.returncode == 2 and "cannot be given" in result.stderr, result.stdout + result.stderr
    assert containers_of(docker_client, runtime) == before


def test_the_container_goes_when_the_suites_fail_or_the_run_is_interrupted(
    runtime: str, docker_client: Any, as_root: Run
) -> None:
    before = as_root.containers_before
    assert as_root.result.returncode == 1, as_root.result.stdout + as_root.result.stderr
    assert containers_of(docker_client, runtime) == before, "a failed suite left its container"
    command = [sys.executable, str(ROOT / "build.py"), "test", "--image", runtime, "--suites", "cpu"]
    running = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not containers_of(docker_client, runtime) - before and time.monotonic() < deadline:
            time.sleep(0.2)
        assert containers_of(docker_client, runtime) - before, "no container started"
        time.sleep(1)
        running.send_signal(signal.SIGINT)
        running.wait(60)
    finally:
        running.kill()
    assert containers_of(docker_client, runtime) == before, "an interrupted run left its container"


# Derived images keep the promise (issue 33): the image's constraints file (PIP_CONSTRAINT) holds torch and its
# libraries as built. Wheels made here (metadata and one module, no network): an ordinary package, and a torch
# of another version.
def _wheel(folder: Path, name: str, version: str) -> None:
    """A minimal pure-Python wheel `name==version` whose module says its version."""
    dist = f"{name}-{version}"
    files = {
        f"{name}/__init__.py": f"__version__ = {version!r}\n",
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}.dist-info/RECORD,,")
    with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as archive:
        for path, text in {**files, f"{dist}.dist-info/RECORD": "\n".join(record) + "\n"}.items():
            archive.writestr(path, text)


@dataclass(frozen=True)
class Derived:
    """A `docker build` of one RUN line FROM our runtime, with the wheels above bound at /tmp/wheels."""

    reference: str
    result: subprocess.CompletedProcess[str]

    @property
    def output(self) -> str:
        return self.result.stdout + self.result.stderr


@pytest.fixture(scope="module")
def derive(runtime: str, docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Build derived images; each is removed at the end of the module."""
    context = tmp_path_factory.mktemp("derive")
    (context / "wheels").mkdir()
    _wheel(context / "wheels", "ordinary", "1.0")
    _wheel(context / "wheels", "torch", "2.12.0")
    made: list[str] = []

    def build(run: str) -> Derived:
        reference = f"torchimages-e2e-derived-{uuid.uuid4().hex[:8]}:1"
        mount = "--mount=type=bind,source=wheels,target=/tmp/wheels"
        (context / "Dockerfile").write_text(f"FROM {runtime}\nRUN {mount} {run}\n")
        client = engine.find_build_client()
        command = [*client.command, "--progress", "plain", "--tag", reference, str(context)]
        result = subprocess.run(command, env=client.environment(), capture_output=True, text=True, check=False)
        if result.returncode == 0:
            made.append(reference)
        return Derived(reference, result)

    try:
        yield build
    finally:
        for reference in made:
            docker_client.images.remove(reference, force=True)


PIP = "pip install --no-cache-dir --no-index --find-links /tmp/wheels"


def test_a_derived_image_installs_an_ordinary_package_and_is_refused_another_torch(derive: Any, built: Built) -> None:
    ordinary = derive(f"{PIP} ordinary==1.0 && python -c 'import ordinary, torch; print(ordinary.__version__)'")
    assert ordinary.result.returncode == 0, ordinary.output
    pinned = built.combination.pins[0]  # torch==2.13.0+cpu, as built
    refused = derive(f"{PIP} torch==2.12.0")
    assert refused.result.returncode != 0, refused.output
    assert "The user requested torch==2.12.0" in refused.output, refused.output
    assert f"The user requested (constraint) {pinned}" in refused.output, refused.output


def test_a_derived_image_that_lifted_the_constraint_fails_verification_naming_what_changed(
    derive: Any, built: Built
) -> None:
    lifted = derive(f"PIP_CONSTRAINT= {PIP} torch==2.12.0")
    assert lifted.result.returncode == 0, lifted.output
    result = run_cli("test", "--image", lifted.reference, "--suites", "cpu")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    built_with = built.combination.pins[0].split("==")[1]  # 2.13.0+cpu
    assert "the image no longer has what it was built with:" in output, output
    assert f"torch: the image was built with {built_with}, it now has 2.12.0" in output, output
    assert "Traceback" not in result.stderr
