"""`max_layer` in matrix.yaml: the largest layer each flavor's images may have, read like `size_budget`, with a
default for CUDA images whose every layer is ours; hostile values are located errors (exit 2), never a traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from torchimages.combination import DEFAULT_MAX_LAYER, OLDER_CUDA_MAX_LAYER
from torchimages.planning import matrix, plan
from torchimages.sizes import MAX_SIZE, SizeError, parse_size

CPU = "{torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none"
CU130 = '{torch: 2.14.1, cuda: "13.0", os: debian12'  # devel FROM runtime (nvcc wheels)
CU118 = '{torch: 2.7.0, cuda: "11.8"'  # devel on nvidia/cuda's devel image


def limits(loaded: plan.Plan) -> dict[str, int | None]:
    return {image.tag: image.max_layer for _, image in loaded.images()}


def test_the_default_is_for_cuda_images_whose_layers_are_ours(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(f"matrix:\n  include:\n    - {CPU}}}\n    - {CU130}}}\n    - {CU118}}}\n")
    assert (DEFAULT_MAX_LAYER, OLDER_CUDA_MAX_LAYER) == (1_500_000_000, 2_500_000_000)
    assert limits(plan.load(path)) == {
        "2.13.0-cpu-devel": None,
        "2.13.0-cpu-runtime": None,
        "2.14.1-cuda13.0-cudnn9-devel": 1_500_000_000,
        "2.14.1-cuda13.0-cudnn9-runtime": 1_500_000_000,
        "2.7.0-cuda11.8-cudnn9-devel": None,  # nvidia/cuda's own layers and the venv copied whole: 3-6 GB each
        "2.7.0-cuda11.8-cudnn9-runtime": 2_500_000_000,  # torch's own wheel: ~1.6-1.9 GB in one layer
    }


def test_per_flavor_per_entry_over_the_files_default(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(
        f"""
        max_layer: {{runtime: 1.5GB}}
        matrix:
          include:
            - {CPU}, max_layer: {{devel: 1GB}}}}
            - {CU130}, max_layer: 2GiB}}
            - {CU118}, max_layer: {{devel: 7GB}}}}
        """
    )
    assert limits(plan.load(path)) == {
        "2.13.0-cpu-devel": 1_000_000_000,
        "2.13.0-cpu-runtime": 1_500_000_000,
        "2.14.1-cuda13.0-cudnn9-devel": 2 * 1024**3,
        "2.14.1-cuda13.0-cudnn9-runtime": 2 * 1024**3,
        "2.7.0-cuda11.8-cudnn9-devel": 7_000_000_000,
        "2.7.0-cuda11.8-cudnn9-runtime": 1_500_000_000,
    }


def test_a_limit_is_not_a_build_input(write_matrix: Callable[[str], Path]) -> None:
    without = plan.load(write_matrix(f"matrix:\n  include:\n    - {CU130}}}\n"))
    limited = plan.load(write_matrix(f"matrix:\n  include:\n    - {CU130}, max_layer: 1GB}}\n"))
    assert [i.input_digest for _, i in without.images()] == [i.input_digest for _, i in limited.images()]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0GB", "max_layer: '0GB' is not more than zero"),
        ("-1GB", "max_layer: '-1GB' is not a size"),
        ("1.5", "max_layer: '1.5' has no unit (allowed: a number and a unit"),
        ("3gb", "did you mean 3GB?"),
        ("2000TB", "max_layer: '2000TB' is larger than 1000 TB"),
        ("9" * 300 + "GB", "is larger than 1000 TB"),
        ("[1.5GB]", "max_layer: must be a size (9GB) or a mapping of flavor to size"),
        ("{runtime: [1GB]}", "max_layer: must be a single value such as '2GB'"),
        ("{runtim: 1GB}", "unknown key 'runtim' in max_layer (allowed: devel, runtime)"),
        ("{runtime: 1GB, runtime: 2GB}", "key 'runtime' given twice in max_layer"),
        ("''", "max_layer: must be a single value such as '2GB'"),
        ("true", "max_layer: 'true' is not a size"),
        ("1.5GB ", ""),  # plain YAML drops the trailing space: a size
    ],
)
def test_hostile_values_are_located_errors_exit_2(
    write_matrix: Callable[[str], Path], cli: Callable[..., tuple[int, str, str]], value: str, message: str
) -> None:
    path = write_matrix(f"matrix:\n  include:\n    - {CU130}, max_layer: {value}}}\n")
    code, out, err = cli("validate", "--matrix", str(path))
    assert "Traceback" not in err
    if not message:
        assert code == 0, err
        return
    assert (code, out) == (2, "")
    assert f"{path}:3: error: " in err and message in err


def test_a_top_level_default_is_checked_too(
    write_matrix: Callable[[str], Path], cli: Callable[..., tuple[int, str, str]]
) -> None:
    path = write_matrix(f"max_layer: lots\nmatrix:\n  include:\n    - {CU130}}}\n")
    code, _, err = cli("validate", "--matrix", str(path))
    assert code == 2 and f"{path}:1: error: max_layer: 'lots' is not a size" in err


def test_a_limit_is_no_axis(write_matrix: Callable[[str], Path], cli: Callable[..., tuple[int, str, str]]) -> None:
    code, _, err = cli("validate", "--matrix", str(write_matrix("matrix:\n  torch: [2.7.0]\n  max_layer: 3GB\n")))
    assert code == 2 and "unknown key 'max_layer' in matrix" in err


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_any_text_is_a_size_or_a_size_error(text: str) -> None:
    try:
        size = parse_size(text)
    except SizeError:
        return
    assert 0 < size <= MAX_SIZE


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
        max_leaves=8,
    )
)
def test_any_yaml_value_is_read_or_refused_with_a_problem(value: object) -> None:
    text = yaml.safe_dump({"max_layer": value, "matrix": {"include": [{"torch": "2.14.1", "cuda": "13.0"}]}})
    parsed = matrix.parse(text, "matrix.yaml")  # problems collected, never raised for content
    assert all(p.file == "matrix.yaml" for p in parsed.problems)
