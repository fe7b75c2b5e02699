"""Tags compatible with pytorch/pytorch (`2.7.0-cuda11.8-cudnn9-runtime`), suffixes and aliases.

A `-py<ver>` / `-<os>` suffix appears only where one torch/CUDA pair has several variants, and
never on the default variant (the OS PyTorch's own images would use). Aliases: `<minor>-...`
points at the newest patch of a minor, `latest` / `latest-<flavor>` at the newest torch's
default CUDA build. A combination built for more than linux/amd64 alone keeps these names for an OCI
index of its platforms' images, each of which has a local tag of its own (`<tag>-amd64`, `<tag>-arm64`).
Two images can never share a tag, an alias or a platform's tag.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from torchimages.combination import Combination, platform_tag
from torchimages.compat import KnowledgeBase, minor_of, version_key
from torchimages.planning.resolve import default_os
from torchimages.problems import Problem


@dataclass(frozen=True)
class Naming:
    """The public names of one image: its tag and aliases."""

    tag: str
    aliases: tuple[str, ...]
    platform_tags: tuple[str, ...] = ()  # each platform's local tag, where the tag names an OCI index


# One image to be named: a combination and one of its flavors.
Slot = tuple[Combination, str]


def base_tag(combination: Combination, torch: str) -> str:
    """`<torch>-cuda<X.Y>-cudnn<N>` or `<torch>-cpu`."""
    if combination.cuda:
        return f"{torch}-cuda{combination.cuda}-cudnn{combination.cudnn_major}"
    return f"{torch}-cpu"


def _is_default(kb: KnowledgeBase, combination: Combination) -> bool:
    release = kb.release(combination.torch)
    return release is not None and combination.os.name == default_os(kb, release, combination.cuda)


def _suffix(kb: KnowledgeBase, combination: Combination) -> str:
    parts = []
    if combination.python != combination.os.python:
        parts.append(f"py{combination.python}")
    if not _is_default(kb, combination):
        parts.append(combination.os.name)
    return "".join(f"-{p}" for p in parts)


def _aliases(kb: KnowledgeBase, slots: list[Slot], suffixes: list[str]) -> dict[int, list[str]]:
    aliases: dict[int, list[str]] = defaultdict(list)
    newest: dict[tuple[str, str, str, str], int] = {}
    for i, (combination, flavor) in enumerate(slots):
        key = (minor_of(combination.torch), combination.variant, flavor, suffixes[i])
        if key not in newest or version_key(combination.torch) > version_key(slots[newest[key]][0].torch):
            newest[key] = i
    for (minor, _, flavor, suffix), i in newest.items():
        aliases[i].append(f"{base_tag(slots[i][0], minor)}-{flavor}{suffix}")
    top = max((c.torch for c, _ in slots), key=version_key, default=None)
    release = kb.release(top) if top else None
    for i, (combination, flavor) in enumerate(slots):
        if release and combination.torch == top and combination.variant == release.pypi_default and not suffixes[i]:
            aliases[i].append(f"latest-{flavor}")
            if flavor == "runtime":
                aliases[i].append("latest")
    return aliases


def assign(kb: KnowledgeBase, slots: list[Slot]) -> tuple[list[Naming], list[Problem]]:
    """The tag and aliases of every (combination, flavor), in order; a problem for any name two would share."""
    variants: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for combination, flavor in slots:
        variants[(combination.torch, combination.variant, flavor)].add(combination.folder)
    suffixes = [_suffix(kb, c) if len(variants[(c.torch, c.variant, flavor)]) > 1 else "" for c, flavor in slots]
    aliases = _aliases(kb, slots, suffixes)
    tags = [f"{base_tag(c, c.torch)}-{flavor}{suffixes[i]}" for i, (c, flavor) in enumerate(slots)]
    namings = [
        Naming(tag, tuple(aliases[i]), tuple(filter(None, (platform_tag(c, tag, p) for p in c.platforms))))
        for i, ((c, _), tag) in enumerate(zip(slots, tags, strict=True))
    ]
    return namings, clashes([(c, n) for (c, _), n in zip(slots, namings, strict=True)])


def clashes(named: list[tuple[Combination, Naming]]) -> list[Problem]:
    """A problem for every tag, alias or platform's tag that two images would share, located at the later one."""
    owners: dict[str, list[Combination]] = defaultdict(list)
    for combination, naming in named:
        for name in (naming.tag, *naming.aliases, *naming.platform_tags):
            owners[name].append(combination)
    problems = []
    for name, holders in owners.items():
        if len(holders) > 1:
            where = ", ".join(str(h.defined_at) for h in holders)
            problems.append(
                Problem(
                    f"two combinations would both be tagged '{name}' ({where})",
                    file=holders[-1].defined_at.file,
                    line=holders[-1].defined_at.line,
                    key="tag",
                    suggestion="remove the duplicate or make them differ",
                )
            )
    return problems
