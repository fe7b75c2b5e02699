"""The CLI contract: commands, JSON fields, selectors, exit statuses, nothing written on bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.unit.conftest import ROOT

Cli = Callable[..., tuple[int, str, str]]
GOOD = "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8'}\n    - {torch: 2.14.1, cuda: '13.0', os: debian12}\n"


def test_validate_ok(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    code, out, _ = cli("validate", "--matrix", str(write_matrix(GOOD)))
    assert code == 0 and "2 combinations, 4 images" in out


def test_list_json_fields(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    code, out, _ = cli("list", "--json", "--matrix", str(write_matrix(GOOD)), "2.7.0-cuda11.8")
    assert code == 0
    items = json.loads(out)
    assert [i["tag"] for i in items] == ["2.7.0-cuda11.8-cudnn9-devel", "2.7.0-cuda11.8-cudnn9-runtime"]
    for item in items:
        for key in ("tag", "flavor", "torch", "cuda", "cudnn", "nccl", "python", "os", "dockerfile"):
            assert isinstance(item[key], str), key
        assert isinstance(item["aliases"], list)
    assert items[1]["cudnn"] == "9.1.0.70" and items[1]["dockerfile"] == "2.7.0-cuda11.8-py3.10-ubuntu22.04/Dockerfile"


def test_selector_without_match_names_closest(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    code, _, err = cli("list", "--matrix", str(write_matrix(GOOD)), "2.7.0-cuda12.6")
    assert code == 2
    assert "no image tag starts with '2.7.0-cuda12.6'" in err and "2.7.0-cuda11.8-cudnn9-devel" in err


def test_bad_matrix_exit_2_and_writes_nothing(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(GOOD + "    - {torch: 2.8.0, cuda: '11.8'}\n")
    code, out, err = cli("render", "--matrix", str(path))
    assert code == 2 and out == ""
    assert f"{path}:5: error: cuda: torch 2.8.0 was published for CUDA" in err
    assert not (path.parent / "images").exists()


def test_render_check_names_stale_files(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(GOOD)
    assert cli("render", "--check", "--matrix", str(path))[0] == 1
    assert cli("render", "--matrix", str(path))[0] == 0
    assert cli("render", "--check", "--matrix", str(path))[0] == 0
    target = path.parent / "images" / "2.7.0-cuda11.8-py3.10-ubuntu22.04" / "Dockerfile"
    target.write_text(target.read_text() + "# edited\n")
    code, _, err = cli("render", "--check", "--matrix", str(path))
    assert code == 1 and str(target) in err


def test_plan_shows_order_bases_and_targets(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    code, out, _ = cli("plan", "--matrix", str(write_matrix(GOOD)), "2.14.1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "1. bootstrap base torchimages/bootstrap-debian:12 from the distribution archive"
    assert "--target devel" in out and "--target runtime" in out and "nvcc from wheels" in out


def test_malformed_yaml_exit_2_without_traceback(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix("matrix:\n  include: [\n")
    result = subprocess.run(
        [sys.executable, str(ROOT / "build.py"), "validate", "--matrix", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "malformed YAML" in result.stderr and "Traceback" not in result.stderr


def test_usage_error_is_exit_2() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "build.py"), "frobnicate"], capture_output=True, check=False)
    assert result.returncode == 2


def test_committed_dockerfiles_are_fresh(cli: Cli) -> None:
    code, _, err = cli("render", "--check", "--matrix", str(ROOT / "matrix.yaml"))
    assert code == 0, err


def test_every_committed_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint, "hadolint is a dev dependency: make install"
    files = sorted(str(p) for p in (ROOT / "images").glob("*/Dockerfile"))
    assert files
    result = subprocess.run(
        [hadolint, "--config", str(ROOT / ".hadolint.yaml"), *files], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_full_tag_selects_that_image_alone(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(
        "matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0'}\n    - {torch: 2.14.1, cuda: '13.0', os: debian12}\n"
    )
    assert cli("list", "--matrix", str(path), "2.14.1-cuda13.0-cudnn9-runtime")[1].split() == [
        "2.14.1-cuda13.0-cudnn9-runtime"
    ]
    assert len(cli("list", "--matrix", str(path), "2.14.1-cuda13.0-cudnn9-r")[1].split()) == 2
    assert cli("list", "--matrix", str(path), "*-debian12")[1].split() == [
        "2.14.1-cuda13.0-cudnn9-devel-debian12",
        "2.14.1-cuda13.0-cudnn9-runtime-debian12",
    ]


def test_plan_emits_a_github_actions_matrix(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    code, out, _ = cli("plan", "--format", "github", "--matrix", str(write_matrix(GOOD)), "2")
    assert code == 0
    jobs = json.loads(out)["include"]
    assert [j["combination"] for j in jobs] == ["2.7.0-cuda11.8-py3.10-ubuntu22.04", "2.14.1-cuda13.0-py3.11-debian12"]
    assert jobs[0]["tags"] == "2.7.0-cuda11.8-cudnn9-devel 2.7.0-cuda11.8-cudnn9-runtime"


def test_list_counts_the_warnings_of_the_selection_and_validate_says_them(
    cli: Cli, write_matrix: Callable[[str], Path]
) -> None:
    """A warning on another line than the row's first (here `cuda:`) belongs to the combination all the same.
    `list` cannot act on it: one line says how many and that `validate` lists them; validate says it in full."""
    path = write_matrix(
        "matrix:\n  include:\n    - torch: 2.9.1\n      cuda: '12.9'\n    - {torch: 2.7.0, cuda: '11.8'}\n"
    )
    code, _, err = cli("list", "--matrix", str(path), "2.9")
    assert code == 0
    (line,) = err.splitlines()
    assert line.startswith("note: ") and line.endswith(
        "warnings about the matrix or its bases; `torchimages validate` lists them"
    )
    assert "2.7.0" not in err
    code, _, err = cli("validate", "--matrix", str(path))
    assert code == 0
    assert f"{path}:4: warning: cuda: torch 2.9.1+cu129 is an uncertain fact" in err
    code, _, err = cli("list", "--matrix", str(path), "2.7.0")
    assert code == 0 and len(err.splitlines()) == 1 and "2.7.0" not in err


def test_commands_without_docker_do_not_import_the_docker_sdk(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(GOOD)
    script = (
        "import sys; sys.modules['docker'] = None  # any import of the SDK now fails\n"
        "from torchimages.cli import main\n"
        f"for args in (['validate'], ['list', '--json'], ['plan', '2'], ['render']):\n"
        f"    assert main([*args, '--matrix', {str(path)!r}]) == 0, args\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_two_rows_resolving_to_one_combination_are_refused(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(
        "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8', flavors: [devel]}\n"
        "    - {torch: 2.7.0, cuda: '11.8', flavors: [runtime]}\n"
    )
    code, _, err = cli("validate", "--matrix", str(path))
    assert code == 2
    assert f"{path}:4: error: this row resolves to the same combination as line 3" in err
