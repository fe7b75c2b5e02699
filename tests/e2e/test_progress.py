"""What a CI log shows of a real build (`--progress plain`): each stage of the image in order, as BuildKit's
log and the checks after it reach them, a heartbeat while it is quiet, and the summary table."""

from __future__ import annotations

import re

import pytest

from .conftest import Built

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def built(cpu_built: Built) -> Built:
    """The run's one build of the CPU combination (conftest.cpu_built: `--progress plain`, heartbeats every 2 s,
    pushed)."""
    return cpu_built


def test_the_plain_log_names_each_stage_in_order_with_heartbeats(built: Built) -> None:
    assert built.status == 0, built.output
    for flavor, own in (("runtime", ["os", "venv"]), ("devel", ["devel"])):
        tag = built.image(flavor).tag
        stages = re.findall(rf"^{re.escape(tag)}: (\w+(?:, \w+)?) \(", built.output, re.MULTILINE)
        # the security gate and the smoke suites run at once (BuildOptions.gates_together, the default)
        assert stages == [*own, "export", "verify", "security, smoke", "push"], (flavor, built.output)
    tag = built.image("runtime").tag
    assert re.search(rf"^{re.escape(tag)}: still \w+ \((\d+ s|\d+m\d\ds)\)", built.output, re.MULTILINE), built.output
    assert "\x1b[" not in built.output, "plain output holds no terminal escapes"


def test_the_summary_is_a_table_with_size_build_and_test_time(built: Built) -> None:
    lines = built.output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("result "))
    assert lines[header].split() == ["result", "total", "image", "size", "build", "test"], lines[header]
    rows = lines[header + 1 : header + 3]
    for flavor in ("runtime", "devel"):
        reference = re.escape(built.image(flavor).reference)
        pattern = rf"built +\d+ s  {reference} +[\d.]+ (MB|GB) +\d+ s +\d+ s"
        assert any(re.fullmatch(pattern, row) for row in rows), (flavor, rows)
    assert lines[header + 3] == "2 built, 0 skipped, 0 failed"
