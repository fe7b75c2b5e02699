"""Only verified images are pushed: a real registry (Debian's docker-registry) on loopback. A registry that
drops the connections of the first attempt gets the push again (the retry is printed); a registry that
refuses the push for good (read-only) is not asked again. `--compression zstd` lands zstd layers and the
verified image's own configuration (its digest the local image id), read back from the registry."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from torchimages.engine.zstd_push import zstd_problem

from .conftest import (
    NO_LAYER_SCAN,
    Built,
    Rebuilt,
    build_matrix,
    imagetools,
    registry_blob,
    registry_image,
    registry_manifest,
    require,
    start_registry,
    stored_blobs,
    uncompressed_size,
)
from .flaky import connection_dropper

pytestmark = pytest.mark.e2e


FLAVORS = ("runtime", "devel")
CPU_RUNTIME = "{torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none, flavors: [runtime]}"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from start_registry(tmp_path_factory.mktemp("registry"))


@pytest.fixture(scope="module")
def built(cpu_built: Built) -> Built:
    """The run's one build of the CPU combination (conftest.cpu_built), pushed to the run's registry."""
    return cpu_built


# The builds of this module's own tests: their subject is the push, so the smoke suites and the layer scan
# (each proven on the shared build) are left out.
PUSH_ONLY = ("--push", "--test", "none", *NO_LAYER_SCAN)


def pushed_tags(registry: str, repository: str) -> set[str]:
    path = repository.removeprefix(registry + "/")
    with urllib.request.urlopen(f"http://{registry}/v2/{path}/tags/list", timeout=10) as answer:
        return set(json.load(answer)["tags"])


def test_verified_images_are_pushed_with_their_aliases(built: Built, session_registry: str) -> None:
    assert built.status == 0, built.output
    images = [built.image(flavor) for flavor in FLAVORS]  # one repository holds both flavors' tags
    wanted = {name for image in images for name in (image.tag, *image.aliases)}
    assert pushed_tags(session_registry, images[0].repository) == wanted


@pytest.mark.parametrize("flavor", FLAVORS)
def test_a_pushed_image_carries_its_sbom_and_provenance(built: Built, flavor: str) -> None:
    """Issue 46: the shared build (on `make engine`'s containerd image store) pushed each image's index with an
    SPDX SBOM and SLSA provenance; the provenance names the input digest and the matrix entry, the SBOM torch at
    the image's version; read from the registry with buildx's imagetools."""
    assert built.status == 0, built.output
    assert "Attestations (SBOM, provenance): attached (SPDX SBOM by torchimages.invalid/sbom-generator:" in built.output
    image = built.image(flavor)
    reference = f"{image.repository}:{image.tag}"
    provenance = imagetools(reference, "Provenance")
    args = provenance["SLSA"]["invocation"]["parameters"]["args"]
    assert args["label:io.torchimages.input-digest"] == image.input_digest
    assert args["label:io.torchimages.matrix-entry"] == "2.13.0-cpu-py3.11-debian12"
    assert args["target"] == flavor
    sbom = imagetools(reference, "SBOM")
    packages = {(p.get("name"), p.get("versionInfo")) for p in sbom["SPDX"]["packages"]}
    assert ("torch", "2.13.0+cpu") in packages and ("numpy", image_numpy(built)) in packages
    assert any(name == "libc6" for name, _ in packages), "the OS packages are listed too"


def image_numpy(built: Built) -> str:
    """The numpy version the shared build's image holds (its installed record)."""
    record = (built.logs / f"{built.image('runtime').tag}.installed.txt").read_text()
    (line,) = [line for line in record.splitlines() if line.startswith("numpy==")]
    return line.removeprefix("numpy==")


def test_a_push_whose_connections_are_dropped_is_retried_and_lands(
    docker_client: Any, registry: str, tmp_path: Path, ca_bundle: tuple[Path, bytes]
) -> None:
    """The registry's network resets every connection of the first push attempt (a real TCP relay)."""
    with connection_dropper(registry, window_s=1.0) as flaky:
        for built in build_matrix(
            docker_client, tmp_path, CPU_RUNTIME, ca_bundle, registry=flaky.address, extra=PUSH_ONLY
        ):
            assert built.status == 0, built.output
            assert flaky.dropped > 0 and flaky.relayed > 0, (flaky.dropped, flaky.relayed)
            image = built.image("runtime")
            retried = rf"{re.escape(image.repository)}:\S+: push failed \(.+\); retry 1/2 in 2 s"
            assert re.search(retried, built.output), built.output
            assert pushed_tags(flaky.address, image.repository) == {image.tag, *image.aliases}


def test_a_push_the_registry_refuses_for_good_is_not_retried(
    docker_client: Any, tmp_path: Path, ca_bundle: tuple[Path, bytes]
) -> None:
    """A read-only registry answers 405: a real error, reported once, never retried; the image fails."""
    for read_only in start_registry(tmp_path / "registry", read_only=True):
        (tmp_path / "build").mkdir()
        for built in build_matrix(
            docker_client,
            tmp_path / "build",
            CPU_RUNTIME,
            ca_bundle,
            registry=read_only,
            extra=PUSH_ONLY,
        ):
            assert built.status == 1, built.output
            # 20.10 says `405`, 26 `unknown: Method not allowed` (after its own retries of each layer)
            assert "405" in built.output or "Method not allowed" in built.output, built.output
            assert "retry" not in built.output, built.output
            assert "0 built" in built.output and "1 failed" in built.output, built.output


def test_the_report_has_the_repository_digest_and_the_compressed_size(built: Built, docker_client: Any) -> None:
    images = json.loads((built.logs.parent / "report" / "manifest.json").read_text())["images"]
    (image,) = [i for i in images if i["reference"] == built.image("runtime").reference]
    stored = docker_client.images.get(built.ids["runtime"])  # as built (a later --no-cache rebuild moves the tag)
    # each once: the containerd store lists the image's digest once for each of its names (tag, aliases)
    assert image["repo_digests"] == list(dict.fromkeys(stored.attrs["RepoDigests"])) and image["repo_digests"]
    assert image["size"]["uncompressed"] == uncompressed_size(docker_client, built.ids["runtime"]), image["size"]
    assert 0 < image["size"]["compressed"] < image["size"]["uncompressed"], image["size"]


ZSTD_LAYER = "application/vnd.oci.image.layer.v1.tar+zstd"


def test_a_zstd_push_lands_zstd_layers_and_the_verified_configuration(
    docker_client: Any, registry: str, tmp_path: Path, ca_bundle: tuple[Path, bytes]
) -> None:
    problem = zstd_problem()
    if problem:
        require(problem)
    for built in build_matrix(
        docker_client,
        tmp_path,
        CPU_RUNTIME,
        ca_bundle,
        registry=registry,
        extra=("--push", "--compression", "zstd", *NO_LAYER_SCAN),
    ):
        assert built.status == 0, built.output
        image = built.image("runtime")
        local = docker_client.images.get(image.reference).attrs
        assert pushed_tags(registry, image.repository) == {image.tag, *image.aliases}
        for name in (image.tag, *image.aliases):
            digest, manifest = registry_manifest(registry, image.repository, name)
            assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json", manifest
            assert [layer["mediaType"] for layer in manifest["layers"]] == [ZSTD_LAYER] * len(local["RootFS"]["Layers"])
            config = registry_blob(registry, image.repository, manifest["config"]["digest"])
            # the verified image's own configuration: its layers' diff_ids and its labels (on the classic store its
            # digest is the image id; on the containerd store the id is the index's digest)
            assert config["rootfs"]["diff_ids"] == local["RootFS"]["Layers"]
            assert config["config"]["Labels"] == local["Config"]["Labels"]
            # read back by digest (the containerd store keeps it as an image of its own, the classic store in
            # RepoDigests, as `docker push` records it: what --report's repo_digests says)
            pulled = docker_client.images.get(f"{image.repository}@{digest}").attrs
            assert pulled["RootFS"]["Layers"] == local["RootFS"]["Layers"]


@pytest.mark.rebuilds_shared
def test_a_re_push_of_an_unchanged_no_cache_rebuild_uploads_nothing(
    built: Built, cpu_rebuilt: Rebuilt, session_registry: str, session_registry_root: Path
) -> None:
    """Issue 19: a weekly security rebuild (`--no-cache`) of unchanged inputs gives the same layers
    (SOURCE_DATE_EPOCH, clamped file times): pushed again, the registry stores no new blob and the tags keep
    their manifests. The shared build pushed first; its `--no-cache` rebuild (cpu_rebuilt) pushed again."""
    assert cpu_rebuilt.result.returncode == 0, cpu_rebuilt.result.stdout + cpu_rebuilt.result.stderr
    assert "2 built" in cpu_rebuilt.result.stdout, cpu_rebuilt.result.stdout
    assert cpu_rebuilt.blobs_before, "the shared build stored nothing in the run's registry"
    new = stored_blobs(session_registry_root) - cpu_rebuilt.blobs_before
    for flavor in FLAVORS:
        image = built.image(flavor)
        digest, manifest = registry_image(session_registry, image.repository, image.tag)
        assert digest == cpu_rebuilt.manifests_before[flavor], flavor
        # no layer, no configuration uploaded again; only the attestations (the provenance records the build's
        # own times: a new statement, attestation manifest and index each rebuild) and the index are new
        image_blobs = {manifest["config"]["digest"], *(layer["digest"] for layer in manifest["layers"])}
        assert not {b.removeprefix("sha256:") for b in image_blobs} & new, flavor
