"""Rendering: golden Dockerfiles, determinism, staleness checks, all-or-nothing writes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from torchimages import plan, render

GOLDEN = Path(__file__).parent / "golden"
REPRESENTATIVE = """
matrix:
  include:
    - {torch: 2.7.0, cuda: '11.8'}
    - {torch: 2.14.1, cuda: '13.0', os: debian12}
    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}
    - {torch: 2.15.0, cuda: '13.2', flavors: [runtime]}
"""


@pytest.fixture
def rendered(write_matrix: Callable[[str], Path]) -> dict[str, str]:
    return render.render_all(plan.load(write_matrix(REPRESENTATIVE)).combinations, render.DEFAULT_TEMPLATES)


def test_golden_dockerfiles(rendered: dict[str, str]) -> None:
    """Rendered text equals the reviewed goldens; UPDATE_GOLDEN=1 rewrites them."""
    for path, text in rendered.items():
        golden = GOLDEN / (path.split("/")[0] + ".Dockerfile")
        if os.environ.get("UPDATE_GOLDEN"):
            golden.write_text(text)
        assert golden.read_text() == text, f"{golden} differs: review, then UPDATE_GOLDEN=1"
    assert len(list(GOLDEN.glob("*.Dockerfile"))) == len(rendered)


def test_shape_of_a_cuda_dockerfile(rendered: dict[str, str]) -> None:
    text = rendered["2.7.0-cuda11.8-py3.10-ubuntu22.04/Dockerfile"]
    assert "FROM ubuntu:22.04 AS os" in text
    assert "FROM nvidia/cuda:11.8.0-devel-ubuntu22.04 AS devel" in text
    assert "FROM os AS runtime" in text and "FROM os AS venv" in text
    assert "torch==2.7.0" in text and "torchvision==0.22.0" in text and "torchaudio==2.7.0" in text
    assert "https://download.pytorch.org/whl/cu118" in text
    assert 'NVIDIA_REQUIRE_CUDA="cuda>=11.0"' in text
    assert "--mount=type=secret,id=cacert" in text and "--mount=type=cache,target=/root/.cache/pip" in text
    assert "USER 1000:1000" in text


def test_runtime_stage_has_no_compilers_or_toolkit(rendered: dict[str, str]) -> None:
    text = rendered["2.14.1-cuda13.0-py3.11-debian12/Dockerfile"]
    runtime = text[text.index("FROM os AS runtime") :]
    assert "gcc" not in runtime and "nvcc" not in runtime and "cuda-toolkit" not in runtime
    assert "COPY --from=venv" in runtime


def test_cpu_image_has_no_nvidia_environment(rendered: dict[str, str]) -> None:
    text = rendered["2.13.0-cpu-py3.11-debian12/Dockerfile"]
    assert "FROM os AS devel" in text and "gcc=4:12.2.0-3" in text
    assert "NVIDIA_" not in text and "torchvision" not in text.replace("io.torchimages.torchvision", "")


def test_runtime_only_combination_has_no_devel_target(rendered: dict[str, str]) -> None:
    assert "AS devel" not in rendered["2.15.0-cuda13.2-py3.12-ubuntu24.04/Dockerfile"]


def test_rendering_is_deterministic(write_matrix: Callable[[str], Path]) -> None:
    first = render.render_all(plan.load(write_matrix(REPRESENTATIVE)).combinations, render.DEFAULT_TEMPLATES)
    second = render.render_all(plan.load(write_matrix(REPRESENTATIVE)).combinations, render.DEFAULT_TEMPLATES)
    assert first == second


def test_digest_changes_with_templates_and_versions(write_matrix: Callable[[str], Path], tmp_path: Path) -> None:
    path = write_matrix(REPRESENTATIVE)
    base = {i.tag: i.input_digest for _, i in plan.load(path).images()}
    templates = tmp_path / "templates"
    templates.mkdir()
    for source in render.DEFAULT_TEMPLATES.glob("*.j2"):
        (templates / source.name).write_text(source.read_text() + "\n{# changed #}\n")
    changed = {i.tag: i.input_digest for _, i in plan.load(path, templates).images()}
    assert all(base[t] != changed[t] for t in base)
    assert len(set(base.values())) == len(base)


def test_stale_and_write(tmp_path: Path, rendered: dict[str, str]) -> None:
    images = tmp_path / "images"
    assert render.stale(rendered, images) == sorted(rendered)
    render.write(rendered, images)
    assert render.stale(rendered, images) == []
    (images / "old").mkdir()
    (images / "old" / "Dockerfile").write_text("FROM scratch\n")
    first = next(iter(rendered))
    (images / first).write_text("edited\n")
    assert render.stale(rendered, images) == sorted([first, "old/Dockerfile"])
    render.write(rendered, images)
    assert render.stale(rendered, images) == [] and not (images / "old").exists()


def test_a_lock_file_is_mounted_as_constraints_and_shapes_the_digest(
    write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    path = write_matrix("matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12}\n")
    images = tmp_path / "images"
    before = plan.load(path, images_dir=images)
    name = before.combinations[0].folder
    (images / name).mkdir(parents=True)
    (images / name / "requirements.lock").write_text("torch==2.13.0+cpu\nnumpy==2.4.6\n")
    after = plan.load(path, images_dir=images)
    text = render.render_all(after.combinations, render.DEFAULT_TEMPLATES)[f"{name}/Dockerfile"]
    assert text.count("--mount=type=bind,source=requirements.lock,target=/tmp/requirements.lock") == 2
    assert text.count("pip install --no-input --constraint /tmp/requirements.lock") == 2
    assert {i.input_digest for _, i in before.images()}.isdisjoint(i.input_digest for _, i in after.images())
