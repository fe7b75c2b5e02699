"""BuildKit's plain log (`--progress plain`, the build log under logs/) read as it is written:
`read_line` is a pure parser folding each line into a `LogState`, whose `stage` and `detail` the
builder reports; `following` calls back with each line a running build writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from torchimages.building.progress import RANK
from torchimages.sizes import format_size

_UNITS = {"B": 1, "kB": 1000, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4}
_UNITS.update({"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4})  # uv's
_SIZE = r"([\d.]+) ?([kKMGT]i?B)"
# `#12 [runtime 5/9] RUN python3.11 -m venv /opt/venv`: a Dockerfile step starts (BuildKit cuts long lines).
_HEADER = re.compile(r"^#(\d+) \[([\w.-]+) (\d+)/(\d+)\] (\w+)(.*)$")
_EXPORT = re.compile(r"^#\d+ (?:exporting |writing image|naming to|sending tarball)")
_FINISHED = re.compile(r"^#(\d+) (?:DONE [\d.]+s|CACHED|ERROR|CANCELED)")
_OUTPUT = re.compile(r"^#(\d+) [\d.]+ (.*)$")  # a step's own output, after its seconds
_LAYER = re.compile(r"^#(\d+) sha256:[0-9a-f]{12,} " + _SIZE + " / " + _SIZE)  # a base layer pulled
_PIP_DOWNLOAD = re.compile(r"^\s*Downloading (\S+) \(" + _SIZE + r"\)")
_PIP_BAR = re.compile(r"[━╸╺─]+\s+" + r"([\d.]+)/" + _SIZE)
_PIP_INSTALL = re.compile(r"^\s*(?:Installing collected packages|Successfully installed)")
# uv downloads in parallel and names each big one as it starts (`Downloading torch (182.9MiB)`) and ends
# (` Downloaded torch`), with no progress bar when its output is no terminal.
_UV_DOWNLOAD = re.compile(r"^Downloading ([\w.-]+) \(" + _SIZE + r"\)$")
_UV_DOWNLOADED = re.compile(r"^ Downloaded ([\w.-]+)$")
_APT_FETCHED = re.compile(r"^\s*Fetched " + _SIZE + " in ")
_VENV_STEP = re.compile(r"-m venv|/\.cache/uv|/\.cache/pip|pip install|/opt/venv")


def size_bytes(number: str, unit: str) -> int:
    """`12.3`, `MB` as bytes (decimal units, as pip, apt and BuildKit print them; binary ones, as uv does)."""
    return int(float(number) * _UNITS[unit])


@dataclass(frozen=True)
class Step:
    """One Dockerfile step as BuildKit names it (`[runtime 5/9]`), and the stage it belongs to (None: it
    says nothing of the stage, as WORKDIR or LABEL)."""

    target: str
    index: int
    count: int
    stage: str | None


def step_stage(target: str, instruction: str, text: str) -> str | None:
    """The stage a Dockerfile step belongs to: every step of the devel target is `devel` (a target named
    os or venv is that stage); elsewhere a RUN that makes or fills the venv is `venv`, FROM and other RUNs
    are `os`, a COPY of the venv is `venv`."""
    if target in ("os", "venv", "devel"):
        return target
    if instruction == "RUN":
        return "venv" if _VENV_STEP.search(text) else "os"
    if instruction == "FROM":
        return "os"
    if instruction == "COPY" and "/opt/venv" in text:
        return "venv"
    return None


@dataclass(frozen=True)
class LogState:
    """What a build log said so far: its steps, which finished, the stage reached, the bytes fetched."""

    steps: tuple[tuple[str, Step], ...] = ()  # (BuildKit's vertex number, step)
    finished: frozenset[str] = frozenset()
    stage: str = ""  # the furthest stage reached ("" before the first step)
    apt_bytes: int = 0
    wheel_bytes: int = 0  # what uv and pip fetched
    downloads: tuple[tuple[str, int], ...] = ()  # the files being downloaded now, shown (`name (size)`), and bytes
    download_step: str = ""  # the vertex of the step downloading them
    pulling: str = ""  # a base layer being pulled: `12.6MB / 30.4MB`

    @property
    def detail(self) -> str:
        """`fetched apt 86.0 MB, wheels 1.23 GB; downloading torch (182.9 MiB), sympy (6.0 MiB)`, or ""."""
        parts = [f"pulling a base layer: {self.pulling}"] if self.pulling else []
        sizes = (("apt", self.apt_bytes), ("wheels", self.wheel_bytes))
        fetched = [f"{what} {format_size(n)}" for what, n in sizes if n]
        if fetched:
            parts.append("fetched " + ", ".join(fetched))
        if self.downloads:
            parts.append("downloading " + ", ".join(shown for shown, _ in self.downloads))
        return "; ".join(parts)


def _reached(steps: tuple[tuple[str, Step], ...], finished: frozenset[str]) -> str:
    """The stage of the least advanced Dockerfile target still running (targets run in parallel: a CUDA
    devel target's apt step runs while runtime's pip steps do), from each target's latest step."""
    targets: dict[str, list[tuple[str, Step]]] = {}
    for vertex, step in steps:
        targets.setdefault(step.target, []).append((vertex, step))
    current = []
    for group in targets.values():
        if any(step.index == step.count and vertex in finished for vertex, step in group):
            continue  # its last step is done
        staged = sorted((step.index, step.stage) for _, step in group if step.stage)
        if staged:
            current.append(staged[-1][1])
    return min(current, key=RANK.__getitem__) if current else ""


def _advance(state: LogState, stage: str) -> LogState:
    if stage and (not state.stage or RANK[stage] > RANK[state.stage]):
        return dataclasses.replace(state, stage=stage)
    return state


def _downloaded(state: LogState, name: str | None = None) -> LogState:
    """The downloads under way are complete (only the one of that `name`, when given)."""
    done = [d for d in state.downloads if name is None or d[0].split(" (", 1)[0] == name]
    if not done:
        return state
    left = tuple(d for d in state.downloads if d not in done)
    return dataclasses.replace(
        state,
        wheel_bytes=state.wheel_bytes + sum(n for _, n in done),
        downloads=left,
        download_step=state.download_step if left else "",
    )


def read_line(state: LogState, line: str) -> LogState:
    """The state after one more line of BuildKit's plain log (a pure function; unknown lines change nothing)."""
    line = line.rstrip("\r\n").rsplit("\r", 1)[-1]
    header = _HEADER.match(line)
    if header:
        vertex, target, index, count, instruction, text = header.groups()
        step = Step(target, int(index), int(count), step_stage(target, instruction, text))
        if (vertex, step) in state.steps:  # BuildKit names a step again when its output resumes
            return state
        steps = (*state.steps, (vertex, step))
        return _advance(dataclasses.replace(state, steps=steps), _reached(steps, state.finished))
    if _EXPORT.match(line):
        return _advance(_downloaded(dataclasses.replace(state, pulling="")), "export")
    done = _FINISHED.match(line)
    if done:
        vertex = done.group(1)
        finished = state.finished | {vertex}
        after = _downloaded(state) if vertex == state.download_step else state
        after = dataclasses.replace(after, finished=finished, pulling="")
        return _advance(after, _reached(state.steps, finished))
    layer = _LAYER.match(line)
    if layer:
        _, got, got_unit, total, total_unit = layer.groups()
        return dataclasses.replace(state, pulling=f"{got}{got_unit} / {total}{total_unit}")
    output = _OUTPUT.match(line)
    return _read_output(state, *output.groups()) if output else state


def _read_output(state: LogState, vertex: str, text: str) -> LogState:
    """A RUN step's own output: uv's and pip's downloads, apt's fetches."""
    uv = _UV_DOWNLOAD.match(text)
    if uv:  # one more download beside those under way
        name, number, unit = uv.groups()
        busy = state if state.download_step in ("", vertex) else _downloaded(state)
        started = (f"{name} ({number} {unit})", size_bytes(number, unit))
        return dataclasses.replace(busy, downloads=(*busy.downloads, started), download_step=vertex)
    download = _PIP_DOWNLOAD.match(text)
    if download:  # pip downloads one file at a time: the one before is done
        url, number, unit = download.groups()
        name = urllib.parse.unquote(url.rsplit("/", 1)[-1])  # `torch-2.13.0%2Bcpu-...` from a URL
        started = (f"{name} ({number} {unit})", size_bytes(number, unit))
        return dataclasses.replace(_downloaded(state), downloads=(started,), download_step=vertex)
    if vertex != state.download_step:
        return _read_apt(state, text)
    finished = _UV_DOWNLOADED.match(text)
    if finished:
        return _downloaded(state, finished.group(1))
    bar = _PIP_BAR.findall(text)
    if bar and len(state.downloads) == 1:
        got, total, unit = bar[-1]
        if float(got) >= float(total):
            return _downloaded(state)
        ((shown, size),) = state.downloads
        return dataclasses.replace(state, downloads=((f"{shown.split(' (', 1)[0]} ({got}/{total} {unit})", size),))
    if _PIP_INSTALL.match(text):
        return _downloaded(state)
    return _read_apt(state, text)


def _read_apt(state: LogState, text: str) -> LogState:
    fetched = _APT_FETCHED.match(text)
    if fetched:
        return dataclasses.replace(state, apt_bytes=state.apt_bytes + size_bytes(*fetched.groups()))
    return state


def stage_changes(lines: Sequence[str]) -> list[tuple[str, str]]:
    """The (stage, detail) a log goes through, one entry per change of stage: what a plain view shows."""
    state, changes = LogState(), list[tuple[str, str]]()
    for line in lines:
        state = read_line(state, line)
        if state.stage and (not changes or changes[-1][0] != state.stage):
            changes.append((state.stage, state.detail))
    return changes


@contextlib.contextmanager
def following(path: Path, on_line: Callable[[str], None], poll_s: float = 0.2) -> Iterator[None]:
    """While the block runs, call `on_line` (in a thread) with each line written to `path`, from its start;
    every line written before the block ends is read before it returns."""
    stop = threading.Event()

    def follow() -> None:
        with path.open("rb") as handle:
            pending = b""
            while True:
                stopping = stop.is_set()
                chunk = handle.read()
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    on_line(line.decode(errors="replace"))
                if stopping and not chunk:
                    break
                if not chunk:
                    stop.wait(poll_s)
            if pending:
                on_line(pending.decode(errors="replace"))

    thread = threading.Thread(target=follow, name=f"follow {path.name}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
