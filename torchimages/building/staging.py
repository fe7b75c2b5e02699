"""An index is public only once checked. It is written under a temporary tag of its own repository
(`torchimages-staging-<random>-<tag>`), read back from the registry and checked: an index, naming each
platform's image manifest by the digest verified and the attestation manifests about each (its SBOM and provenance,
where it has them) and nothing else, and each of those manifests there, its bytes
of that digest and the size and media type the index says. Signed where asked, and only then are the public tag,
then each alias, moved to its digest (a carbon copy), each read back.

A refusal at any step leaves every public tag naming what it named before: nothing public is written before
the checks, and a tag moved before a later step failed is moved back. The temporary tag stays in the registry
(its API deletes no tag by name, only a manifest by digest, which here is the public index's): the outcome
names it."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Mapping, Sequence

from torchimages.engine import Engine, EngineError
from torchimages.engine import manifests as documents

PREFIX = "torchimages-staging-"
MAX_TAG = 128  # the OCI distribution spec's longest tag


def staging_tag(tag: str, token: str | None = None) -> str:
    """A unique temporary tag for the index of `tag`: `torchimages-staging-<12 hex>-<tag>`, at most 128 characters."""
    return f"{PREFIX}{token or secrets.token_hex(6)}-{tag}"[:MAX_TAG]


def left(staged: str) -> str:
    """What the outcome says of the temporary tag."""
    return f"{staged}: the temporary tag is left in the registry (delete it by tag, never by digest)"


def publish(
    engine: Engine,
    repository: str,
    names: Sequence[str],
    wanted: Mapping[str, str],
    annotations: Sequence[tuple[str, str]] = (),
    sign: Callable[[str], list[str]] | None = None,
    cancelled: threading.Event | None = None,
    note: Callable[[str], None] | None = None,
    sources: Sequence[str] = (),
    attached: Mapping[str, Sequence[str]] | None = None,
    published: Callable[[str], None] | None = None,
) -> list[str]:
    """Make `repository:name` for each of `names` (the tag, then its aliases) name one index of exactly `wanted`
    (platform -> its image manifest's digest, each in `repository`) and the attestation manifests `attached` to
    them (a manifest's digest -> theirs), `annotations` on it, made from `sources` (default: the manifests; an
    image's own index brings its attestations): staged, checked, signed by `sign` (its digest -> problems), then
    moved. Where every name names such an index already, it is only signed. The problems (none: every name names
    it); `note` hears where the temporary tag is left, `published` the digest every name names once none is left."""
    try:
        before = {name: _digest_at(engine, f"{repository}:{name}") for name in names}
    except EngineError as exc:
        return [f"what the public tags name now could not be read ({exc}): nothing was written"]
    now = before[names[0]]
    if (
        now is not None
        and set(before.values()) == {now}  # every name names one index already
        and not _checked(engine, repository, f"{repository}@{now}", wanted, attached)[1]  # the one wanted
    ):
        problems = _kept(f"{repository}:{names[0]}", now, sign, note)
        if not problems and published is not None:
            published(now)
        return problems
    staged = f"{repository}:{staging_tag(names[0])}"
    sources = list(sources) or [f"{repository}@{digest}" for digest in wanted.values()]
    problems = engine.create_index(repository, [staged.rsplit(":", 1)[1]], sources, annotations)
    digest = ""
    if not problems:
        digest, problems = _checked(engine, repository, staged, wanted, attached)
    if not problems and sign is not None:
        problems = sign(digest)
    if not problems and cancelled is not None and cancelled.is_set():
        problems = ["interrupted before the public tags were moved"]
    if problems:
        return [*problems, "the public tags were left as they were", left(staged)]
    problems = _moved(engine, repository, names, digest, before)
    if problems:
        return [*problems, left(staged)]
    if note is not None:
        note(left(staged))
    if published is not None:
        published(digest)
    return []


def _kept(
    reference: str, digest: str, sign: Callable[[str], list[str]] | None, note: Callable[[str], None] | None
) -> list[str]:
    """`reference` and its aliases name the index wanted already (`digest`): it is only signed; the problems."""
    problems = sign(digest) if sign is not None else []
    if problems:
        return [*problems, "the public tags were left as they were"]
    if note is not None:
        note(f"{reference} and its aliases name this index already ({digest}): left as they are")
    return []


def _digest_at(engine: Engine, reference: str) -> str | None:
    """The digest of what the registry serves under `reference` (None: nothing)."""
    raw = engine.manifest(reference)
    return None if raw is None else documents.digest_of(raw)


def _checked(
    engine: Engine,
    repository: str,
    staged: str,
    wanted: Mapping[str, str],
    attached: Mapping[str, Sequence[str]] | None = None,
) -> tuple[str, list[str]]:
    """The digest of the index under `staged`, read back, and why it is not the index of `wanted` and `attached`
    whose every manifest the registry holds as the index describes it."""
    try:
        raw = engine.manifest(staged)
        if raw is None:
            return "", [f"{staged}: the registry holds nothing there once it was written"]
        index = documents.parse(raw, staged)
        problems = documents.index_problems(index, wanted, staged, attached)
        for entry in index.entries if not problems else ():
            problems += documents.entry_problems(entry, engine.manifest(f"{repository}@{entry.digest}"), staged)
    except (EngineError, documents.ManifestError) as exc:
        return "", [str(exc)]
    return index.digest, problems


def _moved(
    engine: Engine, repository: str, names: Sequence[str], digest: str, before: Mapping[str, str | None]
) -> list[str]:
    """Move each of `names` in turn to `digest`, each read back; at the first failure, every name moved so far
    (that one too) moved back to what it named `before`. The problems."""
    moved: list[str] = []
    for name in names:
        moved.append(name)
        problems = engine.point_tag(repository, name, digest) or _names(engine, f"{repository}:{name}", digest)
        if problems:
            return [*problems, *_restored(engine, repository, moved, before)]
    return []


def _names(engine: Engine, reference: str, digest: str) -> list[str]:
    """Why `reference` does not name `digest` now (read back)."""
    try:
        found = _digest_at(engine, reference)
    except EngineError as exc:
        return [f"{reference} could not be read back: {exc}"]
    return [] if found == digest else [f"{reference} names {found or 'nothing'} once moved, not {digest}"]


def _restored(engine: Engine, repository: str, names: Sequence[str], before: Mapping[str, str | None]) -> list[str]:
    """Move each of `names` back to what it named before (the last moved first); what became of each."""
    said = []
    for name in reversed(names):
        reference, old = f"{repository}:{name}", before[name]
        try:
            if _digest_at(engine, reference) == old:
                continue
        except EngineError:
            pass  # moved back all the same, then read back
        if old is None:
            said.append(f"{reference} named nothing before; the registry's API removes no tag: delete it by tag")
            continue
        problems = engine.point_tag(repository, name, old) or _names(engine, reference, old)
        back = f"{reference} could not be moved back to {old}: {'; '.join(problems)}"
        said.append(back if problems else f"{reference} moved back to {old}")
    return said
