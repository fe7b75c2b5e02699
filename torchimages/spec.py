"""ImageSpec: everything one image is, resolved once; nothing downstream re-derives a version."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields
from typing import Any

from .compat import OsRelease

FLAVORS = ("devel", "runtime")
# pip constraints pinning every package of a combination (written by `build.py lock`).
LOCK_FILE = "requirements.lock"
LABEL_PREFIX = "io.torchimages"
INPUT_DIGEST_LABEL = f"{LABEL_PREFIX}.input-digest"


@dataclass(frozen=True)
class Toolkit:
    """Where a devel image's nvcc comes from: an nvidia/cuda devel `image` or NVIDIA's pip `wheels`."""

    source: str
    image: str = ""
    requirements: tuple[str, ...] = ()
    arch_list: str = ""


@dataclass(frozen=True)
class ImageSpec:
    """One image: a combination of versions plus a flavor, with its tags and input digest."""

    name: str
    flavor: str
    torch: str
    torchvision: str | None
    torchaudio: str | None
    numpy: str | None
    variant: str
    cuda: str | None
    cudnn: str | None
    nccl: str | None
    python: str
    os: OsRelease
    toolkit: Toolkit
    index_url: str
    min_driver: str | None
    toolkit_driver: str | None
    flavors: tuple[str, ...]
    source: str
    repository: str
    lock: str | None = None
    tag: str = ""
    aliases: tuple[str, ...] = ()
    digest: str = ""
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def dockerfile(self) -> str:
        """The rendered Dockerfile's path, relative to the images folder."""
        return f"{self.name}/Dockerfile"

    @property
    def reference(self) -> str:
        """The public image reference."""
        return f"{self.repository}:{self.tag}"

    @property
    def cudnn_major(self) -> str | None:
        """`9` for cuDNN 9.1.0.70."""
        return self.cudnn.split(".")[0] if self.cudnn else None

    @property
    def require_cuda(self) -> str:
        """NVIDIA_REQUIRE_CUDA: the driver must support this CUDA major (minor-version compatibility)."""
        return f"cuda>={self.cuda.split('.')[0]}.0" if self.cuda else ""

    def content(self) -> dict[str, Any]:
        """What shapes the image's bytes (not its tags), as plain data."""
        skip = {"tag", "aliases", "digest", "warnings", "source", "repository", "flavors", "os", "toolkit"}
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
        os = self.os
        data["os"] = [os.name, os.provider, os.image, os.python, os.packages, os.devel_packages, os.suite]
        data["toolkit"] = [self.toolkit.source, self.toolkit.image, self.toolkit.requirements, self.toolkit.arch_list]
        return data

    def labels(self) -> dict[str, str]:
        """Image labels: OCI annotations plus every version and the input digest."""
        versions = {
            "flavor": self.flavor,
            "torch": self.torch,
            "torchvision": self.torchvision or "none",
            "torchaudio": self.torchaudio or "none",
            "cuda": self.cuda or "none",
            "cudnn": self.cudnn or "none",
            "nccl": self.nccl or "none",
            "python": self.python,
            "os": self.os.name,
        }
        return {
            "org.opencontainers.image.title": f"PyTorch {self.torch} ({self.flavor})",
            "org.opencontainers.image.description": (
                f"PyTorch {self.torch}, {'CUDA ' + self.cuda if self.cuda else 'CPU only'}, "
                f"Python {self.python} on {self.os.name}"
            ),
            "org.opencontainers.image.version": self.torch,
            "org.opencontainers.image.licenses": "BSD-3-Clause",
            **{f"{LABEL_PREFIX}.{k}": v for k, v in versions.items()},
            INPUT_DIGEST_LABEL: self.digest,
        }

    def environment(self) -> dict[str, str]:
        """Environment variables the image sets for the NVIDIA container toolkit."""
        if not self.cuda:
            return {}
        return {
            "NVIDIA_VISIBLE_DEVICES": "all",
            "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
            "NVIDIA_REQUIRE_CUDA": self.require_cuda,
        }

    def facts(self) -> dict[str, str | None]:
        """The facts verification reads back from inside the image."""
        return {
            "torch": self.torch,
            "cuda": self.cuda,
            "cudnn": self.cudnn,
            "nccl": self.nccl,
            "python": self.python,
            "os": self.os.name,
        }


def input_digest(spec: ImageSpec, fingerprint: str) -> str:
    """Hash of everything that shapes an image: its content fields plus the templates' text."""
    payload = json.dumps(spec.content(), sort_keys=True, default=str) + "\0" + fingerprint
    return "sha256:" + hashlib.sha256(payload.encode()).hexdigest()
