"""Gathering the facts the checks look at (`gather`, the only impure part of the doctor): the engine, the build
client, disk, registries, the driver and each GPU's compute capability, the container toolkit, /dev/shm, the
machine and its emulators."""

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

from torchimages import stopping, textfile
from torchimages.archs import ArchError, Capability, parse_capability
from torchimages.doctor.model import (
    BINFMT_DIR,
    MEMLOCK_UNLIMITED,
    BinfmtHandler,
    GpuDevice,
    HostFacts,
    Needs,
    emulator,
)
from torchimages.engine.process import captured
from torchimages.problems import InputError

TOOLKIT_BINARIES = ("nvidia-container-runtime-hook", "nvidia-container-runtime", "nvidia-ctk")
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
CDI_GPU_KIND = "nvidia.com/gpu"
SMI_QUERY = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
# Each GPU's compute capability; a driver without `compute_cap` (470, for one) refuses the whole query.
SMI_DEVICES = ["nvidia-smi", "--query-gpu=index,name,compute_cap", "--format=csv,noheader"]
SMI_TIMEOUT_S = 60.0
SMI_OUTPUT_BYTES = 256 * 1024  # a line per GPU: a few kilobytes on the largest machines
MAX_GPUS = 64  # more lines than this is not a machine's GPU list
MAX_GPU_NAME = 100  # characters of a GPU's name kept


def parse_nvidia_smi(output: str) -> tuple[tuple[str, ...], str | None]:
    """GPU names and the driver from `nvidia-smi --query-gpu=name,driver_version --format=csv,noheader`."""
    names, driver = [], None
    for line in output.splitlines():
        name, _, version = line.rpartition(",")
        if name.strip() and version.strip():
            names.append(name.strip())
            driver = version.strip()
    return tuple(names), driver


def _printable(text: str, limit: int = MAX_GPU_NAME) -> str:
    """`text` stripped, each character that is not printable (a control character, a line break) as `?`, cut
    at `limit`."""
    return "".join(c if c.isprintable() else "?" for c in text.strip())[:limit]


def parse_gpu_devices(output: str) -> tuple[tuple[GpuDevice, ...], str | None]:
    """Each GPU of `nvidia-smi --query-gpu=index,name,compute_cap --format=csv,noheader` (`0, NVIDIA H200, 9.0`),
    or why none is read: no line, too many, or a line that is not `INDEX, NAME, CAPABILITY`. A capability that
    is not one (`[N/A]`) is unknown for that GPU; a name keeps its first MAX_GPU_NAME printable characters."""
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines:
        return (), "nvidia-smi listed no GPU"
    if len(lines) > MAX_GPUS:
        return (), f"nvidia-smi listed {len(lines)} lines, more than {MAX_GPUS} GPUs: not a GPU list"
    devices = []
    for line in lines:
        index, _, rest = line.partition(",")
        name, _, capability = rest.rpartition(",")
        if not (index.strip().isdigit() and len(index.strip()) <= 4 and name.strip()):
            return (), f"nvidia-smi's line '{_printable(line, 80)}' is not INDEX, NAME, COMPUTE_CAP"
        try:
            known: Capability | None = parse_capability(capability)
        except ArchError:
            known = None
        devices.append(GpuDevice(index.strip(), _printable(name), known))
    return tuple(devices), None


def _smi(cmd: list[str]) -> tuple[str | None, str | None]:
    """What nvidia-smi printed (undecodable bytes replaced), or why it gave nothing: bounded in time and bytes."""
    if shutil.which(cmd[0]) is None:
        return None, "not found"
    try:
        result = captured(cmd, timeout_s=SMI_TIMEOUT_S, limit_bytes=SMI_OUTPUT_BYTES)
    except OSError as exc:
        return None, str(exc)
    if result.stopped:
        bound = f"{SMI_TIMEOUT_S:.0f} s" if result.timed_out else f"{SMI_OUTPUT_BYTES // 1024} KiB"
        return None, f"stopped: {result.stopped} ({bound})"
    if result.status != 0:
        said = " ".join((result.stderr or result.stdout).decode(errors="replace").split())
        return None, _printable(said[-300:], 300) or f"exit status {result.status}"
    return result.stdout.decode(errors="replace"), None


def _nvidia_smi() -> tuple[tuple[str, ...], str | None, str | None]:
    output, error = _smi(SMI_QUERY)
    if output is None:
        return (), None, error
    names, driver = parse_nvidia_smi(output)
    return names, driver, None if driver else "no GPU listed"


def _gpu_devices() -> tuple[tuple[GpuDevice, ...], str | None]:
    output, error = _smi(SMI_DEVICES)
    return parse_gpu_devices(output) if output is not None else ((), error)


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


def base_errors(references: Sequence[str]) -> tuple[tuple[str, str | None], ...]:
    """Each reference with why its registry does not serve it (None: it does), asked at once."""
    return tuple((reference, why) for reference, why, _login in base_answers(references))


def base_answers(references: Sequence[str]) -> tuple[tuple[str, str | None, bool], ...]:
    """Each reference with why its registry does not serve it (None: it does) and whether that answer asked for a
    login this question does not have (the registry's HTTP 401/403, never words of the message), asked at once."""
    from torchimages import registry

    def ask(reference: str) -> tuple[str | None, bool]:
        try:
            registry.resolve_digest(reference)
        except registry.RegistryError as exc:
            return str(exc).removeprefix(f"{reference}: "), exc.login
        return None, False

    if not references:
        return ()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(references)))
    try:
        answers = stopping.results(pool.submit(ask, r) for r in references)
        return tuple((r, *answer) for r, answer in zip(references, answers, strict=True))
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
    devices, devices_error = _gpu_devices() if driver else ((), None)
    machine = os.uname().machine or None
    mounted, handlers = _binfmt(need, machine)
    infiniband, adapters = _infiniband()
    temp_dir, temp_noexec = _temp()
    common = HostFacts(
        gpus=gpus,
        driver=driver,
        nvidia_smi_error=smi_error,
        gpu_devices=devices,
        gpu_devices_error=devices_error,
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
        base_errors=base_errors(unpresent),
        mmdebstrap=shutil.which("mmdebstrap") is not None,
        missing_keyrings=tuple(k for k in need.keyrings if not os.path.isfile(k)),
    )
