"""Size budgets: units parsed strictly, located errors in matrix.yaml (exit 2), budgets per flavor on each image."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from torchimages.planning import plan
from torchimages.sizes import SizeError, format_size, layer_instruction, parse_size


@pytest.mark.parametrize(
    ("text", "size"),
    [("3GB", 3_000_000_000), ("2.5GiB", 2_684_354_560), ("800MB", 800_000_000), ("1kB", 1000), ("7B", 7)],
)
def test_sizes_in_decimal_and_binary_units(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("text", "message", "suggestion"),
    [
        ("3", "'3' has no unit", "did you mean 3GB?"),
        ("3gb", "unknown unit 'gb'", "did you mean 3GB?"),
        ("3G", "unknown unit 'G'", "did you mean 3GB?"),
        ("3Gi", "unknown unit 'Gi'", "did you mean 3GiB?"),
        ("3KB", "unknown unit 'KB'", "did you mean 3kB?"),
        ("3 GB", "'3 GB' is not a size", "did you mean 3GB?"),
        ("0GB", "is not more than zero", ""),
        ("-1GB", "is not a size", ""),
        ("lots", "is not a size", ""),
    ],
)
def test_sizes_are_parsed_strictly(text: str, message: str, suggestion: str) -> None:
    with pytest.raises(SizeError, match=message) as caught:
        parse_size(text)
    assert caught.value.suggestion == suggestion


def test_sizes_are_shown_as_docker_shows_them() -> None:
    assert [format_size(n) for n in (999, 1_234_567_890, 456_000_000, 12_300_000_000_000)] == [
        "999 B",
        "1.23 GB",
        "456 MB",
        "12.3 TB",
    ]


CPU = "{torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none"


def budgets(loaded: plan.Plan) -> dict[str, int | None]:
    return {image.tag: image.size_budget for _, image in loaded.images()}


def test_a_budget_per_flavor_per_entry_over_the_files_default(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(
        f"""
        size_budget: {{devel: 9GB, runtime: 4GB}}
        matrix:
          include:
            - {CPU}, size_budget: {{runtime: 3GB}}}}
            - {{torch: 2.14.1, cuda: "13.0", os: debian12, size_budget: 12GiB}}
            - {{torch: 2.7.0, cuda: "11.8"}}
        """
    )
    assert budgets(plan.load(path)) == {
        "2.13.0-cpu-devel": 9_000_000_000,
        "2.13.0-cpu-runtime": 3_000_000_000,
        "2.14.1-cuda13.0-cudnn9-devel": 12 * 1024**3,
        "2.14.1-cuda13.0-cudnn9-runtime": 12 * 1024**3,
        "2.7.0-cuda11.8-cudnn9-devel": 9_000_000_000,
        "2.7.0-cuda11.8-cudnn9-runtime": 4_000_000_000,
    }


def test_no_budget_means_none_and_leaves_the_input_digest(write_matrix: Callable[[str], Path]) -> None:
    without = plan.load(write_matrix(f"matrix:\n  include:\n    - {CPU}}}\n"))
    assert set(budgets(without).values()) == {None}
    with_budget = plan.load(write_matrix(f"matrix:\n  include:\n    - {CPU}, size_budget: 1GB}}\n"))
    assert [i.input_digest for _, i in without.images()] == [i.input_digest for _, i in with_budget.images()]


def test_bad_budgets_are_located_errors_exit_2(
    write_matrix: Callable[[str], Path], cli: Callable[..., tuple[int, str, str]]
) -> None:
    path = write_matrix(
        f"""
        size_budget: lots
        matrix:
          include:
            - {CPU}, size_budget: {{runtim: 3GB, devel: 9}}}}
            - {{torch: 2.7.0, cuda: "11.8", size_budget: [3GB]}}
        """
    )
    code, out, err = cli("validate", "--matrix", str(path))
    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert f"{path}:2: error: size_budget: 'lots' is not a size (allowed: a number and a unit: B, kB" in lines[0]
    assert f"{path}:5: error: runtim: unknown key 'runtim' in size_budget (allowed: devel, runtime); " in err
    assert "did you mean 'runtime'?" in err
    assert f"{path}:5: error: size_budget: '9' has no unit" in err and "did you mean 9GB?" in err
    assert f"{path}:6: error: size_budget: must be a size (9GB) or a mapping of flavor to size" in err
    assert "Traceback" not in err


def test_a_budget_is_no_axis(write_matrix: Callable[[str], Path], cli: Callable[..., tuple[int, str, str]]) -> None:
    code, _, err = cli("validate", "--matrix", str(write_matrix("matrix:\n  torch: [2.7.0]\n  size_budget: 3GB\n")))
    assert code == 2 and "unknown key 'size_budget' in matrix" in err


SETUP = (
    "RUN /bin/bash -o pipefail -c if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert; fi"
    "     && export PIP_CACHE_DIR=/home/torch/.cache/pip PIP_RETRIES=5 PIP_TIMEOUT=60     && "
)


@pytest.mark.parametrize(
    ("created_by", "shown"),
    [
        (
            SETUP + '/opt/venv/bin/pip install --no-input --no-deps         "torch==2.13.0+cpu" # buildkit',
            'RUN /opt/venv/bin/pip install --no-input --no-deps "torch==2.13.0+cpu"',
        ),
        (  # a uv layer: uv's own install into its cache mount is set-up, the layer is torch's
            SETUP + 'uv=/home/torch/.cache/uv/uv-0.13.8-$(uname -m)     && if [ ! -x "$uv/bin/uv" ]; then echo '
            "'uv==0.13.8 --hash=sha256:ab' > /tmp/uv.txt         && /opt/venv/bin/pip install --no-input --quiet "
            '--no-deps --target "$uv.$$" -r /tmp/uv.txt         && rm /tmp/uv.txt; fi     && uv=$uv/bin/uv     && '
            '"$uv" pip install --python /opt/venv/bin/python --compile-bytecode --no-deps         "torch==2.13.0+cpu" '
            "    && rm -f /opt/venv/.lock # buildkit",
            'RUN "$uv" pip install --python /opt/venv/bin/python --compile-bytecode --no-deps "torch==2.13.0+cpu"',
        ),
        (
            "|2 A=1 B=2 /bin/sh -c apt-get update && apt-get install -y gcc g++ && rm -rf /var/lib/apt/lists/*",
            "RUN apt-get install -y gcc g++",
        ),
        ("RUN /bin/bash -o pipefail -c python3.11 -m venv /opt/venv # buildkit", "RUN python3.11 -m venv /opt/venv"),
        ("", "(base image)"),
        ("ENV PATH=/opt/venv/bin", "ENV PATH=/opt/venv/bin"),
    ],
)
def test_a_layer_is_named_by_what_it_installs(created_by: str, shown: str) -> None:
    assert layer_instruction(created_by) == shown
