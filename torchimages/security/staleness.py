"""Whether a published (or local) image went stale since it was built: what `outdated` reports, so that a
scheduled job rebuilds exactly those images.

An image is stale when it is not there, was built from other inputs than the matrix's now (its input digest),
would not be built the same now (its build digest, where the caller gives the one a build computes: `build`'s own
meaning of up to date), has an OS package with a pending security update or a Python package with a known
vulnerability that no entry allows, is covered by an expired allowlist entry, or was built on another registry
base than the one the bases lock pins now (its `base.digest` label). A check that could not look is said, and is
staleness only under `--require-scan`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from torchimages import values
from torchimages.combination import BASES_LABEL, BOOTSTRAP, INPUT_DIGEST_LABEL, Combination, Image
from torchimages.engine import Engine
from torchimages.security import allowlist, gate
from torchimages.security.gate import GateOptions
from torchimages.security.model import FAILED, NOT_SCANNED, OS_UPDATES, PYTHON, SECRETS

BASE_NAME_LABEL = "org.opencontainers.image.base.name"
BUILD_DIGEST_LABEL = "io.torchimages.build-digest"  # building/build_digest.py's (a layer above: not imported)
BASE_DIGEST_LABEL = "org.opencontainers.image.base.digest"


@dataclass(frozen=True)
class Staleness:
    """One image's answer: why it is stale (none: it is not), and the checks that could not look (not scanned)."""

    reference: str
    reasons: tuple[str, ...]
    unchecked: tuple[str, ...] = ()

    @property
    def stale(self) -> bool:
        return bool(self.reasons)

    def lines(self) -> list[str]:
        """What `outdated` prints for it: a first line, then one per reason and unchecked part."""
        head = f"{self.reference}: " + ("stale" if self.stale else "current")
        return [head, *(f"    {r}" for r in self.reasons), *(f"    not scanned: {u}" for u in self.unchecked)]


def check(
    engine: Engine,
    combination: Combination,
    image: Image,
    options: GateOptions,
    pull: bool = False,
    cancelled: threading.Event | None = None,
    build_digest: str | None = None,
) -> Staleness:
    """Whether `image` (its platform's reference, pulled first with `pull`: see `pulled`) is stale (see the
    module); `build_digest`: the one a build would label it with now (building/build_digest.py; None: not
    compared)."""
    reference = image.platform_reference
    if pull:
        failed = pulled(engine, reference)
        if failed is not None:
            return failed
    info = engine.inspect(reference)
    if info is None:
        return Staleness(reference, ("not there: never built here, or not pulled (--pull)",))
    reasons: list[str] = []
    if info.labels.get(INPUT_DIGEST_LABEL) != image.input_digest:
        reasons.append("built from other inputs than the matrix and templates now give (its input digest differs)")
    elif build_digest is not None and info.labels.get(BUILD_DIGEST_LABEL) != build_digest:
        reasons.append(
            "a build now would not give this image: its build context (a step script edited?), base, mirror, wheel "
            "sources or SOURCE_DATE_EPOCH differs (give outdated the build's), or a plain docker build made it (its "
            "build digest differs)"
        )
    reasons += bases_changed(combination, info.labels)
    reasons += base_moved(combination, image.flavor, info.labels)
    unchecked: list[str] = []
    for check in (OS_UPDATES, PYTHON):
        found = gate.scan(engine, check, reference, options, (), cancelled, image.own_tag)
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


def pulled(engine: Engine, reference: str) -> Staleness | None:
    """Pull `reference`; None when it is here now, else why it is stale. The registry is asked for the tag's
    manifest first, within the registry deadline (a pull through the engine has none): EngineError when the
    registry cannot be asked (no answer, a dropped connection), so the command stops and says so instead of
    waiting or calling the image stale."""
    if engine.manifest(reference) is None:
        return Staleness(reference, ("not in its registry: never pushed (build --push), or removed there",))
    errors = engine.pull(reference)
    if errors:
        return Staleness(reference, (f"could not pull it: {errors[-1]}",))
    return None


def bases_changed(combination: Combination, labels: dict[str, str]) -> list[str]:
    """Why an image of a registry OS was built on other bases than asked now (`--bases`, the matrix's `bases`):
    bootstrapped from the archive (its `io.torchimages.bases` label) or pulled (no such label)."""
    if combination.os.provider != "registry":
        return []
    built = labels.get(BASES_LABEL) or "registry"
    if built == combination.bases:
        return []
    how = {BOOTSTRAP: "a base bootstrapped from the distribution's archive", "registry": "the registry's base"}
    return [f"built on {how.get(built, values.show(built))}; the selection asks for {how[combination.bases]} now"]


def base_moved(combination: Combination, flavor: str, labels: dict[str, str]) -> list[str]:
    """Why the registry base an image was built on is not its combination's now: the digest the bases lock pins
    today differs from the image's `base.digest` label, or the image was built before the base was locked. A
    bootstrapped base carries no such label: its staleness shows as pending security updates."""
    base = combination.base_of(flavor)
    bootstrapped = BOOTSTRAP in (combination.bases, labels.get(BASES_LABEL))
    if bootstrapped and base is not None and base.reference == combination.os.image:
        return []  # a bootstrapped base has no registry digest to move (bases_changed says a change of bases)
    now = combination.base_labels(flavor)
    locked, built_on = now.get(BASE_DIGEST_LABEL), labels.get(BASE_DIGEST_LABEL)
    if not locked or locked == built_on:
        return []
    name = now[BASE_NAME_LABEL]
    if built_on is None:
        return [f"its base {name} is locked to {locked} now; the image was built on it unlocked"]
    return [f"its base {name} moved: built on {built_on}, the bases lock pins {locked} now"]
