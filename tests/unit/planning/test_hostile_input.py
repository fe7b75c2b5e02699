"""Bad input never hurts: every hostile input ends in a located message, exit status 2, nothing written."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.unit.conftest import ROOT
from torchimages.cli.entry import main
from torchimages.planning import expansion, matrix
from torchimages.problems import shown
from torchimages.reference import repository_problem

Cli = Callable[..., tuple[int, str, str]]
GOOD = "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8'}\n"


def write_bytes(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_bytes(data)
    return path


def refused(cli: Cli, *args: str) -> str:
    """Run a command that must refuse its input; its stderr (no traceback, nothing on stdout, nothing written)."""
    code, out, err = cli(*args)
    assert code == 2, (out, err)
    assert out == "" and "Traceback" not in err
    return err


def count_visits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the YAML nodes the matrix reader walks (one list entry, updated as it walks): how much work a
    hostile file made, which a clock on a busy machine does not measure."""
    visits, visit = [0], matrix._Reader.visit

    def counted(reader: matrix._Reader, node: yaml.Node) -> None:
        visits[0] += 1
        visit(reader, node)

    monkeypatch.setattr(matrix._Reader, "visit", counted)
    return visits


# 1. Encoding and control characters


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"matrix:\n  torch: [2.7.0\xe9]\n", ":2: error: the matrix file is not UTF-8: byte 0xe9 at column 16"),
        (b"\xff\xfem\x00a\x00t\x00", ": error: the matrix file is UTF-16 (little-endian)"),
        (b"\xfe\xff\x00m\x00a", ": error: the matrix file is UTF-16 (big-endian)"),
        (bytes(range(256)) * 4, ":2: error: the matrix file is not UTF-8: byte 0x80"),
        (b"matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11\x01.8'}\n", ":3: error: character U+0001 at column"),
        (b"matrix:\n  torch: [2.7.0]\x00\n", ":2: error: character U+0000"),
        (b"matrix:\n  torch: [\x1b[31m2.7.0]\n", ":2: error: character U+001B"),
    ],
    ids=["latin1", "utf16le", "utf16be", "binary", "soh", "nul", "escape"],
)
def test_undecodable_or_control_characters_are_refused(cli: Cli, tmp_path: Path, data: bytes, expected: str) -> None:
    path = write_bytes(tmp_path, data)
    for command in ("validate", "list", "render"):
        err = refused(cli, command, "--matrix", str(path))
        assert f"{path}{expected}" in err
    assert not (tmp_path / "images").exists()


# 2. Not a regular file; too large


def test_a_directory_is_refused(cli: Cli, tmp_path: Path) -> None:
    err = refused(cli, "validate", "--matrix", str(tmp_path))
    assert f"{tmp_path}: error: the matrix file must be a regular file, not a directory" in err


def test_a_device_is_refused_before_reading(cli: Cli) -> None:
    err = refused(cli, "validate", "--matrix", "/dev/zero")  # read, it would never end
    assert "/dev/zero: error: the matrix file must be a regular file, not a character device" in err


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "matrix.yaml"
    os.mkfifo(fifo)
    result = subprocess.run(
        [sys.executable, str(ROOT / "build.py"), "validate", "--matrix", str(fifo)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "must be a regular file, not a FIFO" in result.stderr


def test_a_file_over_the_size_limit_is_refused(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_bytes(tmp_path, GOOD.encode() + b"#" * (1024 * 1024))
    err = refused(cli, "render", "--matrix", str(path))
    assert "larger than 1048576 bytes; set TORCHIMAGES_MAX_MATRIX_BYTES to raise the limit" in err
    assert not (tmp_path / "images").exists()
    monkeypatch.setenv("TORCHIMAGES_MAX_MATRIX_BYTES", str(2 * 1024 * 1024))
    assert cli("validate", "--matrix", str(path))[0] == 0
    monkeypatch.setenv("TORCHIMAGES_MAX_MATRIX_BYTES", "10")
    assert "larger than 10 bytes" in refused(cli, "validate", "--matrix", str(path))
    monkeypatch.setenv("TORCHIMAGES_MAX_MATRIX_BYTES", "lots")
    assert "TORCHIMAGES_MAX_MATRIX_BYTES='lots' must be a positive whole number" in refused(
        cli, "validate", "--matrix", str(path)
    )


# 3. Aliases that multiply


BOMB = (
    "matrix:\n  torch: &x [1,2,3,4,5,6,7,8,9,10]\n  cuda: *x\n  python: *x\n  os: *x\n"
    "  cudnn: *x\n  nccl: *x\n  torchvision: *x\n  torchaudio: *x\n"
)


def test_axes_multiplying_past_the_limit_are_refused_before_expanding(
    cli: Cli, write_matrix: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_expansion(*_: object) -> None:
        raise AssertionError("the product was expanded")

    monkeypatch.setattr(expansion, "expand", no_expansion)
    path = write_matrix(BOMB)
    assert len(BOMB) < 150
    err = refused(cli, "validate", "--matrix", str(path))  # refused without expanding: no_expansion was not called
    assert f"{path}:2: error: matrix: the axes multiply to 100000000 combinations" in err
    assert "more than the limit of 10000; set TORCHIMAGES_MAX_COMBINATIONS to raise it" in err


def test_the_combination_limit_is_raisable(
    cli: Cli, write_matrix: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_matrix("matrix:\n  torch: [2.7.0, 2.7.1]\n  cuda: ['11.8', '12.6']\n")
    monkeypatch.setenv("TORCHIMAGES_MAX_COMBINATIONS", "3")
    assert "multiply to 4 combinations (2 torch x 2 cuda)" in refused(cli, "validate", "--matrix", str(path))
    monkeypatch.setenv("TORCHIMAGES_MAX_COMBINATIONS", "4")
    assert cli("validate", "--matrix", str(path))[0] == 0


def test_include_and_exclude_entries_are_bounded(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    entries = ", ".join(["*e"] * 1001)
    path = write_matrix(f"e: &e {{torch: 2.7.0, cuda: '11.8'}}\nmatrix:\n  include: [{entries}]\n")
    err = refused(cli, "validate", "--matrix", str(path))
    assert f"{path}:3: error: include: 1001 entries, more than the limit of 1000" in err
    path = write_matrix(f"e: &e {{torch: 2.7.0, cuda: '11.8'}}\nmatrix:\n  torch: [2.7.0]\n  exclude: [{entries}]\n")
    assert "exclude: 1001 entries" in refused(cli, "validate", "--matrix", str(path))


def test_a_walk_through_repeated_aliases_stops(
    cli: Cli, write_matrix: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    flavors = ",".join(["runtime"] * 20_000)
    entries = ",".join(["*e"] * 1000)
    path = write_matrix(
        f"f: &f [{flavors}]\ne: &e {{torch: 2.7.0, cuda: '11.8', flavors: *f}}\nmatrix:\n  include: [{entries}]\n"
    )
    visits = count_visits(monkeypatch)
    err = refused(cli, "validate", "--matrix", str(path))
    assert visits == [matrix.MAX_NODES + 1], "the walk stops at the node past the limit (20 million otherwise)"
    assert "the matrix expands to more than 1000000 YAML nodes" in err


# 4. --images-dir naming a file


@pytest.mark.parametrize("command", ["validate", "list", "plan", "render"])
def test_images_dir_naming_a_file_is_refused(cli: Cli, write_matrix: Callable[[str], Path], command: str) -> None:
    path = write_matrix(GOOD)
    a_file = path.parent / "afile"
    a_file.write_text("keep me\n")
    selector = ["2"] if command == "plan" else []
    err = refused(cli, command, "--matrix", str(path), "--images-dir", str(a_file), *selector)
    assert f"{a_file}: error: --images-dir: the images folder is not a directory" in err
    err = refused(cli, command, "--matrix", str(path), "--images-dir", str(a_file / "sub"), *selector)
    assert f"the images folder is inside {a_file}, which is not a directory" in err
    assert a_file.read_text() == "keep me\n"


# 5. Standard output closed early


def run_build(args: list[str], stdout: int, stderr: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "build.py"), *args],
        stdout=stdout,
        stderr=stderr,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=60,
    )


@pytest.mark.parametrize("args", [["list"], ["list", "--json"], ["plan", "2"], ["validate"]])
def test_a_reader_that_went_away_ends_quietly_with_141(args: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head -1` that has already left: every write fails with EPIPE
    try:
        result = run_build(args, stdout=write_end)
    finally:
        os.close(write_end)
    assert result.returncode == 141, result.stderr
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr


def test_stderr_into_a_closed_pipe_too_ends_quietly_with_141() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # `build.py list 2>&1 | head -1`
    try:
        result = run_build(["list"], stdout=write_end, stderr=write_end)
    finally:
        os.close(write_end)
    assert result.returncode == 141


def test_a_full_stdout_is_a_one_line_error() -> None:
    with open("/dev/full", "w") as full:
        result = run_build(["list", "--json"], stdout=full.fileno())
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr
    assert result.stderr.splitlines()[-1] == "error: cannot write the output: No space left on device"


def test_a_closed_stdout_is_refused(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(GOOD)
    result = subprocess.run(
        f"{sys.executable} {ROOT / 'build.py'} render --matrix {path} >&-",
        shell=True,  # the test needs a shell to close stdout
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 2 and result.stderr == "error: standard output is closed\n"
    assert not (path.parent / "images").exists()


def test_errors_into_a_closed_pipe_end_quietly_with_141(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(GOOD + "    - {torch: 2.8.0, cuda: '11.8'}\n")
    read_end, write_end = os.pipe()
    os.close(read_end)  # `build.py validate 2>&1 | head -1`
    try:
        result = run_build(["validate", "--matrix", str(path)], stdout=write_end, stderr=write_end)
    finally:
        os.close(write_end)
    assert result.returncode == 141


# 6. The repository follows the OCI reference grammar


@pytest.mark.parametrize(
    "repository",
    [
        "torchimages/pytorch",
        "pytorch",
        "ghcr.io/org/team/pytorch",
        "localhost:5000/a/b",
        "registry.example.com:443/a_b/c__d/e-f/g---h/i.j",
        "Registry-1.Example.COM/x",
        "localhost/x",
    ],
)
def test_good_repositories_are_accepted(repository: str) -> None:
    assert repository_problem(repository) is None


@pytest.mark.parametrize(
    ("repository", "rule"),
    [
        ("Torchimages/pytorch", "path component 'Torchimages' has capital letters"),
        ("torchimages/pytorch:latest", "has no tag"),
        ("torchimages/pytorch@sha256:" + "0" * 64, "has no digest"),
        ("torch images/pytorch", "no spaces or control characters"),
        ("torch\x00images", "no spaces or control characters"),
        ("torch\u200bimages", "no spaces or control characters"),
        ("x/a..b", "path component 'a..b' must be lowercase letters and digits"),
        ("a..b/c", "registry host 'a..b' must be"),
        ("a/_b", "path component '_b' must be"),
        ("a/b-", "path component 'b-' must be"),
        ("a___b", "path component 'a___b' must be"),
        ("a//b", "no empty path component"),
        ("a/b/", "no empty path component"),
        ("/a", "no empty path component"),
        ("-bad.host/a", "registry host '-bad.host' must be"),
        ("host..com/a", "registry host 'host..com' must be"),
        ("localhost:99999/a", "the port must be a number from 1 to 65535"),
        ("localhost:port/a", "the port must be a number"),
        ("pytörch", "ASCII only"),
        ("a" * 256, "at most 255 characters"),
    ],
)
def test_bad_repositories_name_the_rule(repository: str, rule: str) -> None:
    problem = repository_problem(repository)
    assert problem is not None and rule in problem


def test_a_bad_repository_is_refused_with_its_line(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix("# where tags go\nrepository: torchimages/PyTorch:2\n" + GOOD)
    err = refused(cli, "render", "--matrix", str(path))
    assert f"{path}:2: error: repository: a repository has no tag" in err
    assert not (path.parent / "images").exists()
    path = write_matrix("repository: 'a..b'\n" + GOOD)
    assert f"{path}:1: error: repository: path component 'a..b' must be" in refused(cli, "list", "--matrix", str(path))


# 7. Excludes that match nothing


def test_an_exclude_matching_nothing_is_a_warning_with_its_line(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(
        "matrix:\n  torch: [2.7.0]\n  cuda: ['11.8', '12.6']\n  exclude:\n    - {torch: 2.7.0, cuda: '12.6'}\n"
        "    - {torch: 2.7.1, cuda: '12.6'}\n"
    )
    code, _, err = cli("validate", "--matrix", str(path))
    assert code == 0, err
    assert f"{path}:6: warning: torch: this exclude matches no combination (torch 2.7.1 is not among" in err
    assert ":5:" not in err


@pytest.mark.parametrize(
    ("entry", "key"), [("{torch: 2.7.0, flavors: [devel]}", "flavors"), ("{torch: 2.7.0, os: debian12}", "os")]
)
def test_an_exclude_naming_no_axis_is_an_error(
    cli: Cli, write_matrix: Callable[[str], Path], entry: str, key: str
) -> None:
    path = write_matrix(f"matrix:\n  torch: [2.7.0]\n  cuda: ['11.8', '12.6']\n  exclude:\n    - {entry}\n")
    err = refused(cli, "render", "--matrix", str(path))
    assert f"{path}:5: error: {key}: '{key}' is not an axis of this matrix, so this exclude can never match" in err
    assert "(allowed: torch, cuda)" in err
    assert not (path.parent / "images").exists()


# 8. Values shown escaped; each error told once


def test_invisible_characters_are_shown_escaped(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(
        'matrix:\n  torch: ["2.7.0\\u200b", "2.7.0\\0", "x\\u2028y", "a\\u202eb"]\n'
        '  cuda: ["11.8"]\n  include:\n    - {"tor\\u200bch": 2.7.0}\n'
    )
    err = refused(cli, "validate", "--matrix", str(path))
    for escaped in ("'2.7.0\\u200b'", "'2.7.0\\x00'", "'x\\u2028y'", "'a\\u202eb'", "unknown key 'tor\\u200bch'"):
        assert escaped in err, escaped
    assert all(line.isprintable() for line in err.splitlines())
    assert len(err.splitlines()) == 5


def test_an_error_repeated_for_every_combination_is_told_once(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix("matrix:\n  torch: [2.99.0]\n  cuda: ['11.8', '12.6', '12.8']\n  python: ['3.10', '3.11']\n")
    err = refused(cli, "validate", "--matrix", str(path))
    assert err.count("torch 2.99.0 is not in the knowledge base") == 1, err


def test_shown_escapes_only_what_is_not_printable() -> None:
    assert shown("2.7.0 ok") == "2.7.0 ok"
    assert shown("a\x00b\u200bc\u2028d\te\x1b") == "a\\x00b\\u200bc\\u2028d\\te\\x1b"
    assert len(shown("x" * 10**6)) < 1100


# 9. Empty selectors; values with spaces around them


@pytest.mark.parametrize("command", ["list", "plan"])
@pytest.mark.parametrize("selector", ["", "   ", " 2.7.0", "2.7.0-cuda11.8 "])
def test_blank_or_padded_selectors_are_refused(
    cli: Cli, write_matrix: Callable[[str], Path], command: str, selector: str
) -> None:
    err = refused(cli, command, "--matrix", str(write_matrix(GOOD)), selector)
    assert f"error: selector: selector {selector!r} is empty or has spaces around it" in err


def test_a_value_with_spaces_around_it_is_refused_not_stripped(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix("matrix:\n  include:\n    - {torch: ' 2.7.0', cuda: \"11.8\\t\"}\n")
    err = refused(cli, "validate", "--matrix", str(path))
    assert f"{path}:3: error: torch: ' 2.7.0' has spaces around it; write '2.7.0'" in err
    assert f"{path}:3: error: cuda: '11.8\\t' has spaces around it; write '11.8'" in err
    path = write_matrix("repository: 'torchimages/pytorch '\n" + GOOD)
    assert "repository: 'torchimages/pytorch ' has spaces around it" in refused(cli, "list", "--matrix", str(path))


def test_a_padded_selector_suggests_the_trimmed_one(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    err = refused(cli, "list", "--matrix", str(write_matrix(GOOD)), " 2.7.0")
    assert "did you mean '2.7.0'?" in err


# 10. Property: whatever the matrix, no traceback, exit 0 or 2, located refusals, nothing written on refusal

INJECTED = "{{ 'INJ' ~ 'ECTED' }}"  # rendered by Jinja, this would read INJECTED
HOSTILE_TEXT = [
    "",
    " ",
    "\u200b",
    "2.7.0\u200b",
    "\x00",
    "\u2028",
    "\u202e",
    "\ufeff",
    "x" * 100_000,
    INJECTED,
    "{% for x in range(10**9) %}{% endfor %}",
    "{# c #}",
    "${HOME}",
    "$(id)",
    "../../etc",
    "*",
    "[",
    "-",
    "~",
    "null",
    "yes",
    "12.10",
    "2.7",
    "2.7.0.0",
    "<<",
]
VALID = ["2.7.0", "2.7.1", "2.14.1", "11.8", "12.6", "13.0", "cpu", "3.10", "3.11", "ubuntu22.04", "debian12"]
KEYS = [*matrix.COMBINATION_KEYS, "include", "exclude", "repository", "matrix", "Torch", "tor\u200bch", "<<"]

scalars = st.one_of(
    st.sampled_from(VALID),
    st.sampled_from(HOSTILE_TEXT),
    st.text(max_size=20),
    st.integers(),
    st.floats(),
    st.booleans(),
    st.none(),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)
entries = st.dictionaries(st.sampled_from(matrix.COMBINATION_KEYS), values, max_size=4)


@st.composite
def documents(draw: st.DrawFn) -> bytes:
    """A matrix file: a valid one with hostile values put in, or hostile throughout; shared lists (YAML
    aliases), deep nesting, broken quoting, arbitrary text and bytes."""
    shared = draw(st.lists(st.sampled_from(VALID), min_size=1, max_size=3))
    document: dict[str, object]
    if draw(st.booleans()):
        row: dict[str, object] = {"torch": "2.7.0", "cuda": "11.8"}
        document = {"matrix": {"include": [row]}}
        for _ in range(draw(st.integers(0, 2))):
            place = draw(st.sampled_from(["row", "flavors", "platforms", "repository", "exclude", "top"]))
            value = draw(st.one_of(scalars, values))
            if place == "row":
                row[draw(st.sampled_from(KEYS))] = value
            elif place == "flavors":
                row["flavors"] = draw(st.lists(st.one_of(st.sampled_from(["devel", "runtime"]), scalars), max_size=3))
            elif place == "platforms":
                known = st.sampled_from(["linux/amd64", "linux/arm64", "arm64"])
                chosen = draw(st.lists(st.one_of(known, scalars), max_size=3))
                (row if draw(st.booleans()) else document)["platforms"] = chosen
            elif place == "repository":
                document["repository"] = value
            elif place == "exclude":
                document["matrix"] = {"torch": ["2.7.0"], "cuda": ["11.8", "12.6"], "exclude": [{"cuda": value}]}
            else:
                document[draw(st.sampled_from(KEYS))] = value
    else:
        body: dict[str, object] = {}
        for axis in draw(st.lists(st.sampled_from(matrix.AXIS_KEYS), max_size=3, unique=True)):
            body[axis] = shared if draw(st.booleans()) else draw(st.lists(st.one_of(scalars, values), max_size=3))
        if draw(st.booleans()):
            body["include"] = draw(st.lists(entries, max_size=3)) if draw(st.booleans()) else draw(values)
        if draw(st.booleans()):
            body["exclude"] = draw(st.lists(entries, max_size=2))
        document = {"matrix": body if draw(st.integers(0, 9)) else draw(values)}
        if draw(st.booleans()):
            document["repository"] = draw(st.one_of(st.sampled_from(["torchimages/pytorch", "a/b"]), scalars))
    text = yaml.safe_dump(document, allow_unicode=draw(st.booleans()), width=10**9)
    shape = draw(st.integers(0, 19))
    if shape == 19:
        depth = draw(st.integers(1, 2000))
        text += "deep: " + "[" * depth + "]" * depth + "\n"
    elif shape == 18:
        text = draw(st.text(max_size=200))
    elif shape == 17:
        text = text.replace("'", "", 1)
    elif shape == 16:
        return draw(st.binary(max_size=200))
    elif shape == 15:
        return text.encode(draw(st.sampled_from(["utf-16", "latin-1", "utf-32"])), errors="replace")
    return text.encode("utf-8", errors="surrogatepass")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(documents())
def test_no_matrix_hurts(document: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "matrix.yaml"
        path.write_bytes(document)
        images = Path(folder) / "images"
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["render", "--matrix", str(path), "--images-dir", str(images)])
        event(f"exit {code}")
        assert code in (0, 2), err.getvalue()
        assert "INJECTED" not in out.getvalue() + err.getvalue()
        if code == 2:
            lines = err.getvalue().splitlines()
            assert lines and lines[0].startswith(str(path)), lines
            assert all(line.isprintable() and ("error: " in line or "warning: " in line) for line in lines), lines
            assert not images.exists() and out.getvalue() == ""
        else:
            rendered = [p.read_text() for p in images.glob("*/Dockerfile")]
            assert rendered and not any("INJECTED" in text for text in rendered)


# Found by the above: a list used as a key, and huge values


def test_a_list_key_of_nested_aliases_is_refused_quickly(
    cli: Cli, write_matrix: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    levels = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for name, below in zip("bcdefg", "abcdef", strict=True):
        levels.append(f"{name}: &{name} [{', '.join([f'*{below}'] * 10)}]")
    path = write_matrix("\n".join(levels) + "\n? *g\n: 1\n" + GOOD)
    visits = count_visits(monkeypatch)
    err = refused(cli, "validate", "--matrix", str(path))
    assert visits[0] < 100, "refused at the key, without walking its ten million aliased nodes"
    # an alias is its anchor's node, so the line is the anchor's (7), not the `? *g` line
    assert f"{path}:7: error: a key in the matrix file must be a plain word, not a list or mapping" in err


def test_a_huge_value_is_not_printed_whole(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix("matrix:\n  include:\n    - {cuda: '11.8', torch: " + "2" * 500_000 + "}\n")
    err = refused(cli, "validate", "--matrix", str(path))
    assert len(err) < 5000 and "characters cut]" in err and err.startswith(f"{path}:3: error: torch: '222")
