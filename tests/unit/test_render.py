"""Rendering: golden Dockerfiles, determinism, staleness checks, all-or-nothing writes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests import golden
from tests.unit.conftest import ROOT
from torchimages import render
from torchimages.planning import plan

GOLDEN = golden.GOLDEN
REPRESENTATIVE = """
matrix:
  include:
    - {torch: 2.7.0, cuda: '11.8'}
    - {torch: 2.14.1, cuda: '13.0', os: debian12}
    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}
    - {torch: 2.15.0, cuda: '13.2', flavors: [runtime]}
    - {torch: 2.14.1, cuda: '13.0', os: ubuntu24.04}
"""


@pytest.fixture
def rendered(write_matrix: Callable[[str], Path]) -> dict[str, str]:
    return render.render_all(plan.load(write_matrix(REPRESENTATIVE)).combinations, render.DEFAULT_TEMPLATES)


def test_golden_dockerfiles(rendered: dict[str, str]) -> None:
    """Rendered text equals the reviewed goldens; UPDATE_GOLDEN=1 rewrites them."""
    for path, text in rendered.items():
        golden.check(GOLDEN / (path.split("/")[0] + ".Dockerfile"), text)
    assert len(list(GOLDEN.glob("*.Dockerfile"))) == len(rendered)


def test_shape_of_a_cuda_dockerfile(rendered: dict[str, str]) -> None:
    text = rendered["2.7.0-cuda11.8-py3.10-ubuntu22.04/Dockerfile"]
    assert "FROM ubuntu:22.04 AS runtime" in text
    assert "FROM nvidia/cuda:11.8.0-devel-ubuntu22.04 AS devel" in text
    assert "COPY --from=runtime --chown=1000:0 /opt/venv /opt/venv" in text and "AS venv" not in text
    assert (
        '"torch==2.7.0+cu118"' in text and '"torchvision==0.22.0+cu118"' in text and '"torchaudio==2.7.0+cu118"' in text
    )
    assert "https://download.pytorch.org/whl/cu118" in text
    assert 'NVIDIA_REQUIRE_CUDA="cuda>=11.0"' in text
    assert "--mount=type=secret,id=cacert" in text and "--mount=type=cache,target=/home/torch/.cache/uv" in text
    assert "--mount=type=secret,id=uvconf" in text and "UV_CONFIG_FILE=/run/secrets/uvconf" in text
    assert "USER 1000:0" in text
    # Ubuntu 22.04's venv pip predates `pip inspect`: users get a newer one, installed by uv; no step mounts pip's cache
    assert '"$uv" pip install --python /opt/venv/bin/python --compile-bytecode "pip==25.3"' in text
    assert "--mount=type=cache,target=/home/torch/.cache/pip" not in text


def test_runtime_compiles_but_has_no_toolkit_and_devel_builds_on_it(rendered: dict[str, str]) -> None:
    text = rendered["2.14.1-cuda13.0-py3.11-debian12/Dockerfile"]
    runtime, devel = text.split("# devel:")
    assert "FROM runtime AS devel" in devel
    assert "gcc" in runtime and "g++" in runtime and "python3.11-dev" in runtime
    assert "nvcc" not in runtime and "cuda-toolkit" not in runtime
    assert "COPY" not in text and "AS venv" not in text
    assert "cuda-toolkit[nvcc,nvvm,cudart,cccl,crt,nvrtc]==13.0.3" in devel and "-m venv" not in devel


def test_no_package_manager_state_and_no_os_package_versions(rendered: dict[str, str]) -> None:
    for text in rendered.values():
        assert text.count("apt-get install -y") == text.count("--mount=type=cache,target=/var/lib/apt/lists")
        assert "rm -rf /var/lib/apt/lists" not in text and "/root/.cache" not in text
        assert "dpkg-query -W -f '${Package}=${Version}\\n' > /usr/share/torchimages/os-packages.txt" in text
        apt_lines = [line for line in text.splitlines() if line.startswith("        ") and "==" not in line]
        assert not [line for line in apt_lines if "=" in line and '"' not in line]


def test_cpu_image_has_no_nvidia_environment(rendered: dict[str, str]) -> None:
    text = rendered["2.13.0-cpu-py3.11-debian12/Dockerfile"]
    assert "FROM runtime AS devel" in text and "nvidia" not in text.lower().replace("nvidia-", "")
    assert "NVIDIA_" not in text and "torchvision" not in text.replace("io.torchimages.torchvision", "")
    assert '"torch==2.13.0+cpu"' in text and "--report" not in text


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
    # every uv step: setuptools in the new venv, torch, its dependencies, the rest (runtime); ninja (devel)
    assert text.count("--mount=type=bind,source=requirements.lock,target=/tmp/requirements.lock") == 5
    assert text.count("--compile-bytecode --constraint /tmp/requirements.lock") == 5
    assert "--compile-bytecode --constraint /tmp/requirements.lock --upgrade setuptools" in text
    assert {i.input_digest for _, i in before.images()}.isdisjoint(i.input_digest for _, i in after.images())


CLAMPED = 'xargs -0r touch --no-dereference --date="@${SOURCE_DATE_EPOCH}"; fi'


def test_every_step_that_writes_ends_clamping_file_times_and_every_stage_has_the_epoch() -> None:
    """Reproducible layers (issue 19), in every committed Dockerfile: each stage declares SOURCE_DATE_EPOCH with
    the knowledge base's date, and every RUN's last command clamps the times of what it wrote. A RUN added
    without the clamp would make two builds of the same inputs differ: this fails first."""
    epoch = plan.load(ROOT / "matrix.yaml").combinations[0].source_date_epoch
    assert epoch == 1795910400  # compat.yaml's source_date, 2026-11-29 (midnight UTC)
    for dockerfile in sorted((ROOT / "images").glob("*/Dockerfile")):
        text = dockerfile.read_text()
        instructions = [i for i in text.replace("\\\n", "").splitlines() if i and not i.startswith("#")]
        stages = [n for n, i in enumerate(instructions) if i.startswith("FROM ")]
        for n in stages:
            assert f"ARG SOURCE_DATE_EPOCH={epoch}" in instructions[n + 1 : n + 3], (dockerfile, instructions[n])
        runs = [i for i in instructions if i.startswith("RUN ")]
        unclamped = [i[:80] for i in runs if not i.endswith(CLAMPED)]
        assert runs and unclamped == [], (dockerfile, unclamped)


def test_every_runtime_serves_any_uid_of_group_0_and_carries_the_verbs_userspace(rendered: dict[str, str]) -> None:
    """Both OS families (bootstrapped debian12, Ubuntu from the registry): issue 21."""
    for name, text in rendered.items():
        runtime = text.split("# devel:")[0]
        rdmacm = "librdmacm1t64" if "ubuntu24.04" in name else "librdmacm1"  # noble's name (64-bit time_t)
        for package in ("libibverbs1", "ibverbs-providers", rdmacm):
            assert f"        {package} \\\n" in runtime, (name, package)
        assert "useradd --create-home --uid 1000 --gid 0 " in runtime, name
        assert "ENV HOME=/home/torch \\\n    USER=torch\n" in runtime and "USER 1000:1000" not in text, name
        # each step that writes the venv (a uv step, the toolkit's links, a venv made without uv) makes it g=u
        writes = ("rm -f /opt/venv/.lock", "RUN ln -s ", "RUN export TMPDIR=/home/torch/.cache/tmp")
        assert text.count("xargs -0r chmod g=u") == sum(text.count(step) for step in writes), name
