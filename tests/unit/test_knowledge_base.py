"""The knowledge base agrees with itself: no default it gives is one it marks as going or gone, and every
pair of facts it states is consistent (a variant's CUDA and its toolkit facts, an image release and its
CUDA minor, a companion and its torch, an OS and its Python...).

Each test names the facts that contradict each other, so a data edit that breaks one says where.
"""

from __future__ import annotations

import fnmatch
import itertools
from pathlib import Path

import pytest
import yaml

from tests.unit.conftest import ROOT
from torchimages import compat
from torchimages.compat import BaseImageEol, KnowledgeBase, minor_of, variant_cuda, version_key
from torchimages.planning.resolve import default_os
from torchimages.versions import version_tuple

KB = compat.load()
RELEASES: list[str] = sorted(KB.torch, key=version_key)

# Defaults the knowledge base gives although it marks them as going, reviewed: no other image exists.
# CUDA 11.8 has one release (11.8.0) and the whole CUDA 11 line is end-of-life (its entry's replacement
# is another CUDA, not another 11.8 image); `validate` warns on every 11.8 combination.
REVIEWED_EOL_DEFAULTS = {"11.8": "nvidia/cuda:11.8.0-*"}


def eol_entries(kb: KnowledgeBase, image: str) -> list[BaseImageEol]:
    """The end-of-life entries whose glob matches a concrete image name."""
    return [entry for entry in kb.base_image_eol if fnmatch.fnmatchcase(image, entry.image)]


def toolkit_images(kb: KnowledgeBase) -> list[tuple[str, str]]:
    """(CUDA, devel base image) for every Ubuntu the knowledge base says has images of that CUDA."""
    return [
        (cuda, f"nvidia/cuda:{facts.image_release}-devel-ubuntu{ubuntu}")
        for cuda, facts in kb.cuda.items()
        for ubuntu in facts.ubuntu
    ]


def test_no_default_toolkit_image_is_going_or_gone() -> None:
    for cuda, image in toolkit_images(KB):
        marked = [e.image for e in eol_entries(KB, image)]
        if REVIEWED_EOL_DEFAULTS.get(cuda) in marked:
            marked.remove(REVIEWED_EOL_DEFAULTS[cuda])
        assert not marked, f"cuda {cuda}: image_release gives {image}, which base_image_eol marks {marked}"


def test_the_reviewed_exceptions_are_still_needed_and_line_wide() -> None:
    for cuda, pattern in REVIEWED_EOL_DEFAULTS.items():
        (entry,) = [e for e in KB.base_image_eol if e.image == pattern]
        assert not entry.replacement.startswith("nvidia/cuda:"), "a replacement image exists: use it"
        assert KB.cuda[cuda].image_release == pattern.removeprefix("nvidia/cuda:").removesuffix("-*")


def test_no_os_base_image_is_going_or_gone() -> None:
    for os in KB.os.values():
        assert not eol_entries(KB, os.image), f"os {os.name}: its image {os.image} is marked end-of-life"


def test_no_replacement_is_itself_end_of_life() -> None:
    for entry in KB.base_image_eol:
        if not entry.replacement.startswith("nvidia/cuda:"):
            continue
        named = entry.replacement.split()[0].replace("*", "devel-ubuntu24.04")
        assert not eol_entries(KB, named), f"{entry.image}: its replacement {named} is marked end-of-life too"


def test_each_image_release_belongs_to_its_cuda_minor() -> None:
    for cuda, facts in KB.cuda.items():
        assert minor_of(facts.image_release) == cuda, f"cuda {cuda}: image_release {facts.image_release}"


def test_the_toolkit_driver_is_not_below_the_minor_compatibility_floor() -> None:
    for cuda, facts in KB.cuda.items():
        assert version_tuple(facts.min_driver) >= version_tuple(facts.minor_compat_min_driver), cuda


def test_newer_cuda_minors_never_need_older_drivers() -> None:
    ordered = sorted(KB.cuda.values(), key=lambda c: version_key(c.version))
    for older, newer in itertools.pairwise(ordered):
        assert version_tuple(newer.min_driver) >= version_tuple(older.min_driver), (older.version, newer.version)


def test_every_variant_is_a_known_cuda_and_the_default_is_published() -> None:
    for release in KB.torch.values():
        assert release.pypi_default in release.variants, f"torch {release.minor}: pypi_default not a variant"
        assert release.pypi_default != "cpu", f"torch {release.minor}: PyPI's Linux wheel is a CUDA build"
        for name in release.variants:
            cuda = variant_cuda(name)
            assert name == "cpu" or cuda in KB.cuda, f"torch {release.minor}: {name} has no toolkit facts"


def test_a_variants_pins_agree_with_its_cuda() -> None:
    for release in KB.torch.values():
        for name, variant in release.variants.items():
            where = f"torch {release.minor} {name}"
            if variant.cuda is None:
                assert (variant.cudnn, variant.nccl, variant.cuda_toolkit) == (None, None, None), where
                continue
            assert variant.cudnn and len(variant.cudnn.split(".")) == 4, f"{where}: cudnn {variant.cudnn}"
            assert variant.nccl and len(variant.nccl.split(".")) == 3, f"{where}: nccl {variant.nccl}"
            if variant.cuda_toolkit:
                assert minor_of(variant.cuda_toolkit) == variant.cuda, f"{where}: cuda_toolkit {variant.cuda_toolkit}"


def test_uncertain_paths_name_facts_that_exist() -> None:
    for release in KB.torch.values():
        for path in release.uncertain:
            parts = path.split(".")
            assert parts[0] == "variants" and parts[1] in release.variants, f"torch {release.minor}: {path}"
            if len(parts) == 3:
                assert parts[2] in ("cudnn", "nccl", "cuda_toolkit"), f"torch {release.minor}: {path}"
        assert set(release.uncertain_python) <= set(release.python), release.minor


def test_companions_pair_only_with_published_patches() -> None:
    for release in KB.torch.values():
        for name, paired in (("torchvision", release.torchvision), ("torchaudio", release.torchaudio)):
            assert set(paired) <= set(release.patches), f"torch {release.minor}: {name} for an unpublished patch"
        assert set(release.torchaudio) == set(release.patches), f"torch {release.minor}: a patch without torchaudio"


def test_torchaudio_is_of_its_torch_line_or_the_last_release_for_a_later_line() -> None:
    last = KB.torchaudio_last_release
    for release in KB.torch.values():
        for torch, audio in release.torchaudio.items():
            if minor_of(audio) == release.minor:
                continue
            assert audio == last, f"torch {torch}: torchaudio {audio} is of another line and not {last}"
            assert version_key(minor_of(last)) < version_key(release.minor), f"torch {torch}: torchaudio {audio}"


def test_each_os_python_is_one_some_torch_supports_and_numpy_is_pinned_for_it() -> None:
    supported = {p for release in KB.torch.values() for p in release.python}
    for os in KB.os.values():
        assert os.python in supported, f"os {os.name}: Python {os.python} has no torch wheel"
        assert os.python in KB.numpy, f"os {os.name}: no numpy pinned for Python {os.python}"
        assert f"python{os.python}" in os.packages, f"os {os.name}: does not install its own Python"


def test_registry_os_images_are_named_after_the_os() -> None:
    for os in KB.os.values():
        if os.provider == "registry":
            assert os.image == f"{os.family}:{os.version}", f"os {os.name}: image {os.image}"


def test_every_fact_cites_known_sources() -> None:
    cited = [
        *((f"torch {r.minor}", s) for r in KB.torch.values() for s in r.sources),
        *((f"os {o.name}", s) for o in KB.os.values() for s in o.sources),
        *((f"eol {e.image}", s) for e in KB.base_image_eol for s in e.sources),
    ]
    unknown = [(where, source) for where, source in cited if source not in KB.sources]
    assert not unknown


@pytest.mark.parametrize("release", RELEASES)
def test_every_published_variant_has_a_default_os(release: str) -> None:
    torch = KB.torch[release]
    for name, variant in torch.variants.items():
        chosen = default_os(KB, torch, variant.cuda)
        assert chosen is not None, f"torch {release} {name}: no known OS fits"
        os = KB.os[chosen]
        assert os.python in torch.python, f"torch {release} {name}: default {chosen} has Python {os.python}"
        if variant.cuda:
            assert os.version in KB.cuda[variant.cuda].ubuntu, f"torch {release} {name}: {chosen} has no toolkit"


def test_the_matrix_names_only_known_oses_and_cuda_builds() -> None:
    rows = yaml.safe_load(Path(ROOT, "matrix.yaml").read_text())["matrix"]["include"]
    for row in rows:
        release = KB.release(str(row["torch"]))
        assert release is not None, row
        assert str(row.get("os", next(iter(KB.os)))) in KB.os, row
        cuda = str(row["cuda"])
        assert compat.cuda_variant(cuda) in release.variants, row


def test_platform_wheels_are_published_variants_with_known_sources() -> None:
    for release in KB.torch.values():
        for platform, builds in release.platforms.items():
            for name, wheel in builds.items():
                where = f"torch {release.minor} {platform} {name}"
                assert name in release.variants and wheel.variant == name, where
                assert wheel.sources and set(wheel.sources) <= set(KB.sources), where


def test_pypi_serves_one_build_per_platform_and_it_is_the_pypi_default_when_it_is_cuda() -> None:
    """PyPI takes no local label: one wheel per version and platform. Where PyPI's aarch64 wheel is a CUDA build,
    it is the build its x86_64 wheel is (the same pins, as read: PYPIA)."""
    for release in KB.torch.values():
        for platform, builds in release.platforms.items():
            from_pypi = [name for name, wheel in builds.items() if wheel.index == "pypi"]
            assert len(from_pypi) <= 1, f"torch {release.minor} {platform}: PyPI serves {from_pypi}"
            if from_pypi and from_pypi[0] != "cpu":
                assert from_pypi[0] == release.pypi_default, f"torch {release.minor} {platform}: {from_pypi}"


def test_every_release_says_what_linux_arm64_has() -> None:
    """Each torch release lists the linux/arm64 build PyPI serves (every release from 2.4 has one)."""
    for release in KB.torch.values():
        builds = release.platforms.get("linux/arm64", {})
        assert any(w.index == "pypi" for w in builds.values()), f"torch {release.minor}: no linux/arm64 facts"
