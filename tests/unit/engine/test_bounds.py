"""Every engine call ends, and holds no more than a bound in memory, whatever the image or the engine does: a
command whose output never ends (an image whose /etc/os-release is a link to /dev/zero) is stopped at
MAX_OUTPUT_BYTES, one that never ends at its time limit, an engine that takes the connection and says nothing is
given up at the first contact; the probes themselves read no file without a bound. Real processes and sockets
(a stand-in docker CLI, a silent Unix socket), short limits."""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.unit.engine.test_shell import docker_engine
from torchimages import engine
from torchimages.building.readings import INSTALLED_PROBE
from torchimages.engine import docker_engine as engine_module
from torchimages.engine import process
from torchimages.probes import probe_source
from torchimages.render import OS_PACKAGES_FILE
from torchimages.security import os_updates

LIMIT = 1024 * 1024


def test_an_output_that_never_ends_is_stopped_at_the_limit() -> None:
    started = time.monotonic()
    found = process.captured(["cat", "/dev/zero"], timeout_s=30, limit_bytes=LIMIT)
    assert time.monotonic() - started < 10
    assert found.overflowed and not found.timed_out and found.status is None
    assert len(found.stdout) <= LIMIT + 100 and found.stopped == "its output passed the limit"


def test_a_command_that_never_ends_is_stopped_at_its_time_limit() -> None:
    started = time.monotonic()
    found = process.captured(["sh", "-c", "echo started; exec sleep 30"], timeout_s=0.3)
    assert time.monotonic() - started < 5
    assert found.timed_out and found.status is None and found.stdout == b"started\n"


def test_a_command_within_its_bounds_says_all_and_its_status() -> None:
    found = process.captured(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout_s=10)
    assert (found.status, found.stdout, found.stderr, found.stopped) == (3, b"out\n", b"err\n", "")


def test_a_cancellable_run_keeps_the_start_and_the_end_of_a_huge_output() -> None:
    """What a smoke gate reads of pytest: its summary is at the end, so the end is kept, the middle cut."""
    script = "echo START; head -c 5000000 /dev/zero | tr '\\0' a; echo; echo END"
    done = process.run_cancellable(
        ["sh", "-c", script], None, limit_bytes=1000, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert done.returncode == 0 and len(done.stdout) < 1100
    assert done.stdout.startswith("START\n") and done.stdout.endswith("END\n") and "bytes cut]" in done.stdout


def test_a_probe_whose_output_never_ends_is_stopped_and_its_container_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process, "MAX_OUTPUT_BYTES", LIMIT)
    found, sdk = docker_engine(tmp_path, "exec cat /dev/zero\n")
    with pytest.raises(engine.ProbeError, match=r"python in img:1 wrote more than \d+ bytes: stopped"):
        found.run_python("img:1", ["-c", "print(1)"])
    assert len(sdk.containers.removed) == 1 and sdk.containers.removed[0].startswith("torchimages-probe-")


def test_a_probe_that_never_ends_is_stopped_at_its_time_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_module, "PROBE_TIMEOUT_S", 0.3)
    found, sdk = docker_engine(tmp_path, "exec sleep 30\n")
    started = time.monotonic()
    with pytest.raises(engine.ProbeError, match=r"python did not finish within 0\.3 s in img:1: stopped"):
        found.run_python("img:1", ["-c", "print(1)"])
    assert time.monotonic() - started < 5 and len(sdk.containers.removed) == 1


def test_a_probe_runs_the_image_s_python_without_network_and_says_its_failure(tmp_path: Path) -> None:
    found, sdk = docker_engine(tmp_path, 'echo "$*"\n')
    said = found.run_python("img:1", ["-c", "print(1)"])
    assert said.startswith("run --rm --name torchimages-probe-") and said.endswith(
        " --network none img:1 python -c print(1)\n"
    )
    assert sdk.containers.removed == []
    found, _ = docker_engine(tmp_path, "echo 'Traceback: boom' >&2; exit 1\n")
    with pytest.raises(engine.ProbeError, match="python exited with status 1 in img:1: Traceback: boom"):
        found.run_python("img:1", [])


def test_a_scan_whose_output_never_ends_is_not_scanned_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process, "MAX_OUTPUT_BYTES", LIMIT)
    found, sdk = docker_engine(tmp_path, "exec cat /dev/zero\n")
    result = found.run_shell("img:1", "cat /etc/os-release")
    assert result.overflowed and not result.timed_out and result.status == -1 and len(sdk.containers.removed) == 1
    scan = os_updates.read(result)
    assert not scan.scanned and "the scan's output passed the engine's limit" in scan.note


@contextlib.contextmanager
def silent_engine(folder: Path) -> Iterator[str]:
    """`unix://PATH` of an engine that takes every connection and never says a word."""
    path = folder / "engine.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                held.append(listener.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"unix://{path}"
    finally:
        listener.close()
        for connection in held:
            connection.close()


def test_an_engine_that_never_answers_is_given_up_at_the_first_contact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHIMAGES_ENGINE_TIMEOUT_S", "2")  # the first contact: a tenth
    with silent_engine(tmp_path) as address:
        monkeypatch.setenv("DOCKER_HOST", address)
        said: list[BaseException] = []

        def connect() -> None:
            try:
                engine.DockerEngine()
            except BaseException as exc:  # said to the test's thread
                said.append(exc)

        thread = threading.Thread(target=connect, daemon=True)  # a hang fails the test, it does not hold it
        thread.start()
        thread.join(timeout=3)
        assert not thread.is_alive(), "still waiting for an engine that never answers"
        assert len(said) == 1 and isinstance(said[0], engine.EngineError), said
        assert "no Docker engine answers" in str(said[0])
        facts = engine.engine_facts()
    assert facts.version is None and facts.error is not None and "no Docker engine answers" in facts.error


def test_outdated_against_an_engine_that_never_answers_exits_2_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "matrix.yaml").write_text(
        "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}\n"
    )
    with silent_engine(tmp_path) as address:
        env = {**os.environ, "DOCKER_HOST": address, "TORCHIMAGES_ENGINE_TIMEOUT_S": "2"}
        done = subprocess.run(
            [sys.executable, "-m", "torchimages", "outdated"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.startswith("error: no Docker engine answers") and "Traceback" not in done.stderr


class Endless:
    """An open file of endless text without a newline (/dev/zero's kind), that says so when it is read line by
    line (which would fill memory) instead of by a bounded read."""

    def __enter__(self) -> Endless:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def read(self, size: int = -1) -> str:
        assert 0 <= size <= 10**7, "read to its end, which never comes"
        return "\0" * size

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("read line by line: the first line never ends")


def test_the_facts_probe_reads_os_release_no_further_than_its_bound() -> None:
    """The probe runs in the image: an os-release that is a link to /dev/zero must not fill its memory."""
    probe: dict[str, object] = {"__name__": "probe"}
    exec(compile(probe_source("facts"), "facts.py", "exec"), probe)
    probe["open"] = lambda *_args, **_kwargs: Endless()  # a global is found before the builtin
    assert probe["os_release"]() == {"id": "", "version_id": ""}  # type: ignore[operator]


def at_most(gigabytes: float) -> Callable[[], None]:
    """A child's memory limit (preexec_fn): a test whose rule breaks fails, it does not fill the machine."""
    size = int(gigabytes * 1024**3)
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (size, size))


def test_the_scan_script_reads_os_release_no_further_than_its_bound(tmp_path: Path) -> None:
    link = tmp_path / "os-release"
    link.symlink_to("/dev/zero")
    head = os_updates.SCRIPT.split("for tool in", 1)[0].replace("/etc/os-release", str(link))
    done = subprocess.run(["sh", "-c", f"{{ {head} }} | head -c 1000000"], capture_output=True, timeout=20, check=False)
    assert len(done.stdout) < 2 * os_updates.OS_RELEASE_BYTES


def test_the_installed_probe_reads_the_package_record_no_further_than_its_bound() -> None:
    script = INSTALLED_PROBE.replace(str(OS_PACKAGES_FILE), "/dev/zero")
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, timeout=60, check=False, preexec_fn=at_most(1)
    )
    assert done.returncode == 0 and len(done.stdout) < 8 * 1024 * 1024, done.stderr[-500:]


def test_a_zstd_push_whose_docker_save_stalls_ends_saying_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchimages.engine import zstd_push

    monkeypatch.setattr(process, "STALL_S", 0.5)
    docker = tmp_path / "docker"
    docker.write_text("#!/bin/sh\nprintf 'not a tar'\nexec sleep 30\n")
    docker.chmod(0o755)
    verified = engine.ImageInfo("img:1", "sha256:" + "1" * 64, {}, {}, "", ())
    started = time.monotonic()
    with pytest.raises(engine.EngineError, match=r"sent nothing for 0\.5 s: stopped"):
        zstd_push.save_layout(str(docker), verified, tmp_path / "layout")
    assert time.monotonic() - started < 5
