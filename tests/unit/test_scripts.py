"""The set-up scripts keep nothing of one machine: start-docker.sh takes trixie's URI from the machine's own
Debian source, and host-pip-sources passes only the pip sources that exist, each quoted so that `eval` runs nothing
of pip's configuration."""

from __future__ import annotations

import json
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


EXPORTED = ("TORCHIMAGES_INDEX_URL", "TORCHIMAGES_EXTRA_INDEX_URLS", "TORCHIMAGES_FIND_LINKS", "TORCHIMAGES_CA_CERT")


def evaluated(output: str, shell: str = "bash", cwd: Path | None = None) -> dict[str, str]:
    """What `eval "$(scripts/host-pip-sources)"` sets in `shell` (as `make build` does): the exported values set."""
    script = 'eval "$1"; for n in ' + " ".join(EXPORTED) + '; do eval "printf \'%s=%s\\0\' $n \\"\\${$n-}\\""; done'
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHIMAGES_")}
    done = subprocess.run([shell, "-c", script, "sh", output], env=env, cwd=cwd, capture_output=True, check=True)
    pairs = (item.decode().split("=", 1) for item in done.stdout.split(b"\0") if item)
    return {name: value for name, value in pairs if value}


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
    exports = evaluated(result.stdout)
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


def test_host_pip_sources_output_runs_nothing_of_a_hostile_pip_configuration(tmp_path: Path) -> None:
    """A quote, `;`, `$(...)` or a backtick in pip's configuration or PIP_* variables is text that arrives intact."""
    index, pwn = tmp_path / "simple", tmp_path / "pwn"
    index.mkdir()
    cert = tmp_path / "ca';touch pwn6;'.pem"  # a file name holds no '/': pwn6 would be made in the folder eval runs in
    cert.write_text("")
    hostile_index = f"https://idx.example/simple/';touch${{IFS}}{pwn}1;#"
    hostile_links = f"https://links.example/$(touch${{IFS}}{pwn}2) https://l.example/`touch${{IFS}}{pwn}3`"
    hostile_extra = f"https://x.example/\"';touch${{IFS}}{pwn}4;#"
    (tmp_path / "pip.conf").write_text(
        f"[global]\nindex-url = {hostile_index}\nfind-links = {hostile_links}\n"
        f"extra-index-url = \"';touch${{IFS}}{pwn}5;#\ncert = {cert}\n"
    )
    result = host_pip_sources(
        tmp_path, PIP_CONFIG_FILE=str(tmp_path / "pip.conf"), PIP_EXTRA_INDEX_URL=f"{hostile_extra} file://{index}"
    )
    for shell in ("bash", "sh"):
        assert evaluated(result.stdout, shell, cwd=tmp_path) == {
            "TORCHIMAGES_INDEX_URL": hostile_index,
            "TORCHIMAGES_EXTRA_INDEX_URLS": f"{hostile_extra} file://{index}",
            "TORCHIMAGES_FIND_LINKS": hostile_links,
            "TORCHIMAGES_CA_CERT": str(cert),
        }
    assert not list(tmp_path.glob("pwn*")), "eval ran a command from pip's configuration"


def test_host_pip_sources_passes_the_config_files_value_intact(tmp_path: Path) -> None:
    """A config file's value (no PIP_* variable) with a quote or `$` arrives intact, as pip reads it."""
    cert = tmp_path / "it's $HOME.pem"
    cert.write_text("")
    pwn = tmp_path / "pwn"
    (tmp_path / "pip.conf").write_text(f"[global]\ncert = {cert}\nextra-index-url = \"';touch${{IFS}}{pwn};#\n")
    result = host_pip_sources(tmp_path, PIP_CONFIG_FILE=str(tmp_path / "pip.conf"))
    assert evaluated(result.stdout) == {
        "TORCHIMAGES_CA_CERT": str(cert),
        "TORCHIMAGES_EXTRA_INDEX_URLS": f"\"';touch${{IFS}}{pwn};#",
    }
    assert not pwn.exists()


def test_host_pip_sources_passes_every_line_of_a_multi_line_setting(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (tmp_path / "pip.conf").write_text(f"[global]\nextra-index-url =\n    file://{one}\n    file://{two}\n")
    result = host_pip_sources(tmp_path, PIP_CONFIG_FILE=str(tmp_path / "pip.conf"))
    assert evaluated(result.stdout)["TORCHIMAGES_EXTRA_INDEX_URLS"] == f"file://{one} file://{two}"


def test_host_pip_sources_leaves_out_a_value_with_a_control_character(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    result = host_pip_sources(
        tmp_path, PIP_EXTRA_INDEX_URL="https://a.example/\x1b[2J\rsimple", PIP_FIND_LINKS=str(wheels)
    )
    assert evaluated(result.stdout) == {"TORCHIMAGES_FIND_LINKS": str(wheels)}
    assert "\x1b" not in result.stdout + result.stderr
    assert "extra-index-url holds a control character: not passed to builds" in result.stderr


def test_host_pip_sources_never_puts_pypi_in_place_of_an_index_it_cannot_pass(tmp_path: Path) -> None:
    """Second outside attack: pip's own index-url holds a control character: nothing is exported (exit 1, said),
    rather than PyPI as the index beside the local ones."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "TORCHIMAGES_"))}
    env.update({"PIP_CONFIG_FILE": os.devnull, "PYTHON": sys.executable, "HOME": str(tmp_path)})
    env.update(PIP_INDEX_URL="https://mirror.example/\x1bsimple", PIP_FIND_LINKS=str(wheels))
    result = subprocess.run([str(HOST_PIP_SOURCES)], env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 1 and result.stdout == "", result.stdout
    assert "index-url cannot be passed to builds: nothing passed" in result.stderr


def containerd_store(daemon_json: Path) -> subprocess.CompletedProcess[str]:
    """Run containerd_store() (scripts/engine-store.sh, sourced by start-docker.sh before it starts dockerd)."""
    script = f'. {ROOT / "scripts" / "engine-store.sh"}\ncontainerd_store "$1"'
    env = {"PATH": os.environ["PATH"]}
    return subprocess.run(["bash", "-c", script, "x", str(daemon_json)], env=env, capture_output=True, text=True)


def test_an_engine_started_here_gets_the_containerd_store_where_no_daemon_json_says_otherwise(tmp_path: Path) -> None:
    daemon_json = tmp_path / "etc" / "docker" / "daemon.json"
    done = containerd_store(daemon_json)
    assert done.returncode == 0, done.stderr
    assert json.loads(daemon_json.read_text()) == {"features": {"containerd-snapshotter": True}}
    assert "wrote" in done.stderr and "containerd image store" in done.stderr and "unseen" in done.stderr
    again = containerd_store(daemon_json)  # the feature named: nothing said, nothing changed
    assert again.returncode == 0 and again.stderr == ""
    assert json.loads(daemon_json.read_text()) == {"features": {"containerd-snapshotter": True}}


def test_a_machines_own_daemon_json_is_left_as_it_is(tmp_path: Path) -> None:
    own = tmp_path / "daemon.json"
    own.write_text('{"data-root": "/srv/docker"}\n')
    done = containerd_store(own)
    assert done.returncode == 0
    assert own.read_text() == '{"data-root": "/srv/docker"}\n'
    assert "is there and does not name containerd-snapshotter: left as it is" in done.stderr
    dangling = tmp_path / "link.json"
    dangling.symlink_to(tmp_path / "nowhere.json")  # a link is the machine's: never written through
    done = containerd_store(dangling)
    assert done.returncode == 0 and not (tmp_path / "nowhere.json").exists()
    assert "is a link to nothing: left as it is" in done.stderr


def test_a_daemon_json_that_cannot_be_written_fails(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = containerd_store(blocker / "docker" / "daemon.json")  # its folder cannot be made
    assert done.returncode == 1
    folder = tmp_path / "daemon.json.d"
    folder.mkdir()
    done = containerd_store(folder)
    assert done.returncode == 1 and "is a folder, not a configuration file for dockerd" in done.stderr
