"""Progress: BuildKit's plain log read into stages and bytes fetched, the plain view's heartbeats (a fake
clock), the live view's redraws, the builder's events, and the summary table."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

import pytest

from tests import golden
from tests.fakes import FakeEngine
from tests.unit.building.test_builder import MATRIX, true_facts
from torchimages.building import builder, buildkit_log, renderers
from torchimages.building.builder import Builder
from torchimages.building.buildkit_log import LogState, read_line, stage_changes
from torchimages.building.outcome import Outcome, summary
from torchimages.building.progress import Event, Progress
from torchimages.building.renderers import LiveRenderer, PlainRenderer
from torchimages.building.requests import BuildOptions
from torchimages.engine import BuildRequest, ImageInfo
from torchimages.planning import plan

GOLDEN = golden.GOLDEN
# A real log: `build.py build --no-cache` of the CPU test combination's devel target (runtime's steps, then
# devel's), BuildKit 0.x through buildx with `--progress plain`; apt's long middle cut out.
CPU_DEVEL_LOG = (GOLDEN / "buildkit-plain-cpu-devel.log").read_text().splitlines()
# A real log of uv's venv: `build.py build --no-cache` of the CPU test combination's runtime target, 2026-12-01
# (Docker 26, BuildKit 0.13; uv 0.13.8, its cache warm but torch's find-links URL new); apt's middle cut out.
CPU_RUNTIME_UV_LOG = (GOLDEN / "buildkit-plain-cpu-runtime-uv.log").read_text().splitlines()


def changes(lines: Sequence[str]) -> list[str]:
    """Every change of (stage, detail) the lines make, as `stage: detail`."""
    state, seen = LogState(), list[str]()
    for line in lines:
        state = read_line(state, line)
        shown = f"{state.stage}: {state.detail}".rstrip()
        if state.stage and (not seen or seen[-1] != shown):
            seen.append(shown)
    return seen


def test_a_real_log_goes_through_os_venv_devel_and_export_with_the_bytes_fetched() -> None:
    assert stage_changes(CPU_DEVEL_LOG) == [
        ("os", ""),
        ("venv", "fetched apt 102 MB"),  # apt-get update's 15.8 MB and the packages' 86.0 MB
        ("devel", "fetched apt 102 MB, wheels 219 MB"),
        ("export", "fetched apt 113 MB, wheels 219 MB"),
    ]


def test_every_change_of_a_real_log_matches_the_golden_events() -> None:
    """Each wheel pip downloads is named while it downloads (its URL's name unquoted), then counted."""
    seen = changes(CPU_DEVEL_LOG)
    golden.check(GOLDEN / "buildkit-plain-cpu-devel.events.txt", "\n".join(seen) + "\n")
    torch = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert f"venv: fetched apt 102 MB; downloading {torch} (191.8 MB)" in seen


def test_a_real_uv_log_names_each_big_wheel_while_it_downloads_and_counts_it() -> None:
    seen = changes(CPU_RUNTIME_UV_LOG)
    golden.check(GOLDEN / "buildkit-plain-cpu-runtime-uv.events.txt", "\n".join(seen) + "\n")
    assert "venv: fetched apt 102 MB; downloading torch (182.9 MiB)" in seen
    assert "venv: fetched apt 102 MB, wheels 192 MB; downloading sympy (6.0 MiB), networkx (2.0 MiB)" in seen
    assert seen[-1] == "export: fetched apt 102 MB, wheels 217 MB"  # torch, sympy, networkx, numpy


def test_a_cuda_devel_target_running_beside_runtime_stays_behind_runtime() -> None:
    """A devel target FROM nvidia/cuda runs its apt step while runtime's pip steps run (BuildKit runs
    independent targets in parallel): the image is in venv until runtime's last step is done, then devel.
    The lines follow BuildKit's plain format; the interleaving is made up."""
    lines = [
        "#4 [runtime 1/4] FROM docker.io/library/ubuntu:24.04@sha256:0123",
        "#5 [devel 1/5] FROM docker.io/nvidia/cuda:13.0.0-devel-ubuntu24.04@sha256:4567",
        "#5 sha256:9e7a6c1d2b3f4e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a 1.26GB / 3.41GB 14.2s",
        "#4 DONE 0.9s",
        "#6 [runtime 2/4] RUN --mount=type=cache,target=/var/cache/apt,sharing=locked     --mount=type=cache,ta",
        "#6 DONE 20.1s",
        "#7 [runtime 3/4] RUN python3.12 -m venv /opt/venv",
        "#7 DONE 2.0s",
        "#8 [runtime 4/4] RUN --mount=type=cache,target=/home/torch/.cache/pip,uid=1000,gid=1000,sharing=locked",
        "#5 DONE 41.0s",
        "#9 [devel 2/5] RUN --mount=type=cache,target=/var/cache/apt,sharing=locked     --mount=type=cache,ta",
        "#8 3.021   Downloading http://127.0.0.1:8080/torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl (899.7 MB)",
        "#9 DONE 12.0s",
        "#8 5.110      ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ 401.2/899.7 MB 212.0 MB/s eta 0:00:03",
    ]
    state = LogState()
    for line in lines[:3]:
        state = read_line(state, line)
    assert (state.stage, state.detail) == ("os", "pulling a base layer: 1.26GB / 3.41GB")
    for line in lines[3:]:
        state = read_line(state, line)
    assert state.stage == "venv"
    assert state.detail == "downloading torch-2.9.1-cp312-cp312-manylinux_2_28_x86_64.whl (401.2/899.7 MB)"
    state = read_line(state, "#8 DONE 31.0s")  # runtime's last step: devel is all that runs
    assert (state.stage, state.detail) == ("devel", "fetched wheels 900 MB")
    state = read_line(state, "#10 [tools 1/2] RUN apt-get install -y git")
    assert state.stage == "devel", "a stage never goes back"


def test_uvs_parallel_downloads_are_each_named_while_under_way_and_counted_once_done() -> None:
    """uv names a big download as it starts and as it ends, several at once and in any order, sizes in binary
    units; a small one it does not name. The lines are uv 0.13's as BuildKit logs them."""
    lines = [
        "#9 [runtime 5/8] RUN --mount=type=cache,target=/home/torch/.cache/uv,uid=1000,gid=1000     --mount=typ",
        "#9 6.197 Resolved 10 packages in 448ms",
        "#9 6.20 Downloading torch (182.9MiB)",
        "#9 6.21 Downloading sympy (6.0MiB)",
    ]
    state = LogState()
    for line in lines:
        state = read_line(state, line)
    assert (state.stage, state.detail) == ("venv", "downloading torch (182.9 MiB), sympy (6.0 MiB)")
    state = read_line(state, "#9 7.40  Downloaded sympy")
    assert state.detail == "fetched wheels 6.29 MB; downloading torch (182.9 MiB)"
    for line in ("#9 14.14  Downloaded torch", "#9 14.15 Prepared 10 packages in 7.96s"):
        state = read_line(state, line)
    assert state.detail == "fetched wheels 198 MB"  # 182.9 MiB + 6.0 MiB, in decimal units
    state = read_line(read_line(state, "#9 14.2 Downloading numpy (16.1MiB)"), "#9 DONE 34.0s")
    assert state.detail == "fetched wheels 215 MB", "a step that ends ends its downloads"


def test_lines_that_say_nothing_of_progress_change_nothing() -> None:
    state = read_line(LogState(), "#2 [runtime 1/8] FROM docker.io/torchimages/bootstrap-debian:12")
    digest = "#2 sha256:d7fc340953320bc2408e548a1e258a35bef6275aba6ea6a65d3465258833d4fb"
    for line in (
        "",
        digest,
        "#3 [internal] load build definition from Dockerfile",
        "#3 transferring dockerfile: 8.40kB done",
    ):
        assert read_line(state, line) is state
    assert read_line(state, "#2 [runtime 1/8] FROM docker.io/torchimages/bootstrap-debian:12") is state


def test_times_are_shown_short() -> None:
    assert [renderers.format_seconds(s) for s in (0.4, 59.9, 187, 3720)] == ["0 s", "59 s", "3m07s", "1h02m"]


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_plain_view_prints_each_stage_once_and_a_heartbeat_when_an_image_was_quiet() -> None:
    clock, lines = Clock(), list[str]()
    shown = Progress(PlainRenderer(lines.append, heartbeat_s=60), total=2, clock=clock)
    shown.begin("2.13.0-cpu-runtime")
    shown.update("2.13.0-cpu-runtime", "os")
    clock.now += 1
    shown.update("2.13.0-cpu-runtime", "os", "fetched apt 15.8 MB")  # a detail alone prints nothing
    clock.now += 30
    shown.begin("2.13.0-cpu-devel")
    shown.tick()
    clock.now += 29
    shown.tick()  # runtime: 60 s since its last line; devel: 29 s since it began
    shown.tick()
    clock.now += 10
    shown.update("2.13.0-cpu-runtime", "venv", "fetched apt 102 MB; downloading torch-2.13.0+cpu.whl (191.8 MB)")
    clock.now += 21
    shown.tick()  # devel: 60 s without a line
    clock.now += 39
    shown.tick()  # runtime: 60 s after its stage change
    shown.finish("2.13.0-cpu-runtime", "2.13.0-cpu-runtime: built in 130 s")
    clock.now += 120
    shown.tick()
    assert lines == [
        "2.13.0-cpu-runtime: os (0 s)",
        "2.13.0-cpu-runtime: still os (1m00s); fetched apt 15.8 MB",
        "2.13.0-cpu-runtime: venv (1m10s); fetched apt 102 MB; downloading torch-2.13.0+cpu.whl (191.8 MB)",
        "2.13.0-cpu-devel: still starting (1m00s)",
        "2.13.0-cpu-runtime: still venv (2m10s); fetched apt 102 MB; downloading torch-2.13.0+cpu.whl (191.8 MB)",
        "[1/2] 2.13.0-cpu-runtime: built in 130 s",
        "2.13.0-cpu-devel: still starting (3m39s)",
    ]


def test_the_progress_thread_ticks_on_its_own() -> None:
    lines = list[str]()
    with Progress(PlainRenderer(lines.append, heartbeat_s=0.1), total=1) as shown:
        shown.begin("img", "smoke")
        deadline = time.monotonic() + 30  # no test thread of ours calls tick: the heartbeat is the thread's
        while len(lines) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert lines[0] == "img: smoke (0 s)" and re.fullmatch(r"img: still smoke \(\d+ s\)", lines[1]), lines


def screen(written: str) -> list[str]:
    """What a terminal shows after `written`: lines, with the cursor moves and erases rich's live display
    uses applied (carriage return, erase line, cursor up, cursor shown/hidden); trailing blanks dropped."""
    lines, row, column = [""], 0, 0
    for token in re.findall(r"\x1b\[\??[\d;]*[A-Za-z]|\r|\n|[^\x1b\r\n]+", written):
        if token == "\n":
            row, column = row + 1, 0
            lines += [""] * (row + 1 - len(lines))
        elif token == "\r":
            column = 0
        elif token == "\x1b[2K":
            lines[row] = ""
        elif re.fullmatch(r"\x1b\[\d*A", token):
            row = max(row - int(token[2:-1] or 1), 0)
        elif token.startswith("\x1b["):
            assert token in ("\x1b[?25l", "\x1b[?25h"), f"unexpected escape {token!r}"
        else:
            line = lines[row].ljust(column)
            lines[row] = line[:column] + token + line[column + len(token) :]
            column += len(token)
    shown = [line.rstrip() for line in lines]
    while shown and not shown[-1]:
        shown.pop()
    return shown


def test_the_live_view_redraws_one_row_per_running_image_below_lasting_lines() -> None:
    stream = io.StringIO()
    live = LiveRenderer(stream, columns=lambda: 60)
    first = Event("2.13.0-cpu-runtime", "venv", 75.0, "fetched wheels 192 MB; downloading numpy (16.1 MiB)")
    second = Event("2.13.0-cpu-devel", "os", 3.0)
    live.update(first, [first, second])
    top, bottom = screen(stream.getvalue())
    assert top.startswith("2.13.0-cpu-runtime  venv         1m15s  fetched wheels 19") and top.endswith("…")
    assert len(top) <= 60, "the detail is cut to the terminal's 60 columns"
    assert bottom == "2.13.0-cpu-devel    os             3 s"
    drawn = stream.tell()
    live.tick([first, second])
    assert stream.tell() == drawn, "nothing changed: nothing is drawn"
    live.line("[1/2] 2.13.0-cpu-runtime: built in 80 s", [second])  # the finished image's row goes
    assert screen(stream.getvalue()) == [
        "[1/2] 2.13.0-cpu-runtime: built in 80 s",
        "2.13.0-cpu-devel  os             3 s",
    ]
    live.tick([dataclasses.replace(second, elapsed=4.0)])
    assert screen(stream.getvalue())[-1] == "2.13.0-cpu-devel  os             4 s"
    live.close()
    assert screen(stream.getvalue()) == ["[1/2] 2.13.0-cpu-runtime: built in 80 s"], "the rows go, the line stays"
    assert stream.getvalue().count("built in 80 s") == 1 and stream.getvalue().endswith("\x1b[2K")
    assert all(len(line) <= 60 for line in screen(stream.getvalue()))


def test_a_live_view_that_never_drew_leaves_nothing() -> None:
    stream = io.StringIO()
    LiveRenderer(stream).close()  # a usage error before the build: no cursor hidden, nothing written
    assert stream.getvalue() == ""


def test_validate_and_list_never_import_rich(write_matrix: Callable[[str], Path]) -> None:
    """rich is loaded where a view is drawn (the live view, the build summary), not with the CLI."""
    path = write_matrix(MATRIX)
    script = (
        "import sys\nfrom torchimages.cli import main\n"
        f"for args in (['validate'], ['list'], ['plan', '2.7.1']):\n"
        f"    assert main([*args, '--matrix', {str(path)!r}]) == 0, args\n"
        "assert not [m for m in sys.modules if m == 'rich' or m.startswith('rich.')], 'rich was imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_auto_is_plain_unless_the_output_is_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert isinstance(renderers.renderer("auto", io.StringIO()), PlainRenderer)
    assert isinstance(renderers.renderer("tty", io.StringIO()), LiveRenderer)
    assert isinstance(renderers.renderer("plain", Terminal()), PlainRenderer)
    assert isinstance(renderers.renderer("auto", Terminal()), LiveRenderer)


def test_following_a_file_reads_every_line_written_while_the_block_ran(tmp_path: Path) -> None:
    path, seen = tmp_path / "build.log", list[str]()
    with path.open("wb") as handle, buildkit_log.following(path, seen.append, poll_s=0.01):
        for n in range(50):
            handle.write(f"#1 0.{n} line {n}\n#1 0.{n} part".encode())
            handle.flush()
            handle.write(b"ial\n")
        handle.write(b"#1 DONE 0.5s")  # no newline: the build ended mid-line
        handle.flush()
    assert seen == [text for n in range(50) for text in (f"#1 0.{n} line {n}", f"#1 0.{n} partial")] + ["#1 DONE 0.5s"]


class LoggingEngine(FakeEngine):
    """A fake engine whose builds write a real BuildKit log, a line at a time."""

    def build(self, request: BuildRequest, log: IO[bytes], cancelled: threading.Event | None = None) -> int:
        for line in CPU_DEVEL_LOG:
            log.write(line.encode() + b"\n")
            log.flush()
        time.sleep(0.3)  # the follower polls: the lines are read while the build still runs
        return super().build(request, log, cancelled)

    def inspect(self, reference: str) -> ImageInfo | None:
        found = super().inspect(reference)
        return dataclasses.replace(found, size=1_410_000_000) if found else None


class Recorder:
    """A renderer that keeps what it is told."""

    tick_s = 0.05

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.lines: list[str] = []

    def line(self, text: str, running: Sequence[Event]) -> None:
        self.lines.append(text)

    def update(self, event: Event, running: Sequence[Event]) -> None:
        self.events.append(event)

    def tick(self, running: Sequence[Event]) -> None:
        pass

    def close(self) -> None:
        pass


def test_the_builder_reports_each_image_through_every_stage_and_measures_it(
    write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    selection = plan.select(plan.load(write_matrix(MATRIX)), ["2.7.1-cuda11.8"])
    engine = LoggingEngine(true_facts(selection[0].combination))
    recorder = Recorder()
    passing: builder.SmokeGate = lambda combination, image, reference, facts, start: []  # noqa: E731
    options = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs", jobs=2)
    outcomes = Builder(engine, options, passing, renderer=recorder).build(selection)
    assert [o.status for o in outcomes] == ["built", "built"]
    for image in selection[0].images:
        stages = [e.stage for e in recorder.events if e.image == image.tag and e.stage != "waits for runtime"]
        assert list(dict.fromkeys(stages)) == ["os", "venv", "devel", "export", "verify", "smoke"], stages
    assert any("wheels 219 MB" in e.detail for e in recorder.events)
    assert recorder.lines[-1].startswith("[2/2] 2.7.1-cuda11.8-cudnn9-")
    for outcome in outcomes:
        assert outcome.build_seconds is not None and outcome.build_seconds >= 0.3
        assert outcome.test_seconds is not None and outcome.size_bytes == 1_410_000_000


def test_the_summary_is_a_table_of_result_time_image_size_build_and_test(
    write_matrix: Callable[[str], Path],
) -> None:
    (selected,) = plan.select(plan.load(write_matrix(MATRIX)), ["2.7.0-cuda11.8"])
    combination, (devel, runtime) = selected.combination, selected.images
    built = Outcome(combination, runtime, "built", 106.4, "verified", 92.2, 14.0, 1_436_000_000)
    log = "#9 0.48 ERROR: No matching distribution found for numpy==0.0.1\n#9 ERROR: process did not complete\n"
    failed = Outcome(combination, devel, "failed", 3.0, f"build failed (exit 1); last lines:\n{log}", 2.6)
    skipped = Outcome(combination, runtime, "skipped", 0.0, "up to date", size_bytes=1_436_000_000)
    golden.check(GOLDEN / "summary.txt", summary([built, failed, skipped]) + "\n")


def test_a_bad_progress_setting_is_refused_before_anything_runs(
    cli: Callable[..., tuple[int, str, str]], write_matrix: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix = str(write_matrix(MATRIX))
    with pytest.raises(SystemExit) as refused:
        cli("build", "--matrix", matrix, "--progress", "fancy", "*")
    assert refused.value.code == 2
    monkeypatch.setenv("TORCHIMAGES_HEARTBEAT_S", "soon")
    code, _, err = cli("build", "--matrix", matrix, "--progress", "plain", "*")
    assert code == 2 and "TORCHIMAGES_HEARTBEAT_S='soon' must be a number of seconds above 0" in err
    monkeypatch.delenv("TORCHIMAGES_HEARTBEAT_S")
    monkeypatch.setenv("TORCHIMAGES_PROGRESS", "fancy")
    code, _, err = cli("build", "--matrix", matrix, "*")
    assert code == 2 and "TORCHIMAGES_PROGRESS='fancy' must be one of auto, plain, tty" in err
    assert json.dumps(renderers.MODES) == '["auto", "plain", "tty"]'
