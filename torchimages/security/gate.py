"""The security gate on one image before it is tagged: each check in turn (those not skipped), the allowlist
applied; its verdict is the results, one per check, and the problems that refuse the tag."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from torchimages.engine import Engine, EngineError
from torchimages.security import allowlist, layers, os_answers, os_updates, python
from torchimages.security.layer_cache import LayerCache
from torchimages.security.model import (
    CHECKS,
    NOT_SCANNED,
    OS_UPDATES,
    SECRETS,
    SKIPPED,
    CheckResult,
    Scan,
)


@dataclass(frozen=True)
class GateOptions:
    """How the gate runs: the allowlist's entries, the checks skipped (`--skip-check`, said in the report),
    whether a check that could not look fails the image (`--require-scan`), the network a check that reads
    the image's sources uses, the layer scan's cache (None: every layer is read every time) and bounds, and the
    os-updates answers of this run (None: each image refreshes its lists; cli/common.py gives one per command)."""

    entries: tuple[allowlist.Entry, ...] = ()
    skip: frozenset[str] = frozenset()
    require_scan: bool = False
    network: str | None = None
    today: datetime.date = field(default_factory=allowlist.utc_today)
    cache: LayerCache | None = None
    limits: layers.Limits = field(default_factory=layers.Limits)
    answers: os_answers.Answers | None = None


def run(
    engine: Engine,
    tag: str,
    reference: str,
    options: GateOptions,
    secrets: Sequence[tuple[str, bytes]] = (),
    cancelled: threading.Event | None = None,
) -> tuple[CheckResult, ...]:
    """Each check's verdict on the image `reference` (published as `tag`), in CHECKS order; `secrets`: the
    contents of the files the build mounted as secrets, which no layer may hold."""
    results = []
    for check in CHECKS:
        if cancelled is not None and cancelled.is_set():
            break
        if check in options.skip:
            results.append(CheckResult(check, SKIPPED, note="skipped by --skip-check"))
            continue
        results.append(
            allowlist.apply(
                scan(engine, check, reference, options, secrets, cancelled, tag), options.entries, tag, options.today
            )
        )
    return tuple(results)


def scan(
    engine: Engine,
    check: str,
    reference: str,
    options: GateOptions,
    secrets: Sequence[tuple[str, bytes]],
    cancelled: threading.Event | None,
    tag: str = "",
) -> Scan:
    """One check's raw answer (`tag`: the image's name where an answer is shared); a check that cannot run (the
    engine failing) is not scanned, saying why."""
    try:
        if check == SECRETS:
            return layers.scan(engine, reference, secrets, cancelled, options.cache, options.limits)
        if check == OS_UPDATES:
            return os_updates.scan(engine, reference, options.network, options.answers, tag)
        return python.scan(engine, reference, cancelled)
    except EngineError as exc:
        return Scan(check, scanned=False, note=f"could not run: {exc}")


@dataclass(frozen=True)
class Verdict:
    """The gate's verdict on one image: each check's result, and what refuses the tag (none: it may be tagged)."""

    results: tuple[CheckResult, ...]
    problems: tuple[str, ...]


def verdict(
    engine: Engine,
    tag: str,
    reference: str,
    options: GateOptions,
    secrets: Sequence[tuple[str, bytes]] = (),
    cancelled: threading.Event | None = None,
) -> Verdict:
    """`run`, and the problems that refuse the tag."""
    results = run(engine, tag, reference, options, secrets, cancelled)
    return Verdict(results, tuple(problems(results, options.require_scan)))


def problems(results: Sequence[CheckResult], require_scan: bool) -> list[str]:
    """What refuses the tag: every failing finding and expired entry; with `require_scan`, every check that
    could not look."""
    found = [f"{r.check}: {item}" if not item.startswith(r.check) else item for r in results for item in r.failing]
    if require_scan:
        found += [
            f"{r.check}: not scanned ({r.note}) and --require-scan is given" for r in results if r.status == NOT_SCANNED
        ]
    return found
