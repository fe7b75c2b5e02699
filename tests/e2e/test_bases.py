"""Registry bases locked to digests, through a mirror, against a real registry on loopback (Debian's
docker-registry) holding the bootstrapped Debian base under registry-base names; and `build.py doctor`
through the real CLI on this machine (no GPU, no public registry)."""

from __future__ import annotations

import io
import re
import shutil
import tarfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from torchimages.planning import bases

from .conftest import free_port, run_cli
from .test_push import registry  # noqa: F401  (the registry fixture)

pytestmark = pytest.mark.e2e

UBUNTU = "ubuntu:24.04"
TOOLKIT = "nvidia/cuda:12.6.3-devel-ubuntu24.04"  # CUDA 12.6's nvcc wheels hold only ptxas: devel needs it
SELECTION = "2.14.1-cuda13.0-cudnn9"
# What the doctor says of the GPU depends on the machine: these assertions hold where nvidia-smi is absent.
NO_GPU_HERE = shutil.which("nvidia-smi") is None
MATRIX = """\
    matrix:
      include:
        - {torch: 2.14.1, cuda: "13.0", os: ubuntu24.04}
        - {torch: 2.14.1, cuda: "13.0", os: debian12}
        - {torch: 2.14.1, cuda: "12.6", os: ubuntu24.04, flavors: [devel]}
    """


def push(client: Any, image: str, reference: str) -> str:
    """Push a local image under `reference`; the digest the registry stored it under."""
    repository, tag = reference.rsplit(":", 1)
    client.images.get(image).tag(repository, tag)
    digest = ""
    for line in client.images.push(repository, tag, stream=True, decode=True):
        assert "error" not in line, line
        digest = (line.get("aux") or {}).get("Digest", digest)  # the classic store's
        said = re.search(r": digest: (sha256:[0-9a-f]{64}) size:", str(line.get("status") or ""))
        digest = said.group(1) if said else digest  # the containerd store says it in a status line only
    assert digest.startswith("sha256:"), f"no digest reported for {reference}"
    return digest


def tiny_image(client: Any, name: str) -> str:
    """A one-file image (a different manifest than the Debian base); its id."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        info = tarfile.TarInfo("marker")
        info.size = len(name)
        tar.addfile(info, io.BytesIO(name.encode()))
    repository, tag = name.rsplit(":", 1)
    client.api.import_image_from_data(data.getvalue(), repository=repository, tag=tag)
    return str(client.images.get(name).id)


def failed_checks(doctor_output: str) -> set[str]:
    """The checks `doctor` failed, less "free disk": that one tells how full this machine's disk is (the other
    worker's CUDA build may hold 12 GB of it), which no test here sets; tests/unit/test_doctor.py tests that check."""
    summary = [line for line in doctor_output.splitlines() if line.startswith("doctor: ") and " failed (" in line]
    names = set(summary[-1].split(" failed (", 1)[1].rstrip(")").split(", ")) if summary else set()
    return names - {"free disk"}


@pytest.fixture(scope="module")
def mirror(docker_client: Any, registry: str, debian_base: str) -> Iterator[dict[str, str]]:  # noqa: F811
    """The loopback registry holding the Debian base as ubuntu:24.04 and as an nvidia/cuda devel image."""
    names = {UBUNTU: f"{registry}/library/{UBUNTU}", TOOLKIT: f"{registry}/{TOOLKIT}"}
    try:
        yield {name: push(docker_client, debian_base, pushed) for name, pushed in names.items()}
    finally:
        for pushed in names.values():
            docker_client.images.remove(pushed)


@pytest.fixture
def matrix(tmp_path: Path) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(textwrap.dedent(MATRIX))
    return path


def wheels_here(matrix: Path, *selectors: str) -> list[str | Path]:
    """Doctor's arguments that serve every wheel the selected images pin from a folder of this test (empty files
    of the right names): its "wheel sources" check passes on any machine, with no index asked."""
    from torchimages.building.wheels import WheelSources
    from torchimages.kb import reach
    from torchimages.planning import plan

    folder = matrix.parent / "wheels"
    folder.mkdir(exist_ok=True)
    for need in reach.needs(plan.select(plan.load(matrix), list(selectors)), WheelSources()):
        python = "cp" + need.python.replace(".", "")
        (folder / f"{need.project}-{need.version}-{python}-{python}-manylinux_2_28_x86_64.whl").touch()
    return ["--find-links", folder]


def test_lock_bases_pins_every_registry_base_through_the_mirror(
    matrix: Path,
    mirror: dict[str, str],
    registry: str,  # noqa: F811
    docker_client: Any,
) -> None:
    locked = run_cli("lock", "--bases", "--matrix", matrix, "--base-registry", registry)
    assert locked.returncode == 0, locked.stderr
    lock = yaml.safe_load(bases.lock_path(matrix).read_text())
    assert lock == {"bases": {UBUNTU: mirror[UBUNTU], TOOLKIT: mirror[TOOLKIT]}}
    dockerfiles = {p.parent.name: p.read_text() for p in (matrix.parent / "images").glob("*/Dockerfile")}
    ubuntu = dockerfiles["2.14.1-cuda13.0-py3.12-ubuntu24.04"]
    assert f"FROM {registry}/library/{UBUNTU}@{mirror[UBUNTU]} AS runtime" in ubuntu
    assert "FROM runtime AS devel" in ubuntu  # CUDA 13's nvcc comes from the wheels: no toolkit image
    assert f"FROM {registry}/{TOOLKIT}@{mirror[TOOLKIT]} AS devel" in dockerfiles["2.14.1-cuda12.6-py3.12-ubuntu24.04"]
    assert "FROM torchimages/bootstrap-debian:12 AS runtime" in dockerfiles["2.14.1-cuda13.0-py3.11-debian12"]
    pinned = f"{registry}/library/ubuntu@{lock['bases'][UBUNTU]}"
    pulled = docker_client.images.pull(pinned)  # the engine pulls exactly what FROM names
    try:
        assert pulled.id == docker_client.images.get("torchimages/bootstrap-debian:12").id
    finally:
        docker_client.images.remove(pinned)
    check = run_cli("lock", "--bases", "--check", "--matrix", matrix, "--base-registry", registry)
    assert check.returncode == 0, check.stderr
    rendered = run_cli("render", "--check", "--matrix", matrix, "--base-registry", registry)
    assert rendered.returncode == 0, rendered.stderr
    assert "not locked" not in rendered.stderr


def test_a_moved_tag_makes_the_lock_stale(
    matrix: Path,
    mirror: dict[str, str],
    registry: str,  # noqa: F811
    docker_client: Any,
) -> None:
    assert run_cli("lock", "--bases", "--matrix", matrix, "--base-registry", registry).returncode == 0
    other = tiny_image(docker_client, f"torchimages-e2e-{matrix.parent.name.lower()[-8:]}/other:1")
    try:
        moved = push(docker_client, other, f"{registry}/library/{UBUNTU}")
        check = run_cli("lock", "--bases", "--check", "--matrix", matrix, "--base-registry", registry)
        assert check.returncode == 1, check.stdout
        assert f"stale: {UBUNTU}: locked {mirror[UBUNTU]}, the registry serves {moved}" in check.stderr
        assert "run `python build.py lock --bases`" in check.stderr
    finally:
        push(docker_client, "torchimages/bootstrap-debian:12", f"{registry}/library/{UBUNTU}")  # put it back
        docker_client.images.remove(other, force=True)  # its tag and the registry digest it was pushed under


def test_a_base_the_registry_lacks_writes_nothing(
    tmp_path: Path,
    mirror: dict[str, str],
    registry: str,  # noqa: F811
) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text("matrix:\n  include:\n    - {torch: 2.7.1, cuda: '12.6', os: ubuntu22.04}\n")
    result = run_cli("lock", "--bases", "--matrix", path, "--base-registry", registry)
    assert result.returncode == 1
    assert f"error: {registry}/library/ubuntu:22.04: {registry} has no such manifest (HTTP 404)" in result.stderr
    assert "nothing written" in result.stderr
    assert not bases.lock_path(path).exists()


def test_doctor_passes_with_the_mirror_and_says_there_is_no_gpu(
    matrix: Path,
    mirror: dict[str, str],
    registry: str,  # noqa: F811
) -> None:
    assert run_cli("lock", "--bases", "--matrix", matrix, "--base-registry", registry).returncode == 0
    wheels = wheels_here(matrix, f"{SELECTION}-runtime")
    result = run_cli("doctor", "--matrix", matrix, "--base-registry", registry, *wheels, f"{SELECTION}-runtime")
    assert failed_checks(result.stdout) == set(), result.stdout + result.stderr
    assert "ok    registry bases" in result.stdout and "each locked to a digest" in result.stdout
    if NO_GPU_HERE:
        assert "skip  NVIDIA driver" in result.stdout and "no NVIDIA GPU here" in result.stdout
    assert result.returncode == (1 if "FAIL  free disk" in result.stdout else 0), result.stdout


def test_doctor_without_a_registry_fails_ubuntu_and_passes_debian(matrix: Path) -> None:
    # A registry of its own that does not answer (nothing listens on the port), so that no image already on this
    # engine (an `ubuntu:24.04` pulled by anyone) can stand in for the base.
    unreachable = f"127.0.0.1:{free_port()}"
    wheels = wheels_here(matrix, f"{SELECTION}-runtime", f"{SELECTION}-runtime-debian12")
    ubuntu = run_cli("doctor", "--matrix", matrix, "--base-registry", unreachable, *wheels, f"{SELECTION}-runtime")
    assert ubuntu.returncode == 1, ubuntu.stdout
    assert f"FAIL  registry bases            not reachable and not present here: {unreachable}/" in ubuntu.stdout
    assert f"{unreachable} does not answer" in ubuntu.stdout
    assert "fix: make the registry reachable, or mirror the bases and pass --base-registry" in ubuntu.stdout
    assert not NO_GPU_HERE or "no NVIDIA GPU here" in ubuntu.stdout
    assert failed_checks(ubuntu.stdout) == {"registry bases"}, ubuntu.stdout
    debian = run_cli("doctor", "--matrix", matrix, *wheels, f"{SELECTION}-runtime-debian12")
    assert failed_checks(debian.stdout) == set(), debian.stdout
    assert debian.returncode == (1 if "FAIL  free disk" in debian.stdout else 0), debian.stdout
    assert "ok    registry bases            none needed" in debian.stdout
    if NO_GPU_HERE:
        required = run_cli("doctor", "--matrix", matrix, "--require-gpu", *wheels, f"{SELECTION}-runtime-debian12")
        assert required.returncode == 1
        assert "FAIL  NVIDIA driver" in required.stdout
        assert "install an NVIDIA GPU driver >= 580.65.06" in required.stdout
