"""Tags compatible with pytorch/pytorch (`2.7.0-cuda11.8-cudnn9-runtime`), suffixes and aliases.

A `-py<ver>` / `-<os>` suffix appears only where one torch/CUDA pair has several variants, and
never on the default variant (the OS PyTorch's own images would use). Aliases: `<minor>-...`
points at the newest patch of a minor, `latest` / `latest-<flavor>` at the newest torch's
default CUDA build. Two images can never share a tag or an alias.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from .compat import KnowledgeBase, minor_of, version_key
from .problems import Problem
from .resolve import default_os
from .spec import ImageSpec


def base_tag(spec: ImageSpec, torch: str) -> str:
    """`<torch>-cuda<X.Y>-cudnn<N>` or `<torch>-cpu`."""
    if spec.cuda:
        return f"{torch}-cuda{spec.cuda}-cudnn{spec.cudnn_major}"
    return f"{torch}-cpu"


def _is_default(kb: KnowledgeBase, spec: ImageSpec) -> bool:
    release = kb.release(spec.torch)
    return release is not None and spec.os.name == default_os(kb, release, spec.cuda)


def _suffix(kb: KnowledgeBase, spec: ImageSpec) -> str:
    parts = []
    if spec.python != spec.os.python:
        parts.append(f"py{spec.python}")
    if not _is_default(kb, spec):
        parts.append(spec.os.name)
    return "".join(f"-{p}" for p in parts)


def _aliases(kb: KnowledgeBase, specs: list[ImageSpec], suffixes: dict[int, str]) -> dict[int, list[str]]:
    aliases: dict[int, list[str]] = defaultdict(list)
    newest: dict[tuple[str, str, str, str], int] = {}
    for i, spec in enumerate(specs):
        key = (minor_of(spec.torch), spec.variant, spec.flavor, suffixes[i])
        if key not in newest or version_key(spec.torch) > version_key(specs[newest[key]].torch):
            newest[key] = i
    for (minor, _, flavor, suffix), i in newest.items():
        aliases[i].append(f"{base_tag(specs[i], minor)}-{flavor}{suffix}")
    top = max((s.torch for s in specs), key=version_key, default=None)
    release = kb.release(top) if top else None
    for i, spec in enumerate(specs):
        if release and spec.torch == top and spec.variant == release.pypi_default and not suffixes[i]:
            aliases[i].append(f"latest-{spec.flavor}")
            if spec.flavor == "runtime":
                aliases[i].append("latest")
    return aliases


def assign(kb: KnowledgeBase, specs: list[ImageSpec]) -> tuple[list[ImageSpec], list[Problem]]:
    """Give every spec its tag and aliases; report any tag two images would share."""
    groups: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for spec in specs:
        groups[(spec.torch, spec.variant, spec.flavor)].add(spec.name)
    suffixes = {
        i: _suffix(kb, s) if len(groups[(s.torch, s.variant, s.flavor)]) > 1 else "" for i, s in enumerate(specs)
    }
    aliases = _aliases(kb, specs, suffixes)
    tagged = [
        replace(s, tag=f"{base_tag(s, s.torch)}-{s.flavor}{suffixes[i]}", aliases=tuple(aliases[i]))
        for i, s in enumerate(specs)
    ]
    owners: dict[str, list[ImageSpec]] = defaultdict(list)
    for spec in tagged:
        for name in (spec.tag, *spec.aliases):
            owners[name].append(spec)
    problems = []
    for name, holders in owners.items():
        if len(holders) > 1:
            where = ", ".join(h.source for h in holders)
            file, _, line = holders[-1].source.rpartition(":")
            problems.append(
                Problem(
                    f"two combinations would both be tagged '{name}' ({where})",
                    file=file,
                    line=int(line),
                    key="tag",
                    suggestion="remove the duplicate or make them differ",
                )
            )
    return tagged, problems
