"""Transient network failures are retried, and the build log says so. One real build meets two faults:
a wheel server that drops the first connection to every path (uv's own retries, UV_HTTP_RETRIES in every
uv step, logged by its retry module) and an HTTP proxy for apt that goes down for a few seconds at the
first index request (the Dockerfile's retry of apt's network steps). The image is still built and verified."""

from __future__ import annotations

import functools
import http.server
import json
import os
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from torchimages import compat, engine, render
from torchimages.building.wheels import local_path

from .conftest import NO_LAYER_SCAN, remove_repository, require, run_cli
from .flaky import OutageProxy

pytestmark = pytest.mark.e2e
ENTRY = "{torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none, flavors: [runtime]}"


class _DropFirstHandler(http.server.SimpleHTTPRequestHandler):
    """Closes the connection without an answer the first time each path is asked for."""

    def do_GET(self) -> None:
        dropped: set[str] = self.server.dropped  # type: ignore[attr-defined]
        if self.path not in dropped:
            dropped.add(self.path)
            self.close_connection = True
            return
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def flaky_wheel_folder() -> Iterator[tuple[str, set[str]]]:
    """This machine's local wheel folder (TORCHIMAGES_FIND_LINKS) served on loopback, flakily."""
    folders = [p for u in os.environ.get("TORCHIMAGES_FIND_LINKS", "").split() if (p := local_path(u)) and p.is_dir()]
    if not folders:
        require("no local wheel folder in TORCHIMAGES_FIND_LINKS to serve (see scripts/host-pip-sources)")
    handler = functools.partial(_DropFirstHandler, directory=str(folders[0]))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.dropped = set()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", server.dropped  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def docker_config_with_flaky_apt_proxy(tmp_path: Path) -> Iterator[tuple[Path, OutageProxy]]:
    """A docker client configuration whose proxy (handed to builds as http_proxy, Docker's own feature
    for users behind a proxy) is an `OutageProxy`; loopback (the wheel server) is not proxied."""
    proxy = OutageProxy(trigger="InRelease", outage_s=2.5)
    config = tmp_path / "docker-config"
    config.mkdir()
    proxies = {"default": {"httpProxy": proxy.url, "noProxy": "127.0.0.1,localhost"}}
    (config / "config.json").write_text(json.dumps({"proxies": proxies}))
    try:
        yield config, proxy
    finally:
        proxy.close()


def test_transient_failures_are_retried_and_the_log_says_so(
    flaky_wheel_folder: tuple[str, set[str]],
    docker_config_with_flaky_apt_proxy: tuple[Path, OutageProxy],
    docker_client: Any,
    tmp_path: Path,
    ca_bundle: tuple[Path, bytes],
) -> None:
    url, dropped = flaky_wheel_folder
    docker_config, apt_proxy = docker_config_with_flaky_apt_proxy
    repository = f"torchimages-e2e-{uuid.uuid4().hex[:8]}/pytorch"
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(textwrap.dedent(f"repository: {repository}\nmatrix:\n  include:\n    - {ENTRY}\n"))
    assert run_cli("render", "--matrix", matrix).returncode == 0
    logs = tmp_path / "logs"
    # the flaky server instead of the folder itself; the client configuration with the flaky proxy
    env = {**os.environ, "TORCHIMAGES_FIND_LINKS": url, "DOCKER_CONFIG": str(docker_config)}
    try:
        result = run_cli(
            "build", "--matrix", matrix, "--no-cache", "--network", "host", "--test", "none", *NO_LAYER_SCAN,
            "--log-dir", logs, "--ca-cert", ca_bundle[0], "*",
            env=env,
        )  # fmt: skip
        output = result.stdout + result.stderr
        assert result.returncode == 0, output
        assert "1 built" in output
        assert any(path.endswith(".whl") for path in dropped), sorted(dropped)
        log = next(logs.glob("*runtime*.log")).read_text(errors="replace")
        assert f"Transient request failure for `{url}" in log and "retrying" in log, "uv's retry is not in the log"
        assert apt_proxy.failed and apt_proxy.served_after > 0, (apt_proxy.failed, apt_proxy.served_after)
        apt_retry = "torchimages: network step failed, retry 1/2 in 10 s: apt-get update"
        assert apt_retry in log, "apt's retry is not in the build log"
    finally:
        remove_repository(docker_client, repository)


def test_an_unknown_apt_package_fails_at_once_and_is_not_retried(docker_client: Any, tmp_path: Path) -> None:
    """The generated apt block with a package no archive has: a real error, said by apt, never retried
    (no `retry` line, no 10 s wait). The block is rendered by the templates, built by the real engine."""
    templates = render.jinja_environment(render.DEFAULT_TEMPLATES)
    macros: Any = templates.get_template("macros.j2").module
    context = {"os_packages_file": str(render.OS_PACKAGES_FILE), "os_packages_dir": str(render.OS_PACKAGES_FILE.parent)}
    block = macros.apt_run(["torchimages-no-such-package"])
    (tmp_path / "steps").mkdir()
    for name in ("apt-install.sh", "common.sh"):
        (tmp_path / "steps" / name).write_text(templates.get_template(f"steps/{name}.j2").render(image=context))
    base = compat.load().os["debian12"].image
    (tmp_path / "Dockerfile").write_text(
        f'FROM {base} AS probe\nSHELL ["/bin/bash", "-o", "pipefail", "-c"]\n{block}\n'
    )
    reference = f"torchimages-e2e-{uuid.uuid4().hex[:8]}/apt-probe:unknown"
    request = engine.BuildRequest(tmp_path, tmp_path / "Dockerfile", "probe", reference, no_cache=True)
    log = tmp_path / "build.log"
    started = time.monotonic()
    with log.open("wb") as handle:
        status = engine.DockerEngine().build(request, handle)
    took = time.monotonic() - started
    text = log.read_text(errors="replace")
    assert status != 0, text
    assert "Unable to locate package torchimages-no-such-package" in text, text
    assert "retry 1/2 in 10 s" not in text and took < 60, (took, text[-2000:])  # the command line has the echo
    assert not docker_client.images.list(name=reference.split(":")[0])
