"""A selection this machine cannot build fails in seconds, before anything is bootstrapped, built or written: the
mission's own `build 2.7.0-cuda11.8` against a loopback index that lacks its wheels (PyTorch's cu118 index does not
answer here), with and without `--bases bootstrap`; the real engine, the repository's own matrix."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.index_server import Reply, served

from .conftest import run_cli

pytestmark = pytest.mark.e2e
NO_SOURCES = ("TORCHIMAGES_INDEX_URL", "TORCHIMAGES_EXTRA_INDEX_URLS", "TORCHIMAGES_FIND_LINKS")


@pytest.mark.parametrize("bases", [(), ("--bases", "bootstrap")], ids=["registry", "bootstrap"])
def test_a_build_this_machine_cannot_serve_fails_in_seconds_naming_what_it_needs(
    bases: tuple[str, ...], docker_client: Any, tmp_path: Path
) -> None:
    page = json.dumps(
        {
            "meta": {"api-version": "1.1"},
            "files": [{"filename": "torch-2.7.0-cp310-cp310-manylinux_2_28_x86_64.whl", "url": "x.whl"}],
        }
    )
    env = {k: v for k, v in os.environ.items() if k not in NO_SOURCES}
    logs = tmp_path / "logs"
    with served({"/simple/torch/": Reply(page.encode(), "application/vnd.pypi.simple.v1+json")}) as url:
        start = time.monotonic()
        result = run_cli(
            "build", *bases, "--index-url", f"{url}/simple", "--log-dir", logs, "2.7.0-cuda11.8-cudnn9-runtime", env=env
        )
        took = time.monotonic() - start
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert took < 30, took
    assert "no source serves torch 2.7.0+cu118" in output, output
    assert f"{url}/simple (answers, without it)" in output
    assert "its own index https://download.pytorch.org/whl/cu118 is not searched" in output
    assert "ways out:" in output and "--index-url" in output and "list --pypi-only" in output
    assert "bootstrapping" not in output and "building" not in output
    assert not logs.exists()  # nothing written
    if not bases:  # ubuntu:22.04 from a registry: named unless the engine holds it or its registry answers
        from torchimages import registry

        names = ("ubuntu:22.04", "docker.io/library/ubuntu:22.04")  # as the engine is asked: by that name
        held = any(tag in names for image in docker_client.images.list() for tag in image.tags)
        try:
            registry.resolve_digest("ubuntu:22.04", deadline=5)
            answers = True
        except registry.RegistryError:
            answers = False
        assert ("registry image ubuntu:22.04" in output) is not (held or answers), output
