"""Render one Dockerfile per combination from the Jinja2 templates: pure, byte-identical, all-or-nothing."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import jinja2

from . import compat
from .resolve import local_label
from .spec import LOCK_FILE, ImageSpec

DEFAULT_TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
ENTRY_TEMPLATE = "Dockerfile.j2"
# Where every image records the OS packages apt installed (`name=version` lines, dpkg-query).
OS_PACKAGES_FILE = PurePosixPath("/usr/share/torchimages/os-packages.txt")
# The toolkit image's NCCL would be a second copy beside the wheel's: devel purges it.
TOOLKIT_IMAGE_PURGE = ("libnccl2", "libnccl-dev")


@dataclass(frozen=True)
class Link:
    """A symlink the wheel toolkit needs (`name` -> `target`)."""

    name: str
    target: str


def template_fingerprint(templates: Path) -> str:
    """Hash of every template file: part of each image's input digest."""
    digest = hashlib.sha256()
    for path in sorted(templates.rglob("*.j2")):
        digest.update(path.relative_to(templates).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def wheel_cuda_home(spec: ImageSpec) -> str:
    """Where NVIDIA's cu13 wheels lay out bin/, include/ and lib/ inside the venv."""
    major = (spec.cuda or "").split(".")[0]
    return f"/opt/venv/lib/python{spec.python}/site-packages/nvidia/cu{major}"


def toolkit_links(spec: ImageSpec) -> list[Link]:
    """The CUDA_HOME layout build tools expect (lib64/, an unversioned libcudart.so) over the wheels'."""
    home = wheel_cuda_home(spec)
    major = (spec.cuda or "").split(".")[0]
    return [Link(f"{home}/lib64", "lib"), Link(f"{home}/lib/libcudart.so", f"libcudart.so.{major}")]


def requirements(spec: ImageSpec, kb: compat.KnowledgeBase | None = None) -> list[str]:
    """The pinned pip requirements of the venv, torch first.

    A variant PyPI does not serve under the plain version (cpu, a non-default CUDA build) is
    pinned with its local label (`torch==2.13.0+cpu`), so a build from the wrong index fails at
    once instead of installing another variant. torchaudio paired from an older release line
    (its last release) keeps a plain pin: that line may have no wheel for this variant.
    """
    label = local_label((kb or compat.load()).release(spec.torch), spec.variant)
    same_line = spec.torchaudio is not None and compat.minor_of(spec.torchaudio) == compat.minor_of(spec.torch)
    pins = [
        ("torch", spec.torch, label),
        ("torchvision", spec.torchvision, label),
        ("torchaudio", spec.torchaudio, label if same_line else ""),
        ("numpy", spec.numpy, ""),
    ]
    return [f"{name}=={version}{suffix}" for name, version, suffix in pins if version]


@dataclass(frozen=True)
class VenvLayer:
    """One RUN layer of the venv install.

    `kind`: `nvidia` (the nvidia-* libraries torch's resolution pins), `torch` (torch alone,
    no dependencies), `torch-deps` (torch's remaining dependencies), `rest` (companions, numpy).
    """

    kind: str
    requirements: tuple[str, ...]


def venv_layers(spec: ImageSpec, kb: compat.KnowledgeBase | None = None) -> list[VenvLayer]:
    """The venv install split into layers, biggest and least changing first; CPU has no nvidia layer."""
    torch, *rest = requirements(spec, kb)
    layers = [VenvLayer("nvidia", (torch,))] if spec.cuda else []
    layers += [VenvLayer("torch", (torch,)), VenvLayer("torch-deps", (torch,))]
    if rest:
        layers.append(VenvLayer("rest", tuple(rest)))
    return layers


def context(specs: list[ImageSpec]) -> dict[str, Any]:
    """The template's view of one combination (all its flavors)."""
    first = specs[0]
    by_flavor = {s.flavor: s for s in specs}
    cuda_home = wheel_cuda_home(first)
    return {
        "torch": first.torch,
        "python": first.python,
        "os": first.os.name,
        "cuda_text": f"CUDA {first.cuda}, cuDNN {first.cudnn}, NCCL {first.nccl}" if first.cuda else "CPU only",
        "flavors": list(by_flavor),
        "devel": "devel" in by_flavor,
        "runtime": "runtime" in by_flavor,
        "base_image": first.os.image,
        "packages": list(first.os.packages),
        "devel_packages": list(first.os.devel_packages),
        "os_packages_file": str(OS_PACKAGES_FILE),
        "os_packages_dir": str(OS_PACKAGES_FILE.parent),
        "toolkit_purge": list(TOOLKIT_IMAGE_PURGE),
        "index_url": first.index_url,
        "venv_pip": first.os.pip,
        "venv_layers": venv_layers(first),
        "lock": LOCK_FILE if first.lock else "",
        "toolkit": first.toolkit,
        "wheel_cuda_home": cuda_home,
        "toolkit_links": toolkit_links(first) if first.toolkit.source == "wheels" else [],
        "environment": first.environment(),
        "labels": {flavor: spec.labels() for flavor, spec in by_flavor.items()},
    }


def environment(templates: Path) -> jinja2.Environment:
    """A strict Jinja2 environment over the templates folder."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def group(specs: Iterable[ImageSpec]) -> dict[str, list[ImageSpec]]:
    """Specs by Dockerfile (one per combination), in plan order."""
    out: dict[str, list[ImageSpec]] = {}
    for spec in specs:
        out.setdefault(spec.dockerfile, []).append(spec)
    return out


def render_all(specs: Iterable[ImageSpec], templates: Path) -> dict[str, str]:
    """Dockerfile path (relative to images/) -> its text."""
    env = environment(templates)
    template = env.get_template(ENTRY_TEMPLATE)
    rendered = {}
    for path, members in group(specs).items():
        text = template.render(image=context(members))
        rendered[path] = "\n".join(line.rstrip() for line in text.splitlines()).strip() + "\n"
    return rendered


def stale(rendered: dict[str, str], images: Path) -> list[str]:
    """Paths whose file differs from the rendering, is missing, or is no longer generated."""
    changed = [p for p, text in rendered.items() if _read(images / p) != text]
    orphans = [
        p.relative_to(images).as_posix()
        for p in sorted(images.glob("*/Dockerfile"))
        if p.relative_to(images).as_posix() not in rendered
    ]
    return sorted(changed + orphans)


def write(rendered: dict[str, str], images: Path) -> list[str]:
    """Write the rendering (atomically per file), remove orphaned Dockerfiles; return what changed."""
    changed = stale(rendered, images)
    for rel in changed:
        target = images / rel
        if rel not in rendered:
            target.unlink()
            if not any(target.parent.iterdir()):
                target.parent.rmdir()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".Dockerfile.")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(rendered[rel])
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    return changed


def _read(path: Path) -> str | None:
    try:
        return path.read_text("utf-8")
    except FileNotFoundError:
        return None
