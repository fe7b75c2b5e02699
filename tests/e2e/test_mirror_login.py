"""A `--mirror` with a login (issue 42) on a real engine: a loopback HTTP server that asks for basic auth in front
of this machine's own Debian mirror (read from its apt configuration at test time), a debian12 base bootstrapped
through it (under a name of its own: the shared engine's base is left alone), and an image whose apt step (the
project's macro and apt-install.sh) fetches through it with the aptauth secret. Neither holds the login in a
layer, a label or the history; the secrets gate fails an image whose apt sources hold one. About two minutes:
the base's packages come through the loopback server."""

from __future__ import annotations

import base64
import contextlib
import http.server
import re
import shutil
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from torchimages import compat, engine, platforms, render, values
from torchimages.building import bootstrap
from torchimages.engine import BuildRequest
from torchimages.security import layers

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
STEPS = ROOT / "images" / "2.13.0-cpu-py3.11-debian12" / "steps"  # the committed apt-install.sh and common.sh
USER, PASSWORD = "builder", f"pw-{uuid.uuid4().hex}"
APT_SOURCES = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]


def host_debian_mirror() -> str | None:
    """This machine's Debian archive (an http URL ending in /debian) from its apt sources, one-line or deb822."""
    for path in APT_SOURCES:
        if path.suffix not in (".list", ".sources") or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        for url in re.findall(r"^(?:deb(?:[ \t]+\[[^\]]*\])?|URIs:)[ \t]+(http://\S+)", text, re.MULTILINE):
            if str(url).rstrip("/").endswith("/debian"):
                return str(url).rstrip("/")
    return None


class Server(http.server.ThreadingHTTPServer):
    upstream: str
    expected: str
    served: int = 0
    refused: int = 0


class Handler(http.server.BaseHTTPRequestHandler):
    """Basic auth, then the upstream's answer for the same path below /debian, streamed."""

    server: Server

    def do_GET(self) -> None:
        self.answer(body=True)

    def do_HEAD(self) -> None:
        self.answer(body=False)

    def answer(self, body: bool) -> None:
        if self.headers.get("Authorization") != self.server.expected:
            self.server.refused += 1
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="mirror"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.server.served += 1
        try:
            upstream = urllib.request.urlopen(self.server.upstream + self.path.removeprefix("/debian"), timeout=120)
        except urllib.error.HTTPError as exc:
            self.send_response(exc.code)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        with upstream:
            self.send_response(200)
            for name in ("Content-Length", "Last-Modified", "Content-Type"):
                if upstream.headers.get(name):
                    self.send_header(name, upstream.headers[name])
            self.end_headers()
            if body:
                shutil.copyfileobj(upstream, self.wfile, 1 << 20)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@dataclass(frozen=True)
class Mirror:
    server: Server
    url: str  # with the login, as --mirror takes it


@pytest.fixture(scope="module")
def mirror() -> Iterator[Mirror]:
    upstream = host_debian_mirror()
    if upstream is None:
        pytest.skip("this machine's apt sources name no http Debian mirror (.../debian)")
    server = Server(("127.0.0.1", 0), Handler)
    server.upstream = upstream
    server.expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Mirror(server, f"http://{USER}:{PASSWORD}@127.0.0.1:{server.server_port}/debian")
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True)
class Made:
    base: str
    image: str
    planted: str
    build_status: int
    log: str


def history_and_labels(client: Any, reference: str) -> str:
    image = client.images.get(reference)
    history = " ".join(str(step.get("CreatedBy", "")) for step in client.api.history(reference))
    return f"{image.labels} {history}"


@pytest.fixture(scope="module")
def made(mirror: Mirror, docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    """The base bootstrapped through the mirror, an image whose apt step installs a package through it, and an
    image that writes the login into its apt sources (the gate's subject); removed afterwards."""
    marker = uuid.uuid4().hex[:8]
    debian = compat.load().os["debian12"]
    base = bootstrap.Base(debian, platforms.DEFAULT, f"torchimages-e2e-{marker}/bootstrap-debian:12")
    image, planted = f"torchimages-e2e-{marker}/apt-login:1", f"torchimages-e2e-{marker}/planted:1"
    folder = tmp_path_factory.mktemp("mirror-login")
    try:
        bootstrap.ensure(engine.DockerEngine(), debian, mirror.url, folder / "bootstrap.log", base=base)
        shutil.copytree(STEPS, folder / "steps")
        macros: Any = render.jinja_environment(render.DEFAULT_TEMPLATES).get_template("macros.j2").module
        (folder / "Dockerfile").write_text(f"FROM {base.reference} AS runtime\n{macros.apt_run(['less'])}\n")
        auth = folder / "auth.conf"
        auth.write_text(bootstrap.apt_auth_text(mirror.url))
        request = BuildRequest(
            folder, folder / "Dockerfile", "runtime", image, secrets=(("aptauth", auth),), network="host"
        )
        with (folder / "build.log").open("wb") as log:
            status = engine.DockerEngine().build(request, log)
        bare = values.mirror_without_login(mirror.url)
        (folder / "planted").mkdir()
        (folder / "planted" / "Dockerfile").write_text(
            f"FROM {base.reference}\n"
            f"RUN echo 'deb {mirror.url.replace(PASSWORD, 'other-password')} bookworm main' > "
            "/etc/apt/sources.list.d/mirror.list\n"
        )
        docker_client.images.build(path=str(folder / "planted"), tag=planted, rm=True, network_mode="none")
        assert bare != mirror.url
        yield Made(base.reference, image, planted, status, (folder / "build.log").read_text(errors="replace"))
    finally:
        for reference in (planted, image, base.reference):
            with contextlib.suppress(Exception):  # not made: nothing to remove
                docker_client.images.remove(reference, force=True)


def test_a_base_and_an_image_made_through_a_mirror_with_a_login_hold_it_nowhere(
    made: Made, mirror: Mirror, docker_client: Any
) -> None:
    assert made.build_status == 0, made.log[-3000:]
    assert mirror.server.served > 0  # every package came through the login-guarded server
    bare = values.mirror_without_login(mirror.url)
    labels = docker_client.images.get(made.base).labels
    assert labels[bootstrap.SOURCES_LABEL].startswith(bare)
    assert labels[bootstrap.RELEASE_DATE_LABEL] != "unknown"
    for reference in (made.base, made.image):
        assert PASSWORD not in history_and_labels(docker_client, reference), reference
        secrets = [("--mirror", mirror.url.encode()), ("apt auth.conf", bootstrap.apt_auth_text(mirror.url).encode())]
        result = layers.scan(engine.DockerEngine(), reference, secrets)
        assert result.scanned, result.note
        assert result.findings == (), result.findings  # no login, no auth file, no sources with it, no leftovers
    sources = docker_client.containers.run(made.image, "cat /etc/apt/sources.list", remove=True).decode()
    assert bare in sources and PASSWORD not in sources


def test_the_gate_fails_an_image_whose_apt_sources_hold_a_login(made: Made) -> None:
    result = layers.scan(engine.DockerEngine(), made.planted, ())
    assert result.scanned, result.note
    found = {f.key: f.detail for f in result.findings}
    assert found == {
        "/etc/apt/sources.list.d/mirror.list": "/etc/apt/sources.list.d/mirror.list: "
        "apt sources with credentials in a URL"
    }
