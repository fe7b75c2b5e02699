"""What the selected images need of a machine: their sizes, bases, drivers and GPU architectures (`needs`), and
what a bare `doctor` checks (`default_selection`)."""

from __future__ import annotations

from collections.abc import Sequence

from torchimages.building import bootstrap
from torchimages.combination import Combination, Image, RegistryBase
from torchimages.compat import version_key
from torchimages.doctor.model import GB, ImageNeed, Needs
from torchimages.planning.plan import Plan, Selected, select
from torchimages.problems import InputError

# What a bare `doctor` checks where the matrix has it: the README's first build.
FIRST_BUILD = "2.11.0-cuda13.0"
# Disk an image takes in the engine's store, per flavor. Measured (docs/benchmarks.md, 2026-11-30:
# torch 2.14.1+cu130 and 2.13.0+cpu): a CUDA runtime 6.24 GB, devel FROM runtime +0.31 GB; a CPU
# runtime 1.41 GB, devel +0.03 GB. A devel image on an nvidia/cuda devel image is not measured here
# (no registry): that image (about 8 GB unpacked for 12.x/13.x) plus the venv copied in, so 14 GB.
RUNTIME_GB = {"cuda": 6.3, "cpu": 1.5}
DEVEL_ON_RUNTIME_GB = {"cuda": 0.35, "cpu": 0.05}
DEVEL_ON_TOOLKIT_IMAGE_GB = 14.0


def image_size_bytes(combination: Combination, flavor: str) -> int:
    """The estimated size of one image (see RUNTIME_GB and the rule above)."""
    kind = "cuda" if combination.cuda else "cpu"
    if flavor == "runtime":
        return int(RUNTIME_GB[kind] * GB)
    if combination.toolkit.provider == "image":
        return int(DEVEL_ON_TOOLKIT_IMAGE_GB * GB)
    shares_runtime = "runtime" in combination.flavors
    return int((DEVEL_ON_RUNTIME_GB[kind] + (0 if shares_runtime else RUNTIME_GB[kind])) * GB)


def largest(chosen: Sequence[Selected]) -> Selected:
    """The most demanding combination of a selection: the most bytes of images, then the newest torch."""
    return max(
        chosen,
        key=lambda s: (
            sum(image_size_bytes(s.combination, i.flavor) for i in s.images),
            version_key(s.combination.torch),
        ),
    )


def default_selection(plan: Plan) -> tuple[list[Selected], str]:
    """What a bare `doctor` checks, and a line saying why: the images of the README's first build
    (FIRST_BUILD) where the matrix has them, else its most demanding combination. Builds go one selection at
    a time; every image of the matrix at once (68 of them, 600 GB) is a fleet's job, not one machine's."""
    try:
        first = select(plan, [FIRST_BUILD])
    except InputError:
        first = []
    if first:
        return first, f"the images of the first build, `make build TAG='{FIRST_BUILD}'`"
    if not plan.combinations:
        return [], "no images"
    every = [Selected(c, c.images) for c in plan.combinations]
    return [largest(every)], "the most demanding combination of the matrix"


def image_need(combination: Combination, image: Image) -> ImageNeed:
    """What one image asks of a machine: its driver floors (those of its labels) and the knowledge base's GPU
    architectures of its build on its platform."""
    fact = combination.archs_for(image.platform)
    return ImageNeed(
        image.tag,
        combination.cuda,
        combination.min_driver,
        combination.toolkit_driver,
        image_size_bytes(combination, image.flavor),
        image.platform,
        fact.archs if fact else None,
        bool(fact and fact.uncertain),
    )


def needs(
    chosen: Sequence[Selected],
    host_only: bool = False,
    require_gpu: bool = False,
    rdma: bool = False,
    matrix: Plan | None = None,
) -> Needs:
    """What the selected images need of a machine; `matrix`: the plan whose images, newest torch first, a check
    may name instead (those that run on a GPU here where none selected does)."""
    images = tuple(image_need(s.combination, image) for s in chosen for image in s.images)
    newest_first = sorted(matrix.images(), key=lambda ci: version_key(ci[0].torch), reverse=True) if matrix else []
    every = tuple(image_need(c, image) for c, image in newest_first)
    bases: dict[str, RegistryBase] = {}
    for s in chosen:
        devel = any(i.flavor == "devel" for i in s.images)  # runtime alone never pulls the toolkit image
        wanted = {s.combination.os.image, *([s.combination.toolkit.image] if devel else [])}
        for base in s.combination.pulled_bases:
            if base.reference in wanted:
                bases.setdefault(base.reference, base)
    made = bootstrap.bootstrapped(s.combination for s in chosen)
    bootstrapped = sorted(base.reference for base in made)
    keyrings = sorted({base.os.archive.keyring for base in made if base.os.archive and base.os.archive.keyring})
    return Needs(
        images, tuple(bases.values()), tuple(bootstrapped), host_only, require_gpu, rdma, tuple(keyrings), every
    )
