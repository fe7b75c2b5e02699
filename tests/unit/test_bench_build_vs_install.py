"""bench/build_vs_install.py's pure parts (issue 44): the wheels a rendered Dockerfile installs for the selected
flavors (what the bare install installs), the phases read from a report's manifest.json (hostile ones refused in one
line), the table and its verdicts, the main job's command, and that only --clean-engine touches the engine before it.
The installs and builds themselves need uv, wheel sources and an engine (not here)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import build_vs_install as bench  # bench/ scripts import their siblings by name

DOCKERFILE = """\
# syntax=docker/dockerfile:1
FROM ubuntu:24.04 AS runtime
RUN --mount=type=bind,source=steps,target=/mnt \\
    bash /mnt/venv.sh create python3.11 --pip 25.1 --setuptools
RUN bash /mnt/venv.sh nvidia 'cudnn' "torch==2.11.0,!=2.11.0+cpu"
RUN bash /mnt/venv.sh nvidia-rest 'cudnn cublas' "torch==2.11.0,!=2.11.0+cpu"
RUN bash /mnt/venv.sh install --no-deps "torch==2.11.0,!=2.11.0+cpu"
RUN bash /mnt/venv.sh install "torch==2.11.0,!=2.11.0+cpu"
RUN bash /mnt/venv.sh install "torchvision==0.26.0" "numpy==2.4.6"
RUN --mount=type=bind,source=steps,target=/mnt bash /mnt/venv.sh links /opt/venv/a=b
FROM runtime AS devel
RUN --mount=type=cache,target=/home/torch/.cache/uv \\
    bash /mnt/venv.sh install "cuda-toolkit[nvcc,nvvm]==13.0.2" "ninja==1.13.2"
"""
RUNTIME = ("pip==25.1", "setuptools", "torch==2.11.0,!=2.11.0+cpu", "torchvision==0.26.0", "numpy==2.4.6")
DEVEL = (*RUNTIME, "cuda-toolkit[nvcc,nvvm]==13.0.2", "ninja==1.13.2")


def test_the_runtime_installs_its_stage_s_wheels_once_each_and_no_family_name() -> None:
    assert bench.venv_requirements(DOCKERFILE, ["runtime"]) == RUNTIME


def test_devel_installs_runtime_s_wheels_and_its_own() -> None:
    assert bench.venv_requirements(DOCKERFILE, ["devel"]) == DEVEL
    assert bench.venv_requirements(DOCKERFILE, ["devel", "runtime"]) == DEVEL


def test_a_devel_stage_from_another_image_installs_only_its_own() -> None:
    text = DOCKERFILE.replace("FROM runtime AS devel", "FROM nvidia/cuda:12.8.1-devel-ubuntu24.04 AS devel")
    assert bench.venv_requirements(text, ["devel"]) == DEVEL[len(RUNTIME) :]


@pytest.mark.parametrize(
    ("text", "flavors", "says"),
    [
        (DOCKERFILE, ["gpu"], "no stage 'gpu'"),
        ("FROM devel AS runtime\nFROM runtime AS devel\n", ["devel"], "built FROM itself"),
        ("FROM ubuntu AS runtime\nRUN true\n", ["runtime"], "installs a wheel"),
        ('FROM ubuntu AS runtime\nRUN bash /mnt/venv.sh install "torch\n', ["runtime"], "cannot be read"),
    ],
)
def test_a_dockerfile_without_what_it_needs_is_one_line(text: str, flavors: list[str], says: str) -> None:
    with pytest.raises(bench.BadInput, match=says) as refused:
        bench.venv_requirements(text, flavors)
    assert "\n" not in str(refused.value)


def manifest(**durations: Any) -> dict[str, Any]:
    return {"images": [{"tag": "2.13.0-cpu-runtime", "result": "built", "durations": durations}]}


def test_phases_are_read_from_the_manifest() -> None:
    found = bench.phases(
        manifest(
            build_seconds=200.0,
            test_seconds=100.0,
            verify_seconds=30.0,
            gate_seconds=20.0,
            smoke_seconds=50.0,
            total_seconds=300.0,
        )
    )
    assert found == [bench.ImagePhases("2.13.0-cpu-runtime", "built", 300.0, 200.0, 100.0, 30.0, 20.0, 50.0)]
    assert found[0].checks_share == pytest.approx(1 / 3)


def test_a_manifest_without_the_phases_still_has_build_and_checks() -> None:
    (found,) = bench.phases(manifest(build_seconds=62.0, test_seconds=22.0, total_seconds=85.2))
    assert (found.build, found.checks, found.total) == (62.0, 22.0, 85.2)
    assert (found.verify, found.gate, found.smoke) == (None, None, None)


@pytest.mark.parametrize(
    "document",
    [
        [],
        {"images": {}},
        {"images": [1]},
        {"images": [{"tag": 3}]},
        {"images": [{"tag": "t"}]},
        manifest(build_seconds="soon"),
        manifest(build_seconds=-1),
        manifest(test_seconds=True),
        manifest(smoke_seconds=float("nan")),
        manifest(gate_seconds=float("inf")),
    ],
)
def test_a_manifest_that_is_not_a_report_is_refused(document: Any) -> None:
    with pytest.raises(bench.BadInput):
        bench.phases(document)


JSON = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
DURATIONS = st.dictionaries(
    st.sampled_from(
        ["build_seconds", "test_seconds", "verify_seconds", "gate_seconds", "smoke_seconds", "total_seconds"]
    ),
    JSON,
)


@settings(max_examples=200, deadline=None)
@given(st.one_of(JSON, DURATIONS.map(lambda d: manifest(**d))))
def test_any_json_is_read_or_refused_in_one_line(document: Any) -> None:
    try:
        found = bench.phases(json.loads(json.dumps(document)))
    except bench.BadInput as exc:
        assert "\n" not in str(exc)
        return
    for image in found:
        for value in (image.total, image.build, image.checks, image.verify, image.gate, image.smoke):
            assert value is None or 0 <= value < float("inf")
        assert image.checks_share is None or image.checks_share >= 0


def test_the_table_says_each_phase_the_share_and_the_ratio() -> None:
    images = [
        bench.ImagePhases("2.11.0-cuda13.0-cudnn9-runtime", "built", 300.0, 200.0, 100.0, 30.0, 20.0, 50.0),
        bench.ImagePhases("2.11.0-cuda13.0-cudnn9-devel", "built", 100.0, 40.0, 60.0),
    ]
    text = bench.table(images, bare=200.0, job=400.0, summarized=400.0)
    assert "| 2.11.0-cuda13.0-cudnn9-runtime | built | 200 s | 30 s | 20 s | 50 s | 100 s | 300 s | 33% |" in text
    assert "| 2.11.0-cuda13.0-cudnn9-devel | built | 40 s | - | - | - | 60 s | 100 s | 60% (over a third) |" in text
    assert text.endswith("main job / bare install = 2.00 (within the target of 2)")
    assert bench.table(images, bare=200.0, job=401.0, summarized=401.0).endswith("= 2.00 (over the target of 2)")
    assert bench.table(images, bare=None, job=400.0, summarized=400.0).endswith(
        "main job 400 s (no bare install measured)"
    )


def test_the_ratio_is_of_the_readme_s_job_without_the_report_work_which_is_said() -> None:
    """The README's main job writes no report: the manifest and SBOMs after build.py's summary are not counted."""
    images = [bench.ImagePhases("2.11.0-cuda13.0-cudnn9-runtime", "built", 300.0, 200.0, 100.0)]
    text = bench.table(images, bare=200.0, job=500.0, summarized=400.0)
    assert "the --report work after the main job's summary: 100 s, not counted" in text
    assert text.endswith("main job 400 s; main job / bare install = 2.00 (within the target of 2)"), text
    unseen = bench.table(images, bare=200.0, job=500.0, summarized=None)
    assert unseen.endswith(
        "printed no summary line agreeing with its report: without its --report work its time is unknown, "
        "no ratio verdict"
    )
    assert "within" not in unseen and "over the" not in unseen


def test_a_job_without_a_summary_line_is_no_measurement_and_exits_1() -> None:
    """Every image built, but no summary line seen: no ratio verdict, so no passing status either (a CI step that
    times the job must not pass on a run that measured nothing; outside attack, finding 18)."""
    images = [bench.ImagePhases("2.11.0-cuda13.0-cudnn9-runtime", "built", 300.0, 200.0, 100.0)]
    assert bench.table(images, bare=200.0, job=500.0, summarized=None).endswith("no ratio verdict")
    assert bench.exit_status(0, images, None) == 1
    assert bench.exit_status(0, images, 400.0) == 0 and bench.exit_status(0, images, 0.0) == 0
    assert bench.exit_status(130, images, None) == 130


def test_the_main_job_is_the_readme_s_with_no_cache_unless_the_engine_is_cleaned(tmp_path: Path) -> None:
    report, logs, matrix = tmp_path / "report", tmp_path / "logs", tmp_path / "matrix.yaml"
    shared = bench.build_command("2.11.0-cuda13.0", report, logs, matrix, clean_engine=False)
    assert shared[1:4] == [str(bench.ROOT / "build.py"), "build", "--matrix"]
    assert shared[shared.index("--bases") + 1] == "bootstrap" and shared[shared.index("--report") + 1] == str(report)
    assert "--no-cache" in shared and shared[-2:] == ["--", "2.11.0-cuda13.0"]
    own = bench.build_command("2.11.0-cuda13.0", report, logs, matrix, clean_engine=True)
    assert "--no-cache" not in own and [w for w in shared if w != "--no-cache"] == own


def test_only_clean_engine_removes_images_and_prunes_the_build_cache() -> None:
    references = ["torchimages/pytorch:2.13.0-cpu-runtime", "torchimages/pytorch:2.13-cpu-runtime"]
    assert bench.before_the_job(False, "docker", references) == []
    commands = bench.before_the_job(True, "docker", references)
    assert commands == [
        ["docker", "image", "rm", "--force", "torchimages/pytorch:2.13.0-cpu-runtime"],
        ["docker", "image", "rm", "--force", "torchimages/pytorch:2.13-cpu-runtime"],
        ["docker", "builder", "prune", "--all", "--force"],
    ]


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as stopped:
        bench.parse(list(argv))
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("build_vs_install.py: error: ")
    return err


def test_arguments(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    args = bench.parse([])
    assert (args.tag, args.clean_engine, args.uv, args.skip_install, args.skip_build) == (
        "2.11.0-cuda13.0",
        False,
        None,
        False,
        False,
    )
    assert bench.parse(["--clean-engine", "2.13.0-cpu"]).clean_engine
    assert bench.parse(["--python", "/usr/bin/python3.12"]).python == "/usr/bin/python3.12"
    assert "nothing to measure" in refused(capsys, "--skip-install", "--skip-build")
    assert "no such executable" in refused(capsys, "--uv", str(tmp_path))
    assert "no such file" in refused(capsys, "--matrix", str(tmp_path / "none.yaml"))


def test_the_summary_s_count_marks_where_the_report_begins() -> None:
    assert bench.is_summary("2 built, 0 skipped, 0 failed\n")
    assert bench.is_summary("1 built, 0 skipped, 1 failed, 1 interrupted")
    assert not bench.is_summary("[2/2] 2.13.0-cpu-devel: built in 884 s")
    assert not bench.is_summary("built   884 s  torchimages/pytorch:2.13.0-cpu-devel    1.44 GB  169 s  712 s")


@pytest.mark.parametrize("result", ["failed", "interrupted", "None", "passed"])
def test_a_job_whose_image_failed_gets_no_ratio_verdict_and_exit_1(result: str) -> None:
    """A job that fails early looks fast: 'within the target' for it would be a false figure (outside review)."""
    images = [
        bench.ImagePhases("2.11.0-cuda13.0-cudnn9-runtime", "built", 300.0, 200.0, 100.0),
        bench.ImagePhases("2.11.0-cuda13.0-cudnn9-devel", result, 10.0, 5.0, None),
    ]
    text = bench.table(images, bare=2000.0, job=520.0, summarized=520.0)
    assert "ratio" not in text.splitlines()[-1].replace("no ratio verdict", "") and "within" not in text
    assert text.endswith(
        f"the main job did not build every image (2.11.0-cuda13.0-cudnn9-devel ({result})): "
        "no measure, no ratio verdict"
    )
    assert bench.table(images, bare=None, job=520.0, summarized=520.0).endswith("no ratio verdict")
    assert bench.exit_status(0, images, 520.0) == 1 and bench.exit_status(2, images, 520.0) == 2
    assert bench.exit_status(0, images[:1], 520.0) == 0 and bench.exit_status(0, [], 5.0) == 1
    assert bench.table([], bare=200.0, job=5.0, summarized=5.0).endswith(
        "the main job did not build every image (no image in the report): no measure, no ratio verdict"
    )


def test_an_image_skipped_as_up_to_date_makes_the_run_no_measurement() -> None:
    """The bench builds from a clean engine (or with --no-cache): an image skipped was not built, and a job that
    built nothing must not read "within the target" (outside attack, finding 11)."""
    images = [
        bench.ImagePhases("2.11.0-cpu-runtime", "built", 300.0, 200.0, 100.0),
        bench.ImagePhases("2.11.0-cpu-devel", "skipped", 1.0, None, None),
    ]
    text = bench.table(images, bare=200.0, job=40.0, summarized=40.0)
    assert text.endswith(
        "the main job did not build every image (2.11.0-cpu-devel (skipped: up to date, nothing built)): "
        "no measure, no ratio verdict"
    )
    assert "within" not in text and bench.exit_status(0, images, 40.0) == 1
    assert bench.exit_status(0, images[:1], 40.0) == 0


def test_a_clean_engine_that_could_not_remove_an_image_or_prune_says_so() -> None:
    rm = ["docker", "image", "rm", "--force", "torchimages/pytorch:2.11.0-cpu-runtime"]
    prune = ["docker", "builder", "prune", "--all", "--force"]
    assert bench.cleaning_problems([(rm, 0, ""), (prune, 0, "")]) == []
    not_there = "Error response from daemon: No such image: torchimages/pytorch:2.11.0-cpu-runtime"
    assert bench.cleaning_problems([(rm, 1, not_there)]) == []  # nothing to remove is no fault
    in_use = "Error response from daemon: conflict: unable to remove repository reference (must force) - container\n"
    assert bench.cleaning_problems([(rm, 1, in_use), (prune, 1, ""), (prune, 0, "")]) == [
        "docker image rm --force torchimages/pytorch:2.11.0-cpu-runtime: " + in_use.strip(),
        "docker builder prune --all --force: exit 1",
    ]


# The fourth outside attack, finding 14: an image's own output may print a line shaped like the summary, and a
# missed target must not exit 0
RUNTIME_BUILT = bench.ImagePhases("2.11.0-cuda13.0-cudnn9-runtime", "built", 300.0, 200.0, 90.0)
DEVEL_BUILT = bench.ImagePhases("2.11.0-cuda13.0-cudnn9-devel", "built", 100.0, 70.0, 30.0)


def test_the_summary_taken_is_the_last_and_agrees_with_the_report() -> None:
    """A RUN step's output (`echo '2 built, 0 skipped, 0 failed'`) before build.py's own summary is not it."""
    images = [RUNTIME_BUILT, DEVEL_BUILT]
    seen = [(12.0, "2 built, 0 skipped, 0 failed\n"), (400.0, "2 built, 0 skipped, 0 failed\n")]
    assert bench.summary_seconds(seen, images) == 400.0
    assert bench.summary_seconds([(12.0, "9 built, 0 skipped, 0 failed\n"), *seen[1:]], images) == 400.0
    assert bench.summary_seconds([(400.0, "1 built, 1 skipped, 0 failed\n")], images) is None  # not the report's
    assert bench.summary_seconds([(400.0, "2 built, 0 skipped, 0 failed, 1 interrupted\n")], images) is None
    assert bench.summary_seconds([], images) is None
    failed = [RUNTIME_BUILT, bench.ImagePhases("x-devel", "interrupted", 1.0, None, None)]
    assert bench.summary_seconds([(5.0, "1 built, 0 skipped, 0 failed, 1 interrupted\n")], failed) == 5.0


def test_a_line_shaped_like_the_summary_that_is_not_the_report_s_is_no_summary() -> None:
    """Only an image's line looked like a summary (the job's own is missing or disagrees): no ratio verdict."""
    images = [RUNTIME_BUILT]
    seen = [(12.0, "1 built, 0 skipped, 0 failed\n"), (20.0, "3 built, 0 skipped, 0 failed")]
    summarized = bench.summary_seconds(seen, images)
    assert summarized is None
    text = bench.table(images, bare=2000.0, job=500.0, summarized=summarized)
    assert "within" not in text and text.endswith("no ratio verdict")
    assert bench.exit_status(0, images, summarized) == 1


def test_a_missed_target_is_said_and_exits_1() -> None:
    images = [RUNTIME_BUILT, DEVEL_BUILT]
    assert bench.missed_targets(images, bare=200.0, summarized=400.0) == []
    assert bench.exit_status(0, images, 400.0, bench.missed_targets(images, 200.0, 400.0)) == 0
    over = bench.missed_targets(images, bare=200.0, summarized=401.0)
    assert over == ["the main job / bare install ratio: 2.00 (401 s / 200 s), over the target of 2"]
    assert bench.exit_status(0, images, 401.0, over) == 1
    heavy = bench.ImagePhases("2.11.0-cuda13.0-cudnn9-devel", "built", 100.0, 60.0, 40.0)
    checks = bench.missed_targets([RUNTIME_BUILT, heavy], bare=200.0, summarized=300.0)
    assert checks == ["2.11.0-cuda13.0-cudnn9-devel: the checks took 40% of its time, over the target of a third"]
    assert bench.exit_status(0, [RUNTIME_BUILT, heavy], 300.0, checks) == 1
    assert bench.exit_status(3, [RUNTIME_BUILT, heavy], 300.0, checks) == 3
    # no bare install measured: no ratio, so no ratio target missed (the table says so); the checks' still judged
    assert bench.missed_targets(images, bare=None, summarized=9000.0) == []
    assert bench.missed_targets([heavy], bare=None, summarized=None) == checks


# The fifth outside attack, finding 9: build.py's stdout is a pipe to the bench, so Python buffers it; the summary
# line would arrive at build.py's exit, after the --report work, and that work would be timed as the main job's
UNSET = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


@pytest.mark.parametrize("given", [{}, {"PYTHONUNBUFFERED": ""}, {"PYTHONUNBUFFERED": "0"}, {"HOME": "/h"}])
def test_the_main_job_runs_unbuffered(given: dict[str, str]) -> None:
    env = bench.job_environment(given)
    assert env["PYTHONUNBUFFERED"] == "1" and {k: v for k, v in env.items() if k != "PYTHONUNBUFFERED"} == {
        k: v for k, v in given.items() if k != "PYTHONUNBUFFERED"
    }


def test_the_summary_line_is_read_when_printed_not_at_the_job_s_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child that prints the summary (a plain print, as build.py does) and then works for 5 s: the bench reads
    the line at once, in a shell that does not set PYTHONUNBUFFERED (a user's)."""
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    child = "import time; print('1 built, 0 skipped, 0 failed'); time.sleep(5)"
    start = time.perf_counter()
    with bench.start_job([sys.executable, "-c", child], UNSET) as job:
        assert job.stdout is not None
        line = job.stdout.readline()
        seen = time.perf_counter() - start
        job.kill()
    assert line == "1 built, 0 skipped, 0 failed\n" and seen < 3, seen
