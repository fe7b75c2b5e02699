"""The smoke package without Docker: the version decoder, the flavor table, verification's
comparison, the runner's pytest command line and its use of the engine (a fake)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeEngine
from tests.unit.conftest import ROOT
from torchimages import engine
from torchimages.building import verify
from torchimages.combination import Combination, Image
from torchimages.probes import parse_payload, probe_source
from torchimages.smoke import checks, document, runner
from torchimages.versions import cudnn_version_string, decode_facts, nccl_version_string

CPU_FACTS: dict[str, Any] = {
    "torch": "2.13.0+cpu",
    "cuda": None,
    "cudnn": None,
    "nccl": None,
    "python": "3.11",
    "os": {"id": "debian", "version_id": "12"},
    "torchvision": {"version": None, "error": None},
    "torchaudio": {"version": None, "error": None},
}
CUDA_FACTS: dict[str, Any] = {
    **CPU_FACTS,
    "torch": "2.14.1+cu130",
    "cuda": "13.0",
    "cudnn": 91900,
    "nccl": [2, 28, 9],
    "torchvision": {"version": "0.29.1+cu130", "error": None},
}


# --- the one version decoder ------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (92400, "9.24.0"),
        (90100, "9.1.0"),
        (91900, "9.19.0"),
        (90000, "9.0.0"),  # the first code of the new encoding
        (8907, "8.9.7"),
        (8600, "8.6.0"),
        (7605, "7.6.5"),
    ],
)
def test_cudnn_codes_of_both_encodings(code: int, expected: str) -> None:
    assert cudnn_version_string(code) == expected


@pytest.mark.parametrize(("reported", "expected"), [((2, 21, 5), "2.21.5"), ([2, 28, 9], "2.28.9"), (21803, "2.18.3")])
def test_nccl_versions(reported: Any, expected: str) -> None:
    assert nccl_version_string(reported) == expected


def test_decode_facts_of_a_cuda_image() -> None:
    assert decode_facts(CUDA_FACTS) == {
        "torch": "2.14.1+cu130",
        "cuda": "13.0",
        "cudnn": "9.19.0",
        "nccl": "2.28.9",
        "python": "3.11",
        "os": "debian12",
        "machine": None,  # CUDA_FACTS says nothing of it
    }


def test_a_cpu_only_torch_has_no_cudnn_or_nccl_whatever_it_reports() -> None:
    decoded = decode_facts({**CPU_FACTS, "cudnn": 91900, "nccl": [2, 28, 9]})
    assert decoded["cudnn"] is None and decoded["nccl"] is None


# --- the flavor table -------------------------------------------------------------------


@pytest.mark.parametrize("flavor", ["devel", "runtime"])
def test_every_flavor_has_compilers_headers_and_torch_compile(flavor: str) -> None:
    for row in ("c_compiler", "python_headers", "torch_compile_cpu", "no_package_caches", "venv_writable"):
        assert checks.expectation(row, flavor, cuda=False) is True, row
        assert checks.expectation(row, flavor, cuda=True) is True, row
    assert checks.expectation("torch_compile_gpu", flavor, cuda=True) is True


def test_runtime_has_no_cuda_toolkit() -> None:
    for row in ("nvcc", "cuda_toolkit", "cuda_extension"):
        assert checks.expectation(row, "runtime", cuda=True) is False, row


def test_devel_has_nvcc_and_builds_extensions_for_cuda_images_only() -> None:
    assert checks.expectation("nvcc", "devel", cuda=True) is True
    assert checks.expectation("cuda_extension", "devel", cuda=True) is True
    assert checks.expectation("nvcc", "devel", cuda=False) is False
    assert checks.expectation("torch_compile_gpu", "devel", cuda=False) is False


def test_a_bare_host_promises_nothing_and_an_unknown_flavor_is_an_error() -> None:
    assert all(checks.expectation(row, None, cuda=True) is None for row in checks.TABLE)
    assert "bare host" in checks.reason("nvcc", None, cuda=True)
    with pytest.raises(ValueError, match="unknown flavor"):
        checks.expectation("nvcc", "slim", cuda=True)


# --- verification -----------------------------------------------------------------------

EXPECTED_CPU = {"torch": "2.13.0", "cuda": None, "cudnn": None, "nccl": None, "python": "3.11", "os": "debian12"}


def test_compare_accepts_the_image_its_tag_describes() -> None:
    assert verify.compare(EXPECTED_CPU, verify.decode(CPU_FACTS)) == []
    expected = {**EXPECTED_CPU, "torch": "2.14.1", "cuda": "13.0", "cudnn": "9.19.0.56", "nccl": "2.28.9"}
    assert verify.compare(expected, verify.decode(CUDA_FACTS)) == []


def test_compare_names_each_lie_with_both_values() -> None:
    expected = {**EXPECTED_CPU, "torch": "2.12.0", "cuda": "12.6", "python": "3.12"}
    messages = [str(m) for m in verify.compare(expected, verify.decode(CPU_FACTS))]
    assert messages == [
        "torch: the tag claims 2.12.0, the image has 2.13.0+cpu",
        "cuda: the tag claims 12.6, the image has none",
        "python: the tag claims 3.12, the image has 3.11",
    ]


def test_compare_checks_three_parts_of_cudnn() -> None:
    expected = {"cudnn": "9.20.0.1"}
    (mismatch,) = verify.compare(expected, verify.decode(CUDA_FACTS))
    assert str(mismatch) == "cudnn: the tag claims 9.20.0.1, the image has 9.19.0"


# A CPU tag (no CUDA, no cuDNN, no NCCL) and images holding a CUDA build of the same torch.
CUDA_TORCH_FACTS: dict[str, Any] = {**CUDA_FACTS, "torch": "2.13.0+cu126", "cuda": "12.6", "cudnn": 90501}


def test_a_cpu_tag_on_an_image_holding_cuda_torch_fails_naming_what_it_has() -> None:
    """Absent in the tag is a claim too: `none` must meet none."""
    messages = [str(m) for m in verify.compare(EXPECTED_CPU, verify.decode(CUDA_TORCH_FACTS))]
    assert messages == [
        "cuda: the tag claims none, the image has 12.6",
        "cudnn: the tag claims none, the image has 9.5.1",
        "nccl: the tag claims none, the image has 2.28.9",
    ]


@pytest.mark.parametrize("fact", ["cuda", "cudnn", "nccl"])
def test_each_absent_fact_is_checked_alone(fact: str) -> None:
    (mismatch,) = verify.compare({fact: None}, verify.decode(CUDA_TORCH_FACTS))
    assert mismatch.fact == fact and mismatch.expected is None and mismatch.found


@pytest.mark.parametrize(
    ("reported", "same"),
    [("2.7.1+cu118", True), ("2.7.1", True), ("2.7.10+cu118", False), ("2.7.1.post1+cu118", False), ("2.7.0", False)],
)
def test_torch_matches_the_tag_as_a_whole_public_version(reported: str, same: bool) -> None:
    """The local label (`+cu118`) is not the tag's; the public version must equal it, not begin with it."""
    mismatches = verify.compare({"torch": "2.7.1"}, verify.decode({**CUDA_FACTS, "torch": reported}))
    assert (mismatches == []) is same, [str(m) for m in mismatches]


@pytest.mark.parametrize(
    ("fact", "pinned", "reported", "same"),
    [
        ("cudnn", "9.1.0.70", 90100, True),
        ("cudnn", "9.1.0.70", 91000, False),  # 9.10.0: begins with the pin's 9.1
        ("cudnn", "9.10.2.21", 91002, True),
        ("cudnn", "9.10.2.21", 90100, False),  # 9.1.0: a prefix of the pin's 9.10
        ("cudnn", "9.10.2.21", 91020, False),  # 9.10.20
        ("cudnn", "9.1.0.70", 90101, False),
        ("cudnn", "9.1.20.1", 90102, False),  # 9.1.2: the pin's text begins with it
        ("nccl", "2.28.9", [2, 28, 9], True),
        ("nccl", "2.28.9", [2, 2, 8], False),  # 2.2.8: 2.2 begins the pin's 2.28
        ("nccl", "2.2.8", [2, 28, 9], False),
        ("nccl", "2.21.5", [2, 21, 50], False),  # begins with the pin
        ("nccl", "2.21.50", [2, 21, 5], False),  # a prefix of the pin
        ("nccl", "2.21.5", [2, 21], False),
    ],
)
def test_cudnn_and_nccl_match_the_pin_part_by_part_not_as_text(
    fact: str, pinned: str, reported: Any, same: bool
) -> None:
    mismatches = verify.compare({fact: pinned}, verify.decode({**CUDA_FACTS, fact: reported}))
    assert (mismatches == []) is same, [str(m) for m in mismatches]


def test_read_facts_runs_the_one_facts_probe_and_decodes() -> None:
    import json

    fake = FakeEngine(python_output="noise\nSMOKE_JSON:" + json.dumps(CUDA_FACTS) + "\n")
    facts = verify.read_facts(fake, "img:tmp")
    assert fake.calls == [("run_python", ("img:tmp", ["-c", probe_source("facts")]))]
    assert facts.versions["cudnn"] == "9.19.0" and facts.raw["cudnn"] == 91900


def test_read_facts_without_an_answer_or_with_a_failing_engine() -> None:
    with pytest.raises(ValueError, match="no SMOKE_JSON"):
        verify.read_facts(FakeEngine(python_output="Traceback ..."), "img")
    with pytest.raises(engine.ProbeError, match="exit"):
        verify.read_facts(FakeEngine(python_error=engine.ProbeError("python exited with status 1")), "img")


# --- the runner -------------------------------------------------------------------------


def test_the_pytest_command_names_the_plugin_and_the_suites_package(tmp_path: Path) -> None:
    options = runner.SmokeOptions(suites=("cpu", "gpu"), require_gpu=True, python_exe="python3")
    cmd = runner.pytest_command("docker://c", tmp_path / "spec.json", options, tmp_path / "j.xml", tmp_path / "f.json")
    assert cmd[1:7] == ["-m", "pytest", "-p", "torchimages.smoke.plugin", "--pyargs", "torchimages.smoke.suites"]
    assert not [arg for arg in cmd if "tests/" in arg or "tests" + "\\" in arg]
    assert "--hosts=docker://c" in cmd and "--require-gpu" in cmd
    assert cmd[cmd.index("-m", 2) + 1] == "cpu or gpu"
    assert cmd[cmd.index("--facts") + 1] == str(tmp_path / "f.json")
    assert cmd[cmd.index("--python-exe") + 1] == "python3"


@pytest.mark.parametrize(
    ("gpus", "runtime", "asked"), [("auto", True, True), ("auto", False, False), ("none", True, False)]
)
def test_a_container_per_run_removed_afterwards_facts_reused_without_gpus(
    monkeypatch: pytest.MonkeyPatch, gpus: str, runtime: bool, asked: bool
) -> None:
    seen: dict[str, Any] = {}

    def fake_run(
        host: str, doc: Any, options: Any, junit: Any, capture: bool, facts: Any, cancelled: Any = None
    ) -> Any:
        seen.update(host=host, doc=doc, facts=facts)
        return subprocess.CompletedProcess([], 0, "", "")

    monkeypatch.setattr(runner, "run_suites", fake_run)
    fake = FakeEngine(gpu_runtime=runtime)
    combination, image = _cpu_image()
    facts = verify.decode(CPU_FACTS)
    doc = document.image_document(combination, image, "img:tmp")
    options = runner.SmokeOptions(gpus=gpus, run_args=("--ipc=host",))
    runner.run_suites_in_container(fake, doc, options, None, facts=facts)
    assert ("start_container", ("img:tmp", asked, "2g", ("--ipc=host",))) in fake.calls
    removed, name = fake.calls[-1]
    assert removed == "remove_container" and name.startswith("torchimages-smoke-") and fake.containers == []
    assert seen["host"] == f"docker://{name}" and seen["doc"]["image"] == "img:tmp"
    assert seen["facts"] == (None if asked else facts.raw)


def test_the_host_document_from_facts_is_a_valid_spec() -> None:
    spec = document.spec_from_dict(document.host_document(CUDA_FACTS, "here"))
    assert (spec.torch, spec.cudnn, spec.nccl, spec.os, spec.torchvision) == (
        "2.14.1",
        "9.19.0",
        "2.28.9",
        "debian12",
        "0.29.1",
    )
    assert spec.flavor is None and spec.image is None


def test_the_suites_live_in_the_package_and_nothing_there_imports_docker() -> None:
    assert not (ROOT / "tests" / "smoke").exists()
    sources = [
        *(ROOT / "torchimages" / "smoke").rglob("*.py"),
        ROOT / "torchimages" / "building" / "verify.py",
        *(ROOT / "torchimages" / "probes").glob("*.py"),
    ]
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [n for n in names if n == "docker" or n.startswith("docker.")], path


def _cpu_image() -> tuple[Combination, Image]:
    from torchimages.planning import plan

    loaded = plan.load(ROOT / "matrix.yaml")
    return next((c, i) for c, i in loaded.images() if c.cuda is None)


@pytest.mark.parametrize(
    ("given", "several", "tag", "written"),
    [
        ("smoke.xml", False, "2.13-cpu-runtime", "smoke.xml"),
        ("smoke.xml", True, "2.13-cpu-runtime", "smoke-2.13-cpu-runtime.xml"),
        ("out/junit", True, "2.13-cpu-devel", "out/junit-2.13-cpu-devel.xml"),
    ],
)
def test_build_py_test_writes_the_junit_file_given_or_one_per_image(
    given: str, several: bool, tag: str, written: str
) -> None:
    """`build.py test --junit FILE`: FILE for one image, FILE-<tag>.xml for each of several."""
    assert runner.junit_path(Path(given), tag, several) == Path(written)
    assert runner.junit_path(None, tag, several) is None


def test_the_facts_probe_reads_on_past_a_torch_that_is_not_one(tmp_path: Path) -> None:
    """A derived image that replaced torch with something that imports but is not torch (no `torch.version`):
    the probe says so and still reads the rest (the constraints file then names what changed)."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text('__version__ = "2.12.0"\n')
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", probe_source("facts")], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    facts = parse_payload(result.stdout)
    assert isinstance(facts, dict)
    assert facts["torch"] == "2.12.0"
    assert "torch imports but its facts cannot be read: AttributeError" in facts["import_torch_error"]
    assert "installed" in facts["constraints"] and "machine" in facts
