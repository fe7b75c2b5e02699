"""Every file the tool reads besides the matrix (planning/test_hostile_input.py has that one), attacked through
the command line: the bases lock, a combination's requirements.lock, bake metadata (`promote --from`) and a
SPEC.json (`test --spec`). Whatever the file is, no traceback, no hang: exit 2 with a message that names the
file, and nothing written; or it is accepted."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.unit.conftest import ROOT
from torchimages import settings as environment
from torchimages import textfile
from torchimages.building import bake
from torchimages.cli.entry import main
from torchimages.planning import bases, plan

UBUNTU = "matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0', os: ubuntu24.04}\n"  # registry bases: a lock
CPU = "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}\n"
DIGEST = "sha256:" + "a" * 64
NO_ENGINE = "error: no Docker engine answers"  # what an accepted --from or --spec meets next (none answers here)
SPEC: dict[str, object] = {
    "tag": "x",
    "image": None,
    "flavor": None,
    "torch": "2.7.0",
    "torchvision": None,
    "torchaudio": None,
    "cuda": None,
    "cudnn": None,
    "nccl": None,
    "python": "3.11",
    "os": "debian12",
    "min_driver": None,
    "user": None,
    "labels": {},
    "env": {},
}


@dataclass(frozen=True)
class Reader:
    """One file the tool reads: how a refusal names it, the command that reads it, where it lies."""

    what: str
    argv: Callable[[Path], list[str]]  # the command, given the working folder
    path: Callable[[Path], Path]  # where the file goes in that folder
    parsed: bool = True  # JSON or YAML (a requirements.lock is only text)


def _matrix(folder: Path, text: str = UBUNTU) -> Path:
    path = folder / "matrix.yaml"
    if not path.exists():
        path.write_text(text)
    return path


def _common(folder: Path, text: str = UBUNTU) -> list[str]:
    return ["--matrix", str(_matrix(folder, text)), "--images-dir", str(folder / "images")]


_LOADED: dict[str, plan.Plan] = {}


def _plan(text: str = UBUNTU) -> plan.Plan:
    """The plan of a matrix (loaded once: its names do not depend on the folder)."""
    if text not in _LOADED:
        with tempfile.TemporaryDirectory() as folder:
            _LOADED[text] = plan.load(_matrix(Path(folder), text))
    return _LOADED[text]


def _requirements_lock(folder: Path) -> Path:
    path = folder / "images" / _plan().combinations[0].folder / "requirements.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


BASES_LOCK = Reader("the bases lock", lambda f: ["render", *_common(f)], lambda f: bases.lock_path(_matrix(f)))
REQUIREMENTS_LOCK = Reader(
    "the lock file (requirements.lock)", lambda f: ["render", *_common(f)], _requirements_lock, parsed=False
)
METADATA = Reader(
    "the bake metadata file (--from)",
    lambda f: ["promote", *_common(f, CPU), "--log-dir", str(f / "logs"), "--from", str(f / "metadata.json")],
    lambda f: f / "metadata.json",
)
SPEC_FOR_IMAGE = Reader(
    "the spec file (--spec)",
    lambda f: ["test", "--image", "foo:1", "--spec", str(f / "spec.json")],
    lambda f: f / "spec.json",
)
SPEC_FOR_HOST = Reader(
    "the spec file (--spec)",
    lambda f: ["test", "--host", "local", "--spec", str(f / "spec.json")],
    lambda f: f / "spec.json",
)
READERS = {
    "bases-lock": BASES_LOCK,
    "requirements-lock": REQUIREMENTS_LOCK,
    "bake-metadata": METADATA,
    "spec-image": SPEC_FOR_IMAGE,
    "spec-host": SPEC_FOR_HOST,
}
PARSED = {name: r for name, r in READERS.items() if r.parsed}


def good(reader: Reader) -> bytes:
    """A file the reader accepts."""
    if reader is BASES_LOCK:
        return yaml.safe_dump({"bases": {"ubuntu:24.04": DIGEST}}).encode()
    if reader is REQUIREMENTS_LOCK:
        return b"torch==2.14.1\n"
    if reader is METADATA:
        images = _plan(CPU).combinations[0].images
        return json.dumps({bake.target_name(i): {"containerimage.digest": DIGEST} for i in images}).encode()
    return json.dumps(SPEC).encode()


def listing(folder: Path) -> list[tuple[str, int]]:
    """Every path under the folder and its size (links not followed): what a refusal must leave as it was."""
    found = []
    for top, folders, files in os.walk(folder):
        for name in folders + files:
            path = Path(top) / name
            found.append((str(path.relative_to(folder)), path.lstat().st_size))
    return sorted(found)


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """No machine setting reaches the commands, and no engine answers them."""
    for name in [n for n in os.environ if n.startswith("TORCHIMAGES_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")


def refused(reader: Reader, folder: Path, expected: str, shown_as: Path | None = None) -> str:
    """Run the reader's command on the file in place: exit 2, one located message naming the file, nothing
    on stdout, nothing written; its stderr."""
    argv = reader.argv(folder)
    before = listing(folder)
    code, out, err = run(argv)
    assert code == 2, (out, err)
    assert "Traceback" not in err and out == ""
    first = err.splitlines()[0]
    assert first.startswith(f"{shown_as or reader.path(folder)}"), err
    assert expected in first, err
    assert listing(folder) == before, "a refusal wrote something"
    return err


# --- each case, for each reader ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in READERS if n != "spec-host"])  # accepted, it runs the suites here
def test_a_good_file_is_accepted(tmp_path: Path, name: str) -> None:
    reader = READERS[name]
    reader.path(tmp_path).write_bytes(good(reader))
    code, _, err = run(reader.argv(tmp_path))
    if reader in (METADATA, SPEC_FOR_IMAGE):
        assert code == 2 and err.startswith(NO_ENGINE), err  # read and accepted: the engine is asked next
    else:
        assert code == 0, err


@pytest.mark.parametrize("name", READERS)
def test_a_directory_is_refused(tmp_path: Path, name: str) -> None:
    reader = READERS[name]
    reader.path(tmp_path).mkdir()
    refused(reader, tmp_path, f"{reader.what} must be a regular file, not a directory")


@pytest.mark.parametrize("name", READERS)
def test_a_link_to_dev_zero_is_refused_unread(tmp_path: Path, name: str) -> None:
    reader = READERS[name]
    reader.path(tmp_path).symlink_to("/dev/zero")
    refused(reader, tmp_path, f"{reader.what} must be a regular file, not a character device")


@pytest.mark.parametrize("name", ["bake-metadata", "spec-image", "spec-host"])
def test_dev_zero_itself_is_refused_unread(tmp_path: Path, name: str) -> None:
    reader = READERS[name]
    argv = [("/dev/zero" if a == str(reader.path(tmp_path)) else a) for a in reader.argv(tmp_path)]
    code, out, err = run(argv)
    assert code == 2 and out == "", err
    assert err.startswith(f"/dev/zero: error: {reader.what} must be a regular file, not a character device"), err


@pytest.mark.parametrize("name", READERS)
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path, name: str) -> None:
    reader = READERS[name]
    os.mkfifo(reader.path(tmp_path))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHIMAGES_")}
    result = subprocess.run(  # a process of its own: were the FIFO opened for reading, it would wait forever
        [sys.executable, str(ROOT / "build.py"), *reader.argv(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env=env,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"{reader.path(tmp_path)}: error: {reader.what} must be a regular file, not a FIFO" in result.stderr


@pytest.mark.parametrize("name", READERS)
def test_a_file_over_the_limit_is_refused(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    reader = READERS[name]
    reader.path(tmp_path).write_bytes(good(reader))
    monkeypatch.setenv(textfile.FILE_BYTES_VARIABLE, "10")
    refused(reader, tmp_path, f"{reader.what} is larger than 10 bytes; set TORCHIMAGES_MAX_FILE_BYTES to raise")


@pytest.mark.parametrize("name", READERS)
def test_a_file_not_utf8_is_refused_with_its_line(tmp_path: Path, name: str) -> None:
    reader = READERS[name]
    reader.path(tmp_path).write_bytes(good(reader) + b"\n\xe9\n")
    line = good(reader).count(b"\n") + 2
    refused(reader, tmp_path, f":{line}: error: {reader.what} is not UTF-8: byte 0xe9")


@pytest.mark.parametrize("name", READERS)
def test_a_utf16_file_is_refused(tmp_path: Path, name: str) -> None:
    reader = READERS[name]
    reader.path(tmp_path).write_bytes(good(reader).decode().encode("utf-16"))
    refused(reader, tmp_path, f"{reader.what} is UTF-16 (little-endian) (it starts with a byte order mark)")


@pytest.mark.parametrize("name", PARSED)
def test_deep_nesting_is_refused_with_its_line(tmp_path: Path, name: str) -> None:
    reader = READERS[name]
    reader.path(tmp_path).write_bytes(b"\n" + b"[" * 100_000)
    refused(reader, tmp_path, f":2: error: {reader.what} nests lists and mappings deeper than 100 levels")


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("bake-metadata", b"[]", "expected a JSON object of bake target -> build result, not a list"),
        ("bake-metadata", b"null", "expected a JSON object of bake target -> build result, not null"),
        ("spec-image", b"[]", "the spec file (--spec) must be a JSON object, not a list"),
        ("spec-host", b"null", "the spec file (--spec) must be a JSON object, not null"),
        ("spec-host", b'{"tag": "x"}', "the spec file (--spec): key 'flavor' is missing"),
        ("spec-image", b"1" * 5000, "the spec file (--spec) is not JSON this tool reads"),
        ("bases-lock", b"[]", "the bases lock has no `bases:` mapping"),
        ("bases-lock", b"bases: null\n", "the bases lock has no `bases:` mapping"),
        ("bases-lock", b"bases: {}\nbases: {}\n", "the bases lock has no `bases:` mapping (it has two)"),
        ("bases-lock", b"bases:\n  ubuntu:24.04:\n", ":2: error: ubuntu:24.04: '' is not a sha256:<64 hex> digest"),
        ("bases-lock", b"bases:\n  ubuntu:24.04: [x]\n", ":2: error: ubuntu:24.04: a list or mapping is not a"),
        ("bases-lock", b"bases:\n  [x]: " + DIGEST.encode() + b"\n", ":2: error: a base name must be a plain word"),
        (
            "bases-lock",
            b"bases:\n  a: " + DIGEST.encode() + b"\n  a: " + DIGEST.encode(),
            ":3: error: a is locked twice",
        ),
        ("bases-lock", b"bases:\n  a: '" + DIGEST.encode() + b"\n\n  '", ":2: error: a: 'sha256:aaa"),
        ("bases-lock", b"bases: {a: 1", ":2: error: malformed YAML at column 1: did not find expected ',' or '}'"),
        ("bases-lock", b"bases:\n  a: \x01", ":2: error: character U+0001 at column 6 is not allowed in YAML"),
    ],
)
def test_the_wrong_shape_is_refused_saying_what_it_is(tmp_path: Path, name: str, content: bytes, expected: str) -> None:
    reader = READERS[name]
    reader.path(tmp_path).write_bytes(content)
    refused(reader, tmp_path, expected)


@pytest.mark.parametrize("name", ["bake-metadata", "spec-image", "spec-host"])
def test_a_missing_file_is_refused(tmp_path: Path, name: str) -> None:
    reader = READERS[name]
    refused(reader, tmp_path, f"cannot read {reader.what}: No such file or directory")


def test_a_lock_file_that_vanished_or_never_was_is_no_lock(tmp_path: Path) -> None:
    BASES_LOCK.path(tmp_path).symlink_to(tmp_path / "gone")  # a link whose file was removed
    REQUIREMENTS_LOCK.path(tmp_path).symlink_to(tmp_path / "gone")
    code, _, err = run(["validate", *_common(tmp_path)])
    assert code == 0 and "registry bases are not locked to a digest: matrix.bases.lock does not exist" in err, err


def test_a_digest_ending_in_a_newline_is_refused_not_rendered(tmp_path: Path) -> None:
    """A digest that passed a `^...$` check ended its FROM line early: the Dockerfile broke, exit 0."""
    BASES_LOCK.path(tmp_path).write_text(f'bases:\n  ubuntu:24.04: "{DIGEST}\\n"\n')
    err = refused(BASES_LOCK, tmp_path, f":2: error: ubuntu:24.04: '{DIGEST}\\n' is not a sha256:<64 hex> digest")
    assert "regenerate it with `python build.py lock --bases`" in err


# --- the other files read: --ca-cert, the generated Dockerfiles, the plugin's --image-spec and --facts -----


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda p: p.mkdir(), "must be a regular file, not a directory"),
        (lambda p: p.symlink_to("/dev/zero"), "must be a regular file, not a character device"),
        (lambda p: None, "cannot read the --ca-cert file: No such file or directory"),
    ],
    ids=["directory", "dev-zero", "missing"],
)
@pytest.mark.parametrize("command", ["build", "bake"])
def test_a_ca_cert_that_is_not_a_file_says_what_it_is(
    tmp_path: Path, command: str, make: Callable[[Path], None], expected: str
) -> None:
    ca = tmp_path / "ca.pem"
    make(ca)
    argv = [command, *_common(tmp_path, CPU), "--ca-cert", str(ca), "2.13.0"]
    before = listing(tmp_path)
    code, out, err = run(argv)
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert err.startswith(f"{ca}: error: ") and expected in err and "no such file" not in err, err
    assert listing(tmp_path) == before


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda p: p.mkdir(), "a rendered Dockerfile must be a regular file, not a directory"),
        (lambda p: p.symlink_to("/dev/zero"), "a symbolic link (to '/dev/zero') in the images folder"),
    ],
    ids=["directory", "dev-zero"],
)
@pytest.mark.parametrize("check", [[], ["--check"]])
def test_a_rendered_dockerfile_that_is_not_a_file_is_refused(
    tmp_path: Path, make: Callable[[Path], None], expected: str, check: list[str]
) -> None:
    dockerfile = tmp_path / "images" / _plan().combinations[0].folder / "Dockerfile"
    dockerfile.parent.mkdir(parents=True)
    make(dockerfile)
    argv = ["render", *_common(tmp_path), *check]
    before = listing(tmp_path)
    code, out, err = run(argv)
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert err.startswith(f"{dockerfile}: error: {expected}"), err
    assert listing(tmp_path) == before


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda p: p.mkdir(), "a rendered step script must be a regular file, not a directory"),
        (lambda p: os.mkfifo(p), "a rendered step script must be a regular file, not a FIFO (named pipe)"),
        (lambda p: p.symlink_to("/dev/zero"), "a symbolic link (to '/dev/zero') in the images folder"),
    ],
    ids=["directory", "fifo", "dev-zero"],
)
@pytest.mark.parametrize("check", [[], ["--check"]])
def test_a_rendered_step_script_that_is_not_a_file_is_refused(
    tmp_path: Path, make: Callable[[Path], None], expected: str, check: list[str]
) -> None:
    script = tmp_path / "images" / _plan().combinations[0].folder / "steps" / "venv.sh"
    script.parent.mkdir(parents=True)
    make(script)
    argv = ["render", *_common(tmp_path), *check]
    before = listing(tmp_path)
    code, out, err = run(argv)
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert err.startswith(f"{script}: error: {expected}"), err
    assert listing(tmp_path) == before


@pytest.mark.parametrize("check", [[], ["--check"]])
def test_a_steps_folder_that_is_a_file_is_refused(tmp_path: Path, check: list[str]) -> None:
    steps = tmp_path / "images" / _plan().combinations[0].folder / "steps"
    steps.parent.mkdir(parents=True)
    steps.write_text("not a folder\n")
    argv = ["render", *_common(tmp_path), *check]
    before = listing(tmp_path)
    code, out, err = run(argv)
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert "/steps/" in err.split(": error: ")[0] and "Not a directory" in err, err
    assert listing(tmp_path) == before


def test_a_rendered_dockerfile_not_utf8_is_stale_and_rewritten(tmp_path: Path) -> None:
    dockerfile = tmp_path / "images" / _plan().combinations[0].folder / "Dockerfile"
    dockerfile.parent.mkdir(parents=True)
    dockerfile.write_bytes(b"\xff\xfe junk")
    assert run(["render", *_common(tmp_path), "--check"])[0] == 1
    assert run(["render", *_common(tmp_path)])[0] == 0
    assert "\nFROM " in dockerfile.read_text()


@pytest.mark.parametrize(
    ("option", "make", "expected"),
    [
        ("--image-spec", lambda p: p.mkdir(), "the image spec must be a regular file, not a directory"),
        ("--image-spec", lambda p: p.write_text("[" * 100_000), "the image spec nests lists and mappings deeper"),
        ("--facts", lambda p: p.symlink_to("/dev/zero"), "the facts file (--facts) must be a regular file, not a"),
        ("--facts", lambda p: p.write_text("null"), "the facts file (--facts) must be a JSON object, not null"),
    ],
    ids=["spec-directory", "spec-deep", "facts-dev-zero", "facts-null"],
)
def test_the_plugin_refuses_its_files_by_name(
    tmp_path: Path, option: str, make: Callable[[Path], None], expected: str
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    target = tmp_path / "target.json"
    make(target)
    files = {"--image-spec": spec, "--facts": None, option: target}
    options = [str(a) for key, value in files.items() if value for a in (key, value)]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "torchimages.smoke.plugin", "-p", "no:cacheprovider", *options,
         "--pyargs", "torchimages.smoke.suites", "--collect-only", "-q"],
        capture_output=True, text=True, check=False, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 4, result.stdout + result.stderr  # pytest's status for a usage error
    assert f"ERROR: {target}" in result.stderr and f"error: {expected}" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


# --- settings: every limit of thousands of digits is refused with a message ------------------------------------

LIMITS = [s.name for s in environment.SETTINGS if s.kind == "count"]


@pytest.mark.parametrize("name", LIMITS)
@pytest.mark.parametrize("value", ["9" * 5000, "0", "-1", "1e9", "½", "٣", "lots"])
def test_a_limit_that_is_not_a_sane_whole_number_is_refused(name: str, value: str) -> None:
    with pytest.raises(environment.SettingError, match=f"^{name}=.* must be a positive whole number"):
        environment.count(name, {name: value})


@pytest.mark.parametrize("name", [n for n in LIMITS if n.startswith("TORCHIMAGES_MAX_")])
def test_a_limit_of_thousands_of_digits_exits_2_on_the_command_line(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, "9" * 5000)
    code, out, err = run(["render", *_common(tmp_path)])
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert err.startswith(f"error: {name}='999") and "must be a positive whole number" in err, err
    assert not (tmp_path / "images").exists()


# --- properties: whatever the file holds -----------------------------------------------------------------------

HOSTILE: list[object] = [
    None,
    "",
    " ",
    "\x00",
    "\u200b",
    "\u2028",
    "\ufeff",
    "x" * 100_000,
    "sha256:" + "A" * 64,
    DIGEST + "\n",
    " " + DIGEST,
    DIGEST[:-1],
    "md5:00",
    "../../etc/passwd",
    "$(id)",
    "null",
    "<<",
    10**30,
    -1,
    1.5,
    float("inf"),
    True,
    [],
    {},
]
scalars = st.one_of(st.sampled_from(HOSTILE), st.text(max_size=20), st.integers(), st.booleans(), st.none())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


@st.composite
def spoiled(draw: st.DrawFn, document: Any, keys: list[str]) -> Any:
    """The document with up to three hostile values put in (at a key it has, or a new one)."""
    document = json.loads(json.dumps(document))
    for _ in range(draw(st.integers(0, 3))):
        if not isinstance(document, dict):
            break
        key = draw(st.sampled_from(keys) | st.text(max_size=8))
        inner = document.get(key)
        if isinstance(inner, dict) and inner and draw(st.booleans()):
            inner[draw(st.sampled_from(sorted(inner)))] = draw(values)
        else:
            document[key] = draw(values)
    return document if draw(st.integers(0, 9)) else draw(values)


def encoded(draw: st.DrawFn, text: str) -> bytes:
    """The text as bytes: mostly UTF-8; else deep, cut short, another encoding, or noise."""
    shape = draw(st.integers(0, 15))
    if shape == 15:
        depth = draw(st.integers(1, 5000))
        opener = draw(st.sampled_from(["[", "{", '{"a":', "- ", "{a: "]))
        return (opener * depth).encode() + text.encode("utf-8", "surrogatepass")
    if shape == 14:
        return text[: draw(st.integers(0, len(text)))].encode("utf-8", "surrogatepass")
    if shape == 13:
        return text.encode(draw(st.sampled_from(["utf-16", "utf-32", "latin-1", "utf-8-sig"])), errors="replace")
    if shape == 12:
        return draw(st.binary(max_size=200))
    if shape == 11:
        return draw(st.text(max_size=200)).encode("utf-8", "surrogatepass")
    return text.encode("utf-8", "surrogatepass")


@st.composite
def json_files(draw: st.DrawFn, reader: Reader) -> bytes:
    document = json.loads(good(reader))
    text = json.dumps(draw(spoiled(document, sorted(document))))
    return encoded(draw, text)


@st.composite
def bases_locks(draw: st.DrawFn) -> bytes:
    lock = {"bases": {"ubuntu:24.04": DIGEST, "nvidia/cuda:13.0.3-devel-ubuntu24.04": DIGEST}}
    text = yaml.safe_dump(draw(spoiled(lock, ["bases"])), allow_unicode=draw(st.booleans()), width=10**9)
    if draw(st.integers(0, 9)) == 0:  # aliases: one list repeated, as a bomb would
        text = "x: &x [" + ", ".join(["y"] * 50) + "]\n" + text.replace("bases:", "bases:\n  big: *x\n  dup: *x", 1)
    return encoded(draw, text)


@st.composite
def requirements_locks(draw: st.DrawFn) -> bytes:
    lines = draw(
        st.lists(st.sampled_from(["torch==2.14.1", "numpy", "", "# c", "-c x", "\x00"]) | st.text(), max_size=5)
    )
    return encoded(draw, "\n".join(lines))


def attack(reader: Reader, content: bytes) -> None:
    """The reader's command on the content: exit 0 (2 from the engine that is not here, for what reads the
    file before asking it), or 2 with the first line naming the file and nothing written."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        reader.path(folder).write_bytes(content)
        argv = reader.argv(folder)
        before = listing(folder)
        code, out, err = run(argv)
        assert "Traceback" not in err and all(line.isprintable() for line in err.splitlines()), err
        if code == 2 and err.startswith(NO_ENGINE):
            event("accepted (then no engine)")
            return
        event(f"exit {code}")
        assert code in (0, 2), err
        if code == 2:
            assert err.splitlines()[0].startswith(str(reader.path(folder))), err
            assert out == "" and listing(folder) == before, "a refusal wrote something"
        else:
            (dockerfile,) = (folder / "images").glob("*/Dockerfile")
            froms = [line for line in dockerfile.read_text().splitlines() if line.startswith("FROM ")]
            assert froms and all(len(line.split()) in (2, 4) for line in froms), froms  # FROM x [AS y], whole


FAST = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@FAST
@given(json_files(METADATA))
def test_no_bake_metadata_hurts(content: bytes) -> None:
    attack(METADATA, content)


@FAST
@given(json_files(SPEC_FOR_IMAGE))
def test_no_spec_hurts(content: bytes) -> None:
    attack(SPEC_FOR_IMAGE, content)


@FAST
@given(bases_locks())
def test_no_bases_lock_hurts(content: bytes) -> None:
    attack(BASES_LOCK, content)


@FAST
@given(requirements_locks())
def test_no_requirements_lock_hurts(content: bytes) -> None:
    attack(REQUIREMENTS_LOCK, content)
