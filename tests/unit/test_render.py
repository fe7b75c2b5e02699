"""Rendering: golden Dockerfiles, determinism, staleness checks, all-or-nothing writes."""

from __future__ import annotations

import difflib
import shutil
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


# The combinations whose step scripts have goldens too (without and with a lock file).
STEP_GOLDENS = ("2.7.0-cuda11.8-py3.10-ubuntu22.04", "2.13.0-cpu-py3.11-debian12")


@pytest.fixture
def files(write_matrix: Callable[[str], Path]) -> dict[str, str]:
    """Every generated file: Dockerfiles and step scripts."""
    return render.render_all(plan.load(write_matrix(REPRESENTATIVE)).combinations, render.DEFAULT_TEMPLATES)


@pytest.fixture
def rendered(files: dict[str, str]) -> dict[str, str]:
    """The Dockerfiles."""
    return {path: text for path, text in files.items() if path.endswith("/Dockerfile")}


@pytest.fixture
def steps(files: dict[str, str]) -> dict[str, str]:
    """Each combination's step scripts, joined (folder/Dockerfile -> the text of every steps/ script)."""
    joined: dict[str, str] = {}
    for path, text in sorted(files.items()):
        if "/steps/" in path:
            key = path.split("/")[0] + "/Dockerfile"
            joined[key] = joined.get(key, "") + text
    return joined


def test_golden_dockerfiles(files: dict[str, str]) -> None:
    """Rendered text equals the reviewed goldens; UPDATE_GOLDEN=1 rewrites them."""
    checked = 0
    for path, text in files.items():
        folder, _, name = path.partition("/")
        if name == "Dockerfile":
            golden.check(GOLDEN / (folder + ".Dockerfile"), text)
        elif folder in STEP_GOLDENS:
            golden.check(GOLDEN / "steps" / folder / name.removeprefix("steps/"), text)
        else:
            continue
        checked += 1
    assert len(list(GOLDEN.glob("*.Dockerfile"))) + len(list((GOLDEN / "steps").rglob("*.sh"))) == checked
    assert {p.name for p in (GOLDEN / "steps").iterdir()} == set(STEP_GOLDENS)


def test_every_dockerfile_is_short_and_repeats_no_block_of_three_lines() -> None:
    """Issue 34: every committed Dockerfile reads in about two screens, and says each thing once: no run of three
    lines (blank lines aside) appears twice in one file."""
    for dockerfile in sorted((ROOT / "images").glob("*/Dockerfile")):
        lines = [line for line in dockerfile.read_text().splitlines() if line.strip()]
        assert len(lines) <= 130, (dockerfile, len(lines))
        seen: dict[tuple[str, ...], int] = {}
        for n in range(len(lines) - 2):
            block = tuple(lines[n : n + 3])
            assert block not in seen, (dockerfile, seen.get(block), n, block)
            seen[block] = n


def test_a_change_to_a_step_script_is_one_line_per_generated_file(
    write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    """The shared set-up lives in the step scripts: changing one of its lines changes that line in each rendered
    copy of the script, and in each Dockerfile only the input digest's label (of each flavor)."""
    path = write_matrix(REPRESENTATIVE)
    templates = tmp_path / "templates"
    shutil.copytree(render.DEFAULT_TEMPLATES, templates)
    venv = templates / "steps" / "venv.sh.j2"
    venv.write_text(venv.read_text().replace("UV_HTTP_RETRIES=5", "UV_HTTP_RETRIES=6"))
    before = render.render_all(plan.load(path).combinations, render.DEFAULT_TEMPLATES)
    after = render.render_all(plan.load(path, templates).combinations, templates)
    assert before.keys() == after.keys()
    for name in before:
        changed = [
            line
            for line in difflib.unified_diff(before[name].splitlines(), after[name].splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        ]
        if name.endswith("/steps/venv.sh"):
            assert len(changed) == 2 and "UV_HTTP_RETRIES=6" in changed[1], changed
        elif name.endswith("/Dockerfile"):
            assert changed and all("io.torchimages.input-digest=" in line for line in changed), changed
            assert len(changed) == 2 * before[name].count("io.torchimages.input-digest="), changed
        else:
            assert changed == [], (name, changed)


def test_shape_of_a_cuda_dockerfile(rendered: dict[str, str], steps: dict[str, str]) -> None:
    assert "UV_CONFIG_FILE=/run/secrets/uvconf" in steps["2.7.0-cuda11.8-py3.10-ubuntu22.04/Dockerfile"]
    text = rendered["2.7.0-cuda11.8-py3.10-ubuntu22.04/Dockerfile"]
    assert "FROM ubuntu:22.04 AS runtime" in text
    assert "FROM nvidia/cuda:11.8.0-devel-ubuntu22.04 AS devel" in text
    assert "COPY --from=runtime --chown=1000:0 /opt/venv /opt/venv" in text and "AS venv" not in text
    assert (
        '"torch==2.7.0+cu118"' in text and '"torchvision==0.22.0+cu118"' in text and '"torchaudio==2.7.0+cu118"' in text
    )
    assert "# The venv, from https://download.pytorch.org/whl/cu118 (or the uvconf secret's sources)." in text
    assert 'NVIDIA_REQUIRE_CUDA="cuda>=11.0"' in text
    assert "--mount=type=secret,id=cacert" in text and "--mount=type=cache,target=/home/torch/.cache/uv" in text
    assert "--mount=type=secret,id=uvconf" in text
    assert "USER 1000:0" in text
    # Ubuntu 22.04's venv pip predates `pip inspect`: users get a newer one, installed by uv; no step mounts pip's cache
    assert "bash /mnt/venv.sh create python3.10 --pip 25.3 --setuptools" in text
    assert "--mount=type=cache,target=/home/torch/.cache/pip" not in text


def test_runtime_compiles_but_has_no_toolkit_and_devel_builds_on_it(rendered: dict[str, str]) -> None:
    text = rendered["2.14.1-cuda13.0-py3.11-debian12/Dockerfile"]
    runtime, devel = text.split("# devel:")
    assert "FROM runtime AS devel" in devel
    assert "gcc" in runtime and "g++" in runtime and "python3.11-dev" in runtime
    assert "nvcc" not in runtime and "cuda-toolkit" not in runtime
    assert "COPY" not in text and "AS venv" not in text
    assert "cuda-toolkit[nvcc,nvvm,cudart,cccl,crt,nvrtc]==13.0.3" in devel and "-m venv" not in devel


def test_no_package_manager_state_and_no_os_package_versions(rendered: dict[str, str], steps: dict[str, str]) -> None:
    for name, text in rendered.items():
        assert text.count("bash /mnt/apt-install.sh") == text.count("--mount=type=cache,target=/var/lib/apt/lists")
        assert "rm -rf /var/lib/apt/lists" not in text + steps[name] and "/root/.cache" not in text + steps[name]
        assert "dpkg-query -W -f '${Package}=${Version}\\n' > /usr/share/torchimages/os-packages.txt" in steps[name]
        apt_lines = [line.split("apt-install.sh", 1)[1] for line in text.splitlines() if "apt-install.sh" in line]
        assert apt_lines and not [line for line in apt_lines if "=" in line]


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


def test_stale_and_write(tmp_path: Path, files: dict[str, str]) -> None:
    """Dockerfiles and step scripts alike: an edited one is stale and rewritten, one no longer generated is stale
    and removed (its folders too, once empty)."""
    images = tmp_path / "images"
    assert render.stale(files, images) == sorted(files)
    render.write(files, images)
    assert render.stale(files, images) == []
    (images / "old" / "steps").mkdir(parents=True)
    (images / "old" / "Dockerfile").write_text("FROM scratch\n")
    (images / "old" / "steps" / "venv.sh").write_text("true\n")
    first = next(iter(files))
    kept = first.split("/")[0]
    (images / kept / "steps" / "gone.sh").write_text("true\n")
    (images / first).write_text("edited\n")
    orphans = ["old/Dockerfile", "old/steps/venv.sh", f"{kept}/steps/gone.sh"]
    assert render.stale(files, images) == sorted([first, *orphans])
    render.write(files, images)
    assert render.stale(files, images) == [] and not (images / "old").exists()
    assert not (images / kept / "steps" / "gone.sh").exists() and (images / kept / "steps").is_dir()


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
    files = render.render_all(after.combinations, render.DEFAULT_TEMPLATES)
    text = files[f"{name}/Dockerfile"]
    # every uv step: setuptools in the new venv, torch, its dependencies, the rest (runtime); ninja (devel)
    assert text.count("--mount=type=bind,source=requirements.lock,target=/tmp/requirements.lock") == 5
    assert (
        '"$uv" pip install --python /opt/venv/bin/python --compile-bytecode --constraint /tmp/requirements.lock "$@"'
        in files[f"{name}/steps/venv.sh"]
    )
    assert {i.input_digest for _, i in before.images()}.isdisjoint(i.input_digest for _, i in after.images())


# The last command of each step script: every file the step wrote gets SOURCE_DATE_EPOCH's time (common.sh).
CLAMPED = {
    "apt-install.sh": "clamp /",
    "add-user.sh": "clamp /",
    "constraints.sh": "clamp /etc",
    "venv.sh": "venv_done",
}


def test_every_step_that_writes_ends_clamping_file_times_and_every_stage_has_the_epoch() -> None:
    """Reproducible layers (issue 19), in every committed Dockerfile: each stage declares SOURCE_DATE_EPOCH with
    the knowledge base's date, every RUN runs a step script, and every step script's last command clamps the
    times of what it wrote. A RUN or a step added without the clamp would make two builds of the same inputs
    differ: this fails first."""
    epoch = plan.load(ROOT / "matrix.yaml").combinations[0].source_date_epoch
    assert epoch == 1795910400  # compat.yaml's source_date, 2026-11-29 (midnight UTC)
    for dockerfile in sorted((ROOT / "images").glob("*/Dockerfile")):
        text = dockerfile.read_text()
        instructions = [i for i in text.replace("\\\n", "").splitlines() if i and not i.startswith("#")]
        stages = [n for n, i in enumerate(instructions) if i.startswith("FROM ")]
        for n in stages:
            assert f"ARG SOURCE_DATE_EPOCH={epoch}" in instructions[n + 1 : n + 4], (dockerfile, instructions[n])
        runs = [i for i in instructions if i.startswith("RUN ")]
        unclamped = [i[:80] for i in runs if "bash /mnt/" not in i]
        assert runs and unclamped == [], (dockerfile, unclamped)
        for name, last in CLAMPED.items():
            lines = (dockerfile.parent / "steps" / name).read_text().rstrip().splitlines()
            body = lines[lines.index("main() {") :] if "main() {" in lines else lines
            assert body[-1] == last or (lines[-1].startswith("if [") and "    venv_done" in body), (dockerfile, name)


def test_every_runtime_serves_any_uid_of_group_0_and_carries_the_verbs_userspace(
    rendered: dict[str, str], steps: dict[str, str]
) -> None:
    """Both OS families (bootstrapped debian12, Ubuntu from the registry): issue 21."""
    for name, text in rendered.items():
        runtime = text.split("# devel:")[0]
        rdmacm = "librdmacm1t64" if "ubuntu24.04" in name else "librdmacm1"  # noble's name (64-bit time_t)
        (packages,) = [line for line in runtime.splitlines() if "apt-install.sh" in line]
        for package in ("libibverbs1", "ibverbs-providers", rdmacm):
            assert f" {package} " in packages + " ", (name, package)
        assert "bash /mnt/add-user.sh" in runtime, name
        assert "useradd --create-home --uid 1000 --gid 0 " in steps[name], name
        assert " HOME=/home/torch USER=torch" in runtime and "USER 1000:1000" not in text, name
        # every step that writes the venv ends making what it wrote g=u (venv_done), then the step ends
        assert "    venv_done\n}\n" in steps[name], name
