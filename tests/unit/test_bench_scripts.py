"""Every bench script (bench/*.py with a `__main__` block) on its command line (issue 42): a bad option or value is
one line and exit 2, never a traceback; SIGINT from its first instruction on (bench_cli.early) is one line and
exit 130, whether it lands while the script's modules load or in main.

Each script runs for real with `--help`, its standard output a pipe filled beforehand: it cannot end before the
signal (its help waits on the pipe, in main), so every delay lands somewhere in the script, never after it."""

from __future__ import annotations

import ast
import importlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeEngine
from tests.unit.conftest import ROOT
from torchimages import engine as engine_package
from torchimages.engine import EngineError, ImageInfo

SCRIPTS = sorted(p.name for p in (ROOT / "bench").glob("*.py") if 'if __name__ == "__main__":' in p.read_text())
# Values each script refuses before it does anything (no engine, no build, no file written).
BAD_VALUES = {
    "bootstrap.py": [["nope-os"]],
    "build_vs_install.py": [
        ["no-such-tag"],
        ["*"],  # several combinations: one combination's images only
        ["--skip-install", "--skip-build"],
        ["--uv", "/nonexistent/uv"],
        ["--matrix", "/nonexistent/matrix.yaml"],
    ],
    "cache.py": [["--entry", "["], ["--entry", "just text"]],
    "default_matrix.py": [["no-such-tag"], ["--matrix", "/nonexistent/matrix.yaml"], ["--matrix", "/dev/null"]],
    "compression.py": [["UPPER/..x"]],
    "image_build.py": [["--combination", "no-such-tag"], ["--ca-cert", "/nonexistent/ca.pem"]],
    "jobs.py": [["--jobs", "0"], ["--jobs", "x"]],
    "layer_equality.py": [["--old"]],
    # an image named by no byte of UTF-8; an image where no engine answers (environment(): DOCKER_HOST at nothing)
    "layer_scan.py": [["--limit", "-1"], ["--runs", "0"], ["\udcff"], ["a b"], ["nosuch/img:1"]],
    "mutants.py": [["--jobs", "0"], ["--timeout", "nan"], ["--timeout", "-1"], ["--only", "no-such-row"]],
    "plan_render.py": [["--repeat", "0"], ["--combinations", "x"], ["--repeat", "9" * 5000]],
    "search_marks.py": [
        ["--runs", "0"],
        ["--binary-mb", "-1"],
        ["--text-mb", "x"],
        ["--text", "/nonexistent/a.py"],
        ["--text", "/dev/zero"],
    ],
    "pull.py": [["--runs", "0"], ["--registry", "example.com:5000"], [" "], ["\udcff"], ["a\x1b[2J"], ["nosuch/img:1"]],
}
SIGTERM_CAUGHT = 1 << (signal.SIGTERM - 1)  # in /proc/PID/status SigCgt: bench_cli.early() has run


def environment() -> dict[str, str]:
    """No engine answers (nothing a script could reach by mistake), and no setting of this machine."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHIMAGES_", "DOCKER_"))}
    return {**keep, "DOCKER_HOST": "unix:///nonexistent/docker.sock", "PYTHONUNBUFFERED": "1"}


def heeding() -> None:
    """In the child: SIGINT and SIGTERM as a terminal's shell starts a command (the runner may ignore them)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def refused(script: str, argv: list[str]) -> str:
    done = subprocess.run(
        [sys.executable, f"bench/{script}", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=environment(),
        timeout=120,
        preexec_fn=heeding,
    )
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(f"{script}: error: "), done.stderr
    return done.stderr


def test_every_script_is_found() -> None:
    assert set(SCRIPTS) == set(BAD_VALUES), SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_bad_option_is_one_line_and_exit_2(script: str) -> None:
    err = refused(script, ["--no-such-option\x1b[2J\x07"])
    # layer_equality.py hands options it does not know to `build.py build`: its required ones are missing first
    if script == "layer_equality.py":
        assert "are required: --old, tags" in err, err
    else:  # the option is echoed with its control characters escaped: the terminal gets no escape sequence
        assert "unrecognized arguments: --no-such-option\\x1b[2J\\x07 (--help" in err, err
    assert "\x1b" not in err and "\x07" not in err, err


@pytest.mark.parametrize(("script", "argv"), [(s, argv) for s, cases in BAD_VALUES.items() for argv in cases])
def test_a_bad_value_is_one_line_and_exit_2(script: str, argv: list[str]) -> None:
    refused(script, argv)


def caught(pid: int) -> int:
    """The signals a process catches (SigCgt), 0 when it has ended."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)


def waiting_in(pid: int) -> str:
    """The kernel function a process sleeps in (/proc/PID/wchan): `pipe_write` while it waits on a full pipe."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return ""


@pytest.mark.skipif(not Path("/proc/self/wchan").exists(), reason="needs /proc")
@pytest.mark.parametrize("delay", [0.0, 0.1, None], ids=["first-instruction", "100ms-later", "in-main-writing-help"])
@pytest.mark.parametrize("script", SCRIPTS)
def test_sigint_from_the_first_instruction_is_one_line_and_130(script: str, delay: float | None) -> None:
    """SIGINT once bench_cli.early() has run, then after a delay, or (None) once main waits to write its help."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        while True:
            os.write(write_end, b"x" * 65536)
    except BlockingIOError:
        pass
    os.set_blocking(write_end, True)
    proc = subprocess.Popen(
        [sys.executable, f"bench/{script}", "--help"],
        cwd=ROOT,
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
        preexec_fn=heeding,
    )
    os.close(write_end)
    drained = threading.Thread(target=lambda: [None for _ in iter(lambda: os.read(read_end, 65536), b"")])
    try:
        deadline = time.monotonic() + 20
        while not caught(proc.pid) & SIGTERM_CAUGHT:
            assert proc.poll() is None, f"{script} ended before the signal: {proc.stderr.read() if proc.stderr else ''}"
            assert time.monotonic() < deadline, "bench_cli.early() never ran"
            time.sleep(0.001)
        if delay is None:
            while "pipe_write" not in waiting_in(proc.pid):
                assert proc.poll() is None and time.monotonic() < deadline + 40, "main never wrote its help"
                time.sleep(0.005)
        else:
            time.sleep(delay)
        assert proc.poll() is None, "the script ended before the signal (its help could not be written)"
        proc.send_signal(signal.SIGINT)
        drained.start()
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
        if drained.is_alive():
            drained.join(10)
        os.close(read_end)
    assert proc.returncode == 130, (proc.returncode, err)
    assert err == f"bench/{script}: stopped by SIGINT\n", err


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_script_heeds_signals_before_anything_else(script: str) -> None:
    """The first statements (after the docstring and `from __future__`): `import bench_cli`, then
    `bench_cli.early(__name__, "bench/NAME")`; its `__main__` block runs main through bench_cli.run."""
    tree = ast.parse((ROOT / "bench" / script).read_text())
    body = [node for node in tree.body[1:] if not isinstance(node, ast.ImportFrom) or node.module != "__future__"]
    assert ast.unparse(body[0]) == "import bench_cli", script
    assert ast.unparse(body[1]) == f"bench_cli.early(__name__, 'bench/{script}')", script
    assert f"sys.exit(bench_cli.run('bench/{script}', main))" in ast.unparse(body[-1]), script


@pytest.fixture
def handlers() -> Iterator[None]:
    """The test process's own SIGINT and SIGTERM handlers, put back afterwards."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@pytest.mark.usefixtures("handlers")
@pytest.mark.parametrize(("sig", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_early_says_one_line_and_exits(sig: signal.Signals, status: int, capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import bench_cli
    finally:
        sys.path.remove(str(ROOT / "bench"))
    before = signal.getsignal(sig)
    bench_cli.early("imported", "bench/x.py")  # a test imports the script: nothing changes
    assert signal.getsignal(sig) is before
    bench_cli.early("__main__", "bench/x.py")
    handler = signal.getsignal(sig)
    assert callable(handler) and handler is not before, "early() left the signal to Python's default"
    with pytest.raises(SystemExit) as stopped:  # called, not raised: a default SIGTERM would end the test run
        handler(sig, None)
    assert stopped.value.code == status
    assert capsys.readouterr().err == f"bench/x.py: stopped by {sig.name}\n"


def bench_module(name: str) -> Any:
    """A bench script imported as a module (bench/ scripts import their siblings by name)."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "bench"))


class Refusing(FakeEngine):
    """An engine that refuses a name, as DockerEngine says the SDK's APIError (its _failures)."""

    def inspect(self, reference: str) -> ImageInfo | None:
        raise EngineError(f"inspecting {reference} failed: 400 Client Error: invalid reference format")


@pytest.mark.parametrize(
    ("script", "argv"),
    [("pull", ["nosuch/img:1"]), ("layer_scan", ["held/img:1", "nosuch/img:1", "--no-baseline"])],
)
def test_an_image_the_engine_does_not_hold_is_one_line_and_exit_2(
    script: str, argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeEngine()
    fake.images["held/img:1"] = {}
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker=None: fake)
    with pytest.raises(SystemExit) as stopped:
        bench_module(script).main(argv)
    assert stopped.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"{script}.py: error: IMAGE 'nosuch/img:1': no such image on this engine\n", err
    assert not [c for c in fake.calls if c[0] not in ("inspect",)], "nothing but the look-up ran"


@pytest.mark.parametrize("script", ["pull", "layer_scan"])
def test_a_name_the_engine_refuses_is_one_line_and_exit_2(
    script: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker=None: Refusing())
    with pytest.raises(SystemExit) as stopped:
        bench_module(script).main(["some/img:1"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err == f"{script}.py: error: inspecting some/img:1 failed: 400 Client Error: invalid reference format\n"


def test_an_engines_words_are_one_escaped_line(capsys: pytest.CaptureFixture[str]) -> None:
    bench_cli = bench_module("bench_cli")
    with pytest.raises(SystemExit) as stopped:
        bench_cli.fail("x.py", "the engine says\n  a\x1b[2Jb\r\n")
    assert stopped.value.code == 2
    assert capsys.readouterr().err == "x.py: error: the engine says a\\x1b[2Jb\n"


@pytest.mark.parametrize(
    ("printed", "said"),
    [
        ('{"Type":"Images","Size":"1GB"}\n{"Type":"Build Cache","Size":"47.37GB","Reclaimable":"0B"}\n', "47.37GB"),
        ('{"Type":"Build Cache","Size":"0B","Reclaimable":"0B"}\n', ""),
        ("not json\n", ""),
        ('{"Type":"Build Cache","Size":"1\\u001b[2JGB"}\n', "1\\x1b[2JGB"),
    ],
)
def test_the_matrix_bench_says_the_build_cache_a_prune_left(
    printed: str, said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix = bench_module("default_matrix")
    answer = subprocess.CompletedProcess(["docker"], 0, printed, "")
    monkeypatch.setattr(matrix.subprocess, "run", lambda *args, **kwargs: answer)
    found = matrix.held_cache()
    assert (found.split(" of build cache")[0] if found else "") == said
