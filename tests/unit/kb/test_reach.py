"""Whether the sources a build searches serve the wheels it pins (torchimages.kb.reach): exact versions (the local
label counts), the Python and platform of the file, indexes and folders, an index that does not answer, the
searched order, and local sources read before the network."""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.index_server import Reply, served
from torchimages.kb import reach

TORCH_118 = reach.Need("torch", "2.7.0+cu118", "3.10", "linux/amd64", (), "https://own.example/whl/cu118", ("t",))


@pytest.mark.parametrize(
    ("filename", "expected"),
    [
        ("torch-2.7.0+cu118-cp310-cp310-manylinux_2_28_x86_64.whl", True),
        ("torch-2.7.0%2Bcu118-cp310-cp310-manylinux_2_28_x86_64.whl", False),  # not a wheel name as listed
        ("torch-2.7.0-cp310-cp310-manylinux_2_28_x86_64.whl", False),  # PyPI's build: another local label
        ("torch-2.7.0+cu126-cp310-cp310-manylinux_2_28_x86_64.whl", False),
        ("torch-2.7.0+cu118-cp311-cp311-manylinux_2_28_x86_64.whl", False),  # another Python
        ("torch-2.7.0+cu118-cp310-cp310-manylinux_2_28_aarch64.whl", False),  # another platform
        ("torch-2.7.0+cu118-cp310-cp310-win_amd64.whl", False),
        ("torch-2.7.0+cu118-cp310-cp310-linux_x86_64.whl", True),
        ("torch-2.7.0+cu118-cp310-cp310-manylinux2014_x86_64.whl", True),
        ("torch-2.7.0+cu118-cp38-abi3-manylinux_2_28_x86_64.whl", True),  # abi3 from 3.8 installs on 3.10
        ("torch-2.7.0+cu118-cp311-abi3-manylinux_2_28_x86_64.whl", False),  # abi3 from 3.11 does not
        ("torch-2.7.0+cu118-py3-none-any.whl", True),
        ("torch-2.7.0+cu118-cp310-cp310t-manylinux_2_28_x86_64.whl", False),  # free-threaded: another ABI
        ("torch-2.7.0+cu118-cp310-cp311-manylinux_2_28_x86_64.whl", False),
        ("torch-2.7.0+cu118-cp310-none-manylinux_2_28_x86_64.whl", True),
        ("torchvision-2.7.0+cu118-cp310-cp310-manylinux_2_28_x86_64.whl", False),  # another project
        ("torch-2.7.0+cu118.tar.gz", False),
        ("", False),
        ("torch-x-y-z.whl", False),
    ],
)
def test_a_file_matches_only_the_exact_wheel(filename: str, expected: bool) -> None:
    assert reach.matches(filename, TORCH_118) is expected


@given(st.text(max_size=200))
def test_any_file_name_is_read_without_raising(filename: str) -> None:
    assert reach.matches(filename, TORCH_118) in (True, False)


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        ("torch==2.7.0+cu118", ("torch", "2.7.0+cu118", None)),
        ("Torch_Audio==2.7.0", ("torch-audio", "2.7.0", None)),
        ("torch==2.14.1,!=2.14.1+cpu,!=2.14.1+cu126", ("torch", "2.14.1", ("2.14.1+cpu", "2.14.1+cu126"))),
        ("torch==2.14.1, !=2.14.1+cpu", ("torch", "2.14.1", ("2.14.1+cpu",))),
        ("torch==2.14.1,!=2.14.0+cpu", None),  # another version's build: not this form
        ("torch==2.14.1,!=2.14.1", None),
        ("torch==2.14.1,>=2.14", None),
        ("torch==2.14.1+cu130,!=2.14.1+cpu", None),
        ("torch>=2.7", None),
        ("torch==2.*", None),
        ("torch", None),
        ("==2.7.0", None),
    ],
)
def test_only_exact_pins_are_looked_for(requirement: str, expected: tuple[str, str, Any] | None) -> None:
    assert reach.pinned(requirement) == expected


EXCLUDING = reach.Need(
    "torch", "2.14.1", "3.12", "linux/amd64", (), "https://own.example/whl/cu130", ("t",), ("2.14.1+cpu",)
)


@pytest.mark.parametrize(
    ("filename", "expected"),
    [
        ("torch-2.14.1+cu130-cp312-cp312-manylinux_2_28_x86_64.whl", True),
        ("torch-2.14.1-cp312-cp312-manylinux_2_28_x86_64.whl", True),  # PyPI's: no local label, not excluded
        ("torch-2.14.1+cpu-cp312-cp312-manylinux_2_28_x86_64.whl", False),  # excluded
        ("torch-2.14.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl", False),
        ("torch-2.14.1+cu130-cp311-cp311-manylinux_2_28_x86_64.whl", False),
    ],
)
def test_a_pin_with_exclusions_matches_any_other_build_of_its_version(filename: str, expected: bool) -> None:
    """The Dockerfiles pin `torch==2.14.1,!=2.14.1+cpu,...` where an index serves several builds: as pip reads it,
    any build of 2.14.1 but those; such a pin is looked for, never passed over."""
    assert reach.matches(filename, EXCLUDING) is expected
    assert str(EXCLUDING) == "torch 2.14.1 (not +cpu) (Python 3.12, linux/amd64)"


def _need(*sources: str, own: str = "https://own.example/whl/cu118") -> reach.Need:
    return reach.Need("torch", "2.7.0+cu118", "3.10", "linux/amd64", sources, own, ("2.7.0-cuda11.8-cudnn9-runtime",))


WHEEL = "torch-2.7.0+cu118-cp310-cp310-manylinux_2_28_x86_64.whl"


def _page(*files: str) -> Reply:
    body = {"meta": {"api-version": "1.1"}, "name": "torch", "files": [{"filename": f, "url": f} for f in files]}
    return Reply(json.dumps(body).encode(), "application/vnd.pypi.simple.v1+json")


def test_an_index_that_lists_the_wheel_serves_it() -> None:
    with served({"/simple/torch/": _page("torch-2.7.0-cp310-cp310-manylinux_2_28_x86_64.whl", WHEEL)}) as url:
        assert reach.problems([_need(f"{url}/simple")], ()) == []


def test_an_index_without_the_exact_wheel_is_named_with_what_it_said() -> None:
    other = "torch-2.7.0-cp310-cp310-manylinux_2_28_x86_64.whl"  # the same version, PyPI's local label (none)
    with served({"/simple/torch/": _page(other)}) as url:
        (line,) = reach.problems([_need(f"{url}/simple")], ())
    assert "no source serves torch 2.7.0+cu118 (Python 3.10, linux/amd64)" in line
    assert f"{url}/simple (answers, without it)" in line
    assert line.startswith("2.7.0-cuda11.8-cudnn9-runtime: ")


def test_a_yanked_file_does_not_serve() -> None:
    body = {
        "meta": {"api-version": "1.1"},
        "name": "torch",
        "files": [{"filename": WHEEL, "url": WHEEL, "yanked": True}],
    }
    reply = Reply(json.dumps(body).encode(), "application/vnd.pypi.simple.v1+json")
    with served({"/simple/torch/": reply}) as url:
        assert len(reach.problems([_need(f"{url}/simple")], ())) == 1


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/simple"


def test_an_index_that_does_not_answer_is_said_in_seconds() -> None:
    dead = _closed_port()
    start = time.monotonic()
    (line,) = reach.problems([_need(dead)], ())
    assert time.monotonic() - start < 5
    assert f"{dead} (" in line and "refused" in line and "answers" not in line


def test_a_trickling_index_is_bounded_by_the_deadline() -> None:
    with served({"/simple/torch/": Reply(b"x" * 100, "text/html", trickle=0.2)}) as url:
        start = time.monotonic()
        (line,) = reach.problems([_need(f"{url}/simple")], (), deadline_s=1.0)
    assert time.monotonic() - start < 4
    assert "deadline" in line


def test_the_replaced_own_index_is_said() -> None:
    with served({}) as url:
        (line,) = reach.problems([_need(f"{url}/simple")], (), replaced=True)
    assert "its own index https://own.example/whl/cu118 is not searched (--index-url replaces it)" in line


def test_a_local_folder_and_a_file_index_serve(tmp_path: Path) -> None:
    links = tmp_path / "wheels"
    links.mkdir()
    (links / WHEEL).write_bytes(b"")
    assert reach.problems([_need(str(links))], (str(links),)) == []
    index = tmp_path / "simple"
    (index / "torch").mkdir(parents=True)
    (index / "torch" / WHEEL).write_bytes(b"")
    assert reach.problems([_need(index.as_uri())], ()) == []
    assert len(reach.problems([_need(str(tmp_path / "absent"))], (str(tmp_path / "absent"),))) == 1


def test_a_file_index_is_read_by_its_project_page(tmp_path: Path) -> None:
    """The standard PEP 503 layout on disk: `simple/torch/index.html` links wheel files that live elsewhere
    (`../../files/...`): pip serves them, so does the check; what the page does not list is not served, even
    where the project's folder holds it."""
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / WHEEL).write_bytes(b"")
    project = tmp_path / "simple" / "torch"
    project.mkdir(parents=True)
    href = "../../files/" + WHEEL.replace("+", "%2B")
    (project / "index.html").write_text(f'<html><body><a href="{href}#sha256={"0" * 64}">{WHEEL}</a></body></html>')
    assert reach.problems([_need((tmp_path / "simple").as_uri())], ()) == []
    (tmp_path / "files" / WHEEL).unlink()  # the page links a file that is gone: pip would fail, the check says so
    assert len(reach.problems([_need((tmp_path / "simple").as_uri())], ())) == 1
    (project / "index.html").write_text("<html><body></body></html>")
    (project / WHEEL).write_bytes(b"")
    assert len(reach.problems([_need((tmp_path / "simple").as_uri())], ())) == 1


def test_the_network_is_not_asked_when_a_local_source_serves(tmp_path: Path) -> None:
    (tmp_path / WHEEL).write_bytes(b"")
    dead = _closed_port()
    assert reach.problems([_need(dead, str(tmp_path))], (str(tmp_path),)) == []


@contextlib.contextmanager
def _recording(files: list[str], drop_first: bool = False) -> Iterator[tuple[int, list[tuple[str, str]]]]:
    """A loopback index listing `files` for any project that records each request's path and Authorization
    header; `drop_first`: the first connection is closed without an answer (a flaky mirror)."""
    asked: list[tuple[str, str]] = []
    body = json.dumps({"meta": {"api-version": "1.1"}, "files": [{"filename": f, "url": f} for f in files]}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append((self.path, self.headers.get("Authorization") or ""))
            if drop_first and len(asked) == 1:
                self.close_connection = True
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], asked
    finally:
        server.shutdown()
        server.server_close()


def test_a_dropped_first_answer_is_asked_once_more() -> None:
    """A connection closed without an answer (a flaky mirror) is not yet a refusal: one more question."""
    with _recording([WHEEL], drop_first=True) as (port, asked):
        assert reach.problems([_need(f"http://127.0.0.1:{port}/simple")], ()) == []
    assert [path for path, _ in asked] == ["/simple/torch/", "/simple/torch/"]


def test_an_index_with_a_login_is_asked_with_it_and_never_said() -> None:
    """A private index (`https://user:secret@host/simple`): the check sends the login as pip does (HTTP basic),
    and no line it says holds the login."""
    with _recording([]) as (port, asked):
        url = f"http://someone:s3cret-pw@127.0.0.1:{port}/simple"
        (line,) = reach.problems([_need(url)], ())
    seen = [auth for _, auth in asked]
    assert seen == ["Basic " + base64.b64encode(b"someone:s3cret-pw").decode()]
    assert "s3cret-pw" not in line and "someone" not in line
    assert f"http://127.0.0.1:{port}/simple (answers, without it)" in line


@pytest.mark.parametrize("status", [401, 403])
def test_an_index_that_asks_for_a_login_is_no_refusal(status: int) -> None:
    """A source that wants a login the check lacks (pip may have it from netrc or a keyring) cannot tell: the
    build is not refused for it, and its login is not said."""
    with served({"/simple/torch/": Reply(b"no", "text/plain", status)}) as url:
        found = reach.check([_need(f"http://someone:pw@{url.removeprefix('http://')}/simple")], ())
    assert found.missing == ()
    (line,) = found.unknown  # not refused, and never said to be served
    assert line.startswith("1 wheel not known (torch 2.7.0+cu118 (Python 3.10, linux/amd64)): ")
    assert f"{url}/simple asks for a login this check does not have" in line and "pw" not in line


def test_kb_never_writes_an_index_login_into_a_source() -> None:
    import datetime

    from torchimages.kb import sync

    tag, text = sync.source_tag(["https://alice:s3cret@mirror.example/simple"], datetime.date(2026, 12, 6))
    assert "s3cret" not in text and "alice" not in text and "https://mirror.example/simple" in text
    assert tag == sync.source_tag(["https://mirror.example/simple"], datetime.date(2026, 12, 6))[0]


def test_plan_check_sources_says_what_a_build_would_lack(
    cli: Any, write_matrix: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`plan --check-sources` asks what `build` asks before it starts (cli.common.check_reachable) and exits 1
    naming the wheels no source serves; without the flag, plan asks nothing."""
    for name in ("TORCHIMAGES_INDEX_URL", "TORCHIMAGES_EXTRA_INDEX_URLS", "TORCHIMAGES_FIND_LINKS"):
        monkeypatch.delenv(name, raising=False)
    matrix = write_matrix("matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12, flavors: [runtime]}\n")
    with served({"/simple/torch/": _page("torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl")}) as url:
        code, out, err = cli("plan", "--matrix", str(matrix), "--bases", "bootstrap", "--index-url", f"{url}/simple",
                             "--check-sources", "2.13.0-cpu-runtime")  # fmt: skip
        assert code == 1, out + err
        assert "no source serves torch 2.13.0+cpu" in err and "plan: the selection cannot be built" in err
        code, out, err = cli("plan", "--matrix", str(matrix), "--index-url", f"{url}/simple", "2.13.0-cpu-runtime")
        assert code == 0 and "no source serves" not in err


def test_every_wheel_a_dockerfile_pins_is_looked_for(tmp_path: Path) -> None:
    """torch and torchvision of a CUDA 13.0 image are pinned `==2.14.1,!=2.14.1+cpu,...`: each is a Need, with
    torchaudio's and numpy's exact pins; none is passed over."""
    from torchimages.building.wheels import WheelSources
    from torchimages.planning import plan

    path = tmp_path / "matrix.yaml"
    path.write_text("matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0', os: ubuntu24.04}\n")
    chosen = plan.select(plan.load(path), ["2.14.1-cuda13.0-cudnn9-runtime"])
    wanted = {n.project: n for n in reach.needs(chosen, WheelSources())}
    assert {"torch", "torchvision", "torchaudio", "numpy"} <= set(wanted)
    assert wanted["torch"].version == "2.14.1" and "2.14.1+cpu" in (wanted["torch"].excluded or ())
    assert reach.matches("torch-2.14.1+cu130-cp312-cp312-manylinux_2_28_x86_64.whl", wanted["torch"])
    assert not reach.matches("torch-2.14.1+cpu-cp312-cp312-manylinux_2_28_x86_64.whl", wanted["torch"])


@pytest.mark.parametrize(
    ("version", "filename", "expected"),
    [
        ("2.7", "torch-2.7.0-cp310-cp310-manylinux_2_28_x86_64.whl", True),  # pip pads with zeros
        ("2.7.0", "torch-2.7.0+cu118-cp310-cp310-manylinux_2_28_x86_64.whl", True),  # a plain pin takes any build
        ("2.7.0", "torch-2.7.1-cp310-cp310-manylinux_2_28_x86_64.whl", False),
        ("2.7.0+cu118", "torch-2.7.0+cu126-cp310-cp310-manylinux_2_28_x86_64.whl", False),
    ],
)
def test_a_pin_matches_as_pip_reads_it(version: str, filename: str, expected: bool) -> None:
    """The check takes what pip's `==` takes, no more and no less: else it refuses a build pip would serve."""
    need = reach.Need("torch", version, "3.10", "linux/amd64", (), "https://own.example/whl", ("t",))
    assert reach.matches(filename, need) is expected
