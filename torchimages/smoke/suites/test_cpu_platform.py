"""What cluster platforms change: the folders a training job writes (HOME, the temporary folder, pip's,
Triton's and Inductor's caches) are writable and, where compiled code loads from, not `noexec`, whatever
uid runs (OpenShift) and on a read-only root with the recipe's mounts (torchimages.smoke.platform); a
DataLoader with worker processes; the RDMA verbs userspace NCCL loads. One probe process for all."""

from __future__ import annotations

from typing import Any

import pytest

from torchimages.probes import ScriptResult
from torchimages.smoke import checks, platform
from torchimages.smoke.document import SmokeSpec

pytestmark = pytest.mark.cpu


@pytest.fixture(scope="module")
def found(platform_run: ScriptResult) -> dict[str, Any]:
    """The platform probe's answer; fails with its output when it did not report."""
    assert platform_run.payload is not None, f"the platform probe died before reporting: {platform_run.describe()}"
    return dict(platform_run.payload)


def test_home_is_set(found: dict[str, Any]) -> None:
    home = found["home_env"]
    who = f"uid {found['uid']}" + (f" ({found['name']})" if found["name"] else ", without a passwd entry")
    assert home and home != "/", (
        f"HOME is {home!r} for {who}: a uid without a passwd entry gets `/` from the engine; set ENV HOME in the image"
    )


@pytest.mark.parametrize("folder", list(platform.FOLDERS))
def test_folder_serves(found: dict[str, Any], folder: str) -> None:
    entry = found["folders"].get(folder)
    if entry is None:
        pytest.skip(f"{platform.FOLDERS[folder]}: not checked (there is no temporary folder)")
    problem = platform.folder_problem(folder, entry)
    assert problem is None, f"as uid {found['uid']} (gid {found['gid']}): {problem}"


def test_dataloader_with_workers(found: dict[str, Any]) -> None:
    loader = found.get("dataloader")
    assert loader is not None, "the platform probe died in the DataLoader (see its output)"
    assert loader["ok"], (
        f"a DataLoader with {loader.get('workers', 2)} workers failed or gave wrong batches: "
        f"{loader.get('error') or loader}\n{loader.get('trace', '')}\n"
        "Workers need /dev/shm (--shm-size, --ipc=host) and a writable temporary folder"
        + platform.compile_advice(found)
    )


def test_verbs_userspace_loads(found: dict[str, Any], spec: SmokeSpec) -> None:
    wanted = checks.expectation("verbs", spec.flavor, cuda=spec.cuda is not None)
    if wanted is None:
        pytest.skip(checks.reason("verbs", spec.flavor, cuda=spec.cuda is not None))
    missing = platform.verbs_problems(found["verbs"])
    assert not missing, (
        "the RDMA verbs userspace does not load, so NCCL falls back to TCP sockets between nodes:\n  "
        + "\n  ".join(missing)
        + "\nInstall libibverbs1, ibverbs-providers and librdmacm1"
    )
    devices = found["verbs"]["devices"]
    assert isinstance(devices, int) and devices >= 0, f"ibv_get_device_list gave {devices!r}"
