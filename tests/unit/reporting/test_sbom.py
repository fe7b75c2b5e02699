"""The SBOM's syft run (reporting/sbom.py), with a stand-in syft that records what it was given: the image's
archive in, the SBOM put in place whole, syft told not to look for updates and, unless the user's environment says
otherwise, not to hash the files packages own (the pinned syft's CycloneDX JSON carries no file digests; the hashing
was 27% of its time on a CUDA runtime)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from torchimages.reporting import sbom

FAKE_SYFT = """#!/bin/sh
# args: scan docker-archive:ARCHIVE --output cyclonedx-json=OUT ...
archive="${2#docker-archive:}"; out="${4#cyclonedx-json=}"
printf '{"archive": "%s", "update": "%s", "metadata": "%s"}' "$(cat "$archive")" \
  "$SYFT_CHECK_FOR_APP_UPDATE" "$SYFT_FILE_METADATA_SELECTION" > "$out"
"""


class Saver:
    def save(self, reference: str, path: Path) -> None:
        path.write_text(f"saved {reference}")


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
