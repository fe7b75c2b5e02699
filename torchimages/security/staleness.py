"""Whether a published (or local) image went stale since it was built: what `outdated` reports, so that a
scheduled job rebuilds exactly those images.

An image is stale when it is not there, was built from other inputs than the matrix's now (its input digest),
has an OS package with a pending security update or a Python package with a known vulnerability that no
entry allows, is covered by an expired allowlist entry, or was built on another base than the one its
combination names now (the base digest label against the bases lock, or against the bootstrapped base this
engine holds). A check that could not look is said, and is staleness only under `--require-scan`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from torchimages.combination import INPUT_DIGEST_LABEL, Combination, Image
from torchimages.engine import Engine
from torchimages.security import allowlist, gate
from torchimages.security.gate import GateOptions
from torchimages.security.model import FAILED, NOT_SCANNED, OS_UPDATES, PYTHON, SECRETS

BASE_NAME_LABEL = "org.opencontainers.image.base.name"
BASE_DIGEST_LABEL = "org.opencontainers.image.base.digest"


@dataclass(frozen=True)
class Staleness:
    """One image's answer: why it is stale (none: it is not), and what could not be checked."""

    reference: str
    reasons: tuple[str, ...]
    unchecked: tuple[str, ...] = ()

    @property
    def stale(self) -> bool:
        return bool(self.reasons)

    def lines(self) -> list[str]:
        """What `outdated` prints for it: a first line, then one per reason and unchecked part."""
        head = f"{self.reference}: " + ("stale" if self.stale else "current")
        return [head, *(f"    {r}" for r in self.reasons), *(f"    not checked: {u}" for u in self.unchecked)]


def check(
    engine: Engine,
    combination: Combination,
    image: Image,
    options: GateOptions,
    pull: bool = False,
    cancelled: threading.Event | None = None,
) -> Staleness:
    """Whether `image` (its platform's reference, pulled first with `pull`) is stale (see the module)."""
    reference = image.platform_reference
    if pull:
        errors = engine.pull(reference)
        if errors:
            return Staleness(reference, (f"could not pull it: {errors[-1]}",))
    info = engine.inspect(reference)
    if info is None:
        return Staleness(reference, ("not there: never built here, or not pulled (--pull)",))
    reasons: list[str] = []
    if info.labels.get(INPUT_DIGEST_LABEL) != image.input_digest:
        reasons.append("built from other inputs than the matrix and templates now give (its input digest differs)")
    reasons += base_moved(engine, combination, info.labels)
    unchecked: list[str] = []
    for check in (OS_UPDATES, PYTHON):
        found = gate.scan(engine, check, reference, options, (), cancelled)
        result = allowlist.apply(found, options.entries, image.own_tag, options.today)
        if result.status == FAILED:
            reasons += [f"{result.check}: {item}" for item in result.failing]
        elif result.status == NOT_SCANNED:
            (reasons if options.require_scan else unchecked).append(f"{result.check}: {result.note}")
    reasons += [
        f"allowlist entry {e} (line {e.line}) expired on {e.expires.isoformat()}"
        for e in allowlist.expired(options.entries, image.own_tag, options.today)
        if e.check == SECRETS
    ]
    return Staleness(reference, tuple(reasons), tuple(unchecked))


def base_moved(engine: Engine, combination: Combination, labels: dict[str, str]) -> list[str]:
    """Why the base an image was built on is not its combination's now: the registry base's digest in the
    bases lock, or the id of the bootstrapped base this engine holds, differs from the image's label."""
    name, built_on = labels.get(BASE_NAME_LABEL), labels.get(BASE_DIGEST_LABEL)
    if not name or not built_on:
        return []
    locked = {b.name: b.digest for b in combination.registry_bases} | {
        b.pull: b.digest for b in combination.registry_bases
    }
    bare = name.split("@", 1)[0]
    if bare in locked:
        now = locked[bare]
    else:
        held = engine.inspect(bare)
        now = held.id if held else None
    if now and now != built_on:
        return [f"its base {bare} moved: built on {built_on}, the base is now {now}"]
    return []
