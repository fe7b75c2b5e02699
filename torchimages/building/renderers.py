"""How progress is shown: `PlainRenderer` (CI, no terminal: one line per stage change, and a heartbeat
line per running image when it printed nothing for a while) or `LiveRenderer` (a terminal: one row per
running image, redrawn in place by rich); `renderer` picks one for a `--progress` mode.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from torchimages.building.progress import Event, Renderer
from torchimages.problems import shown, shown_lines

if TYPE_CHECKING:  # rich itself is imported where a view is drawn
    from rich.live import Live
    from rich.table import Table

HEARTBEAT_S = 60.0
MODES = ("auto", "plain", "tty")


def format_seconds(seconds: float) -> str:
    """`42 s`, `3m07s`, `1h02m`."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def _describe(event: Event) -> str:
    return f"{event.image}: {event.stage or 'starting'} ({format_seconds(event.elapsed)})" + (
        f"; {shown(event.detail)}" if event.detail else ""
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
        self.out(shown_lines(text))

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
        # emoji codes or highlighting: an image tag is not markup), what is not printable escaped.
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
            grid.add_row(Text(shown(image)), Text(f"{stage:<9}"), Text(f"{elapsed:>7}"), Text(shown(detail)))
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
            self.console.print(Text(shown_lines(above)), soft_wrap=True)

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
    if live:  # it draws with escape sequences: the stream itself, not the command line's escaping wrapper
        return LiveRenderer(getattr(stream, "unescaped", stream))

    def out(text: str) -> None:
        stream.write(text + "\n")
        stream.flush()  # a CI log shows each line when it happens, not when a buffer fills

    return PlainRenderer(out, heartbeat_s)
