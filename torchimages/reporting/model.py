"""What was built, from what, and whether it runs: the report of a `build` or `test` run, as data.

Frozen dataclasses hold what happened to each image; pure functions build them from a plan's
combinations. The documents of a report folder (docs/reports.md) are made from them elsewhere:
manifest.json (manifest.py), summary.md (summary.py), junit.xml (junit.py). Gathering the facts
(engine, SBOMs) and writing the files is writer.py's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchimages import platforms

if TYPE_CHECKING:
    from torchimages.combination import Combination, Image
    from torchimages.security.model import CheckResult

RESULTS = ("built", "skipped", "failed", "interrupted", "passed")
FAILED_RESULTS = ("failed", "interrupted")
TEST_RESULTS = ("passed", "failed", "error", "skipped")


@dataclass(frozen=True)
class Versions:
    """What an image holds, as its tag promises and verification confirmed (None: not in the image)."""

    torch: str
    torchvision: str | None
    torchaudio: str | None
    cuda: str | None
    cudnn: str | None
    nccl: str | None
    python: str
    os: str
    toolkit: str | None  # devel: where nvcc comes from (a pinned wheel or an nvidia/cuda image); runtime: None


@dataclass(frozen=True)
class StoredImage:
    """What the engine knows of a tagged image."""

    image_id: str
    size: int | None  # bytes, uncompressed; None where the engine cannot tell
    repo_digests: tuple[str, ...] = ()  # after a push
    compressed_size: int | None = None  # bytes as a registry stores it, when known


@dataclass(frozen=True)
class BaseImage:
    """A base an image was built from: what FROM names, whether a digest pins it, and for a bootstrapped
    base what it was made from (suite, sources, release_date; None for a registry base)."""

    reference: str
    locked: bool
    built_from: dict[str, str] | None = None


@dataclass(frozen=True)
class TestCase:
    """One smoke test's result: passed, failed, error or skipped, and why (the message of the last three)."""

    name: str
    classname: str
    result: str
    reason: str
    seconds: float


@dataclass(frozen=True)
class SmokeResult:
    """The smoke suites' results for one image, and the GPU and driver they ran with (`none` without)."""

    cases: tuple[TestCase, ...]
    gpu: str | None = None
    driver: str | None = None

    def count(self, result: str) -> int:
        """How many tests ended so."""
        return sum(case.result == result for case in self.cases)


@dataclass(frozen=True)
class ImageReport:
    """Everything the report says about one selected image."""

    tag: str
    reference: str
    aliases: tuple[str, ...]
    flavor: str | None
    combination: str | None
    result: str  # one of RESULTS
    reason: str  # why it failed, was interrupted or skipped ("" when built or passed)
    versions: Versions
    input_digest: str | None
    size_budget: int | None = None
    stored: StoredImage | None = None
    build_seconds: float | None = None
    test_seconds: float | None = None
    total_seconds: float | None = None
    smoke: SmokeResult | None = None
    sbom: str | None = None  # path of its CycloneDX SBOM, relative to the report folder
    sbom_source: str | None = None  # "attestation" (its attested SPDX SBOM, converted) or "scan" (its docker save)
    sbom_statement: str | None = None  # for "attestation": the in-toto statement's digest
    sbom_note: str = ""  # for "scan": why not from its attestation ("": it keeps none, the classic store)
    bases: tuple[BaseImage, ...] = ()
    security: tuple[CheckResult, ...] = ()  # the security gate's results (none: it did not run)
    cuda_archs: str | None = None  # the GPU architectures verification read of torch (None: none, or not read)
    verify_seconds: float | None = None  # of test_seconds: verification
    gate_seconds: float | None = None  # of test_seconds: the security gate
    smoke_seconds: float | None = None  # of test_seconds: the smoke suites


@dataclass(frozen=True)
class Report:
    """One run of `build.py build` or `build.py test`."""

    command: str  # build | test
    created: str  # UTC, ISO 8601
    images: tuple[ImageReport, ...]

    def counts(self) -> dict[str, int]:
        """How many images ended with each result (those that occur)."""
        return {r: n for r in RESULTS if (n := sum(i.result == r for i in self.images))}

    @property
    def passed(self) -> bool:
        """No image failed or was interrupted."""
        return not any(i.result in FAILED_RESULTS for i in self.images)


def versions_of(combination: Combination, flavor: str, platform: str = platforms.DEFAULT) -> Versions:
    """The versions a matrix image (of `platform`) holds (verification read them back before it was tagged)."""
    toolkit = None
    if flavor == "devel" and combination.toolkit.provider == "image":
        toolkit = combination.toolkit.image
    elif flavor == "devel" and combination.toolkit.provider == "wheels":
        toolkit = next((r for r in combination.toolkit.requirements if r.startswith("cuda-toolkit")), None)
    companions = combination.companion_versions(platform)
    return Versions(
        torch=combination.torch,
        torchvision=companions["torchvision"],
        torchaudio=companions["torchaudio"],
        cuda=combination.cuda,
        cudnn=combination.cudnn,
        nccl=combination.nccl,
        python=combination.python,
        os=combination.os.name,
        toolkit=toolkit,
    )


def versions_of_spec(spec: dict[str, Any]) -> Versions:
    """The versions of an image tested by `--image` (its SPEC.json, from labels or --spec)."""
    return Versions(
        torch=str(spec["torch"]),
        torchvision=spec.get("torchvision"),
        torchaudio=spec.get("torchaudio"),
        cuda=spec.get("cuda"),
        cudnn=spec.get("cudnn"),
        nccl=spec.get("nccl"),
        python=str(spec["python"]),
        os=str(spec["os"]),
        toolkit=None,
    )


def image_report(combination: Combination, image: Image, result: str, reason: str = "", **facts: Any) -> ImageReport:
    """An ImageReport of a matrix image; `facts` are the other ImageReport fields (stored, durations, smoke)."""
    return ImageReport(
        tag=image.own_tag,  # a platform's image of an index: `<tag>-<arch>`
        reference=image.platform_reference,  # the image itself (for several platforms, the public tag is an index)
        aliases=image.aliases,
        flavor=image.flavor,
        combination=combination.folder,
        result=result,
        reason=reason,
        versions=versions_of(combination, image.flavor, image.platform),
        input_digest=image.input_digest,
        size_budget=image.size_budget,
        **facts,
    )


def headline(reason: str) -> str:
    """The line of a reason that says why: its first, joined with the next while it only introduces a list
    (`not tagged:`, `smoke suites (cpu) failed:`)."""
    lines = [line.strip() for line in reason.strip().splitlines() if line.strip()]
    text = lines[0] if lines else ""
    for line in lines[1:]:
        if not text.endswith(":"):
            break
        text += " " + line
    return text
