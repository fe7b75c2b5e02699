"""A CPU-only torch image (devel + runtime) on the bootstrapped debian12 base, built for real: the run's one build
of it (conftest.cpu_built), which other modules assert on too."""

from __future__ import annotations

import datetime
import email.utils
import uuid
from pathlib import Path
from typing import Any

import pytest

from torchimages.building import bootstrap

from .conftest import (
    CPU,
    NO_LAYER_SCAN,
    Built,
    Rebuilt,
    assert_images_are_training_bases,
    assert_suites_passed_without_a_gpu,
    assert_torch_compile_works_on_cpu,
    build_a_lie,
    layers_read,
    own_temporary,
    remove_repository,
    run_cli,
    search_saved,
    sh,
    temporary_images,
)

pytestmark = pytest.mark.e2e
FLAVORS = ("runtime", "devel")
OS_PACKAGES_LAYER = 1  # the base is layer 0


@pytest.fixture(scope="module")
def built(cpu_built: Built) -> Built:
    """The run's one build of the CPU combination (conftest.cpu_built)."""
    return cpu_built


def test_build_verifies_and_tags_both_flavors(built: Built) -> None:
    assert built.status == 0, built.output
    assert "2 built" in built.output
    for flavor in ("devel", "runtime"):  # the build's record of what each image holds
        record = (built.logs / f"{built.image(flavor).tag}.installed.txt").read_text()
        assert "\ngcc=" in record and "\ntorch==2.13.0+cpu\n" in record, record[:500]


def test_labels_record_versions_and_digest(built: Built, docker_client: Any) -> None:
    for flavor in ("devel", "runtime"):
        image = built.image(flavor)
        labels = docker_client.images.get(image.reference).labels
        assert labels["io.torchimages.input-digest"] == image.input_digest
        assert labels["io.torchimages.torch"] == "2.13.0" and labels["io.torchimages.cuda"] == "none"


def test_the_bootstrapped_base_records_what_it_was_built_from(built: Built, docker_client: Any) -> None:
    """Suite, apt sources and the archive's Release date, in the base's labels (read by `build.py` reports)."""
    labels = docker_client.images.get(built.combination.os.image).labels
    assert labels[bootstrap.SUITE_LABEL] == built.combination.os.suite == "bookworm"
    assert f"debian {built.combination.os.suite} main" in labels[bootstrap.SOURCES_LABEL]
    released = email.utils.parsedate_to_datetime(labels[bootstrap.RELEASE_DATE_LABEL])
    assert 2023 <= released.year <= datetime.datetime.now().year, released


def test_images_are_training_bases(built: Built, docker_client: Any) -> None:
    """runtime has gcc/g++ but no nvcc; no apt/pip state; one venv owned by 1000; devel = runtime + delta."""
    assert_images_are_training_bases(built, docker_client)
    assert "/usr/bin/gcc" in sh(docker_client, built.image("devel").reference, "command -v gcc")


def test_uv_installed_the_venv_and_left_nothing_of_itself_its_cache_or_its_secrets(
    built: Built, docker_client: Any, ca_bundle: tuple[Path, bytes]
) -> None:
    """uv wrote the venv (INSTALLER), compiled its bytecode as pip would, and is in no layer: no uv program,
    no uv.lock or credentials store of its own, no cache; pip is there for users; the CA bundle (a secret) and
    the served sources' loopback URLs (the uv.toml and pip.conf secrets) are in no layer and no history; nor is
    any step script (bind-mounted on /mnt: the image's /mnt is empty)."""
    runtime = built.image("runtime").reference
    site = f"/opt/venv/lib/python{built.combination.python}/site-packages"
    script = (
        f"cat {site}/torch-*.dist-info/INSTALLER; echo; ls {site}/torch/__pycache__ | grep -c 'cpython-.*[.]pyc$'; "
        "command -v uv || echo no-uv; ls /opt/venv/.lock ~/.local 2>&1 | grep -c 'No such file'; "
        "python -m pip --version | cut -d' ' -f1"
    )
    installer, pycs, uv, missing, pip = sh(docker_client, runtime, script).split()
    assert (installer, uv, missing, pip) == ("uv", "no-uv", "2", "pip") and int(pycs) > 10
    marker, step = ca_bundle[1], b"# torchimages build step "  # every step script's header
    assert sh(docker_client, runtime, "find /mnt -mindepth 1 | wc -l").strip() == "0"
    for flavor in ("runtime", "devel"):
        image = docker_client.images.get(built.image(flavor).reference)
        history = "\n".join(str(entry.get("CreatedBy", "")) for entry in image.history())
        assert marker.decode() not in history and "127.0.0.1" not in history and "bash /mnt/venv.sh" in history
    # every layer read whole and uncompressed (the containerd store saves gzip blobs)
    images = [built.image(f).reference for f in ("runtime", "devel")]
    saved = search_saved(images, [marker, step])
    layers_read(docker_client, images, saved)
    assert saved.found == (), f"found in a layer of runtime or devel (the CA bundle, a step script): {saved.found}"


def test_torch_compile_works_in_runtime(built: Built, docker_client: Any) -> None:
    assert_torch_compile_works_on_cpu(built, docker_client)


def test_default_user_is_not_root(built: Built, docker_client: Any) -> None:
    out = sh(docker_client, built.image("runtime").reference, "id -u; touch ~/w && echo writable")
    assert out.split() == ["1000", "writable"]


def test_unchanged_rebuild_is_skipped(built: Built) -> None:
    again = run_cli("build", "--matrix", built.plan.matrix_path, "--log-dir", built.logs, "*")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 skipped" in again.stdout and "up to date" in again.stdout


@pytest.mark.rebuilds_shared
def test_a_no_cache_rebuild_builds_runtime_once_and_devel_on_it_and_the_same_layers(
    built: Built, cpu_rebuilt: Rebuilt, docker_client: Any
) -> None:
    """Issue 19: `--no-cache` (a weekly security rebuild) builds runtime first and devel on exactly that image
    (a named build context), so runtime's layers are devel's first and the two are stored once: stored bytes
    of both / devel alone is 1.00, whatever the build cache held. And the layers are reproducible: the same
    inputs built again from nothing give the same layer digests (SOURCE_DATE_EPOCH, clamped file times)."""
    before, rebuilt = cpu_rebuilt.before, cpu_rebuilt.result
    assert rebuilt.returncode == 0 and "2 built" in rebuilt.stdout, rebuilt.stdout + rebuilt.stderr
    devel_log = (built.logs / f"{built.image('devel').tag}.log").read_text()
    assert "--build-context runtime=docker-image://torchimages-tmp/" in devel_log.split("\n", 1)[0]
    images = {f: docker_client.images.get(built.image(f).reference) for f in ("runtime", "devel")}
    runtime, devel = (images[f].attrs["RootFS"]["Layers"] for f in ("runtime", "devel"))
    assert devel[: len(runtime)] == runtime, "runtime's layers are not a prefix of devel's after --no-cache"
    assert len(devel) > len(runtime)  # devel = runtime + its delta: every stored runtime byte is devel's too
    changed = {
        f: [n for n, (a, b) in enumerate(zip(before[f], layers, strict=False)) if a != b]
        for f, layers in (("runtime", runtime), ("devel", devel))
    }
    # Every layer but the OS packages' (index 1): there, whether /run is listed flips between builds on the
    # classic image store (docs/benchmarks.md, issue 19); the venv layers, the bulk, are the same.
    assert len(before["devel"]) == len(devel), (before, devel)
    assert {f: [n for n in found if n != OS_PACKAGES_LAYER] for f, found in changed.items()} == {
        "runtime": [],
        "devel": [],
    }, changed


def test_a_lying_tag_fails_and_leaves_no_tag(built: Built, docker_client: Any) -> None:
    outcome = build_a_lie(built, "lie-runtime", torch="2.12.0")
    assert outcome.status == "failed"
    assert "torch: the tag claims 2.12.0, the image has 2.13.0+cpu" in outcome.detail
    assert docker_client.images.list(name=f"{built.image('runtime').repository}:lie-runtime") == []
    # its own (named in the build's log): the engine may hold others' (another worker's builds, a run killed earlier)
    assert own_temporary(built.logs) and not own_temporary(built.logs) & temporary_images(docker_client)


def test_smoke_suites_pass_in_the_images_and_gpu_tests_skip_visibly(built: Built) -> None:
    assert_suites_passed_without_a_gpu(built)


def test_require_gpu_without_a_gpu_fails(built: Built) -> None:
    result = run_cli(
        "test", "--matrix", built.plan.matrix_path, "--suites", "gpu", "--require-gpu", built.image("runtime").tag
    )
    assert result.returncode == 1
    assert "FAILED" in result.stdout


def test_lock_pins_every_package_and_the_rebuild_installs_exactly_those(
    built: Built, docker_client: Any, tmp_path: Path
) -> None:
    """On a copy of the shared matrix under its own repository: locking changes the combination's Dockerfile
    and digest. The locked rebuild is verified (what it installs is checked); its smoke suites and layer scan
    are not this test's subject."""
    repository = f"torchimages-e2e-{uuid.uuid4().hex[:8]}/pytorch"
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(f"repository: {repository}\nmatrix:\n  include:\n    - {CPU}\n")
    try:
        assert run_cli("render", "--matrix", matrix).returncode == 0
        # lock reads the packages from the built images: the copy's, from the build cache (the same Dockerfile)
        options = ("--log-dir", tmp_path / "logs", "--test", "none", *NO_LAYER_SCAN)
        first = run_cli("build", "--matrix", matrix, *options, "*")
        assert first.returncode == 0, first.stdout + first.stderr
        locked = run_cli("lock", "--matrix", matrix, "*")
        assert locked.returncode == 0, locked.stdout + locked.stderr
        name = built.combination.folder
        lock_file = tmp_path / "images" / name / "requirements.lock"
        pins = {line for line in lock_file.read_text().splitlines() if not line.startswith("#")}
        assert {"torch==2.13.0+cpu", "numpy==2.4.6"} <= pins
        folder = tmp_path / "images" / name
        assert "target=/tmp/requirements.lock" in (folder / "Dockerfile").read_text()
        assert "--constraint /tmp/requirements.lock" in (folder / "steps" / "venv.sh").read_text()
        assert run_cli("render", "--check", "--matrix", matrix).returncode == 0
        rebuilt = run_cli("build", "--matrix", matrix, *options, "*")
        assert rebuilt.returncode == 0 and "2 built" in rebuilt.stdout, rebuilt.stdout + rebuilt.stderr
        frozen = sh(docker_client, f"{repository}:2.13.0-cpu-runtime", "python -m pip freeze --all | grep -v '^pip=='")
        assert set(frozen.split()) <= pins
    finally:
        remove_repository(docker_client, repository)
