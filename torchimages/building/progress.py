"""What each image is doing while it is built, and how that is shown.

The model: an `Event` says which stage an image is in (`STAGES`), the seconds since it started and a
detail (the bytes apt and pip fetched, the wheel pip is downloading). `read_line` is a pure parser of
BuildKit's plain log (`--progress plain`, the build log under logs/): it folds each line into a
`LogState`, whose `stage` and `detail` the builder reports. `Progress` keeps what every running image
is doing (thread-safe: images build in parallel) and tells a renderer: `PlainRenderer` (CI, no
terminal: one line per stage change, and a heartbeat line per running image when it printed nothing
for a while) or `LiveRenderer` (a terminal: one row per running image, redrawn in place by rich).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO

from torchimages.sizes import format_size

if TYPE_CHECKING:  # rich itself is imported where a view is drawn
    from rich.live import Live
    from rich.table import Table

# In the order an image goes through them. os, venv and devel are the Dockerfile's RUN steps, export is
# BuildKit writing the image; verify, smoke and push come after the build.
STAGES = ("bootstrap", "os", "venv", "devel", "export", "verify", "smoke", "push")
RANK = {stage: rank for rank, stage in enumerate(STAGES)}
HEARTBEAT_S = 60.0
MODES = ("auto", "plain", "tty")


@dataclass(frozen=True)
class Event:
    """What one image (or base) is doing: its stage ("" before the first is known), the seconds since it
    started, and a detail such as the bytes fetched."""

    image: str
    stage: str
    elapsed: float
    detail: str = ""


# --- the build log ------------------------------------------------------------------------------------

_UNITS = {"B": 1, "kB": 1000, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4}
_SIZE = r"([\d.]+) ?([kKMGT]?B)"
# `#12 [runtime 5/9] RUN python3.11 -m venv /opt/venv`: a Dockerfile step starts (BuildKit cuts long lines).
_HEADER = re.compile(r"^#(\d+) \[([\w.-]+) (\d+)/(\d+)\] (\w+)(.*)$")
_EXPORT = re.compile(r"^#\d+ (?:exporting |writing image|naming to|sending tarball)")
_FINISHED = re.compile(r"^#(\d+) (?:DONE [\d.]+s|CACHED|ERROR|CANCELED)")
_OUTPUT = re.compile(r"^#(\d+) [\d.]+ (.*)$")  # a step's own output, after its seconds
_LAYER = re.compile(r"^#(\d+) sha256:[0-9a-f]{12,} " + _SIZE + " / " + _SIZE)  # a base layer pulled
_PIP_DOWNLOAD = re.compile(r"^\s*Downloading (\S+) \(" + _SIZE + r"\)")
_PIP_BAR = re.compile(r"[━╸╺─]+\s+" + r"([\d.]+)/" + _SIZE)
_PIP_INSTALL = re.compile(r"^\s*(?:Installing collected packages|Successfully installed)")
_APT_FETCHED = re.compile(r"^\s*Fetched " + _SIZE + " in ")
_VENV_STEP = re.compile(r"-m venv|/\.cache/pip|pip install|/opt/venv")


def size_bytes(number: str, unit: str) -> int:
    """`12.3`, `MB` as bytes (decimal units, as pip, apt and BuildKit print them)."""
    return int(float(number) * _UNITS[unit])


def format_seconds(seconds: float) -> str:
    """`42 s`, `3m07s`, `1h02m`."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


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
    pip_bytes: int = 0
    downloading: str = ""  # the file pip is downloading now, and its size
    download_bytes: int = 0
    download_step: str = ""  # the vertex of the step downloading it
    pulling: str = ""  # a base layer being pulled: `12.6MB / 30.4MB`

    @property
    def detail(self) -> str:
        """`fetched apt 86.0 MB, pip 1.23 GB; downloading torch-2.14.1-...whl (555 MB)`, or ""."""
        parts = [f"pulling a base layer: {self.pulling}"] if self.pulling else []
        fetched = [f"{tool} {format_size(n)}" for tool, n in (("apt", self.apt_bytes), ("pip", self.pip_bytes)) if n]
        if fetched:
            parts.append("fetched " + ", ".join(fetched))
        if self.downloading:
            parts.append(f"downloading {self.downloading}")
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


def _downloaded(state: LogState) -> LogState:
    """The download under way is complete."""
    if not state.downloading:
        return state
    return dataclasses.replace(
        state, pip_bytes=state.pip_bytes + state.download_bytes, downloading="", download_bytes=0, download_step=""
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
    """A RUN step's own output: pip's downloads, apt's fetches."""
    download = _PIP_DOWNLOAD.match(text)
    if download:
        url, number, unit = download.groups()
        name = urllib.parse.unquote(url.rsplit("/", 1)[-1])  # `torch-2.13.0%2Bcpu-...` from a URL
        return dataclasses.replace(
            _downloaded(state),
            downloading=f"{name} ({number} {unit})",
            download_bytes=size_bytes(number, unit),
            download_step=vertex,
        )
    if vertex != state.download_step:
        return _read_apt(state, text)
    bar = _PIP_BAR.findall(text)
    if bar:
        got, total, unit = bar[-1]
        if float(got) >= float(total):
            return _downloaded(state)
        name = state.downloading.split(" (", 1)[0]
        return dataclasses.replace(state, downloading=f"{name} ({got}/{total} {unit})")
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


# --- renderers ----------------------------------------------------------------------------------------


class Renderer(Protocol):
    """How progress is shown. Called by `Progress` under its lock, never from two threads at once."""

    tick_s: float  # how often `tick` wants to be called

    def line(self, text: str, running: Sequence[Event]) -> None:
        """A line that stays: a message, an image's result; `running` is what every running image is doing."""
        ...

    def update(self, event: Event, running: Sequence[Event]) -> None:
        """An image's stage or detail changed; `running` is what every running image is doing."""
        ...

    def tick(self, running: Sequence[Event]) -> None:
        """Time passed: heartbeats, a redraw."""
        ...

    def close(self) -> None:
        """Nothing more will be shown."""
        ...


def _describe(event: Event) -> str:
    return f"{event.image}: {event.stage or 'starting'} ({format_seconds(event.elapsed)})" + (
        f"; {event.detail}" if event.detail else ""
    )


class PlainRenderer:
    """One line per stage change of an image, and a heartbeat line (`still ...`) for every running image
    that printed nothing for `heartbeat_s` seconds: a CI log that never looks hung."""

    def __init__(self, out: Callable[[str], None], heartbeat_s: float = HEARTBEAT_S) -> None:
        self.out, self.heartbeat_s = out, heartbeat_s
        self.tick_s = min(1.0, heartbeat_s / 2)
        self.stages: dict[str, str] = {}  # image -> the stage last printed
        self.printed: dict[str, float] = {}  # image -> its elapsed seconds when its last line was printed

    def line(self, text: str, running: Sequence[Event]) -> None:
        self.out(text)

    def update(self, event: Event, running: Sequence[Event]) -> None:
        if event.stage and self.stages.get(event.image) != event.stage:
            self.stages[event.image] = event.stage
            self.printed[event.image] = event.elapsed
            self.out(_describe(event))

    def tick(self, running: Sequence[Event]) -> None:
        for event in running:
            if event.elapsed - self.printed.setdefault(event.image, 0.0) >= self.heartbeat_s:
                self.printed[event.image] = event.elapsed
                self.out(_describe(dataclasses.replace(event, stage=f"still {event.stage or 'starting'}")))

    def close(self) -> None:
        pass


class LiveRenderer:
    """One row per running image at the bottom of a terminal (image, stage, elapsed time, detail, cut to the
    terminal's width), redrawn in place by rich's `Live`; lasting lines are printed above them. The display
    starts with the first thing shown (a usage error before the build draws nothing) and goes at `close`.
    rich is imported here, not with the module: commands that draw no view (validate, list) never load it."""

    tick_s = 0.5

    def __init__(self, stream: TextIO, columns: Callable[[], int] | None = None) -> None:
        from rich.console import Console

        # A terminal, or `--progress tty` forced onto something else; text is shown as it is (no markup,
        # emoji codes or highlighting: an image tag is not markup).
        self.console = Console(
            file=stream, force_terminal=True, width=columns() if columns else None, highlight=False, emoji=False
        )
        self.live: Live | None = None  # once something was shown
        self.shown: list[tuple[str, str, str, str]] = []  # the rows on screen

    def __rich__(self) -> Table:
        """The rows on screen as a grid (rich draws the live display from this each time it draws it). The
        image, stage and time keep their width; the detail takes what is left of the line, cut with "…"."""
        from rich.table import Table
        from rich.text import Text

        names = max((len(row[0]) for row in self.shown), default=0)
        grid = Table.grid(padding=(0, 2))
        for _ in range(3):
            grid.add_column(no_wrap=True)
        grid.add_column(no_wrap=True, overflow="ellipsis", max_width=max(self.console.width - names - 24, 10))
        for image, stage, elapsed, detail in self.shown:  # stage and time padded: no column jumps as they change
            grid.add_row(Text(image), Text(f"{stage:<9}"), Text(f"{elapsed:>7}"), Text(detail))
        return grid

    def _draw(self, running: Sequence[Event], above: str | None = None) -> None:
        from rich.live import Live
        from rich.text import Text

        rows = [(e.image, e.stage or "starting", format_seconds(e.elapsed), e.detail) for e in running]
        if above is None and rows == self.shown and self.live is not None:
            return  # nothing changed on screen
        self.shown = rows
        if self.live is None:
            self.live = Live(self, console=self.console, auto_refresh=False, transient=True, redirect_stderr=False)
            self.live.start()
        if above is None:
            self.live.refresh()
        else:  # printed above the rows, which rich then draws again below it
            self.console.print(Text(above), soft_wrap=True)

    def line(self, text: str, running: Sequence[Event]) -> None:
        self._draw(running, above=text)

    def update(self, event: Event, running: Sequence[Event]) -> None:
        self._draw(running)

    def tick(self, running: Sequence[Event]) -> None:
        self._draw(running)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def renderer(mode: str, stream: TextIO, heartbeat_s: float = HEARTBEAT_S) -> Renderer:
    """`tty`: live lines; `plain`: one line per event; `auto`: live when `stream` is a terminal (not TERM=dumb)."""
    live = mode == "tty" or (mode == "auto" and stream.isatty() and os.environ.get("TERM") != "dumb")
    if live:
        return LiveRenderer(stream)

    def out(text: str) -> None:
        stream.write(text + "\n")
        stream.flush()  # a CI log shows each line when it happens, not when a buffer fills

    return PlainRenderer(out, heartbeat_s)


# --- the model ----------------------------------------------------------------------------------------


class Progress:
    """What every running image (or base) is doing, told to a renderer; safe to call from any thread.
    Lasting lines count the images finished: `[done/total] message`. As a context manager it calls
    `tick` every `renderer.tick_s` seconds in a thread (heartbeats, redraws)."""

    def __init__(self, renderer: Renderer, total: int = 0, clock: Callable[[], float] = time.monotonic) -> None:
        self.renderer, self.total, self.clock = renderer, total, clock
        self.done = 0
        self._lock = threading.Lock()
        self._started: dict[str, float] = {}
        self._running: dict[str, Event] = {}
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def _snapshot(self) -> list[Event]:
        now = self.clock()
        return [dataclasses.replace(e, elapsed=now - self._started[e.image]) for e in self._running.values()]

    def say(self, message: str, finished: bool = False) -> None:
        """A lasting line: `[done/total] message`; `finished` counts one more image done."""
        with self._lock:
            self.done += finished
            self.renderer.line(f"[{self.done}/{self.total}] {message}", self._snapshot())

    def note(self, message: str) -> None:
        """A lasting line as it is (a push retry, a warning)."""
        with self._lock:
            self.renderer.line(message, self._snapshot())

    def begin(self, image: str, stage: str = "") -> None:
        """An image (or base) starts now."""
        with self._lock:
            self._started[image] = self.clock()
            self._running[image] = Event(image, "", 0.0)
        if stage:
            self.update(image, stage)

    def update(self, image: str, stage: str, detail: str = "") -> None:
        """A running image's stage or detail; told to the renderer when either changed."""
        with self._lock:
            if image not in self._running:
                return
            before = self._running[image]
            if (before.stage, before.detail) == (stage, detail):
                return
            self._running[image] = Event(image, stage, self.clock() - self._started[image], detail)
            self.renderer.update(self._running[image], self._snapshot())

    def finish(self, image: str, message: str, counted: bool = True) -> None:
        """An image is done (`counted`: one of the `total`; a base is not): its lasting line."""
        with self._lock:
            self._running.pop(image, None)
            self.done += counted
            self.renderer.line(f"[{self.done}/{self.total}] {message}" if counted else message, self._snapshot())

    def running(self) -> list[Event]:
        """What every running image is doing now."""
        with self._lock:
            return self._snapshot()

    def tick(self) -> None:
        """Heartbeats and redraws: called every `renderer.tick_s` seconds while the context is open."""
        with self._lock:
            self.renderer.tick(self._snapshot())

    def _tick_until_stopped(self) -> None:
        while not self._stop.wait(self.renderer.tick_s):
            try:
                self.tick()
            except OSError:  # the output went away: the command's own writes will say so
                return

    def __enter__(self) -> Progress:
        self._ticker = threading.Thread(target=self._tick_until_stopped, name="progress", daemon=True)
        self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            self.renderer.close()
