"""The doctor's nouns: what the selection needs of a machine (`Needs`), what the machine has (`HostFacts`, with
its emulators, `BinfmtHandler`), and what one check found (`Check`, with a status of `OK`, `WARN`, `SKIP` or
`FAIL`)."""

from __future__ import annotations

from dataclasses import dataclass

from torchimages import platforms as platform_names
from torchimages.archs import Capability
from torchimages.combination import RegistryBase

GB = 10**9
OK, WARN, SKIP, FAIL = "ok", "warn", "skip", "FAIL"
MEMLOCK_UNLIMITED = -1  # RLIM_INFINITY, as HostFacts.memlock_bytes gives it
BINFMT_DIR = "/proc/sys/fs/binfmt_misc"  # where the kernel lists the handlers of foreign binaries


def emulator(platform: str) -> str:
    """The binfmt_misc handler that runs `platform`'s programs on a machine of another: `qemu-aarch64` for
    linux/arm64 (the name Debian's qemu-user-static registers, and `make emulation`)."""
    return f"qemu-{platform_names.wheel_machine(platform)}"


@dataclass(frozen=True)
class Check:
    """One result: what was checked, its status, what was found, and (for a failure or warning) the fix."""

    name: str
    status: str
    message: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        return self.status == FAIL


@dataclass(frozen=True)
class ImageNeed:
    """What one selected image asks of the machine."""

    tag: str
    cuda: str | None
    min_driver: str | None  # the floor under CUDA minor-version compatibility
    toolkit_driver: str | None  # the CUDA toolkit's own driver (full features)
    size_bytes: int
    platform: str = platform_names.DEFAULT  # the OCI platform it is built for
    archs: str | None = None  # the GPU architectures of its CUDA code (archs.Archs.label); None: not known
    archs_uncertain: bool = False  # the knowledge base holds that list as uncertain (confidence U)


@dataclass(frozen=True)
class Needs:
    """What the selection needs, and how the machine is to be checked."""

    images: tuple[ImageNeed, ...]
    registry_bases: tuple[RegistryBase, ...]
    bootstrapped_bases: tuple[str, ...]
    host_only: bool = False  # run on this machine without Docker: no engine, disk or registry checks
    require_gpu: bool = False  # no usable GPU is a failure, not a skip
    rdma: bool = False  # InfiniBand/RoCE across nodes: /dev/infiniband and the locked-memory limit are checked
    keyrings: tuple[str, ...] = ()  # the keyrings that verify the archives of the bootstrapped bases (Ubuntu's)
    # every image of the matrix, newest torch first: where none selected runs on a GPU here, those that would
    matrix_images: tuple[ImageNeed, ...] = ()

    @property
    def cuda_images(self) -> tuple[ImageNeed, ...]:
        return tuple(i for i in self.images if i.cuda)

    @property
    def platforms(self) -> tuple[str, ...]:
        """The platforms of the selected images, in `platforms.PLATFORMS` order."""
        return tuple(p for p in platform_names.PLATFORMS if any(i.platform == p for i in self.images))

    def foreign_platforms(self, machine: str) -> tuple[str, ...]:
        """The selection's platforms whose programs `machine` (`uname -m`) does not run natively: emulated."""
        return tuple(p for p in self.platforms if p != platform_names.of_machine(machine))

    @property
    def disk_bytes(self) -> int:
        """Every image once, the largest twice: BuildKit holds the layer it exports beside the image it makes
        (the sizes are estimated in `torchimages.doctor.selection`)."""
        sizes = [i.size_bytes for i in self.images]
        return sum(sizes) + max(sizes, default=0)


@dataclass(frozen=True)
class BinfmtHandler:
    """One handler registered with binfmt_misc (its file in BINFMT_DIR), and the QEMU its interpreter is."""

    name: str  # qemu-aarch64
    enabled: bool
    interpreter: str  # the path the kernel runs foreign binaries with
    flags: str  # F (fix-binary): the kernel opens the interpreter at registration, so containers need not hold it
    version: str | None = None  # the first line of `<interpreter> --version`
    version_error: str | None = None  # why that did not answer


@dataclass(frozen=True)
class GpuDevice:
    """One GPU as nvidia-smi lists it: its index, name and compute capability (None: not known)."""

    index: str
    name: str
    capability: Capability | None

    def __str__(self) -> str:
        return f"{self.name} ({self.capability or 'capability unknown'})"


@dataclass(frozen=True)
class HostFacts:
    """Everything the checks look at, gathered once (`gather`); tests build it by hand."""

    engine_version: str | None = None  # None: no engine answers
    engine_error: str | None = None
    engine_address: str = ""
    build_client: str | None = None
    build_client_error: str | None = None
    disk_path: str | None = None
    free_bytes: int | None = None
    runtimes: tuple[str, ...] = ()
    present_images: frozenset[str] = frozenset()
    base_errors: tuple[tuple[str, str | None], ...] = ()  # (reference, why it does not answer, or None)
    mmdebstrap: bool = False
    missing_keyrings: tuple[str, ...] = ()  # of Needs.keyrings, those not on this machine
    gpus: tuple[str, ...] = ()
    driver: str | None = None
    nvidia_smi_error: str | None = None
    gpu_devices: tuple[GpuDevice, ...] = ()  # each GPU with its compute capability (nvidia-smi's compute_cap)
    gpu_devices_error: str | None = None  # why they are not known (an older driver lacks compute_cap)
    toolkit_binaries: tuple[str, ...] = ()
    cdi_specs: tuple[str, ...] = ()
    shm_bytes: int | None = None
    machine: str | None = None  # `uname -m`; None: not known
    page_size: int | None = None  # the memory page size, in bytes (os.sysconf('SC_PAGE_SIZE'))
    binfmt_mounted: bool = False  # binfmt_misc is mounted on BINFMT_DIR
    binfmt_handlers: tuple[BinfmtHandler, ...] = ()  # the registered emulators of the selection's foreign platforms
    infiniband: tuple[str, ...] | None = None  # the entries of /dev/infiniband (uverbs0, rdma_cm); None: no such folder
    rdma_adapters: tuple[str, ...] = ()  # /sys/class/infiniband: the RDMA adapters' names (mlx5_0)
    memlock_bytes: int | None = None  # this process's soft locked-memory limit; MEMLOCK_UNLIMITED; None: not known
    temp_dir: str | None = None  # Python's temporary folder (tempfile.gettempdir()); None: there is none
    temp_noexec: bool = False  # that folder's file system is mounted noexec
