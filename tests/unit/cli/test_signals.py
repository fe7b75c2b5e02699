"""SIGINT and SIGTERM in every command (issue 18): real subprocesses of the real CLI, each caught while it works,
say one line, exit 130 or 143, leave no traceback and no partial or temporary file. And a cancel started with
SIGINT ignored (nohup, a CI wrapper, `cmd &`) stops its process group at once.

How a command is caught mid-work, without sleeping on a guess:
- one that talks to an engine (lock, test --image, doctor) or a registry (lock --bases) gets one that never
  answers: a socket of the test's, which says when the command has connected;
- one that only reads and writes files (validate, list, plan, render, bake) pauses where it opens a chosen file:
  an audit hook (sys.addaudithook, nothing of the tool replaced) says so, and waits half a second for the signal.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from torchimages import stopping
from torchimages.engine import process

MATRIX = "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8'}\n    - {torch: 2.7.0, cuda: '12.8'}\n"
PURE_ARGS = {"plan": ["2.7.0"], "bake": ["--output", "bake.json"]}
SIGNALS = [(signal.SIGINT, 130), (signal.SIGTERM, 143)]
MODULE = "python -m torchimages"
WAIT_S = 30  # how long the test waits for the command to reach its pause (a busy machine's slack)

# `python -c` this, then the command's arguments: the CLI, pausing at the first open of a path that holds
# $PAUSE_AT, once it has said so by creating $PAUSE_READY.
LAUNCHER = textwrap.dedent(
    """
    import os, sys, time

    pause_at, ready, paused = os.environ["PAUSE_AT"], os.environ["PAUSE_READY"], []

    def hook(event, args):
        if event != "open" or paused or not isinstance(args[0], (str, bytes, os.PathLike)):
            return
        if pause_at in os.fsdecode(args[0]):
            paused.append(True)
            os.close(os.open(ready, os.O_CREAT | os.O_WRONLY))
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline:
                time.sleep(0.02)

    sys.addaudithook(hook)
    from torchimages.cli import main
    sys.exit(main(sys.argv[1:], prog="torchimages"))
    """
)


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHIMAGES_", "DOCKER"))}
    return {**env, "PYTHONDONTWRITEBYTECODE": "1", **extra}


def finish(proc: subprocess.Popen[bytes], sig: signal.Signals) -> tuple[int, str, float]:
    """Send `sig`; the exit status, standard error, and how long the command took to exit."""
    sent = time.monotonic()
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still running {WAIT_S} s after {sig.name}")
    return proc.returncode, err.decode(), time.monotonic() - sent


def wait_until(what: str, done: threading.Event | Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not (done.is_set() if isinstance(done, threading.Event) else done.exists()):
        if proc.poll() is not None:
            pytest.fail(f"the command ended (exit {proc.returncode}) before {what}: {proc.stderr.read()!r}")  # type: ignore[union-attr]
        assert time.monotonic() < deadline, f"no {what} after {WAIT_S} s"
        time.sleep(0.01)


def said_once(err: str, command: str, sig: signal.Signals, prog: str = "torchimages") -> None:
    """One line says what stopped and that nothing was left half-written; no traceback."""
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    lines = [line for line in err.splitlines() if "stopped by" in line]
    assert lines == [f"{prog} {command}: stopped by {sig.name}; nothing was left half-written"], err


def leftovers(folder: Path) -> list[str]:
    """Temporary files the tool's writes may leave (`.NAME.*.tmp`, pytest's JUnit beside its file)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.name.endswith(".tmp"))


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "matrix.yaml").write_text(MATRIX)
    return folder


def paused(work: Path, pause_at: str, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
    ready = work.parent / "paused"
    env = environment(work, PAUSE_AT=pause_at, PAUSE_READY=str(ready))
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, *args], cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    return proc, ready


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
@pytest.mark.parametrize("command", ["validate", "list", "plan", "render", "bake"])
def test_a_signal_while_the_matrix_is_read_stops_the_command_and_writes_nothing(
    work: Path, command: str, sig: signal.Signals, status: int
) -> None:
    before = snapshot(work)
    proc, ready = paused(work, "matrix.yaml", command, *PURE_ARGS.get(command, []))
    wait_until("the matrix read", ready, proc)
    code, err, took = finish(proc, sig)
    assert code == status, err
    said_once(err, command, sig)
    assert snapshot(work) == before, "a stopped command wrote something"
    assert took < 5, f"{took:.1f} s to stop"


def rendered(tmp_path: Path) -> dict[str, bytes]:
    """What a render that nothing stops writes (the Dockerfiles, whole)."""
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "matrix.yaml").write_text(MATRIX)
    subprocess.run([sys.executable, "-m", "torchimages", "render"], cwd=clean, env=environment(clean), check=True)
    return snapshot(clean / "images")


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_a_signal_while_a_dockerfile_is_written_leaves_it_whole_and_no_temporary_file(
    work: Path, tmp_path: Path, sig: signal.Signals, status: int
) -> None:
    whole = rendered(tmp_path)
    proc, ready = paused(work, "/.Dockerfile.", "render")  # the temporary file beside the first Dockerfile
    wait_until("the first Dockerfile's write", ready, proc)
    code, err, _ = finish(proc, sig)
    assert code == status, err
    said_once(err, "render", sig)
    written = snapshot(work / "images")
    assert len(written) == 1, f"the signal waits for the file being written, then stops: {sorted(written)}"
    assert written.items() <= whole.items(), "a Dockerfile was left half-written"
    assert leftovers(work) == []


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_a_signal_while_the_bake_file_is_written_leaves_it_whole(work: Path, sig: signal.Signals, status: int) -> None:
    proc, ready = paused(work, "/.bake.json.", "bake", "--output", "bake.json")
    wait_until("the bake file's write", ready, proc)
    code, err, _ = finish(proc, sig)
    assert code == status, err
    said_once(err, "bake", sig)
    assert len(json.loads((work / "bake.json").read_text())["target"]) == 4
    assert leftovers(work) == []


class Silent:
    """A server that accepts connections and never answers (an engine or registry that hangs); `connected`
    is set once the command has connected."""

    def __init__(self, listener: socket.socket) -> None:
        self.listener = listener
        self.connected = threading.Event()
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.held.append(connection)
            self.connected.set()

    def close(self) -> None:
        self.listener.close()
        for connection in self.held:
            connection.close()


@pytest.fixture
def engine_socket(tmp_path: Path) -> Iterator[tuple[str, Silent]]:
    path = tmp_path / "engine.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    server = Silent(listener)
    yield f"unix://{path}", server
    server.close()


@pytest.fixture
def registry_socket() -> Iterator[tuple[str, Silent]]:
    listener = socket.create_server(("127.0.0.1", 0))
    server = Silent(listener)
    yield f"127.0.0.1:{listener.getsockname()[1]}", server
    server.close()


ENGINE_COMMANDS = {
    "lock": ["lock", "2.7.0-cuda11.8"],
    "test": ["test", "--image", "example:1"],
    "doctor": ["doctor", "2.7.0-cuda11.8"],
}


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
@pytest.mark.parametrize("command", sorted(ENGINE_COMMANDS))
def test_a_signal_while_the_engine_is_asked_stops_the_command(
    work: Path, engine_socket: tuple[str, Silent], command: str, sig: signal.Signals, status: int
) -> None:
    address, engine = engine_socket
    before = snapshot(work)
    proc = subprocess.Popen(
        [sys.executable, "-m", "torchimages", *ENGINE_COMMANDS[command]],
        cwd=work,
        env=environment(work, DOCKER_HOST=address),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_until("a connection to the engine", engine.connected, proc)
    code, err, took = finish(proc, sig)
    assert code == status, err
    said_once(err, command, sig, MODULE)
    assert snapshot(work) == before
    assert took < 5, f"{took:.1f} s to stop"


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
def test_a_signal_while_registries_are_asked_stops_lock_bases_at_once_without_a_lock(
    work: Path, registry_socket: tuple[str, Silent], sig: signal.Signals, status: int
) -> None:
    address, registry = registry_socket
    before = snapshot(work)
    proc = subprocess.Popen(
        [sys.executable, "-m", "torchimages", "lock", "--bases", "--base-registry", address],
        cwd=work,
        env=environment(work),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_until("a registry query", registry.connected, proc)
    code, err, took = finish(proc, sig)
    assert code == status, err
    said_once(err, "lock", sig, MODULE)
    assert snapshot(work) == before, "a stopped lock wrote something"
    assert took < 5, f"{took:.1f} s to stop: it waited for the registry's answer"


def test_a_signal_that_lands_on_a_worker_thread_stops_the_main_thread_waiting_on_it() -> None:
    """A process-directed signal goes to any thread: CI once gave lock --bases' SIGTERM to a registry query's
    thread, and the main thread, waiting on that query's answer, stopped only 10 s later. Here the signal is sent
    to the worker alone (pthread_kill): the main thread's wait still ends at once."""
    previous = stopping.install()
    release = threading.Event()
    started = threading.Event()

    def work() -> str:
        started.set()
        release.wait(10)
        return "answered"

    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        future = pool.submit(work)
        started.wait(5)
        worker = next(
            t for t in threading.enumerate() if t is not threading.main_thread() and t.name.startswith("ThreadPool")
        )
        assert worker.ident is not None
        threading.Timer(0.2, signal.pthread_kill, (worker.ident, signal.SIGTERM)).start()
        began = time.monotonic()
        with pytest.raises(stopping.Stopped) as stopped:
            stopping.results([future])
        took = time.monotonic() - began
    finally:
        release.set()
        pool.shutdown(wait=True)
        stopping.restore(previous)
    assert stopped.value.signum == signal.SIGTERM
    assert took < 3, f"{took:.1f} s: the main thread waited for the worker's answer"


def test_results_of_a_generator_of_submits_run_at_once() -> None:
    """A generator of `pool.submit` calls (as lock --bases and the build pass) is submitted whole before any wait:
    four half-second jobs on four workers take half a second, not two."""
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        began = time.monotonic()
        assert stopping.results(pool.submit(time.sleep, 0.5) for _ in range(4)) == [None] * 4
        took = time.monotonic() - began
    assert took < 1.5, f"{took:.1f} s: the jobs ran one after another"


def test_results_come_in_the_order_of_their_futures() -> None:
    def late() -> str:
        time.sleep(0.3)
        return "slow"

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        slow = pool.submit(late)
        fast = pool.submit(lambda: "fast")
        assert stopping.results([slow, fast]) == ["slow", "fast"]


def test_a_signal_in_a_held_section_waits_for_its_end() -> None:
    previous = stopping.install()
    went_on = []
    try:
        with pytest.raises(stopping.Stopped) as stopped, stopping.held():
            signal.raise_signal(signal.SIGTERM)
            went_on.append(True)
    finally:
        stopping.restore(previous)
    assert went_on == [True] and stopped.value.exit_status == 143


def test_a_signal_ignored_at_start_is_skipped_by_the_escalation(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [sig for sig, _ in process.escalation()] == [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]
    monkeypatch.setitem(stopping._INHERITED, signal.SIGINT, signal.SIG_IGN)
    assert [sig for sig, _ in process.escalation()] == [signal.SIGTERM, signal.SIGKILL]
    monkeypatch.setitem(stopping._INHERITED, signal.SIGTERM, signal.SIG_IGN)
    assert [sig for sig, _ in process.escalation()] == [signal.SIGKILL]


# Started with SIGINT ignored: a cancel of a group whose processes all inherited that, each of which would sit
# for ten minutes; prints how long the cancel took.
IGNORING = textwrap.dedent(
    """
    import sys, threading, time
    from pathlib import Path
    from torchimages.engine import run_cancellable

    pids, cancelled, at = Path(sys.argv[1]), threading.Event(), []

    def cancel_once_started():
        while not pids.exists():
            time.sleep(0.01)
        at.append(time.monotonic())
        cancelled.set()

    threading.Thread(target=cancel_once_started, daemon=True).start()
    run_cancellable(["sh", "-c", f"sleep 600 & echo $$ $! > {pids}.part && mv {pids}.part {pids}; wait"], cancelled)
    print(time.monotonic() - at[0])
    """
)


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting for its parent)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_cancel_started_with_sigint_ignored_stops_the_group_at_once(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    result = subprocess.run(
        [sys.executable, "-c", IGNORING, str(pids)],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # as nohup or `cmd &` start it
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    leader, child = map(int, pids.read_text().split())
    took = float(result.stdout)
    # Before the escalation skipped SIGINT: 10 s of grace (SIGINT ignored by all), then SIGTERM.
    assert took < 2, f"the cancel took {took:.1f} s"
    time.sleep(0.1)  # SIGKILL went to the group before run_cancellable returned; the kernel ends it promptly
    assert not alive(leader) and not alive(child), "a process of the group outlived the cancel"


# `python -c` this, then the entry point (`build.py` or `-m`) and its arguments: the program as a user starts
# it, paused while it imports the command line's modules (torchimages.cli.entry: the first fraction of a
# second), once it has said so by creating $PAUSE_READY.
WHILE_IMPORTING = textwrap.dedent(
    """
    import os, runpy, sys, time

    ready = os.environ["PAUSE_READY"]

    def hook(event, args):
        if event == "import" and args[0] == "torchimages.cli.entry" and not os.path.exists(ready):
            os.close(os.open(ready, os.O_CREAT | os.O_WRONLY))
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline:
                time.sleep(0.02)

    sys.addaudithook(hook)
    entry, sys.argv = sys.argv[1], [sys.argv[1], *sys.argv[2:]]
    if entry == "-m":
        sys.argv[0] = "torchimages"
        runpy.run_module("torchimages", run_name="__main__", alter_sys=True)
    else:
        runpy.run_path(entry, run_name="__main__")
    """
)


@pytest.mark.parametrize(("sig", "status"), SIGNALS)
@pytest.mark.parametrize(("entry", "prog"), [("build.py", "build.py"), ("-m", MODULE)])
def test_a_signal_while_the_modules_load_is_said_as_later(
    work: Path, entry: str, prog: str, sig: signal.Signals, status: int
) -> None:
    ready = work.parent / "paused"
    program = str(Path(__file__).parents[3] / "build.py") if entry == "build.py" else entry
    proc = subprocess.Popen(
        [sys.executable, "-c", WHILE_IMPORTING, program, "validate"],
        cwd=work,
        env=environment(work, PAUSE_READY=str(ready)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_until("the command line's import", ready, proc)
    code, err, took = finish(proc, sig)
    assert code == status, err
    said_once(err, "validate", sig, prog)
    assert took < 5, f"{took:.1f} s to stop"


class _Containers:
    """The SDK's containers of a stand-in engine: every look finds none (the `docker run` was cut short before
    the engine made it); the first sends SIGTERM again, as an impatient user would. The name is free: the
    claim on it (a container made, never started) is granted."""

    def __init__(self) -> None:
        self.looked: list[str] = []
        self.claimed: list[str] = []

    def get(self, name: str) -> object:
        import docker.errors

        self.looked.append(name)
        if len(self.looked) == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        raise docker.errors.NotFound("no such container")

    def create(self, image: str, command: list[str], *, name: str, **_: object) -> None:
        self.claimed.append(name)


class _Landing:
    """The SDK's containers of an engine a create is on its way to: the name is taken (the claim is refused,
    409), and the container is there from the `lands`-th look on; removing it is recorded."""

    def __init__(self, lands: int) -> None:
        self.lands = lands
        self.looked: list[str] = []
        self.removed: list[str] = []

    def get(self, name: str) -> object:
        import docker.errors

        self.looked.append(name)
        if len(self.looked) < self.lands:
            raise docker.errors.NotFound("no such container")
        removed = self.removed
        return type("Container", (), {"remove": lambda self, force: removed.append(name)})()

    def create(self, image: str, command: list[str], *, name: str, **_: object) -> None:
        import docker.errors

        response = type("Response", (), {"status_code": 409, "reason": "Conflict"})()
        raise docker.errors.APIError(f"Conflict. The container name {name} is already in use", response)


def test_a_signal_during_a_probe_s_docker_run_removes_its_container_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The container is named before `docker run` starts: a signal while it runs (or makes the container) leaves
    nothing behind. The removal looks twice (a create on its way may land after the first look) and a second
    signal does not cut it short."""
    import docker.errors

    from torchimages import engine
    from torchimages.engine import docker_engine

    monkeypatch.setattr(docker_engine, "REMOVE_AGAIN_S", 0.05)
    cli = tmp_path / "docker"
    cli.write_text(f"#!/bin/sh\necho $$ > {tmp_path / 'pid'}\nexec sleep 30\n")
    cli.chmod(0o755)
    found = engine.DockerEngine.__new__(engine.DockerEngine)
    containers = _Containers()
    sdk = type("Sdk", (), {"containers": containers})()
    found.__dict__.update(sdk=sdk, _errors=docker.errors, _docker_cli=str(cli), _client=None, _named_contexts=None)
    previous = stopping.install()
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM)).start()
    try:
        with pytest.raises(stopping.Stopped) as stopped:
            found.run_python("img:1", ["-c", "print(1)"])
    finally:
        stopping.restore(previous)
    assert stopped.value.signum == signal.SIGTERM
    assert len(containers.looked) == 2 and containers.looked[0] == containers.looked[1]
    assert containers.looked[0].startswith("torchimages-probe-")
    assert containers.claimed == containers.looked[:1], "the name claimed after the first look found none"
    assert not alive(int((tmp_path / "pid").read_text())), "the docker client outlived the signal"


def test_a_signal_during_a_scan_s_container_creation_removes_the_container_that_lands_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`outdated`'s OS scan interrupted while the engine makes its container: the create on its way holds the name
    (the claim is refused), so the container is waited for and removed when it lands, however late."""
    import docker.errors

    from torchimages import engine
    from torchimages.engine import docker_engine

    monkeypatch.setattr(docker_engine, "REMOVE_AGAIN_S", 0.05)
    cli = tmp_path / "docker"
    cli.write_text("#!/bin/sh\nexec sleep 30\n")
    cli.chmod(0o755)
    found = engine.DockerEngine.__new__(engine.DockerEngine)
    containers = _Landing(lands=6)  # well after two looks 0.05 s apart
    sdk = type("Sdk", (), {"containers": containers})()
    found.__dict__.update(sdk=sdk, _errors=docker.errors, _docker_cli=str(cli), _client=None, _named_contexts=None)
    previous = stopping.install()
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    try:
        with pytest.raises(stopping.Stopped) as stopped:
            found.run_shell("img:1", "true", user="0:0")
    finally:
        stopping.restore(previous)
    assert stopped.value.signum == signal.SIGINT
    assert len(containers.looked) == 6 and containers.removed == containers.looked[:1], containers.looked
    assert containers.removed[0].startswith("torchimages-shell-")


def test_a_signal_right_after_the_engine_made_a_smoke_container_removes_it() -> None:
    """Between `docker run` making the container and the code that removes it: the runner names it first."""
    from tests.fakes import FakeEngine
    from torchimages.smoke import runner

    class Interrupted(FakeEngine):
        def start_container(
            self, reference: str, *, name: str, gpus: bool, shm_size: str, run_args: Sequence[str] = ()
        ) -> None:
            super().start_container(reference, name=name, gpus=gpus, shm_size=shm_size, run_args=run_args)
            raise stopping.Stopped(signal.SIGINT)  # the signal as `docker run` returns

    fake = Interrupted()
    with pytest.raises(stopping.Stopped):
        runner.run_suites_in_container(fake, {"image": "img:1"}, runner.SmokeOptions(gpus="none"), None)
    assert fake.containers == [], "a container was left behind"
