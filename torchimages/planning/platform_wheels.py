"""Whether a torch build has wheels for a platform (the knowledge base's `platforms`), and when it has none, the
nearest combination that has them: the same torch with the nearest CUDA build, or the newest patch of the
nearest torch line with the same build. linux/amd64 has every published variant."""

from __future__ import annotations

from dataclasses import dataclass

from torchimages.compat import KnowledgeBase, PlatformWheel, TorchRelease, variant_cuda, version_key
from torchimages.suggest import nearest_version


@dataclass(frozen=True)
class Missing:
    """No wheels of `variant` for `platform`: what this torch has for it (`allowed`) and the nearest that has them."""

    message: str
    allowed: str
    suggestion: str


def _cuda_or_cpu(variant: str) -> str:
    return variant_cuda(variant) or "cpu"


def wheel(release: TorchRelease, variant: str, platform: str) -> PlatformWheel | None:
    """The knowledge base's fact that `variant` of this release has `platform` wheels (None: linux/amd64, or none)."""
    builds = release.wheels_for(platform)
    return None if builds is None else builds.get(variant)


def missing(kb: KnowledgeBase, release: TorchRelease, torch: str, variant: str, platform: str) -> Missing | None:
    """None when `torch` (of `release`) built as `variant` has wheels for `platform`; else why not and what is near."""
    builds = release.wheels_for(platform)
    if builds is None or variant in builds:
        return None
    here = sorted((_cuda_or_cpu(v) for v in builds), key=lambda c: (c == "cpu", version_key(c)))
    wanted = _cuda_or_cpu(variant)
    options = []
    cudas = [c for c in here if c != "cpu"]
    if here:
        options.append(f"cuda: {nearest_version(wanted, cudas) if wanted != 'cpu' and cudas else here[0]}")
    elsewhere = [other.patches[-1] for other in kb.torch.values() if variant in (other.wheels_for(platform) or {})]
    if elsewhere:
        build = "the cpu build" if wanted == "cpu" else f"CUDA {wanted}"
        options.append(f"torch: {nearest_version(torch, elsewhere)} (with {build})")
    return Missing(
        message=f"torch {torch}+{variant} has no {platform} wheels that the knowledge base knows of",
        allowed=", ".join(here) or f"no build of torch {release.minor}",
        suggestion=("nearest with them: " + " or ".join(options)) if options else "",
    )
