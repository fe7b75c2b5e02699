"""zstd pushes (issue 19): a `docker save` archive becomes an OCI layout with zstd layers and the image's own
configuration only when it is the verified image (its configuration's digest the verified id, each layer's
digest the verified diff_id); anything else is refused before an upload. Both `docker save` formats (Docker
25+'s blobs/sha256 and 20.10's <id>/layer.tar) are read; the upload asks skopeo to change nothing and checks
the digest it reports. The archives are made here from literal bytes."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import IO

import pytest

from torchimages.engine import EngineError, ImageInfo, zstd_push

CONFIG = b'{"architecture":"amd64","config":{"Labels":{"io.torchimages.torch":"2.13.0"}},"os":"linux"}'
BIG = b"layer one: torch and its libraries " * 40_000  # over zstd_push.KEPT: compressed as it streams by
SMALL = b"layer two: the smoke files"
EMPTY_TAR = bytes(1024)


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def config_of(layers: list[bytes], labels: str = '"io.torchimages.torch":"2.13.0"') -> bytes:
    diff_ids = ",".join(f'"{sha(layer)}"' for layer in layers)
    return (
        '{"architecture":"amd64","config":{"Labels":{' + labels + '}},"os":"linux",'
        '"rootfs":{"type":"layers","diff_ids":[' + diff_ids + "]}}"
    ).encode()


def archive(files: dict[str, bytes], links: dict[str, str] | None = None) -> io.BytesIO:
    """A tar of these files (in this order) and symlinks, as `docker save` writes one."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    out.seek(0)
    return out


def docker_26_save(config: bytes, layers: list[bytes]) -> io.BytesIO:
    """Docker 25+: blobs/sha256/<digest>, manifest.json last."""
    blobs = {f"blobs/sha256/{sha(layer)[7:]}": layer for layer in layers}
    blobs[f"blobs/sha256/{sha(config)[7:]}"] = config
    entry = {
        "Config": f"blobs/sha256/{sha(config)[7:]}",
        "RepoTags": None,
        "Layers": [f"blobs/sha256/{sha(layer)[7:]}" for layer in layers],
    }
    return archive({**blobs, "index.json": b"{}", "manifest.json": json.dumps([entry]).encode()})


def verified(config: bytes, layers: list[bytes]) -> ImageInfo:
    return ImageInfo("r/x:1", sha(config), {}, {}, "", tuple(sha(layer) for layer in layers))


def copy_compressor(stream: IO[bytes], out: Path) -> str:
    """Stands in for zstd: writes the bytes as they are, with a prefix (so a "compressed" layer's digest
    differs from its diff_id, as a real one does)."""
    data = stream.read()
    out.write_bytes(b"Z:" + data)
    return sha(data)


def read_layout(folder: Path) -> tuple[dict, dict]:  # type: ignore[type-arg]
    (descriptor,) = json.loads((folder / "index.json").read_text())["manifests"]
    manifest = json.loads((folder / "blobs/sha256" / descriptor["digest"][7:]).read_bytes())
    return descriptor, manifest


def test_a_docker_26_archive_becomes_a_zstd_layout_with_the_image_s_own_configuration(tmp_path: Path) -> None:
    layers = [BIG, SMALL, EMPTY_TAR]
    config = config_of(layers)
    layout = zstd_push.write_layout(
        docker_26_save(config, layers), verified(config, layers), tmp_path / "l", copy_compressor
    )
    descriptor, manifest = read_layout(tmp_path / "l")
    assert descriptor["annotations"] == {"org.opencontainers.image.ref.name": "verified"}
    assert descriptor["digest"] == layout.manifest_digest
    assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert manifest["config"] == {
        "mediaType": "application/vnd.oci.image.config.v1+json",
        "digest": sha(config),
        "size": len(config),
    }
    assert (tmp_path / "l/blobs/sha256" / sha(config)[7:]).read_bytes() == config  # byte for byte
    assert [layer["mediaType"] for layer in manifest["layers"]] == ["application/vnd.oci.image.layer.v1.tar+zstd"] * 3
    for layer, data in zip(manifest["layers"], layers, strict=True):
        assert layer["digest"] == sha(b"Z:" + data) and layer["size"] == len(data) + 2
        assert (tmp_path / "l/blobs/sha256" / layer["digest"][7:]).read_bytes() == b"Z:" + data
    assert layout.diff_ids == tuple(sha(layer) for layer in layers)
    assert json.loads((tmp_path / "l/oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    assert not (tmp_path / "l/work").exists()
    assert layout.source == f"oci:{tmp_path / 'l'}:verified"


def test_a_docker_20_10_archive_with_a_linked_layer_is_read(tmp_path: Path) -> None:
    """20.10: <v1 id>/layer.tar, <image id>.json; a layer met twice may be a symlink to the first."""
    layers = [BIG, SMALL, SMALL]
    config = config_of(layers)
    entry = {
        "Config": f"{sha(config)[7:]}.json",
        "RepoTags": ["r/x:1"],
        "Layers": ["a/layer.tar", "b/layer.tar", "c/layer.tar"],
    }
    saved = archive(
        {
            "a/layer.tar": BIG,
            "b/layer.tar": SMALL,
            f"{sha(config)[7:]}.json": config,
            "manifest.json": json.dumps([entry]).encode(),
        },
        links={"c/layer.tar": "../b/layer.tar"},
    )
    zstd_push.write_layout(saved, verified(config, layers), tmp_path / "l", copy_compressor)
    _, manifest = read_layout(tmp_path / "l")
    digests = [layer["digest"] for layer in manifest["layers"]]
    assert digests == [sha(b"Z:" + BIG), sha(b"Z:" + SMALL), sha(b"Z:" + SMALL)]


def test_another_image_than_the_verified_one_is_refused(tmp_path: Path) -> None:
    layers = [BIG, SMALL]
    config = config_of(layers)
    other = config_of(layers, labels='"io.torchimages.torch":"2.12.1"')  # the same layers, another label
    with pytest.raises(EngineError, match=f"configuration is {sha(other)}, not the verified image {sha(config)}"):
        zstd_push.write_layout(docker_26_save(other, layers), verified(config, layers), tmp_path / "l", copy_compressor)


def test_saved_layers_that_are_not_the_verified_diff_ids_are_refused(tmp_path: Path) -> None:
    """The configuration is the verified one, but a layer's bytes are not what its diff_id says."""
    layers = [BIG, SMALL]
    config = config_of(layers)
    saved = docker_26_save(config, [BIG, b"layer two: something else"])
    with pytest.raises(EngineError, match=r"layers .* are not the verified image's"):
        zstd_push.write_layout(saved, verified(config, layers), tmp_path / "l", copy_compressor)


def containerd_save(
    config: bytes, layers: list[bytes], manifest_config: bytes | None = None, index_name: str | None = None
) -> tuple[io.BytesIO, str]:
    """Docker 26 on the containerd image store: the gzip blobs it keeps, the image's manifest (naming
    `manifest_config`'s digest, default the configuration's) and its index (the image id), an attestation
    manifest beside; manifest.json names the config and the gzip blobs. The archive and the index's digest."""
    gzipped = [gzip.compress(layer, mtime=0) for layer in layers]
    named = manifest_config if manifest_config is not None else config
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "config": {"digest": sha(named), "size": len(named)},
            "layers": [{"digest": sha(g), "size": len(g)} for g in gzipped],
        }
    ).encode()
    attestation = b'{"schemaVersion":2,"layers":[]}'
    index = json.dumps(
        {
            "schemaVersion": 2,
            "manifests": [
                {"digest": sha(manifest), "platform": {"os": "linux", "architecture": "amd64"}},
                {"digest": sha(attestation), "annotations": {"vnd.docker.reference.digest": sha(manifest)}},
            ],
        }
    ).encode()
    blobs = {f"blobs/sha256/{sha(data)[7:]}": data for data in (*gzipped, config, manifest, attestation)}
    blobs[f"blobs/sha256/{(index_name or sha(index))[7:]}"] = index  # under another name: a blob that lies
    entry = {"Config": f"blobs/sha256/{sha(config)[7:]}", "Layers": [f"blobs/sha256/{sha(g)[7:]}" for g in gzipped]}
    top = json.dumps({"manifests": [{"digest": sha(index)}]}).encode()
    return archive({**blobs, "index.json": top, "manifest.json": json.dumps([entry]).encode()}), index_name or sha(
        index
    )


def test_a_containerd_store_archive_is_proven_through_its_index_and_its_layers_unzipped(tmp_path: Path) -> None:
    """The containerd store's image id is its index's digest: the configuration is proven the verified one
    through the index (hashed) that names a manifest (hashed) of that configuration; each gzip blob is read as
    its tar, whose digest is the diff_id. The attestations are not carried (their subject is the gzip manifest)."""
    layers = [BIG, SMALL]
    config = config_of(layers)
    saved, index_digest = containerd_save(config, layers)
    image = ImageInfo("r/x:1", index_digest, {}, {}, "", tuple(sha(layer) for layer in layers))
    layout = zstd_push.write_layout(saved, image, tmp_path / "l", copy_compressor)
    assert layout.config_digest == sha(config) and layout.diff_ids == image.layers
    _, manifest = read_layout(tmp_path / "l")
    for layer, data in zip(manifest["layers"], layers, strict=True):  # the tars, not the gzip blobs
        assert (tmp_path / "l/blobs/sha256" / layer["digest"][7:]).read_bytes() == b"Z:" + data
    other = config_of(layers, labels='"io.torchimages.torch":"2.12.1"')
    lying, lying_index = containerd_save(other, layers, manifest_config=config)  # its manifest names another config
    image = ImageInfo("r/x:1", lying_index, {}, {}, "", image.layers)
    with pytest.raises(EngineError, match=f"configuration is {sha(other)}, not the verified image {lying_index}"):
        zstd_push.write_layout(lying, image, tmp_path / "m", copy_compressor)
    elsewhere, _ = containerd_save(config, layers)  # the right image, but the verified id names no index in it
    image = ImageInfo("r/x:1", "sha256:" + "9" * 64, {}, {}, "", image.layers)
    with pytest.raises(EngineError, match="not the verified image sha256:9999"):
        zstd_push.write_layout(elsewhere, image, tmp_path / "n", copy_compressor)
    named = "sha256:" + "8" * 64  # another image's index, saved under the verified id's name: its bytes say otherwise
    renamed, _ = containerd_save(other, layers, index_name=named)
    image = ImageInfo("r/x:1", named, {}, {}, "", image.layers)
    with pytest.raises(EngineError, match=f"configuration is {sha(other)}, not the verified image {named}"):
        zstd_push.write_layout(renamed, image, tmp_path / "o", copy_compressor)


def test_an_archive_without_its_manifest_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match=r"no manifest\.json"):
        zstd_push.write_layout(archive({"x": b"1"}), verified(CONFIG, []), tmp_path / "l", copy_compressor)


@pytest.mark.skipif(shutil.which("zstd") is None, reason="the zstd program is not installed")
def test_the_zstd_program_compresses_and_the_digest_is_of_the_uncompressed_bytes(tmp_path: Path) -> None:
    digest = zstd_push.zstd_compress(io.BytesIO(BIG), tmp_path / "out.zst")
    assert digest == sha(BIG)
    assert (tmp_path / "out.zst").read_bytes()[:4] == b"\x28\xb5\x2f\xfd"  # zstd's frame magic
    unpacked = subprocess.run(["zstd", "-d", "-c", str(tmp_path / "out.zst")], capture_output=True, check=True)
    assert unpacked.stdout == BIG


def fake_program(folder: Path, name: str, script: str) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


def test_zstd_needs_skopeo_with_preserve_digests_and_zstd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    assert "needs skopeo and zstd on PATH (not found)" in (zstd_push.zstd_problem() or "")
    fake_program(bin_dir, "zstd", "exit 0\n")
    fake_program(bin_dir, "skopeo", "echo '      --dest-tls-verify   require HTTPS'\n")  # a skopeo before 1.6
    assert "has no `copy --preserve-digests` (too old)" in (zstd_push.zstd_problem() or "")
    fake_program(bin_dir, "skopeo", "echo '      --preserve-digests   Preserve digests of images and lists'\n")
    assert zstd_push.zstd_problem() is None


def layout_for_upload(tmp_path: Path) -> zstd_push.Layout:
    return zstd_push.write_layout(
        docker_26_save(config_of([SMALL]), [SMALL]),
        verified(config_of([SMALL]), [SMALL]),
        tmp_path / "l",
        copy_compressor,
    )


def test_the_upload_changes_nothing_and_checks_the_digest_skopeo_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = layout_for_upload(tmp_path)
    asked = tmp_path / "asked"
    # skopeo as the registry would have it: writes the digest of what it pushed to --digestfile
    script = (
        f'echo "$@" > {asked}\nwhile [ "$1" != --digestfile ]; do shift; done\necho {layout.manifest_digest} > "$2"\n'
    )
    fake_program(tmp_path / "bin", "skopeo", script)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert zstd_push.upload(layout, "127.0.0.1:5000/r/x:1", tls_verify=False) == []
    words = asked.read_text().split()
    assert words[:4] == ["--insecure-policy", "copy", "--quiet", "--preserve-digests"]
    assert "--dest-tls-verify=false" in words
    assert words[-2:] == [f"oci:{layout.path}:verified", "docker://127.0.0.1:5000/r/x:1"]
    assert zstd_push.upload(layout, "registry.example.org/r/x:1", tls_verify=True) == []
    assert "--dest-tls-verify=false" not in asked.read_text()


def test_an_upload_the_registry_holds_otherwise_or_refuses_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    layout = layout_for_upload(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    other = "sha256:" + "1" * 64
    fake_program(tmp_path / "bin", "skopeo", f'while [ "$1" != --digestfile ]; do shift; done\necho {other} > "$2"\n')
    (error,) = zstd_push.upload(layout, "h.example.org/r/x:1", tls_verify=True)
    assert error == f"h.example.org/r/x:1: the registry holds manifest {other}, not {layout.manifest_digest}"
    refusal = 'time="2026-12-01T10:00:00Z" level=fatal msg="writing manifest: unauthorized: authentication required"'
    fake_program(tmp_path / "bin", "skopeo", f"echo '{refusal}' >&2\nexit 1\n")
    assert zstd_push.upload(layout, "h.example.org/r/x:1", tls_verify=True) == [
        "h.example.org/r/x:1: writing manifest: unauthorized: authentication required"
    ]


def test_tags_of_different_images_are_not_pushed_as_one() -> None:
    one = ImageInfo("r/x:1", "sha256:" + "a" * 64, {}, {}, "", ())
    two = ImageInfo("r/x:2", "sha256:" + "b" * 64, {}, {}, "", ())
    assert zstd_push.same_image([("r/x:1", one), ("r/x:1.0", one)]) == one
    with pytest.raises(EngineError, match="r/x:1, r/x:2 are not one image"):
        zstd_push.same_image([("r/x:1", one), ("r/x:2", two)])
    with pytest.raises(EngineError, match="no image r/x:3 here to push"):
        zstd_push.same_image([("r/x:1", one), ("r/x:3", None)])


@pytest.mark.parametrize("damage", ["cut", "flipped"])
def test_a_saved_gzip_layer_that_cannot_be_unpacked_is_an_engine_error(tmp_path: Path, damage: str) -> None:
    layers = [BIG, SMALL]
    config = config_of(layers)
    saved, index_digest = containerd_save(config, layers)
    data = bytearray(saved.getvalue())
    packed = gzip.compress(BIG, mtime=0)
    at = bytes(data).index(packed)
    if damage == "cut":
        data[at + len(packed) // 2 : at + len(packed)] = bytes(len(packed) - len(packed) // 2)
    else:
        data[at + 20 : at + 40] = bytes(b ^ 0xFF for b in data[at + 20 : at + 40])
    image = ImageInfo("r/x:1", index_digest, {}, {}, "", tuple(sha(layer) for layer in layers))
    with pytest.raises(EngineError, match="whose gzip cannot be read"):
        zstd_push.write_layout(io.BytesIO(bytes(data)), image, tmp_path / "l", copy_compressor)
