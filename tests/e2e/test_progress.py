"""What a CI log shows of a real build (`--progress plain`): each stage of the image in order, as BuildKit's
log and the checks after it reach them, a heartbeat while it is quiet, and the summary table."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import Built, build_matrix

pytestmark = pytest.mark.e2e
CPU_RUNTIME = "{torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none, flavors: [runtime]}"


@pytest.fixture(scope="module")
def built(
    docker_client: Any, tmp_path_factory: pytest.TempPathFactory, ca_bundle: tuple[Path, bytes]
) -> Iterator[Built]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TORCHIMAGES_HEARTBEAT_S", "2")  # the smoke suites alone run longer than that
        patch.delenv("TORCHIMAGES_PROGRESS", raising=False)
        tmp = tmp_path_factory.mktemp("progress")
        yield from build_matrix(docker_client, tmp, CPU_RUNTIME, ca_bundle, extra=("--progress", "plain"))


def test_the_plain_log_names_each_stage_in_order_with_heartbeats(built: Built) -> None:
    assert built.status == 0, built.output
    tag = built.image("runtime").tag
    stages = re.findall(rf"^{re.escape(tag)}: (\w+) \(", built.output, re.MULTILINE)
    assert stages == ["os", "venv", "export", "verify", "security", "smoke"], built.output
    assert re.search(rf"^{re.escape(tag)}: still \w+ \((\d+ s|\d+m\d\ds)\)", built.output, re.MULTILINE), built.output
    assert "\x1b[" not in built.output, "plain output holds no terminal escapes"


def test_the_summary_is_a_table_with_size_build_and_test_time(built: Built) -> None:
    reference = re.escape(built.image("runtime").reference)
    lines = built.output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("result "))
    assert lines[header].split() == ["result", "total", "image", "size", "build", "test"], lines[header]
    row = lines[header + 1]
    assert re.fullmatch(rf"built +\d+ s  {reference} +[\d.]+ (MB|GB) +\d+ s +\d+ s", row), row
    assert lines[header + 2] == "1 built, 0 skipped, 0 failed"
