"""The set-up scripts keep nothing of one machine: start-docker.sh takes trixie's URI from the machine's own
Debian source, and host-pip-sources passes only the pip sources that exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.unit.conftest import ROOT

START_DOCKER = ROOT / "scripts" / "start-docker.sh"
DEBIAN_SOURCES = ROOT / "scripts" / "debian-sources.sh"  # debian_uri(), sourced by start-docker.sh
HOST_PIP_SOURCES = ROOT / "scripts" / "host-pip-sources"


def debian_uri(apt_etc: Path, suite: str = "bookworm") -> str:
    """Run debian_uri() (scripts/debian-sources.sh) against a folder laid out as /etc/apt."""
    script = f". {DEBIAN_SOURCES}\ndebian_uri {suite} | head -n1"
    env = {"PATH": os.environ["PATH"], "APT_ETC": str(apt_etc)}
    return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=True).stdout.strip()


def test_start_docker_names_no_host() -> None:
    for script in (START_DOCKER, DEBIAN_SOURCES):
        assert not re.search(r"https?://", script.read_text()), script


def test_the_deb822_source_of_the_suite_gives_the_uri(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n# a comment inside the stanza\nURIs: http://mirror.example/debian\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n\n"
        "Types: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n"
    )
    (tmp_path / "sources.list.d" / "other.sources").write_text(
        "Types: deb\nURIs: https://vendor.example/apt\nSuites: nodistro\nComponents: main\n"
    )
    assert debian_uri(tmp_path) == "http://mirror.example/debian"


def test_a_disabled_or_source_only_stanza_is_passed_over(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "x.sources").write_text(
        "Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nEnabled: no\n\n"
        "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n\n"
        "Types: deb deb-src\nURIs: http://on.example/debian http://two.example/debian\nSuites: bookworm\n"
    )
    assert debian_uri(tmp_path) == "http://on.example/debian"


def test_a_one_line_source_with_options_gives_the_uri(tmp_path: Path) -> None:
    (tmp_path / "sources.list").write_text(
        "deb-src http://src.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://mirror.example/debian bookworm main\n"
    )
    assert debian_uri(tmp_path) == "http://mirror.example/debian"


def test_no_source_of_the_suite_gives_nothing(tmp_path: Path) -> None:
    (tmp_path / "sources.list").write_text("deb http://mirror.example/debian trixie main\n")
    assert debian_uri(tmp_path) == ""


def host_pip_sources(tmp_path: Path, **pip: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "TORCHIMAGES_"))}
    env.update({"PIP_CONFIG_FILE": os.devnull, "PYTHON": sys.executable, "HOME": str(tmp_path)}, **pip)
    return subprocess.run([str(HOST_PIP_SOURCES)], env=env, capture_output=True, text=True, check=True)


def test_host_pip_sources_passes_only_sources_that_exist(tmp_path: Path) -> None:
    index, wheels, cert = tmp_path / "simple", tmp_path / "wheels", tmp_path / "ca.pem"
    index.mkdir()
    wheels.mkdir()
    cert.write_text("")
    result = host_pip_sources(
        tmp_path,
        PIP_EXTRA_INDEX_URL=f"file://{tmp_path}/gone/simple file://{index} https://mirror.example/simple",
        PIP_FIND_LINKS=f"{tmp_path}/gone {wheels}",
        PIP_CERT=str(cert),
    )
    exports = dict(re.findall(r"^export (\w+)='(.*)'$", result.stdout, re.M))
    assert exports["TORCHIMAGES_EXTRA_INDEX_URLS"] == f"https://mirror.example/simple file://{index}"
    assert exports["TORCHIMAGES_FIND_LINKS"] == str(wheels)
    assert exports["TORCHIMAGES_CA_CERT"] == str(cert)
    assert f"{tmp_path}/gone/simple, which does not exist here" in result.stderr
    assert f"{tmp_path}/gone, which does not exist here" in result.stderr


def test_host_pip_sources_prints_nothing_when_no_local_source_exists(tmp_path: Path) -> None:
    result = host_pip_sources(
        tmp_path, PIP_EXTRA_INDEX_URL=f"file://{tmp_path}/gone", PIP_FIND_LINKS=f"{tmp_path}/gone", PIP_CERT="/gone.pem"
    )
    assert result.stdout == ""
