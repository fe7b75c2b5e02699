"""Issue 21 against the real engine, on the CPU runtime built for real: the suites pass as an arbitrary uid of
group 0 (OpenShift) and on a read-only root with the documented mounts, a noexec /tmp is named with its fix,
and the multi_node suite runs torchrun across two containers and leaves nothing behind, even when interrupted."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from torchimages import engine
from torchimages.smoke import cluster, platform

from .conftest import ROOT, Built, run_cli

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def built(cpu_built: Built) -> Built:
    """The run's one build of the CPU combination (conftest.cpu_built); this module uses its runtime."""
    return cpu_built


def run_args(options: tuple[str, ...]) -> list[str]:
    """`--run-arg=OPTION VALUE` pairs (each value shell-split by build.py) from `docker run` options."""
    args, i = [], 0
    while i < len(options):
        takes_value = i + 1 < len(options) and not options[i + 1].startswith("--")
        args.append(f"--run-arg={options[i]} {options[i + 1]}" if takes_value else f"--run-arg={options[i]}")
        i += 2 if takes_value else 1
    return args


def suites(built: Built, tmp: Path, *extra: str, names: str = "cpu,multi_node") -> tuple[int, str, dict[str, str]]:
    """`build.py test` of the runtime image: its exit status, output and each test's outcome (JUnit)."""
    junit = tmp / "smoke.xml"
    tag = built.image("runtime").tag
    result = run_cli("test", "--matrix", built.plan.matrix_path, "--suites", names, "--junit", junit, *extra, tag)
    outcomes = {}
    if junit.exists():
        for case in ElementTree.parse(junit).getroot().iter("testcase"):
            # test_x[docker://torchimages-smoke-ID] is test_x, test_x[docker://torchimages-smoke-ID-temp] test_x[temp]
            name = re.sub(r"docker://torchimages-smoke-[0-9a-f]+-?", "", case.get("name", "")).replace("[]", "")
            outcomes[name] = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
    return result.returncode, result.stdout + result.stderr, outcomes


def labelled(client: Any, run_id: str | None = None) -> dict[str, str]:
    """Containers and networks the multi_node suite labels (of one run, or of any), by id: their names. The
    container list is sparse: a full one inspects each after listing it, and one removed between the two (as the
    reaper does) raises NotFound."""
    label = {"label": cluster.RUN_LABEL if run_id is None else f"{cluster.RUN_LABEL}={run_id}"}
    listed = client.containers.list(all=True, filters=label, sparse=True)
    found = {c.id: str((c.attrs.get("Names") or [c.id])[0]).lstrip("/") for c in listed}
    return found | {n.id: n.name for n in client.networks.list(filters=label)}


def left_behind(client: Any, within_s: float, run_id: str | None = None) -> list[str]:
    """What carries the label now (of `run_id`, or of any run) and is still there `within_s` later. Without a
    run id this also sees another test's run (another worker's, at the same time): what that run holds goes
    when it ends, what ours left stays."""
    seen, deadline = labelled(client, run_id), time.monotonic() + within_s
    while seen and time.monotonic() < deadline:
        time.sleep(0.5)
        seen = {k: v for k, v in labelled(client, run_id).items() if k in seen}
    return sorted(seen.values())


def our_nodes(client: Any, image: str) -> dict[str, str]:
    """The labelled containers of `image` (a reference or an id only this test uses), running or not: name,
    run id."""
    listed = client.containers.list(all=True, filters={"label": cluster.RUN_LABEL}, sparse=True)
    return {
        str((c.attrs.get("Names") or [c.id])[0]).lstrip("/"): (c.attrs.get("Labels") or {})[cluster.RUN_LABEL]
        for c in listed
        if image in (c.attrs.get("Image"), c.attrs.get("ImageID"))
    }


@pytest.fixture
def own_copy(built: Built, docker_client: Any, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The runtime image plus one label of this test: an image id no other test's build shares (the multi_node
    suite starts its nodes by image id, and another worker's identical build may run its own meanwhile).
    Its reference and id."""
    (tmp_path / "Dockerfile").write_text(f"FROM {built.image('runtime').reference}\nLABEL e2e.own={tmp_path.name}\n")
    reference = f"torchimages-e2e-own-{uuid.uuid4().hex[:8]}:1"
    client = engine.find_build_client()
    made = subprocess.run(
        [*client.command, "--tag", reference, str(tmp_path)], env=client.environment(), capture_output=True, text=True
    )
    assert made.returncode == 0, made.stdout + made.stderr
    try:
        yield reference, str(docker_client.images.get(reference).id)
    finally:
        docker_client.images.remove(reference)


def test_the_image_is_built(built: Built) -> None:
    assert built.status == 0, built.output


def test_the_suites_pass_as_an_arbitrary_uid_of_group_0(built: Built, tmp_path: Path, docker_client: Any) -> None:
    status, output, outcomes = suites(built, tmp_path, *run_args(platform.ANY_UID_RUN_ARGS))
    assert status == 0, output
    # pip installs into the venv as uid 123456, group 0; compile, the caches and two nodes work as that uid
    for test in (
        "test_image_user_installs_into_the_venv",
        "test_torch_compile_on_cpu_matches_eager",
        "test_home_is_set",
        "test_dataloader_with_workers",
        "test_gloo_all_reduce_across_two_containers",
    ):
        assert outcomes.get(test) == "passed", (test, outcomes.get(test), output[-3000:])
    assert outcomes["test_default_user_name"] == "skipped" and "runs as uid 123456" in output
    assert left_behind(docker_client, 300) == []


def test_the_suites_pass_on_a_read_only_root_with_the_recipe(built: Built, tmp_path: Path) -> None:
    status, output, outcomes = suites(built, tmp_path, *run_args(platform.READ_ONLY_RUN_ARGS))
    assert status == 0, output
    for test in (
        "test_torch_compile_on_cpu_matches_eager",
        "test_dataloader_with_workers",
        "test_home_is_writable",
        "test_gloo_all_reduce_across_two_containers",
    ):
        assert outcomes.get(test) == "passed", (test, outcomes.get(test), output[-3000:])
    assert outcomes["test_image_user_installs_into_the_venv"] == "skipped" and "read-only file system" in output


def test_a_noexec_tmp_fails_naming_the_fix_not_only_inductors_traceback(built: Built, tmp_path: Path) -> None:
    noexec = ("--read-only", "--tmpfs", "/tmp", "--tmpfs", "/home/torch:exec")
    status, output, outcomes = suites(built, tmp_path, *run_args(noexec), names="cpu")
    assert status == 1, output
    assert outcomes["test_folder_serves[temp]"] == "failure", outcomes
    assert outcomes["test_torch_compile_on_cpu_matches_eager"] == "failure", outcomes
    assert "is on a noexec mount" in output and "--tmpfs /tmp:exec" in output
    assert "Likely cause: the temporary folder" in output


def test_an_interrupted_multi_node_run_leaves_no_container_or_network(
    own_copy: tuple[str, str], docker_client: Any
) -> None:
    reference, image = own_copy  # its spec from the labels it inherits
    command = [sys.executable, str(ROOT / "build.py"), "test", "--image", reference, "--suites", "multi_node"]
    process = subprocess.Popen(command, cwd=ROOT, start_new_session=True, text=True, stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (nodes := our_nodes(docker_client, image)):
            assert process.poll() is None and time.monotonic() < deadline, "the nodes never started"
            time.sleep(0.2)
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode != 0
    # build.py kills the suites' pytest soon after the same Ctrl-C: the reaper removes the nodes then
    (run_id,) = set(nodes.values())
    ended = time.monotonic()
    assert left_behind(docker_client, 60, run_id) == []
    print(f"nothing left of run {run_id} {time.monotonic() - ended:.1f} s after build.py ended")


def test_a_killed_multi_node_run_is_cleaned_up_by_its_reaper(built: Built, docker_client: Any) -> None:
    """SIGKILL runs no `finally`: the reaper, in a session of its own, removes the nodes and their network."""
    image = built.image("runtime").reference
    code = f"from torchimages.smoke import cluster; cluster.run({image!r}, 'python', 'gloo', [[], []])"
    process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while len(nodes := our_nodes(docker_client, image)) < 2:
            assert process.poll() is None and time.monotonic() < deadline, "the nodes never started"
            time.sleep(0.2)
    finally:
        process.kill()
        process.wait()
    (run_id,) = set(nodes.values())
    assert left_behind(docker_client, 60, run_id) == []
