"""The compatibility knowledge base: which torch shipped with what, and what each part needs."""

from __future__ import annotations

import datetime
import functools
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml

from torchimages import archs as arch_rules
from torchimages import platforms

UNCERTAIN = "U"  # confidence of a fact: V verified, S secondary source, U uncertain
CONFIDENCES = ("V", "S", UNCERTAIN)
# Where a platform's wheels of a build come from: PyPI (under the plain version: PyPI refuses local labels such
# as `+cu128`) or PyTorch's own index of that build (index_url_template).
WHEEL_INDEXES = ("pypi", "pytorch")
PYPI_INDEX_URL = "https://pypi.org/simple"


@dataclass(frozen=True)
class Variant:
    """One build of a torch release: `cpu` or a CUDA build such as `cu118`."""

    name: str
    cudnn: str | None
    nccl: str | None
    cuda_toolkit: str | None
    uncertain: bool

    @property
    def cuda(self) -> str | None:
        """The CUDA version (`11.8`) of a `cuXYZ` variant, None for `cpu`."""
        return variant_cuda(self.name)


@dataclass(frozen=True)
class PlatformWheel:
    """A build (`variant`) of a torch release that has wheels for a platform other than linux/amd64, and the index
    known to serve them (`pypi` or `pytorch`, see WHEEL_INDEXES)."""

    variant: str
    index: str
    confidence: str
    sources: tuple[str, ...]

    @property
    def uncertain(self) -> bool:
        """Whether the knowledge base holds this fact as uncertain (the validator warns instead of refusing)."""
        return self.confidence == UNCERTAIN


@dataclass(frozen=True)
class TorchRelease:
    """One torch minor release line and what was published for it."""

    minor: str
    patches: tuple[str, ...]
    python: tuple[str, ...]
    uncertain_python: tuple[str, ...]
    pypi_default: str
    variants: dict[str, Variant]
    torchvision: dict[str, str]
    torchaudio: dict[str, str]
    confidence: str
    uncertain: tuple[str, ...]
    sources: tuple[str, ...]
    # platform (`linux/arm64`) -> the builds with wheels for it; linux/amd64's are `variants` themselves.
    platforms: dict[str, dict[str, PlatformWheel]] = field(default_factory=dict)

    def wheels_for(self, platform: str) -> dict[str, PlatformWheel] | None:
        """The builds known to have wheels for `platform` (None: linux/amd64, where every variant has them)."""
        return None if platform == platforms.DEFAULT else self.platforms.get(platform, {})

    def is_uncertain(self, path: str) -> bool:
        """Whether the fact at a dotted path (`variants.cu126.nccl`) is uncertain."""
        if self.confidence == UNCERTAIN:
            return True
        return any(path == u or path.startswith(u + ".") for u in self.uncertain)

    @property
    def cuda_variants(self) -> list[str]:
        """CUDA versions published for this release, oldest first."""
        found = [v.cuda for v in self.variants.values() if v.cuda]
        return sorted(found, key=version_key)


@dataclass(frozen=True)
class CudaToolkit:
    """Facts about one CUDA minor version."""

    version: str
    image_release: str
    min_driver: str
    minor_compat_min_driver: str
    ubuntu: tuple[str, ...]
    arch_list: str
    nvcc_wheels: bool  # NVIDIA's nvcc wheels of this CUDA hold nvcc and cicc (else only ptxas)
    confidence: str


@dataclass(frozen=True)
class Archive:
    """How a base is made from a distribution's archive (mmdebstrap): the local name it is imported under, the
    suite, and the apt sources of the official image (empty: mmdebstrap's defaults, as for debian12)."""

    image: str  # `torchimages/bootstrap-ubuntu:24.04`
    suite: str  # `noble`
    suites: tuple[str, ...] = ()  # the sources' suites (`noble`, `noble-updates`, ...)
    components: tuple[str, ...] = ()
    keyring: str = ""  # the keyring that verifies the archive ("": mmdebstrap's)
    include: tuple[str, ...] = ()  # packages added to minbase
    mirror: tuple[tuple[str, str], ...] = ()  # (architecture, URL) of the archive
    security: tuple[tuple[str, str], ...] = ()  # (architecture, URL) the `-security` suite comes from

    def reference(self, arch: str, multi_platform: bool) -> str:
        """The local name of the base for `arch`: the image itself, or its architecture's (`<image>-<arch>`:
        TARGETARCH chooses it) where a Dockerfile is for several platforms."""
        return f"{self.image}-{arch}" if multi_platform else self.image

    def sources(self, arch: str, mirror: str | None) -> tuple[str, ...]:
        """The sources.list lines mmdebstrap is given for `arch`: `mirror` (a URL, or a whole line kept as it is)
        replaces the archive's URLs; none at all where the archive names no suites (mmdebstrap's defaults)."""
        if mirror and mirror.split()[0] in ("deb", "deb-src"):
            return (mirror,)
        if not self.suites:
            return (mirror,) if mirror else ()
        archive, security = dict(self.mirror).get(arch, ""), dict(self.security).get(arch, "")
        components = " ".join(self.components)
        lines = []
        for suite in self.suites:
            url = mirror or (security if suite.endswith("-security") and security else archive)
            lines.append(f"deb {url} {suite} {components}".rstrip())
        return tuple(lines)


@dataclass(frozen=True)
class OsRelease:
    """An operating system images are built on, and how its base image is obtained."""

    name: str
    provider: str
    image: str
    python: str
    packages: tuple[str, ...]  # apt package names (never versions) for every image
    devel_packages: tuple[str, ...]  # apt package names devel adds
    suite: str
    confidence: str
    sources: tuple[str, ...]
    pip: str = ""  # the pip the venv is upgraded to before installing ("" keeps the OS's)
    # How a bootstrapped base is made: a bootstrap OS's own, or a registry OS's under `--bases bootstrap`
    # (None: it cannot be bootstrapped). Not a build input: it never changes a rendered Dockerfile.
    archive: Archive | None = None

    @property
    def family(self) -> str:
        """The distribution (`ubuntu`, `debian`)."""
        return self.name.rstrip("0123456789.")

    @property
    def version(self) -> str:
        """The distribution release (`22.04`, `12`)."""
        return self.name[len(self.family) :]


@dataclass(frozen=True)
class Installer:
    """The uv that installs every venv at build time (never part of an image): its version and the sha256 of
    the wheels pip may fetch it as (`--require-hashes`)."""

    version: str
    sha256: tuple[str, ...]


@dataclass(frozen=True)
class BaseImageEol:
    """Registry base tags (`image`, a glob) their publisher removed (`gone`) or will remove (`going`)."""

    image: str
    status: str
    reason: str
    replacement: str
    sources: tuple[str, ...]


EOL_STATUSES = ("gone", "going")


@dataclass(frozen=True)
class GpuThroughput:
    """What the GPU suite's throughput probe gave on one GPU model (`reference`, with when and how it was
    `measured`), and the `floors` under which a figure fails (only where the probe's shapes were measured)."""

    model: str  # nvidia-smi's and torch's name of the GPU: "NVIDIA H200"
    reference: dict[str, float]
    floors: dict[str, float]
    measured: str
    sources: tuple[str, ...]


@dataclass(frozen=True)
class CudaArchsFact:
    """The GPU architectures a CUDA build of some torch minors holds (`cuda_archs` in compat.yaml): its label text
    (`sm_75 ... sm_120 compute_120`), confidence and sources."""

    torch: tuple[str, ...]  # the torch minors it holds for
    archs: str
    confidence: str
    sources: tuple[str, ...]

    @property
    def uncertain(self) -> bool:
        """Whether the knowledge base holds it as uncertain (no label then: verification only reports the reading)."""
        return self.confidence == UNCERTAIN


@dataclass(frozen=True)
class KnowledgeBase:
    """All facts, indexed for lookup."""

    torch: dict[str, TorchRelease]
    cuda: dict[str, CudaToolkit]
    os: dict[str, OsRelease]
    sources: dict[str, str]
    index_url_template: str
    torchaudio_last_release: str
    devel_pip: dict[str, str]
    numpy: dict[str, str]
    installer: Installer
    base_image_eol: tuple[BaseImageEol, ...] = ()
    source_date: str = "1970-01-01"  # the images' SOURCE_DATE_EPOCH, as a UTC date (see compat.yaml)
    throughput: dict[str, GpuThroughput] = field(default_factory=dict)  # by GPU model
    # platform -> build (`cu130`) -> the architecture facts of that build, by torch minor
    cuda_archs: dict[str, dict[str, tuple[CudaArchsFact, ...]]] = field(default_factory=dict)

    @property
    def source_date_epoch(self) -> int:
        """`source_date` as seconds since the epoch (midnight UTC)."""
        day = datetime.date.fromisoformat(self.source_date)
        return int(datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC).timestamp())

    def release(self, torch_version: str) -> TorchRelease | None:
        """The release line a full torch version belongs to."""
        return self.torch.get(minor_of(torch_version))

    def archs_of(self, torch_version: str, variant: str, platform: str) -> CudaArchsFact | None:
        """The GPU architectures the `variant` build of a torch release holds on `platform` (None: not known)."""
        minor = minor_of(torch_version)
        facts = self.cuda_archs.get(platform, {}).get(variant, ())
        return next((fact for fact in facts if minor in fact.torch), None)

    def settling_index(self, release: TorchRelease, variant: str) -> str:
        """The index whose wheel metadata would settle an uncertain fact of a build (`torchimages kb sync --index`):
        PyPI for the release's default build (PyPI serves it under the plain version), else PyTorch's index of it."""
        return PYPI_INDEX_URL if variant == release.pypi_default else self.index_url_template.format(variant=variant)

    def settled_by(self, release: TorchRelease, variant: str, fact: str, torch: str) -> str:
        """What `validate` says of an uncertain fact (`variants.cu126.nccl`): the index that would settle it."""
        index = self.settling_index(release, variant)
        return f"{fact} of {release.minor}: {index} would settle it, `kb sync --index {index} --release {torch}`"

    def wheel_index_url(self, wheel: PlatformWheel) -> str:
        """The index a platform's wheels of a build come from."""
        return PYPI_INDEX_URL if wheel.index == "pypi" else self.index_url_template.format(variant=wheel.variant)


def version_key(version: str) -> tuple[int, ...]:
    """Sort key for dotted versions; non-numeric parts sort first."""
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


def minor_of(version: str) -> str:
    """`2.7.1` -> `2.7`."""
    return ".".join(version.split(".")[:2])


def variant_cuda(variant: str) -> str | None:
    """`cu118` -> `11.8`, `cu130` -> `13.0`; None for `cpu`."""
    if not variant.startswith("cu"):
        return None
    digits = variant[2:]
    return f"{digits[:-1]}.{digits[-1]}"


def cuda_variant(cuda: str) -> str:
    """`11.8` -> `cu118`; `cpu` stays `cpu`."""
    return "cpu" if cuda == "cpu" else "cu" + cuda.replace(".", "")


def _strings(values: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in values or ())


def _release(minor: str, raw: dict[str, Any], sources: dict[str, str]) -> TorchRelease:
    uncertain = _strings(raw.get("uncertain"))
    variants = {
        name: Variant(
            name=name,
            cudnn=facts.get("cudnn"),
            nccl=facts.get("nccl"),
            cuda_toolkit=facts.get("cuda_toolkit"),
            uncertain=raw.get("confidence") == UNCERTAIN or f"variants.{name}" in uncertain,
        )
        for name, facts in raw["variants"].items()
    }
    return TorchRelease(
        minor=minor,
        patches=_strings(raw["patches"]),
        python=_strings(raw["python"]),
        uncertain_python=_strings(raw.get("uncertain_python")),
        pypi_default=raw["pypi_default"],
        variants=variants,
        torchvision=dict(raw.get("torchvision") or {}),
        torchaudio=dict(raw.get("torchaudio") or {}),
        confidence=raw["confidence"],
        uncertain=uncertain,
        sources=_strings(raw.get("sources")),
        platforms=_platform_wheels(minor, raw.get("platforms") or {}, variants, sources),
    )


def _platform_wheels(
    minor: str, raw: dict[str, Any], variants: dict[str, Variant], sources: dict[str, str]
) -> dict[str, dict[str, PlatformWheel]]:
    """`platforms:` of a torch release: for each platform but linux/amd64 (whose builds are `variants`), the
    builds with wheels for it, each a published variant with a known index, a confidence and known sources."""
    out: dict[str, dict[str, PlatformWheel]] = {}
    if not isinstance(raw, dict):
        raise ValueError(f"torch.{minor}.platforms: a mapping of platform (linux/arm64) to its builds")
    for platform, builds in raw.items():
        where = f"torch.{minor}.platforms.{platform}"
        if platform not in platforms.PLATFORMS or platform == platforms.DEFAULT:
            others = ", ".join(p for p in platforms.PLATFORMS if p != platforms.DEFAULT)
            raise ValueError(f"{where}: a platform is one of {others} ({platforms.DEFAULT}'s builds are `variants`)")
        out[platform] = {}
        if not isinstance(builds, dict):
            raise ValueError(f"{where}: a mapping of build (cu128, cpu) to its wheel facts")
        for variant, facts in builds.items():
            if not isinstance(facts, dict):
                raise ValueError(f"{where}.{variant}: a mapping such as {{index: pypi, confidence: V, sources: [...]}}")
            wheel = PlatformWheel(
                variant=str(variant),
                index=str(facts.get("index")),
                confidence=str(facts.get("confidence")),
                sources=_strings(facts.get("sources")),
            )
            if wheel.variant not in variants:
                raise ValueError(f"{where}.{variant}: not a variant of torch {minor} (list it under `variants` first)")
            if wheel.index not in WHEEL_INDEXES:
                raise ValueError(f"{where}.{variant}: index is {' or '.join(WHEEL_INDEXES)}, not {wheel.index}")
            if wheel.confidence not in CONFIDENCES:
                raise ValueError(f"{where}.{variant}: confidence is {', '.join(CONFIDENCES)}, not {wheel.confidence}")
            if not wheel.sources or any(s not in sources for s in wheel.sources):
                raise ValueError(f"{where}.{variant}: name its sources (keys of `sources`)")
            out[platform][wheel.variant] = wheel
    return out


def _os(name: str, raw: dict[str, Any]) -> OsRelease:
    return OsRelease(
        name=name,
        provider=raw["provider"],
        image=raw["image"],
        python=str(raw["python"]),
        packages=_names(name, "packages", raw.get("packages")),
        devel_packages=_names(name, "devel_packages", raw.get("devel_packages")),
        suite=raw.get("suite", ""),
        confidence=raw["confidence"],
        sources=_strings(raw.get("sources")),
        pip=str(raw.get("pip") or ""),
        archive=_archive(name, raw),
    )


def _archive(name: str, raw: dict[str, Any]) -> Archive | None:
    """A registry OS's `archive` mapping; a bootstrap OS's own image and suite (mmdebstrap's defaults)."""
    found = raw.get("archive")
    if found is None:
        return Archive(raw["image"], raw.get("suite", "")) if raw["provider"] == "bootstrap" else None
    if not isinstance(found, dict) or not found.get("image") or not found.get("suite"):
        raise ValueError(f"os.{name}.archive: a mapping with at least `image` and `suite`")

    def by_arch(key: str) -> tuple[tuple[str, str], ...]:
        value = found.get(key) or {}
        if not isinstance(value, dict):
            raise ValueError(f"os.{name}.archive.{key}: a mapping of architecture to URL")
        return tuple((str(k), str(v)) for k, v in value.items())

    return Archive(
        image=str(found["image"]),
        suite=str(found["suite"]),
        suites=_strings(found.get("suites")),
        components=_strings(found.get("components")),
        keyring=str(found.get("keyring") or ""),
        include=_strings(found.get("include")),
        mirror=by_arch("mirror"),
        security=by_arch("security"),
    )


def _names(os: str, key: str, values: Any) -> tuple[str, ...]:
    """OS package names; a version (a mapping, or `name=version`) is refused: nobody verifies it."""
    if isinstance(values, dict) or any("=" in str(v) for v in values or ()):
        raise ValueError(f"os.{os}.{key}: list package names only, no versions (archives drop them)")
    return _strings(values)


def parse(raw: dict[str, Any]) -> KnowledgeBase:
    """Build the knowledge base from its YAML document."""
    return KnowledgeBase(
        torch={minor: _release(minor, r, raw["sources"]) for minor, r in raw["torch"].items()},
        cuda={str(version): _cuda(str(version), c) for version, c in raw["cuda"].items()},
        os={name: _os(name, o) for name, o in raw["os"].items()},
        sources=dict(raw["sources"]),
        index_url_template=raw["index_url_template"],
        torchaudio_last_release=raw["torchaudio_last_release"],
        devel_pip=dict(raw.get("devel_pip") or {}),
        numpy={str(k): str(v) for k, v in (raw.get("numpy") or {}).items()},
        installer=_installer(raw["uv"], raw["sources"]),
        base_image_eol=tuple(_eol(entry, raw["sources"]) for entry in raw.get("base_image_eol") or ()),
        source_date=str(raw["source_date"]),
        throughput={str(m): _throughput(str(m), e, raw["sources"]) for m, e in (raw.get("throughput") or {}).items()},
        cuda_archs=_cuda_archs(raw.get("cuda_archs") or {}, raw["sources"]),
    )


def _cuda_archs(raw: dict[str, Any], sources: dict[str, str]) -> dict[str, dict[str, tuple[CudaArchsFact, ...]]]:
    """`cuda_archs`: platform -> build -> entries, each naming its torch minors (each at most once per build), a
    valid architecture list (archs.parse_archs, written as its label writes it), a confidence and known sources."""
    found: dict[str, dict[str, tuple[CudaArchsFact, ...]]] = {}
    for platform, builds in raw.items():
        for build, entries in (builds or {}).items():
            where = f"cuda_archs.{platform}.{build}"
            facts = tuple(
                CudaArchsFact(
                    torch=_strings(e.get("torch")),
                    archs=str(e.get("archs", "")),
                    confidence=str(e.get("confidence", "")),
                    sources=_strings(e.get("sources")),
                )
                for e in entries
            )
            minors = [m for fact in facts for m in fact.torch]
            if len(minors) != len(set(minors)):
                raise ValueError(f"{where}: a torch minor is listed twice")
            for fact in facts:
                try:
                    label = arch_rules.parse_archs(fact.archs).label
                except arch_rules.ArchError as exc:
                    raise ValueError(f"{where}: {exc}") from exc
                if label != fact.archs:
                    raise ValueError(f"{where}: write {fact.archs!r} as {label!r} (sorted, sm_ before compute_)")
                if not fact.torch or fact.confidence not in CONFIDENCES:
                    raise ValueError(f"{where}: each entry names its torch minors and a confidence (V, S or U)")
                if not fact.sources or any(s not in sources for s in fact.sources):
                    raise ValueError(f"{where}: name its sources (keys of `sources`)")
            found.setdefault(str(platform), {})[str(build)] = facts
    return found


def _cuda(version: str, raw: dict[str, Any]) -> CudaToolkit:
    """One CUDA minor's facts; `nvcc_wheels` must say, as true or false, whether its nvcc wheels hold nvcc."""
    nvcc_wheels = raw.get("nvcc_wheels")
    if not isinstance(nvcc_wheels, bool):
        found = "missing" if nvcc_wheels is None else f"{nvcc_wheels!r} is not true or false"
        raise ValueError(
            f"cuda.{version}.nvcc_wheels: {found}: say whether NVIDIA's nvcc wheels of CUDA {version} hold nvcc "
            "(true) or only ptxas (false)"
        )
    facts = {k: v for k, v in raw.items() if k not in ("ubuntu", "nvcc_wheels")}
    return CudaToolkit(version=version, ubuntu=_strings(raw["ubuntu"]), nvcc_wheels=nvcc_wheels, **facts)


def _throughput(model: str, raw: dict[str, Any], sources: dict[str, str]) -> GpuThroughput:
    """One GPU model's figures: numbers, a floor only for a figure with a reference, known sources."""
    entry = GpuThroughput(
        model=model,
        reference={str(k): float(v) for k, v in (raw.get("reference") or {}).items()},
        floors={str(k): float(v) for k, v in (raw.get("floors") or {}).items()},
        measured=str(raw.get("measured") or ""),
        sources=_strings(raw.get("sources")),
    )
    if any(name not in entry.reference for name in entry.floors):
        raise ValueError(f"throughput {model}: a floor needs the reference figure it was set from")
    if not entry.measured or not entry.sources or any(s not in sources for s in entry.sources):
        raise ValueError(f"throughput {model}: say when and how it was measured, and name its sources")
    return entry


def _installer(raw: dict[str, Any], sources: dict[str, str]) -> Installer:
    """uv's entry: an exact version, at least one wheel hash (64 hex digits), known sources."""
    installer = Installer(version=str(raw["version"]), sha256=_strings(raw.get("sha256")))
    if not re.fullmatch(r"\d+(\.\d+)+", installer.version):
        raise ValueError(f"uv.version: an exact version such as 0.13.8, not {installer.version!r}")
    if not installer.sha256 or not all(re.fullmatch(r"[0-9a-f]{64}", h) for h in installer.sha256):
        raise ValueError("uv.sha256: list the sha256 (64 lowercase hex digits) of each Linux wheel pip may fetch")
    if not raw.get("sources") or any(s not in sources for s in raw["sources"]):
        raise ValueError("uv: name its sources (keys of `sources`)")
    return installer


def _eol(raw: dict[str, Any], sources: dict[str, str]) -> BaseImageEol:
    """One end-of-life entry; it must name a known status and at least one known source."""
    entry = BaseImageEol(
        image=str(raw["image"]),
        status=str(raw["status"]),
        reason=str(raw["reason"]),
        replacement=str(raw["replacement"]),
        sources=_strings(raw.get("sources")),
    )
    if entry.status not in EOL_STATUSES:
        raise ValueError(f"base_image_eol {entry.image}: status is {' or '.join(EOL_STATUSES)}, not {entry.status}")
    if not entry.sources or any(s not in sources for s in entry.sources):
        raise ValueError(f"base_image_eol {entry.image}: name its sources (keys of `sources`)")
    return entry


def data_text() -> str:
    """The knowledge base file's text (part of every image's input digest)."""
    return resources.files("torchimages").joinpath("data/compat.yaml").read_text("utf-8")


@functools.cache
def load() -> KnowledgeBase:
    """The knowledge base shipped with the package."""
    return parse(yaml.safe_load(data_text()))
