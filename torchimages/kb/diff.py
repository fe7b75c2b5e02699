"""The difference between compat.yaml and what indexes serve, pure: new releases and builds, changed pins,
facts the file lacks, and uncertain facts the index now sources. A fact the index does not show is never a
change: nothing is removed. Each change names its source (the file whose metadata shows it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torchimages.kb.derive import ReleaseFacts, VariantFacts, version_key

NEW, CHANGED, ADDED, SETTLED = "new", "changed", "added", "settled"
DISAGREE = (NEW, CHANGED, ADDED)  # what `kb check` fails on; SETTLED agrees (it only lifts an `uncertain`)
SIGNS = {NEW: "+", ADDED: "+", CHANGED: "~", SETTLED: "="}
ARM64 = "linux/arm64"


@dataclass(frozen=True)
class Change:
    """One difference: `path` in compat.yaml (`torch`, `2.6`, `variants`, `cu126`, `nccl`), the value the file
    holds (`old`, None: none) and the one the index shows (`new`); SETTLED: `old` is the `uncertain` entry lifted."""

    kind: str
    path: tuple[str, ...]
    old: Any
    new: Any
    source: str

    def line(self) -> str:
        """One line of the reviewable difference."""
        where = ".".join(self.path)
        if self.kind == SETTLED:
            return f"= {where}: {_flat(self.new)} (uncertain {self.old!r} settled) [{self.source}]"
        if self.kind == CHANGED:
            return f"~ {where}: {_flat(self.old)} -> {_flat(self.new)} [{self.source}]"
        said = "" if self.source == self.new else f" [{self.source}]"
        return f"+ {where}: {_flat(self.new)} ({self.kind}){said}"


def _flat(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_flat(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_flat(v) for v in value) + "]"
    return str(value)


def _sorted(values: Any) -> list[str]:
    return sorted({str(v) for v in values}, key=version_key)


def new_release(facts: ReleaseFacts, companions: Mapping[str, Mapping[str, str]], tag: str) -> dict[str, Any]:
    """A torch minor the file lacks, as compat.yaml writes one (every fact from the index: confidence V; a
    default build the index does not show is the newest CUDA build's, and uncertain)."""
    cuda = sorted((v for v in facts.variants if v != "cpu"), key=lambda v: int(v[2:]))
    release: dict[str, Any] = {
        "patches": list(facts.patches),
        "python": list(facts.python),
        "pypi_default": facts.pypi_default or (cuda[-1] if cuda else "cpu"),
        "variants": {v: facts.variants[v].held() for v in sorted(facts.variants, key=build_key)},
    }
    for project, pairs in companions.items():
        release[project] = {p: pairs[p] for p in facts.patches if p in pairs}
    arm = {v: {"index": i, "confidence": "V", "sources": [tag]} for v, (i, _) in sorted(facts.arm64.items())}
    uncertain = [] if facts.pypi_default is not None else ["pypi_default"]
    if "cpu" in arm and "cpu" not in facts.variants:  # PyPI's aarch64 cpu wheel, its x86_64 one a CUDA build's
        release["variants"] = {"cpu": {}, **release["variants"]}  # a platform's build is one of `variants`
        uncertain.append("variants.cpu")  # linux/amd64's cpu build is not what the index shows
    arm = {v: e for v, e in arm.items() if v in release["variants"]}
    if arm:
        release["platforms"] = {ARM64: arm}
    release["confidence"] = "V"
    if uncertain:
        release["uncertain"] = uncertain
    release["sources"] = [tag]
    return release


def build_key(variant: str) -> tuple[int, int]:
    """Sort key of a build: cpu first, then the CUDA builds by number (`cu126` before `cu130`)."""
    return (0, 0) if variant == "cpu" else (1, int(variant[2:]) if variant[2:].isdigit() else 0)


def _variant_changes(
    minor: str, name: str, held: Mapping[str, Any] | None, seen: VariantFacts, uncertain: list[str]
) -> list[Change]:
    where = ("torch", minor, "variants", name)
    if held is None:
        return [Change(NEW, where, None, seen.held(), seen.source)]
    out = []
    for key, value in seen.held().items():
        old = held.get(key)
        if old is None:
            out.append(Change(ADDED, (*where, key), None, value, seen.source))
        elif str(old) != value:
            out.append(Change(CHANGED, (*where, key), str(old), value, seen.source))
        elif f"variants.{name}.{key}" in uncertain:
            out.append(Change(SETTLED, (*where, key), f"variants.{name}.{key}", value, seen.source))
    whole = f"variants.{name}"
    agrees = all(str(held.get(k)) == v for k, v in seen.held().items())
    if whole in uncertain and agrees and all(k in seen.held() for k in held):
        out.append(Change(SETTLED, where, whole, seen.held(), seen.source))
    return out


def release_changes(
    minor: str, held: Mapping[str, Any], facts: ReleaseFacts, companions: Mapping[str, Mapping[str, str]], tag: str
) -> list[Change]:
    """The changes of one torch minor the file holds."""
    first = facts.sources[0] if facts.sources else ""
    uncertain = [str(u) for u in held.get("uncertain") or ()]
    out: list[Change] = []
    for key, seen in (("patches", facts.patches), ("python", facts.python)):
        listed = [str(v) for v in held.get(key) or ()]
        if set(seen) - set(listed):
            out.append(Change(ADDED, ("torch", minor, key), listed, _sorted([*listed, *seen]), first))
    default = held.get("pypi_default")
    if facts.pypi_default is not None and facts.pypi_default != default:
        source = facts.variants[facts.pypi_default].source if facts.pypi_default in facts.variants else first
        out.append(Change(CHANGED, ("torch", minor, "pypi_default"), default, facts.pypi_default, source))
    variants = held.get("variants") or {}
    for name in sorted(facts.variants, key=build_key):
        out += _variant_changes(minor, name, variants.get(name), facts.variants[name], uncertain)
    for project, pairs in companions.items():
        had = held.get(project) or {}
        for patch in _sorted({*facts.patches, *(str(p) for p in held.get("patches") or ())}):
            if patch not in pairs:
                continue
            where = ("torch", minor, project, patch)
            if patch not in had:
                out.append(Change(ADDED, where, None, pairs[patch], f"{project} {pairs[patch]} pins torch=={patch}"))
            elif str(had[patch]) != pairs[patch]:
                out.append(Change(CHANGED, where, str(had[patch]), pairs[patch], f"{project} {pairs[patch]}"))
    arm = ((held.get("platforms") or {}).get(ARM64)) or {}
    known = {*variants, *facts.variants}
    for name, (index, source) in sorted(facts.arm64.items()):
        if name not in known:
            continue
        at = ("torch", minor, "platforms", ARM64, name)
        entry = arm.get(name)
        if entry is None:
            out.append(Change(ADDED, at, None, {"index": index, "confidence": "V", "sources": [tag]}, source))
        elif str(entry.get("index")) != index:
            out.append(Change(CHANGED, (*at, "index"), str(entry.get("index")), index, source))
        elif str(entry.get("confidence")) != "V":
            out.append(Change(SETTLED, (*at, "confidence"), str(entry.get("confidence")), "V", source))
    unchanged = not any(c.kind == CHANGED for c in out)
    if held.get("confidence") == "U" and unchanged:
        out += _release_settled(minor, held, facts, [str(name) for name in variants], uncertain, first)
    return out


def _release_settled(
    minor: str,
    held: Mapping[str, Any],
    facts: ReleaseFacts,
    variants: list[str],
    uncertain: list[str],
    first: str,
) -> list[Change]:
    """An uncertain release the index confirms: settled where it read every build the file lists; where it read
    the release's patches and its default build but not every build (PyPI serves no `+cpu` wheel of a CUDA-default
    release), settled but for the builds it did not read, which stay `uncertain` by name."""
    unread = [f"variants.{name}" for name in variants if name not in facts.variants]
    if not unread:
        return [Change(SETTLED, ("torch", minor, "confidence"), "U", "V", first)]
    patches = {str(p) for p in held.get("patches") or ()}
    default = held.get("pypi_default")
    if default not in facts.variants or not patches <= set(facts.patches):
        return []
    still = sorted({*uncertain, *unread})
    return [
        Change(SETTLED, ("torch", minor, "confidence"), "U", "V", first),
        Change(SETTLED, ("torch", minor, "uncertain"), uncertain or None, still, f"not read: {', '.join(unread)}"),
    ]


def changes(
    kb: Mapping[str, Any],
    found: Mapping[str, ReleaseFacts],
    companions: Mapping[str, Mapping[str, str]],
    tag: str,
    described: str,
) -> tuple[Change, ...]:
    """Every change between the file (`kb`, its YAML document) and the releases an index serves. Minors older
    than the file's oldest are not the knowledge base's concern; `tag` (a key of `sources`, `described`) is
    the source the changes add."""
    torch = kb.get("torch") or {}
    oldest = min((version_key(str(m)) for m in torch), default=())
    out: list[Change] = []
    for minor in sorted(found, key=version_key):
        if version_key(minor) < oldest or (minor not in torch and not found[minor].variants):
            continue  # older than the file's concern, or a release whose builds no metadata showed
        if minor in torch:
            out += release_changes(minor, torch[minor], found[minor], companions, tag)
        else:
            facts = found[minor]
            default = facts.variants.get(facts.pypi_default or "")
            first = default.source if default else (facts.sources[0] if facts.sources else "")
            out.append(Change(NEW, ("torch", minor), None, new_release(found[minor], companions, tag), first))
    if out and tag not in (kb.get("sources") or {}):
        out.insert(0, Change(ADDED, ("sources", tag), None, described, described))
    return tuple(out)


def disagrees(found: tuple[Change, ...]) -> bool:
    """Whether the file disagrees with the index (`kb check` exits 1): anything but settling an uncertain fact
    and naming the source that does."""
    return any(c.kind in DISAGREE and c.path[0] != "sources" for c in found)
