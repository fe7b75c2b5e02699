"""Resolve matrix rows against the knowledge base into Combinations, or explain why not."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from torchimages import platforms as platform_names
from torchimages.combination import FLAVORS, Combination, SourceLocation, Toolkit
from torchimages.compat import (
    PYPI_INDEX_URL,
    KnowledgeBase,
    OsRelease,
    TorchRelease,
    Variant,
    cuda_variant,
    minor_of,
    version_key,
)
from torchimages.planning import platform_wheels
from torchimages.planning.expansion import MatrixRow
from torchimages.problems import Problem, Severity
from torchimages.sizes import SizeBudget
from torchimages.suggest import closest, nearest_version

TORCH_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
CUDA_VERSION = re.compile(r"^\d+\.\d+$")
WHEEL_TOOLKIT_PARTS = ("nvcc", "nvvm", "cudart", "cccl", "crt", "nvrtc")  # nvvm: cicc and libdevice
NONE = "none"


@dataclass(frozen=True)
class Resolved:
    """What one matrix row resolves to (None when it has errors), the flavors asked for, the problems found."""

    combination: Combination | None
    flavors: tuple[str, ...]
    problems: tuple[Problem, ...]


class _Checker:
    """Collects located problems for one matrix row."""

    def __init__(self, combo: MatrixRow, path: str) -> None:
        self.combo = combo
        self.path = path
        self.problems: list[Problem] = []

    def error(self, key: str, message: str, allowed: str = "", suggestion: str = "") -> None:
        self._add(key, message, allowed, suggestion, Severity.ERROR)

    def warn(self, key: str, message: str) -> None:
        self._add(key, message, "", "", Severity.WARNING)

    def _add(self, key: str, message: str, allowed: str, suggestion: str, severity: Severity) -> None:
        line = self.combo.line_of(key)
        self.problems.append(Problem(message, self.path, line, key, allowed, suggestion, severity))

    @property
    def failed(self) -> bool:
        return any(p.severity is Severity.ERROR for p in self.problems)


def _did_you_mean(value: str | None) -> str:
    return f"did you mean {value}?" if value else ""


def _release(kb: KnowledgeBase, check: _Checker) -> TorchRelease | None:
    torch = check.combo.get("torch")
    if torch is None:
        check.error("torch", "missing: every combination needs a full torch version", "e.g. 2.7.0")
        return None
    if not TORCH_VERSION.match(torch):
        minor = kb.torch.get(torch)
        hint = f"did you mean {minor.patches[-1]}?" if minor else ""
        check.error("torch", f"'{torch}' is not a full torch version", "MAJOR.MINOR.PATCH, e.g. 2.7.0", hint)
        return None
    release = kb.release(torch)
    if release is None:
        known = sorted(kb.torch, key=version_key)
        hint = _did_you_mean(nearest_version(torch, [kb.torch[m].patches[-1] for m in known]))
        check.error("torch", f"torch {torch} is not in the knowledge base", f"{known[0]} to {known[-1]}", hint)
        return None
    if torch not in release.patches:
        hint = _did_you_mean(nearest_version(torch, release.patches))
        check.error("torch", f"torch {torch} was never published", ", ".join(release.patches), hint)
        return None
    return release


def _variant(kb: KnowledgeBase, release: TorchRelease, torch: str, check: _Checker) -> Variant | None:
    cuda = check.combo.get("cuda")
    published = release.cuda_variants
    allowed = ", ".join([*published, "cpu"])
    if cuda is None:
        check.error("cuda", "missing: say which CUDA build (or cpu)", allowed)
        return None
    if cuda.startswith("cu") and cuda[2:].isdigit() and len(cuda) > 3:
        check.error(
            "cuda",
            f"'{cuda}' is a wheel index name, not a CUDA version",
            allowed,
            f"did you mean {cuda[2:-1]}.{cuda[-1]}?",
        )
        return None
    if cuda != "cpu" and not CUDA_VERSION.match(cuda):
        check.error("cuda", f"'{cuda}' is not a CUDA version", allowed)
        return None
    variant = release.variants.get(cuda_variant(cuda))
    if variant is None:
        hint = _did_you_mean(nearest_version(cuda, published))
        check.error(
            "cuda", f"torch {torch} was published for CUDA {', '.join(published)} (and cpu), not {cuda}", allowed, hint
        )
        return None
    if variant.cuda and variant.cuda not in kb.cuda:
        check.error("cuda", f"CUDA {variant.cuda} is not in the knowledge base's toolkit table")
        return None
    if variant.uncertain:
        settle = kb.settled_by(release, variant.name, f"variants.{variant.name}", torch)
        check.warn("cuda", f"torch {torch}+{variant.name} is an uncertain fact in the knowledge base ({settle})")
    return variant


def _pinned(check: _Checker, key: str, shipped: str | None, what: str, label: str) -> None:
    """A matrix may restate cuDNN/NCCL; it must then agree with what the wheel pins."""
    given = check.combo.get(key)
    if given is None:
        return
    if shipped is None:
        check.error(key, f"{what} has no {label}: leave '{key}' out")
    elif given != shipped and not shipped.startswith(given + "."):
        check.error(key, f"{what} ships {label} {shipped}, not {given}", shipped, f"use {key}: {shipped.split('.')[0]}")


def default_os(kb: KnowledgeBase, release: TorchRelease, cuda: str | None) -> str | None:
    """The newest registry Ubuntu that has toolkit images for the CUDA and a Python torch supports."""
    candidates = [o for o in kb.os.values() if o.provider == "registry" and o.python in release.python]
    if cuda:
        candidates = [o for o in candidates if o.version in kb.cuda[cuda].ubuntu]
    candidates.sort(key=lambda o: version_key(o.version), reverse=True)
    return candidates[0].name if candidates else None


def _os(kb: KnowledgeBase, release: TorchRelease, variant: Variant, check: _Checker) -> OsRelease | None:
    name = check.combo.get("os") or default_os(kb, release, variant.cuda)
    if name is None:
        check.error("os", f"no known OS fits torch {release.minor} with {variant.name}; name one", ", ".join(kb.os))
        return None
    found = kb.os.get(name)
    if found is None:
        check.error("os", f"unknown OS '{name}'", ", ".join(kb.os), _did_you_mean(closest(name, kb.os)))
    return found


def _python(kb: KnowledgeBase, release: TorchRelease, os: OsRelease, check: _Checker) -> str:
    python = check.combo.get("python") or os.python
    if python != os.python:
        providers = [o.name for o in kb.os.values() if o.python == python]
        hint = f"use os: {providers[0]}" if providers else ""
        check.error("python", f"{os.name} provides Python {os.python}, not {python}", os.python, hint)
    if python not in release.python:
        span = f"{release.python[0]} to {release.python[-1]}"
        check.error("python", f"torch {release.minor} has wheels for Python {span}, not {python}", span)
    elif python in release.uncertain_python:
        check.warn("python", f"Python {python} wheels of torch {release.minor} are experimental")
    return python


def _companion(check: _Checker, key: str, paired: str | None, torch: str) -> str | None:
    """torchvision / torchaudio: the paired release, or `none` to leave it out."""
    given = check.combo.get(key)
    if given == NONE:
        return None
    if paired is None:
        if given:
            check.error(key, f"no {key} release pairs with torch {torch}", NONE)
        else:
            check.warn(key, f"no {key} release pairs with torch {torch}: the image ships without it")
        return None
    if given and given != paired:
        check.error(key, f"torch {torch} pairs with {key} {paired}, not {given}", f"{paired} or {NONE}")
    return paired


def _flavors(check: _Checker) -> tuple[str, ...]:
    found = check.combo.values.get("flavors")
    flavors = found.value if found and isinstance(found.value, tuple) else FLAVORS
    unknown = [f for f in flavors if f not in FLAVORS]
    for bad in unknown:
        check.error("flavors", f"unknown flavor '{bad}'", ", ".join(FLAVORS), _did_you_mean(closest(bad, FLAVORS)))
    if len(set(flavors)) != len(flavors):
        check.error("flavors", "a flavor is listed twice")
    return tuple(f for f in FLAVORS if f in flavors)


def _platforms(
    kb: KnowledgeBase, release: TorchRelease, torch: str, variant: Variant, check: _Checker
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The platforms asked for (matrix.py read them: known, each once) and the wheel index of each but linux/amd64;
    a platform with no wheels of this build is refused, with the nearest combination that has them."""
    found = check.combo.values.get("platforms")
    chosen = found.value if found and isinstance(found.value, tuple) else platform_names.DEFAULTS
    indexes = []
    for platform in chosen:
        if gap := platform_wheels.missing(kb, release, torch, variant.name, platform):
            check.error("platforms", gap.message, gap.allowed, gap.suggestion)
        elif wheel := platform_wheels.wheel(release, variant.name, platform):
            indexes.append((platform, kb.wheel_index_url(wheel)))
            if wheel.uncertain:
                url = kb.wheel_index_url(wheel)
                settle = f"{url} would settle it, `kb sync --index {url} --release {torch}`"
                check.warn(
                    "platforms",
                    f"{platform} wheels of torch {torch}+{variant.name} are an uncertain fact in the knowledge base "
                    f"({settle})",
                )
    return chosen, tuple(indexes)


def _toolkit(kb: KnowledgeBase, variant: Variant, os: OsRelease, flavors: tuple[str, ...], check: _Checker) -> Toolkit:
    """Where devel's nvcc comes from: NVIDIA's wheels (devel is runtime plus them) wherever the CUDA line's nvcc
    wheels hold nvcc and the variant pins cuda-toolkit, on every OS; else the nvidia/cuda devel image, which
    only a registry OS has (a bootstrapped one is refused devel)."""
    cuda = variant.cuda
    tools = tuple(f"{name}=={version}" for name, version in sorted(kb.devel_pip.items()))
    if "devel" not in flavors:
        return Toolkit(provider="none")
    if cuda is None:
        return Toolkit(provider="none", requirements=tools)
    facts = kb.cuda[cuda]
    if facts.nvcc_wheels and variant.cuda_toolkit is not None:
        extras = ",".join(WHEEL_TOOLKIT_PARTS)
        toolkit = f"cuda-toolkit[{extras}]=={variant.cuda_toolkit}"
        reason = f"NVIDIA's nvcc wheels for CUDA {cuda} hold nvcc: devel is runtime plus the toolkit's wheels."
        return Toolkit("wheels", requirements=(toolkit, *tools), arch_list=facts.arch_list, reason=reason)
    if os.provider == "registry":
        if os.version not in facts.ubuntu:
            where = ", ".join(f"{os.family}{v}" for v in facts.ubuntu)
            check.error(
                "os",
                f"nvidia/cuda {cuda} devel images exist for {where}, not {os.name}",
                where,
                "or use flavors: [runtime]",
            )
        image = f"nvidia/cuda:{facts.image_release}-devel-{os.name}"
        why = (
            f"torch's {variant.name} build pins no cuda-toolkit (nvcc's wheels)"
            if facts.nvcc_wheels
            else f"NVIDIA's nvcc wheels for CUDA {cuda} hold only ptxas"
        )
        reason = f"{why}: devel starts from the toolkit image."
        return Toolkit("image", image, requirements=tools, arch_list=facts.arch_list, reason=reason)
    if not facts.nvcc_wheels:
        why = f"NVIDIA's nvcc wheels of CUDA {cuda} hold only ptxas, not nvcc"
    else:
        why = f"the knowledge base has no cuda-toolkit pin for {variant.name} builds of this torch"
    check.error(
        "flavors",
        f"a devel image on {os.name} takes nvcc from NVIDIA's wheels, and {why}",
        suggestion="use flavors: [runtime] or an ubuntu OS",
    )
    return Toolkit(provider="none")


def variant_pin(release: TorchRelease, variant: str, version: str) -> str:
    """The specifier that takes only this variant's wheel of `version` (`==2.13.0+cpu`, ...).

    A variant other than the release's `pypi_default` is pinned with its local version label, so an
    index that serves only another build fails at once. The default is served as plain `2.13.0` by
    PyPI and as `2.13.0+cu130` by PyTorch's index, so it keeps `==2.13.0` and excludes every other
    variant's label: otherwise a local `+cpu` wheel, which sorts above the plain version, would win.
    """
    if variant != release.pypi_default:
        return f"=={version}+{variant}"
    others = sorted(v for v in release.variants if v != variant)
    return ",".join([f"=={version}", *(f"!={version}+{other}" for other in others)])


def pins(
    release: TorchRelease, variant: str, torch: str, torchvision: str | None, torchaudio: str | None, numpy: str | None
) -> tuple[str, ...]:
    """The pinned pip requirements of the venv, torch first (see variant_pin). torchaudio paired from an
    older release line (its last release, 2.11.1, with torch 2.12 and later) is pinned with this variant's
    local label even for the PyPI default: PyPI's plain `torchaudio 2.11.1` wheel is one build (it reports
    `2.11.1+cu132`) whatever this torch's variant is, and PEP 440 lets a plain `==2.11.1` match any
    `2.11.1+<label>`, so only the full `==2.11.1+cu130` makes pip refuse another build. Where no index
    publishes that label the install fails at once, naming the pin, instead of tagging a mixed image."""
    same_line = torchaudio is not None and minor_of(torchaudio) == minor_of(torch)
    audio = torchaudio and (variant_pin(release, variant, torchaudio) if same_line else f"=={torchaudio}+{variant}")
    wanted = [
        ("torch", torch and variant_pin(release, variant, torch)),
        ("torchvision", torchvision and variant_pin(release, variant, torchvision)),
        ("torchaudio", audio),
        ("numpy", numpy and f"=={numpy}"),
    ]
    return tuple(f"{name}{specifier}" for name, specifier in wanted if specifier)


def pypi_pins(pinned: tuple[str, ...]) -> tuple[str, ...]:
    """The pins as PyPI serves a platform's wheels (PYPI_INDEX_URL): one build per version and platform, under
    its plain version (`torch==2.9.1`, no `+cpu`), so each pin is `==` the public version alone."""
    return tuple(re.sub(r"==([^,+]+)[^,]*(,.*)?$", r"==\1", pin) for pin in pinned)


def _platform_pins(
    pinned: tuple[str, ...], indexes: tuple[tuple[str, str], ...]
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(platform, pins) for each platform but linux/amd64 whose wheels come from PyPI and whose pins differ."""
    return tuple((p, pypi_pins(pinned)) for p, url in indexes if url == PYPI_INDEX_URL and pypi_pins(pinned) != pinned)


# A pin naming a local label (`torch==2.13.0+cu126`): PyPI serves no such version.
LOCAL_LABEL_PIN = re.compile(r"==[^,+]+\+")


def served_by_pypi(release: TorchRelease, variant: str, platform: str, index_url: str, pinned: tuple[str, ...]) -> bool:
    """Whether PyPI serves every wheel `pinned` names on `platform`, whose wheels come from `index_url` by default.

    PyPI holds one build of a version per platform, under its plain version: on linux/amd64 the release's
    `pypi_default`, elsewhere the build the knowledge base lists with `index: pypi` (the platform's index is then
    PyPI). A pin naming a local label is PyTorch's index's alone: another build (`torch==2.13.0+cu126`), or a
    companion of an older line pinned by its label (`torchaudio==2.11.1+cu130`, see `pins`).
    """
    build = variant == release.pypi_default if platform == platform_names.DEFAULT else index_url == PYPI_INDEX_URL
    return build and not any(LOCAL_LABEL_PIN.search(pin) for pin in pinned)


def pypi_platforms(release: TorchRelease, combination: Combination) -> tuple[str, ...]:
    """The platforms of a combination whose every pinned wheel PyPI serves (see served_by_pypi)."""
    return tuple(
        p
        for p in combination.platforms
        if served_by_pypi(release, combination.variant, p, combination.index_url_for(p), combination.pins_for(p))
    )


def resolve(kb: KnowledgeBase, combo: MatrixRow, path: str, repository: str) -> Resolved:
    """One matrix row -> its Combination (images are added by the plan, once tags are known), or the problems."""
    check = _Checker(combo, path)
    flavors = _flavors(check)
    release = _release(kb, check)
    torch = combo.get("torch") or ""
    variant = _variant(kb, release, torch, check) if release else None
    if release is None or variant is None:
        return Resolved(None, flavors, tuple(check.problems))
    what = f"torch {torch}+{variant.name}"
    platforms, platform_index_urls = _platforms(kb, release, torch, variant, check)
    _pinned(check, "cudnn", variant.cudnn, what, "cuDNN")
    _pinned(check, "nccl", variant.nccl, what, "NCCL")
    for key in ("cudnn", "nccl"):
        if variant.cuda and release.is_uncertain(f"variants.{variant.name}.{key}"):
            settle = kb.settled_by(release, variant.name, f"variants.{variant.name}.{key}", torch)
            check.warn(key, f"the {key} version of {what} is uncertain in the knowledge base ({settle})")
    os = _os(kb, release, variant, check)
    if os is None:
        return Resolved(None, flavors, tuple(check.problems))
    python = _python(kb, release, os, check)
    torchvision = _companion(check, "torchvision", release.torchvision.get(torch), torch)
    torchaudio = _companion(check, "torchaudio", release.torchaudio.get(torch), torch)
    toolkit = _toolkit(kb, variant, os, flavors, check)
    if toolkit.provider == "wheels" and release.is_uncertain(f"variants.{variant.name}.cuda_toolkit"):
        settle = kb.settled_by(release, variant.name, f"variants.{variant.name}.cuda_toolkit", torch)
        check.warn(
            "flavors", f"the cuda-toolkit pin of {what} (nvcc for devel) is uncertain in the knowledge base ({settle})"
        )
    numpy = kb.numpy.get(python)
    if numpy is None:
        check.warn("python", f"no numpy is pinned for Python {python}: `import torch` will warn about it")
    if check.failed:
        return Resolved(None, flavors, tuple(check.problems))
    cuda_facts = kb.cuda.get(variant.cuda or "")
    budget = combo.values.get("size_budget")
    max_layer = combo.values.get("max_layer")
    name_cuda = f"cuda{variant.cuda}" if variant.cuda else "cpu"
    pinned = pins(release, variant.name, torch, torchvision, torchaudio, numpy)
    combination = Combination(
        folder=f"{torch}-{name_cuda}-py{python}-{os.name}",
        torch=torch,
        torchvision=torchvision,
        torchaudio=torchaudio,
        numpy=numpy,
        pins=pinned,
        variant=variant.name,
        cuda=variant.cuda,
        cudnn=variant.cudnn,
        nccl=variant.nccl,
        python=python,
        os=os,
        toolkit=toolkit,
        index_url=kb.index_url_template.format(variant=variant.name),
        installer=kb.installer,
        min_driver=cuda_facts.minor_compat_min_driver if cuda_facts else None,
        toolkit_driver=cuda_facts.min_driver if cuda_facts else None,
        defined_at=SourceLocation(path, combo.line),
        repository=repository,
        size_budget=budget.value if budget and isinstance(budget.value, SizeBudget) else None,
        max_layer=max_layer.value if max_layer and isinstance(max_layer.value, SizeBudget) else None,
        source_date_epoch=kb.source_date_epoch,
        platforms=platforms,
        platform_index_urls=platform_index_urls,
        platform_pins=_platform_pins(pinned, platform_index_urls),
        warnings=tuple(check.problems),
        cuda_archs=tuple(
            (platform, fact)
            for platform in platforms
            if variant.cuda and (fact := kb.archs_of(torch, variant.name, platform))
        ),
    )
    combination = replace(combination, pypi_platforms=pypi_platforms(release, combination))
    return Resolved(combination, flavors, tuple(check.problems))
