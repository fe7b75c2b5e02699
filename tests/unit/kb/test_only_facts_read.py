"""`kb sync` and `kb check` say only facts they read (issues 42 and 43), against a loopback index whose answers
are literals here: a cpu build that pins CUDA libraries is refused, a requirement that does not parse makes its
wheel unread (never a cpu build), a post release is no fact, two indexes that disagree are refused naming both,
a yanked file or a wheel whose sha256 lies is never read, and `kb check` that read nothing of a release or from
an index exits 2 saying so."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest

from tests.index_server import Reply, served
from torchimages.cli.entry import main

ROOT = Path(__file__).resolve().parents[3]
COMPAT = ROOT / "torchimages" / "data" / "compat.yaml"
PAGE = "application/vnd.pypi.simple.v1+json"
X86 = "torch-2.4.1-cp311-cp311-manylinux1_x86_64.whl"
# torch 2.4.1's cu121 build as compat.yaml holds it (PyPI's default build).
META = b"""Name: torch
Version: 2.4.1
Requires-Dist: nvidia-cuda-runtime-cu12==12.1.105; platform_machine == "x86_64"
Requires-Dist: nvidia-cudnn-cu12==9.1.0.70; platform_machine == "x86_64"
Requires-Dist: nvidia-nccl-cu12==2.20.5; platform_machine == "x86_64"
"""


def _page(*files: tuple[str, dict[str, object]]) -> Reply:
    entries = [{"filename": n, "url": f"/f/{n}", "hashes": {}, **more} for n, more in files]
    return Reply(json.dumps({"files": entries}).encode(), PAGE)


def _copy(tmp_path: Path) -> Path:
    copy = tmp_path / "compat.yaml"
    copy.write_bytes(COMPAT.read_bytes())
    return copy


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["kb", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_mistyped_index_cannot_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with served({"/simple/torch/": _page((X86, {})), f"/f/{X86}.metadata": Reply(META)}) as base:
        code, out, err = _run(
            capsys, "check", "--release", "2.4.1", "--compat", str(_copy(tmp_path)), "--index", base + "/simple"
        )
        assert code == 0 and "agrees with the indexes" in out, out + err
        typo = base + "/simpel"
        for indexes in ([typo], [base + "/simple", typo]):
            args = [a for i in indexes for a in ("--index", i)]
            code, out, err = _run(capsys, "check", "--release", "2.4.1", "--compat", str(_copy(tmp_path)), *args)
            assert code == 2 and "agrees" not in out, out + err
            assert f"error: {typo}: serves no torch page" in err


def test_a_release_no_index_serves_cannot_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with served({"/simple/torch/": _page((X86, {})), f"/f/{X86}.metadata": Reply(META)}) as base:
        code, out, err = _run(
            capsys, "check", "--release", "2.4.0", "--compat", str(_copy(tmp_path)), "--index", base + "/simple"
        )
    assert code == 2 and "agrees" not in out, out + err
    assert "error: no index lists a wheel of torch 2.4.0: cannot tell" in err


def test_indexes_that_disagree_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = META.replace(b"2.20.5", b"2.20.6")
    replies = {
        "/a/torch/": _page((X86, {})),
        "/b/torch/": Reply(json.dumps({"files": [{"filename": X86, "url": f"/g/{X86}", "hashes": {}}]}).encode(), PAGE),
        f"/f/{X86}.metadata": Reply(META),
        f"/g/{X86}.metadata": Reply(other),
    }
    copy = _copy(tmp_path)
    with served(replies) as base:
        for first, second in ((base + "/a", base + "/b"), (base + "/b", base + "/a")):  # neither order wins
            for command in ("sync", "check"):
                code, out, err = _run(
                    capsys, command, "--write" if command == "sync" else "--verbose", "--release", "2.4.1",
                    "--compat", str(copy), "--index", first, "--index", second,
                )  # fmt: skip
                assert code == 2 and "agrees" not in out and "Traceback" not in err, out + err
                said = f"nccl: 2.20.5 from {base}/a, 2.20.6 from {base}/b: nothing is written"
                assert "error: the indexes disagree: torch 2.4.1 linux/amd64 cu121 " + said in err
    assert copy.read_bytes() == COMPAT.read_bytes()


def test_a_cpu_build_that_pins_cuda_is_never_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cpu = "torch-2.4.1+cpu-cp311-cp311-linux_x86_64.manylinux_2_28_x86_64.whl"
    cpu_meta = META.replace(b"Version: 2.4.1", b"Version: 2.4.1+cpu").replace(b"9.1.0.70", b"9.9.9.9")
    replies = {
        "/simple/torch/": _page((X86, {}), (cpu, {})),
        f"/f/{X86}.metadata": Reply(META),
        f"/f/{cpu}.metadata": Reply(cpu_meta),
    }
    copy = _copy(tmp_path)
    with served(replies) as base:
        code, out, err = _run(
            capsys, "sync", "--write", "--release", "2.4.1", "--compat", str(copy), "--index", base + "/simple"
        )
    assert code == 0 and "Traceback" not in err, out + err
    assert "torch: 1 wheel whose metadata is refused as inconsistent (e.g. torch-2.4.1+cpu-" in err
    assert "9.9.9.9" not in out and "variants.cpu" not in out and copy.read_bytes() == COMPAT.read_bytes()


@pytest.mark.parametrize(
    "line",
    [
        b'Requires-Dist: nvidia-cuda-runtime-cu12 (==12.1.105; platform_machine == "x86_64"',
        b'Requires-Dist: nvidia-cuda-runtime-cu12==12.1.105; platform_machine ~= "x86_64"',
    ],
)
def test_a_requirement_that_does_not_parse_is_no_cpu_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: bytes
) -> None:
    broken = META.replace(b'Requires-Dist: nvidia-cuda-runtime-cu12==12.1.105; platform_machine == "x86_64"', line)
    broken = b"\n".join(x for x in broken.split(b"\n") if b"cudnn" not in x and b"nccl" not in x)  # its only pin
    replies = {"/simple/torch/": _page((X86, {})), f"/f/{X86}.metadata": Reply(broken)}
    copy = _copy(tmp_path)
    with served(replies) as base:
        code, out, err = _run(
            capsys, "sync", "--write", "--release", "2.4.1", "--compat", str(copy), "--index", base + "/simple"
        )
        assert code == 0 and "cpu" not in out, out + err
        assert "torch: 1 wheel whose metadata could not be read" in err
        code, out, err = _run(capsys, "check", "--release", "2.4.1", "--compat", str(copy), "--index", base + "/simple")
    assert code == 2 and f"{base}/simple: no build of torch 2.4.1 read, though it lists wheels of it" in err
    assert copy.read_bytes() == COMPAT.read_bytes()


def test_a_post_release_is_no_fact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    post = "torch-2.4.1.post1-cp311-cp311-manylinux1_x86_64.whl"
    replies = {
        "/simple/torch/": _page((X86, {}), (post, {})),
        f"/f/{X86}.metadata": Reply(META),
        f"/f/{post}.metadata": Reply(META.replace(b"2.4.1", b"2.4.1.post1").replace(b"2.20.5", b"2.20.6")),
    }
    with served(replies) as base:
        code, out, err = _run(capsys, "check", "--compat", str(_copy(tmp_path)), "--index", base + "/simple")
    assert "post1" not in out and "2.20.6" not in out, out + err
    assert code == 2 and "no index lists a wheel of torch 2.5, " in err  # 2.4 agrees; the others are not read


def test_a_yanked_file_is_never_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = "torch-2.4.1-cp312-cp312-manylinux1_x86_64.whl"
    replies = {
        "/simple/torch/": _page((X86, {"yanked": "wrong pins"}), (other, {})),  # cp311 is asked first, unless yanked
        f"/f/{X86}.metadata": Reply(META.replace(b"2.20.5", b"2.20.6")),
        f"/f/{other}.metadata": Reply(META),
    }
    with served(replies) as base:
        code, out, err = _run(
            capsys, "check", "--release", "2.4.1", "--compat", str(_copy(tmp_path)), "--index", base + "/simple"
        )
    assert code == 0 and "agrees with the indexes" in out and "2.20.6" not in out, out + err


def _wheel(meta: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("torch-2.4.1.dist-info/METADATA", meta)
    return buffer.getvalue()


def test_a_wheel_whose_sha256_lies_is_not_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    small = _wheel(META.replace(b"2.20.5", b"2.20.6"))
    for digest, code_wanted in ((hashlib.sha256(small).hexdigest(), 1), ("0" * 64, 2)):
        anchor = f'<a href="/f/{X86}#sha256={digest}">{X86}</a>'
        with served({"/simple/torch/": Reply(anchor.encode(), "text/html"), f"/f/{X86}": Reply(small)}) as base:
            code, out, err = _run(
                capsys, "check", "--verbose", "--release", "2.4.1", "--compat", str(_copy(tmp_path)),
                "--index", base + "/simple",
            )  # fmt: skip
        assert code == code_wanted, out + err
    assert f"{base}/f/{X86}: its sha256 is not the one the index's page gives" in err and "2.20.6" not in out


def test_a_companion_whose_requirement_does_not_parse_is_said_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vision = "torchvision-0.19.2-cp311-cp311-manylinux1_x86_64.whl"
    older = "torchvision-0.19.1-cp311-cp311-manylinux1_x86_64.whl"
    replies = {
        "/simple/torch/": _page((X86, {})),
        f"/f/{X86}.metadata": Reply(META),
        "/simple/torchvision/": _page((vision, {}), (older, {})),
        f"/f/{vision}.metadata": Reply(b"Name: torchvision\nVersion: 0.19.2\nRequires-Dist: torch (==2.4.1\n"),
        f"/f/{older}.metadata": Reply(b"Name: torchvision\nVersion: 0.19.1\nRequires-Dist: torch==2.4.1\n"),
    }
    with served(replies) as base:
        code, out, err = _run(
            capsys, "check", "--verbose", "--release", "2.4.1", "--compat", str(_copy(tmp_path)),
            "--index", base + "/simple",
        )  # fmt: skip
    assert code == 0 and "agrees with the indexes" in out, out + err  # 0.19.1 pins 2.4.1, as the file says
    assert "torchvision: 1 wheel whose metadata could not be read (e.g. torchvision-0.19.2-" in err
    assert f"{vision}.metadata: Requires-Dist 'torch (==2.4.1' does not parse" in err
