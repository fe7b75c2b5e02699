"""Render one Dockerfile per combination from the Jinja2 templates: pure, byte-identical, all-or-nothing."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import jinja2

from torchimages import platforms, textfile
from torchimages.combination import LOCK_FILE, Combination
from torchimages.problems import InputError, Problem

# Shipped inside the package (package data); the top-level templates/ is a symlink to this folder.
DEFAULT_TEMPLATES = Path(__file__).resolve().parent / "templates"
ENTRY_TEMPLATE = "Dockerfile.j2"
# The step scripts every Dockerfile's RUNs call: templates/steps/NAME.j2, rendered into the image's folder as
# steps/NAME (the build context's `steps`, bind-mounted by each RUN: in no layer).
STEPS_FOLDER = "steps"
# An image's LABEL lines, by topic. A line of a flavor's own labels (title and flavor, input digest, base) stands
# between lines both flavors share, so no run of three lines repeats between two stages of one Dockerfile. A
# label of no line here gets a line of its own, after the CUDA facts.
LABEL_LINES = (
    ("org.opencontainers.image.title", "io.torchimages.flavor"),
    (
        "io.torchimages.torch",
        "io.torchimages.torchvision",
        "io.torchimages.torchaudio",
        "io.torchimages.python",
        "io.torchimages.os",
        "org.opencontainers.image.version",
        "org.opencontainers.image.licenses",
    ),
    (
        "io.torchimages.cuda",
        "io.torchimages.cudnn",
        "io.torchimages.nccl",
        "io.torchimages.cuda.min-driver",
        "io.torchimages.cuda.archs",
    ),
    ("io.torchimages.input-digest",),
    ("org.opencontainers.image.description",),
    ("org.opencontainers.image.base.name",),
)
# Where every image records the OS packages apt installed (`name=version` lines, dpkg-query).
OS_PACKAGES_FILE = PurePosixPath("/usr/share/torchimages/os-packages.txt")
# The toolkit image's NCCL would be a second copy beside the wheel's: devel purges it.
TOOLKIT_IMAGE_PURGE = ("libnccl2", "libnccl-dev")
# NVIDIA's libraries in layers of whole wheel families (`nvidia-<family>`, with or without a -cuXX suffix), largest
# first, then a last layer of every other nvidia-* pin; one wheel is never split. Installed sizes per CUDA line
# (docs/explanation/how-a-build-works.md, literal in tests/unit/test_nvidia_layers.py): cuDNN 0.97-1.4 GB, cuBLAS
# 0.6-0.9 GB, the third group 0.5-1.2 GB, the fourth 0.2-0.8 GB, the rest 0.3-0.8 GB.
NVIDIA_GROUPS = (("cudnn",), ("cublas",), ("nccl", "nvshmem", "curand", "cufft"), ("cusparse", "cusparselt"))


@dataclass(frozen=True)
class Link:
    """A symlink the wheel toolkit needs (`name` -> `target`)."""

    name: str
    target: str


def template_fingerprint(templates: Path) -> str:
    """Hash of every template file and of the nvidia-* layer groups they render: part of each image's input
    digest."""
    if not (templates / ENTRY_TEMPLATE).is_file():
        raise FileNotFoundError(f"no {ENTRY_TEMPLATE} in the templates folder {templates}")
    digest = hashlib.sha256(repr(NVIDIA_GROUPS).encode() + b"\0")
    for path in sorted(templates.rglob("*.j2")):
        digest.update(path.relative_to(templates).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def wheel_cuda_home(combination: Combination) -> str:
    """Where NVIDIA's cu13 wheels lay out bin/, include/ and lib/ inside the venv."""
    major = (combination.cuda or "").split(".")[0]
    return f"/opt/venv/lib/python{combination.python}/site-packages/nvidia/cu{major}"


def toolkit_links(combination: Combination) -> list[Link]:
    """The CUDA_HOME layout build tools expect (lib64/, an unversioned libcudart.so) over the wheels'."""
    home = wheel_cuda_home(combination)
    major = (combination.cuda or "").split(".")[0]
    return [Link(f"{home}/lib64", "lib"), Link(f"{home}/lib/libcudart.so", f"libcudart.so.{major}")]


@dataclass(frozen=True)
class NvidiaGroup:
    """One layer of NVIDIA's libraries: the nvidia-* pins of these wheel `families` (steps/venv.sh's `nvidia`), or
    with `rest`, every nvidia-* pin of none of them (the groups before: `nvidia-rest`)."""

    name: str
    families: tuple[str, ...]
    rest: bool = False


def nvidia_groups(groups: tuple[tuple[str, ...], ...] = NVIDIA_GROUPS) -> list[NvidiaGroup]:
    """The nvidia-* layers: one per group of families, then the rest."""
    every = tuple(family for group in groups for family in group)
    return [NvidiaGroup(", ".join(group), group) for group in groups] + [
        NvidiaGroup("other libraries (every other nvidia-* pin)", every, rest=True)
    ]


def requirements(combination: Combination) -> list[str]:
    """The pinned pip requirements of the venv, torch first."""
    return list(combination.pins)


@dataclass(frozen=True)
class VenvLayer:
    """One RUN layer of the venv install.

    `kind`: `nvidia` (the nvidia-* libraries torch's resolution pins), `torch` (torch alone,
    no dependencies), `torch-deps` (torch's remaining dependencies), `rest` (companions, numpy).
    """

    kind: str
    requirements: tuple[str, ...]
    # (arch, requirements) of each platform where they differ between the platforms (the Dockerfile chooses them by
    # BuildKit's TARGETARCH); empty where every platform installs `requirements`.
    by_arch: tuple[tuple[str, tuple[str, ...]], ...] = ()


def _layers(pins: tuple[str, ...], cuda: bool) -> list[VenvLayer]:
    torch, *rest = pins
    layers = [VenvLayer("nvidia", (torch,))] if cuda else []
    layers += [VenvLayer("torch", (torch,)), VenvLayer("torch-deps", (torch,))]
    if rest:
        layers.append(VenvLayer("rest", tuple(rest)))
    return layers


def venv_layers(combination: Combination) -> list[VenvLayer]:
    """The venv install split into layers, biggest and least changing first; CPU has no nvidia layer.

    Each layer's command names only what it installs, so a change above leaves the layers below cached
    and byte-identical. Where platforms install other pins (PyPI's plain versions), a layer names each one's.
    """
    first = combination.pins_for(combination.platforms[0])
    layers = _layers(first, bool(combination.cuda))
    if len({combination.pins_for(p) for p in combination.platforms}) == 1:
        return layers
    each = {platforms.arch(p): _layers(combination.pins_for(p), bool(combination.cuda)) for p in combination.platforms}
    return [
        VenvLayer(layer.kind, layer.requirements, tuple((arch, mine[n].requirements) for arch, mine in each.items()))
        if len({mine[n].requirements for mine in each.values()}) > 1
        else layer
        for n, layer in enumerate(layers)
    ]


def base_image(combination: Combination) -> str:
    """What the runtime stage starts FROM: a bootstrapped base of each platform is its own local image
    (`<image>-<arch>`), chosen by BuildKit's TARGETARCH, where the combination is built for more than linux/amd64."""
    if combination.multi_platform and combination.os.provider == "bootstrap":
        return f"{combination.os.image}-${{TARGETARCH}}"
    return combination.os.image


def index_by_arch(combination: Combination) -> list[tuple[str, str]]:
    """(arch, wheel index) of each platform, where the platforms' indexes differ; else empty."""
    found = [(platforms.arch(p), combination.index_url_for(p)) for p in combination.platforms]
    return found if len({url for _, url in found}) > 1 else []


def label_lines(labels: dict[str, str], inherited: dict[str, str] | None = None) -> list[list[tuple[str, str]]]:
    """The LABEL instruction's lines (LABEL_LINES' order; empty lines left out). `inherited`: the labels of the
    stage this one is built FROM (devel on runtime): only those whose value differs are written."""
    if inherited is not None and not set(inherited) <= set(labels):
        raise ValueError(f"labels of the parent stage the image must not have: {sorted(set(inherited) - set(labels))}")
    wanted = {k: v for k, v in labels.items() if inherited is None or inherited.get(k) != v}
    placed = {name for line in LABEL_LINES for name in line}
    lines = [[(name, wanted[name]) for name in line if name in wanted] for line in LABEL_LINES]
    lines[3:3] = [[(name, wanted[name])] for name in sorted(set(wanted) - placed)]
    return [line for line in lines if line]


def index_text(combination: Combination) -> str:
    """Where the venv's wheels come from, as the Dockerfile's comment says it."""
    by_arch = index_by_arch(combination)
    if not by_arch:
        return combination.index_url_for(combination.platforms[0])
    return ", ".join(f"{url} ({arch})" for arch, url in by_arch)


def context(combination: Combination) -> dict[str, Any]:
    """The template's view of one combination (all its flavors)."""
    c = combination
    return {
        "torch": c.torch,
        "python": c.python,
        "os": c.os.name,
        "cuda_text": f"CUDA {c.cuda}, cuDNN {c.cudnn}, NCCL {c.nccl}" if c.cuda else "CPU only",
        "flavors": list(c.flavors),
        "devel": "devel" in c.flavors,
        "runtime": "runtime" in c.flavors,
        "base_image": base_image(c),
        # TARGETARCH is declared in each stage (its platform's pins, index and base) where several are built.
        "multi_platform": c.multi_platform,
        "index_by_arch": index_by_arch(c),
        "packages": list(c.os.packages),
        "devel_packages": list(c.os.devel_packages),
        "os_packages_file": str(OS_PACKAGES_FILE),
        "os_packages_dir": str(OS_PACKAGES_FILE.parent),
        "toolkit_purge": list(TOOLKIT_IMAGE_PURGE),
        "index_url": c.index_url_for(c.platforms[0]),  # where index_by_arch is empty, every platform's
        "venv_pip": c.os.pip,
        # Python before 3.12 puts setuptools in a new venv: it is brought up to date (the lock's pin) in the
        # venv's own layer, so no later layer replaces it (a replaced file is a whiteout, no reproducible layer).
        "venv_setuptools": tuple(map(int, c.python.split("."))) < (3, 12),
        "source_date_epoch": c.source_date_epoch,
        "uv": c.installer,
        "venv_layers": venv_layers(c),
        "nvidia_groups": nvidia_groups(),
        "lock": LOCK_FILE if c.lock_digest else "",
        "toolkit": c.toolkit,
        "wheel_cuda_home": wheel_cuda_home(c),
        "toolkit_links": toolkit_links(c) if c.toolkit.provider == "wheels" else [],
        "environment": c.nvidia_environment(),
        # Each flavor's labels as its first platform's image has them (linux/amd64 where it is built for it).
        "labels": {flavor: c.image(flavor).label_map() for flavor in c.flavors},
        "label_lines": {
            flavor: label_lines(
                c.image(flavor).label_map(),
                c.image("runtime").label_map() if flavor == "devel" and c.toolkit.provider != "image" else None,
            )
            for flavor in c.flavors
        },
        "index_text": index_text(c),
    }


def jinja_environment(templates: Path) -> jinja2.Environment:
    """A strict Jinja2 environment over the templates folder."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def step_templates(templates: Path) -> list[str]:
    """The step scripts' template names (`steps/NAME.j2`), sorted."""
    return sorted(f"{STEPS_FOLDER}/{p.name}" for p in (templates / STEPS_FOLDER).glob("*.j2"))


def _tidy(text: str) -> str:
    """A rendering's text without trailing blanks on its lines or blank lines around it, ending in a newline."""
    return "\n".join(line.rstrip() for line in text.splitlines()).strip() + "\n"


def render_all(combinations: Iterable[Combination], templates: Path) -> dict[str, str]:
    """Generated path (relative to images/) -> its text: each combination's Dockerfile and its steps/ scripts."""
    environment = jinja_environment(templates)
    template = environment.get_template(ENTRY_TEMPLATE)
    steps = [(name.removesuffix(".j2"), environment.get_template(name)) for name in step_templates(templates)]
    rendered = {}
    for combination in combinations:
        image = context(combination)
        rendered[combination.dockerfile] = _tidy(template.render(image=image))
        for name, step in steps:
            rendered[f"{combination.folder}/{name}"] = _tidy(step.render(image=image))
    return rendered


def dockerfiles(rendered: dict[str, str]) -> dict[str, str]:
    """The Dockerfiles of a rendering (`render_all`), without the step scripts."""
    return {path: text for path, text in rendered.items() if path.endswith("/Dockerfile")}


def _generated(images: Path) -> list[Path]:
    """The files of images/ that rendering makes: Dockerfiles and step scripts."""
    return sorted([*images.glob("*/Dockerfile"), *images.glob(f"*/{STEPS_FOLDER}/*")])


def links(images: Path) -> list[Path]:
    """Every symbolic link in `images` (the folder itself, its folders and files, dangling ones too), sorted;
    none is followed, so a linked folder's contents are not looked at."""
    if images.is_symlink():
        return [images]
    found: list[Path] = []
    for folder, folders, files in os.walk(images):  # os.walk follows no link to a folder
        found += [Path(folder, name) for name in [*folders, *files] if os.path.islink(os.path.join(folder, name))]
    return sorted(found)


def refuse_links(images: Path) -> None:
    """InputError naming each symbolic link in `images`: rendering writes and compares only the tree's own files
    (a link would have a write land, or a check look, outside it)."""
    found = links(images)
    if found:
        raise InputError(
            [
                Problem(
                    f"a symbolic link (to {_target(path)}) in the images folder: render follows no link; "
                    "replace it with the file or folder itself, or remove it",
                    file=str(path),
                )
                for path in found
            ]
        )


def _target(link: Path) -> str:
    """Where a link points, quoted (one line whatever it holds)."""
    try:
        return repr(os.readlink(link))
    except OSError as exc:  # removed or replaced since it was found
        return f"unreadable: {exc.strerror}"


def stale(rendered: dict[str, str], images: Path) -> list[str]:
    """Paths whose file differs from the rendering, is missing, or is no longer generated; InputError when
    `images` holds a symbolic link (refuse_links)."""
    refuse_links(images)
    changed = [p for p, text in rendered.items() if _read(images / p) != text.encode()]
    orphans = [
        p.relative_to(images).as_posix()
        for p in _generated(images)
        if p.relative_to(images).as_posix() not in rendered and _read(p) is not None  # a folder is not removed
    ]
    return sorted(changed + orphans)


def write(rendered: dict[str, str], images: Path) -> list[str]:
    """Write the rendering (atomically per file), remove orphaned Dockerfiles; return what changed. Everything is
    checked before the first write: a symbolic link anywhere in `images` (refuse_links), a generated path that is
    no regular file (`_read`), and nothing is written."""
    changed = stale(rendered, images)
    for rel in changed:
        target = images / rel
        if rel not in rendered:
            target.unlink()
            for folder in (
                (target.parent, target.parent.parent) if target.parent.name == STEPS_FOLDER else (target.parent,)
            ):
                if folder != images and not any(folder.iterdir()):
                    folder.rmdir()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        textfile.write_atomically(target, rendered[rel])
    return changed


def _read(path: Path) -> bytes | None:
    """A generated file's bytes (None when there is none): a regular file, else InputError naming it (it
    would not be replaced, or would hang a read); any bytes, since a stale one is rewritten whole."""
    try:
        what = "a rendered step script" if path.parent.name == STEPS_FOLDER else "a rendered Dockerfile"
        return textfile.read_bytes(path, what)
    except textfile.Missing:
        return None
