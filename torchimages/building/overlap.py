"""Devel's build overlaps runtime's checks (issue 44): BuildKit builds devel on the runtime image while
runtime's checks (verify, security gate, smoke gate) run, and nothing is tagged out of turn.

`overlapped` runs runtime's build and checks in a thread of their own and starts devel as soon as runtime is
built and held (`Hooks.built`). devel's tag waits for runtime's outcome (`Hooks.before_tag`): runtime is
tagged (or refused) first, as when the two ran in turn, and each image is still tagged only after its own checks
passed. A runtime that ends before it was built and held (its build failed, it was up to date, an interrupt)
is handed to `after` as before the overlap: devel then starts, or not, as runtime's outcome says.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from threading import Event

from torchimages.building.outcome import Outcome


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Hooks:
    """Where one image's build meets its neighbour's: `built` is called once the image is built and held under
    its temporary reference (before its checks); `before_tag` once its own checks passed, before any tag: it
    returns when the tag may go on; `waits`: what `before_tag` would wait for now, shown meanwhile (empty: it would
    not wait); `before_gate` before its security gate: it returns once the neighbour's gate ended (devel's layer scan
    then takes runtime's layers from the scan's cache instead of reading them again); `gated` once its own security
    gate ended, or will not run."""

    built: Callable[[], None] = _nothing
    before_tag: Callable[[], None] = _nothing
    waits: Callable[[], str] = str
    before_gate: Callable[[], None] = _nothing
    gate_waits: Callable[[], bool] = bool  # whether `before_gate` would wait now (shown as waiting, not timed)
    gated: Callable[[], None] = _nothing


NO_HOOKS = Hooks()


@dataclass(frozen=True)
class SmokeStart:
    """What a smoke gate tells of its start: `waiting` when its suites must first wait for the GPUs (another image's
    suites hold them), `started` once they run: the smoke phase's clock starts there, not at the wait."""

    waiting: Callable[[], None] = _nothing
    started: Callable[[], None] = _nothing


NO_START = SmokeStart()


def overlapped(
    runtime: Callable[[Hooks], Outcome],
    during: Callable[[Hooks], Outcome],
    after: Callable[[Outcome], Outcome],
) -> tuple[Outcome, Outcome]:
    """(runtime's outcome, devel's), once both ended. `runtime(hooks)` builds and checks runtime in a thread;
    once it is built and held, `during(hooks)` builds and checks devel here, its tag held back until runtime's
    outcome is known; a runtime that ended before it was held gives devel `after(its outcome)` instead."""
    held, gated = Event(), Event()
    with ThreadPoolExecutor(1, thread_name_prefix="runtime") as pool:
        first: Future[Outcome] = pool.submit(runtime, Hooks(built=held.set, gated=gated.set))
        first.add_done_callback(lambda _: _set(held, gated))
        held.wait()
        if first.done():
            return first.result(), after(first.result())
        second = during(
            Hooks(
                before_tag=lambda: _ended(first),
                waits=lambda: "" if first.done() else "runtime",
                before_gate=lambda: _wait(gated),
                gate_waits=lambda: not gated.is_set(),
            )
        )
        return first.result(), second


def _set(*events: Event) -> None:
    for event in events:
        event.set()


def _wait(event: Event) -> None:
    event.wait()


def _ended(future: Future[Outcome]) -> None:
    """Returns once `future` ended; raises its error (a runtime that crashed lets no devel be tagged after it)."""
    future.result()
