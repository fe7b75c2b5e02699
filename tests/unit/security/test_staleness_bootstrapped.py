"""Issue 43, staleness under `--bases bootstrap`: an image counts as built on a bootstrapped base only where its
chain of stages starts at the combination's own OS image; a devel image built on an nvidia/cuda image pulled from
a registry is stale when the bases lock moved that image, bootstrapped OS base or not. Every fact is a literal."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.security.test_staleness import BUILT_ON, CURRENT, NOW, holding, labels
from torchimages.combination import BASES_LABEL, Combination, RegistryBase
from torchimages.planning import plan
from torchimages.security import staleness

MATRIX = "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}\n"
CUDA = "nvidia/cuda:13.0.2-devel-ubuntu24.04"  # a name only: no registry is asked


@pytest.fixture
def on_cuda_devel(write_matrix: Callable[[str], Path]) -> Combination:
    """A registry OS (ubuntu) under `--bases bootstrap` whose devel image is built on an nvidia/cuda image the
    lock pins to NOW."""
    (selected,) = plan.select(plan.load(write_matrix(MATRIX)), [])
    c = selected.combination
    ubuntu = RegistryBase("ubuntu:24.04", "ubuntu:24.04", BUILT_ON)
    cuda = RegistryBase(CUDA, CUDA, NOW)
    return dataclasses.replace(
        c,
        os=dataclasses.replace(c.os, provider="registry", image=ubuntu.reference),
        toolkit=dataclasses.replace(c.toolkit, provider="image", image=cuda.reference),  # as bases.apply names it
        registry_bases=(ubuntu, cuda),
        bases="bootstrap",
    )


def test_a_devel_image_on_a_registrys_cuda_image_the_lock_moved_is_stale(on_cuda_devel: Combination) -> None:
    image = on_cuda_devel.image("devel")
    built = {**labels(image), BASES_LABEL: "bootstrap", staleness.BASE_NAME_LABEL: f"docker.io/{CUDA}"}
    assert staleness.base_moved(on_cuda_devel, "devel", built) == [
        f"its base docker.io/{CUDA} moved: built on {BUILT_ON}, the bases lock pins {NOW} now"
    ]
    found = staleness.check(holding(image, built), on_cuda_devel, image, CURRENT)
    assert found.reasons == (f"its base docker.io/{CUDA} moved: built on {BUILT_ON}, the bases lock pins {NOW} now",)
    same = {**built, staleness.BASE_DIGEST_LABEL: NOW}
    assert not staleness.check(holding(image, same), on_cuda_devel, image, CURRENT).stale


def test_the_runtime_image_on_the_bootstrapped_os_base_ignores_the_lock(on_cuda_devel: Combination) -> None:
    image = on_cuda_devel.image("runtime")
    built = {**labels(image), BASES_LABEL: "bootstrap", staleness.BASE_DIGEST_LABEL: ""}
    assert staleness.base_moved(on_cuda_devel, "runtime", built) == []
    assert not staleness.check(holding(image, built), on_cuda_devel, image, CURRENT).stale
