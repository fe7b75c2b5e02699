"""Issue 11, "faults survived", against real private Docker engines (never the machine's shared one):
the engine killed in the middle of a build, and its disk filling up during a build.

Each test starts its own dockerd (private socket, data root, exec root and pid file, as
scripts/gpu-container-check.sh does) with the bootstrap base image loaded from the shared engine
(`docker save`, read-only), and runs `build.py build` with DOCKER_HOST pointing at it. Teardown stops
the private dockerd and everything it started, unmounts what it left and removes its folders, even
when the test failed. Needs root (dockerd, mount); skips otherwise (fails with REQUIRE_DOCKER=1).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .conftest import NO_LAYER_SCAN, ROOT, require

pytestmark = pytest.mark.e2e
BASE = "torchimages/bootstrap-debian:12"
CPU_RUNTIME = "{torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none, flavors: [runtime]}"
# A BuildKit step line of a RUN of the image being built: the engine is killed while the build runs one.
RUN_STEP = re.compile(rb"^#\d+ \[runtime +\d+/\d+\] RUN ", re.MULTILINE)


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                ppid = int(re.search(r"^PPid:\s+(\d+)", (entry / "status").read_text(), re.MULTILINE).group(1))  # type: ignore[union-attr]
                children.setdefault(ppid, []).append(int(entry.name))
    return children


def _alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _mentioning(text: str) -> list[int]:
    """Processes whose command line names `text` (this engine's containerd and shims)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


def _descends_from(pid: int, ancestor: int) -> bool:
    """Whether `pid` is `ancestor` or one of its descendants (another worker's bootstrap is neither)."""
    seen = 0
    while pid > 1 and seen < 64:
        if pid == ancestor:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
        seen += 1
    return False


@dataclass
class PrivateEngine:
    """A dockerd of our own under `folder`; `data_root` may be elsewhere (a small tmpfs)."""

    folder: Path
    data_root: Path
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def host(self) -> str:
        return f"unix://{self.folder}/docker.sock"

    @property
    def bridge(self) -> str:
        """The private engine's own bridge interface (at most 15 characters)."""
        return "tib" + self.folder.name.removeprefix("tif-")[:12]

    def docker(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["docker", "-H", self.host, *args], capture_output=True, text=True, check=False, **kwargs)

    def start(self) -> None:
        """Start dockerd on the same socket, roots and pid file; wait (60 s at most) until it answers."""
        self.starts += 1
        (self.folder / "exec").mkdir(exist_ok=True)
        self.data_root.mkdir(exist_ok=True)
        # Its own (empty) configuration: a second dockerd reads the machine's /etc/docker/daemon.json too, and
        # one that names a data root, hosts or a bip there refuses the flags below ("specified both as a flag
        # and in the configuration file", "-b and --bip are mutually exclusive").
        config = self.folder / "daemon.json"
        config.write_text("{}\n")
        command = [
            "dockerd",
            "--config-file",
            str(config),
            "--host",
            self.host,
            "--data-root",
            str(self.data_root),
            "--exec-root",
            str(self.folder / "exec"),
            "--pidfile",
            str(self.folder / "docker.pid"),
            "--iptables=false",
            # its own bridge: a second dockerd with --bridge=none deletes the machine engine's docker0
            f"--bridge={self.bridge}",
        ]
        with (self.folder / f"dockerd-{self.starts}.log").open("wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while self.docker("info").returncode != 0:
            assert self.process.poll() is None, f"dockerd exited ({self.process.returncode}): {self.log()}"
            assert time.monotonic() < deadline, f"dockerd does not answer after 60 s: {self.log()}"
            time.sleep(0.2)

    def log(self) -> str:
        return (self.folder / f"dockerd-{self.starts}.log").read_text(errors="replace")[-3000:]

    def kill(self, sig: signal.Signals = signal.SIGKILL, grace: float = 0) -> None:
        """Send dockerd `sig` (wait up to `grace` s for it to end), then SIGKILL it and everything it started
        (its build's runc containers, its containerd and the shims) that is left."""
        if self.process is None:
            return
        descendants, stack = [], [self.process.pid]
        tree = _children()
        while stack:
            pid = stack.pop()
            descendants.append(pid)
            stack += tree.get(pid, [])
        self.process.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=grace or 0.01)
        swept = [*descendants, *_mentioning(str(self.folder))]
        for pid in swept:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self.process.kill()
        self.process.wait(timeout=30)
        self.process = None
        deadline = time.monotonic() + 10  # gone, or at least dead (a zombie until its new parent reaps it)
        while any(_alive(pid) for pid in swept) and time.monotonic() < deadline:
            time.sleep(0.1)
        # A restarted dockerd reuses a containerd whose pid file names a live pid ("containerd is still
        # running"), and times out when that pid is not containerd any more: the file goes.
        (self.folder / "exec" / "containerd" / "containerd.pid").unlink(missing_ok=True)

    def unmount(self) -> None:
        """Unmount what dockerd left under its folders (deepest first), lazily."""
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
        for point in sorted((m for m in mounts if m.startswith(f"{self.folder}/")), key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)


@pytest.fixture(scope="module")
def base_archive(tmp_path_factory: pytest.TempPathFactory, debian_base: str) -> Path:
    """The bootstrap base, saved from the shared engine (read-only use) once per module."""
    if os.geteuid() != 0:
        require("the fault tests start their own dockerd and mount a tmpfs: they need root")
    if not shutil.which("dockerd") or not shutil.which("docker"):
        require("no dockerd or docker on PATH (Debian: apt-get install docker.io)")
    archive = tmp_path_factory.mktemp("base") / "base.tar"
    saved = subprocess.run(["docker", "save", "-o", str(archive), BASE], capture_output=True, text=True, check=False)
    if saved.returncode != 0:
        require(f"the shared engine has no {BASE} to load into a private engine: {saved.stderr.strip()}")
    return archive


@contextlib.contextmanager
def private_engine(archive: Path | None, tmpfs_mb: int | None = None) -> Iterator[PrivateEngine]:
    """A started private dockerd with the bootstrap base loaded (unless `archive` is None); its data root on a
    tmpfs of `tmpfs_mb` MB when given. Everything is stopped, unmounted and removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="tif-", dir="/tmp"))  # short: a unix socket path is at most 107 bytes
    engine = PrivateEngine(folder, folder / "root")
    made = subprocess.run(["ip", "link", "add", engine.bridge, "type", "bridge"], capture_output=True, text=True)
    assert made.returncode == 0, f"cannot make the private engine's bridge {engine.bridge}: {made.stderr}"
    tmpfs = None
    try:
        if tmpfs_mb:
            tmpfs = folder / "small"
            tmpfs.mkdir()
            mounted = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={tmpfs_mb}m", "tmpfs", str(tmpfs)], capture_output=True, text=True
            )
            assert mounted.returncode == 0, mounted.stderr
            engine.data_root = tmpfs / "root"
        engine.start()
        if archive is not None:
            loaded = engine.docker("load", "-i", str(archive))
            assert loaded.returncode == 0, loaded.stderr
        yield engine
    finally:
        engine.kill(signal.SIGTERM, grace=20)
        keep = os.environ.get("TORCHIMAGES_FAULT_LOGS")  # a folder to keep the private dockerds' logs in
        if keep:
            for log in folder.glob("dockerd-*.log"):
                shutil.copy(log, Path(keep) / f"{folder.name}-{log.name}")
        engine.unmount()
        if tmpfs:
            subprocess.run(["umount", "-l", str(tmpfs)], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", engine.bridge], capture_output=True, check=False)
        shutil.rmtree(folder, ignore_errors=True)


def _has_docker0() -> bool:
    return subprocess.run(["ip", "link", "show", "docker0"], capture_output=True, check=False).returncode == 0


@pytest.fixture(scope="module", autouse=True)
def shared_engine_keeps_its_bridge() -> Iterator[None]:
    """The private engines must leave the machine's engine alone (its docker0 bridge included)."""
    before = _has_docker0()
    yield
    assert _has_docker0() == before, "a private engine removed the shared engine's docker0 bridge"


@pytest.fixture(scope="module")
def engine(base_archive: Path) -> Iterator[PrivateEngine]:
    with private_engine(base_archive) as started:
        yield started


@pytest.fixture(scope="module")
def small_engine(base_archive: Path) -> Iterator[PrivateEngine]:
    """A private engine whose data root is a 700 MB tmpfs: the torch layer (about 760 MB) cannot fit."""
    with private_engine(base_archive, tmpfs_mb=700) as started:
        yield started


@pytest.fixture
def bare_engine(base_archive: Path) -> Iterator[PrivateEngine]:
    """A private engine without the bootstrap base: a build starts by bootstrapping it."""
    with private_engine(None) as started:
        yield started


def write_matrix(folder: Path) -> tuple[Path, str]:
    repository = f"torchimages-e2e-{uuid.uuid4().hex[:8]}/pytorch"
    path = folder / "matrix.yaml"
    path.write_text(textwrap.dedent(f"repository: {repository}\nmatrix:\n  include:\n    - {CPU_RUNTIME}\n"))
    rendered = subprocess.run(
        [sys.executable, str(ROOT / "build.py"), "render", "--matrix", str(path)], capture_output=True, text=True
    )
    assert rendered.returncode == 0, rendered.stderr
    return path, f"{repository}:2.13.0-cpu-runtime"


def build(engine: PrivateEngine, matrix: Path, logs: Path, output: Path) -> subprocess.Popen[bytes]:
    """build.py build of the matrix against the private engine, in the background; output into a file."""
    args = ["build", "--matrix", str(matrix), "--log-dir", str(logs), "--test", "none", *NO_LAYER_SCAN, "*"]
    with output.open("wb") as handle:
        return subprocess.Popen(
            [sys.executable, str(ROOT / "build.py"), *args],
            stdout=handle,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, "DOCKER_HOST": engine.host},
        )


def finish(process: subprocess.Popen[bytes], output: Path, timeout: float = 240) -> tuple[int, str]:
    try:
        status = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise AssertionError(
            f"build.py did not end in {timeout} s: {output.read_text(errors='replace')[-3000:]}"
        ) from None
    return status, output.read_text(errors="replace")


def summary_of(text: str) -> str:
    """The summary build.py prints at the end: from its (last) line of a failed image."""
    starts = [m.start() for m in re.finditer(r"^failed +\d+ s  ", text, re.MULTILINE)]
    assert starts, f"no failed image in the summary: {text}"
    return text[starts[-1] :]


def tagged(engine: PrivateEngine, tag: str) -> bool:
    return engine.docker("image", "inspect", tag).returncode == 0


def temporary_images(engine: PrivateEngine) -> list[str]:
    listed = engine.docker("images", "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
    return [name for name in listed if name.startswith("torchimages-tmp/")]


def test_an_engine_killed_mid_build_is_named_and_a_rerun_completes(engine: PrivateEngine, tmp_path: Path) -> None:
    matrix, tag = write_matrix(tmp_path)
    output, log = tmp_path / "build.out", tmp_path / "logs" / "2.13.0-cpu-runtime.log"
    process = build(engine, matrix, tmp_path / "logs", output)
    deadline = time.monotonic() + 180
    while not (log.exists() and RUN_STEP.search(log.read_bytes())):
        assert process.poll() is None, f"build.py ended before a RUN step: {output.read_text(errors='replace')}"
        assert time.monotonic() < deadline, "no RUN step after 180 s"
        time.sleep(0.2)
    time.sleep(1)  # the step is running, not only announced
    killed = time.monotonic()
    engine.kill(signal.SIGKILL)
    status, text = finish(process, output, timeout=120)
    engine.timings["exit after the kill"] = time.monotonic() - killed
    assert status == 1, text
    assert f"the Docker engine at {engine.host} stopped answering during the build of 2.13.0-cpu-runtime" in text
    summary = summary_of(text)
    assert f"the Docker engine at {engine.host} stopped answering" in summary, text
    assert "Traceback" not in text, text

    engine.start()
    assert not tagged(engine, tag), "a build stopped by the engine's death must not be tagged"
    status, text = finish(build(engine, matrix, tmp_path / "logs2", tmp_path / "rerun.out"), tmp_path / "rerun.out")
    assert status == 0, text
    assert "1 built, 0 skipped, 0 failed" in text
    assert tagged(engine, tag) and temporary_images(engine) == []


def test_a_full_disk_is_named_and_nothing_is_tagged(small_engine: PrivateEngine, tmp_path: Path) -> None:
    matrix, tag = write_matrix(tmp_path)
    status, text = finish(
        build(small_engine, matrix, tmp_path / "logs", tmp_path / "build.out"), tmp_path / "build.out"
    )
    assert status == 1, text
    summary = summary_of(text)
    assert "no space left on device" in summary, text
    assert "Traceback" not in text, text
    assert not tagged(small_engine, tag) and temporary_images(small_engine) == []


def test_an_interrupt_during_the_bootstrap_stops_it_and_imports_nothing(
    bare_engine: PrivateEngine, tmp_path: Path
) -> None:
    if not shutil.which("mmdebstrap"):
        require("mmdebstrap is not installed (make test installs it)")
    matrix, tag = write_matrix(tmp_path)
    output = tmp_path / "build.out"
    process = build(bare_engine, matrix, tmp_path / "logs", output)
    deadline = time.monotonic() + 60
    # this build's mmdebstrap only: another worker may be bootstrapping a base of its own meanwhile
    while not (straps := [p for p in _mentioning("mmdebstrap") if _alive(p) and _descends_from(p, process.pid)]):
        assert process.poll() is None, f"build.py ended before bootstrapping: {output.read_text(errors='replace')}"
        assert time.monotonic() < deadline, "no mmdebstrap after 60 s"
        time.sleep(0.2)
    time.sleep(3)  # well into the bootstrap (it takes 20 to 40 s)
    assert "bootstrapping from the bookworm archive" in output.read_text(errors="replace")
    interrupted = time.monotonic()
    process.send_signal(signal.SIGINT)  # build.py alone, as `kill -INT` would: it must stop mmdebstrap itself
    status, text = finish(process, output, timeout=60)
    bare_engine.timings["exit after the interrupt"] = time.monotonic() - interrupted
    assert status == 130, text
    assert "bootstrap interrupted, nothing imported" in text, text
    assert "Traceback" not in text, text
    assert not [pid for pid in straps if _alive(pid)], "mmdebstrap is still running"
    assert not tagged(bare_engine, BASE) and not tagged(bare_engine, tag)
