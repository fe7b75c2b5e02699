"""OCI platforms an image is made for (`linux/amd64`, `linux/arm64`), as matrix.yaml writes them: parsed
strictly, in one order, with the default that keeps a matrix without `platforms` as it was."""

from __future__ import annotations

from collections.abc import Sequence

AMD64 = "linux/amd64"
ARM64 = "linux/arm64"
PLATFORMS = (AMD64, ARM64)  # the order images, references and messages list them in
DEFAULT = AMD64
DEFAULTS = (DEFAULT,)  # a combination without `platforms` is built for this alone, as before platforms existed
ALLOWED = ", ".join(PLATFORMS)
# What people write for these platforms instead (uname -m, Debian, Docker's variant, the architecture alone).
_SPELLINGS = {
    "amd64": AMD64,
    "x86_64": AMD64,
    "x86-64": AMD64,
    "x64": AMD64,
    "linux/x86_64": AMD64,
    "arm64": ARM64,
    "aarch64": ARM64,
    "arm64/v8": ARM64,
    "linux/aarch64": ARM64,
    "linux/arm64/v8": ARM64,
}


class PlatformError(ValueError):
    """A platform list that cannot be read; `suggestion` names a fix where there is an obvious one."""

    def __init__(self, message: str, suggestion: str = "") -> None:
        super().__init__(message)
        self.suggestion = suggestion


def suggestion(text: str) -> str:
    """`did you mean linux/arm64?` for a known misspelling (case and spaces aside), else ""."""
    key = text.strip().lower()
    guess = key if key in PLATFORMS else _SPELLINGS.get(key)
    return f"did you mean {guess}?" if guess else ""


def parse(texts: Sequence[str]) -> tuple[str, ...]:
    """The platforms of a matrix list, in PLATFORMS order; PlatformError for an empty list, an unknown platform
    (with the likely one) or a platform listed twice."""
    if not texts:
        raise PlatformError("an empty list builds nothing", f"list one or more of {ALLOWED}")
    for text in texts:
        if text not in PLATFORMS:
            raise PlatformError(f"unknown platform '{text}'", suggestion(text))
    twice = sorted({t for t in texts if texts.count(t) > 1}, key=PLATFORMS.index)
    if twice:
        raise PlatformError(f"{twice[0]} is listed twice", "list each platform once")
    return tuple(p for p in PLATFORMS if p in texts)


def arch(platform: str) -> str:
    """`linux/arm64` -> `arm64`: the word a per-platform reference ends in."""
    return platform.split("/")[1]


def wheel_machine(platform: str) -> str:
    """`linux/arm64` -> `aarch64`: the machine Linux wheels are tagged for (`manylinux_2_28_aarch64`), and the
    one `uname -m` names."""
    return {AMD64: "x86_64", ARM64: "aarch64"}[platform]


def of_machine(machine: str) -> str | None:
    """`aarch64` (what `uname -m` says) -> `linux/arm64`: the platform whose programs that machine runs
    natively; None for a machine of no platform here (`riscv64`)."""
    return {"x86_64": AMD64, "amd64": AMD64, "aarch64": ARM64, "arm64": ARM64}.get(machine)


def words(platforms: Sequence[str]) -> str:
    """`linux/amd64 and linux/arm64`."""
    return " and ".join(platforms) if len(platforms) < 3 else ", ".join(platforms[:-1]) + f" and {platforms[-1]}"
