"""make passes TAG, MATRIX, IMAGE and the *_ARGS variables to the tool as arguments, never as shell text (issue 42):
`make list TAG='x; touch f'` ran `touch f`. The real Makefile runs (GNU make) in a folder whose build.py, bench
scripts and `pytest` only record the arguments they receive; the venv and the engine are taken as made (`-o`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")

RECORDER = """import json, os, sys
with open(os.environ["RECORD"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A folder the Makefile runs in: the real scripts/make_args.py; build.py, bench/*.py and `python -m pytest`
    that record their arguments; a scripts/start-docker.sh that does nothing."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "make_args.py", tmp_path / "scripts")
    scripts = ["build.py", "bench/pull.py", "bench/compression.py", "bench/mutants.py", "bench/build_vs_install.py"]
    for script in [*scripts, "pytest/__main__.py"]:
        (tmp_path / script).parent.mkdir(exist_ok=True)
        (tmp_path / script).write_text(RECORDER)
    (tmp_path / "pytest" / "__init__.py").write_text("")
    (tmp_path / "scripts" / "start-docker.sh").write_text("#!/bin/sh\n")  # the engine, taken as there
    (tmp_path / "scripts" / "start-docker.sh").chmod(0o755)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / ".installed").write_text("")
    return tmp_path


def make(tree: Path, target: str, **variables: str) -> tuple[int, str, list[list[str]]]:
    """Run `make TARGET NAME=VALUE...` (each value one argument, as a shell's quotes would pass it): exit status,
    what it printed (stdout, then stderr), and the argument lists the recorders received."""
    record = tree / "record.jsonl"
    record.unlink(missing_ok=True)
    assignments = [f"{name}={value}" for name, value in variables.items()]
    command = ["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), "-C", str(tree)]
    command += ["-o", str(tree / "venv" / ".installed"), "-o", "engine", target, f"VENV={tree / 'venv'}"]
    command += [f"PY={sys.executable}", "HOST_PIP=0", *assignments]
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "TAG", "MATRIX"))}
    done = subprocess.run(command, capture_output=True, text=True, env={**environment, "RECORD": str(record)})
    calls = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    return done.returncode, done.stdout + done.stderr, calls


def hostile(marker: Path) -> list[str]:
    """Values that run `touch marker` where they are shell (or make) text."""
    return [
        f"x; touch {marker}",
        f"a'b; touch {marker}; '",
        f'a"b; touch {marker}; "',
        f"$(touch {marker})",
        f"`touch {marker}`",
        f"$(shell touch {marker})",
        f"x && touch {marker} #",
    ]


@pytest.mark.parametrize(
    ("target", "before", "after"),
    [
        ("list", ["list", "--matrix", "matrix.yaml", "--"], []),
        ("doctor", ["doctor", "--matrix", "matrix.yaml", "--"], []),
        ("build", ["build", "--matrix", "matrix.yaml", "--"], []),
        ("test-images", ["test", "--matrix", "matrix.yaml", "--"], []),
        ("bench-build", ["--"], []),
    ],
)
def test_a_tag_of_any_text_reaches_the_tool_as_one_argument_and_runs_nothing(
    tree: Path, target: str, before: list[str], after: list[str]
) -> None:
    marker = tree / "pwned"
    for tag in [*hostile(marker), "a'b", "x$$y", "a b", "--json", "--matrix=/etc/hostname"]:  # never an option
        code, err, calls = make(tree, target, TAG=tag)
        assert code == 0, err
        assert calls == [[*before, tag, *after]], (tag, calls)
        assert not marker.exists(), f"TAG={tag!r} ran a command"


@pytest.mark.parametrize(
    ("target", "variable", "before"),
    [
        ("build", "BUILD_ARGS", ["build", "--matrix", "matrix.yaml"]),
        ("doctor", "DOCTOR_ARGS", ["doctor", "--matrix", "matrix.yaml"]),
        ("test-images", "TEST_ARGS", ["test", "--matrix", "matrix.yaml"]),
        ("test-unit", "PYTEST_ARGS", ["tests/unit"]),
        ("mutants", "MUTANTS_ARGS", []),
        ("bench-build", "BENCH_ARGS", []),
    ],
)
def test_args_are_split_as_a_shell_splits_words_and_run_nothing(
    tree: Path, target: str, variable: str, before: list[str]
) -> None:
    marker = tree / "pwned"
    tag = ["--", "2.7.0"] if target in ("build", "doctor", "test-images", "bench-build") else []
    cases = {
        "--bases bootstrap --jobs 2": ["--bases", "bootstrap", "--jobs", "2"],
        '--label \'"a b" c\' "d e"': ["--label", '"a b" c', "d e"],
        **{f"--x '{v}'" if "'" not in v else f'--x "{v}"': ["--x", v] for v in hostile(marker) if '"' not in v},
        f"--x $(touch {marker}) `touch {marker}`": ["--x", "$(touch", f"{marker})", "`touch", f"{marker}`"],
    }
    for value, words in cases.items():
        code, err, calls = make(tree, target, TAG="2.7.0", **{variable: value})
        assert code == 0, err
        assert calls == [[*before, *words, *tag]], (value, calls)
        assert not marker.exists(), f"{variable}={value!r} ran a command"


def test_the_other_values_are_arguments_too(tree: Path) -> None:
    marker = tree / "pwned"
    for value in hostile(marker):
        assert make(tree, "bench-pull", IMAGE=value)[2] == [[value]]
        assert make(tree, "list", MATRIX=value)[2] == [["list", "--matrix", value, "--"]]
        assert make(tree, "render", MATRIX=value)[2] == [["render", "--matrix", value]]
    assert not marker.exists()


def test_an_args_value_that_cannot_be_split_is_one_line_and_runs_nothing(tree: Path) -> None:
    code, err, calls = make(tree, "build", TAG="2.7.0", BUILD_ARGS="--bases 'bootstrap")
    assert code != 0 and calls == []
    assert 'make: BUILD_ARGS: cannot split "--bases \'bootstrap" into arguments: No closing quotation' in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("target", ["build", "test-images"])
def test_no_tag_is_the_usage_line(tree: Path, target: str) -> None:
    code, err, calls = make(tree, target)
    assert code != 0 and calls == []
    assert f"usage: make {target} TAG=<tag prefix" in err, err


def test_make_help_still_lists_the_targets() -> None:
    done = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "help"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "  build          build, verify and tag images" in done.stdout
    assert "  list           list image tags" in done.stdout
