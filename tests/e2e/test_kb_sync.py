"""`kb sync` and `kb check` end to end against a loopback index (no docker, a few seconds): torch 2.8.0,
torchvision 0.23.0 and torchaudio 2.8.0 as PyPI serves them (the cu128 build under the plain version, a JSON
page) and as PyTorch's per-build indexes do (cu126, cu129, cpu: HTML pages, labelled versions), their METADATA
written here as literals. A copy of compat.yaml without 2.8 gets it back with the same pins; a changed pin in a
copy is reported by `kb check` (exit 1)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.index_server import Reply, served
from torchimages import compat

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / "torchimages" / "data" / "compat.yaml"
X86 = 'platform_system == "Linux" and platform_machine == "x86_64"'


def _torch(version: str, runtime: str | None) -> bytes:
    lines = ["Metadata-Version: 2.4", "Name: torch", f"Version: {version}", "Requires-Dist: filelock"]
    if runtime:
        lines += [
            f"Requires-Dist: nvidia-cuda-runtime-cu12=={runtime}; {X86}",
            f"Requires-Dist: nvidia-cudnn-cu12==9.10.2.21; {X86}",
            f"Requires-Dist: nvidia-nccl-cu12==2.27.3; {X86}",
            f"Requires-Dist: triton==3.4.0; {X86}",
        ]
    return ("\n".join([*lines, "", "torch's description"]) + "\n").encode()


def _companion(name: str, version: str, torch: str) -> bytes:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Dist: torch=={torch}\n\n".encode()


def _index() -> dict[str, Reply]:
    """The index's answers: pages and `.metadata` files (no wheel is served, none is needed)."""
    replies: dict[str, Reply] = {}
    pypi: dict[str, list[tuple[str, bytes]]] = {
        "torch": [
            *(
                (f"torch-2.8.0-cp{p}-cp{p}-manylinux_2_28_x86_64.whl", _torch("2.8.0", "12.8.90"))
                for p in ("39", "310", "311", "312", "313")
            ),
            ("torch-2.8.0-cp311-cp311-manylinux_2_28_aarch64.whl", _torch("2.8.0", "12.8.90")),
            ("torch-2.8.0-cp311-cp311-win_amd64.whl", _torch("2.8.0", None)),
            ("torch-2.8.0.tar.gz", b""),
        ],
        "torchvision": [
            ("torchvision-0.23.0-cp311-cp311-manylinux_2_28_x86_64.whl", _companion("torchvision", "0.23.0", "2.8.0")),
            ("torchvision-0.22.1-cp311-cp311-manylinux_2_28_x86_64.whl", _companion("torchvision", "0.22.1", "2.7.1")),
        ],
        "torchaudio": [
            ("torchaudio-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl", _companion("torchaudio", "2.8.0", "2.8.0")),
        ],
    }
    for project, files in pypi.items():
        entries = []
        for name, meta in files:
            replies[f"/files/{name}.metadata"] = Reply(meta, "text/plain")
            digest = {"sha256": hashlib.sha256(meta).hexdigest()}
            entries.append({"filename": name, "url": f"../../files/{name}", "hashes": {}, "core-metadata": digest})
        page = json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": entries}).encode()
        replies[f"/simple/{project}/"] = Reply(page, "application/vnd.pypi.simple.v1+json")
    for build, runtime in (("cu126", "12.6.77"), ("cu129", "12.9.79"), ("cpu", None)):
        files = [
            (f"torch-2.8.0+{build}-cp311-cp311-manylinux_2_28_x86_64.whl", _torch(f"2.8.0+{build}", runtime)),
            (
                f"torchvision-0.23.0+{build}-cp311-cp311-manylinux_2_28_x86_64.whl",
                _companion("torchvision", f"0.23.0+{build}", f"2.8.0+{build}"),
            ),
        ]
        for project in ("torch", "torchvision"):
            anchors = []
            for name, meta in files:
                if not name.startswith(project + "-"):
                    continue
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
    urls = [f"{base}/simple", *(f"{base}/whl/{b}" for b in ("cu126", "cu129", "cpu"))]
    return [arg for url in urls for arg in ("--index", url)]


def _release(path: Path, minor: str) -> compat.TorchRelease:
    return compat.parse(yaml.safe_load(path.read_text())).torch[minor]


@pytest.fixture()
def index() -> Iterator[str]:
    with served(_index()) as base:
        yield base


def test_a_removed_release_comes_back_with_the_same_pins(tmp_path: Path, index: str) -> None:
    copy = tmp_path / "compat.yaml"
    copy.write_text(_without(COMPAT.read_text(), "2.8", "2.9"))
    before = copy.read_bytes()
    dry = _run("sync", "--compat", str(copy), "--release", "2.8.0", *_indexes(index))
    assert dry.returncode == 0, dry.stderr
    assert "+ torch.2.8: " in dry.stdout and "not written" in dry.stdout
    assert copy.read_bytes() == before  # without --write nothing is written
    done = _run("sync", "--compat", str(copy), "--release", "2.8.0", "--write", *_indexes(index))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    back, original = _release(copy, "2.8"), _release(COMPAT, "2.8")
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
    assert text.index('  "2.7":') < text.index('  "2.8":') < text.index('  "2.9":')  # in its place
    assert "# The compatibility knowledge base" in text and "# torch minor -> what was published" in text
    again = _run("check", "--compat", str(copy), "--release", "2.8.0", *_indexes(index))
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
    assert "~ torch.2.8.variants.cu128.nccl: 2.27.4 -> 2.27.3" in checked.stdout
    assert "torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl.metadata" in checked.stdout
    agreed = _run("check", "--compat", str(COMPAT), "--release", "2.8.0", *_indexes(index))
    assert agreed.returncode == 0, agreed.stdout + agreed.stderr
    assert "= torch.2.8.variants.cu126.nccl: 2.27.3 (uncertain 'variants.cu126.nccl' settled)" in agreed.stdout
