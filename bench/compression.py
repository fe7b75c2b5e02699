"""Benchmark pushes with gzip layers against zstd layers (`build --push --compression zstd`): push and pull
times of one built image through a registry on loopback, the compressed sizes, and how long decompressing
the layers the registry stores takes alone (one core). Prints figures; record them in docs/benchmarks.md.

A pull is only a pull when the engine holds none of the image's layers, and a built runtime's layers are
held by its devel image (and the base by every image made on it). So the image measured is a copy made for
the run: each layer of the built image with one empty file more (`/.torchimages-bench-<run>`, nothing else
changed), loaded as `torchimages-bench/compression:<run>`. Its layers are its own: removing it removes
them, and the built image is never touched. Both pushes go through the tool's engine (`DockerEngine.push`,
the path `build --push` takes); pulls are `docker pull`; every tag the run makes is removed at the end.

Needs a Docker engine 23+ (to pull zstd), Debian's docker-registry, skopeo and zstd (`make bench-compression`
installs them), free disk of about twice the image under the engine's folder and once its compressed size
under $TMPDIR. Takes about 10-15 minutes for the 6.2 GB CUDA runtime on 2 cores.
Run: .venv/bin/python bench/compression.py [IMAGE]  (default: the CUDA 13.0 runtime on Debian 12)
"""

from __future__ import annotations

import bench_cli  # first: from here on a signal is one line and 128 + N (bench/bench_cli.py)

bench_cli.early(__name__, "bench/compression.py")

import argparse
import datetime
import gzip
import json
import os
import platform
import subprocess
import sys
import tarfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import IO, Any

from image_build import loopback_registry  # bench/: the folder this script runs from

from torchimages import values
from torchimages.engine import DockerEngine, stored_size

DEFAULT_IMAGE = "torchimages/pytorch:2.14.1-cuda13.0-cudnn9-runtime-debian12"
REPOSITORY = "torchimages-bench/compression"
GB = 1e9
CHUNK = 1 << 20
END = 1024  # a tar's end: two zero blocks


def timed(*args: str) -> float:
    """Run a command, fail loudly, return its seconds."""
    start = time.perf_counter()
    result = subprocess.run(list(args), capture_output=True, text=True, check=False)
    if result.returncode:
        sys.exit(f"failed: {' '.join(args)}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return time.perf_counter() - start


class Hashing:
    """Writes through to `out`, hashing what it writes."""

    def __init__(self, out: IO[bytes]) -> None:
        import hashlib

        self.out, self.sha = out, hashlib.sha256()

    def write(self, data: bytes) -> None:
        self.sha.update(data)
        self.out.write(data)


def _copy_layer(read: IO[bytes], size: int, marker: bytes, out: IO[bytes]) -> str:
    """The layer (a tar of `size` bytes) with the marker member before its end, written to `out`; its sha256."""
    hashed = Hashing(out)
    left, tail = size, b""
    while left:
        chunk = read.read(min(CHUNK, left))
        if not chunk:
            sys.exit("the saved archive ended inside a layer")
        left -= len(chunk)
        data = tail + chunk
        data, tail = data[:-END], data[-END:]
        hashed.write(data)
    if tail != bytes(END):
        sys.exit("a layer does not end with a tar's two zero blocks: cannot copy it this way")
    hashed.write(marker + bytes(END))
    return "sha256:" + hashed.sha.hexdigest()


def _header(name: str, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode = size, 0o644
    return info.tobuf(format=tarfile.GNU_FORMAT)


def fresh_copy(docker: str, sdk: Any, image: str, run: str) -> str:
    """`image` with an empty file more in every layer, loaded under REPOSITORY:run (streamed from `docker save`
    into `docker load`, nothing written here); its reference."""
    attrs = sdk.images.get(image).attrs
    layers = {d.removeprefix("sha256:"): n for n, d in enumerate(attrs["RootFS"]["Layers"])}
    config_blob = str(attrs["Id"]).removeprefix("sha256:")
    member = tarfile.TarInfo(f".torchimages-bench-{run}")
    member.mtime, member.mode = 0, 0o644
    marker = member.tobuf(format=tarfile.USTAR_FORMAT)
    reference = f"{REPOSITORY}:{run}"
    saver = subprocess.Popen([docker, "save", image], stdout=subprocess.PIPE)
    loader = subprocess.Popen([docker, "load", "--quiet"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert saver.stdout is not None and loader.stdin is not None
    new_ids: dict[int, str] = {}
    config: dict[str, Any] = {}
    out = loader.stdin
    with tarfile.open(fileobj=saver.stdout, mode="r|") as saved:
        for entry in saved:
            name = Path(entry.name).name
            if not entry.isfile() or Path(entry.name).parent.name != "sha256":
                continue
            read = saved.extractfile(entry)
            assert read is not None
            if name == config_blob:
                config = json.loads(read.read())
            elif name in layers:
                size = entry.size + len(marker)
                out.write(_header(f"{layers[name]}/layer.tar", size))
                new_ids[layers[name]] = _copy_layer(read, entry.size, marker, out)
                out.write(bytes(-size % tarfile.BLOCKSIZE))
    if not config or len(new_ids) != len(layers):
        sys.exit(f"`docker save {image}` did not hold the config and layers it names (Docker 25+ format expected)")
    order = [layers[d.removeprefix("sha256:")] for d in attrs["RootFS"]["Layers"]]
    config["rootfs"]["diff_ids"] = [new_ids[n] for n in order]
    config["config"].setdefault("Labels", {})["io.torchimages.bench-copy"] = run
    manifest = [{"Config": "config.json", "RepoTags": [reference], "Layers": [f"{n}/layer.tar" for n in order]}]
    for file_name, data in (
        ("config.json", json.dumps(config).encode()),
        ("manifest.json", json.dumps(manifest).encode()),
    ):
        out.write(_header(file_name, len(data)) + data + bytes(-len(data) % tarfile.BLOCKSIZE))
    out.write(bytes(END))
    loader.stdin.close()
    if saver.wait() or loader.wait():
        sys.exit(f"copying {image} failed (docker save {saver.returncode}, docker load {loader.returncode})")
    return reference


def registry_manifest(registry: str, repository: str, tag: str) -> dict[str, Any]:
    accept = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"
    request = urllib.request.Request(f"http://{registry}/v2/{repository}/manifests/{tag}", headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return dict(json.load(answer))


def decompress_seconds(data: Path, manifest: dict[str, Any]) -> float:
    """One core decompressing every layer the registry stores for the manifest (read from its disk)."""
    total = 0.0
    for layer in manifest["layers"]:
        hex_digest = layer["digest"].removeprefix("sha256:")
        blob = data / "docker/registry/v2/blobs/sha256" / hex_digest[:2] / hex_digest / "data"
        start = time.perf_counter()
        if layer["mediaType"].endswith("zstd"):
            subprocess.run(["zstd", "-q", "-d", "-c", str(blob)], stdout=subprocess.DEVNULL, check=True)
        else:
            with gzip.open(blob) as unpacked:
                while unpacked.read(CHUNK * 4):
                    pass
        total += time.perf_counter() - start
    return total


def main() -> None:
    parser = bench_cli.parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("image", nargs="?", default=DEFAULT_IMAGE)
    args = parser.parse_args()
    try:
        values.reference(args.image, "IMAGE")
    except values.BadValue as exc:
        parser.error(str(exc))
    engine = DockerEngine()
    if not engine.sdk.images.list(name=args.image):
        parser.error(f"IMAGE {args.image!r}: no such image on this engine")
    sdk, docker = engine.sdk, engine.docker_cli
    run = uuid.uuid4().hex[:8]
    print(f"date: {datetime.date.today()}  machine: {platform.machine()}, {os.cpu_count()} cores", flush=True)
    print(f"engine: Docker {sdk.version()['Version']}, image store: {sdk.info().get('Driver')}", flush=True)
    print(f"image: {args.image} ({sdk.images.get(args.image).attrs['Size'] / GB:.2f} GB)", flush=True)
    start = time.perf_counter()
    copy = fresh_copy(docker, sdk, args.image, run)
    copy_id = sdk.images.get(copy).id
    print(f"copy: {copy} {copy_id[:19]} made in {time.perf_counter() - start:.0f} s", flush=True)
    made = [copy]
    try:
        with loopback_registry() as (registry, data):
            figures: dict[str, dict[str, float]] = {}
            for compression in ("gzip", "zstd"):
                remote = f"{registry}/bench/{compression}"
                sdk.images.get(copy).tag(remote, run)
                made.append(f"{remote}:{run}")
                start = time.perf_counter()
                errors = engine.push(remote, [run], print, compression)
                push = time.perf_counter() - start
                if errors:
                    sys.exit(f"push failed: {errors}")
                manifest = registry_manifest(registry, f"bench/{compression}", run)
                kinds = sorted({layer["mediaType"] for layer in manifest["layers"]})
                size = stored_size(manifest) or 0
                unpack = decompress_seconds(data, manifest)
                figures[compression] = {"push": push, "size": size, "unpack": unpack}
                print(
                    f"{compression}: push {push:.0f} s, {size / GB:.2f} GB in the registry ({', '.join(kinds)}), "
                    f"decompressing its layers on one core {unpack:.0f} s",
                    flush=True,
                )
            for reference in made:  # the copy's layers are its own: with its names gone, none is left here
                sdk.images.remove(reference)
            made = []
            for compression in ("gzip", "zstd"):
                remote = f"{registry}/bench/{compression}:{run}"
                pull = timed(docker, "pull", remote)
                pulled = sdk.images.get(remote).id
                made.append(remote)
                same = "the same image id" if pulled == copy_id else f"ANOTHER image id {pulled}"
                figures[compression]["pull"] = pull
                print(f"{compression}: pull {pull:.0f} s ({same})", flush=True)
                sdk.images.remove(remote)
                made.remove(remote)
    finally:
        for reference in made:
            engine.remove_image(reference)
    gz, zs = figures["gzip"], figures["zstd"]
    print(
        f"zstd / gzip: pull {zs['pull'] / gz['pull']:.2f}, push {zs['push'] / gz['push']:.2f}, "
        f"size {zs['size'] / gz['size']:.2f}, decompression {zs['unpack'] / gz['unpack']:.2f}"
    )


if __name__ == "__main__":
    sys.exit(bench_cli.run("bench/compression.py", main))
