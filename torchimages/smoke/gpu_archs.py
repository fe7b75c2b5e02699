"""Whether an image's GPU code runs on each visible GPU: the GPU probe's answer (each device's compute capability,
torch's `get_arch_list()`) and the image's label `io.torchimages.cuda.archs` against NVIDIA's rules
(torchimages.archs). Pure: the GPU suite asks it, the unit tests feed it literals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torchimages import archs
from torchimages.archs import ArchError, Capability

MAX_DEVICES = 64  # more than this is not one machine's GPUs
MAX_NAME = 100  # characters of a device's name kept


@dataclass(frozen=True)
class Device:
    """One GPU torch sees: its index, name and compute capability."""

    index: int
    name: str
    capability: Capability

    def __str__(self) -> str:
        return f"GPU {self.index} {self.name} (capability {self.capability})"


def _device(raw: Any) -> Device:
    if not isinstance(raw, dict):
        raise ArchError(f"a device is {type(raw).__name__}, not an object")
    index, name, capability = raw.get("index"), raw.get("name"), raw.get("capability")
    if not (isinstance(index, int) and not isinstance(index, bool) and 0 <= index < MAX_DEVICES):
        raise ArchError(f"a device's index is {str(index)[:20]!r}, not 0..{MAX_DEVICES - 1}")
    if not (
        isinstance(capability, list)
        and len(capability) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) for n in capability)
    ):
        raise ArchError(f"GPU {index}'s capability is {str(capability)[:40]!r}, not [major, minor]")
    printable = "".join(c if c.isprintable() else "?" for c in str(name))[:MAX_NAME]
    return Device(index, printable, archs.parse_capability(f"{capability[0]}.{capability[1]}"))


def read_answer(raw: Any) -> tuple[tuple[Device, ...], str]:
    """The probe's `_archs` answer: its devices and torch's architecture list as one text (`sm_80 compute_90`);
    ArchError saying what is wrong (the probe's own error, a device that is not {index, name, capability}, a
    list that is not of strings)."""
    if not isinstance(raw, dict):
        raise ArchError("the GPU probe did not report the architectures (no `_archs` object)")
    if raw.get("error"):
        raise ArchError(f"the GPU probe could not read them: {str(raw['error'])[:300]}")
    devices, listed = raw.get("devices"), raw.get("arch_list")
    if not isinstance(devices, list) or not 0 < len(devices) <= MAX_DEVICES:
        raise ArchError(f"the GPU probe's devices are {str(devices)[:60]!r}, not a list of 1..{MAX_DEVICES}")
    if not isinstance(listed, list) or not all(isinstance(a, str) for a in listed):
        raise ArchError(f"torch's architecture list is {str(listed)[:60]!r}, not a list of names")
    return tuple(_device(d) for d in devices), " ".join(listed)


def uncovered(devices: Sequence[Device], listed: str, whose: str) -> list[str]:
    """One line per device that code of the architectures `listed` (`whose`: where the list comes from) does
    not run on, by NVIDIA's rules (a cubin of the same major at or below the device, or PTX at or below it);
    ArchError when `listed` is not an architecture list."""
    parsed = archs.parse_archs(listed)
    return [
        f"{device} is not covered by {whose} ({parsed}): no cubin sm_{device.capability.major}Y with Y <= "
        f"{device.capability.minor} and no PTX at or below {device.capability}, so its kernels cannot run there "
        "('no kernel image is available for execution on the device')"
        for device in devices
        if not archs.coverage(parsed, device.capability).runs
    ]


def covered_by(devices: Sequence[Device], listed: str) -> dict[str, str]:
    """How each device runs code of `listed`: `GPU 0 NVIDIA H200 (capability 9.0)` -> `sass sm_90`, `ptx
    compute_120`, `none` (for the report)."""
    parsed = archs.parse_archs(listed)
    found = {str(d): archs.coverage(parsed, d.capability) for d in devices}
    return {name: f"{c.how} {c.by}".strip() for name, c in found.items()}
