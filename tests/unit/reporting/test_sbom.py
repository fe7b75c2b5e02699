"""The SBOM's syft run (reporting/sbom.py), with a stand-in syft that records what it was given: the image's
archive in, the SBOM put in place whole, syft told not to look for updates and not to hash the files packages own
(CycloneDX JSON carries no file digests; the hashing was a third of syft's time on a CUDA image)."""

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


def test_syft_reads_the_saved_image_without_updates_or_file_digests(
    syft: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SYFT_FILE_METADATA_SELECTION", "all")  # the user's environment does not undo it
    output = tmp_path / "report" / "sbom" / "img.cdx.json"
    sbom.write_sbom(Saver(), "repo/img:tag", output, syft=syft)
    assert json.loads(output.read_text()) == {"archive": "saved repo/img:tag", "update": "false", "metadata": "none"}
    assert [p.name for p in output.parent.iterdir()] == ["img.cdx.json"], "the archive and syft's output go"
