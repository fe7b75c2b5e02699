"""Text from images, registries, cosign, the engine, file names and settings never reaches the terminal or a
machine-read line raw: control characters (C0, C1, DEL, ESC sequences), newlines and undecodable bytes are
shown escaped (problems.shown where it is printed; the command line's standard streams escape what is left),
`outdated --tags` stays one tag per line, rich reads no markup in it, a report stays valid XML and UTF-8 JSON.
Every hostile fact is a literal here, told by the fake engine or a stand-in program."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.fakes import FakeEngine
from tests.unit.conftest import ROOT
from torchimages import engine as engine_package
from torchimages.building import locks, renderers
from torchimages.building.builder import _listed
from torchimages.building.progress import Event
from torchimages.combination import BASES_LABEL
from torchimages.engine import ImageInfo, ShellResult
from torchimages.planning import plan
from torchimages.problems import escaped, shown, shown_lines
from torchimages.reporting import junit, writer
from torchimages.reporting import model as report

MATRIX = "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}\n"
# An escape sequence (clear the screen), a title-setting OSC, a C1 CSI, DEL, a carriage return, a surrogate of
# an undecodable byte, rich markup, and a newline followed by what would pass for a tag line.
HOSTILE = "a\x1b[2J\x1b]0;owned\x07b\x9b31m\x7f\rc\udcff[bold red]x[/]\n2.13.0-cpu-evil"
Cli = Callable[..., tuple[int, str, str]]


def raw(text: str) -> list[str]:
    """The characters of `text` that no line of text should hold: every control character but a newline and
    a tab (C0, DEL, C1), and surrogates."""
    return [c for c in text if unicodedata.category(c) in ("Cc", "Cs") and c not in "\n\t"]


def test_escaped_and_shown_leave_nothing_that_acts_on_a_terminal() -> None:
    assert raw(escaped(HOSTILE, keep="\n")) == [] and escaped(HOSTILE, keep="\n").count("\n") == 1
    assert raw(shown(HOSTILE)) == [] and "\n" not in shown(HOSTILE)
    assert shown(HOSTILE).startswith("a\\x1b[2J\\x1b]0;owned\\x07b\\x9b31m\\x7f\\rc\\udcff[bold red]")
    assert shown_lines("one\x1b\ntwo") == "one\\x1b\ntwo"
    assert escaped("plain text, ünïcode ✅") == "plain text, ünïcode ✅"


def test_outdated_tags_stay_one_tag_per_line_whatever_the_images_hold(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The images' labels, the scan's output and the registry's pull error all carry HOSTILE: stdout holds the
    stale tags alone, each once; stderr one line per reason, nothing raw."""

    class Hostile(FakeEngine):
        def manifest(self, reference: str) -> bytes | None:
            return b"{}"  # the registry holds each tag

        def pull(self, reference: str) -> list[str]:
            return [f"manifest unknown: {HOSTILE}"] if reference.endswith("devel") else []

    (tmp_path / "matrix.yaml").write_text(MATRIX)
    monkeypatch.chdir(tmp_path)
    fake = Hostile()
    for selected in plan.select(plan.load(tmp_path / "matrix.yaml"), []):
        for image in selected.images:
            labels = {BASES_LABEL: HOSTILE, "org.opencontainers.image.title": HOSTILE}
            fake.add(ImageInfo(image.platform_reference, "sha256:" + "1" * 64, labels, {}, "", ()))
    fake.shell_answer = ShellResult(3, f"### os-release\n{HOSTILE}\n", f"E: {HOSTILE}\n{HOSTILE}\n")
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: fake)
    code, out, err = cli("outdated", "--tags", "--pull")
    assert code == 1 and out == "2.13.0-cpu-devel\n2.13.0-cpu-runtime\n", out
    assert raw(err) == [], err
    assert "2.13.0-cpu-evil" in err and not any(line.startswith("2.13.0-cpu-evil") for line in err.splitlines())
    assert "    could not pull it: manifest unknown: a\\x1b[2J" in err
    code, out, _ = cli("outdated")  # the details on stdout: each reason one line there too
    assert code == 1 and raw(out) == [] and not any(line.startswith("2.13.0-cpu-evil") for line in out.splitlines())


def test_verify_signature_says_cosign_s_hostile_words_in_one_escaped_line(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cosign passes on what the registry answered (its error body): one line, escaped."""
    cosign = tmp_path / "bin" / "cosign"
    cosign.parent.mkdir()
    words = HOSTILE.replace("\udcff", "").encode() + b"\xff"
    (tmp_path / "said").write_bytes(b"Error: " + words + b"\n")
    cosign.write_text(f"#!/bin/sh\ncat {tmp_path / 'said'} >&2\nexit 10\n")
    cosign.chmod(0o755)
    (tmp_path / "cosign.pub").write_text("-----BEGIN PUBLIC KEY-----\n")
    monkeypatch.setenv("PATH", f"{cosign.parent}{os.pathsep}{os.environ['PATH']}")
    code, out, err = cli("verify-signature", "--key", str(tmp_path / "cosign.pub"), "127.0.0.1:5000/a:1")
    assert code == 1 and err == "", err
    assert out.count("\n") == 1 and raw(out) == [], out
    assert out == "127.0.0.1:5000/a:1: not verified: a\\x1b[2J\\x1b]0;owned\\x07b\\x9b31m\\x7f\n"  # its last line


def test_a_file_name_with_an_escape_sequence_is_printed_escaped(cli: Cli, tmp_path: Path) -> None:
    """Nothing of the command calls `shown` on the matrix's path: the standard streams escape it."""
    path = tmp_path / "m\x1b[31m\x9b.yaml"
    path.write_text(MATRIX)
    code, out, _ = cli("validate", "--matrix", str(path))
    assert code == 0 and raw(out) == [] and "m\\x1b[31m\\x9b.yaml: valid" in out


def test_undecodable_names_and_settings_never_raise_even_on_a_strict_stream(tmp_path: Path) -> None:
    """A file name and settings of bytes that are no UTF-8 (os.environb), a standard output that refuses
    surrogates (PYTHONIOENCODING=utf-8, as a UTF-8 locale has it): said escaped, no traceback."""
    name = os.fsdecode(b"m\xff\x1b[2J.yaml")
    (tmp_path / name).write_text(MATRIX)
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    environ = {k: v for k, v in os.environb.items() if not k.startswith(b"TORCHIMAGES_")}
    environ.update({b"PYTHONIOENCODING": b"utf-8", b"PYTHONPATH": str(ROOT).encode()})
    environ[b"DOCKER_HOST"] = b"unix:///x\xff\x1b[2J\nDOCKER_HOST  forged"

    def run(*args: str, **extra: bytes) -> subprocess.CompletedProcess[bytes]:
        command = [sys.executable, "-m", "torchimages", *args]
        env = {**environ, **{name.encode(): value for name, value in extra.items()}}
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, check=False)

    done = run("validate", "--matrix", name)
    assert done.returncode == 0 and done.stdout.startswith(b"m\\udcff\\x1b[2J.yaml: valid"), done
    done = run("settings")
    line = next(line for line in done.stdout.splitlines() if line.startswith(b"DOCKER_HOST"))
    assert done.returncode == 0 and line.endswith(b"unix:///x\\udcff\\x1b[2J\\nDOCKER_HOST  forged"), done
    done = run("outdated", TORCHIMAGES_ENGINE_TIMEOUT_S=b"\xff\x1b[2J")
    assert done.returncode == 2 and b"Traceback" not in done.stderr, done
    assert done.stderr.startswith(b"error: TORCHIMAGES_ENGINE_TIMEOUT_S='\\udcff\\x1b[2J' must be a number"), done


def test_progress_lines_are_escaped_and_rich_reads_no_markup_in_them(tmp_path: Path) -> None:
    lines: list[str] = []
    plain = renderers.PlainRenderer(lines.append)
    plain.line(_listed("index not written", [HOSTILE, "second"]), [])  # what the builder says of an image
    plain.update(Event("img", "os", 1.0, HOSTILE), [])
    assert all(raw(line) == [] for line in lines)
    assert lines[0].splitlines() == ["index not written:", f"    {shown(HOSTILE)}", "    second"]
    assert "\n" not in lines[1]
    with (tmp_path / "tty").open("w") as stream:
        live = renderers.LiveRenderer(stream, columns=lambda: 400)
        live.line(HOSTILE, [Event("img", "os", 1.0, HOSTILE)])
        live.close()
    drawn = (tmp_path / "tty").read_text(errors="surrogateescape")
    assert "[bold red]x[/]" in drawn and "\\x1b[2J" in drawn and "\x1b[2J" not in drawn and "\x9b" not in drawn


def test_a_report_keeps_valid_xml_and_utf8_json_whatever_the_image_said() -> None:
    versions = report.Versions("2.13.0", None, None, None, None, None, "3.12", "debian12", None)
    image = report.ImageReport("t", "r:t", (), None, None, "failed", f"\x00{HOSTILE}", versions, None)
    parsed = ElementTree.fromstring(junit.merge_junit([(image, None)]))  # a reader takes it
    failure = parsed.find("testsuite/testcase/failure")
    assert failure is not None and failure.text == escaped(f"\x00{HOSTILE}", keep="\n")
    text = writer.json_text({"reason": HOSTILE})
    assert json.loads(text.encode("utf-8")) == {"reason": HOSTILE}


def test_a_lock_file_gets_pins_alone_whatever_the_image_s_pip_says(tmp_path: Path) -> None:
    fake = FakeEngine()
    fake.python_output = f"torch==2.13.0\n--index-url http://evil/\nnumpy==2.1.0\x1b[2J\nx==1\u2028y==2\n{HOSTILE}\n"
    assert locks.freeze(fake, "img:1") == ["torch==2.13.0", "x==1", "y==2"]
