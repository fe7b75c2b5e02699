"""The one decoder of the versions an image reports: the facts probe's raw answer -> the spec's notation.

Both the pre-tag verification (verify.py) and the cpu smoke suite read the facts probe
(torchimages/probes/scripts/facts.py) through these functions, so a version is decoded
in exactly one place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

# The facts an image's tag claims, in the order verification reports them.
FACTS = ("torch", "cuda", "cudnn", "nccl", "python", "os")
# The companion libraries: each is promised as `version+variant` (its local label names its build).
COMPANIONS = ("torchvision", "torchaudio")

_LEADING_NUMBERS = re.compile(r"^\d+(\.\d+)*")


def public_version(version: str) -> str:
    """'2.14.1+cu130' -> '2.14.1' (drops the PEP 440 local part)."""
    return version.split("+", 1)[0]


def local_label(version: str) -> str | None:
    """'2.11.1+cu132' -> 'cu132'; None when the version has no PEP 440 local part."""
    return version.split("+", 1)[1] if "+" in version else None


def same_build(expected: str, found: str) -> bool:
    """A companion as promised (`2.11.1+cu130`) and as read back: the same public version and, when a
    local label is promised, exactly that label (`2.11.1+cu132` and a bare `2.11.1` are other builds)."""
    if public_version(found) != public_version(expected):
        return False
    promised = local_label(expected)
    return promised is None or local_label(found) == promised


def version_tuple(version: str) -> tuple[int, ...]:
    """'580.65.06' -> (580, 65, 6); trailing non-numeric text is ignored."""
    match = _LEADING_NUMBERS.match(version.strip())
    if match is None:
        raise ValueError(f"not a version: {version!r}")
    return tuple(int(part) for part in match.group(0).split("."))


def cudnn_version_string(code: int) -> str:
    """torch.backends.cudnn.version() -> 'major.minor.patch' (92400 -> '9.24.0', 8907 -> '8.9.7').

    cuDNN 9 encodes major*10000 + minor*100 + patch; cuDNN 8 and older major*1000 + minor*100 + patch.
    """
    if code >= 90000:
        major, rest = divmod(code, 10000)
    else:
        major, rest = divmod(code, 1000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def nccl_version_string(reported: Sequence[int] | int) -> str:
    """torch.cuda.nccl.version() -> '2.30.7' (a tuple today, an int in old torch: 21803 -> '2.18.3')."""
    if isinstance(reported, int):
        major, rest = divmod(reported, 10000) if reported >= 10000 else divmod(reported, 1000)
        minor, patch = divmod(rest, 100)
        return f"{major}.{minor}.{patch}"
    return ".".join(str(part) for part in reported)


def first_parts(version: str, count: int) -> str:
    """'9.24.0.43' -> '9.24.0' for count=3."""
    return ".".join(version.split(".")[:count])


def driver_is_older(driver: str, minimum: str) -> bool:
    """True when the driver version is below the minimum the image's CUDA needs."""
    return version_tuple(driver) < version_tuple(minimum)


def decode_facts(raw: Mapping[str, Any]) -> dict[str, str | None]:
    """The facts probe's answer -> the six facts a tag claims, as strings (None: absent, e.g. CPU-only)."""
    os_release = raw.get("os") or {}
    cuda_build = raw.get("cuda") is not None  # a CPU-only torch has neither, whatever it reports
    cudnn = raw.get("cudnn") if cuda_build else None
    nccl = raw.get("nccl") if cuda_build else None
    return {
        "torch": None if raw.get("torch") is None else str(raw["torch"]),
        "cuda": None if raw.get("cuda") is None else str(raw["cuda"]),
        "cudnn": None if not cudnn else cudnn_version_string(int(cudnn)),
        "nccl": None if not nccl else nccl_version_string(nccl),
        "python": None if raw.get("python") is None else str(raw["python"]),
        "os": (str(os_release.get("id", "")) + str(os_release.get("version_id", ""))) or None,
        "machine": decode_machine(raw),
    }


def decode_machine(raw: Mapping[str, Any]) -> str | None:
    """The facts probe's `machine` answer -> the one machine the kernel, the interpreter and torch's shared
    objects all name (`aarch64`), or what disagrees (`uname x86_64; /opt/venv/lib/.../libtorch.so: aarch64`);
    None where the probe said nothing of it."""
    found = raw.get("machine")
    if not isinstance(found, Mapping):
        return None
    if "error" in found:
        return f"unreadable: {found['error']}"
    uname = str(found.get("uname") or "unknown")
    files = found.get("files")
    other = {str(p): str(m) for p, m in (files.items() if isinstance(files, Mapping) else ()) if m != uname}
    if not other:
        return uname
    shown = "; ".join(f"{path}: {machine}" for path, machine in list(other.items())[:3])
    more = f" (and {len(other) - 3} more)" if len(other) > 3 else ""
    return f"uname {uname}; {shown}{more}"


def decode_companions(raw: Mapping[str, Any]) -> dict[str, str | None]:
    """The facts probe's answer -> each companion's `__version__` as the image reports it, local label
    kept (None: not installed, or its import failed)."""
    found: dict[str, str | None] = {}
    for name in COMPANIONS:
        version = (raw.get(name) or {}).get("version")
        found[name] = str(version) if version else None
    return found
