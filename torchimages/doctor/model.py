"""The doctor's nouns: what the selection needs of a machine (`Needs`), what the machine has (`HostFacts`), and
what one check found (`Check`, with a status of `OK`, `WARN`, `SKIP` or `FAIL`)."""

from __future__ import annotations

from dataclasses import dataclass

from torchimages.combination import RegistryBase

GB = 10**9
OK, WARN, SKIP, FAIL = "ok", "warn", "skip", "FAIL"


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


@dataclass(frozen=True)
class Needs:
    """What the selection needs, and how the machine is to be checked."""

    images: tuple[ImageNeed, ...]
    registry_bases: tuple[RegistryBase, ...]
    bootstrapped_bases: tuple[str, ...]
    host_only: bool = False  # run on this machine without Docker: no engine, disk or registry checks
    require_gpu: bool = False  # no usable GPU is a failure, not a skip

    @property
    def cuda_images(self) -> tuple[ImageNeed, ...]:
        return tuple(i for i in self.images if i.cuda)

    @property
    def disk_bytes(self) -> int:
        """Every image once, the largest twice: BuildKit holds the layer it exports beside the image it makes
        (the sizes are estimated in `torchimages.doctor.selection`)."""
        sizes = [i.size_bytes for i in self.images]
        return sum(sizes) + max(sizes, default=0)


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
    gpus: tuple[str, ...] = ()
    driver: str | None = None
    nvidia_smi_error: str | None = None
    toolkit_binaries: tuple[str, ...] = ()
    cdi_specs: tuple[str, ...] = ()
    shm_bytes: int | None = None
