"""manifest.json: the report as data/manifest.schema.json describes it, versioned by
MANIFEST_SCHEMA_VERSION."""

from __future__ import annotations

from typing import Any

from torchimages import __version__
from torchimages.reporting.model import TEST_RESULTS, ImageReport, Report, SmokeResult
from torchimages.security.model import CheckResult

MANIFEST_SCHEMA_VERSION = 1


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


def security_json(result: CheckResult) -> dict[str, Any]:
    """One check of the security gate (data/manifest.schema.json, `security_check`)."""
    return {
        "check": result.check,
        "status": result.status,
        "note": result.note,
        "failing": list(result.failing),
        "allowed": [
            {
                "key": a.finding.key,
                "subject": a.finding.subject,
                "detail": a.finding.detail,
                "entry": a.entry,
                "reason": a.reason,
                "expires": a.expires,
            }
            for a in result.allowed
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
            "verify_seconds": _seconds(image.verify_seconds),
            "gate_seconds": _seconds(image.gate_seconds),
            "smoke_seconds": _seconds(image.smoke_seconds),
            "total_seconds": _seconds(image.total_seconds),
        },
        "smoke": _smoke_json(image.smoke),
        "sbom": image.sbom,
        "sbom_source": image.sbom_source,
        "sbom_statement": image.sbom_statement,
        "sbom_note": image.sbom_note or None,
        "bases": [
            {"reference": b.reference, "locked": b.locked, "built_from": dict(b.built_from) if b.built_from else None}
            for b in image.bases
        ],
        "security": [security_json(r) for r in image.security],
        "cuda_archs": image.cuda_archs,
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
