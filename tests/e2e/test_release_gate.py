"""The release gate through the product, on the CPU image for real: `build` refuses a credentials file that a
lower layer holds (a later layer deletes it); refuses pending OS security updates found against the Debian
security suite, then passes them once allowlisted, the allowlist in the report, the Python scan "not scanned"
there, the image pushed to a loopback registry and signed; `verify-signature` checks it; `outdated` says the
image is stale without the allowlist and current with it.

The old packages are real (as in test_os_updates.py): a base FROM the bootstrapped one installs unzip and zip
at the main suite's versions (`PKG/bookworm`, the last point release) where bookworm-security has
newer ones; the image's Dockerfile (rendered, then its FROM pointed at that base) keeps them.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import subprocess
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from torchimages import compat, engine
from torchimages.building import bootstrap
from torchimages.security import allowlist, signing

from .conftest import CPU, remove_repository, require, run_cli, start_registry

pytestmark = pytest.mark.e2e

PASSWORD = "e2e-gate-password"
# The allowlist's entries last a month: within its horizon (allowlist.MAX_DAYS_AHEAD) whenever the test runs.
EXPIRES = (allowlist.utc_today() + datetime.timedelta(days=30)).isoformat()
OLD_PACKAGES = ("unzip", "zip")  # no package the image installs depends on them: they stay old
OLD_BASE = """\
FROM {base} AS old
RUN apt-get update \\
    && apt-get install -y --no-install-recommends {wanted} \\
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
"""
# Two steps planted at the end of the runtime stage, as root: the second deletes what the first wrote, so the
# final file system is clean and only the layer below holds the credentials.
PLANTED = (
    "USER 0:0\n"
    "RUN printf 'machine wheels.example.org login ci password hunter2\\n' > /root/.netrc\n"
    "RUN rm /root/.netrc\n"
)


@dataclass(frozen=True)
class Setup:
    matrix: Path
    repository: str
    tag: str  # the runtime image's
    dockerfile: Path
    rendered: str  # the Dockerfile as rendered
    old_base: str
    registry: str
    key: Path
    public: Path
    tmp: Path


@pytest.fixture(scope="module")
def setup(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("gate")
    key, public = key_pair(tmp)
    with contextlib.contextmanager(start_registry)(tmp / "registry") as registry:
        yield from _setup(docker_client, tmp, registry, key, public)


def _setup(docker_client: Any, tmp: Path, registry: str, key: Path, public: Path) -> Iterator[Setup]:
    debian = compat.load().os["debian12"]
    real = engine.DockerEngine()
    bootstrap.ensure(real, debian, None, tmp / "bootstrap.log")
    old_base = f"torchimages-e2e-gate/old-base:{tmp.name}"
    (tmp / "base").mkdir()
    wanted = " ".join(f"{p}/{debian.suite}" for p in OLD_PACKAGES)
    (tmp / "base" / "Dockerfile").write_text(OLD_BASE.format(base=debian.image, wanted=wanted))
    with (tmp / "base.log").open("wb") as log:
        status = real.build(engine.BuildRequest(tmp / "base", tmp / "base" / "Dockerfile", "old", old_base), log)
    assert status == 0, (tmp / "base.log").read_text()[-3000:]
    repository = f"{registry}/torchimages-e2e-{uuid.uuid4().hex[:8]}/pytorch"
    matrix = tmp / "matrix.yaml"
    matrix.write_text(textwrap.dedent(f"repository: {repository}\nmatrix:\n  include:\n    - {CPU}\n"))
    render = run_cli("render", "--matrix", matrix)
    assert render.returncode == 0, render.stderr
    (dockerfile,) = (tmp / "images").glob("*/Dockerfile")
    try:
        yield Setup(
            matrix,
            repository,
            "2.13.0-cpu-runtime",
            dockerfile,
            dockerfile.read_text(),
            old_base,
            registry,
            key,
            public,
            tmp,
        )
    finally:
        remove_repository(docker_client, repository)
        real.remove_image(old_base)


def key_pair(folder: Path) -> tuple[Path, Path]:
    """A cosign key pair made here, its password PASSWORD."""
    binary = signing.find_cosign()
    if binary is None:
        require(signing.HOW_TO_GET_COSIGN)
    env = {**os.environ, "COSIGN_PASSWORD": PASSWORD}
    done = subprocess.run([str(binary), "generate-key-pair"], cwd=folder, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return folder / "cosign.key", folder / "cosign.pub"


def build(setup: Setup, *args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COSIGN_PASSWORD": PASSWORD}
    logs = setup.tmp / f"logs-{uuid.uuid4().hex[:6]}"
    return run_cli("build", "--matrix", setup.matrix, "--log-dir", logs, "--test", "none", *args, setup.tag, env=env)


def test_a_credentials_file_a_later_layer_deletes_is_refused(setup: Setup, docker_client: Any) -> None:
    marker = "ENV PIP_CONSTRAINT=/etc/pip/constraint.txt "
    planted = setup.rendered.replace(marker, PLANTED + marker, 1)
    assert planted != setup.rendered
    setup.dockerfile.write_text(planted)
    try:
        result = build(setup)
    finally:
        setup.dockerfile.write_text(setup.rendered)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert re.search(r"secrets: layer \d+ of \d+ \(sha256:[0-9a-f]{12}\), deleted in layer \d+", output), output
    assert "/root/.netrc: a netrc file (logins and passwords)" in output
    assert docker_client.images.list(name=f"{setup.repository}:{setup.tag}") == []


def test_pending_security_updates_are_refused_then_pass_allowlisted_signed_and_outdated_says_so(
    setup: Setup, docker_client: Any
) -> None:
    setup.dockerfile.write_text(
        setup.rendered.replace(
            "FROM torchimages/bootstrap-debian:12 AS runtime", f"FROM {setup.old_base} AS runtime", 1
        )
    )
    # The apt step upgrades what -security has newer: planted without it (as an image built before it, or by a
    # Dockerfile of one's own), the old base's packages stay, and the gate is what must stop the image.
    steps = setup.dockerfile.parent / "steps" / "apt-install.sh"
    script = steps.read_text()
    upgrade = "plan=$(apt-get dist-upgrade --simulate)"
    assert upgrade in script
    steps.write_text(script.replace(upgrade, 'plan=""', 1))
    try:
        refused = build(setup)
        output = refused.stdout + refused.stderr
        assert refused.returncode == 1, output
        pending = dict(re.findall(r"os-updates: (\S+) \S+: newer in bookworm-security: (\S+)", output))
        assert set(OLD_PACKAGES) <= set(pending), output
        assert docker_client.images.list(name=f"{setup.repository}:{setup.tag}") == []

        allow = setup.tmp / "allow.yaml"
        entries = "".join(
            f"  - {{check: os-updates, id: {p}, reason: e2e, expires: {EXPIRES}}}\n" for p in sorted(pending)
        )
        allow.write_text("entries:\n" + entries)
        report = setup.tmp / "report"
        passed = build(setup, "--allowlist", allow, "--report", report, "--push", "--sign-key", setup.key)
        assert passed.returncode == 0, passed.stdout + passed.stderr
        # `outdated` judges the image against its build context: the planted one it was built from.
        _signed_and_outdated_says_so(setup, report, allow, set(pending))
    finally:
        setup.dockerfile.write_text(setup.rendered)
        steps.write_text(script)


def _signed_and_outdated_says_so(setup: Setup, report: Path, allow: Path, pending: set[str]) -> None:
    (image,) = [i for i in json.loads((report / "manifest.json").read_text())["images"] if i["tag"] == setup.tag]
    checks = {c["check"]: c for c in image["security"]}
    assert checks["secrets"]["status"] == "passed"
    assert checks["os-updates"]["status"] == "passed"
    assert {a["key"] for a in checks["os-updates"]["allowed"]} == set(pending)
    assert all(a["reason"] == "e2e" and a["expires"] == EXPIRES for a in checks["os-updates"]["allowed"])
    assert checks["python"]["status"] == "not scanned", checks["python"]  # pip-audit's service: not here
    assert checks["python"]["note"]

    reference = f"{setup.repository}:{setup.tag}"
    verified = run_cli("verify-signature", reference, "--key", setup.public)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert re.search(r"sha256:[0-9a-f]{64}", verified.stdout)

    stale = run_cli("outdated", "--matrix", setup.matrix, setup.tag)
    assert stale.returncode == 1, stale.stdout + stale.stderr
    assert "stale" in stale.stdout and all(f"os-updates: {p} " in stale.stdout for p in pending)
    current = run_cli("outdated", "--matrix", setup.matrix, "--allowlist", allow, setup.tag)
    assert current.returncode == 0, current.stdout + current.stderr
    assert "not scanned: python:" in current.stdout  # said, never passed in silence
    strict = run_cli("outdated", "--matrix", setup.matrix, "--allowlist", allow, "--require-scan", setup.tag)
    assert strict.returncode == 1, strict.stdout
