"""`build.py doctor`: will the selected images build, and run, on this machine?

Facts are gathered in one place (`gather`, the only impure function of the package) into a frozen
`HostFacts`; each check is a small pure function of those facts and of what the selection needs (`Needs`),
so tests feed fake facts (the machine's emulators too: `BinfmtHandler`; its GPUs: `GpuDevice`). A check says
`ok`, `warn` (works, with a caveat), `skip` (the selection does not need it, or the machine has no GPU and none
is required) or `FAIL`, and with a failure, the fix.

The package: `model` (the nouns), `selection` (what the selected images need), `checks` (the table of pure
checks), `facts` (gathering), `report` (the printed lines). Its public names are importable from here.
"""

from __future__ import annotations

from torchimages.doctor.checks import (
    CHECKS,
    check_bootstrap,
    check_build_client,
    check_container_toolkit,
    check_disk,
    check_driver,
    check_emulation,
    check_engine,
    check_gpu_archs,
    check_machine,
    check_registry_bases,
    check_shm,
    run_checks,
)
from torchimages.doctor.facts import gather, parse_binfmt_handler, parse_gpu_devices, parse_nvidia_smi
from torchimages.doctor.model import (
    BINFMT_DIR,
    FAIL,
    GB,
    OK,
    SKIP,
    WARN,
    BinfmtHandler,
    Check,
    GpuDevice,
    HostFacts,
    ImageNeed,
    Needs,
    emulator,
)
from torchimages.doctor.report import report
from torchimages.doctor.selection import FIRST_BUILD, default_selection, image_size_bytes, largest, needs

__all__ = [
    "BINFMT_DIR",
    "CHECKS",
    "FAIL",
    "FIRST_BUILD",
    "GB",
    "OK",
    "SKIP",
    "WARN",
    "BinfmtHandler",
    "Check",
    "GpuDevice",
    "HostFacts",
    "ImageNeed",
    "Needs",
    "check_bootstrap",
    "check_build_client",
    "check_container_toolkit",
    "check_disk",
    "check_driver",
    "check_emulation",
    "check_engine",
    "check_gpu_archs",
    "check_machine",
    "check_registry_bases",
    "check_shm",
    "default_selection",
    "emulator",
    "gather",
    "image_size_bytes",
    "largest",
    "needs",
    "parse_binfmt_handler",
    "parse_gpu_devices",
    "parse_nvidia_smi",
    "report",
    "run_checks",
]
