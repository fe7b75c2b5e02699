"""The venv probe (torchimages/probes/scripts/venv_install.py) on this host: the wheel it makes by hand is a valid
wheel (its RECORD lists every file with its sha256 and size), and the whole script, run by the Python of a
throwaway virtual environment, installs it there, imports it from there and uninstalls it. Nothing is installed
anywhere else (the project's own environment is left alone)."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import subprocess
import sys
import types
import venv
import zipfile
from pathlib import Path
from typing import Any

import pytest

from torchimages.probes import parse_payload, probe_source


@pytest.fixture(scope="module")
def probe() -> types.ModuleType:
    module = types.ModuleType("venv_install_probe")
    exec(compile(probe_source("venv_install"), "venv_install.py", "exec"), module.__dict__)
    return module


def test_the_wheel_made_by_hand_records_every_file_it_holds(probe: types.ModuleType, tmp_path: Path) -> None:
    path = Path(probe.build_wheel(str(tmp_path)))
    assert path.name == "torchimages_smoke_probe-0.0.1-py3-none-any.whl" and path.parent == tmp_path
    with zipfile.ZipFile(path) as wheel:
        names = wheel.namelist()
        record = f"{probe.NAME}-{probe.VERSION}.dist-info/RECORD"
        rows = list(csv.reader(io.StringIO(wheel.read(record).decode())))
        assert sorted(row[0] for row in rows) == sorted(names)
        for name, digest, size in rows:
            if name == record:
                assert (digest, size) == ("", "")
                continue
            data = wheel.read(name)
            expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, size) == (f"sha256={expected}", str(len(data))), name
        metadata = wheel.read(f"{probe.NAME}-{probe.VERSION}.dist-info/METADATA").decode()
    assert f"Name: {probe.NAME}\n" in metadata and f"Version: {probe.VERSION}\n" in metadata


def test_a_record_line_is_the_files_urlsafe_sha256_and_size(probe: types.ModuleType) -> None:
    # sha256 in base64url without padding, as `python -m wheel` and pip write them
    assert probe._record_line("m.py", b"ANSWER = 42\n") == "m.py,sha256=XbAo4nI7yIz1ZX-St4TyhoNlf3RZyvfwxUKZv2y0s_w,12"
    assert probe._record_line("e", b"") == "e,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0"


@pytest.fixture(scope="module")
def throwaway(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment of this Python that sees its base's pip (system site packages), none of its own."""
    folder = tmp_path_factory.mktemp("venv") / "env"
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(folder)
    python = folder / "bin" / "python"
    if subprocess.run([python, "-m", "pip", "--version"], capture_output=True, check=False).returncode != 0:
        pytest.skip("this host's base Python has no pip for a throwaway environment to use")
    return python


def run_probe(python: Path) -> dict[str, Any]:
    done = subprocess.run(
        [python, "-c", probe_source("venv_install")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PIP_NO_INDEX": "1"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    payload = parse_payload(done.stdout)
    assert isinstance(payload, dict), done.stdout[-2000:]
    return payload


def test_the_script_installs_imports_and_uninstalls_in_its_own_environment(throwaway: Path) -> None:
    found = run_probe(throwaway)
    prefix = str(throwaway.parent.parent)
    assert found["prefix"] == prefix and found["read_only"] is False
    assert found["installed"] is True and found["uninstalled"] is True, found
    assert found["module_file"].startswith(prefix)
    assert not list(Path(prefix).rglob("torchimages_smoke_probe*"))  # gone again
    assert not any(Path(p).joinpath("torchimages_smoke_probe.py").exists() for p in sys.path if p)
