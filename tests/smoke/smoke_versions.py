"""Pure helpers that turn the versions a host reports into the spec's notation."""

from __future__ import annotations

import re
from collections.abc import Sequence

_LEADING_NUMBERS = re.compile(r"^\d+(\.\d+)*")


def public_version(version: str) -> str:
    """'2.14.1+cu130' -> '2.14.1' (drops the PEP 440 local part)."""
    return version.split("+", 1)[0]


def version_tuple(version: str) -> tuple[int, ...]:
    """'580.65.06' -> (580, 65, 6); trailing non-numeric text is ignored."""
    match = _LEADING_NUMBERS.match(version.strip())
    if match is None:
        raise ValueError(f"not a version: {version!r}")
    return tuple(int(part) for part in match.group(0).split("."))


def cudnn_version_string(code: int) -> str:
    """torch.backends.cudnn.version() -> 'major.minor.patch' (92400 -> '9.24.0').

    cuDNN 9 encodes major*10000 + minor*100 + patch; cuDNN 8 and older
    major*1000 + minor*100 + patch.
    """
    if code >= 90000:
        major, rest = divmod(code, 10000)
    else:
        major, rest = divmod(code, 1000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def first_parts(version: str, count: int) -> str:
    """'9.24.0.43' -> '9.24.0' for count=3."""
    return ".".join(version.split(".")[:count])


def nccl_version_string(reported: Sequence[int] | int) -> str:
    """torch.cuda.nccl.version() -> '2.30.7' (a tuple today, an int in old torch)."""
    if isinstance(reported, int):
        major, rest = divmod(reported, 10000) if reported >= 10000 else divmod(reported, 1000)
        minor, patch = divmod(rest, 100)
        return f"{major}.{minor}.{patch}"
    return ".".join(str(part) for part in reported)


def driver_is_older(driver: str, minimum: str) -> bool:
    """True when the driver version is below the minimum the image's CUDA needs."""
    return version_tuple(driver) < version_tuple(minimum)
