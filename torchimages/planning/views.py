"""Views of a plan: the JSON of `list --json`, the steps of `plan` and the CI matrices of `plan --format github`
(one job per combination), `github-platforms` (one per combination and platform, on that platform's runner) and
`github-joins` (the combinations whose tags name an index of several platforms)."""

from __future__ import annotations

from collections.abc import Sequence

from torchimages import platforms
from torchimages.combination import BOOTSTRAP, Combination, Image
from torchimages.planning.plan import Selected

# GitHub's hosted runner of each platform: every image is built, verified and smoke-tested natively, never under
# emulation (docs/how-to/build-arm64-images.md: the arm64 CUDA images fail the cpu suite under QEMU).
RUNNERS = {platforms.AMD64: "ubuntu-24.04", platforms.ARM64: "ubuntu-24.04-arm"}


def image_json(combination: Combination, image: Image) -> dict[str, object]:
    """The public, stable description of one image (`list --json`); companions as their labels say them."""
    companions = combination.companion_versions()
    return {
        "tag": image.tag,
        "reference": image.reference,
        "aliases": list(image.aliases),
        "flavor": image.flavor,
        "platform": image.platform,
        "platform_reference": image.platform_reference,
        "combination": combination.folder,
        "torch": combination.torch,
        "torchvision": companions["torchvision"],
        "torchaudio": companions["torchaudio"],
        "cuda": combination.cuda or "cpu",
        "cudnn": combination.cudnn,
        "nccl": combination.nccl,
        "python": combination.python,
        "os": combination.os.name,
        "dockerfile": combination.dockerfile,
        "base_image": combination.os.image,
        "toolkit": combination.toolkit.provider if image.flavor == "devel" else "none",
        "devel_from": combination.devel_from if image.flavor == "devel" else None,
        "min_driver": combination.min_driver,
        **archs_json(combination, image.platform),
        "wheel_index": combination.index_url_for(image.platform),
        "pypi_only": combination.pypi_only,
        "input_digest": image.input_digest,
    }


def archs_json(combination: Combination, platform: str) -> dict[str, str | None]:
    """`cuda_archs`: the GPU architectures the image's label promises (a certain fact of the knowledge base), or
    None; `cuda_archs_uncertain`: the knowledge base's uncertain expectation (no label, only reported), or None."""
    fact = combination.archs_for(platform)
    return {
        "cuda_archs": combination.promised_archs(platform),
        "cuda_archs_uncertain": fact.archs if fact is not None and fact.uncertain else None,
    }


def tags(chosen: Sequence[Selected]) -> list[str]:
    """The public tags of the selection in plan order, each once (the images of every platform share it)."""
    return list(dict.fromkeys(image.tag for s in chosen for image in s.images))


def describe(combination: Combination, image: Image) -> str:
    """One plan line: what is built, from what, with which target."""
    devel = image.flavor == "devel"
    base = combination.toolkit.image if devel and combination.toolkit.provider == "image" else combination.os.image
    provider = combination.toolkit.provider
    toolkit = f", nvcc from {provider}" if devel and provider != "none" else ""
    platform = (
        f"    platform {image.platform}, tagged {image.platform_reference}\n" if combination.multi_platform else ""
    )
    wheels = combination.index_url_for(image.platform)
    local = combination.bootstrapped_base(image.platform)
    how = f"bootstrapped as {local}" if local and base == combination.os.image else combination.os.provider
    pypi = "yes" if combination.pypi_only else "no"
    return (
        f"{image.reference}\n    dockerfile {combination.dockerfile} --target {image.flavor}\n{platform}"
        f"    base {base} ({how}){toolkit}; wheels from {wheels} (PyPI-only build: {pypi})\n"
        f"    aliases {', '.join(image.aliases) or '-'}"
    )


def steps(chosen: Sequence[Selected]) -> list[str]:
    """The numbered steps of `plan`: the bootstrapped bases first, then every image."""
    bases = sorted(
        {
            s.combination.os.archive.image
            for s in chosen
            if s.combination.bases == BOOTSTRAP and s.combination.os.archive is not None
        }
    )
    lines = [f"bootstrap base {image} from the distribution archive" for image in bases]
    lines += [describe(s.combination, image) for s in chosen for image in s.images]
    return [f"{number}. {step}" for number, step in enumerate(lines, 1)]


def ci_matrix(chosen: Sequence[Selected]) -> dict[str, list[dict[str, str]]]:
    """A GitHub Actions `strategy.matrix`: one job per combination (its flavors share layers)."""
    jobs = [
        {
            "combination": s.combination.folder,
            "tags": " ".join(dict.fromkeys(i.tag for i in s.images)),
            "torch": s.combination.torch,
            "cuda": s.combination.cuda or "cpu",
            "os": s.combination.os.name,
            # where the tags name OCI indexes: the platforms its images are built for
            **({"platforms": ",".join(s.combination.platforms)} if s.combination.multi_platform else {}),
        }
        for s in chosen
    ]
    return {"include": jobs}


def bootstrapped(combination: Combination) -> bool:
    """Whether the combination's OS base is made from its archive (a bootstrap OS, or `--bases bootstrap`), as
    building.bootstrap.needed says: its job needs mmdebstrap and `bake --bootstrap`."""
    return combination.os.provider == "bootstrap" or combination.bases == BOOTSTRAP


def ci_platform_matrix(chosen: Sequence[Selected]) -> dict[str, list[dict[str, str]]]:
    """A GitHub Actions `strategy.matrix`: one job per combination and platform, on that platform's own runner
    (RUNNERS), naming the platform's own tags (`<tag>-arm64` where the public tag names an index)."""
    jobs = []
    for s in chosen:
        c = s.combination
        for platform in c.platforms:
            mine = [i for i in s.images if i.platform == platform]
            if mine:
                jobs.append(
                    {
                        "combination": c.folder,
                        "platform": platform,
                        "arch": platforms.arch(platform),
                        "runner": RUNNERS[platform],
                        "tags": " ".join(dict.fromkeys(i.own_tag for i in mine)),
                        "bootstrap": "true" if bootstrapped(c) else "false",
                    }
                )
    return {"include": jobs}


def ci_join_matrix(chosen: Sequence[Selected]) -> dict[str, list[dict[str, str]]]:
    """A GitHub Actions `strategy.matrix` for `join`: one job per combination of several platforms whose every
    platform's images are selected (a platform left out gets no index: `join` would refuse it)."""
    jobs = []
    for s in chosen:
        c = s.combination
        if c.multi_platform and {i.platform for i in s.images} == set(c.platforms):
            jobs.append({"combination": c.folder, "tags": " ".join(dict.fromkeys(i.tag for i in s.images))})
    return {"include": jobs}
