"""`kb sync` and `kb check` end to end against a loopback index (no docker, a few seconds): torch 2.8.0,
torchvision 0.23.0 and torchaudio 2.8.0 as PyPI serves them (the cu128 build under the plain version, a JSON
page) and as PyTorch's per-build indexes do (cu126, cu129, cpu: HTML pages, labelled versions), their METADATA
written here as literals. A copy of compat.yaml without 2.8 gets it back with the same pins; a changed pin in a
copy is reported by `kb check` (exit 1)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.index_server import Reply, served
from torchimages import compat

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / "torchimages" / "data" / "compat.yaml"
X86 = 'platform_system == "Linux" and platform_machine == "x86_64"'


# What the index serves of each release, written here (the facts compat.yaml holds for it): patches, cp tags,
# the default build (PyPI's, under the plain version), each build's CUDA runtime, cuDNN, NCCL and cuda-toolkit pins,
# the companions, and the builds with aarch64 wheels on PyTorch's indexes (PyPI's aarch64 wheel: a CPU build).
RELEASES: dict[str, dict[str, Any]] = {
    "2.8": {
        "patches": ["2.8.0"],
        "cp": ["39", "310", "311", "312", "313"],
        "default": "cu128",
        "builds": {
            "cpu": None,
            "cu126": ("12.6.77", "9.10.2.21", "2.27.3", None),
            "cu128": ("12.8.90", "9.10.2.21", "2.27.3", None),
            "cu129": ("12.9.79", "9.10.2.21", "2.27.3", None),
        },
        "torchvision": {"2.8.0": "0.23.0"},
        "torchaudio": {"2.8.0": "2.8.0"},
        "arm64": [],
    },
    "2.9": {
        "patches": ["2.9.0", "2.9.1"],
        "cp": ["310", "311", "312", "313", "314"],
        "default": "cu128",
        "builds": {
            "cpu": None,
            "cu126": ("12.6.77", "9.10.2.21", "2.27.5", None),
            "cu128": ("12.8.90", "9.10.2.21", "2.27.5", None),
            "cu129": ("12.9.79", "9.10.2.21", "2.27.5", None),
            "cu130": ("13.0.48", "9.13.0.50", "2.27.7", "13.0.0"),
        },
        "torchvision": {"2.9.0": "0.24.0", "2.9.1": "0.24.1"},
        "torchaudio": {"2.9.0": "2.9.0", "2.9.1": "2.9.1"},
        "arm64": ["cu126", "cu128", "cu130"],
    },
}
BUILDS = ("cu126", "cu128", "cu129", "cu130", "cpu")


def _torch(version: str, pins: tuple[str, str, str, str | None] | None) -> bytes:
    lines = ["Metadata-Version: 2.4", "Name: torch", f"Version: {version}", "Requires-Dist: filelock"]
    if pins is not None:
        runtime, cudnn, nccl, toolkit = pins
        cu = "cu" + runtime.split(".")[0]
        where = 'platform_system == "Linux"' if toolkit else X86
        lines += [
            f"Requires-Dist: nvidia-cuda-runtime{'' if toolkit else '-' + cu}=={runtime}; {where}",
            f"Requires-Dist: nvidia-cudnn-{cu}=={cudnn}; {where}",
            f"Requires-Dist: nvidia-nccl-{cu}=={nccl}; {where}",
            f"Requires-Dist: triton==3.4.0; {X86}",
        ]
        if toolkit:
            lines.append(f"Requires-Dist: cuda-toolkit[cudart,nvrtc]=={toolkit}; {where}")
    return ("\n".join([*lines, "", "torch's description"]) + "\n").encode()


def _companion(name: str, version: str, torch: str) -> bytes:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Dist: torch=={torch}\n\n".encode()


def _files() -> tuple[dict[str, list[tuple[str, bytes]]], dict[str, dict[str, list[tuple[str, bytes]]]]]:
    """PyPI's files by project, and each PyTorch index's files by build and project (names and metadata)."""
    pypi: dict[str, list[tuple[str, bytes]]] = {"torch": [], "torchvision": [], "torchaudio": []}
    pytorch: dict[str, dict[str, list[tuple[str, bytes]]]] = {b: {"torch": [], "torchvision": []} for b in BUILDS}
    for release in RELEASES.values():
        builds = release["builds"]
        for patch in release["patches"]:
            plain = _torch(patch, builds[release["default"]])
            pypi["torch"] += [(f"torch-{patch}-cp{p}-cp{p}-manylinux_2_28_x86_64.whl", plain) for p in release["cp"]]
            pypi["torch"] += [
                (f"torch-{patch}-cp311-cp311-manylinux_2_28_aarch64.whl", plain),
                (f"torch-{patch}-cp311-cp311-win_amd64.whl", _torch(patch, None)),
                (f"torch-{patch}.tar.gz", b""),
            ]
            for project in ("torchvision", "torchaudio"):
                version = release[project][patch]
                name = f"{project}-{version}-cp311-cp311-manylinux_2_28_x86_64.whl"
                pypi[project].append((name, _companion(project, version, patch)))
            for build, pins in builds.items():
                label = f"{patch}+{build}"
                arches = ["x86_64", *(["aarch64"] if build in release["arm64"] else [])]
                pytorch[build]["torch"] += [
                    (f"torch-{label}-cp311-cp311-manylinux_2_28_{arch}.whl", _torch(label, pins)) for arch in arches
                ]
                vision = release["torchvision"][patch]
                pytorch[build]["torchvision"].append(
                    (
                        f"torchvision-{vision}+{build}-cp311-cp311-manylinux_2_28_x86_64.whl",
                        _companion("torchvision", f"{vision}+{build}", label),
                    )
                )
    pypi["torchvision"].append(
        ("torchvision-0.22.1-cp311-cp311-manylinux_2_28_x86_64.whl", _companion("torchvision", "0.22.1", "2.7.1"))
    )
    return pypi, pytorch


def _wheel(name: str, meta: bytes) -> bytes:
    """A wheel of metadata only: its .dist-info/METADATA."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(name.split("-")[0] + "-" + name.split("-")[1] + ".dist-info/METADATA", meta)
    return buffer.getvalue()


def _index(wheels: bool = False) -> dict[str, Reply]:
    """The index's answers: pages and `.metadata` files (no wheel is served, none is needed); with `wheels`, PyPI's
    pages give no metadata and serve wheels of metadata only instead (the tool reads such a small wheel whole)."""
    replies: dict[str, Reply] = {}
    pypi, pytorch = _files()
    for project, files in pypi.items():
        entries = []
        for name, meta in files:
            if wheels:
                wheel = _wheel(name, meta)
                replies[f"/files/{name}"] = Reply(wheel)
                hashes = {"sha256": hashlib.sha256(wheel).hexdigest()}
                entries.append({"filename": name, "url": f"../../files/{name}", "hashes": hashes, "size": len(wheel)})
                continue
            replies[f"/files/{name}.metadata"] = Reply(meta, "text/plain")
            digest = {"sha256": hashlib.sha256(meta).hexdigest()}
            entries.append({"filename": name, "url": f"../../files/{name}", "hashes": {}, "core-metadata": digest})
        page = json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": entries}).encode()
        replies[f"/simple/{project}/"] = Reply(page, "application/vnd.pypi.simple.v1+json")
    for build, projects in pytorch.items():
        for project, files in projects.items():
            anchors = []
            for name, meta in files:
                href = f"/whl/{build}/files/{name.replace('+', '%2B')}"
                replies[href + ".metadata"] = Reply(meta, "text/plain")
                sha = hashlib.sha256(meta).hexdigest()
                anchors.append(f'<a href="{href}#sha256={"0" * 64}" data-core-metadata="sha256={sha}">{name}</a><br/>')
            body = "<!DOCTYPE html><html><body>\n" + "\n".join(anchors) + "\n</body></html>"
            replies[f"/whl/{build}/{project}/"] = Reply(body.encode(), "text/html")
    return replies


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "torchimages", "kb", *args], capture_output=True, text=True, env=env, timeout=60
    )


def _without(text: str, minor: str, following: str) -> str:
    start, end = text.index(f'  "{minor}":\n'), text.index(f'  "{following}":\n')
    return text[:start] + text[end:]


def _indexes(base: str) -> list[str]:
    urls = [f"{base}/simple", *(f"{base}/whl/{b}" for b in BUILDS)]
    return [arg for url in urls for arg in ("--index", url)]


def _release(path: Path, minor: str) -> compat.TorchRelease:
    return compat.parse(yaml.safe_load(path.read_text())).torch[minor]


@pytest.fixture()
def index() -> Iterator[str]:
    with served(_index()) as base:
        yield base


@pytest.mark.parametrize(
    ("minor", "following", "release", "wheels"),
    [("2.8", "2.9", "2.8.0", False), ("2.9", "2.10", "2.9.1", False), ("2.8", "2.9", "2.8.0", True)],
)
def test_a_removed_release_comes_back_with_the_same_pins(
    tmp_path: Path, minor: str, following: str, release: str, wheels: bool
) -> None:
    with served(_index(wheels)) as index:
        _comes_back(tmp_path, index, minor, following, release)


def _comes_back(tmp_path: Path, index: str, minor: str, following: str, release: str) -> None:
    copy = tmp_path / "compat.yaml"
    copy.write_text(_without(COMPAT.read_text(), minor, following))
    before = copy.read_bytes()
    dry = _run("sync", "--compat", str(copy), "--release", release, *_indexes(index))
    assert dry.returncode == 0, dry.stderr
    assert f"+ torch.{minor}: " in dry.stdout and "not written" in dry.stdout
    assert copy.read_bytes() == before  # without --write nothing is written
    done = _run("sync", "--compat", str(copy), "--release", release, "--write", *_indexes(index))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    back, original = _release(copy, minor), _release(COMPAT, minor)
    assert back.patches == original.patches and back.python == original.python
    assert back.pypi_default == original.pypi_default
    assert {n: (v.cudnn, v.nccl, v.cuda_toolkit) for n, v in back.variants.items()} == {
        n: (v.cudnn, v.nccl, v.cuda_toolkit) for n, v in original.variants.items()
    }
    assert back.torchvision == original.torchvision and back.torchaudio == original.torchaudio
    assert {p: {b: w.index for b, w in ws.items()} for p, ws in back.platforms.items()} == {
        p: {b: w.index for b, w in ws.items()} for p, ws in original.platforms.items()
    }
    text = copy.read_text()
    assert text.index(f'  "{minor}":') < text.index(f'  "{following}":')  # in its place
    assert "# The compatibility knowledge base" in text and "# torch minor -> what was published" in text
    rest = text.replace(text[text.index(f'  "{minor}":') : text.index(f'  "{following}":')], "")
    had = before.decode().splitlines(True)  # a source of the same day may be there already: only new ones go
    kept = [line for line in rest.splitlines(True) if not line.startswith("  KB2") or line in had]
    assert "".join(kept) == "".join(had)
    again = _run("check", "--compat", str(copy), "--release", release, *_indexes(index))
    assert again.returncode == 0, again.stdout + again.stderr


def test_a_changed_pin_is_reported_by_check(tmp_path: Path, index: str) -> None:
    copy = tmp_path / "compat.yaml"
    text = COMPAT.read_text()
    line = '      cu128: {cudnn: "9.10.2.21", nccl: "2.27.3"}\n'
    start = text.index('  "2.8":\n')
    at = text.index(line, start)
    copy.write_text(text[:at] + line.replace("2.27.3", "2.27.4") + text[at + len(line) :])
    checked = _run("check", "--compat", str(copy), "--release", "2.8.0", *_indexes(index))
    assert checked.returncode == 1, checked.stdout + checked.stderr
    said = next(line for line in checked.stdout.splitlines() if line.startswith("~ torch.2.8.variants.cu128.nccl"))
    assert said.startswith("~ torch.2.8.variants.cu128.nccl: 2.27.4 -> 2.27.3 [http://127.0.0.1:")
    assert said.endswith("-cp311-cp311-manylinux_2_28_x86_64.whl.metadata]")  # its source: the file that shows it
    agreed = _run("check", "--compat", str(COMPAT), "--release", "2.8.0", *_indexes(index))
    assert agreed.returncode == 0, agreed.stdout + agreed.stderr
    assert "= torch.2.8.variants.cu126.nccl: 2.27.3 (uncertain 'variants.cu126.nccl' settled)" in agreed.stdout


def test_ctrl_c_while_an_index_trickles(tmp_path: Path) -> None:
    copy = tmp_path / "compat.yaml"
    copy.write_bytes(COMPAT.read_bytes())
    asked = threading.Event()
    page = Reply(b"{" + b" " * 1000, "application/vnd.pypi.simple.v1+json", trickle=0.02, asked=asked)
    slow = {"/simple/torch/": page}
    with served(slow) as base:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        args = ["kb", "sync", "--write", "--compat", str(copy), "--index", base + "/simple"]
        process = subprocess.Popen(
            [sys.executable, "-m", "torchimages", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        assert asked.wait(30)  # the page is trickling now
        time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=20)
    assert process.returncode == 130, err
    assert "Traceback" not in err.decode() and len(err.decode().strip().splitlines()) == 1
    assert copy.read_bytes() == COMPAT.read_bytes()
