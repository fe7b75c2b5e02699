"""Tags never lie: read the versions from inside a built image and compare them with its spec."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

# Runs inside the image with its own python; prints one JSON object.
PROBE = r"""
import json, platform
import torch
def os_name():
    fields = dict(line.rstrip().split("=", 1) for line in open("/etc/os-release") if "=" in line)
    return fields.get("ID", "").strip('"') + fields.get("VERSION_ID", "").strip('"')
def cudnn():
    v = torch.backends.cudnn.version() if torch.version.cuda else None
    if not v:
        return None
    major = v // 10000 if v >= 90000 else v // 1000
    rest = v - major * (10000 if v >= 90000 else 1000)
    return f"{major}.{rest // 100}.{rest % 100}"
def nccl():
    if not torch.version.cuda:
        return None
    return ".".join(str(p) for p in torch.cuda.nccl.version())
print(json.dumps({
    "torch": torch.__version__,
    "cuda": torch.version.cuda,
    "cudnn": cudnn(),
    "nccl": nccl(),
    "python": ".".join(platform.python_version_tuple()[:2]),
    "os": os_name(),
}))
"""


@dataclass(frozen=True)
class Mismatch:
    """One fact that differs between the spec and the image."""

    fact: str
    expected: str | None
    found: str | None

    def __str__(self) -> str:
        return f"{self.fact}: the tag claims {self.expected or 'none'}, the image has {self.found or 'none'}"


def _same(fact: str, expected: str | None, value: Any) -> bool:
    if expected is None or value is None:
        return expected is None and value is None
    found = str(value)
    if fact == "torch":
        return found.split("+")[0] == expected
    if fact == "cudnn":
        return found == ".".join(expected.split(".")[:3])
    return found == expected


class PythonRunner(Protocol):
    """What verification needs of the engine."""

    def run_python(self, reference: str, args: list[str]) -> str: ...


def compare(expected: Mapping[str, str | None], facts: Mapping[str, Any]) -> list[Mismatch]:
    """Every fact that differs (empty when the image is what its tag says)."""
    return [
        Mismatch(name, want, None if facts.get(name) is None else str(facts[name]))
        for name, want in expected.items()
        if not _same(name, want, facts.get(name))
    ]


def read_facts(engine: PythonRunner, reference: str) -> dict[str, Any]:
    """Run the probe in a throwaway container of the image and parse its answer (ValueError if unreadable)."""
    text = engine.run_python(reference, ["-c", PROBE])
    lines = text.strip().splitlines()
    if not lines:
        raise ValueError("the probe printed nothing")
    return dict(json.loads(lines[-1]))
