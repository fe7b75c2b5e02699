"""What the builder reads of an image or a build on the way, never deciding anything: an image's size
and whether it or its largest layer is over its budget, what it holds, why a build failed, the last lines of its log."""

from __future__ import annotations

import contextlib
from pathlib import Path

from torchimages import textfile
from torchimages.building.outcome import ENGINE_GONE, NO_SPACE, step_errors
from torchimages.combination import Image
from torchimages.engine import Engine, EngineError
from torchimages.render import OS_PACKAGES_FILE
from torchimages.sizes import format_size, layer_instruction

# Prints what an image holds: its OS package record (written at build time; its first 4 MiB, should the image
# hold something endless there), then the venv's packages.
INSTALLED_PROBE = f"""
import importlib.metadata as m
print("# OS packages ({OS_PACKAGES_FILE})")
print(open("{OS_PACKAGES_FILE}", errors="replace").read(4 << 20).strip())  # a record is kilobytes
print("# Python packages (sys.prefix)")
print("\\n".join(sorted(f"{{d.metadata['Name']}}=={{d.version}}" for d in m.distributions())))
"""


def tail(path: Path, lines: int = 12, width: int = 240) -> str:
    """The last `lines` of a log, indented, each cut to `width`."""
    text = path.read_text(errors="replace").splitlines()
    return "\n".join("    " + (line if len(line) <= width else line[: width - 3] + "...") for line in text[-lines:])


def last_step_error(path: Path) -> str | None:
    """The last error line a build step printed, as logged (`#9 0.562 ERROR: No matching distribution ...`;
    uv's with its first cause, see `step_errors`): BuildKit 0.8 ends its log near it, 0.13 with an excerpt
    of the Dockerfile, so the tail may not hold it."""
    found: list[str] = []
    with contextlib.suppress(OSError), path.open(errors="replace") as handle:
        found = step_errors(handle)
    return found[-1] if found else None


def size(engine: Engine, reference: str) -> int | None:
    """An image's size for the summary; None when it cannot be read (the checks that follow say why)."""
    try:
        found = engine.inspect(reference)
    except EngineError:
        return None
    return found.size if found and found.size else None


def over_budget(engine: Engine, image: Image, reference: str, shown: int = 5) -> list[str]:
    """The image's size against its flavor's budget: none, or the size, the budget and its largest layers."""
    if image.size_budget is None:
        return []
    info = engine.inspect(reference)
    if info is None:
        return [f"could not read the size of {reference}: no such image"]
    if not info.size:
        return [f"could not read the size of {reference}: the engine gives none for it"]
    if info.size <= image.size_budget:
        return []
    largest = sorted(engine.history(reference), key=lambda step: step.size, reverse=True)[:shown]
    return [
        f"size {format_size(info.size)} ({info.size} bytes) is over the {image.flavor} budget of "
        f"{format_size(image.size_budget)} ({image.size_budget} bytes); its {len(largest)} largest layers:",
        *(f"  {format_size(step.size):>9}  {layer_instruction(step.created_by)}" for step in largest),
    ]


def over_max_layer(engine: Engine, image: Image, reference: str) -> list[str]:
    """The image's largest layer (uncompressed, as the engine's history gives it) against its flavor's `max_layer`:
    none, or that layer's size, the limit and what made it."""
    if image.max_layer is None:
        return []
    layers = engine.history(reference)
    if not layers:
        return []
    largest = max(layers, key=lambda step: step.size)
    if largest.size <= image.max_layer:
        return []
    return [
        f"largest layer {format_size(largest.size)} ({largest.size} bytes) is over the {image.flavor} max_layer of "
        f"{format_size(image.max_layer)} ({image.max_layer} bytes): {layer_instruction(largest.created_by, 240)}",
    ]


def why_failed(engine: Engine, image: Image, log: Path, status: int) -> str:
    """A failed build's cause when it is not the build's own: the engine stopped answering, or its
    disk is full; else plain "build failed"."""
    if not engine.answers():
        return (
            f"{ENGINE_GONE} {engine.address()} stopped answering during the build of {image.tag} "
            f"(build exit {status}); re-run once it is back"
        )
    if NO_SPACE in log.read_text(errors="replace").lower():
        return f"{NO_SPACE}: the build failed (exit {status}): the engine's disk is full; free space, re-run"
    return f"build failed (exit {status})"


def record_installed(engine: Engine, log_dir: Path, image: Image, reference: str) -> None:
    """Write what the verified image holds beside its log, so a rebuild can be compared: the OS
    packages (the image's own record, `name=version`) and the venv's packages (`name==version`)."""
    record = log_dir / f"{image.own_tag}.installed.txt"
    try:
        text = engine.run_python(reference, ["-c", INSTALLED_PROBE])
    except EngineError as exc:
        text = f"# could not read what {reference} holds: {exc}\n"
    textfile.write_atomically(record, text)
