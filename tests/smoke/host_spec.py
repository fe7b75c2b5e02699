"""Print the smoke-suite spec (SPEC.json) that describes the Python running this script.

Use it to run the smoke suites against a bare host (`--hosts=local://`):

    python3 tests/smoke/host_spec.py > /tmp/host-spec.json
    python3 -m pytest tests/smoke --hosts=local:// --image-spec /tmp/host-spec.json \
        --python-exe python3

Image-only keys (image, flavor, user, labels, env, min_driver) are null or empty,
so their checks skip with a reason. Needs only the standard library and torch.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import sys
from typing import Any

# cuDNN's four-part version comes from the wheel that ships it, when there is one.
CUDNN_DISTRIBUTIONS = ("nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu11")


def os_name() -> str:
    """ID + VERSION_ID from /etc/os-release, e.g. 'ubuntu24.04' or 'debian12'."""
    values: dict[str, str] = {}
    with open("/etc/os-release", encoding="utf-8") as handle:
        for line in handle:
            key, sep, value = line.strip().partition("=")
            if sep:
                values[key] = value.strip().strip('"')
    return values.get("ID", "") + values.get("VERSION_ID", "")


def companion_version(name: str) -> str | None:
    """Public version of torchvision/torchaudio when importable, else None."""
    try:
        module = importlib.import_module(name)
    except Exception:
        return None
    return str(module.__version__).split("+", 1)[0]


def cudnn_version(torch: Any) -> str | None:
    """'9.19.0.56' from the cuDNN wheel, else three parts from torch, else None."""
    code = torch.backends.cudnn.version()
    if code is None:
        return None
    major, rest = divmod(code, 10000) if code >= 90000 else divmod(code, 1000)
    minor, patch = divmod(rest, 100)
    three = f"{major}.{minor}.{patch}"
    for distribution in CUDNN_DISTRIBUTIONS:
        try:
            full = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
        if full.startswith(three):
            return full
    return three


def nccl_version(torch: Any) -> str | None:
    """'2.28.9' from torch.cuda.nccl.version(), or None for CPU-only torch."""
    if torch.version.cuda is None:
        return None
    try:
        return ".".join(str(part) for part in torch.cuda.nccl.version())
    except Exception:
        return None


def host_spec(tag: str) -> dict[str, Any]:
    """The spec of this interpreter's torch stack, in SPEC.json's keys."""
    import torch

    return {
        "tag": tag,
        "image": None,
        "flavor": None,
        "torch": torch.__version__.split("+", 1)[0],
        "torchvision": companion_version("torchvision"),
        "torchaudio": companion_version("torchaudio"),
        "cuda": torch.version.cuda,
        "cudnn": cudnn_version(torch),
        "nccl": nccl_version(torch),
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "os": os_name(),
        "min_driver": None,
        "user": None,
        "labels": {},
        "env": {},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", default="local-host", help="the spec's tag (default: local-host)")
    args = parser.parse_args()
    print(json.dumps(host_spec(args.tag), indent=2))


if __name__ == "__main__":
    main()
