"""GPU architectures: what CUDA code holds (SASS `sm_90`, PTX `compute_120`) and NVIDIA's rules for which GPUs
run it.

Pure functions over literals: the knowledge base's expectation (compat.CudaArchsFact), the label
`io.torchimages.cuda.archs`, verification's reading of an image and `doctor`'s GPUs all meet here.
NVIDIA's rules (CUDA C++ Programming Guide, "Binary Compatibility" and "Application Compatibility"): a cubin
built for X.y runs on a device of compute capability X.z with z >= y (same major); an arch-specific cubin
(`sm_90a`) only on X.y itself; a family-specific one (`sm_100f`) on the same major with z >= y; PTX (`compute_XY`)
is compiled by the driver for any device of capability X.Y or newer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"^(sm|compute)_([1-9][0-9]?)([0-9])([af]?)$")
_CAPABILITY = re.compile(r"^([1-9][0-9]?)\.([0-9])$")
# A label or flag text longer than this is not an architecture list (the longest real one is ~120 characters).
MAX_TEXT = 4096


class ArchError(ValueError):
    """Text that is not an architecture list (`sm_75 sm_80 compute_120`) or a capability (`9.0`)."""


@dataclass(frozen=True, order=True)
class Arch:
    """One architecture: compute capability major.minor and NVIDIA's suffix (`a` arch-specific, `f` family,
    `` plain)."""

    major: int
    minor: int
    suffix: str = ""

    @property
    def capability(self) -> str:
        """`9.0`."""
        return f"{self.major}.{self.minor}"

    def name(self, kind: str) -> str:
        """`sm_90a` (kind `sm`) or `compute_120` (kind `compute`)."""
        return f"{kind}_{self.major}{self.minor}{self.suffix}"


@dataclass(frozen=True)
class Archs:
    """The architectures CUDA code holds: SASS (cubins, `sm_XY`) and PTX (`compute_XY`), each sorted."""

    sass: tuple[Arch, ...]
    ptx: tuple[Arch, ...] = ()

    @property
    def label(self) -> str:
        """As the label and torch write them: `sm_75 sm_80 ... sm_120 compute_120`."""
        return " ".join([a.name("sm") for a in self.sass] + [a.name("compute") for a in self.ptx])

    def __str__(self) -> str:
        return self.label or "none"


@dataclass(frozen=True)
class Coverage:
    """Whether code runs on a device of `capability`, and by what: `sass` (a cubin, `by` names it), `ptx` (the
    driver compiles `by` for the device) or `none`."""

    capability: Capability
    how: str
    by: str = ""

    @property
    def runs(self) -> bool:
        """Whether the device runs it."""
        return self.how != "none"


@dataclass(frozen=True, order=True)
class Capability:
    """A device's compute capability (nvidia-smi's `compute_cap`, torch's `get_device_capability`)."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


def parse_arch(text: str) -> tuple[str, Arch]:
    """(`sm` or `compute`, Arch) of `sm_90a`, `compute_120`; ArchError otherwise."""
    found = _NAME.match(text)
    if not found:
        raise ArchError(f"{text[:40]!r} is not an architecture (sm_90, sm_90a, sm_100f, compute_120)")
    kind, major, minor, suffix = found.groups()
    return kind, Arch(int(major), int(minor), suffix)


def parse_archs(text: str) -> Archs:
    """The architectures of a space-separated list as torch's `_cuda_getArchFlags()` and the label write it
    (`sm_75 sm_80 compute_120`; duplicates merged, order ignored); ArchError for anything else, an empty list
    included."""
    if len(text) > MAX_TEXT:
        raise ArchError(f"an architecture list of {len(text)} characters (at most {MAX_TEXT})")
    words = text.split()
    if not words:
        raise ArchError("an empty architecture list")
    sass: set[Arch] = set()
    ptx: set[Arch] = set()
    for word in words:
        kind, arch = parse_arch(word)
        (sass if kind == "sm" else ptx).add(arch)
    return Archs(tuple(sorted(sass)), tuple(sorted(ptx)))


def parse_capability(text: str) -> Capability:
    """A compute capability as nvidia-smi prints it (`9.0`, `12.0`); ArchError otherwise."""
    found = _CAPABILITY.match(text.strip())
    if not found:
        raise ArchError(f"{text.strip()[:40]!r} is not a compute capability (9.0, 12.0)")
    return Capability(int(found.group(1)), int(found.group(2)))


def coverage(archs: Archs, capability: Capability) -> Coverage:
    """How code holding `archs` runs on a device of `capability` (NVIDIA's rules, module docstring): a cubin
    first (the newest that fits), else PTX (the newest not above the device), else not at all."""
    cubins = [a for a in archs.sass if _cubin_runs(a, capability)]
    if cubins:
        return Coverage(capability, "sass", max(cubins).name("sm"))
    ptx = [a for a in archs.ptx if not a.suffix and (a.major, a.minor) <= (capability.major, capability.minor)]
    if ptx:
        return Coverage(capability, "ptx", max(ptx).name("compute"))
    return Coverage(capability, "none")


def _cubin_runs(arch: Arch, capability: Capability) -> bool:
    if arch.major != capability.major:
        return False
    if arch.suffix == "a":
        return arch.minor == capability.minor
    return arch.minor <= capability.minor


def difference(expected: Archs, found: Archs) -> list[str]:
    """What `found` lacks of `expected` and holds beyond it, one line each (empty when they are the same)."""
    lines = []
    for kind, want, have in (("sm", expected.sass, found.sass), ("compute", expected.ptx, found.ptx)):
        missing = [a.name(kind) for a in want if a not in have]
        extra = [a.name(kind) for a in have if a not in want]
        if missing:
            lines.append(f"missing {' '.join(missing)}")
        if extra:
            lines.append(f"not promised {' '.join(extra)}")
    return lines
