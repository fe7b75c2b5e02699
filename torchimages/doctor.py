"""`build.py doctor`: will the selected images build, and run, on this machine?

Facts are gathered in one place (`gather`, the only impure function here) into a frozen `HostFacts`;
each check is a small pure function of those facts and of what the selection needs (`Needs`), so tests
feed fake facts. A check says `ok`, `warn` (works, with a caveat), `skip` (the selection does not need
it, or the machine has no GPU and none is required) or `FAIL`, and with a failure, the fix.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import glob
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torchimages.combination import Combination, RegistryBase
from torchimages.compat import version_key
from torchimages.planning.plan import Plan, Selected, select
from torchimages.problems import InputError
from torchimages.smoke.diagnosis import MIN_SHM_BYTES
from torchimages.versions import driver_is_older

GB = 10**9
# What a bare `doctor` checks where the matrix has it: the README's first build.
FIRST_BUILD = "2.14.1-cuda13.0-*-debian12"
# Disk an image takes in the engine's store, per flavor. Measured (docs/benchmarks.md, 2026-11-30:
# torch 2.14.1+cu130 and 2.13.0+cpu): a CUDA runtime 6.24 GB, devel FROM runtime +0.31 GB; a CPU
# runtime 1.41 GB, devel +0.03 GB. A devel image on an nvidia/cuda devel image is not measured here
# (no registry): that image (about 8 GB unpacked for 12.x/13.x) plus the venv copied in, so 14 GB.
RUNTIME_GB = {"cuda": 6.3, "cpu": 1.5}
DEVEL_ON_RUNTIME_GB = {"cuda": 0.35, "cpu": 0.05}
DEVEL_ON_TOOLKIT_IMAGE_GB = 14.0
# BuildKit holds the layer it exports beside the image it makes: the largest image is counted twice.
TOOLKIT_BINARIES = ("nvidia-container-runtime-hook", "nvidia-container-runtime", "nvidia-ctk")
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
CDI_GPU_KIND = "nvidia.com/gpu"
SMI_QUERY = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
HOW_TO_MIRROR = (
    "make the registry reachable, or mirror the bases and pass --base-registry HOST/PREFIX (or set "
    "`base_registry:` in the matrix; docs/how-to/air-gapped-builds.md), "
    "or select debian12 images (bootstrapped, no registry)"
)
HOW_TO_GET_THE_TOOLKIT = (
    "install the NVIDIA Container Toolkit (nvidia-container-toolkit) and run `nvidia-ctk runtime configure "
    "--runtime=docker`, or write a CDI spec (`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`); "
    "without either, hand the devices over with --run-arg (docs/how-to/test-your-own-image.md)"
)

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
        """Every image once, the largest twice (see the sizes above)."""
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


# ---------------------------------------------------------------------------------------------
# What the selection needs


def image_size_bytes(combination: Combination, flavor: str) -> int:
    """The estimated size of one image (see RUNTIME_GB and the rule above)."""
    kind = "cuda" if combination.cuda else "cpu"
    if flavor == "runtime":
        return int(RUNTIME_GB[kind] * GB)
    if combination.toolkit.provider == "image":
        return int(DEVEL_ON_TOOLKIT_IMAGE_GB * GB)
    shares_runtime = "runtime" in combination.flavors
    return int((DEVEL_ON_RUNTIME_GB[kind] + (0 if shares_runtime else RUNTIME_GB[kind])) * GB)


def largest(chosen: Sequence[Selected]) -> Selected:
    """The most demanding combination of a selection: the most bytes of images, then the newest torch."""
    return max(
        chosen,
        key=lambda s: (
            sum(image_size_bytes(s.combination, i.flavor) for i in s.images),
            version_key(s.combination.torch),
        ),
    )


def default_selection(plan: Plan) -> tuple[list[Selected], str]:
    """What a bare `doctor` checks, and a line saying why: the images of the README's first build
    (FIRST_BUILD) where the matrix has them, else its most demanding combination. Builds go one selection at
    a time; every image of the matrix at once (68 of them, 600 GB) is a fleet's job, not one machine's."""
    try:
        first = select(plan, [FIRST_BUILD])
    except InputError:
        first = []
    if first:
        return first, f"the images of the first build, `make build TAG='{FIRST_BUILD}'`"
    if not plan.combinations:
        return [], "no images"
    every = [Selected(c, c.images) for c in plan.combinations]
    return [largest(every)], "the most demanding combination of the matrix"


def needs(chosen: Sequence[Selected], host_only: bool = False, require_gpu: bool = False) -> Needs:
    """What the selected images need of a machine."""
    images = tuple(
        ImageNeed(
            image.tag,
            s.combination.cuda,
            s.combination.min_driver,
            s.combination.toolkit_driver,
            image_size_bytes(s.combination, image.flavor),
        )
        for s in chosen
        for image in s.images
    )
    bases: dict[str, RegistryBase] = {}
    for s in chosen:
        devel = any(i.flavor == "devel" for i in s.images)  # runtime alone never pulls the toolkit image
        wanted = {s.combination.os.image, *([s.combination.toolkit.image] if devel else [])}
        for base in s.combination.registry_bases:
            if base.reference in wanted:
                bases.setdefault(base.reference, base)
    bootstrapped = sorted({s.combination.os.image for s in chosen if s.combination.os.provider == "bootstrap"})
    return Needs(images, tuple(bases.values()), tuple(bootstrapped), host_only, require_gpu)


# ---------------------------------------------------------------------------------------------
# Checks: pure functions of (facts, needs)


def check_engine(facts: HostFacts, need: Needs) -> Check:
    from torchimages.engine import HOW_TO_GET_AN_ENGINE

    name = "Docker engine"
    if need.host_only:
        return Check(name, SKIP, "--host-only: this machine runs the software itself, no engine needed")
    if facts.engine_version is None:
        sdk = "install the docker SDK (`pip install docker`) and " if "SDK" in (facts.engine_error or "") else ""
        return Check(
            name,
            FAIL,
            f"no Docker engine answers: {facts.engine_error}",
            f"{sdk}{HOW_TO_GET_AN_ENGINE}; to check only what running on this machine needs, use --host-only",
        )
    return Check(name, OK, f"Docker {facts.engine_version} answers at {facts.engine_address}")


def check_build_client(facts: HostFacts, need: Needs) -> Check:
    from torchimages.engine import HOW_TO_GET_BUILDKIT

    name = "BuildKit client"
    if need.host_only:
        return Check(name, SKIP, "--host-only: nothing is built")
    if facts.build_client:
        return Check(name, OK, f"builds with `{facts.build_client}`")
    if facts.engine_version is None:
        return Check(name, SKIP, "not probed: no engine answers (the probe is a tiny build)")
    return Check(name, FAIL, f"no BuildKit-capable docker client: {facts.build_client_error}", HOW_TO_GET_BUILDKIT)


def check_disk(facts: HostFacts, need: Needs) -> Check:
    name = "free disk"
    if need.host_only:
        return Check(name, SKIP, "--host-only: no images are stored")
    wanted = need.disk_bytes
    if facts.engine_version is None:
        return Check(name, SKIP, f"not checked: no engine answers ({wanted / GB:.0f} GB estimated for its data root)")
    if facts.free_bytes is None:
        return Check(name, SKIP, f"the engine's data root is not on this machine: {wanted / GB:.0f} GB needed there")
    where = f"{facts.disk_path}: {facts.free_bytes / GB:.1f} GB free"
    estimate = f"{wanted / GB:.1f} GB estimated for {len(need.images)} images (the largest counted twice)"
    if facts.free_bytes < wanted:
        return Check(
            name,
            FAIL,
            f"{where}, {estimate}",
            f"free {(wanted - facts.free_bytes) / GB:.1f} GB more (`docker image prune`, or select fewer images)",
        )
    return Check(name, OK, f"{where}, {estimate}")


def check_registry_bases(facts: HostFacts, need: Needs) -> Check:
    name = "registry bases"
    if need.host_only:
        return Check(name, SKIP, "--host-only: nothing is pulled")
    if not need.registry_bases:
        return Check(name, OK, "none needed: the selection's bases are bootstrapped (no registry)")
    errors = dict(facts.base_errors)
    by_error: dict[str, list[str]] = {}  # one public registry down is one reason for many bases
    for base in need.registry_bases:
        error = errors.get(base.reference, "not asked")
        if base.reference not in facts.present_images and error:
            by_error.setdefault(error, []).append(base.reference)
    if by_error:
        missing = "; ".join(f"{', '.join(refs)}: {error}" for error, refs in by_error.items())
        return Check(name, FAIL, f"not reachable and not present here: {missing}", HOW_TO_MIRROR)
    unlocked = [base.name for base in need.registry_bases if not base.digest]
    answer = f"{len(need.registry_bases)} answer or are present ({', '.join(b.pull for b in need.registry_bases)})"
    if unlocked:
        return Check(
            name, WARN, f"{answer}; not locked to a digest: {', '.join(unlocked)}", "run `python build.py lock --bases`"
        )
    return Check(name, OK, answer + ", each locked to a digest")


def check_bootstrap(facts: HostFacts, need: Needs) -> Check:
    name = "bootstrapped bases"
    if need.host_only:
        return Check(name, SKIP, "--host-only: nothing is built")
    if not need.bootstrapped_bases:
        return Check(name, SKIP, "none in the selection")
    absent = [b for b in need.bootstrapped_bases if b not in facts.present_images]
    if not absent:
        return Check(name, OK, f"present: {', '.join(need.bootstrapped_bases)}")
    if facts.mmdebstrap:
        return Check(name, OK, f"{', '.join(absent)} will be made with mmdebstrap from the distribution archive")
    return Check(
        name,
        FAIL,
        f"{', '.join(absent)} must be bootstrapped and mmdebstrap is not installed",
        "apt-get install mmdebstrap",
    )


def _no_gpu(facts: HostFacts) -> str:
    why = f" (nvidia-smi: {facts.nvidia_smi_error})" if facts.nvidia_smi_error else ""
    return f"no NVIDIA GPU here{why}"


def check_driver(facts: HostFacts, need: Needs) -> Check:
    name = "NVIDIA driver"
    cuda = need.cuda_images
    if not cuda:
        return Check(name, SKIP, "CPU images only: no GPU needed")
    if facts.driver is None:
        floor = max((i.min_driver for i in cuda if i.min_driver), key=_version, default="")
        if need.require_gpu:
            return Check(
                name, FAIL, _no_gpu(facts), f"install an NVIDIA GPU driver >= {floor} (nvidia-smi must answer)"
            )
        building = "" if need.host_only else "fine for building; "
        return Check(
            name, SKIP, f"{_no_gpu(facts)}: {building}the GPU suites skip (--require-gpu makes this a failure)"
        )
    gpus = f" ({', '.join(sorted(set(facts.gpus)))})" if facts.gpus else ""
    too_old = [i for i in cuda if i.min_driver and driver_is_older(facts.driver, i.min_driver)]
    if too_old:
        worst = max(too_old, key=lambda i: _version(i.min_driver or "0"))
        tags = ", ".join(i.tag for i in too_old[:4]) + (f" and {len(too_old) - 4} more" if len(too_old) > 4 else "")
        return Check(
            name,
            FAIL,
            f"driver {facts.driver}{gpus} is older than {worst.min_driver}, the minimum of {worst.tag} "
            f"(CUDA {worst.cuda}); too old for {tags}",
            f"upgrade the driver to >= {worst.min_driver}, or select images of an older CUDA",
        )
    floors = sorted({i.min_driver for i in cuda if i.min_driver}, key=_version)
    cudas = ", ".join(sorted({i.cuda or "" for i in cuda}, key=_version))
    message = f"driver {facts.driver}{gpus} >= {floors[-1] if floors else '?'}, the minimum of CUDA {cudas}"
    compat = sorted(
        {i.cuda or "" for i in cuda if i.toolkit_driver and driver_is_older(facts.driver, i.toolkit_driver)},
        key=_version,
    )
    if compat:
        return Check(
            name,
            WARN,
            f"{message}; CUDA {', '.join(compat)} runs under minor-version compatibility (older than its toolkit's "
            "driver: PTX of that CUDA cannot be JIT-compiled)",
            "upgrade the driver for full support",
        )
    return Check(name, OK, message)


def check_container_toolkit(facts: HostFacts, need: Needs) -> Check:
    name = "NVIDIA Container Toolkit"
    if need.host_only:
        return Check(name, SKIP, "--host-only: no containers")
    if not need.cuda_images:
        return Check(name, SKIP, "CPU images only: no --gpus")
    if facts.driver is None and not need.require_gpu:
        return Check(name, SKIP, f"{_no_gpu(facts)}: no --gpus")
    found = []
    if "nvidia" in facts.runtimes:
        found.append("the engine's nvidia runtime")
    found += [f"{b} on PATH" for b in facts.toolkit_binaries]
    found += [f"CDI spec {s}" for s in facts.cdi_specs]
    if found:
        return Check(name, OK, "--gpus can reach the GPUs: " + ", ".join(found))
    status = FAIL if need.require_gpu else WARN
    return Check(
        name, status, "no toolkit and no CDI spec: `docker run --gpus` cannot hand GPUs over", HOW_TO_GET_THE_TOOLKIT
    )


def check_shm(facts: HostFacts, need: Needs) -> Check:
    name = "/dev/shm"
    if len(facts.gpus) < 2 or not need.cuda_images:
        return Check(name, SKIP, "fewer than 2 GPUs: no multi-GPU run")
    if not need.host_only:
        return Check(
            name,
            OK,
            "containers get their own /dev/shm: `build.py test` passes --shm-size "
            "(2g by default; Docker's 64m is too small)",
        )
    size = f"{facts.shm_bytes / 2**30:.2f} GiB" if facts.shm_bytes is not None else "unknown"
    if facts.shm_bytes is not None and facts.shm_bytes < MIN_SHM_BYTES:
        status = FAIL if need.require_gpu else WARN
        return Check(
            name,
            status,
            f"/dev/shm is {size}, under the 1 GiB that NCCL across {len(facts.gpus)} GPUs needs",
            "mount a larger tmpfs on /dev/shm (mount -o remount,size=8g /dev/shm)",
        )
    return Check(name, OK, f"{size} for {len(facts.gpus)} GPUs")


CHECKS: tuple[Callable[[HostFacts, Needs], Check], ...] = (
    check_engine,
    check_build_client,
    check_disk,
    check_registry_bases,
    check_bootstrap,
    check_driver,
    check_container_toolkit,
    check_shm,
)


def run_checks(facts: HostFacts, need: Needs) -> list[Check]:
    """Every check, in order."""
    return [check(facts, need) for check in CHECKS]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in text.split("."))


# ---------------------------------------------------------------------------------------------
# Gathering the facts (the one impure part)


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
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    if CDI_GPU_KIND in handle.read(1 << 20):
                        found.append(path)
            except OSError:
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
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(8, len(references))) as pool:
        return tuple(zip(references, pool.map(ask, references), strict=True))


def gather(need: Needs, docker_cli: str | None = None) -> HostFacts:
    """Ask the machine (engine, build client, disk, registries, driver, toolkit, /dev/shm) what the checks need;
    never raises for a missing engine, SDK or driver: the facts say so."""
    from torchimages import engine

    gpus, driver, smi_error = _nvidia_smi()
    common = HostFacts(
        gpus=gpus,
        driver=driver,
        nvidia_smi_error=smi_error,
        toolkit_binaries=tuple(b for b in TOOLKIT_BINARIES if shutil.which(b)),
        cdi_specs=_cdi_specs(),
        shm_bytes=_shm(),
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
            client_error = str(exc)
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
    )


def report(checks: Sequence[Check]) -> list[str]:
    """The lines the doctor prints: one per check, its fix beneath a failure or warning."""
    width = max(len(c.name) for c in checks)
    lines = []
    for check in checks:
        lines.append(f"{check.status:<5} {check.name:<{width}}  {check.message}")
        if check.fix and check.status in (FAIL, WARN):
            lines.append(f"{'':<5} {'':<{width}}  fix: {check.fix}")
    return lines
