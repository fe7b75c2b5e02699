"""Facts from wheels, pure: a torch wheel's Requires-Dist pins (nvidia-cudnn-cuXX, nvidia-nccl-cuXX, the CUDA
runtime, cuda-toolkit) with their markers evaluated for its platform, its build (the local label `+cu126`, else
the CUDA its runtime or toolkit pin names, else cpu), its Pythons (cp tags) and platforms (manylinux); then each
torch minor's facts as compat.yaml holds them, and the companions' pairs (torchvision/torchaudio `torch==X`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from packaging import markers
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torchimages.compat import cuda_variant, minor_of
from torchimages.kb.pages import Metadata, Wheel

AMD64, ARM64 = "linux/amd64", "linux/arm64"
MACHINES = {AMD64: "x86_64", ARM64: "aarch64"}
PINS = {
    "cudnn": re.compile(r"nvidia-cudnn-cu\d+"),
    "nccl": re.compile(r"nvidia-nccl-cu\d+"),
    "cuda_runtime": re.compile(r"nvidia-cuda-runtime(-cu\d+)?"),
    "cuda_toolkit": re.compile(r"cuda-toolkit"),
}
NVIDIA = re.compile(r"nvidia-.*|cuda-toolkit|cuda-bindings")
BUILD_LABEL = re.compile(r"cpu|cu\d{3,4}")
PIN = re.compile(r"\d{1,6}(\.\d{1,9}){0,4}")  # 9.1.0.70: a plain version, nothing else is written
TORCH_PIN = re.compile(r"\d{1,6}(\.\d{1,9}){0,4}(\+[a-z0-9]{1,20})?")  # a companion's torch==2.6.0+cu126
VARIANT_KEYS = ("cudnn", "nccl", "cuda_toolkit")  # what compat.yaml's variants hold


class Refused(ValueError):
    """A wheel's metadata is not read as facts; the message says why in one line (a Requires-Dist or marker that
    does not parse, a cpu build that pins CUDA libraries, indexes that disagree)."""


def final(version: str) -> bool:
    """Whether a version is a final release written as such (`2.8.0`; not `2.8.0.post1`, `2.8.0.dev1`, `2.8.0rc1`,
    `1!2.8.0`, `2.8.0+cu128`, nor a spelling the version normalises, `02.8.0`): only these become facts."""
    try:
        parsed = Version(version)
    except InvalidVersion:
        return False
    plain = parsed.epoch == 0 and parsed.pre is None and parsed.post is None and parsed.dev is None
    return plain and parsed.local is None and str(parsed) == version


class Inconsistent(Refused):
    """A wheel's metadata contradicts its build (a cpu build that pins CUDA libraries)."""


@dataclass(frozen=True)
class Build:
    """What one torch wheel's metadata says of its build on one platform. `index`: `pypi` for a plain version
    (the index's default build), `pytorch` for a labelled one (`+cu126`, as download.pytorch.org serves)."""

    version: str
    variant: str
    index: str
    platform: str
    pythons: tuple[str, ...]
    cudnn: str | None
    nccl: str | None
    cuda_runtime: str | None
    cuda_toolkit: str | None
    source: str
    origin: str = ""  # the index that serves it (named where two indexes disagree)


@dataclass(frozen=True)
class VariantFacts:
    """A build's pins as compat.yaml's `variants` hold them (cuda_runtime only names the build), and its source."""

    cudnn: str | None
    nccl: str | None
    cuda_toolkit: str | None
    cuda_runtime: str | None
    source: str

    def held(self) -> dict[str, str]:
        """The pins compat.yaml holds for this build (`{}` for cpu)."""
        return {k: v for k in VARIANT_KEYS if (v := getattr(self, k)) is not None}


@dataclass(frozen=True)
class ReleaseFacts:
    """One torch minor as the index serves it: patches, linux/amd64 Pythons, the default build (None: the index
    serves no plain version), each linux/amd64 build's pins, and the linux/arm64 builds with their index."""

    minor: str
    patches: tuple[str, ...]
    python: tuple[str, ...]
    pypi_default: str | None
    variants: dict[str, VariantFacts]
    arm64: dict[str, tuple[str, str]]  # build -> (index, source)
    sources: tuple[str, ...]


def _environment(platform: str, python: str) -> dict[str, str]:
    return {
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
        "platform_machine": MACHINES[platform],
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "python_version": python,
        "python_full_version": f"{python}.0",
        "extra": "",
    }


def _applies(requirement: Requirement, environment: dict[str, str]) -> bool:
    """Whether a requirement applies in `environment` (Refused: its marker cannot be evaluated, so the wheel's
    requirements are not known: never read as not applying, which would make a CUDA build cpu)."""
    if requirement.marker is None:
        return True
    try:
        return bool(requirement.marker.evaluate(environment))
    except (ValueError, TypeError, markers.UndefinedComparison, markers.UndefinedEnvironmentName):
        raise Refused(f"the marker of Requires-Dist {_short(str(requirement))!r} cannot be evaluated") from None


def _short(text: str) -> str:
    return " ".join(text.split())[:120]


def exact(requirement: Requirement) -> str | None:
    """The version an `==X` requirement pins (None: no single exact pin of a plain version: not `===` or `==9.*`)."""
    return _exact(requirement, PIN)


def _exact(requirement: Requirement, pattern: re.Pattern[str]) -> str | None:
    specs = list(requirement.specifier)
    if len(specs) != 1 or specs[0].operator != "==" or not pattern.fullmatch(specs[0].version):
        return None
    version = specs[0].version
    return version if final(version.split("+")[0]) else None  # `09.1`, `9.1.0.post1`: no plain version


def pins(requires: Iterable[Requirement], environment: dict[str, str]) -> dict[str, str]:
    """The pins of PINS that apply in `environment`, by key (cudnn, nccl, cuda_runtime, cuda_toolkit)."""
    found: dict[str, str] = {}
    for requirement in requires:
        name = canonicalize_name(requirement.name)
        for key, pattern in PINS.items():
            if pattern.fullmatch(name) and (version := exact(requirement)) and _applies(requirement, environment):
                found.setdefault(key, version)
    return found


def cuda_build(version: str | None) -> str | None:
    """`12.4.127` -> `cu124`, `13.0.2` -> `cu130` (None: not a version of CUDA)."""
    found = re.match(r"(\d{2})\.(\d)(\.|$)", version or "")
    return cuda_variant(f"{found.group(1)}.{found.group(2)}") if found else None


def build_name(local: str | None, pinned: dict[str, str], any_nvidia: bool) -> str | None:
    """The build: the local label (cpu, cuXYZ), else the CUDA of the cuda-toolkit or runtime pin, else cpu where
    nothing of NVIDIA's is required (None: another build, such as rocm, or CUDA pins naming no version)."""
    if local is not None:
        return local if BUILD_LABEL.fullmatch(local) else None
    if "cuda_toolkit" in pinned or "cuda_runtime" in pinned:
        return cuda_build(pinned.get("cuda_toolkit") or pinned.get("cuda_runtime"))
    return None if any_nvidia else "cpu"


def builds(wheel: Wheel, meta: Metadata, source: str, origin: str = "") -> tuple[Build, ...]:
    """One torch wheel's builds, one for each Linux platform its file name names (none for a version that is not
    a final release). Refused: a Requires-Dist or marker that does not parse (the wheel is unread, never cpu),
    or a cpu build whose metadata pins CUDA libraries (inconsistent)."""
    if not final(wheel.public):
        return ()
    if meta.bad:
        raise Refused(f"Requires-Dist {meta.bad[0]!r} does not parse: the wheel's requirements are not known")
    out = []
    python = wheel.pythons[-1] if wheel.pythons else "3.11"
    for platform in wheel.platforms:
        environment = _environment(platform, python)
        applying = [r for r in meta.requires if _applies(r, environment)]
        pinned = pins(applying, environment)
        nvidia = any(NVIDIA.fullmatch(canonicalize_name(r.name)) for r in applying)
        variant = build_name(wheel.local, pinned, nvidia)
        if variant is None:
            continue
        if variant == "cpu" and (pinned or nvidia):
            said = ", ".join(f"{k} {v}" for k, v in pinned.items()) or "NVIDIA libraries"
            raise Inconsistent(f"a cpu build ({wheel.version}, {platform}) whose metadata pins {said}: inconsistent")
        out.append(
            Build(
                version=wheel.public,
                variant=variant,
                index="pypi" if wheel.local is None else "pytorch",
                platform=platform,
                pythons=wheel.pythons,
                cudnn=pinned.get("cudnn"),
                nccl=pinned.get("nccl"),
                cuda_runtime=pinned.get("cuda_runtime"),
                cuda_toolkit=pinned.get("cuda_toolkit"),
                source=source,
                origin=origin,
            )
        )
    return tuple(out)


def version_key(version: str) -> tuple[int, ...]:
    """Sort key of a public version (`2.10.0` after `2.9.1`)."""
    try:
        return Version(version).release
    except InvalidVersion:
        return ()


def _cu13(variant: str) -> bool:
    """Whether a build is of CUDA 13 or later (`cu130`), whose cuda-toolkit pin compat.yaml holds."""
    return variant.startswith("cu") and variant[2:4].isdigit() and int(variant[2:4]) >= 13


FACTS = ("cudnn", "nccl", "cuda_runtime", "cuda_toolkit")  # a build's pins, which two readings must agree on


def _where(build: Build, other: Build) -> str:
    """Who says it: the index, or the metadata file where both are of one index."""
    return build.source if build.origin == other.origin or not build.origin else build.origin


def disagreements(found: Iterable[Build]) -> list[str]:
    """Where two readings of one torch version disagree (one line each, naming both values and where each was
    read): a build's pin on one platform, or the build its plain version is (the default) on one platform."""
    builds: dict[tuple[str, str, str], Build] = {}
    defaults: dict[tuple[str, str], Build] = {}
    out = []
    for build in sorted(found, key=lambda b: (b.origin, b.source)):
        other = builds.setdefault((build.version, build.variant, build.platform), build)
        said = [(other, f"{build.variant} {f}", getattr(other, f), getattr(build, f)) for f in FACTS]
        if build.index == "pypi":  # a labelled version's build is its label: only a plain one's can differ
            default = defaults.setdefault((build.version, build.platform), build)
            said.append((default, "default build", default.variant, build.variant))
        out += [
            f"torch {build.version} {build.platform} {fact}: {theirs or 'none'} from {_where(first, build)}, "
            f"{mine or 'none'} from {_where(build, first)}"
            for first, fact, theirs, mine in said
            if theirs != mine
        ]
    return out


def releases(found: Iterable[Build], listed: Iterable[Wheel] = ()) -> dict[str, ReleaseFacts]:
    """Each torch minor's facts: every patch and linux/amd64 Python its wheels' names show (`listed`, read or
    not, and the builds'), each build's pins as its newest patch pins them, the default (plain version) build
    of the newest patch read, and the linux/arm64 builds. Only final releases are facts (a post, dev or
    epoch version is left out); Refused: two readings of one version disagree (`disagreements`)."""
    found = [b for b in found if final(b.version)]
    disagreeing = disagreements(found)
    if disagreeing:
        raise Refused("the indexes disagree: " + "; ".join(disagreeing))
    by_minor: dict[str, list[Build]] = {}
    for build in found:
        by_minor.setdefault(minor_of(build.version), []).append(build)
    names: dict[str, list[Wheel]] = {}
    for wheel in listed:
        if final(wheel.public):
            names.setdefault(minor_of(wheel.public), []).append(wheel)
    out = {}
    for minor in {*by_minor, *names}:
        seen, named = by_minor.get(minor, []), names.get(minor, [])
        pythons = {p for b in seen if b.platform == AMD64 for p in b.pythons}
        pythons |= {p for w in named if AMD64 in w.platforms for p in w.pythons}
        ordered = sorted(seen, key=lambda b: (version_key(b.version), b.source))
        amd64 = [b for b in ordered if b.platform == AMD64]
        variants = {  # the newest patch's last; cuda_toolkit is a fact of cu13 builds (nvcc from wheels)
            b.variant: VariantFacts(
                b.cudnn, b.nccl, b.cuda_toolkit if _cu13(b.variant) else None, b.cuda_runtime, b.source
            )
            for b in amd64
        }
        defaults = [b for b in amd64 if b.index == "pypi"]
        arm64: dict[str, tuple[str, str]] = {}
        for b in ordered:
            if b.platform == ARM64 and (b.variant not in arm64 or b.index == "pypi"):
                arm64[b.variant] = (b.index, b.source)
        out[minor] = ReleaseFacts(
            minor=minor,
            patches=tuple(sorted({b.version for b in seen} | {w.public for w in named}, key=version_key)),
            python=tuple(sorted(pythons, key=version_key)),
            pypi_default=defaults[-1].variant if defaults else None,
            variants=variants,
            arm64=arm64,
            sources=tuple(dict.fromkeys(b.source for b in ordered)),
        )
    return out


def companion_pin(meta: Metadata) -> str | None:
    """The torch version a torchvision or torchaudio pins (`torch==2.6.0`, its local label dropped; None: no
    exact pin, as torchaudio 2.11.1's `torch>=2.11`)."""
    for requirement in meta.requires:
        if canonicalize_name(requirement.name) == "torch" and (version := _exact(requirement, TORCH_PIN)):
            return version.split("+")[0]
    return None


def pairs(metas: Iterable[Metadata]) -> dict[str, str]:
    """torch version -> the companion version that pins it (the newest such companion; both final releases, a
    companion's local label dropped: `0.21.0+cu126` is 0.21.0)."""
    out: dict[str, str] = {}
    for meta in sorted(metas, key=lambda m: version_key(m.version)):
        torch = companion_pin(meta)
        try:
            public = Version(meta.version).public
        except InvalidVersion:
            continue
        if torch is not None and final(public):
            out[torch] = public
    return out
