"""`lock --bases`: every registry base of a selection resolved to its digest, and the re-render after any lock.

The digests are asked of the registries (through the mirror where one is set) a few at once; the lock is
written only when every base answered, so a lock never mixes old and new halves by accident.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from torchimages import registry, render, stopping
from torchimages.combination import RegistryBase
from torchimages.planning import bases
from torchimages.planning.plan import Plan, Selected, load

MAX_QUERIES = 8  # registries asked at once


@dataclass(frozen=True)
class Outcome:
    """What a lock did: lines for standard output and standard error, and whether it succeeded (exit 0)."""

    out: tuple[str, ...]
    err: tuple[str, ...] = ()
    ok: bool = True


def rerender(plan: Plan) -> tuple[Plan, int]:
    """Load the plan again (its locks just changed) and write its Dockerfiles; the new plan and how many
    Dockerfiles changed."""
    mirror = plan.bases.mirror if plan.bases else None
    again = load(plan.matrix_path, plan.templates, plan.images_dir, base_registry=mirror)
    return again, len(render.write(render.render_all(again.combinations, again.templates), again.images_dir))


def _digest_or_error(reference: str) -> tuple[str | None, str | None]:
    try:
        return registry.resolve_digest(reference), None
    except registry.RegistryError as exc:
        return None, str(exc)


def resolve(wanted: dict[str, RegistryBase]) -> tuple[dict[str, str], list[str]]:
    """The digest of each base by name, and the errors of those that did not answer (each names the
    reference pulled: the base, or its mirror's name)."""
    names = sorted(wanted)
    found: dict[str, str] = {}
    failures: list[str] = []
    if not names:
        return found, failures
    pool = ThreadPoolExecutor(max_workers=min(MAX_QUERIES, len(names)))
    try:
        answers = stopping.results(pool.submit(_digest_or_error, wanted[n].pull) for n in names)
    finally:  # every answer is in, or a signal stops the command: it does not wait for the registries
        pool.shutdown(wait=False, cancel_futures=True)
    for name, (digest, error) in zip(names, answers, strict=True):
        if digest:
            found[name] = digest
        else:
            failures.append(str(error))
    return found, failures


def lock_bases(plan: Plan, chosen: Sequence[Selected], check: bool = False) -> Outcome:
    """Resolve every registry base of `chosen`; with `check`, compare with the lock (a base the registry
    serves at another digest is stale); else write the lock (keeping the digests of the plan's other bases)
    and re-render."""
    settings = plan.bases
    assert settings is not None
    wanted = {b.name: b for s in chosen for b in s.combination.pulled_bases}
    if not wanted:
        return Outcome(("no registry bases in the selection (bootstrapped bases need no lock)",))
    found, failures = resolve(wanted)
    errors = tuple(f"error: {failure}" for failure in failures)
    if check:
        stale = tuple(
            f"stale: {n}: locked {settings.locks.get(n) or 'nothing'}, the registry serves {d}"
            for n, d in found.items()
            if settings.locks.get(n) != d
        )
        if stale or failures:
            advice = f"run `{bases.LOCK_COMMAND}` and commit {settings.lock_file.name}"
            return Outcome((), (*errors, *stale, advice), ok=False)
        return Outcome((f"{settings.lock_file}: {len(found)} bases up to date",))
    if failures:
        advice = (
            f"nothing written: every base must answer (`{bases.LOCK_COMMAND} --base-registry HOST/PREFIX` "
            "resolves them through a mirror)"
        )
        return Outcome((), (*errors, advice), ok=False)
    used = {b.name for c in plan.combinations for b in c.registry_bases}
    digests = {n: d for n, d in settings.locks.items() if n in used} | found
    bases.write_locks(settings.lock_file, digests, plan.matrix_path.name, settings.mirror)
    _, changed = rerender(plan)
    locked = tuple(f"locked {name}: {wanted[name].pull}@{found[name]}" for name in sorted(wanted))
    summary = f"{settings.lock_file}: {len(digests)} bases; {changed} Dockerfiles re-rendered to pull them by digest"
    return Outcome((*locked, summary))
