"""Issue 43, the builds on bootstrapped bases: a build on a base the lock pins, bootstrapped instead, says no digest
of it (the lock's is not the local base's); each platform's build of a two-platform combination gets its own
platform's base as its named context (and its name in base.name), not the first platform's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from torchimages.building import bootstrap, requests
from torchimages.building.wheels import Served
from torchimages.planning import plan

SERVED = Served(None, (), (), False)
TWO_PLATFORMS = """\
matrix:
  include:
    - {torch: 2.10.0, cuda: cpu, os: ubuntu24.04, torchvision: none, torchaudio: none, flavors: [runtime],
       platforms: [linux/amd64, linux/arm64]}
"""
ONE_PLATFORM = (
    "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: ubuntu24.04, torchvision: none, torchaudio: none}\n"
)
LOCKED = "sha256:" + "ab" * 32  # what the bases lock pins ubuntu:24.04 to


def test_a_build_on_a_locked_base_bootstrapped_says_no_digest_of_it(write_matrix: Callable[[str], Path]) -> None:
    matrix = write_matrix(ONE_PLATFORM)
    matrix.with_name("matrix.bases.lock").write_text(f"bases:\n  ubuntu:24.04: {LOCKED}\n")
    pulled = plan.load(matrix).combinations[0]
    assert pulled.base_labels("runtime")["org.opencontainers.image.base.digest"] == LOCKED  # the lock is read
    (made,) = plan.load(matrix, os_bases="bootstrap").combinations
    labels = dict(requests.bases_labels(made, made.image("runtime")))
    assert labels == {
        "io.torchimages.bases": "bootstrap",
        "org.opencontainers.image.base.name": "torchimages/bootstrap-ubuntu:24.04",
        "org.opencontainers.image.base.digest": "",  # the Dockerfile's LABEL names the lock's: emptied
    }


@pytest.mark.parametrize(
    ("platform", "base"),
    [
        ("linux/amd64", "torchimages/bootstrap-ubuntu:24.04-amd64"),
        ("linux/arm64", "torchimages/bootstrap-ubuntu:24.04-arm64"),
    ],
)
def test_each_platforms_build_gets_its_own_platforms_base(
    write_matrix: Callable[[str], Path], platform: str, base: str
) -> None:
    (c,) = plan.load(write_matrix(TWO_PLATFORMS), os_bases="bootstrap").combinations
    image = c.image("runtime", platform)
    options = requests.BuildOptions(Path("images"), Path("logs"))
    request = requests.build_request(options, c, image, "tmp/x:1", SERVED, Path("pip.conf"), Path("uv.toml"))
    assert request.contexts == (("ubuntu:24.04", f"docker-image://{base}"),)
    assert request.platform == platform
    assert dict(request.labels)["org.opencontainers.image.base.name"] == base
    assert [b.reference for b in bootstrap.bootstrapped([c])] == [
        "torchimages/bootstrap-ubuntu:24.04-amd64",
        "torchimages/bootstrap-ubuntu:24.04-arm64",
    ]
