"""The checks: each a pure function of the machine's facts and of what the selection needs, in one table
(`CHECKS`); a failure carries its fix."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from torchimages import archs, platforms
from torchimages.doctor.model import (
    BINFMT_DIR,
    FAIL,
    GB,
    MEMLOCK_UNLIMITED,
    OK,
    SKIP,
    WARN,
    Check,
    HostFacts,
    ImageNeed,
    Needs,
    emulator,
)
from torchimages.smoke.diagnosis import MIN_SHM_BYTES
from torchimages.versions import driver_is_older

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
HOW_TO_EMULATE = (
    "run `make emulation` as root (scripts/setup-emulation.sh: mounts binfmt_misc, installs qemu-user-static, "
    "registers its handler with the F flag)"
)
SMALL_PAGE = 4096  # what x86_64 has, and what most programs built for aarch64 assume
OLD_QEMU = 8  # QEMU older than this: bookworm's 7.2 has a known crash class under emulation


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
            facts.engine_error or "no Docker engine answers",
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
    return Check(name, FAIL, facts.build_client_error or "no BuildKit-capable docker client", HOW_TO_GET_BUILDKIT)


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
    if facts.mmdebstrap and facts.missing_keyrings:
        return Check(
            name,
            FAIL,
            f"{', '.join(absent)} must be bootstrapped from an archive that {', '.join(facts.missing_keyrings)} "
            "verifies, and it is not installed",
            "apt-get install ubuntu-keyring (scripts/start-docker.sh installs it)",
        )
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


_RANK = {OK: 0, WARN: 1, FAIL: 2}
PTX_JIT = "JIT-compiled by the driver at first use (a slow start)"
NOT_VERIFIED = "by a list not verified (compat.yaml cuda_archs, confidence U)"


def _tags(tags: Sequence[str], shown: int = 4) -> str:
    """`a, b, c, d and 3 more` (each tag once, in order)."""
    once = list(dict.fromkeys(tags))
    more = f" and {len(once) - shown} more" if len(once) > shown else ""
    return ", ".join(once[:shown]) + more


def _runs_on(image: ImageNeed, capability: archs.Capability, driver: str | None) -> tuple[str, str]:
    """(status, phrase) of one image's CUDA code on a GPU of `capability` (NVIDIA's rules, archs.coverage): a
    cubin is ok; PTX alone a warning (the driver JIT-compiles it at first use), a failure under minor-version
    compatibility (a driver older than the image's toolkit driver cannot JIT-compile it); nothing, a failure.
    An uncertain list makes any of them a warning. The image's `archs` must be known."""
    found = archs.coverage(archs.parse_archs(image.archs or ""), capability)
    if found.how == "sass":
        status, phrase = OK, found.by
    elif found.how == "ptx" and driver and image.toolkit_driver and driver_is_older(driver, image.toolkit_driver):
        too_old = (
            f"driver {driver}, older than CUDA {image.cuda}'s {image.toolkit_driver} (minor-version compatibility)"
        )
        status, phrase = FAIL, f"only PTX ({found.by}), which {too_old} cannot JIT-compile,"
    elif found.how == "ptx":
        status, phrase = WARN, f"only PTX ({found.by}), {PTX_JIT},"
    else:
        status, phrase = FAIL, "no kernel image"
    return (WARN, f"{phrase} {NOT_VERIFIED}") if image.archs_uncertain else (status, phrase)


def _checked(image: ImageNeed) -> bool:
    """Whether the image's architectures are known, as a list archs reads."""
    try:
        archs.parse_archs(image.archs or "")
    except archs.ArchError:
        return False
    return True


def _that_run(images: Sequence[ImageNeed], capability: archs.Capability, driver: str | None) -> list[str]:
    """The tags of those of `images` whose certain architectures run on `capability` (ok, or PTX the driver
    compiles)."""
    return [
        i.tag for i in images if _checked(i) and not i.archs_uncertain and _runs_on(i, capability, driver)[0] != FAIL
    ]


def _gpu_line(
    gpu: str, capability: archs.Capability, images: Sequence[ImageNeed], others: Sequence[ImageNeed], driver: str | None
) -> tuple[str, str]:
    """(status, line) of one kind of GPU against the selection's images: each verdict with its tags, and under a
    failure the images of the selection (else of the matrix) that run there."""
    verdicts: dict[tuple[str, str], list[str]] = {}
    for image in images:
        verdicts.setdefault(_runs_on(image, capability, driver), []).append(image.tag)
    status = max((s for s, _ in verdicts), key=_RANK.__getitem__)
    said = "; ".join(f"{phrase} in {_tags(tags)}" for (_, phrase), tags in verdicts.items())
    if status == FAIL:
        if running := _that_run(images, capability, driver):
            said += f"; images of the selection that run there: {_tags(running)}"
        elif running := _that_run(others, capability, driver):
            said += f"; none selected runs there; images of the matrix that do: {_tags(running)}"
        else:
            said += "; no image of the matrix runs there"
    return status, f"{gpu} ({capability}): {said}"


def check_gpu_archs(facts: HostFacts, need: Needs) -> Check:
    """Whether each GPU here runs the selected images' CUDA code: the knowledge base's architectures of each
    image (its build's on this machine's platform) against the GPU's compute capability, by NVIDIA's rules
    (torchimages.archs). A GPU no selected image covers fails, naming images that would run there."""
    name = "GPU architectures"
    cuda = need.cuda_images
    if not cuda:
        return Check(name, SKIP, "CPU images only: no GPU code")
    if facts.driver is None:
        return Check(name, SKIP, f"{_no_gpu(facts)}: not checked")
    known = [g for g in facts.gpu_devices if g.capability is not None]
    if not known:
        why = facts.gpu_devices_error or "no GPU gave one"
        return Check(
            name,
            SKIP,
            f"compute capability unknown (nvidia-smi: {why}): not checked; an older driver's nvidia-smi (470, "
            "for one) lacks compute_cap",
        )
    native = platforms.of_machine(facts.machine) if facts.machine else None
    images = [i for i in cuda if native is None or i.platform == native]
    if not images:
        return Check(
            name,
            SKIP,
            f"the selection's CUDA images are for {platforms.words(sorted({i.platform for i in cuda}))}: this "
            f"{facts.machine} machine's GPUs run {native or 'neither'} images",
        )
    checked = [i for i in images if _checked(i)]
    unchecked = [i.tag for i in images if not _checked(i)]
    not_known = (
        f"not known for {_tags(unchecked)}: the knowledge base does not hold their GPU architectures on "
        f"{native or 'their platform'} (compat.yaml cuda_archs)"
        if unchecked
        else ""
    )
    if not checked:
        return Check(name, SKIP, f"{not_known}: not checked")
    others = [i for i in need.matrix_images if i.cuda and (native is None or i.platform == native)]
    kinds = dict.fromkeys((g.name, g.capability) for g in known if g.capability is not None)
    lines = [_gpu_line(gpu, capability, checked, others, facts.driver) for gpu, capability in kinds]
    unknown = list(dict.fromkeys(g.name for g in facts.gpu_devices if g.capability is None))
    said = " | ".join(  # one part per kind of GPU; "; " parts a GPU's verdicts
        [line for _, line in lines]
        + [f"{gpu}: capability unknown, not checked" for gpu in unknown]
        + ([not_known] if not_known else [])
    )
    status = max((s for s, _ in lines), key=_RANK.__getitem__)
    if status == FAIL:
        return Check(
            name,
            FAIL,
            said,
            "select images whose code holds a cubin of the GPU's major version at or below its capability (sm_XY), "
            "or PTX at or below it that the driver can compile (the images named above), or upgrade the driver "
            "where it is too old to JIT-compile an image's PTX",
        )
    if status == WARN:
        fixes = [
            fix
            for phrase, fix in (
                (PTX_JIT, "select images holding the GPU's cubin, or keep the driver's JIT cache (CUDA_CACHE_PATH) "
                 "on a volume so it compiles once"),
                (NOT_VERIFIED, "`torchimages test --suites gpu SELECTOR` on this machine says for sure"),
            )
            if phrase in said
        ]  # fmt: skip
        return Check(name, WARN, said, "; ".join(fixes))
    return Check(name, OK, said)


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


RDMA_RECIPE = "docs/how-to/run-on-clusters.md"
RDMA_NOT_ASKED = "not asked (--rdma): NCCL across nodes over TCP sockets needs no RDMA device"


def check_infiniband(facts: HostFacts, need: Needs) -> Check:
    """With --rdma: the RDMA devices containers get with `--device /dev/infiniband`, a uverbs one among them."""
    name = "InfiniBand/RoCE"
    if not need.rdma:
        return Check(name, SKIP, RDMA_NOT_ASKED)
    adapters = ", ".join(facts.rdma_adapters) or "none in /sys/class/infiniband"
    if not facts.infiniband:
        return Check(
            name,
            FAIL,
            f"no {'entries in ' if facts.infiniband is not None else ''}/dev/infiniband (adapters: {adapters}): "
            "no RDMA device, or its driver is not loaded",
            "load the adapter's RDMA driver (modprobe mlx5_ib ib_uverbs rdma_ucm; `rdma link` lists the links), "
            f"or run without RDMA: NCCL then uses TCP sockets (NCCL_IB_DISABLE=1 says so) ({RDMA_RECIPE})",
        )
    found = ", ".join(facts.infiniband)
    if not any(entry.startswith("uverbs") for entry in facts.infiniband):
        return Check(
            name,
            FAIL,
            f"/dev/infiniband has no uverbs device ({found}; adapters: {adapters}): verbs cannot reach the adapter",
            "load ib_uverbs (modprobe ib_uverbs)",
        )
    return Check(
        name,
        OK,
        f"/dev/infiniband: {found}; adapters: {adapters}; containers need --device /dev/infiniband "
        f"--cap-add IPC_LOCK --ulimit memlock=-1 ({RDMA_RECIPE})",
    )


def check_memlock(facts: HostFacts, need: Needs) -> Check:
    """With --rdma: RDMA registers (locks) the buffers it moves; NCCL wants the locked-memory limit unlimited."""
    name = "locked memory"
    if not need.rdma:
        return Check(name, SKIP, RDMA_NOT_ASKED)
    if facts.memlock_bytes is None:
        return Check(name, SKIP, "the locked-memory limit (RLIMIT_MEMLOCK) is not known here")
    if facts.memlock_bytes == MEMLOCK_UNLIMITED:
        return Check(name, OK, "unlimited (ulimit -l)")
    limit = f"{facts.memlock_bytes // 1024} KiB (ulimit -l)"
    if not need.host_only:
        return Check(name, OK, f"{limit} here; containers get theirs from `docker run --ulimit memlock=-1`")
    return Check(
        name,
        FAIL,
        f"{limit}: RDMA registration of NCCL's buffers fails or falls back under a locked-memory limit",
        "raise it to unlimited: `ulimit -l unlimited` (as root), `* - memlock unlimited` in "
        "/etc/security/limits.conf, LimitMEMLOCK=infinity for a systemd service; under Slurm, "
        "PropagateResourceLimits",
    )


def check_temp(facts: HostFacts, need: Needs) -> Check:
    """With --host-only: torch.compile writes the code it compiles under the temporary folder and loads it from
    there, so that folder must exist and not be mounted noexec."""
    name = "temporary folder"
    if not need.host_only:
        return Check(
            name,
            SKIP,
            f"containers get their own: on a read-only root, mount /tmp with exec (--tmpfs /tmp:exec; {RDMA_RECIPE})",
        )
    if facts.temp_dir is None:
        return Check(
            name,
            FAIL,
            "no usable temporary folder (tempfile.gettempdir() found none writable)",
            "make /tmp writable, or set TMPDIR to a writable folder",
        )
    if facts.temp_noexec:
        return Check(
            name,
            FAIL,
            f"{facts.temp_dir} is mounted noexec: torch.compile cannot load the code it compiles there "
            "('failed to map segment from shared object')",
            f"remount it with exec (mount -o remount,exec {facts.temp_dir}), or set TMPDIR and "
            "TORCHINDUCTOR_CACHE_DIR to a writable folder on a mount without noexec",
        )
    return Check(name, OK, f"{facts.temp_dir}: writable, not noexec")


def _kib(size: int) -> str:
    return f"{size // 1024} KiB" if size % 1024 == 0 else f"{size} bytes"


def check_machine(facts: HostFacts, need: Needs) -> Check:
    """This machine's architecture and memory page size: pages larger than 4 KiB are a warning, whatever the
    selection (a GH200's kernel may use 64 KiB pages)."""
    name = "machine"
    if facts.machine is None:
        return Check(name, SKIP, "not known (uname -m did not answer)")
    native = platforms.of_machine(facts.machine)
    runs = f"{facts.machine} ({native or 'neither ' + ' nor '.join(platforms.PLATFORMS)})"
    if facts.page_size is None:
        return Check(name, OK, f"{runs}, memory page size not known")
    pages = f"{_kib(facts.page_size)} memory pages"
    if facts.page_size > SMALL_PAGE:
        return Check(
            name,
            WARN,
            f"{runs}, {pages}: programs built for 4 KiB pages (some jemalloc builds, among others) may crash here "
            "(GH200 machines' kernels may use 64 KiB pages)",
            f"run the images on a kernel with 4 KiB pages, or check that what they run works with {pages} "
            "(`torchimages test` runs the smoke suites here)",
        )
    return Check(name, OK, f"{runs}, {pages}")


def _qemu_major(version: str) -> int | None:
    found = re.search(r"\bversion (\d+)\.", version)
    return int(found.group(1)) if found else None


def check_emulation(facts: HostFacts, need: Needs) -> Check:
    """Images of a platform this machine does not run natively need its QEMU handler in binfmt_misc, enabled and
    with the F (fix-binary) flag, so that containers, which do not hold the interpreter, can use it."""
    name = "emulation"
    if need.host_only:
        return Check(name, SKIP, "--host-only: no containers")
    if facts.machine is None:
        return Check(name, SKIP, "not checked: this machine's architecture is not known")
    foreign = need.foreign_platforms(facts.machine)
    if not foreign:
        if not need.images:
            return Check(name, SKIP, "not needed: no images")
        return Check(
            name,
            SKIP,
            f"not needed: this {facts.machine} machine runs {platforms.words(need.platforms)} images natively",
        )
    what = f"{platforms.words(foreign)} images run under emulation on this {facts.machine} machine"
    needed = f"{platforms.words(foreign)} images need emulation on this {facts.machine} machine"
    if not facts.binfmt_mounted:
        return Check(name, FAIL, f"{needed}: binfmt_misc is not mounted on {BINFMT_DIR}", HOW_TO_EMULATE)
    registered = {h.name: h for h in facts.binfmt_handlers}
    problems, found = [], []
    for platform in foreign:
        handler = registered.get(emulator(platform))
        if handler is None:
            problems.append(f"no {emulator(platform)} handler is registered in {BINFMT_DIR}")
        elif not handler.enabled:
            problems.append(f"{handler.name} ({handler.interpreter}) is registered but disabled")
        elif "F" not in handler.flags:
            problems.append(
                f"{handler.name} ({handler.interpreter}) is registered without the F (fix-binary) flag "
                f"(flags: {handler.flags or 'none'}): containers, which do not hold its interpreter, cannot use it"
            )
        else:
            found.append(handler)
    if problems:
        return Check(name, FAIL, f"{needed}: {'; '.join(problems)}", HOW_TO_EMULATE)
    said = "; ".join(
        f"{h.name} enabled, interpreter {h.interpreter}, flags {h.flags}, "
        + (h.version or f"its version unknown ({h.version_error or 'no answer'})")
        for h in found
    )
    unknown = [h.name for h in found if not h.version]
    if unknown:
        return Check(
            name, WARN, f"{what}: {said}", f"{', '.join(unknown)}: its interpreter does not answer; {HOW_TO_EMULATE}"
        )
    old = [h.name for h in found if (_qemu_major(h.version or "") or OLD_QEMU) < OLD_QEMU]
    if old:
        return Check(
            name,
            WARN,
            f"{what}: {said}; a QEMU older than {OLD_QEMU} crashes in some packages' scripts "
            "(`qemu: uncaught target signal 11 (Segmentation fault)`, a known crash class of bookworm's 7.2)",
            f"install a QEMU of {OLD_QEMU} or newer for {', '.join(old)} (on Debian 12, `make emulation` as root "
            "installs trixie's)",
        )
    return Check(name, OK, f"{what}: {said}")


CHECKS: tuple[Callable[[HostFacts, Needs], Check], ...] = (
    check_engine,
    check_build_client,
    check_disk,
    check_registry_bases,
    check_bootstrap,
    check_driver,
    check_gpu_archs,
    check_container_toolkit,
    check_shm,
    check_infiniband,
    check_memlock,
    check_temp,
    check_machine,
    check_emulation,
)


def run_checks(facts: HostFacts, need: Needs) -> list[Check]:
    """Every check, in order."""
    return [check(facts, need) for check in CHECKS]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in text.split("."))
