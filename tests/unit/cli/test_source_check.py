"""The source check before a build (`plan --check-sources`, `doctor`'s wheel sources, `build`; issue 45): what it
could not tell (an index or registry asking for a login it does not have) is said as not known, never as served,
and refuses nothing; a registry's refusal is read from its answer's HTTP status, never from a host name; the way
out to `list --pypi-only` is offered only where it leads somewhere. Loopback servers: the real HTTP client runs."""

from __future__ import annotations

import argparse
import contextlib
import http.server
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.index_server import Reply, served
from tests.unit.test_registry_deadline import serving
from torchimages import registry
from torchimages.cli import common, doctor
from torchimages.doctor import facts
from torchimages.planning import plan

CPU_BOOTSTRAP = "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12, flavors: [runtime]}\n"
CPU_UBUNTU = "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: ubuntu24.04, flavors: [runtime]}\n"


@pytest.fixture(autouse=True)
def _the_real_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The conftest's stand-in is put back to the real question: its rules are what these tests are about."""
    monkeypatch.setattr(common, "check_reachable", CHECK_REACHABLE)


CHECK_REACHABLE = common.check_reachable


@contextlib.contextmanager
def _registry(status: int, challenge: str = "") -> Iterator[str]:
    """`127.0.0.1:PORT` of a registry answering every HEAD and GET with `status` (and a WWW-Authenticate)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.send_response(status)
            if challenge:
                self.send_header("WWW-Authenticate", challenge)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_HEAD = do_GET = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(Handler) as address:
        yield address


def _refusing_index() -> contextlib.AbstractContextManager[str]:
    reply = Reply(b"login first", "text/plain", 401)
    return served({f"/simple/{p}/": reply for p in ("torch", "torchvision", "torchaudio", "numpy")})


@pytest.mark.parametrize("status", [401, 403])
def test_plan_says_what_an_index_asking_for_a_login_could_not_tell(cli: Any, write_matrix: Any, status: int) -> None:
    """Every wheel asked of an index that answers 401/403: nothing is refused (exit 0), and nothing is said to be
    served: each wheel is said not known, with the index that asked for a login."""
    matrix = write_matrix(CPU_BOOTSTRAP)
    reply = Reply(b"no", "text/plain", status)
    pages = {f"/simple/{p}/": reply for p in ("torch", "torchvision", "torchaudio", "numpy")}
    with served(pages) as url:
        code, out, err = cli("plan", "--matrix", str(matrix), "--bases", "bootstrap", "--index-url",
                             f"{url}/simple", "--check-sources", "2.13.0-cpu-runtime")  # fmt: skip
    assert code == 0, out + err
    assert "is served from this machine" not in out
    assert "plan: not known: wheels: 4 wheels not known (torch 2.13.0+cpu" in out
    assert f"{url}/simple asks for a login this check does not have" in out
    assert "nothing the selection needs is known to be missing, but 1 answer could not be told" in out


def test_doctor_warns_where_an_index_could_not_tell(tmp_path: Path) -> None:
    """doctor's wheel sources check is never `ok ... served` for wheels an index asking for a login held back."""
    path = tmp_path / "matrix.yaml"
    path.write_text(CPU_BOOTSTRAP)
    loaded = plan.load(path)
    chosen = plan.select(loaded, ["2.13.0-cpu-runtime"])
    with _refusing_index() as url:
        args = argparse.Namespace(index_url=f"{url}/simple", extra_index_url=[], find_links=[])
        check = doctor._wheel_sources(chosen, args, loaded)
    assert check.status == "warn" and not check.failed
    assert "served" not in check.message and "4 wheels not known" in check.message


def test_a_host_name_is_not_a_registry_asking_for_a_login(cli: Any, write_matrix: Any) -> None:
    """`--base-registry localhost:403/mirror`, where nothing listens: the registry does not answer, whatever its
    name holds (`403`): the image is needed, never taken as 'asks for a login'."""
    matrix = write_matrix(CPU_UBUNTU)
    with _refusing_index() as url:
        code, out, err = cli("plan", "--matrix", str(matrix), "--base-registry", "localhost:403/mirror",
                             "--index-url", f"{url}/simple", "--check-sources", "2.13.0-cpu-runtime")  # fmt: skip
    assert code == 1, out + err
    assert "needed: registry image localhost:403/mirror/library/ubuntu:24.04: localhost:403 does not answer" in err


@pytest.mark.parametrize(("status", "challenge"), [(401, 'Basic realm="corp"'), (403, "")])
def test_a_registry_asking_for_a_login_is_not_known(cli: Any, write_matrix: Any, status: int, challenge: str) -> None:
    """A registry that answers 401 (a login, not an anonymous token) or 403: it cannot tell (the engine's
    `docker login` may have it): not refused, and said as not known, never served."""
    matrix = write_matrix(CPU_UBUNTU)
    with _registry(status, challenge) as host, _refusing_index() as url:
        code, out, err = cli("plan", "--matrix", str(matrix), "--base-registry", f"{host}/mirror",
                             "--index-url", f"{url}/simple", "--check-sources", "2.13.0-cpu-runtime")  # fmt: skip
    assert code == 0, out + err
    assert f"plan: not known: registry image {host}/mirror/library/ubuntu:24.04: not known" in out
    assert "is served from this machine" not in out and "2 answers could not be told" in out


def test_a_registry_error_says_whether_it_asked_for_a_login() -> None:
    """RegistryError.login comes from the registry's answer (401/403), never from the words of the message."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ((_, why, login),) = facts.base_answers([f"127.0.0.1:{port}/denied-403-unauthorized/x:1"])
    assert why and not login
    with _registry(500) as host:
        ((_, why, login),) = facts.base_answers([f"{host}/x:1"])
    assert why and "500" in why and not login
    with _registry(403) as host, pytest.raises(registry.RegistryError) as caught:
        registry.resolve_digest(f"{host}/x:1", deadline=5)
    assert caught.value.login


def test_list_pypi_only_says_when_the_selection_has_none(cli: Any, write_matrix: Any) -> None:
    """`list --pypi-only` of a selection with no PyPI-only image: one line on stderr, exit 2 (as a selector that
    matches no image), never an empty list that reads as success."""
    matrix = write_matrix(CPU_UBUNTU)
    code, out, err = cli("list", "--matrix", str(matrix), "--pypi-only", "2.13.0-cpu")
    assert code == 2 and out == ""
    assert "--pypi-only: no image of 2.13.0-cpu builds from PyPI alone" in err
    assert len([line for line in err.splitlines() if not line.startswith("note:")]) == 1


def test_the_pypi_only_way_out_is_offered_only_where_it_leads(cli: Any, write_matrix: Any) -> None:
    """The refusal offers `list --pypi-only` only where the matrix has such an image: of the selected release
    (named) where there is one, else said to be of other releases; never where the matrix has none."""

    def refusal(text: str) -> str:
        matrix = write_matrix(text)
        code, _out, err = cli("plan", "--matrix", str(matrix), "--bases", "bootstrap", "--index-url",
                              "file:///nonexistent-index", "--check-sources", "2.13.0-cpu-runtime")  # fmt: skip
        assert code == 1, err
        return str(err)

    assert "list --pypi-only" not in refusal(CPU_BOOTSTRAP)
    assert "(`list --pypi-only`; none of torch 2.13.0)" in refusal(
        CPU_BOOTSTRAP + "    - {torch: 2.5.1, cuda: '12.4', os: debian12, flavors: [runtime]}\n"
    )
