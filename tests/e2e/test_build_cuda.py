"""A CUDA torch image: torch 2.14.1 + CUDA 13.0 on Ubuntu 24.04 (Python 3.12), devel + runtime, with
the real wheels and their nvidia-* libraries, on a base bootstrapped from Ubuntu's archive (`bases: bootstrap`:
no registry answers here); devel is runtime plus NVIDIA's nvcc wheels. No GPU is needed: nothing here runs a
kernel."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from torchimages import engine
from torchimages.building import verify
from torchimages.probes import probe_source

from .conftest import (
    Built,
    assert_images_are_training_bases,
    assert_suites_passed_without_a_gpu,
    assert_torch_compile_works_on_cpu,
    build_a_lie,
    build_matrix,
    gzip_level_1,
    layers_read,
    need_free_disk,
    need_ubuntu_archive,
    report_dir,
    search_saved,
    sh,
)
from .test_report import installed, manifest_of

pytestmark = pytest.mark.e2e
# No torchaudio: the only torchaudio 2.11.1 this machine's wheel sources hold is PyPI's, a cu132 build (it
# reports 2.11.1+cu132), and the image is pinned to torchaudio==2.11.1+cu130. torchvision 0.29.1 from PyPI
# is a cu130 build (0.29.1+cu130): verification checks its label.
PY = "3.12"
ENTRY = "{torch: 2.14.1, cuda: '13.0', os: ubuntu24.04, torchaudio: none, bases: bootstrap}"
# the gzip of an empty tar Docker and BuildKit name an empty layer by, made once, not by this build's exporter
EMPTY_LAYER = "sha256:4f4fb700ef54461cfa02571ae0db9a0dc1e0cdb5577484a6d75e68dc38e8acc1"
BASE = "torchimages/bootstrap-ubuntu:24.04"  # the base bootstrapped from Ubuntu's archive (not built by --gzip-level)


@pytest.fixture(scope="module")
def built(
    docker_client: Any, tmp_path_factory: pytest.TempPathFactory, ca_bundle: tuple[Path, bytes]
) -> Iterator[Built]:
    # Both flavors (6.6 GB stored) and the SBOM's `docker save` (6 GB): 15 GB at the most, measured in a .ci/run.
    need_free_disk(docker_client, 16, "the CUDA combination's build and its SBOMs")
    need_ubuntu_archive()
    tmp = tmp_path_factory.mktemp("cuda")
    # every smoke suite (`--test gpu`: the GPU tests skip here) and the report (each flavor's SBOM); on the
    # containerd store, layers gzipped at level 1 (`--gzip-level`: the export faster, docs/benchmarks.md; the
    # default level is the shared CPU build's)
    extra: tuple[str | Path, ...] = ("--test", "gpu", "--report", tmp / "report", *gzip_level_1())
    yield from build_matrix(docker_client, tmp, ENTRY, ca_bundle, extra=extra)


def test_the_layers_are_exported_at_the_level_asked(built: Built) -> None:
    """`--gzip-level 1` reached each build's command line (its log's first line) as the image exporter's option,
    and the layers the build wrote on its base are gzip streams of level 1: their header's XFL byte is 4 (Go's
    gzip writer, BuildKit's: 0 at the default level, 2 at 9; seen so on this engine, 2026-12-07)."""
    assert built.status == 0, built.output[-4000:]
    if not gzip_level_1():
        pytest.skip("the engine keeps images in its classic image store: no export level to set")
    for flavor in ("runtime", "devel"):
        (command, _) = (built.logs / f"{built.image(flavor).tag}.log").read_text().split("\n", 1)
        assert " --output type=image,compression=gzip,compression-level=1 " in command, command
    found = engine.DockerEngine()
    runtime, base = (found.stored_layers(r) for r in (built.image("runtime").reference, BASE))
    if runtime is None or base is None:
        pytest.skip("the engine's content store cannot be read here (not root): the layers' bytes are not looked at")
    written = [blob for blob in runtime.blobs if blob not in (*base.blobs, EMPTY_LAYER)]
    assert len(written) >= 5, written  # apt, NVIDIA's libraries in several layers, torch, the venv's rest
    for blob in written:
        with runtime.open(blob) as stream:
            head = stream.read(10)
        assert (head[:2], head[8]) == (b"\x1f\x8b", 4), (
            blob,
            head,
        )  # a cached layer from an earlier build keeps its own


def test_build_verifies_and_tags_both_flavors(built: Built) -> None:
    assert built.status == 0, built.output
    assert "2 built" in built.output


def test_runtime_has_a_compiler_but_no_nvcc(built: Built, docker_client: Any) -> None:
    found = sh(
        docker_client,
        built.image("runtime").reference,
        "for c in gcc g++ nvcc; do command -v $c; done; find / -xdev -name nvcc -type f",
        user="root",
    )
    assert found.split() == ["/usr/bin/gcc", "/usr/bin/g++"]


def test_images_are_training_bases(built: Built, docker_client: Any) -> None:
    """No apt/pip state; one venv owned by 1000, stored once: runtime's layers are a prefix of devel's."""
    assert_images_are_training_bases(built, docker_client)


def test_torch_compile_works_in_runtime_on_the_cpu(built: Built, docker_client: Any) -> None:
    assert_torch_compile_works_on_cpu(built, docker_client)


@pytest.mark.parametrize("library", ["libcudnn.so.9", "libnccl.so.2"])
@pytest.mark.parametrize("flavor", ["runtime", "devel"])
def test_exactly_one_copy_of_cudnn_and_nccl(built: Built, docker_client: Any, flavor: str, library: str) -> None:
    found = sh(
        docker_client, built.image(flavor).reference, f"find / -xdev -name '{library}*' -not -type d", user="root"
    )
    copies = {Path(line).parent for line in found.split()}
    assert len(copies) == 1, f"{library} in {sorted(map(str, copies))}"


def test_torch_loads_the_pinned_wheels_libraries(built: Built) -> None:
    """What verification read in runtime (it passed, or the build would have failed): the libraries torch
    mapped are the wheels' files in the venv, cuDNN's lazily opened ones loaded by path; nothing vacuous."""
    facts = verify.read_facts(engine.DockerEngine(), built.image("runtime").reference)
    assert verify.check_libraries(built.combination.expected_facts(), facts) == []
    site = f"/opt/venv/lib/python{PY}/site-packages/nvidia"
    loaded = {entry["path"]: entry for entry in facts.raw["libraries"]["loaded"]}
    for path, distribution, how in [
        (f"{site}/cudnn/lib/libcudnn.so.9", "nvidia-cudnn-cu13 9.24.0.43", "import"),
        (f"{site}/cudnn/lib/libcudnn_cnn.so.9", "nvidia-cudnn-cu13 9.24.0.43", "by path"),
        (f"{site}/nccl/lib/libnccl.so.2", "nvidia-nccl-cu13 2.30.7", "import"),
        (f"{site}/cu13/lib/libcublas.so.13", "nvidia-cublas", "import"),
        (f"{site}/cu13/lib/libcublasLt.so.13", "nvidia-cublas", "import"),
    ]:
        entry = loaded.get(path) or {}
        found = f"{entry.get('distribution')} {entry.get('version')}"
        assert found.startswith(distribution) and entry.get("how") == how, (path, entry)


def test_devel_has_nvcc_of_the_wheels_cuda(built: Built, docker_client: Any) -> None:
    assert "release 13.0" in sh(docker_client, built.image("devel").reference, "nvcc --version")


def test_devel_compiles_a_cuda_extension(built: Built, docker_client: Any, tmp_path: Path) -> None:
    (tmp_path / "cuda_extension.py").write_text(probe_source("cuda_extension"))
    tmp_path.chmod(0o755)
    output = sh(
        docker_client,
        built.image("devel").reference,
        "cp /probe/cuda_extension.py /tmp/ && cd /tmp && python cuda_extension.py --build-only --arch-list 9.0",
        volumes={str(tmp_path): {"bind": "/probe", "mode": "ro"}},
    )
    (line,) = [x for x in output.splitlines() if x.startswith("SMOKE_JSON:")]
    result = json.loads(line.removeprefix("SMOKE_JSON:"))
    assert result["built"] is True, output


@pytest.fixture(scope="module")
def ca_bundle_in_a_layer(built: Built, docker_client: Any, ca_bundle: tuple[Path, bytes]) -> bool:
    """Whether the CA bundle's marker is anywhere in both flavors' layers, each read whole and uncompressed: one
    `docker save` of both images, which writes the layers they share (runtime's, 6 GB) once."""
    images = [built.image(f).reference for f in ("runtime", "devel")]
    saved = search_saved(images, [ca_bundle[1]])
    layers_read(docker_client, images, saved)
    return bool(saved.found)


@pytest.mark.parametrize("flavor", ["runtime", "devel"])
def test_ca_bundle_is_in_no_layer_and_no_history(
    built: Built, docker_client: Any, ca_bundle: tuple[Path, bytes], ca_bundle_in_a_layer: bool, flavor: str
) -> None:
    image = docker_client.images.get(built.image(flavor).reference)
    marker = ca_bundle[1]
    history = "\n".join(str(entry.get("CreatedBy", "")) for entry in image.history())
    assert marker.decode() not in history and "127.0.0.1" not in history
    assert not ca_bundle_in_a_layer, "the CA bundle was found in a layer of the runtime or the devel image"


def test_a_wrong_cudnn_fails_verification_and_leaves_no_tag(built: Built, docker_client: Any) -> None:
    outcome = build_a_lie(built, "wrong-cudnn-runtime", cudnn="9.23.0.1")
    assert outcome.status == "failed"
    assert "cudnn: the tag claims 9.23.0.1, the image has 9.24.0" in outcome.detail
    # The libraries check reads the same lie off the file torch loaded, and names it.
    assert (
        f"libcudnn: /opt/venv/lib/python{PY}/site-packages/nvidia/cudnn/lib/libcudnn.so.9 belongs to" in outcome.detail
    )
    assert "nvidia-cudnn-cu13 9.24.0.43; expected the file of the wheel torch pins (cuDNN 9.23.0.1" in outcome.detail
    assert docker_client.images.list(name=f"{built.image('runtime').repository}:wrong-cudnn-runtime") == []


def test_smoke_suites_pass_and_gpu_tests_skip_visibly(built: Built) -> None:
    assert_suites_passed_without_a_gpu(built)


def test_the_sbom_lists_the_nvidia_packages_torch_and_the_interpreter(built: Built) -> None:
    """The build's `--report` of the CUDA runtime image: its CycloneDX SBOM (syft; on the containerd store the
    image's own SPDX attestation, converted) names torch, every nvidia-* wheel of the venv and the interpreter,
    each with the version the image really holds."""
    assert built.status == 0, built.output[-4000:]
    (image,) = [i for i in manifest_of(report_dir(built))["images"] if i["flavor"] == "runtime"]
    assert image["sbom_source"] == ("attestation" if engine.DockerEngine().containerd_store else "scan")
    sbom = json.loads((report_dir(built) / image["sbom"]).read_text())
    found: dict[str, str] = {}
    for component in sbom["components"]:
        found.setdefault(component["name"], component.get("version", ""))
    holds = installed(built)
    nvidia = sorted(name for name in holds if name.startswith("nvidia-"))
    assert len(nvidia) >= 10, nvidia  # cuBLAS, cuDNN, NCCL, cuFFT, ... as torch's resolution pinned them
    for name in ("torch", *nvidia):
        assert found.get(name) == holds[name], (name, found.get(name), holds[name])
    assert holds["torch"] == "2.14.1"  # the default variant from PyPI: no local label
    interpreter = f"python{PY}"
    assert found[interpreter] == holds[interpreter] and found[interpreter].startswith(f"{PY}.")


def test_the_ubuntu_base_is_bootstrapped_and_devel_stores_runtimes_layers_once(
    built: Built, docker_client: Any
) -> None:
    """`bases: bootstrap`: the Dockerfile's `FROM ubuntu:24.04` became the base made from Ubuntu's archive (the
    image says so in its labels, inherited and its own), and devel is runtime plus a delta: runtime's layers are
    devel's first layers, stored once."""
    assert built.status == 0, built.output[-4000:]
    runtime, devel = (docker_client.images.get(built.ids[flavor]) for flavor in ("runtime", "devel"))
    labels = runtime.labels
    assert labels["io.torchimages.bases"] == "bootstrap"
    assert labels["io.torchimages.bootstrap.suite"] == "noble"
    assert "archive.ubuntu.com/ubuntu noble-updates" in labels["io.torchimages.bootstrap.sources"]
    assert labels["org.opencontainers.image.base.name"] == "torchimages/bootstrap-ubuntu:24.04"
    assert 'VERSION_ID="24.04"' in sh(docker_client, built.image("runtime").reference, "cat /etc/os-release")
    ours, theirs = runtime.attrs["RootFS"]["Layers"], devel.attrs["RootFS"]["Layers"]
    assert theirs[: len(ours)] == ours and len(theirs) > len(ours)
