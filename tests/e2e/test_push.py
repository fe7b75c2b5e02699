"""Only verified images are pushed: a real registry (Debian's docker-registry) on loopback."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import Built, build_matrix, require

pytestmark = pytest.mark.e2e


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("docker-registry")
    if binary is None:
        require("Debian's docker-registry is not installed (make test installs it)")
    root = tmp_path_factory.mktemp("registry")
    address = f"127.0.0.1:{free_port()}"
    config = root / "config.yml"
    config.write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {root}/data\nhttp:\n  addr: {address}\n"
    )
    server = subprocess.Popen([str(binary), "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            try:
                urllib.request.urlopen(f"http://{address}/v2/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        yield address
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(scope="module")
def built(
    docker_client: Any, registry: str, tmp_path_factory: pytest.TempPathFactory, ca_bundle: tuple[Path, bytes]
) -> Iterator[Built]:
    entry = "{torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none, flavors: [runtime]}"
    tmp = tmp_path_factory.mktemp("push")
    yield from build_matrix(
        docker_client, tmp, entry, ca_bundle, registry=registry, extra=("--push", "--report", tmp / "report")
    )


def test_verified_images_are_pushed_with_their_aliases(built: Built, registry: str) -> None:
    assert built.status == 0, built.output
    image = built.image("runtime")
    path = image.repository.removeprefix(registry + "/")
    with urllib.request.urlopen(f"http://{registry}/v2/{path}/tags/list", timeout=10) as answer:
        tags = set(json.load(answer)["tags"])
    assert tags == {image.tag, *image.aliases}


def test_the_report_has_the_repository_digest_and_the_compressed_size(built: Built, docker_client: Any) -> None:
    (image,) = json.loads((built.logs.parent / "report" / "manifest.json").read_text())["images"]
    stored = docker_client.images.get(built.image("runtime").reference)
    assert image["repo_digests"] == stored.attrs["RepoDigests"] and image["repo_digests"]
    assert 0 < image["size"]["compressed"] < image["size"]["uncompressed"] == stored.attrs["Size"], image["size"]
