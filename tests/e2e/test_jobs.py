"""Issue 13, "parallel on one machine, proven": `build --jobs 2` builds two combinations at once against the
real engine; one fails on purpose (a pip failure), the other is still verified and tagged, each has its log,
the summary names the failure and why, and the exit status is 1."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from .conftest import INSTALL_CAUSE, INSTALL_ERROR, INSTALL_FAILURE, NO_LAYER_SCAN, Matrix, fail_install, run_cli

pytestmark = pytest.mark.e2e
RUNTIME = "{torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none, flavors: [runtime]}"
OTHER_RUNTIME = "{torch: 2.12.1, cuda: cpu, os: debian12, torchvision: none, torchaudio: none, flavors: [runtime]}"
# A progress line: `[done/total] TAG: building (log: ...)`, or `[done/total] TAG: built|failed in N s`.
PROGRESS = re.compile(r"^\[\d+/\d+\] (\S+): (building|built|failed|skipped|interrupted)\b", re.MULTILINE)


def started_and_finished(output: str) -> list[tuple[str, str]]:
    """(tag, event) of every progress line in order: event `building` when a build starts, else how it ended."""
    return [(m.group(1), m.group(2)) for m in PROGRESS.finditer(output)]


@pytest.mark.parametrize("matrix", [(RUNTIME, OTHER_RUNTIME)], indirect=True)
def test_two_jobs_build_two_combinations_at_once_and_a_failure_stops_only_its_own(
    matrix: Matrix, docker_client: Any, ca_bundle: tuple[Path, bytes]
) -> None:
    failing = fail_install(matrix, "2.12.1")
    good = next(c for c in matrix.plan.combinations if c.torch == "2.13.0")
    (bad_image,), (good_image,) = failing.images, good.images
    # 2.12.1's torch is never fetched (its install fails first), and this machine may not reach its index.
    result = run_cli(
        *matrix.build_args(ca_bundle, "--jobs", "2", "--test", "none", "--no-source-check", *NO_LAYER_SCAN)
    )
    output = result.stdout + result.stderr
    print(output)
    assert result.returncode == 1, output

    # Both builds started before either ended: with --jobs ignored (one at a time) the first would end first.
    events = started_and_finished(result.stdout)
    first_end = next(i for i, (_, event) in enumerate(events) if event != "building")
    assert {tag for tag, event in events[:first_end]} == {bad_image.tag, good_image.tag}, events
    assert [event for _, event in events[:first_end]] == ["building", "building"], events

    # One log per image: uv's error in the failed one's, the finished export in the other's.
    bad_log, good_log = (matrix.logs / f"{image.tag}.log" for image in (bad_image, good_image))
    assert INSTALL_ERROR in bad_log.read_text() and INSTALL_CAUSE in bad_log.read_text(), bad_log.read_text()[-2000:]
    assert "naming to" in good_log.read_text(), good_log.read_text()[-2000:]

    summary = result.stdout[result.stdout.rindex("[2/2]") :]  # after the last progress line
    summary = summary[summary.index("\n") :]
    assert "1 built, 0 skipped, 1 failed" in summary, summary
    failed_line = re.search(rf"^failed +\d+ s  {re.escape(bad_image.reference)} .*\n +(.*)$", summary, re.MULTILINE)
    assert failed_line and failed_line.group(1) == INSTALL_FAILURE, summary
    assert re.search(rf"^built +\d+ s  {re.escape(good_image.reference)} +\d", summary, re.MULTILINE), summary

    tagged = {t.split(":")[-1] for i in docker_client.images.list(name=matrix.repository) for t in i.tags}
    assert good_image.tag in tagged and bad_image.tag not in tagged, tagged
    labels = docker_client.images.get(good_image.reference).labels
    assert labels["io.torchimages.torch"] == "2.13.0", labels
