"""`outdated` says "stale" or "current" only of what it could ask: an engine whose docker client cannot answer,
or (with --pull) a registry that never answers or drops the connection, ends it with one line and exit 2, within
a bound; never "0 of N images stale". Real processes and loopback sockets where they run here (a stand-in docker
client, /bin/false, a registry that never answers, one that drops every connection), a fake engine whose
answers are literals elsewhere."""

from __future__ import annotations

import contextlib
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fakes import FakeEngine
from tests.unit.engine.test_shell import docker_engine
from torchimages import engine as engine_package
from torchimages.combination import INPUT_DIGEST_LABEL, Combination, Image
from torchimages.engine import EngineError, ImageInfo
from torchimages.engine.discovery import server_problem
from torchimages.engine.requests import BuildClient
from torchimages.planning import plan
from torchimages.security import staleness
from torchimages.security.gate import GateOptions

MATRIX = "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}\n"
DEADLINE_S = 2.0
Cli = Callable[..., tuple[int, str, str]]


ENGINE_ID = ("ID", "0d5c4d2e-engine-asked")  # the SDK's engine's `docker info` ID: a literal


def client(tmp_path: Path, script: str, name: str = "docker") -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return str(path)


def test_a_docker_client_that_cannot_ask_the_engine_is_said_naming_it(tmp_path: Path) -> None:
    said = server_problem("/bin/false", ENGINE_ID)
    assert said is not None and said.startswith("the docker client /bin/false cannot ask the engine: ")
    assert "exit status 1, no ID" in said
    assert "says nothing, the engine's ID is '0d5c4d2e-engine-asked'" in str(server_problem("/bin/true", ENGINE_ID))
    answers = client(tmp_path, '[ "$*" = "info --format {{.ID}}" ] && echo 0d5c4d2e-engine-asked\n')
    assert server_problem(answers, ENGINE_ID) is None
    hangs = client(tmp_path, "exec sleep 30\n", "hangs")
    started = time.monotonic()
    assert "ran past its time limit" in str(server_problem(hangs, ENGINE_ID, timeout_s=0.5))
    assert time.monotonic() - started < 5


def test_a_client_that_echoes_or_asks_another_engine_is_refused_naming_both(tmp_path: Path) -> None:
    """/bin/echo exits 0 and says something; a client of another engine gives a version too: neither is the
    engine the tool asks, and each would check nothing."""
    said = str(server_problem("/bin/echo", ENGINE_ID, "unix:///run/asked.sock"))
    assert said.startswith("the docker client /bin/echo does not answer for the engine the tool asks "), said
    assert "(unix:///run/asked.sock): `/bin/echo info --format '{{.ID}}'` says 'info --format {{.ID}}'" in said
    assert "the engine's ID is '0d5c4d2e-engine-asked'" in said
    other = client(tmp_path, "echo 7f0e-another-engine; echo 26.1.4 >&2\n")
    said = str(server_problem(other, ENGINE_ID))
    assert "says '7f0e-another-engine', the engine's ID is '0d5c4d2e-engine-asked'" in said, said
    hostile = client(tmp_path, "printf '\\033[2Jx\\n'\n", "hostile")
    assert "says '\\x1b[2Jx'" in str(server_problem(hostile, ENGINE_ID))


def test_the_engine_refuses_a_client_that_does_not_answer(tmp_path: Path) -> None:
    found, sdk = docker_engine(tmp_path, "echo 'Cannot connect to the Docker daemon' >&2; exit 1\n")
    sdk.info = lambda: {"ID": ENGINE_ID[1], "ServerVersion": "26.1.4"}  # type: ignore[attr-defined]
    with pytest.raises(EngineError, match=r"cannot ask the engine: .* failed \(Cannot connect to the Docker daemon\)"):
        found.check_client()


def test_the_engine_takes_only_a_client_that_gives_its_id(tmp_path: Path) -> None:
    found, sdk = docker_engine(tmp_path, '[ "$*" = "info --format {{.ID}}" ] && echo 0d5c4d2e-engine-asked\n')
    sdk.info = lambda: {"ID": ENGINE_ID[1], "ServerVersion": "26.1.4"}  # type: ignore[attr-defined]
    found.check_client()
    sdk.info = lambda: {"ID": "7f0e-another-engine", "ServerVersion": "26.1.4"}  # type: ignore[attr-defined]
    with pytest.raises(EngineError, match=r"says '0d5c4d2e-engine-asked', the engine's ID is '7f0e-another-engine'"):
        found.check_client()


def test_an_engine_without_an_id_is_matched_by_its_version(tmp_path: Path) -> None:
    found, sdk = docker_engine(tmp_path, '[ "$*" = "info --format {{.ServerVersion}}" ] && echo 26.1.4\n')
    sdk.info = lambda: {"ServerVersion": "26.1.4"}  # type: ignore[attr-defined]
    found.check_client()
    sdk.info = lambda: {"ServerVersion": "27.0.1"}  # type: ignore[attr-defined]
    with pytest.raises(EngineError, match=r"says '26.1.4', the engine's ServerVersion is '27.0.1'"):
        found.check_client()
    silent, sdk = docker_engine(tmp_path, "exit 0\n")  # says nothing, as an engine that gives neither says
    sdk.info = lambda: {"ID": "", "Containers": 0}  # type: ignore[attr-defined]
    with pytest.raises(EngineError, match=r"gives neither an ID nor a version in its info"):
        silent.check_client()


def test_outdated_with_an_echoing_client_exits_2_naming_both(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`outdated --docker /bin/echo` once said `current` and exit 0, having asked nothing."""
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    monkeypatch.chdir(tmp_path)
    found, sdk = docker_engine(tmp_path, "exit 0\n")
    sdk.info = lambda: {"ID": ENGINE_ID[1]}  # type: ignore[attr-defined]
    found.__dict__["_docker_cli"] = "/bin/echo"
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: found)
    code, out, err = cli("outdated", "2.13.0-cpu-runtime", "--docker", "/bin/echo")
    assert code == 2 and out == "", out
    last = err.splitlines()[-1]
    assert last.startswith("error: the docker client /bin/echo does not answer for the engine the tool asks"), err
    assert "says 'info --format {{.ID}}', the engine's ID is '0d5c4d2e-engine-asked'" in last, err


def test_outdated_with_a_client_that_cannot_answer_exits_2_and_checks_nothing(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    monkeypatch.chdir(tmp_path)
    fake = FakeEngine()
    fake.client_error = EngineError("the docker client /bin/false cannot ask the engine: `/bin/false version` failed")
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: fake)
    code, out, err = cli("outdated", "--docker", "/bin/false")
    assert code == 2 and out == "", out
    assert err.splitlines()[-1].startswith("error: the docker client /bin/false cannot ask the engine"), err
    assert [c for c, _ in fake.calls] == ["check_client"], "nothing checked, nothing called current"


@pytest.fixture
def runtime(write_matrix: Callable[[str], Path]) -> tuple[Combination, Image]:
    (selected,) = plan.select(plan.load(write_matrix(MATRIX)), [])
    return selected.combination, selected.combination.image("runtime")


class Unanswered(FakeEngine):
    """A registry that cannot be asked: the manifest read fails (as DockerEngine.manifest says it)."""

    def manifest(self, reference: str) -> bytes | None:
        self.calls.append(("manifest", reference))
        raise EngineError(f"{reference}: no answer from its registry within 30 s (TORCHIMAGES_REGISTRY_DEADLINE_S)")


def test_with_pull_a_registry_that_cannot_be_asked_stops_the_check(runtime: tuple[Combination, Image]) -> None:
    combination, image = runtime
    fake = Unanswered()
    with pytest.raises(EngineError, match="no answer from its registry"):
        staleness.check(fake, combination, image, GateOptions(), pull=True)
    assert [c for c, _ in fake.calls] == ["manifest"], "no pull (which has no deadline) after a registry that fails"


def test_with_pull_the_registry_is_asked_first_and_a_tag_it_lacks_is_stale(
    runtime: tuple[Combination, Image],
) -> None:
    combination, image = runtime
    fake = FakeEngine()
    found = staleness.check(fake, combination, image, GateOptions(), pull=True)
    assert found.reasons == ("not in its registry: never pushed (build --push), or removed there",)
    assert [c for c, _ in fake.calls] == ["manifest"]
    repository, tag = image.platform_reference.rsplit(":", 1)
    fake.serve(repository, b'{"schemaVersion": 2}', [tag])
    fake.registry[image.platform_reference] = ({}, "sha256:" + "1" * 64)
    labels = {INPUT_DIGEST_LABEL: image.input_digest}
    fake.add(ImageInfo(image.platform_reference, "sha256:" + "1" * 64, labels, {}, "", ()))
    fake.calls.clear()
    staleness.check(fake, combination, image, GateOptions(), pull=True)
    assert [c for c, _ in fake.calls][:3] == ["manifest", "pull", "inspect"]


@contextlib.contextmanager
def loopback_registry(drop: bool) -> Iterator[str]:
    """`127.0.0.1:PORT` of a registry that takes each connection and never answers, or (`drop`) closes it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection = listener.accept()[0]
                if drop:
                    with contextlib.suppress(OSError):
                        connection.recv(65536)
                    connection.close()
                else:
                    held.append(connection)

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
        for connection in held:
            connection.close()


needs_buildx = pytest.mark.skipif(shutil.which("docker") is None, reason="reads manifests with docker buildx")


@needs_buildx
@pytest.mark.parametrize("drop", [False, True], ids=["never-answers", "drops-the-connection"])
def test_a_registry_that_never_answers_or_drops_the_connection_ends_in_one_line_within_the_deadline(
    drop: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHIMAGES_REGISTRY_DEADLINE_S", f"{DEADLINE_S:g}")
    found, _ = docker_engine(tmp_path, "")
    found.__dict__["_client"] = BuildClient((str(shutil.which("docker")), "buildx", "build"), ())
    with loopback_registry(drop) as host:
        started = time.monotonic()
        with pytest.raises(EngineError) as caught:
            found.manifest(f"{host}/team/torch:2.13.0-cpu-runtime")
        took = time.monotonic() - started
    said = str(caught.value)
    assert took < DEADLINE_S + 3, took
    assert "\n" not in said and said.startswith(f"{host}/team/torch:2.13.0-cpu-runtime")
    if drop:
        assert "could not be read from its registry" in said, said
    else:
        assert f"no answer from its registry within {DEADLINE_S:g} s" in said, said


@contextlib.contextmanager
def dropping_engine(folder: Path) -> Iterator[str]:
    """`unix://PATH` of an engine that answers its version and ping, and drops a pull's progress stream midway
    (the registry behind it went away): what the SDK reads itself, through urllib3."""
    path = folder / "engine.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen()

    def answer(connection: socket.socket) -> None:
        with contextlib.suppress(OSError), connection:
            while request := connection.recv(65536):
                head = request.split(b"\r\n", 1)[0]
                if b"/images/create" in head:  # the progress stream, cut after its first chunk
                    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
                    connection.sendall(b'Transfer-Encoding: chunked\r\n\r\n20\r\n{"status":"Pulling from a/b"}\r\n')
                    connection.sendall(b'40\r\n{"status":')
                    return
                body = b"OK" if b"/_ping" in head else b'{"ApiVersion": "1.45", "Version": "26.1.4"}'
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                    + body
                )

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                threading.Thread(target=answer, args=(listener.accept()[0],), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"unix://{path}"
    finally:
        listener.close()


def test_a_pull_whose_stream_the_engine_drops_is_one_line_never_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with dropping_engine(tmp_path) as address:
        monkeypatch.setenv("DOCKER_HOST", address)
        monkeypatch.setenv("TORCHIMAGES_ENGINE_TIMEOUT_S", "20")
        said = engine_package.DockerEngine().pull("127.0.0.1:5000/a/b:1")
    assert len(said) == 1 and said[0].startswith("pulling 127.0.0.1:5000/a/b:1 failed: "), said
    assert "does not answer" in said[0] and "\n" not in said[0], said
