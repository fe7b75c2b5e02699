"""Write a report folder (`--report DIR`, docs/reports.md): gather what the engine knows of each image, the
smoke suites' JUnit files and an SBOM per tagged image, then write the documents report.py makes.

    DIR/manifest.json             every selected image (data/manifest.schema.json)
    DIR/summary.md                a Markdown table for a CI step summary
    DIR/junit.xml                 the smoke suites of every image, one testsuite each
    DIR/sbom/<tag>.cdx.json       CycloneDX SBOM of each tagged image (syft: its attested SPDX SBOM converted,
                                  else a scan of its docker save)
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from torchimages import textfile
from torchimages.building import bootstrap
from torchimages.combination import Combination
from torchimages.engine import EngineError, ImageInfo
from torchimages.engine.attestation import Attested
from torchimages.reporting import model as report
from torchimages.reporting import sbom
from torchimages.reporting.junit import merge_junit, smoke_result
from torchimages.reporting.manifest import manifest
from torchimages.reporting.summary import summary_markdown
from torchimages.smoke.runner import junit_in
from torchimages.smoke.targets import Tested

if TYPE_CHECKING:
    from torchimages.building.outcome import Outcome
    from torchimages.combination import Combination

MANIFEST = "manifest.json"
SUMMARY = "summary.md"
JUNIT = "junit.xml"
SBOM_DIR = "sbom"


class ReportError(Exception):
    """The report folder cannot be made or written."""


class ReportEngine(Protocol):
    """What a report needs from the engine (engine.DockerEngine)."""

    @property
    def containerd_store(self) -> bool: ...

    def inspect(self, reference: str) -> ImageInfo | None: ...

    def attestations(self, reference: str, platform: str) -> Attested: ...

    def save(self, reference: str, path: Path) -> None: ...

    def compressed_size(self, reference: str) -> int | None: ...


def prepare(directory: Path) -> Path:
    """Make the report folder (checked before anything is built) and a fresh folder for the JUnit files
    of this run's smoke suites (removed once merged); its path."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=".junit-", dir=directory))
    except OSError as exc:
        raise ReportError(f"--report {directory}: cannot write there: {exc.strerror or exc}") from None


def _read(path: Path | None) -> bytes | None:
    try:
        return path.read_bytes() if path else None
    except FileNotFoundError:
        return None


def _stored(
    engine: ReportEngine, reference: str, pushed: bool = False, zstd: bool = False
) -> report.StoredImage | None:
    """What the engine knows of a tagged image; once pushed, also what the registry stores and the digests the
    engine records for it, each once (only then: the containerd image store lists `repository@<image id>` for
    every local name, pushed or not, so after a `zstd` push, which never sends that digest, it is left out)."""
    info = engine.inspect(reference)
    if info is None:
        return None
    digests = tuple(dict.fromkeys(info.repo_digests)) if pushed else ()
    if zstd:  # the containerd store's `repository@<image id>` of the repository just pushed: never sent
        repository = reference.rsplit(":", 1)[0] if ":" in reference.rsplit("/", 1)[-1] else reference
        digests = tuple(d for d in digests if d != f"{repository}@{info.id}")
    compressed = engine.compressed_size(reference) if pushed and info.repo_digests else None
    return report.StoredImage(info.id, info.size or None, digests, compressed)


def _bases(engine: ReportEngine, combination: Combination) -> tuple[report.BaseImage, ...]:
    """What a combination's images were built from: its bootstrapped base with that base's provenance
    labels, and its registry bases (locked or not)."""
    bases = []
    if combination.os.provider == "bootstrap":
        info = engine.inspect(combination.os.image)
        built_from = bootstrap.provenance_in(info.labels) if info else None
        bases.append(report.BaseImage(combination.os.image, False, built_from))
    bases += [report.BaseImage(b.reference, b.digest is not None) for b in combination.pulled_bases]
    return tuple(bases)


def _smoke(junit: bytes | None) -> report.SmokeResult | None:
    try:
        return smoke_result(junit) if junit else None
    except ValueError:
        return None


def built_images(
    outcomes: Sequence[Outcome], engine: ReportEngine, junit_dir: Path, pushed: bool = False, zstd: bool = False
) -> list[tuple[report.ImageReport, bytes | None]]:
    """Each outcome of `build.py build` as an ImageReport with its JUnit XML (None when the suites did not run);
    `pushed`: the images were pushed (`zstd`: with zstd layers), so the registry can tell their compressed size."""
    images = []
    for o in outcomes:
        junit = _read(junit_in(junit_dir, o.image.own_tag))
        found = o.status in ("built", "skipped")
        stored = _stored(engine, o.image.platform_reference, pushed, zstd) if found else None
        reason = "" if o.status == "built" else o.detail
        image = report.image_report(
            o.combination,
            o.image,
            o.status,
            reason,
            stored=stored,
            build_seconds=o.build_seconds,
            test_seconds=o.test_seconds,
            verify_seconds=o.verify_seconds,
            gate_seconds=o.gate_seconds,
            smoke_seconds=o.smoke_seconds,
            total_seconds=o.seconds,
            smoke=_smoke(junit),
            bases=_bases(engine, o.combination),
            security=o.security,
            cuda_archs=o.cuda_archs,
        )
        images.append((image, junit))
    return images


def tested_images(
    tested: Sequence[Tested], engine: ReportEngine, junit_dir: Path
) -> list[tuple[report.ImageReport, bytes | None]]:
    """Each image `build.py test` ran the suites on as an ImageReport with its JUnit XML."""
    images = []
    for t in tested:
        junit = _read(junit_in(junit_dir, t.name))
        smoke = _smoke(junit)
        result = "passed" if t.returncode == 0 else "failed"
        reason = t.error
        if result == "failed" and not reason:
            failing = [c.name for c in smoke.cases if c.result in ("failed", "error")] if smoke else []
            reason = f"smoke suites failed: {', '.join(failing) or f'exit {t.returncode}'}"
        facts: dict[str, Any] = {
            "stored": _stored(engine, str(t.spec["image"])),
            "test_seconds": t.seconds,
            "total_seconds": t.seconds,
            "smoke": smoke,
        }
        if t.planned:
            image = report.image_report(*t.planned, result, reason, bases=_bases(engine, t.planned[0]), **facts)
        else:
            labels = t.spec.get("labels") or {}
            image = report.ImageReport(
                tag=str(t.spec["image"]),  # the reference given to --image
                reference=str(t.spec["image"]),
                aliases=(),
                flavor=t.spec.get("flavor"),
                combination=None,
                result=result,
                reason=reason,
                versions=report.versions_of_spec(t.spec),
                input_digest=labels.get("io.torchimages.input-digest"),
                **facts,
            )
        images.append((image, junit))
    return images


def with_sboms(
    images: Sequence[tuple[report.ImageReport, bytes | None]], engine: ReportEngine, directory: Path
) -> tuple[list[tuple[report.ImageReport, bytes | None]], list[str]]:
    """An SBOM for every image the engine holds (tagged: built, up to date, or tested); the problems met."""
    problems: list[str] = []
    out = []
    syft: str | None = None
    for image, junit in images:
        if image.stored is not None:
            own_tag = image.reference.rsplit(":", 1)[-1]  # a platform's image of an index: `<tag>-<arch>`
            relative = f"{SBOM_DIR}/{junit_in(Path(), own_tag).stem}.cdx.json"
            try:
                syft = syft or sbom.syft_binary()
                ours = image.combination is not None  # None: an image given by `test --image`
                made = sbom.write_sbom(engine, image.reference, directory / relative, syft, ours)
                image = dataclasses.replace(
                    image, sbom=relative, sbom_source=made.source, sbom_statement=made.statement, sbom_note=made.note
                )
            except (sbom.SbomError, EngineError) as exc:
                problems.append(f"no SBOM for {image.reference}: {exc}")
        out.append((image, junit))
    return out, problems


def write(
    directory: Path,
    command: str,
    images: Sequence[tuple[report.ImageReport, bytes | None]],
    engine: ReportEngine,
    junit_dir: Path,
    sboms: bool = True,
) -> list[str]:
    """SBOMs (unless `sboms` is False: after an interrupt), then manifest.json, summary.md and junit.xml into
    the report folder; removes the JUnit folder of the run. Returns the problems met (an SBOM not made)."""
    images, problems = with_sboms(images, engine, directory) if sboms else (list(images), [])
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    document = report.Report(command, created, tuple(image for image, _ in images))
    try:
        textfile.write_atomically(directory / MANIFEST, json_text(manifest(document)))
        textfile.write_atomically(directory / SUMMARY, summary_markdown(document))
        textfile.write_atomically(directory / JUNIT, merge_junit(images))
    except OSError as exc:
        raise ReportError(f"--report {directory}: cannot write the report: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(junit_dir, ignore_errors=True)
    return problems


_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(document: Any) -> str:
    """A document as JSON text, non-ASCII as it is, a surrogate (an undecodable byte of a file name or a
    setting) as its escape: the file stays valid UTF-8, and JSON escapes every control character itself."""
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    return _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def schema() -> dict[str, Any]:
    """The manifest's JSON Schema (data/manifest.schema.json)."""
    from importlib import resources

    data: dict[str, Any] = json.loads(resources.files("torchimages.data").joinpath("manifest.schema.json").read_text())
    return data
