"""Derived images keep the promise (building/constraints.py): every pin of the image's constraints file is
installed at its version, or verification fails naming what changed; no file is said, never failed.

Every answer is the facts probe's `constraints` answer written out (tests/fakes.py `constraints_answer`): the
file's text and the installed versions are literals here. The builder's tests go through `Builder` and the
fake engine, so removing the check from `_check_before_tagging` fails them. The probe's bounded read
(torchimages/probes/scripts/facts.py) is run on real files of every awkward kind.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.fakes import CONSTRAINTS_HEADER, CU118_270, FakeEngine, Raw, constraints_answer
from torchimages.building import constraints, verify
from torchimages.building.builder import Builder
from torchimages.building.constraints import HEADER, Pin
from torchimages.building.outcome import Outcome
from torchimages.building.requests import BuildOptions
from torchimages.planning import plan

CUDA_MATRIX = "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8'}\n"
# What a true 2.7.0+cu118 image writes (sorted, local labels kept) and holds.
PINS = (
    "nvidia-cublas-cu11==11.11.3.6",
    "nvidia-cuda-runtime-cu11==11.8.89",
    "nvidia-cudnn-cu11==9.1.0.70",
    "nvidia-nccl-cu11==2.21.5",
    "torch==2.7.0+cu118",
    "torchaudio==2.7.0+cu118",
    "torchvision==0.22.0+cu118",
    "triton==3.3.0",
)
FILE = CONSTRAINTS_HEADER + "\n" + "\n".join(PINS) + "\n"
INSTALLED = {
    "nvidia-cublas-cu11": "11.11.3.6",
    "nvidia-cuda-runtime-cu11": "11.8.89",
    "nvidia-cudnn-cu11": "9.1.0.70",
    "nvidia-nccl-cu11": "2.21.5",
    "torch": "2.7.0+cu118",
    "torchaudio": "2.7.0+cu118",
    "torchvision": "0.22.0+cu118",
    "triton": "3.3.0",
    "numpy": "2.2.6",
    "pip": "25.3",
}
LIFTED = {"PIP_CONSTRAINT": "", "UV_CONSTRAINT": None}


@pytest.fixture
def cuda(write_matrix: Callable[[str], Path]) -> list[plan.Selected]:
    return plan.select(plan.load(write_matrix(CUDA_MATRIX)), [])


def build(answer: Raw | None, selected: list[plan.Selected], tmp_path: Path) -> tuple[FakeEngine, list[Outcome], str]:
    holds = dict(CU118_270) if answer is None else {**CU118_270, "constraints": answer}
    engine = FakeEngine(holds)
    said: list[str] = []
    options = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs", push=True)
    outcomes = Builder(engine, options, None, out=said.append).build(selected)
    return engine, outcomes, "\n".join(said)


def verdict(answer: Raw) -> constraints.ConstraintsVerdict:
    return verify.check_constraints(verify.decode({**CU118_270, "constraints": answer}))


def drifts(answer: Raw) -> list[str]:
    found = verdict(answer)
    assert found.checked, found.notes
    return [str(drift) for drift in found.drifts]


# --- through the builder: an image that no longer has its pins is not tagged ------------------------------


def test_an_image_that_keeps_its_pins_gets_the_tag(cuda: list[plan.Selected], tmp_path: Path) -> None:
    engine, outcomes, said = build(constraints_answer(FILE, INSTALLED), cuda, tmp_path)
    assert [o.status for o in outcomes] == ["built", "built"], [o.detail for o in outcomes]
    assert engine.tagged and "constraint" not in said


def test_a_replaced_nvidia_wheel_leaves_no_tag_and_is_named(cuda: list[plan.Selected], tmp_path: Path) -> None:
    replaced = {**INSTALLED, "nvidia-cudnn-cu11": "9.10.2.21"}
    engine, outcomes, _ = build(constraints_answer(FILE, replaced, environment=LIFTED), cuda, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    for outcome in outcomes:
        assert "nvidia-cudnn-cu11: the image was built with 9.1.0.70, it now has 9.10.2.21" in outcome.detail
    assert engine.tagged == [] and engine.pushed == []


def test_an_image_without_the_file_is_said_not_failed(cuda: list[plan.Selected], tmp_path: Path) -> None:
    for answer in (constraints_answer(None, INSTALLED), None):  # no file; an older probe (no answer)
        _, outcomes, said = build(answer, cuda, tmp_path)
        assert [o.status for o in outcomes] == ["built", "built"], [o.detail for o in outcomes]
        assert "not checked" in said, said


# --- the rule, on literal answers ---------------------------------------------------------------------------


def test_the_true_answer_has_no_drift() -> None:
    assert drifts(constraints_answer(FILE, INSTALLED)) == []
    assert verdict(constraints_answer(FILE, INSTALLED)).notes == ()


def test_another_torch_build_of_the_same_version_is_named() -> None:
    """torch 2.7.0+cpu replacing 2.7.0+cu118: the tag's torch fact (2.7.0) still holds; the pin does not."""
    assert drifts(constraints_answer(FILE, {**INSTALLED, "torch": "2.7.0+cpu"})) == [
        "torch: the image was built with 2.7.0+cu118, it now has 2.7.0+cpu"
    ]


def test_a_removed_distribution_is_named() -> None:
    installed = {name: version for name, version in INSTALLED.items() if name != "triton"}
    assert drifts(constraints_answer(FILE, installed)) == [
        "triton: the image was built with 3.3.0, it is no longer installed"
    ]


def test_every_drift_is_named_in_the_files_order() -> None:
    installed = {**INSTALLED, "torch": "2.8.0", "nvidia-nccl-cu11": "2.27.3"}
    assert drifts(constraints_answer(FILE, installed)) == [
        "nvidia-nccl-cu11: the image was built with 2.21.5, it now has 2.27.3",
        "torch: the image was built with 2.7.0+cu118, it now has 2.8.0",
    ]


def test_names_normalize_and_versions_compare_by_pep_440() -> None:
    """Names normalized (PEP 503), versions by PEP 440: 13.0.3 is 13.0.3.0."""
    text = f"{HEADER}\nCuda_Toolkit==13.0.3\nnvidia.cudnn-cu11==9.1.0.70\ntorch==2.7.0+cu118\n"
    installed = {"Cuda-Toolkit": "13.0.3.0", "nvidia-cudnn-cu11": "9.1.0.70", "torch": "2.7.0+cu118"}
    assert drifts(constraints_answer(text, installed)) == []


@pytest.mark.parametrize(
    ("pinned", "installed"),
    [
        ("2.14.1", "2.14.1+cpu"),  # a PyPI build replaced by a local one: pip's and uv's `==2.14.1` admit it
        ("2.14.1", "2.14.1+cu126"),
        ("2.14.1+cu126", "2.14.1"),  # a local build replaced by the PyPI one
        ("2.14.1+cu126", "2.14.1+cpu"),
    ],
)
def test_another_local_label_of_the_pinned_version_is_a_drift(pinned: str, installed: str) -> None:
    """The pin is the exact build: another local label of the same version is another build of torch."""
    text = f"{HEADER}\ntorch=={pinned}\n"
    assert drifts(constraints_answer(text, {"torch": installed})) == [
        f"torch: the image was built with {pinned}, it now has {installed}"
    ]


def test_a_lifted_variable_is_said_beside_the_drift() -> None:
    found = verdict(constraints_answer(FILE, {**INSTALLED, "torch": "2.8.0"}, environment=LIFTED))
    assert found.notes == (
        "PIP_CONSTRAINT is empty (the image set it to /etc/pip/constraint.txt): installs are not held to the pins",
        "UV_CONSTRAINT is not set (the image set it to /etc/pip/constraint.txt): installs are not held to the pins",
    )


@pytest.mark.parametrize(
    ("answer", "note"),
    [
        (constraints_answer(None, INSTALLED), "no /etc/pip/constraint.txt (an image older than it"),
        (constraints_answer("torch==1.0\n", INSTALLED), "was not written by torchimages"),
        ({"path": "/etc/pip/constraint.txt", "error": "not a regular file"}, "was not read (not a regular file)"),
        ({"path": "/etc/pip/constraint.txt", "text": FILE, "installed": ["torch"]}, "was not read (a malformed"),
        ({"path": "/etc/pip/constraint.txt", "text": FILE, "installed": {"torch": 2}}, "was not read (a malformed"),
        ("not a mapping", "an older probe"),
    ],
    ids=["no-file", "foreign-file", "unreadable", "installed-not-a-mapping", "version-not-text", "older-probe"],
)
def test_what_cannot_be_checked_is_said_never_failed(answer: Any, note: str) -> None:
    found = verdict(answer)
    assert not found.checked and found.drifts == () and note in found.notes[0], found.notes


def test_lines_that_are_not_pins_are_passed_over_and_counted() -> None:
    options = "-r other.txt\n--index-url https://x\n"
    text = f"{HEADER}\n{options}torch>=2\nnumpy==2.2.6; python_version < '3'\ntriton==3.3.0\n"
    found = verdict(constraints_answer(text, INSTALLED))
    assert found.checked and found.drifts == ()
    assert found.notes == ("/etc/pip/constraint.txt: 4 line(s) that are not `name==version` were passed over",)


# --- the parser: hostile content ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "pins"),
    [
        ("", ()),
        (HEADER, ()),
        (f"{HEADER}\n# a comment\n\n   \ntorch==2.7.0  # trailing\n", (Pin("torch", "2.7.0"),)),
        (f"{HEADER}\ncuda-toolkit[nvcc, cudart]==13.0.3\n", (Pin("cuda-toolkit", "13.0.3"),)),
        (f"{HEADER}\ntorch == 2.7.0+CU118\n", (Pin("torch", "2.7.0+cu118"),)),
        (f"{HEADER}\ntorch==2.7.0\ntorch==2.7.0\n", (Pin("torch", "2.7.0"),)),
        (f"{HEADER}\ntorch==2.*\ntorch===2.7\ntorch==\n==2.7\n-c x.txt\n", ()),
        (f"{HEADER}\ntor\x00ch==2.7.0\ntorch==2.7\x1b[2J\n\ufffd==1\ntorch\u200b==1\n", ()),
        (f"{HEADER}\r\ntorch==2.7.0\r\n", (Pin("torch", "2.7.0"),)),
    ],
    ids=["empty", "header-only", "comments", "extras", "spaces-and-case", "repeat", "not-exact", "control", "crlf"],
)
def test_parse(text: str, pins: tuple[Pin, ...]) -> None:
    assert constraints.parse(text).pins == pins


def test_a_huge_file_is_read_to_a_bound() -> None:
    lines = [f"p{i}==1.0" for i in range(constraints.MAX_LINES + 5)]
    found = constraints.parse(HEADER + "\n" + "\n".join(lines))
    assert len(found.pins) == constraints.MAX_LINES - 1  # the header is one of the lines read


NAMES = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,20}[A-Za-z0-9])?", fullmatch=True)
VERSIONS = st.tuples(
    st.lists(st.integers(0, 10**6), min_size=1, max_size=5), st.none() | st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True)
).map(lambda v: ".".join(map(str, v[0])) + (f"+{v[1]}" if v[1] else ""))


@settings(max_examples=300, deadline=None)
@given(st.text() | st.binary().map(lambda b: b.decode("utf-8", errors="replace")))
def test_parse_never_raises_and_keeps_only_valid_pins(text: str) -> None:
    found = constraints.parse(text)
    for pin in found.pins:
        assert pin.name.isascii() and pin.name == pin.name.lower() and pin.name.isprintable()
        assert pin.version.isascii() and pin.version.isprintable() and " " not in pin.version
    assert len(found.pins) + found.skipped <= constraints.MAX_LINES


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(NAMES, VERSIONS), max_size=30, unique_by=lambda pin: canonicalize_name(pin[0])),
    st.text(alphabet="# \t\n-rc", max_size=40),
)
def test_what_the_templates_write_is_read_back(pins: list[tuple[str, str]], noise: str) -> None:
    text = HEADER + "\n" + "\n".join(f"{name}=={version}" for name, version in pins) + "\n# " + noise
    found = constraints.parse(text)
    assert found.ours
    expected = dict.fromkeys(Pin(canonicalize_name(n), str(Version(v))) for n, v in pins)
    assert found.pins == tuple(expected)
    answer = constraints_answer(text, {pin.name: pin.version for pin in found.pins})
    assert constraints.check({"constraints": answer}).drifts == ()


# --- the probe's bounded read (torchimages/probes/scripts/facts.py), on real files --------------------------


@pytest.fixture(scope="module")
def probe() -> ModuleType:
    path = Path(constraints.__file__).parents[1] / "probes" / "scripts" / "facts.py"
    spec = importlib.util.spec_from_file_location("facts_probe", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_probe_reads_a_file_within_bounds(probe: ModuleType, tmp_path: Path) -> None:
    small = tmp_path / "small.txt"
    small.write_bytes(FILE.encode() + b"caf\xe9==1.0\n")
    assert probe.read_bounded(str(small), 1 << 20) == {"text": FILE + "caf\ufffd==1.0\n"}
    assert probe.read_bounded(str(small), 10) == {"error": "larger than 10 bytes"}
    assert probe.read_bounded(str(tmp_path / "absent"), 100) == {"missing": True}
    zero = tmp_path / "zero"
    zero.symlink_to("/dev/zero")
    assert probe.read_bounded(str(zero), 100) == {"error": "not a regular file"}
    assert probe.read_bounded(str(tmp_path), 100)["error"] == "not a regular file"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert probe.read_bounded(str(fifo), 100) == {"error": "not a regular file"}  # and never blocks


def test_the_probe_lists_installed_versions_and_the_variables(
    probe: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_CONSTRAINT", "")
    monkeypatch.delenv("UV_CONSTRAINT", raising=False)
    answer = probe.constraints()
    assert answer["path"] == constraints.CONSTRAINTS_PATH == probe.CONSTRAINTS_PATH
    assert answer["environment"] == {"PIP_CONSTRAINT": "", "UV_CONSTRAINT": None}
    assert answer["installed"]["packaging"] and answer["installed"]["hypothesis"]  # this interpreter's own
    assert list(answer["installed"]) == sorted(answer["installed"])


def test_the_fakes_and_the_templates_write_the_rules_header_and_path() -> None:
    assert CONSTRAINTS_HEADER == HEADER
    templates = Path(constraints.__file__).parents[1] / "templates"
    step = (templates / "steps" / "constraints.sh.j2").read_text(encoding="utf-8")
    assert f'print("{HEADER}")' in step and f"' > {constraints.CONSTRAINTS_PATH}\n" in step
    macros = (templates / "macros.j2").read_text(encoding="utf-8")
    for variable in constraints.VARIABLES:
        assert f"{variable}={constraints.CONSTRAINTS_PATH}" in macros
