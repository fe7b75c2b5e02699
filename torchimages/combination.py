"""The unit of the plan: one resolved combination (= one Dockerfile = one build unit) and its images.

A `Combination` holds the facts its flavors share (torch, CUDA, cuDNN, NCCL, Python, OS, toolkit,
pins, wheel index) and where the matrix defined it; each `Image` holds only what differs between
flavors: its tag, aliases, input digest and labels. Nothing downstream re-derives a version.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from torchimages import platforms as platform_names
from torchimages import registry
from torchimages.compat import CudaArchsFact, Installer, OsRelease
from torchimages.problems import Problem
from torchimages.sizes import SizeBudget

FLAVORS = ("devel", "runtime")
# pip constraints pinning every package of a combination (written by `build.py lock`).
LOCK_FILE = "requirements.lock"
LABEL_PREFIX = "io.torchimages"
BOOTSTRAP = "bootstrap"  # `bases: bootstrap` (`--bases`): the OS base is made here from its archive
BASES_LABEL = f"{LABEL_PREFIX}.bases"  # `bootstrap` where a registry OS's base was bootstrapped (--bases)
BASE_NAME_LABEL = "org.opencontainers.image.base.name"
BASE_DIGEST_LABEL = "org.opencontainers.image.base.digest"
INPUT_DIGEST_LABEL = f"{LABEL_PREFIX}.input-digest"
PLATFORM_LABEL = f"{LABEL_PREFIX}.platform"  # on an image of any platform but linux/amd64
ARCHS_LABEL = f"{LABEL_PREFIX}.cuda.archs"  # the GPU architectures of its CUDA code (archs.Archs.label)
MIN_DRIVER_LABEL = f"{LABEL_PREFIX}.cuda.min-driver"  # the oldest NVIDIA driver it runs under
# The largest layer (uncompressed) of a CUDA image where matrix.yaml sets no `max_layer`: a pull is bounded by its
# largest layer, and engines unpack layers in parallel. 1.5 GB for CUDA 13 and newer (measured on 2.14.1+cu130:
# torch 1.2 GB, its other dependencies 1.07 GB, cuDNN 0.97 GB; docs/benchmarks.md). Older CUDA lines get 2.5 GB:
# torch's own wheel is one layer, about 1.6-1.9 GB installed in the CUDA 12.x builds (766-915 MB wheels, an
# estimate: docs/reference/matrix.md). Either refuses the nvidia-* libraries in one layer (3.2-5 GB).
DEFAULT_MAX_LAYER = 1_500_000_000
OLDER_CUDA_MAX_LAYER = 2_500_000_000


@dataclass(frozen=True)
class SourceLocation:
    """Where the matrix defines something: a file and a 1-based line."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Toolkit:
    """Where a devel image's nvcc comes from: `provider` is `image` (an nvidia/cuda devel image),
    `wheels` (NVIDIA's pip wheels, installed into the venv) or `none` (no CUDA); `reason` says why (the devel
    stage's comment)."""

    provider: str
    image: str = ""
    requirements: tuple[str, ...] = ()
    arch_list: str = ""
    reason: str = ""


@dataclass(frozen=True)
class RegistryBase:
    """A base image pulled from a registry: its name in the knowledge base (`ubuntu:24.04`), where it is
    pulled from (that name, or its mirror's) and the digest the bases lock pins (None: not locked)."""

    name: str
    pull: str
    digest: str | None = None

    @property
    def reference(self) -> str:
        """What FROM names: `pull@digest` when locked, else `pull`."""
        return f"{self.pull}@{self.digest}" if self.digest else self.pull


@dataclass(frozen=True)
class Image:
    """One flavor of a combination for one platform: only what differs between flavors and platforms. The images
    of a flavor share its public tag and aliases; for several platforms (or another than linux/amd64) the tag names
    an OCI index of them, and each platform's image has a local tag of its own (`platform_tag`)."""

    flavor: str
    repository: str
    tag: str
    aliases: tuple[str, ...]
    input_digest: str
    labels: tuple[tuple[str, str], ...]
    size_budget: int | None = None  # bytes (uncompressed); over it, the image fails before it is tagged
    platform: str = platform_names.DEFAULT  # the OCI platform it is built for
    platform_tag: str = ""  # this platform's local tag (`<tag>-arm64`); "" where the tag is the image itself
    max_layer: int | None = None  # bytes (uncompressed) of its largest layer at most; over it, it fails untagged

    @property
    def reference(self) -> str:
        """The public image reference, `repository:tag`."""
        return f"{self.repository}:{self.tag}"

    @property
    def platform_reference(self) -> str:
        """Where this platform's image is tagged locally: `repository:<tag>-<arch>` where the public tag names an
        OCI index of several platforms' images, else the public reference itself."""
        return f"{self.repository}:{self.platform_tag}" if self.platform_tag else self.reference

    @property
    def own_tag(self) -> str:
        """The tag of this platform's image alone: its platform's tag, else the public tag (what its log, JUnit
        file and SBOM are named by)."""
        return self.platform_tag or self.tag

    @property
    def names(self) -> tuple[str, ...]:
        """The tag and every alias."""
        return (self.tag, *self.aliases)

    def label_map(self) -> dict[str, str]:
        """The labels as a mapping."""
        return dict(self.labels)


@dataclass(frozen=True)
class Combination:
    """One resolved torch/CUDA/Python/OS choice and its images (one per flavor, in FLAVORS order)."""

    folder: str
    torch: str
    torchvision: str | None
    torchaudio: str | None
    numpy: str | None
    pins: tuple[str, ...]  # the venv's pinned requirements, torch first (`torch==2.13.0+cpu`, ...)
    variant: str
    cuda: str | None
    cudnn: str | None
    nccl: str | None
    python: str
    os: OsRelease
    toolkit: Toolkit
    index_url: str
    installer: Installer  # the uv that installs the venv (build time only)
    min_driver: str | None
    toolkit_driver: str | None
    defined_at: SourceLocation
    repository: str
    lock_digest: str | None = None
    registry_bases: tuple[RegistryBase, ...] = ()  # set by the plan (bases.py); FROM names their references
    source_date_epoch: int = 0  # the knowledge base's source_date: creation time, files clamped to it
    size_budget: SizeBudget | None = None  # matrix.yaml's, per flavor; not a build input
    max_layer: SizeBudget | None = None  # matrix.yaml's largest layer, per flavor (else default_max_layer); not one
    platforms: tuple[str, ...] = platform_names.DEFAULTS  # what it is built for, in platforms.PLATFORMS order
    # (platform, index) for each platform but linux/amd64: where its torch wheels come from (not `index_url`)
    platform_index_urls: tuple[tuple[str, str], ...] = ()
    # (platform, pins) for each platform whose index serves other versions' names (PyPI: `torch==2.9.1`, no `+cpu`)
    platform_pins: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # the platforms whose every pinned wheel PyPI serves (resolve.served_by_pypi); not a build input
    pypi_platforms: tuple[str, ...] = ()
    images: tuple[Image, ...] = ()  # flavor by flavor (FLAVORS order), each for every platform in order
    warnings: tuple[Problem, ...] = ()
    # `bootstrap`: the OS base is made here from its archive (bootstrap.py), for a registry OS mapped onto the
    # Dockerfile's FROM at build time; not a build input (the Dockerfile is the same either way).
    bases: str = "registry"
    # (platform, fact) for each platform the knowledge base knows the build's GPU architectures of (compat.yaml
    # `cuda_archs`); a certain one (V, S) is labelled and verified, an uncertain one only reported
    cuda_archs: tuple[tuple[str, CudaArchsFact], ...] = ()

    def archs_for(self, platform: str) -> CudaArchsFact | None:
        """The knowledge base's GPU architectures of this build on `platform` (None: not known, or a CPU build)."""
        return dict(self.cuda_archs).get(platform)

    def promised_archs(self, platform: str) -> str | None:
        """The architectures its images of `platform` promise (their label): a certain fact's, else None."""
        fact = self.archs_for(platform)
        return fact.archs if fact and not fact.uncertain else None

    @property
    def dockerfile(self) -> str:
        """The rendered Dockerfile's path, relative to the images folder."""
        return f"{self.folder}/Dockerfile"

    @property
    def flavors(self) -> tuple[str, ...]:
        """The flavors this combination builds."""
        return tuple(dict.fromkeys(image.flavor for image in self.images))

    @property
    def multi_platform(self) -> bool:
        """Whether its public tags name OCI indexes (built for more than linux/amd64 alone), each platform's image
        under a local tag of its own."""
        return self.platforms != platform_names.DEFAULTS

    def image(self, flavor: str, platform: str | None = None) -> Image:
        """The image of one flavor, for `platform` (default: the first it is built for); KeyError when the
        combination does not build it."""
        for image in self.images:
            if image.flavor == flavor and platform in (None, image.platform):
                return image
        raise KeyError(f"{self.folder} builds no {flavor} image" + (f" for {platform}" if platform else ""))

    def index_url_for(self, platform: str) -> str:
        """The index this combination's torch wheels come from on `platform`."""
        return dict(self.platform_index_urls).get(platform, self.index_url)

    def pins_for(self, platform: str) -> tuple[str, ...]:
        """The venv's pinned requirements on `platform`, torch first."""
        return dict(self.platform_pins).get(platform, self.pins)

    @property
    def pypi_only(self) -> bool:
        """Whether PyPI serves every wheel its pins name (torch and its companions) on every platform it is built
        for, so a build whose only wheel source is PyPI or a mirror of it (`--index-url`) never needs PyTorch's
        index."""
        return all(platform in self.pypi_platforms for platform in self.platforms)

    @property
    def wheel_indexes(self) -> tuple[str, ...]:
        """The indexes its wheels come from where no `--index-url` replaces them (its Dockerfile's), each once."""
        return tuple(dict.fromkeys(self.index_url_for(platform) for platform in self.platforms))

    @property
    def cudnn_major(self) -> str | None:
        """`9` for cuDNN 9.1.0.70."""
        return self.cudnn.split(".")[0] if self.cudnn else None

    @property
    def devel_from(self) -> str:
        """What the devel target is built on: `runtime` (toolkit from wheels, or none) or an nvidia/cuda image."""
        return self.toolkit.image if self.toolkit.provider == "image" else "runtime"

    @property
    def pulled_bases(self) -> tuple[RegistryBase, ...]:
        """The registry bases a build pulls: every one but the OS's when it is bootstrapped (`--bases bootstrap`)."""
        if self.bases != BOOTSTRAP:
            return self.registry_bases
        return tuple(base for base in self.registry_bases if base.reference != self.os.image)

    def base_of(self, flavor: str) -> RegistryBase | None:
        """The registry image a flavor's chain of stages starts FROM: the OS base for runtime and for a devel built
        on runtime, the nvidia/cuda image for a devel built on that; None for a bootstrapped base (a local image,
        named by its inherited io.torchimages.bootstrap.* labels instead)."""
        image = self.toolkit.image if flavor == "devel" and self.toolkit.provider == "image" else self.os.image
        if image == self.os.image and self.os.provider != "registry":
            return None
        found = next((base for base in self.registry_bases if base.reference == image), None)
        return found or RegistryBase(image, image)  # a plan names every base (bases.apply); a bare combination not

    def bootstrapped_base(self, platform: str) -> str | None:
        """The local base a registry OS's `FROM` is mapped to under `--bases bootstrap` (its archive's image;
        `<image>-<arch>` in a combination of several platforms); None where the OS base is pulled or is a
        bootstrap OS's own (its Dockerfile names it)."""
        if self.os.provider != "registry" or self.bases != BOOTSTRAP or self.os.archive is None:
            return None
        return self.os.archive.reference(platform_names.arch(platform), self.multi_platform)

    def bases_labels(self, flavor: str, platform: str) -> dict[str, str]:
        """Under `--bases bootstrap`, the labels a build adds (`--label`) to say what the image was built on:
        `io.torchimages.bases` and, where its chain of stages starts at the OS base, `base.name` naming the
        bootstrapped base (a lock's digest, which that base does not have, emptied). The base's archive, suite and
        Release date are labels the image inherits from it."""
        local = self.bootstrapped_base(platform)
        if local is None:
            return {}
        labels = {BASES_LABEL: BOOTSTRAP}
        base = self.base_of(flavor)
        if base is not None and base.reference == self.os.image:
            labels[BASE_NAME_LABEL] = local
            if base.digest:
                labels[BASE_DIGEST_LABEL] = ""
        return labels

    def base_labels(self, flavor: str) -> dict[str, str]:
        """`org.opencontainers.image.base.name` (the base's full name, as the knowledge base names it, not its
        mirror's) and `base.digest` (the digest the bases lock pins, where it does) of a flavor's image."""
        base = self.base_of(flavor)
        if base is None:
            return {}
        labels = {BASE_NAME_LABEL: registry.full_name(base.name)}
        return labels | ({BASE_DIGEST_LABEL: base.digest} if base.digest else {})

    def nvidia_environment(self) -> dict[str, str]:
        """Variables for the NVIDIA container toolkit (see `nvidia_environment`)."""
        return nvidia_environment(self.cuda)

    def companion_versions(self, platform: str = platform_names.DEFAULT) -> dict[str, str | None]:
        """torchvision and torchaudio as the tags promise them: `version+variant` (`2.11.1+cu130`), the local
        label naming the build, as each reports its `__version__` (None: left out); on a platform whose pins name
        plain versions (PyPI's one build per platform), the plain version."""
        labelled = self.pins_for(platform) == self.pins
        return {
            name: (f"{version}+{self.variant}" if labelled else version) if version else None
            for name, version in (("torchvision", self.torchvision), ("torchaudio", self.torchaudio))
        }

    def expected_facts(self, platform: str = platform_names.DEFAULT) -> dict[str, str | None]:
        """The facts verification reads back from inside each image of `platform`, as the tags promise them."""
        return {
            "machine": platform_names.wheel_machine(platform),
            "torch": self.torch,
            "cuda": self.cuda,
            "cudnn": self.cudnn,
            "nccl": self.nccl,
            "python": self.python,
            "os": self.os.name,
            **self.companion_versions(platform),
        }

    def build_inputs(self) -> dict[str, Any]:
        """What shapes the images' bytes (not their tags or where the matrix says it), as plain data."""
        os, toolkit = self.os, self.toolkit
        return {
            "folder": self.folder,
            "torch": self.torch,
            "torchvision": self.torchvision,
            "torchaudio": self.torchaudio,
            "numpy": self.numpy,
            "pins": self.pins,
            "variant": self.variant,
            "cuda": self.cuda,
            "cudnn": self.cudnn,
            "nccl": self.nccl,
            "python": self.python,
            "os": [os.name, os.provider, os.image, os.python, os.packages, os.devel_packages, os.suite, os.pip],
            "toolkit": [toolkit.provider, toolkit.image, toolkit.requirements, toolkit.arch_list],
            "index_url": self.index_url,
            "installer": [self.installer.version, self.installer.sha256],
            "lock_digest": self.lock_digest,
        }

    def labels(self, flavor: str, input_digest: str, platform: str = platform_names.DEFAULT) -> dict[str, str]:
        """Image labels: OCI annotations plus every version (as `platform`'s image holds them) and the input digest;
        all static, written in the Dockerfile's LABEL (what changes per commit or build is set at build time:
        building/provenance.py)."""
        companions = self.companion_versions(platform)
        versions = {
            "flavor": flavor,
            "torch": self.torch,
            "torchvision": companions["torchvision"] or "none",
            "torchaudio": companions["torchaudio"] or "none",
            "cuda": self.cuda or "none",
            "cudnn": self.cudnn or "none",
            "nccl": self.nccl or "none",
            "python": self.python,
            "os": self.os.name,
        }
        cuda = {
            **({ARCHS_LABEL: archs} if (archs := self.promised_archs(platform)) else {}),
            **({MIN_DRIVER_LABEL: self.min_driver} if self.cuda and self.min_driver else {}),
        }
        return {
            "org.opencontainers.image.title": f"PyTorch {self.torch} ({flavor})",
            "org.opencontainers.image.description": (
                f"PyTorch {self.torch}, {'CUDA ' + self.cuda if self.cuda else 'CPU only'}, "
                f"Python {self.python} on {self.os.name}"
            ),
            "org.opencontainers.image.version": self.torch,
            "org.opencontainers.image.licenses": "BSD-3-Clause",
            **self.base_labels(flavor),
            **{f"{LABEL_PREFIX}.{k}": v for k, v in versions.items()},
            **cuda,
            INPUT_DIGEST_LABEL: input_digest,
        }


def nvidia_environment(cuda: str | None) -> dict[str, str]:
    """Variables for the NVIDIA container toolkit (NVIDIA_REQUIRE_CUDA: the driver must support this
    CUDA major, under minor-version compatibility). Empty for CPU builds."""
    if not cuda:
        return {}
    return {
        "NVIDIA_VISIBLE_DEVICES": "all",
        "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
        "NVIDIA_REQUIRE_CUDA": f"cuda>={cuda.split('.')[0]}.0",
    }


def input_digest(
    combination: Combination, flavor: str, templates_fingerprint: str, platform: str = platform_names.DEFAULT
) -> str:
    """Hash of everything that shapes one image: the combination's build inputs, the flavor, the templates; and,
    for a platform other than linux/amd64, the platform and its wheel index (so a linux/amd64 image's digest is
    what it was before platforms existed, whatever else the combination is built for)."""
    inputs: dict[str, Any] = {**combination.build_inputs(), "flavor": flavor}
    if platform != platform_names.DEFAULT:
        inputs |= {
            "platform": platform,
            "index_url": combination.index_url_for(platform),
            "pins": combination.pins_for(platform),
        }
    payload = json.dumps(inputs, sort_keys=True, default=str) + "\0" + templates_fingerprint
    return "sha256:" + hashlib.sha256(payload.encode()).hexdigest()


def platform_tag(combination: Combination, tag: str, platform: str) -> str:
    """The local tag of one platform's image (`<tag>-arm64`) where the public tag names an OCI index of several
    (a combination built for more than linux/amd64 alone); "" where the public tag is the image itself."""
    return f"{tag}-{platform_names.arch(platform)}" if combination.multi_platform else ""


def make_image(
    combination: Combination,
    flavor: str,
    tag: str,
    aliases: tuple[str, ...],
    fingerprint: str,
    platform: str = platform_names.DEFAULT,
) -> Image:
    """An image of the combination for one platform, with its input digest and labels."""
    digest = input_digest(combination, flavor, fingerprint, platform)
    labels = combination.labels(flavor, digest, platform)
    if platform != platform_names.DEFAULT:
        labels[PLATFORM_LABEL] = platform
    budget = combination.size_budget.of(flavor) if combination.size_budget else None
    local = platform_tag(combination, tag, platform)
    own = combination.max_layer.of(flavor) if combination.max_layer else None
    return Image(
        flavor,
        combination.repository,
        tag,
        aliases,
        digest,
        tuple(sorted(labels.items())),
        budget,
        platform,
        local,
        own if own is not None else default_max_layer(combination, flavor),
    )


def default_max_layer(combination: Combination, flavor: str) -> int | None:
    """The largest layer an image may have where matrix.yaml says nothing: DEFAULT_MAX_LAYER for a CUDA 13+ image
    whose every layer is ours (runtime, and devel built FROM it), OLDER_CUDA_MAX_LAYER for an older CUDA's; none for
    CPU images (no nvidia-* layers) and for a devel on an nvidia/cuda devel image (that image's own layers and the
    venv copied in whole are 3-6 GB each)."""
    if not combination.cuda or (flavor == "devel" and combination.toolkit.provider == "image"):
        return None
    return DEFAULT_MAX_LAYER if int(combination.cuda.split(".")[0]) >= 13 else OLDER_CUDA_MAX_LAYER
