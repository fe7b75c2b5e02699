"""What each image is doing while it is built: an `Event` says which stage an image is in (`STAGES`),
the seconds since it started and a detail (the bytes apt and uv or pip fetched, the wheels being downloaded).
`Progress` keeps what every running image is doing (thread-safe: images build in parallel) and tells a
`Renderer` (renderers.py draws them); buildkit_log.py reads the stages from BuildKit's log.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

# In the order an image goes through them. os, venv and devel are the Dockerfile's RUN steps, export is
# BuildKit writing the image; verify, smoke and push come after the build.
STAGES = ("bootstrap", "os", "venv", "devel", "export", "verify", "security", "smoke", "push", "sign", "index")
RANK = {stage: rank for rank, stage in enumerate(STAGES)}


@dataclass(frozen=True)
class Event:
    """What one image (or base) is doing: its stage ("" before the first is known), the seconds since it
    started, and a detail such as the bytes fetched."""

    image: str
    stage: str
    elapsed: float
    detail: str = ""


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
