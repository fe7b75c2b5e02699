"""Ubuntu 22.04 (Python 3.10) on a base bootstrapped from Ubuntu's archive, and the image-based devel path.

torch 2.6.0 with CUDA 12.4, both flavors, wheels from PyPI (its default build is cu124). NVIDIA's nvcc wheels of
CUDA 12.4 hold only ptxas, so devel starts from `nvidia/cuda:12.4.1-devel-ubuntu22.04`, which Docker Hub serves
and this machine cannot reach. That image is a STAND-IN here, made by this test from the bootstrapped Ubuntu
22.04 base and tagged with NVIDIA's name: it carries what the Dockerfile's devel steps touch (the libnccl2 and
libnccl-dev packages devel purges, as empty packages, and an `nvcc` that only prints NVIDIA's version line).
So this proves the Dockerfile's steps on the image path (its apt layer, the venv copied from runtime, the
purge, CUDA_HOME, verification and the cpu suite, with `nvcc --version` read), not NVIDIA's toolkit: no
extension is compiled with it. The runtime image is a real one: what Ubuntu 22.04 users pull, verified and
smoke-tested. The release gate is left out (`--skip-check all`, said in the build's report): not this module's
subject, and on Ubuntu its os-updates check refreshes the archive's lists for each image (about 50 s).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from torchimages import compat, engine, settings
from torchimages.building import bootstrap

from .conftest import Built, build_matrix, gzip_level_1, need_free_disk, need_ubuntu_archive, sh

pytestmark = pytest.mark.e2e
ENTRY = "{torch: 2.6.0, cuda: '12.4', os: ubuntu22.04, torchaudio: none, bases: bootstrap}"
TOOLKIT = "nvidia/cuda:12.4.1-devel-ubuntu22.04"
STAND_IN = f"""\
FROM torchimages/bootstrap-ubuntu:22.04
# A STAND-IN for {TOOLKIT} (the torchimages tests; Docker Hub does not answer here): what devel's steps touch.
RUN set -e; for p in libnccl2 libnccl-dev; do \\
        mkdir -p /tmp/$p/DEBIAN; \\
        printf 'Package: %s\\nVersion: 2.21.5-1+cuda12.4\\nArchitecture: all\\n' $p > /tmp/$p/DEBIAN/control; \\
        printf 'Maintainer: stand-in\\nDescription: stand-in\\n' >> /tmp/$p/DEBIAN/control; \\
        dpkg-deb --build /tmp/$p /tmp/$p.deb >/dev/null; dpkg -i /tmp/$p.deb >/dev/null; rm -rf /tmp/$p /tmp/$p.deb; \\
    done; \\
    mkdir -p /usr/local/cuda/bin; \\
    printf '#!/bin/sh\\necho "nvcc: NVIDIA (R) Cuda compiler driver (a stand-in)"\\n' > /usr/local/cuda/bin/nvcc; \\
    printf 'echo "Cuda compilation tools, release 12.4, V12.4.131"\\n' >> /usr/local/cuda/bin/nvcc; \\
    chmod 755 /usr/local/cuda/bin/nvcc
ENV PATH=/usr/local/cuda/bin:${{PATH}} CUDA_VERSION=12.4.1
LABEL io.torchimages.test.stand-in="{TOOLKIT}"
"""


def docker(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [settings.text("DOCKER") or "docker", *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def built(
    docker_client: Any, tmp_path_factory: pytest.TempPathFactory, ca_bundle: tuple[Path, bytes]
) -> Iterator[Built]:
    need_free_disk(docker_client, 14, "the Ubuntu 22.04 CUDA 12.4 combination (both flavors)")
    need_ubuntu_archive()
    tmp = tmp_path_factory.mktemp("jammy")
    jammy = compat.load().os["ubuntu22.04"]
    print(bootstrap.ensure(engine.DockerEngine(), jammy, None, tmp / "bootstrap.log"))
    made = docker("build", "--tag", TOOLKIT, "-", stdin=STAND_IN)
    assert made.returncode == 0, made.stderr[-3000:]
    try:
        # the cpu suite; layers gzipped at level 1 where the engine can (the export of devel's copy of the venv too)
        extra = ("--skip-check", "all", *gzip_level_1())
        yield from build_matrix(docker_client, tmp, ENTRY, ca_bundle, extra=extra)
    finally:
        docker("rmi", "--force", TOOLKIT)


def test_both_flavors_are_built_verified_smoke_tested_and_tagged(built: Built) -> None:
    assert built.status == 0, built.output[-4000:]
    assert "2 built" in built.output, built.output[-2000:]


def test_the_runtime_is_ubuntu_2204_with_python_310_on_the_bootstrapped_base(built: Built, docker_client: Any) -> None:
    assert built.status == 0, built.output[-4000:]
    runtime = docker_client.images.get(built.ids["runtime"])
    assert runtime.labels["io.torchimages.bases"] == "bootstrap"
    assert runtime.labels["io.torchimages.bootstrap.suite"] == "jammy"
    assert runtime.labels["org.opencontainers.image.base.name"] == "torchimages/bootstrap-ubuntu:22.04"
    found = sh(docker_client, built.image("runtime").reference, ". /etc/os-release; echo $VERSION_ID; python -V")
    assert found.split() == ["22.04", "Python", found.split()[-1]] and found.split()[-1].startswith("3.10.")


def test_devel_on_the_toolkit_image_holds_the_venv_and_nvcc_but_no_nccl_package(
    built: Built, docker_client: Any
) -> None:
    """The image path's steps: devel is built FROM the toolkit image (the stand-in here), NCCL's packages purged
    (the venv's NCCL is the one), the venv copied from runtime, CUDA_HOME set; its base label names the toolkit."""
    assert built.status == 0, built.output[-4000:]
    devel = docker_client.images.get(built.ids["devel"])
    assert devel.labels["io.torchimages.test.stand-in"] == TOOLKIT  # inherited: built on the stand-in
    assert devel.labels["org.opencontainers.image.base.name"] == f"docker.io/{TOOLKIT}"
    script = (
        "dpkg-query -W -f '${Package}\\n' 'libnccl*' 2>/dev/null; echo CUDA_HOME=$CUDA_HOME; nvcc --version | tail -n1;"
        " python -c 'import torch; print(torch.__version__, torch.version.cuda)'"
    )
    lines = sh(docker_client, built.image("devel").reference, script).splitlines()
    assert lines == ["CUDA_HOME=/usr/local/cuda", "Cuda compilation tools, release 12.4, V12.4.131", "2.6.0+cu124 12.4"]
