"""Image sizes: a budget as written in matrix.yaml (`3GB`, `2.5GiB`), parsed strictly, and sizes shown as
Docker shows them (decimal units)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

# Decimal units as Docker prints sizes (`docker images`: 1.2GB), binary units as `du -h` and Kubernetes do.
UNITS = {
    "B": 1,
    "kB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "TiB": 1024**4,
}
ALLOWED = "a number and a unit: " + ", ".join(UNITS) + "; e.g. 3GB, 2.5GiB"
# The largest size read (1 PB): a larger one is a typo or hostile (and would overflow a float when shown).
MAX_SIZE = 1000**5
MAX_DIGITS = 40  # a number written longer is refused before it is read
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([A-Za-z]+)$")
_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")


class SizeError(ValueError):
    """A size that cannot be read; `suggestion` is a corrected spelling when there is an obvious one."""

    def __init__(self, message: str, suggestion: str = "") -> None:
        super().__init__(message)
        self.suggestion = suggestion


def parse_size(text: str) -> int:
    """Bytes of a size such as `3GB` (decimal units) or `2.5GiB` (binary units); units are case-sensitive,
    no unit, a space inside, zero or anything else is refused (SizeError, with a suggestion where one fits)."""
    if _NUMBER.match(text):
        raise SizeError(f"'{text}' has no unit", f"did you mean {text}GB?")
    found = _SIZE.match(text)
    if not found:
        compact = text.replace(" ", "")
        hint = f"did you mean {compact}?" if compact != text and _SIZE.match(compact) else ""
        raise SizeError(f"'{text}' is not a size", hint)
    number, unit = found.groups()
    if unit not in UNITS:
        raise SizeError(f"'{text}': unknown unit '{unit}'", _unit_hint(number, unit))
    if len(number) > MAX_DIGITS:
        raise SizeError(f"'{text[:MAX_DIGITS]}...' is larger than {format_size(MAX_SIZE)}")
    size = int(Decimal(number) * UNITS[unit])
    if size <= 0:
        raise SizeError(f"'{text}' is not more than zero")
    if size > MAX_SIZE:
        raise SizeError(f"'{text}' is larger than {format_size(MAX_SIZE)}: no image or layer is that large")
    return size


def _unit_hint(number: str, unit: str) -> str:
    """`3gb` -> 3GB, `3G` -> 3GB, `3Gi` -> 3GiB, `3KB` -> 3kB."""
    by_lower = {u.lower(): u for u in UNITS}
    guess = by_lower.get(unit.lower()) or by_lower.get(unit.lower() + "b")
    return f"did you mean {number}{guess}?" if guess else ""


def format_size(size: int) -> str:
    """A size in decimal units with three significant digits, as Docker shows it: `1.23 GB`, `456 MB`."""
    for unit in ("TB", "GB", "MB", "kB"):
        if size >= UNITS[unit]:
            value = size / UNITS[unit]
            return f"{value:.3g} {unit}" if value < 1000 else f"{value:.0f} {unit}"
    return f"{size} B"


@dataclass(frozen=True)
class SizeBudget:
    """The largest an image of each flavor may be, in bytes (uncompressed, as `docker image inspect` gives
    `Size`); a flavor not listed has no budget."""

    by_flavor: tuple[tuple[str, int], ...]

    def of(self, flavor: str) -> int | None:
        """The budget of one flavor, or None."""
        return dict(self.by_flavor).get(flavor)

    def over(self, default: SizeBudget) -> SizeBudget:
        """This budget, with `default`'s for the flavors it does not name."""
        merged = {**dict(default.by_flavor), **dict(self.by_flavor)}
        return SizeBudget(tuple(sorted(merged.items())))


def layer_instruction(created_by: str, width: int = 160) -> str:
    """What made a layer, in one short line: the install steps of a RUN (`RUN "$uv" pip install --python
    /opt/venv/bin/python --compile-bytecode --no-deps "torch==2.13.0+cpu"`), without the shell, BuildKit's ARG
    prefix or the set-up around them (uv's own install, `--target` a folder of its cache mount, is set-up);
    `(base image)` for a layer with no instruction (an imported root filesystem)."""
    text = " ".join(created_by.split()).removesuffix(" # buildkit")
    text = re.sub(r"^(RUN )?\|\d+ (\S+=\S* )*", "RUN ", text)
    text = re.sub(r"^(RUN )?/bin/(ba)?sh (-o pipefail )?-c ", "RUN ", text)
    if not text:
        return "(base image)"
    if text.startswith("RUN "):
        steps = [step.strip() for step in text.removeprefix("RUN ").split("&&")]
        installs = [
            step
            for step in steps
            if re.search(r"\binstall\b", step) and not step.startswith("if ") and " --target " not in step
        ]
        if installs:
            text = "RUN " + " && ".join(installs)
    return text if len(text) <= width else text[: width - 3] + "..."
