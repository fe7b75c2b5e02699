"""What the suites say about the folders, the verbs userspace and a failed torch.compile on a cluster
platform (torchimages.smoke.platform): the probe's answers are literals here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torchimages.smoke import checks, platform

SERVES = {"path": "/tmp", "writable": True, "read_only": False, "noexec": False}


def test_a_writable_exec_folder_serves() -> None:
    for name in platform.FOLDERS:
        assert platform.folder_problem(name, SERVES) is None


def test_a_noexec_temporary_folder_says_the_fix() -> None:
    problem = platform.folder_problem("temp", {**SERVES, "noexec": True})
    assert problem is not None
    assert "/tmp" in problem and "noexec" in problem and "--tmpfs /tmp:exec" in problem
    assert "failed to map segment" in problem  # the words of Inductor's error, so a user finds this


def test_noexec_matters_only_where_compiled_code_loads() -> None:
    assert platform.folder_problem("pip_cache", {**SERVES, "noexec": True}) is None
    assert platform.folder_problem("home", {**SERVES, "noexec": True}) is None
    assert platform.folder_problem("triton_cache", {**SERVES, "noexec": True}) is not None


def test_an_unwritable_folder_names_its_error_and_the_recipe() -> None:
    entry = {**SERVES, "path": "/home/torch", "writable": False, "read_only": True, "error": "OSError: [Errno 30]"}
    problem = platform.folder_problem("home", entry)
    assert problem is not None
    assert "/home/torch" in problem and "Errno 30" in problem and "--tmpfs /home/torch:exec" in problem
    missing = platform.folder_problem("temp", {"path": None, "writable": False, "error": "No usable temporary"})
    assert missing is not None and "no folder at all" in missing and "No usable temporary" in missing


def test_compile_advice_names_the_noexec_folders_only() -> None:
    payload: dict[str, Any] = {
        "folders": {
            "home": {**SERVES, "path": "/home/torch", "writable": False},
            "temp": {**SERVES, "noexec": True},
            "inductor_cache": {**SERVES, "path": "/tmp/torchinductor_torch", "noexec": True},
        }
    }
    advice = platform.compile_advice(payload)
    assert advice.startswith("\nLikely cause: ")
    assert "/tmp/torchinductor_torch" in advice and "/home/torch" not in advice
    assert platform.compile_advice({"folders": {"temp": SERVES}}) == ""
    assert platform.compile_advice(None) == ""


def test_verbs_problems_name_each_library_that_did_not_load() -> None:
    verbs = {"libraries": {"libibverbs.so.1": None, "librdmacm.so.1": "librdmacm.so.1: cannot open shared object"}}
    assert platform.verbs_problems(verbs) == ["librdmacm.so.1: librdmacm.so.1: cannot open shared object"]
    assert platform.verbs_problems({"libraries": {"libibverbs.so.1": None}}) == []


def test_every_flavor_carries_the_verbs_userspace_cpu_builds_too() -> None:
    for flavor in ("devel", "runtime"):
        for cuda in (True, False):
            assert checks.expectation("verbs", flavor, cuda=cuda) is True


def test_the_recipes_are_docker_run_options() -> None:
    assert platform.ANY_UID_RUN_ARGS[0] == "--user" and platform.ANY_UID_RUN_ARGS[1].endswith(":0")
    assert platform.READ_ONLY_RUN_ARGS[0] == "--read-only"
    tmpfs = [platform.READ_ONLY_RUN_ARGS[i + 1] for i, a in enumerate(platform.READ_ONLY_RUN_ARGS) if a == "--tmpfs"]
    assert all(mount.endswith(":exec") for mount in tmpfs) and "/tmp:exec" in tmpfs


def test_the_documented_recipes_are_the_ones_the_e2e_tests_run() -> None:
    page = (Path(__file__).resolve().parents[3] / platform.RECIPE).read_text()
    assert " ".join(platform.READ_ONLY_RUN_ARGS) in page
    assert " ".join(platform.ANY_UID_RUN_ARGS) in page
