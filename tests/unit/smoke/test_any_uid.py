"""The any-uid checks of the cpu suite (OpenShift runs an image as a random uid of group 0): the venv's folders
writable by group 0 as by their owner, and the folders a training job writes writable. The suites' own test
functions are run here on facts written out (a fake host), and the group-write `find` runs on this machine over
folders whose modes are set here, so a check that stops failing on a bad image fails here."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from torchimages.smoke import checks
from torchimages.smoke.suites import test_cpu_image as image_suite
from torchimages.smoke.suites import test_cpu_platform as platform_suite


class Host:
    """What the suites ask of a testinfra host, answered from literals: the venv's owner, and each command's
    output (`run` answers `listing` for the group-write find, rc `status` for anything else)."""

    backend = SimpleNamespace(NAME="fake")  # neither docker nor local: root_host is the host itself

    def __init__(self, uid: int = checks.VENV_UID, gid: int = checks.VENV_GID, listing: str = "", status: int = 0):
        self.uid, self.gid, self.listing, self.status = uid, gid, listing, status
        self.ran: list[str] = []

    def file(self, path: str) -> Any:
        return SimpleNamespace(is_directory=True, uid=self.uid, gid=self.gid)

    def run(self, command: str) -> Any:
        self.ran.append(command)
        if command.startswith("find "):
            return SimpleNamespace(stdout=self.listing, stderr="", rc=0)
        return SimpleNamespace(
            stdout="/home/torch\n", stderr="Permission denied" if self.status else "", rc=self.status
        )


RUNTIME = SimpleNamespace(flavor="runtime", cuda=None)  # what require_row reads of the spec


def test_a_venv_writable_by_group_0_passes() -> None:
    host = Host()
    image_suite.test_venv_is_owned_by_the_image_user(host, RUNTIME)  # type: ignore[arg-type]
    (find,) = [c for c in host.ran if c.startswith("find ")]
    assert find.startswith(f"find {checks.VENV} {checks.VENV}/bin ") and f"! -group {checks.VENV_GID}" in find


@pytest.mark.parametrize(
    ("host", "said"),
    [
        (Host(listing="/opt/venv/bin\n"), "that a uid of group 0 cannot write"),
        (Host(listing="/opt/venv/lib/python3.12/site-packages\n"), "/opt/venv/lib/python3.12/site-packages"),
        (Host(gid=1000), "is owned by 1000:1000, not 1000:0"),
        (Host(uid=0), "is owned by 0:0, not 1000:0"),
    ],
)
def test_a_venv_folder_group_0_cannot_write_fails(host: Host, said: str) -> None:
    with pytest.raises(AssertionError, match=said):
        image_suite.test_venv_is_owned_by_the_image_user(host, RUNTIME)  # type: ignore[arg-type]


def test_a_home_the_user_cannot_write_fails() -> None:
    image_suite.test_home_is_writable(Host())
    with pytest.raises(AssertionError, match="cannot write its home"):
        image_suite.test_home_is_writable(Host(status=1))


def find(folders: list[Path], gid: int) -> list[str]:
    command = image_suite.group_unwritable(" ".join(str(f) for f in folders), gid)
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    return done.stdout.split()


@pytest.mark.parametrize(
    ("mode", "listed"),
    [
        (0o775, False),  # group as owner: writable by any uid of the group
        (0o2775, False),
        (0o770, False),
        (0o755, True),  # the group cannot write
        (0o735, True),  # nor read
        (0o765, True),  # nor enter
        (0o700, True),
    ],
)
def test_the_group_write_find_lists_a_folder_whose_group_lacks_the_owners_rights(
    tmp_path: Path, mode: int, listed: bool
) -> None:
    folder = tmp_path / "venv"
    folder.mkdir()
    folder.chmod(mode)
    assert stat.S_IMODE(folder.stat().st_mode) == mode
    gid = folder.stat().st_gid
    assert find([folder], gid) == ([str(folder)] if listed else [])


def test_the_group_write_find_lists_a_folder_of_another_group(tmp_path: Path) -> None:
    good, other = tmp_path / "good", tmp_path / "other"
    for folder in (good, other):
        folder.mkdir()
        folder.chmod(0o775)
    gid = good.stat().st_gid
    assert find([good, other], gid) == []
    assert find([good, other], gid + 1) == [str(good), str(other)]  # neither is of that group
    (good / "inside").mkdir(mode=0o700)  # what is below is not looked at (pip writes in the folders named)
    assert find([good], gid) == []


SERVES = {"path": "/home/torch", "writable": True, "read_only": False, "noexec": False}


def answer(**folders: dict[str, Any]) -> dict[str, Any]:
    """The platform probe's answer as uid 123456 of group 0, each folder serving but those given."""
    entries = {name: {**SERVES, "path": f"/x/{name}"} for name in ("home", "temp", "pip_cache")}
    return {"uid": 123456, "gid": 0, "folders": {**entries, **folders}}


@pytest.mark.parametrize("folder", ["home", "temp", "pip_cache"])
def test_a_folder_a_job_writes_that_is_not_writable_fails(folder: str) -> None:
    found = answer()
    platform_suite.test_folder_serves(found, folder)
    broken = answer(**{folder: {**SERVES, "path": "/x/y", "writable": False, "error": "PermissionError: [Errno 13]"}})
    with pytest.raises(AssertionError, match=r"as uid 123456 \(gid 0\): .*/x/y, cannot be written \(PermissionError"):
        platform_suite.test_folder_serves(broken, folder)


def test_a_temporary_folder_on_noexec_fails_and_a_missing_one_skips() -> None:
    with pytest.raises(AssertionError, match="noexec"):
        platform_suite.test_folder_serves(answer(temp={**SERVES, "noexec": True}), "temp")
    with pytest.raises(pytest.skip.Exception):
        platform_suite.test_folder_serves(answer(), "triton_cache")
