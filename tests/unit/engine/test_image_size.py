"""An image's size is its uncompressed layers' on either image store: the classic store's `docker image inspect`
Size is that; the containerd store's is the compressed content's (421 MB of a CPU runtime whose layers hold
1.49 GB, Docker 26.1.5, 2026-12-07), so there the layers' own sizes (its history) are added. The engine answers
are literals here (a stand-in SDK)."""

from __future__ import annotations

from typing import Any

import docker.errors

from torchimages import engine

ATTRS = {"Id": "sha256:" + "a" * 64, "Size": 421_229_050, "Config": {}, "RootFS": {"Layers": []}}
HISTORY: list[dict[str, Any]] = [{"CreatedBy": "CMD", "Size": 0}, {"CreatedBy": "RUN venv", "Size": 797_000_000}, {"Size": 138_000_000}]
CLASSIC = {"DriverStatus": [["Backing Filesystem", "extfs"]]}
CONTAINERD = {"DriverStatus": [["driver-type", "io.containerd.snapshotter.v1"]]}


class Image:
    attrs = ATTRS

    def history(self) -> list[dict[str, Any]]:
        return HISTORY


class Images:
    def get(self, reference: str) -> Image:
        if reference != "r/x:1":
            raise docker.errors.ImageNotFound(reference)
        return Image()


class Sdk:
    def __init__(self, info: dict[str, Any]) -> None:
        self.images, self._info = Images(), info
        self.asked = 0

    def info(self) -> dict[str, Any]:
        self.asked += 1
        return self._info


def engine_of(info: dict[str, Any]) -> tuple[engine.DockerEngine, Sdk]:
    found = engine.DockerEngine.__new__(engine.DockerEngine)
    sdk = Sdk(info)
    found.__dict__.update(sdk=sdk, _errors=docker.errors, _docker_cli="docker", _client=None, _named_contexts=None)
    return found, sdk


def test_the_classic_stores_size_is_inspects() -> None:
    found, _ = engine_of(CLASSIC)
    info = found.inspect("r/x:1")
    assert info is not None and info.size == 421_229_050


def test_the_containerd_stores_size_is_the_layers_added_and_the_store_asked_once() -> None:
    found, sdk = engine_of(CONTAINERD)
    first, second = found.inspect("r/x:1"), found.inspect("r/x:1")
    assert first is not None and first.size == 935_000_000 == (second.size if second else None)
    assert sdk.asked == 1
    assert found.inspect("r/none:1") is None
