"""Gathering the facts the checks look at (`gather`, the only impure part of the doctor): the engine, the build
client, disk, registries, the driver, the container toolkit, /dev/shm, the machine and its emulators."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from torchimages import textfile
from torchimages.doctor.model import BINFMT_DIR, MEMLOCK_UNLIMITED, BinfmtHandler, HostFacts, Needs, emulator
from torchimages.problems import InputError

TOOLKIT_BINARIES = ("nvidia-container-runtime-hook", "nvidia-container-runtime", "nvidia-ctk")
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
CDI_GPU_KIND = "nvidia.com/gpu"
SMI_QUERY = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]


def parse_nvidia_smi(output: str) -> tuple[tuple[str, ...], str | None]:
    """GPU names and the driver from `nvidia-smi --query-gpu=name,driver_version --format=csv,noheader`."""
    names, driver = [], None
    for line in output.splitlines():
        name, _, version = line.rpartition(",")
        if name.strip() and version.strip():
            names.append(name.strip())
            driver = version.strip()
    return tuple(names), driver


def _nvidia_smi() -> tuple[tuple[str, ...], str | None, str | None]:
    if shutil.which(SMI_QUERY[0]) is None:
        return (), None, "not found"
    try:
        result = subprocess.run(SMI_QUERY, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return (), None, str(exc)
    if result.returncode != 0:
        return (), None, (result.stderr or result.stdout).strip()[-300:] or f"exit status {result.returncode}"
    names, driver = parse_nvidia_smi(result.stdout)
    return names, driver, None if driver else "no GPU listed"


def _cdi_specs() -> tuple[str, ...]:
    found = []
    for folder in CDI_DIRS:
        for path in sorted(glob.glob(os.path.join(folder, "*.yaml")) + glob.glob(os.path.join(folder, "*.json"))):
            try:  # through the one reader: a FIFO there must not hang the doctor
                if CDI_GPU_KIND in textfile.read_bytes(Path(path), "a CDI spec").decode("utf-8", "replace"):
                    found.append(path)
            except InputError:
                continue
    return tuple(found)


def _free(path: str | None) -> tuple[str | None, int | None]:
    if not path or not os.path.isdir(path):
        return path, None
    return path, shutil.disk_usage(path).free


def _shm() -> int | None:
    try:
        stat = os.statvfs("/dev/shm")
    except OSError:
        return None
    return stat.f_frsize * stat.f_blocks


def _infiniband() -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """The entries of /dev/infiniband (None: no such folder) and the adapters /sys/class/infiniband names."""
    try:
        devices: tuple[str, ...] | None = tuple(sorted(os.listdir("/dev/infiniband")))
    except OSError:
        devices = None
    try:
        adapters = tuple(sorted(os.listdir("/sys/class/infiniband")))
    except OSError:
        adapters = ()
    return devices, adapters


def _memlock() -> int | None:
    """The soft RLIMIT_MEMLOCK of this process (what the programs it starts inherit), MEMLOCK_UNLIMITED for none."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    except (ImportError, OSError, ValueError):
        return None
    return MEMLOCK_UNLIMITED if soft == resource.RLIM_INFINITY else int(soft)


def _temp() -> tuple[str | None, bool]:
    """Python's temporary folder (None: none usable) and whether it is on a noexec mount."""
    try:
        folder = tempfile.gettempdir()
        return folder, bool(os.statvfs(folder).f_flag & os.ST_NOEXEC)
    except (FileNotFoundError, OSError):
        return None, False


def _page_size() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # no such name here, or no POSIX sysconf
        return None


def parse_binfmt_handler(name: str, text: str) -> BinfmtHandler:
    """A handler from its file in binfmt_misc: `enabled` or `disabled`, then `interpreter PATH`, `flags: POF`,
    `offset`, `magic`, `mask` lines (a line missing leaves its field empty)."""
    lines = text.splitlines()
    interpreter = flags = ""
    for line in lines[1:]:
        if line.startswith("interpreter "):
            interpreter = line.removeprefix("interpreter ").strip()
        elif line.startswith("flags:"):
            flags = line.removeprefix("flags:").strip()
    return BinfmtHandler(name, bool(lines) and lines[0].strip() == "enabled", interpreter, flags)


def _qemu_version(interpreter: str) -> tuple[str | None, str | None]:
    """The first line of `<interpreter> --version`, or why there is none. Debian's interpreter is a link named
    `*-binfmt-P` that runs only under binfmt_misc: the binary it names is asked."""
    real = os.path.realpath(interpreter)
    if not os.access(real, os.X_OK):
        return None, f"{real} is not an executable here"
    try:
        result = subprocess.run([real, "--version"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    first = next((line.strip() for line in result.stdout.splitlines() if line.strip()), "")
    if result.returncode != 0 or not first:
        return None, (result.stderr or result.stdout).strip()[-200:] or f"exit status {result.returncode}"
    return first, None


def _binfmt(need: Needs, machine: str | None) -> tuple[bool, tuple[BinfmtHandler, ...]]:
    """Whether binfmt_misc is mounted, and the registered handlers of the selection's foreign platforms (their
    interpreters asked for their version: only where the selection needs them)."""
    mounted = os.path.exists(os.path.join(BINFMT_DIR, "status"))
    if not mounted or machine is None:
        return mounted, ()
    handlers = []
    for platform in need.foreign_platforms(machine):
        name = emulator(platform)
        try:  # through the one reader: whatever is there, it is read within bounds
            text = textfile.read_bytes(Path(BINFMT_DIR) / name, f"the binfmt_misc handler {name}")
        except InputError:
            continue  # not registered
        handler = parse_binfmt_handler(name, text.decode("utf-8", "replace"))
        version, error = _qemu_version(handler.interpreter) if handler.interpreter else (None, "no interpreter")
        handlers.append(dataclasses.replace(handler, version=version, version_error=error))
    return mounted, tuple(handlers)


def _base_errors(references: Sequence[str]) -> tuple[tuple[str, str | None], ...]:
    from torchimages import registry

    def ask(reference: str) -> str | None:
        try:
            registry.resolve_digest(reference)
        except registry.RegistryError as exc:
            return str(exc).removeprefix(f"{reference}: ")
        return None

    if not references:
        return ()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(references)))
    try:
        return tuple(zip(references, pool.map(ask, references), strict=True))
    finally:  # every answer is in, or a signal stops the doctor: it does not wait for the registries
        pool.shutdown(wait=False, cancel_futures=True)


def emulation(need: Needs) -> HostFacts:
    """Only what `checks.check_emulation` reads: this machine's architecture and its binfmt_misc handlers."""
    machine = os.uname().machine or None
    mounted, handlers = _binfmt(need, machine)
    return HostFacts(machine=machine, binfmt_mounted=mounted, binfmt_handlers=handlers)


def gather(need: Needs, docker_cli: str | None = None) -> HostFacts:
    """Ask the machine (engine, build client, disk, registries, driver, toolkit, /dev/shm, its architecture, page
    size and emulators) what the checks need; never raises for a missing engine, SDK or driver: the facts say so."""
    from torchimages import engine

    gpus, driver, smi_error = _nvidia_smi()
    machine = os.uname().machine or None
    mounted, handlers = _binfmt(need, machine)
    infiniband, adapters = _infiniband()
    temp_dir, temp_noexec = _temp()
    common = HostFacts(
        gpus=gpus,
        driver=driver,
        nvidia_smi_error=smi_error,
        toolkit_binaries=tuple(b for b in TOOLKIT_BINARIES if shutil.which(b)),
        cdi_specs=_cdi_specs(),
        shm_bytes=_shm(),
        machine=machine,
        page_size=_page_size(),
        binfmt_mounted=mounted,
        binfmt_handlers=handlers,
        infiniband=infiniband,
        rdma_adapters=adapters,
        memlock_bytes=_memlock(),
        temp_dir=temp_dir,
        temp_noexec=temp_noexec,
    )
    if need.host_only:
        return common
    asked = [b.reference for b in need.registry_bases] + list(need.bootstrapped_bases)
    found = engine.engine_facts(asked)
    client, client_error = None, None
    if found.version is not None:
        try:
            client = " ".join(engine.find_build_client(docker_cli).command)
        except engine.EngineError as exc:
            client_error = exc.reason  # the check gives the fix itself
    disk_path, free = _free(found.data_root)
    unpresent = [b.reference for b in need.registry_bases if b.reference not in found.present]
    return dataclasses.replace(
        common,
        engine_version=found.version,
        engine_error=found.error,
        engine_address=found.address,
        build_client=client,
        build_client_error=client_error,
        disk_path=disk_path,
        free_bytes=free,
        runtimes=found.runtimes,
        present_images=found.present,
        base_errors=_base_errors(unpresent),
        mmdebstrap=shutil.which("mmdebstrap") is not None,
        missing_keyrings=tuple(k for k in need.keyrings if not os.path.isfile(k)),
    )
