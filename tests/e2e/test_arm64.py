"""linux/arm64 under emulation (issue 20): a real build of a CPU combination for linux/arm64 on this x86_64
machine (binfmt_misc and QEMU, `make emulation`), on the bootstrapped debian12 base of its architecture (mmdebstrap
--architectures=arm64), verified (the versions, and the machine of the kernel, the interpreter and torch's shared
objects: aarch64), smoke-tested (the cpu suite, in an emulated container), pushed to a real registry on loopback
under its own tag, and the public tag written there as an index only then, and on the engine too (the
containerd store holds an index: the same entries); pulled back by digest, it runs.

Its linux/amd64 twin is not built here: torch 2.9.1's CPU build for x86_64 is on download.pytorch.org alone, which
this machine does not reach (PyPI's x86_64 torch is a CUDA build), and no torch release has a CPU build for both
machines on PyPI. The rule that the index waits for every platform is tested against the fake engine
(tests/unit/building/test_platforms_build.py); the two-platform index was built for real once (docs/arm64.md).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from torchimages import settings
from torchimages.engine import content_store

from .conftest import Built, build_matrix, need_free_disk, require, start_registry

pytestmark = pytest.mark.e2e
# The release gate is left out (said in the report): not this module's subject, and under emulation its os-updates
# check runs apt in an emulated container (about a minute). Its checks are proven on linux/amd64 images
# (the shared CPU build, test_release_gate, the CUDA combination); they read layers and run containers alike here.
NO_GATE = ("--skip-check", "all")

ARM64_CPU = (
    "{torch: 2.9.1, cuda: cpu, os: debian12, torchvision: none, torchaudio: none, flavors: [runtime], "
    "platforms: [linux/arm64]}"
)
HANDLER = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")
INDEXES = "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json"
IMAGES = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from start_registry(tmp_path_factory.mktemp("registry"))


@pytest.fixture(scope="module")
def built(
    docker_client: Any, registry: str, tmp_path_factory: pytest.TempPathFactory, ca_bundle: tuple[Path, bytes]
) -> Iterator[Built]:
    if not HANDLER.is_file() or not HANDLER.read_text().startswith("enabled"):
        require(f"no enabled {HANDLER}: linux/arm64 images need emulation here (`make emulation`, as root)")
    need_free_disk(docker_client, 6, "the linux/arm64 CPU image and its base")
    tmp = tmp_path_factory.mktemp("arm64")
    yield from build_matrix(
        docker_client,
        tmp,
        ARM64_CPU,
        ca_bundle,
        registry=registry,
        extra=("--push", "--report", tmp / "report", *NO_GATE),
    )


def registry_get(registry: str, repository: str, tag: str, accept: str) -> tuple[str, dict[str, Any]]:
    """A manifest (or index) the registry holds: its digest and its content."""
    path = repository.removeprefix(registry + "/")
    request = urllib.request.Request(f"http://{registry}/v2/{path}/manifests/{tag}", headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return str(answer.headers["Docker-Content-Digest"]), dict(json.load(answer))


def stored(digest: str) -> bytes:
    """A blob of the engine's containerd content store, by its digest (hashed): what the engine names."""
    stores = content_store.find_content_stores()
    assert stores, "no containerd socket to read the engine's content store"
    found = subprocess.run(stores[0].command(digest), capture_output=True, check=True, timeout=60).stdout
    assert "sha256:" + hashlib.sha256(found).hexdigest() == digest
    return found


def docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([settings.text("DOCKER") or "docker", *args], capture_output=True, text=True, check=False)


def test_the_arm64_image_is_built_verified_and_smoke_tested_under_emulation(built: Built, docker_client: Any) -> None:
    assert built.status == 0, built.output[-4000:]
    image = built.image("runtime")
    local = docker_client.images.get(image.platform_reference)  # its own tag, `<tag>-arm64`
    assert local.attrs["Architecture"] == "arm64", local.attrs["Architecture"]
    assert local.labels["io.torchimages.platform"] == "linux/arm64"
    assert local.labels["io.torchimages.input-digest"] == image.input_digest
    assert re.search(rf"^built .* {re.escape(image.platform_reference)} ", built.output, re.MULTILINE), built.output
    assert f"{image.reference} names the index of linux/arm64" in built.output, built.output[-4000:]
    report = built.logs.parent / "report"
    junit = (report / "junit.xml").read_text()
    assert f'<testsuite name="{image.platform_tag}" errors="0" failures="0"' in junit and "suites.test_cpu_" in junit
    (entry,) = json.loads((report / "manifest.json").read_text())["images"]
    assert (entry["reference"], entry["image_id"]) == (image.platform_reference, local.id)
    assert entry["smoke"]["passed"] > 20 and entry["smoke"]["failed"] == 0


def test_the_public_tag_is_an_index_written_after_the_push_and_it_pulls_back_and_runs(
    built: Built, registry: str, docker_client: Any
) -> None:
    assert built.status == 0, built.output[-4000:]
    image = built.image("runtime")
    own, found = registry_get(registry, image.repository, image.platform_tag, f"{IMAGES}, {INDEXES}")
    attestations = []
    if "manifests" in found:  # the containerd store pushes the image with its attestations as an index
        (own,) = [m["digest"] for m in found["manifests"] if (m.get("platform") or {}).get("architecture") == "arm64"]
        about = [
            (m["digest"], (m.get("annotations") or {}).get("vnd.docker.reference.digest")) for m in found["manifests"]
        ]
        attestations = [("unknown", digest) for digest, named in about if named == own]
        assert attestations, found  # its SBOM and provenance, beside it
    for name in image.names:  # the public index carries them beside the image, as its own tag's index did
        _, index = registry_get(registry, image.repository, name, INDEXES)
        entries = [(m["platform"]["architecture"], m["digest"]) for m in index["manifests"]]
        assert entries == [("arm64", own), *attestations], index
    for name in image.names:  # on this engine too (the containerd store holds an index): the registry's very bytes
        local = docker_client.images.get(f"{image.repository}:{name}")
        public, _ = registry_get(registry, image.repository, name, INDEXES)
        assert local.id == public, (local.id, public)  # one digest here and there (the one a --sign-key signs)
        index = json.loads(stored(local.id))
        assert [(m["platform"]["architecture"], m["digest"]) for m in index["manifests"]] == [
            ("arm64", own),
            *attestations,
        ]
        assert local.attrs["Architecture"] == "arm64"
    assert re.search(rf"{re.escape(image.reference)} names, on this engine, the index {local.id} ", built.output)
    pulled = f"{image.repository}@{own}"
    assert docker("pull", "--quiet", pulled).returncode == 0
    ran = docker(
        "run",
        "--rm",
        "--network",
        "none",
        pulled,
        "python",
        "-c",
        "import platform, torch; print(platform.machine(), torch.__version__, float(torch.ones(3).sum()))",
    )
    assert ran.returncode == 0 and ran.stdout.split() == ["aarch64", "2.9.1+cpu", "3.0"], (ran.stdout, ran.stderr)
