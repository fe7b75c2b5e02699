"""The platform probe (torchimages/probes/scripts/platform.py) on this host, as the image runs it: its functions
loaded from the package data, and the whole script as a subprocess of this Python with a made-up HOME, temporary
folder and caches. A folder is writable only when a file was written in it: one that exists is not, by that alone.
Without torch here, the DataLoader part answers its import error (said, not skipped)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import pytest

from torchimages.probes import parse_payload, probe_source

HAS_TORCH = importlib.util.find_spec("torch") is not None


@pytest.fixture(scope="module")
def probe() -> types.ModuleType:
    module = types.ModuleType("platform_probe")
    exec(compile(probe_source("platform"), "platform.py", "exec"), module.__dict__)
    return module


def unwritable_folder(tmp_path: Path) -> str:
    """A folder that exists and where no file can be written: a read-only one (not as root), else /sys (sysfs
    refuses new files, to root too)."""
    if os.geteuid() != 0:
        folder = tmp_path / "read-only"
        folder.mkdir(mode=0o555)
        return str(folder)
    if not os.path.isdir("/sys"):
        pytest.skip("running as root on a host without /sys: no folder here refuses a new file")
    try:
        with tempfile.NamedTemporaryFile(dir="/sys"):
            pytest.skip("/sys takes new files here: no folder refuses one to root")
    except OSError:
        return "/sys"


def test_an_existing_folder_where_no_file_can_be_written_is_not_writable(
    probe: types.ModuleType, tmp_path: Path
) -> None:
    folder = unwritable_folder(tmp_path)
    assert os.path.isdir(folder)
    found = probe.writable(folder)
    assert found["writable"] is False and found["path"] == folder
    assert found["error"].startswith(("PermissionError", "OSError", "FileNotFoundError")), found


def test_a_folder_is_made_if_missing_written_to_and_left_as_it_was(probe: types.ModuleType, tmp_path: Path) -> None:
    cache = tmp_path / "home" / ".cache" / "pip"
    found = probe.writable(str(cache))
    assert found == {"path": str(cache), "read_only": False, "noexec": found["noexec"], "writable": True}
    assert cache.is_dir() and list(cache.iterdir()) == []  # the file written is removed, the folder stays
    assert probe.writable(str(cache))["writable"] is True  # an existing writable one too


def test_a_path_under_a_file_is_not_writable(probe: types.ModuleType, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    found = probe.writable(str(tmp_path / "file" / "cache"))
    assert found["writable"] is False and "Error" in found["error"]


def test_the_mount_flags_are_read_from_the_nearest_existing_folder(probe: types.ModuleType, tmp_path: Path) -> None:
    assert probe.nearest_existing(str(tmp_path / "a" / "b" / "c")) == str(tmp_path)
    assert probe.nearest_existing("/") == "/"
    assert probe.mount_flags(str(tmp_path / "missing")) == probe.mount_flags(str(tmp_path))


def test_inductors_cache_follows_its_variable_else_the_temporary_folder(
    probe: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/made/up/inductor")
    assert probe.inductor_cache("/tmp") == "/made/up/inductor"
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    if HAS_TORCH:
        pytest.skip("torch is installed here: its own default_cache_dir answers")
    assert os.path.dirname(probe.inductor_cache("/made/up/tmp")) == "/made/up/tmp"
    assert os.path.basename(probe.inductor_cache("/made/up/tmp")).startswith("torchinductor_")


def run_probe(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", probe_source("platform")], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    payload = parse_payload(done.stdout)
    assert isinstance(payload, dict), done.stdout[-2000:]
    return payload


def test_the_script_reports_each_folder_it_wrote_to(tmp_path: Path) -> None:
    home, temp = tmp_path / "home", tmp_path / "tmp"
    temp.mkdir()
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "TMPDIR": str(temp)}
    env["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "inductor")
    found = run_probe(env)
    folders = found["folders"]
    assert isinstance(folders, dict)
    assert {name: (f["path"], f["writable"]) for name, f in folders.items()} == {
        "home": (str(home), True),
        "pip_cache": (str(home / ".cache" / "pip"), True),
        "triton_cache": (str(home / ".triton" / "cache"), True),
        "temp": (str(temp), True),
        "inductor_cache": (str(tmp_path / "inductor"), True),
    }
    assert found["uid"] == os.getuid() and found["home_env"] == str(home)
    assert set(found["verbs"]) == {"libraries", "devices", "dev_infiniband"}
    dataloader = found["dataloader"]
    assert isinstance(dataloader, dict)
    if HAS_TORCH:
        assert dataloader["ok"] is True, dataloader
    else:  # said in the answer: this host has no torch
        assert dataloader["ok"] is False and dataloader["error"].startswith("ModuleNotFoundError"), dataloader


def test_the_script_says_a_home_it_cannot_write_to(tmp_path: Path) -> None:
    home = unwritable_folder(tmp_path)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "TMPDIR": str(tmp_path)}
    env |= {"XDG_CACHE_HOME": str(tmp_path / "cache"), "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    folders = run_probe(env)["folders"]
    assert isinstance(folders, dict)
    assert folders["home"]["writable"] is False and folders["home"]["path"] == home
    assert folders["pip_cache"]["writable"] is True and folders["temp"]["writable"] is True
