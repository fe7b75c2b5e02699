"""The SBOM and provenance attestations, attached only where the engine keeps them; OCI annotations from an image's
labels on its index (`imagetools create --annotation index:...`) and its zstd push's manifest."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import IO

import pytest

from torchimages.engine import (
    BuildClient,
    BuildRequest,
    ImageInfo,
    build_command,
    index_command,
    oci_annotations,
    sbom_attestation,
    shared_annotations,
    uses_containerd_store,
    zstd_push,
)

CLASSIC = {"Driver": "overlay2", "DriverStatus": [["Backing Filesystem", "extfs"], ["Supports d_type", "true"]]}
CONTAINERD = {"Driver": "overlayfs", "DriverStatus": [["driver-type", "io.containerd.snapshotter.v1"]]}


def test_the_image_store_is_read_from_docker_info() -> None:
    assert uses_containerd_store(CONTAINERD) and not uses_containerd_store(CLASSIC)
    assert not uses_containerd_store({}) and not uses_containerd_store({"DriverStatus": None})


HOW = (
    'turn on the containerd image store: `make engine` starts an engine with it; elsewhere "features": '
    '{"containerd-snapshotter": true} in /etc/docker/daemon.json, then restart dockerd'
)
GENERATOR = "torchimages.invalid/sbom-generator:0123456789abcdef0123"


@pytest.mark.parametrize(
    ("buildx", "driver", "containerd", "generator", "problem", "note"),
    [
        (
            True,
            "docker",
            True,
            GENERATOR,
            "",
            f"attached (SPDX SBOM by {GENERATOR}, SLSA provenance mode=max; buildx docker driver, containerd image "
            "store)",
        ),
        (
            True,
            "docker",
            True,
            "",
            "no static busybox for x86_64 (none found)",
            "not attached: no SBOM generator image could be made: no static busybox for x86_64 (none found)",
        ),
        (True, "docker", True, "", "", "not attached: no SBOM generator image could be made: not said why"),
        (
            True,
            "docker",
            False,
            GENERATOR,
            "",
            "not attached: the engine keeps images in its classic image store, and buildx's docker driver refuses "
            f"attestations ({HOW})",
        ),
        (
            True,
            "docker-container",
            False,
            "",
            "",
            "not attached: the engine keeps images in its classic image store, and buildx's docker-container driver "
            f"loads images into it without their attestations ({HOW})",
        ),
        (
            True,
            "docker-container",
            True,
            GENERATOR,
            "",
            "not attached: buildx's docker-container driver builds outside the engine and cannot run the SBOM "
            "generator image made in it; use the engine's own builder (`docker buildx use default`)",
        ),
        (True, None, True, GENERATOR, "", "not attached: `docker buildx inspect` names no driver of the builder"),
        (
            False,
            None,
            True,
            GENERATOR,
            "",
            "not attached: the build client is `docker build` (DOCKER_BUILDKIT=1), which has no --sbom",
        ),
    ],
)
def test_attestations_are_attached_only_where_the_engine_keeps_them_and_a_generator_was_made(
    buildx: bool, driver: str | None, containerd: bool, generator: str, problem: str, note: str
) -> None:
    found = sbom_attestation(buildx, driver, containerd, generator, problem)
    assert found.note == note
    assert found.attached == note.startswith("attached")
    assert found.generator == (GENERATOR if found.attached else "")


def test_the_build_asks_for_the_attestations_through_buildx_only(tmp_path: Path) -> None:
    request = BuildRequest(tmp_path, tmp_path / "Dockerfile", "runtime", "tmp/x:1", sbom_generator=GENERATOR)
    buildx = build_command(BuildClient(("docker", "buildx", "build"), ()), request)
    assert buildx[-3:] == [f"--sbom=generator={GENERATOR}", "--provenance=mode=max", str(tmp_path)]
    classic = build_command(BuildClient(("docker", "build"), (("DOCKER_BUILDKIT", "1"),)), request)
    assert not [part for part in classic if part.startswith(("--sbom", "--provenance"))]
    without = dataclasses.replace(request, sbom_generator="")
    none = build_command(BuildClient(("docker", "buildx", "build"), ()), without)
    assert not [part for part in none if part.startswith(("--sbom", "--provenance"))]


LABELS = {
    "io.torchimages.torch": "2.13.0",
    "org.opencontainers.image.created": "2026-11-29T00:00:00Z",
    "org.opencontainers.image.licenses": "BSD-3-Clause",
    "org.opencontainers.image.ref.name": "ubuntu",  # inherited from the base: never an annotation
    "org.opencontainers.image.revision": "0123456789abcdef0123456789abcdef01234567",
    "org.opencontainers.image.source": "https://github.com/team/torchimages",
    "org.opencontainers.image.version": "2.13.0",
}


def test_the_oci_labels_become_annotations() -> None:
    assert oci_annotations(LABELS) == {
        "org.opencontainers.image.created": "2026-11-29T00:00:00Z",
        "org.opencontainers.image.licenses": "BSD-3-Clause",
        "org.opencontainers.image.revision": "0123456789abcdef0123456789abcdef01234567",
        "org.opencontainers.image.source": "https://github.com/team/torchimages",
        "org.opencontainers.image.version": "2.13.0",
    }
    other = {**LABELS, "org.opencontainers.image.revision": "fedcba", "org.opencontainers.image.title": "x"}
    assert "org.opencontainers.image.revision" not in shared_annotations([LABELS, other])
    assert shared_annotations([LABELS, other])["org.opencontainers.image.version"] == "2.13.0"
    assert shared_annotations([]) == {}


def test_the_index_command_annotates_the_index() -> None:
    cmd = index_command(
        "docker",
        "registry.example.org/team/pytorch",
        ("2.9.1-cpu-runtime", "2.9-cpu-runtime"),
        (
            "registry.example.org/team/pytorch@sha256:" + "a" * 64,
            "registry.example.org/team/pytorch@sha256:" + "b" * 64,
        ),
        (("org.opencontainers.image.created", "2026-11-29T00:00:00Z"), ("org.opencontainers.image.version", "2.9.1")),
    )
    assert cmd == [
        "docker",
        "buildx",
        "imagetools",
        "create",
        "--tag",
        "registry.example.org/team/pytorch:2.9.1-cpu-runtime",
        "--tag",
        "registry.example.org/team/pytorch:2.9-cpu-runtime",
        "--annotation",
        "index:org.opencontainers.image.created=2026-11-29T00:00:00Z",
        "--annotation",
        "index:org.opencontainers.image.version=2.9.1",
        "registry.example.org/team/pytorch@sha256:" + "a" * 64,
        "registry.example.org/team/pytorch@sha256:" + "b" * 64,
    ]


def test_a_zstd_push_s_manifest_carries_the_image_s_oci_labels(tmp_path: Path) -> None:
    """The annotations are the manifest's, not the configuration's: the proof (config digest = image id) holds."""
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Labels": LABELS}, "rootfs": {}}).encode()
    layer = bytes(1024)
    digest = hashlib.sha256
    config_id, layer_id = f"sha256:{digest(config).hexdigest()}", f"sha256:{digest(layer).hexdigest()}"
    files = {
        f"blobs/sha256/{config_id[7:]}": config,
        f"blobs/sha256/{layer_id[7:]}": layer,
        "manifest.json": json.dumps(
            [{"Config": f"blobs/sha256/{config_id[7:]}", "Layers": [f"blobs/sha256/{layer_id[7:]}"]}]
        ).encode(),
    }
    saved = io.BytesIO()
    with tarfile.open(fileobj=saved, mode="w") as tar:
        for name, data in files.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    saved.seek(0)

    def compress(stream: IO[bytes], out: Path) -> str:
        data = stream.read()
        out.write_bytes(b"Z:" + data)
        return f"sha256:{digest(data).hexdigest()}"

    info = ImageInfo("r/x:1", config_id, LABELS, {}, "", (layer_id,))
    layout = zstd_push.write_layout(saved, info, tmp_path / "l", compress)
    manifest = json.loads((tmp_path / "l/blobs/sha256" / layout.manifest_digest[7:]).read_bytes())
    assert manifest["annotations"] == oci_annotations(LABELS)
    assert manifest["config"]["digest"] == config_id
