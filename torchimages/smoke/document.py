"""The spec document the smoke suites compare an image (or host) against: SPEC.json, its
validation (`load_spec`), and how it is written from a planned image or from a host's facts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from torchimages import textfile
from torchimages.problems import InputError
from torchimages.versions import COMPANIONS, FACTS, decode_facts, public_version

if TYPE_CHECKING:
    from torchimages.combination import Combination, Image

IMAGE_USER = "torch"
FLAVORS = ("devel", "runtime")
_VERSION = re.compile(r"^\d+(\.\d+)*$")
_COMPANION_VERSION = re.compile(r"^\d+(\.\d+)*(\+[A-Za-z0-9.]+)?$")  # 2.11.1+cu130: the label names the build
_OPTIONAL_VERSIONS = (
    "torchvision",
    "torchaudio",
    "cuda",
    "cudnn",
    "nccl",
    "min_driver",
)


class SpecError(ValueError):
    """SPEC.json is missing, unreadable or malformed."""


@dataclass(frozen=True)
class SmokeSpec:
    """What the image (or host) under test is meant to contain; None = not checked."""

    tag: str
    image: str | None
    flavor: str | None
    torch: str
    torchvision: str | None
    torchaudio: str | None
    cuda: str | None
    cudnn: str | None
    nccl: str | None
    python: str
    os: str
    min_driver: str | None
    user: str | None
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def cpu_only(self) -> bool:
        """True when the spec describes a CPU-only torch build."""
        return self.cuda is None

    def expected_facts(self) -> dict[str, str | None]:
        """The six facts a tag claims (verify.compare's `expected`)."""
        return {name: getattr(self, name) for name in FACTS}

    def expected_companions(self) -> dict[str, str | None]:
        """torchvision and torchaudio as promised (`2.11.1+cu130`; a bare version promises no build)."""
        return {name: getattr(self, name) for name in COMPANIONS}


def _str(data: Mapping[str, Any], key: str, *, optional: bool) -> str | None:
    if key not in data:
        raise SpecError(f"key {key!r} is missing (use null to skip its checks)")
    value = data[key]
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        kind = "a non-empty string or null" if optional else "a non-empty string"
        raise SpecError(f"key {key!r} must be {kind}, got {value!r}")
    return value


def _version(data: Mapping[str, Any], key: str, *, optional: bool) -> str | None:
    value = _str(data, key, optional=optional)
    if key in COMPANIONS:
        if value is not None and not _COMPANION_VERSION.match(value):
            raise SpecError(f"key {key!r} must be a dotted version like '2.11.1+cu130', got {value!r}")
    elif value is not None and not _VERSION.match(value):
        raise SpecError(f"key {key!r} must be a dotted version like '1.2.3', got {value!r}")
    return value


def _mapping(data: Mapping[str, Any], key: str) -> Mapping[str, str]:
    value = data.get(key) or {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise SpecError(f"key {key!r} must be an object of string values, got {value!r}")
    return MappingProxyType(dict(value))


def spec_from_dict(data: Mapping[str, Any]) -> SmokeSpec:
    """Validate a decoded SPEC.json and build the spec."""
    flavor = _str(data, "flavor", optional=True)
    if flavor is not None and flavor not in FLAVORS:
        raise SpecError(f"key 'flavor' must be one of {FLAVORS} or null, got {flavor!r}")
    versions = {key: _version(data, key, optional=True) for key in _OPTIONAL_VERSIONS}
    cudnn = versions["cudnn"]
    if cudnn is not None and cudnn.count(".") < 2:
        raise SpecError(f"key 'cudnn' needs at least three parts (9.24.0), got {cudnn!r}")
    return SmokeSpec(
        tag=_str(data, "tag", optional=False) or "",
        image=_str(data, "image", optional=True),
        flavor=flavor,
        torch=_version(data, "torch", optional=False) or "",
        python=_version(data, "python", optional=False) or "",
        os=_str(data, "os", optional=False) or "",
        user=_str(data, "user", optional=True),
        labels=_mapping(data, "labels"),
        env=_mapping(data, "env"),
        **versions,
    )


def load_spec(path: str | Path) -> SmokeSpec:
    """Read SPEC.json (by `textfile`: a regular UTF-8 file within TORCHIMAGES_MAX_FILE_BYTES holding a JSON
    object) and validate it; raise SpecError naming the file and the problem."""
    try:
        data = textfile.read_json_object(Path(path), "the image spec")
    except InputError as exc:
        raise SpecError("; ".join(str(p) for p in exc.problems)) from None
    try:
        return spec_from_dict(data)
    except SpecError as exc:
        raise SpecError(f"{path}: {exc}") from exc


def image_document(combination: Combination, image: Image, reference: str) -> dict[str, Any]:
    """The SPEC.json of a planned image; `reference` is the one under test (maybe temporary)."""
    return {
        "tag": image.tag,
        "image": reference,
        "flavor": image.flavor,
        "torch": combination.torch,
        **combination.companion_versions(image.platform),
        "cuda": combination.cuda,
        "cudnn": combination.cudnn,
        "nccl": combination.nccl,
        "python": combination.python,
        "os": combination.os.name,
        "min_driver": combination.min_driver,
        "user": IMAGE_USER,
        "labels": {**image.label_map(), **combination.bases_labels(image.flavor, image.platform)},
        "env": combination.nvidia_environment(),
    }


LABEL_KEYS = ("torch", "torchvision", "torchaudio", "cuda", "cudnn", "nccl", "python", "os", "flavor")
REQUIRED_LABELS = ("torch", "python", "os")


def our_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """The `io.torchimages.*` labels of an image (our images carry them; images built FROM ours inherit them)."""
    from torchimages.combination import LABEL_PREFIX

    return {key: value for key, value in labels.items() if key.startswith(LABEL_PREFIX + ".")}


def has_our_labels(labels: Mapping[str, str]) -> bool:
    """Whether the labels describe the image well enough to write its spec (torch, python and os at least)."""
    from torchimages.combination import LABEL_PREFIX

    return all(labels.get(f"{LABEL_PREFIX}.{key}") for key in REQUIRED_LABELS)


def known_min_driver(cuda: str | None) -> str | None:
    """The oldest driver a CUDA minor runs on (minor-version compatibility), from the knowledge base; None when
    CPU-only or unknown."""
    if not cuda:
        return None
    from torchimages.compat import load

    facts = load().cuda.get(".".join(cuda.split(".")[:2]))
    return facts.minor_compat_min_driver if facts else None


def labels_document(
    reference: str, labels: Mapping[str, str], user: str = "", min_driver: str | None = None
) -> dict[str, Any]:
    """The SPEC.json of any image from its `io.torchimages.*` labels (ours, or inherited by an image built FROM
    ours); `user` is the image's configured USER (a name is kept; empty or numeric means ours, `torch`).

    Labelled `none` means absent (null: not checked). Raise SpecError when the labels are missing or malformed.
    """
    from torchimages.combination import LABEL_PREFIX, nvidia_environment

    if not has_our_labels(labels):
        raise SpecError(f"{reference} has no {LABEL_PREFIX}.torch, .python and .os labels")

    def label(key: str) -> str | None:
        value = labels.get(f"{LABEL_PREFIX}.{key}")
        return None if value in (None, "", "none") else value

    name = user.split(":", 1)[0]
    flavor = label("flavor")
    document = {
        "tag": reference,
        "image": reference,
        "flavor": flavor if flavor in FLAVORS else None,
        **{key: label(key) for key in LABEL_KEYS if key != "flavor"},
        "min_driver": min_driver,
        "user": name if name and not name.isdigit() else IMAGE_USER,
        "labels": our_labels(labels),
        "env": nvidia_environment(label("cuda")),
    }
    spec_from_dict(document)  # the labels hold versions in the spec's forms, or this says which does not
    return document


def host_document(facts: Mapping[str, Any], tag: str = "local-host") -> dict[str, Any]:
    """The SPEC.json of a bare host, from the facts probe run with its own Python.

    Image-only keys (image, flavor, user, labels, env, min_driver) are null or empty, so
    their checks skip with a reason.
    """
    decoded = decode_facts(facts)

    def companion(name: str) -> str | None:
        version = (facts.get(name) or {}).get("version")
        return None if not version else public_version(str(version))

    return {
        "tag": tag,
        "image": None,
        "flavor": None,
        "torch": public_version(decoded["torch"] or ""),
        "torchvision": companion("torchvision"),
        "torchaudio": companion("torchaudio"),
        "cuda": decoded["cuda"],
        "cudnn": decoded["cudnn"],
        "nccl": decoded["nccl"],
        "python": decoded["python"],
        "os": decoded["os"] or "",
        "min_driver": None,
        "user": None,
        "labels": {},
        "env": {},
    }
