"""What was built, from what, and whether it runs: the report of a `build` or `test` run, as data.

Frozen dataclasses hold what happened to each image; pure functions turn them into the documents of a
report folder (docs/reports.md): `manifest()` (manifest.json, versioned by MANIFEST_SCHEMA_VERSION and
described by data/manifest.schema.json), `summary_markdown()` (summary.md, a CI step summary) and
`merge_junit()` (junit.xml: every image a testsuite). `smoke_result()` reads one image's JUnit file.
Gathering the facts (engine, SBOMs) and writing the files is reporting.py's job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from xml.etree import ElementTree

from torchimages import __version__
from torchimages.building.views import format_seconds
from torchimages.sizes import format_size

if TYPE_CHECKING:
    from torchimages.combination import Combination, Image

MANIFEST_SCHEMA_VERSION = 1
RESULTS = ("built", "skipped", "failed", "interrupted", "passed")
FAILED_RESULTS = ("failed", "interrupted")
TEST_RESULTS = ("passed", "failed", "error", "skipped")
_MARKS = {"built": "✅", "passed": "✅", "skipped": "⏭️", "failed": "❌", "interrupted": "⏹️"}


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
    size: int  # bytes, uncompressed
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
    bases: tuple[BaseImage, ...] = ()


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


def versions_of(combination: Combination, flavor: str) -> Versions:
    """The versions a matrix image holds (verification read them back before it was tagged)."""
    toolkit = None
    if flavor == "devel" and combination.toolkit.provider == "image":
        toolkit = combination.toolkit.image
    elif flavor == "devel" and combination.toolkit.provider == "wheels":
        toolkit = next((r for r in combination.toolkit.requirements if r.startswith("cuda-toolkit")), None)
    return Versions(
        torch=combination.torch,
        torchvision=combination.torchvision,
        torchaudio=combination.torchaudio,
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
        tag=image.tag,
        reference=image.reference,
        aliases=image.aliases,
        flavor=image.flavor,
        combination=combination.folder,
        result=result,
        reason=reason,
        versions=versions_of(combination, image.flavor),
        input_digest=image.input_digest,
        size_budget=image.size_budget,
        **facts,
    )


# ---------------------------------------------------------------------------------------------
# JUnit


def smoke_result(junit: bytes) -> SmokeResult:
    """One image's smoke results from the JUnit XML pytest wrote (ValueError when it is not JUnit XML)."""
    try:
        root = ElementTree.fromstring(junit)
    except ElementTree.ParseError as exc:
        raise ValueError(f"not JUnit XML: {exc}") from None
    cases = []
    for case in root.iter("testcase"):
        result, reason = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                result = {"failure": "failed"}.get(child.tag, child.tag)
                reason = child.get("message") or (child.text or "").strip()
        cases.append(
            TestCase(
                name=case.get("name", ""),
                classname=case.get("classname", ""),
                result=result,
                reason=" ".join(reason.split())[:500],
                seconds=round(float(case.get("time") or 0), 3),
            )
        )
    properties = {p.get("name"): p.get("value") for p in root.iter("property")}
    return SmokeResult(tuple(cases), properties.get("gpu"), properties.get("driver"))


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


def _suite_of_outcome(image: ImageReport) -> ElementTree.Element:
    """A testsuite for an image whose suites did not run: one testcase, `build`, saying why."""
    suite = ElementTree.Element("testsuite", name=image.tag)
    case = ElementTree.SubElement(
        suite, "testcase", classname="torchimages.build", name="build", time=f"{image.total_seconds or 0:.3f}"
    )
    if image.result in FAILED_RESULTS:
        failure = ElementTree.SubElement(case, "failure", message=headline(image.reason))
        failure.text = image.reason
    elif image.result == "skipped":
        ElementTree.SubElement(case, "skipped", message=image.reason or "skipped")
    return suite


def _counted(suite: ElementTree.Element) -> dict[str, int]:
    cases = list(suite.iter("testcase"))
    return {
        "tests": len(cases),
        "failures": sum(c.find("failure") is not None for c in cases),
        "errors": sum(c.find("error") is not None for c in cases),
        "skipped": sum(c.find("skipped") is not None for c in cases),
    }


def merge_junit(images: Sequence[tuple[ImageReport, bytes | None]]) -> bytes:
    """One JUnit XML document with a testsuite per image, named by its tag: the suites pytest wrote for it
    (properties kept), or, where none ran, one `build` testcase saying why (failed, skipped)."""
    root = ElementTree.Element("testsuites", name="torchimages")
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    seconds = 0.0
    for image, junit in images:
        if junit is None:
            suites = [_suite_of_outcome(image)]
        else:
            parsed = ElementTree.fromstring(junit)
            suites = [parsed] if parsed.tag == "testsuite" else list(parsed.iter("testsuite"))
        for suite in suites:
            suite.set("name", image.tag)
            for key, value in _counted(suite).items():
                suite.set(key, str(value))
                total[key] += value
            seconds += float(suite.get("time") or 0)
            root.append(suite)
    for key, value in total.items():
        root.set(key, str(value))
    root.set("time", f"{seconds:.3f}")
    ElementTree.indent(root)
    text: bytes = ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
    return text + b"\n"


# ---------------------------------------------------------------------------------------------
# manifest.json


def _seconds(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _smoke_json(smoke: SmokeResult | None) -> dict[str, Any] | None:
    if smoke is None:
        return None
    return {
        "tests": len(smoke.cases),
        **{result: smoke.count(result) for result in TEST_RESULTS},
        "gpu": smoke.gpu,
        "driver": smoke.driver,
        "cases": [
            {"classname": c.classname, "name": c.name, "result": c.result, "reason": c.reason, "seconds": c.seconds}
            for c in smoke.cases
        ],
    }


def image_json(image: ImageReport) -> dict[str, Any]:
    """One image of the manifest (data/manifest.schema.json, `image`)."""
    stored = image.stored
    return {
        "tag": image.tag,
        "reference": image.reference,
        "aliases": list(image.aliases),
        "flavor": image.flavor,
        "combination": image.combination,
        "result": image.result,
        "reason": image.reason,
        "image_id": stored.image_id if stored else None,
        "repo_digests": list(stored.repo_digests) if stored else [],
        "size": {
            "uncompressed": stored.size if stored else None,
            "compressed": stored.compressed_size if stored else None,
            "budget": image.size_budget,
        },
        "versions": {
            "torch": image.versions.torch,
            "torchvision": image.versions.torchvision,
            "torchaudio": image.versions.torchaudio,
            "cuda": image.versions.cuda,
            "cudnn": image.versions.cudnn,
            "nccl": image.versions.nccl,
            "python": image.versions.python,
            "os": image.versions.os,
            "toolkit": image.versions.toolkit,
        },
        "input_digest": image.input_digest,
        "durations": {
            "build_seconds": _seconds(image.build_seconds),
            "test_seconds": _seconds(image.test_seconds),
            "total_seconds": _seconds(image.total_seconds),
        },
        "smoke": _smoke_json(image.smoke),
        "sbom": image.sbom,
        "bases": [
            {"reference": b.reference, "locked": b.locked, "built_from": dict(b.built_from) if b.built_from else None}
            for b in image.bases
        ],
    }


def manifest(report: Report) -> dict[str, Any]:
    """The manifest document (manifest.json), as data/manifest.schema.json describes it."""
    return {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "tool": {"name": "torchimages", "version": __version__},
        "command": report.command,
        "created": report.created,
        "result": "passed" if report.passed else "failed",
        "counts": report.counts(),
        "images": [image_json(image) for image in report.images],
    }


# ---------------------------------------------------------------------------------------------
# summary.md


def duration(seconds: float | None) -> str:
    """As the terminal's summary shows it (`42 s`, `3m07s`, `1h02m`); `-` when it did not run."""
    return "-" if seconds is None else format_seconds(seconds)


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _result_cell(image: ImageReport) -> str:
    text = f"{_MARKS.get(image.result, '')} {image.result}"
    if image.smoke is not None:
        counts = [f"{n} {r}" for r in TEST_RESULTS if (n := image.smoke.count(r))]
        text += f" ({', '.join(counts) or 'no tests'})"
    if image.reason and image.result != "built":
        reason = headline(image.reason)
        text += ": " + (reason if len(reason) <= 160 else reason[:157] + "...")
    return _cell(text)


def summary_markdown(report: Report) -> str:
    """summary.md: a heading with the counts and a table of image, result, size, build and test time (for
    GitHub's $GITHUB_STEP_SUMMARY)."""
    counts = ", ".join(f"{n} {r}" for r, n in report.counts().items()) or "no images"
    lines = [
        f"### torchimages {report.command}: {counts}",
        "",
        "| image | result | size | build | test |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for image in report.images:
        size = format_size(image.stored.size) if image.stored else "-"
        if image.size_budget is not None:
            size += f" (budget {format_size(image.size_budget)})"
        lines.append(
            f"| `{_cell(image.reference)}` | {_result_cell(image)} | {size} | "
            f"{duration(image.build_seconds)} | {duration(image.test_seconds)} |"
        )
    gpus = sorted({f"{i.smoke.gpu}, driver {i.smoke.driver}" for i in report.images if i.smoke and _real(i.smoke.gpu)})
    if gpus:
        lines += ["", "GPU: " + "; ".join(_cell(g) for g in gpus)]
    return "\n".join(lines) + "\n"


def _real(gpu: str | None) -> bool:
    return bool(gpu) and gpu not in ("none", "none visible") and not str(gpu).startswith("unknown")
