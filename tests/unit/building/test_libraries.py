"""The NVIDIA libraries torch loads are the pinned wheels' (building/libraries.py), or the image is not tagged.

Every answer below is the facts probe's `libraries` answer written out (tests/fakes.py `library_answer`): what
the process mapped, which distribution's RECORD lists each file, torch's Requires-Dist. The builder's tests
go through `Builder` and the fake engine, so removing the check from `_check_before_tagging` fails them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tests.fakes import (
    CU118_270,
    CU118_LIBRARIES,
    CU118_LINUX,
    CU118_SITE,
    FakeEngine,
    Raw,
    library_answer,
    probe_answer,
)
from torchimages.building import verify
from torchimages.building.builder import Builder
from torchimages.building.outcome import Outcome
from torchimages.building.requests import BuildOptions
from torchimages.planning import plan

CUDA_MATRIX = "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8'}\n"
CPU_MATRIX = "matrix:\n  include:\n    - {torch: 2.7.0, cuda: cpu}\n"
# A true 2.7.0+cu118 image's versions (ubuntu22.04's Python 3.10), its libraries given by each test.
CUDA_VERSIONS = {name: fact for name, fact in CU118_270.items() if name != "libraries"}
CPU_HOLDS = probe_answer(
    "2.7.0+cpu", python="3.12", os=("ubuntu", "24.04"), torchvision="0.22.0+cpu", torchaudio="2.7.0+cpu"
)
# What the tag of 2.7.0-cuda11.8 promises, as combination.expected_facts() gives it.
EXPECTED: dict[str, str | None] = {
    "torch": "2.7.0",
    "cuda": "11.8",
    "cudnn": "9.1.0.70",
    "nccl": "2.21.5",
    "python": "3.10",
}
CUDNN = f"{CU118_SITE}/nvidia/cudnn/lib/libcudnn.so.9"
NCCL = f"{CU118_SITE}/nvidia/nccl/lib/libnccl.so.2"
SYSTEM_NCCL = "/usr/lib/x86_64-linux-gnu/libnccl.so.2"
TORCH_PINS = (
    "2.7.0+cu118",
    [
        "nvidia-cudnn-cu11==9.1.0.70" + CU118_LINUX,
        "nvidia-cublas-cu11==11.11.3.6" + CU118_LINUX,
        "nvidia-nccl-cu11==2.21.5" + CU118_LINUX,
    ],
)
CUBLAS = [
    (f"{CU118_SITE}/nvidia/cublas/lib/libcublas.so.11", "nvidia-cublas-cu11", "11.11.3.6"),
    (f"{CU118_SITE}/nvidia/cublas/lib/libcublasLt.so.11", "nvidia-cublas-cu11", "11.11.3.6"),
]
# CU118_LIBRARIES's loaded files, to add one to.
CU118_LIBRARIES_LOADED = [(e["path"], e["distribution"], e["version"]) for e in CU118_LIBRARIES["loaded"]]
DISTRIBUTIONS = {
    "torch": TORCH_PINS,
    "nvidia-cublas-cu11": ("11.11.3.6", []),
    "nvidia-cudnn-cu11": ("9.1.0.70", []),
    "nvidia-nccl-cu11": ("2.21.5", []),
}

# cuDNN's wheel is 9.1.0.69: torch still reports 9.1.0 (90100), the check the versions get lets it through.
WRONG_CUDNN = library_answer(
    [(CUDNN, "nvidia-cudnn-cu11", "9.1.0.69"), (NCCL, "nvidia-nccl-cu11", "2.21.5"), *CUBLAS],
    {**DISTRIBUTIONS, "nvidia-cudnn-cu11": ("9.1.0.69", [])},
)
# NCCL from the system's /usr/lib (an nvidia/cuda devel base's libnccl2), the wheel's copy not loaded.
SYSTEM_NCCL_ONLY = library_answer(
    [(CUDNN, "nvidia-cudnn-cu11", "9.1.0.70"), (SYSTEM_NCCL, None, None), *CUBLAS], DISTRIBUTIONS
)
# Both copies loaded: the wheel's and the system's.
TWO_NCCLS = library_answer(
    [
        (CUDNN, "nvidia-cudnn-cu11", "9.1.0.70"),
        (NCCL, "nvidia-nccl-cu11", "2.21.5"),
        (SYSTEM_NCCL, None, None),
        *CUBLAS,
    ],
    DISTRIBUTIONS,
)
# No libcublas or libcublasLt mapped, and no installed distribution ships them (so none was loaded by path).
NO_CUBLAS = library_answer(
    [(CUDNN, "nvidia-cudnn-cu11", "9.1.0.70"), (NCCL, "nvidia-nccl-cu11", "2.21.5")], DISTRIBUTIONS
)


@pytest.fixture
def cuda(write_matrix: Callable[[str], Path]) -> list[plan.Selected]:
    return plan.select(plan.load(write_matrix(CUDA_MATRIX)), [])


def build(holds: Raw, selected: list[plan.Selected], tmp_path: Path) -> tuple[FakeEngine, list[Outcome]]:
    engine = FakeEngine(holds)
    options = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs", push=True)
    return engine, Builder(engine, options, None, out=lambda _: None).build(selected)


def problems(libraries: Raw, expected: Mapping[str, str | None] = EXPECTED) -> list[str]:
    return [str(p) for p in verify.check_libraries(expected, verify.decode({**CUDA_VERSIONS, "libraries": libraries}))]


# --- through the builder: not tagged, the problem names the library, the file and what was expected ---------


def test_the_libraries_of_the_pinned_wheels_get_the_tag(cuda: list[plan.Selected], tmp_path: Path) -> None:
    engine, outcomes = build({**CUDA_VERSIONS, "libraries": CU118_LIBRARIES}, cuda, tmp_path)
    assert [o.status for o in outcomes] == ["built", "built"], [o.detail for o in outcomes]
    assert engine.tagged


@pytest.mark.parametrize(
    ("libraries", "message"),
    [
        (
            WRONG_CUDNN,
            f"libcudnn: {CUDNN} belongs to nvidia-cudnn-cu11 9.1.0.69; expected the file of the wheel torch pins"
            " (cuDNN 9.1.0.70, as the tag claims), inside the venv /opt/venv",
        ),
        (
            SYSTEM_NCCL_ONLY,
            f"libnccl: {SYSTEM_NCCL} is loaded from outside the venv and no installed distribution lists it;"
            " expected the file of the wheel torch pins (NCCL 2.21.5, as the tag claims), inside the venv /opt/venv",
        ),
        (
            NO_CUBLAS,
            "libcublas: is not loaded: `import torch` did not map it and no installed distribution ships it;"
            " expected the file of the wheel torch pins, inside the venv /opt/venv",
        ),
    ],
    ids=["wrong-version-cudnn", "nccl-from-usr-lib", "missing-cublas"],
)
def test_a_library_that_is_not_the_pinned_wheels_leaves_no_tag(
    cuda: list[plan.Selected], tmp_path: Path, libraries: Raw, message: str
) -> None:
    engine, outcomes = build({**CUDA_VERSIONS, "libraries": libraries}, cuda, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    for outcome in outcomes:
        assert "not tagged" in outcome.detail and message in outcome.detail, outcome.detail
    assert engine.tagged == [] and engine.pushed == [] and engine.temporary() == []


def test_a_cuda_image_that_loaded_no_library_is_not_tagged(cuda: list[plan.Selected], tmp_path: Path) -> None:
    nothing = library_answer([], {"torch": TORCH_PINS})
    engine, outcomes = build({**CUDA_VERSIONS, "libraries": nothing}, cuda, tmp_path)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    for name in ("libcudnn", "libnccl", "libcublas", "libcublasLt"):
        assert f"{name}: is not loaded" in outcomes[0].detail
    engine, outcomes = build(CUDA_VERSIONS, cuda, tmp_path)  # no answer at all (an older probe)
    assert [o.status for o in outcomes] == ["failed", "failed"]
    assert "libraries: were not read" in outcomes[0].detail
    assert engine.tagged == []


def test_a_cpu_combination_is_not_asked_for_nvidia_libraries(
    write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    selected = plan.select(plan.load(write_matrix(CPU_MATRIX)), [])
    assert "libraries" not in CPU_HOLDS
    for holds in (CPU_HOLDS, {**CPU_HOLDS, "libraries": library_answer([], {"torch": ("2.7.0+cpu", [])})}):
        _, outcomes = build(holds, selected, tmp_path)
        assert [o.status for o in outcomes] == ["built", "built"], [o.detail for o in outcomes]
    cpu = {**EXPECTED, "cuda": None, "cudnn": None, "nccl": None}
    assert problems(NO_CUBLAS, cpu) == [] and problems(SYSTEM_NCCL_ONLY, cpu) == []


# --- the rules one by one, on the answer -----------------------------------------------------------------


def test_the_true_answer_has_no_problem() -> None:
    assert problems(CU118_LIBRARIES) == []


def test_a_wrong_cudnn_wheel_is_also_not_the_one_torch_pins() -> None:
    assert problems(WRONG_CUDNN) == [
        f"libcudnn: {CUDNN} belongs to nvidia-cudnn-cu11 9.1.0.69; expected the file of the wheel torch pins"
        " (cuDNN 9.1.0.70, as the tag claims), inside the venv /opt/venv",
        f"libcudnn: {CUDNN} belongs to nvidia-cudnn-cu11 9.1.0.69; expected nvidia-cudnn-cu11==9.1.0.70"
        " (torch's requirement), inside the venv /opt/venv",
    ]


def test_a_second_copy_beside_the_wheels_is_named_with_both_files() -> None:
    found = problems(TWO_NCCLS)
    assert found[0] == (
        f"libnccl: is loaded 2 times: {NCCL} (nvidia-nccl-cu11 2.21.5), {SYSTEM_NCCL} (no distribution); expected"
        " one copy: the file of the wheel torch pins (NCCL 2.21.5, as the tag claims), inside the venv /opt/venv"
    )
    assert len(found) == 2 and found[1].startswith(f"libnccl: {SYSTEM_NCCL} is loaded from outside the venv")


def test_a_file_inside_the_venv_that_no_record_lists() -> None:
    stray = f"{CU118_SITE}/nvidia/nccl/lib/libnccl.so.2"
    answer = library_answer([(CUDNN, "nvidia-cudnn-cu11", "9.1.0.70"), (stray, None, None), *CUBLAS], DISTRIBUTIONS)
    assert problems(answer) == [
        f"libnccl: {stray} is loaded, but no RECORD lists it; expected the file of the wheel torch pins"
        " (NCCL 2.21.5, as the tag claims), inside the venv /opt/venv"
    ]


def test_a_library_of_a_distribution_torch_does_not_pin() -> None:
    vendored = f"{CU118_SITE}/other.libs/libcublas-1a2b3c4d.so.11"
    answer = library_answer([*CU118_LIBRARIES_LOADED, (vendored, "other", "1.0")], DISTRIBUTIONS)
    assert problems(answer) == [
        f"libcublas-1a2b3c4d: {vendored} belongs to other 1.0, which torch's requirements do not name; expected"
        " the file of the wheel torch pins, inside the venv /opt/venv"
    ]


def test_a_lazily_loaded_library_that_cannot_be_loaded() -> None:
    cnn = f"{CU118_SITE}/nvidia/cudnn/lib/libcudnn_cnn.so.9"
    error = "libcudnn_graph.so.9: cannot open shared object file: No such file or directory"
    answer = library_answer(
        CU118_LIBRARIES_LOADED, DISTRIBUTIONS, failed=[(cnn, "nvidia-cudnn-cu11", "9.1.0.70", error)]
    )
    assert problems(answer) == [
        f"libcudnn_cnn: {cnn} (nvidia-cudnn-cu11 9.1.0.70) cannot be loaded: {error}; expected the file of the"
        " wheel torch pins (cuDNN 9.1.0.70, as the tag claims), inside the venv /opt/venv"
    ]


# CUDA 13 (torch 2.14.1+cu130): torch pins cuBLAS through the cuda-toolkit meta-package's `cublas` extra.
CU130_SITE = "/opt/venv/lib/python3.11/site-packages"
CU130_MARKER = "; (sys_platform == 'linux' and platform_machine == 'x86_64')"
CU130 = {
    "torch": (
        "2.14.1",
        [
            'cuda-toolkit[cublas,cudart]==13.0.3; platform_system == "Linux"',
            'nvidia-cudnn-cu13==9.24.0.43; platform_system == "Linux"',
            'nvidia-nccl-cu13==2.30.7; platform_system == "Linux"',
        ],
    ),
    "cuda-toolkit": (
        "13.0.3.0",
        [
            "nvidia-cublas==13.1.1.3.*" + CU130_MARKER + " and extra == 'cublas'",
            "nvidia-cublas==13.0.0.19.*" + CU130_MARKER + " and extra == 'older'",  # an extra torch does not ask for
            "nvidia-cuda-runtime==13.0.96.*" + CU130_MARKER + " and extra == 'cudart'",
        ],
    ),
    "nvidia-cublas": ("13.0.0.19", []),
    "nvidia-cuda-runtime": ("13.0.96", []),
    "nvidia-cudnn-cu13": ("9.24.0.43", []),
    "nvidia-nccl-cu13": ("2.30.7", []),
}


def test_cublas_is_the_version_torch_pins_through_the_cuda_toolkit_extras() -> None:
    lib = f"{CU130_SITE}/nvidia/cu13/lib"
    answer = library_answer(
        [
            (f"{CU130_SITE}/nvidia/cudnn/lib/libcudnn.so.9", "nvidia-cudnn-cu13", "9.24.0.43"),
            (f"{CU130_SITE}/nvidia/nccl/lib/libnccl.so.2", "nvidia-nccl-cu13", "2.30.7"),
            (f"{lib}/libcublas.so.13", "nvidia-cublas", "13.0.0.19"),
            (f"{lib}/libcublasLt.so.13", "nvidia-cublas", "13.0.0.19"),
            (f"{lib}/libcudart.so.13", "nvidia-cuda-runtime", "13.0.96"),
        ],
        CU130,
        environment={"platform_system": "Linux", "platform_machine": "x86_64", "sys_platform": "linux"},
    )
    expected = {**EXPECTED, "torch": "2.14.1", "cuda": "13.0", "cudnn": "9.24.0.43", "nccl": "2.30.7"}
    assert problems(answer, expected) == [
        f"{name}: {lib}/{name}.so.13 belongs to nvidia-cublas 13.0.0.19; expected nvidia-cublas==13.1.1.3.*"
        " (cuda-toolkit's requirement), inside the venv /opt/venv"
        for name in ("libcublas", "libcublasLt")
    ]
