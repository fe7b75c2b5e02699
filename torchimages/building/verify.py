"""Tags never lie: read the versions from inside a built image and compare them with its spec.

The facts come from the smoke suites' facts probe (torchimages/probes/scripts/facts.py),
decoded by torchimages.versions: one probe and one decoder for verification and the cpu suite.
The same answer says which NVIDIA libraries torch loaded; `check_libraries` (building/libraries.py)
holds them to the pinned wheels'. It also holds the image's constraints file and every installed version;
`check_constraints` (building/constraints.py) lists each pin an image (one derived from ours) no longer keeps.
The archs probe (probes/scripts/cuda_archs.py, one more run: `read_archs`) says which GPU architectures torch and
its companions hold; building/architectures.py holds them to the label's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from torchimages.building import architectures, constraints, libraries
from torchimages.building.constraints import ConstraintsVerdict
from torchimages.building.libraries import LibraryProblem
from torchimages.probes import parse_payload, probe_source
from torchimages.versions import COMPANIONS, decode_companions, decode_facts, local_label, public_version, same_build


class PythonRunner(Protocol):
    """What verification needs from the engine (engine.DockerEngine)."""

    def run_python(self, reference: str, args: list[str]) -> str: ...


@dataclass(frozen=True)
class Facts:
    """What the facts probe found in an image: the decoded six facts and the companions, and its whole answer."""

    versions: Mapping[str, str | None]
    raw: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class Mismatch:
    """One fact that differs between the spec and the image."""

    fact: str
    expected: str | None
    found: str | None

    def __str__(self) -> str:
        text = f"{self.fact}: the tag claims {self.expected or 'none'}, the image has {self.found or 'none'}"
        promised = local_label(self.expected) if self.expected else None
        if (
            self.fact in COMPANIONS
            and promised
            and self.found
            and public_version(self.found) == public_version(self.expected or "")
        ):
            text += f" (a {local_label(self.found) or 'label-less'} build, not {promised})"
        return text


def _same(fact: str, expected: str | None, found: str | None) -> bool:
    if expected is None or found is None:
        return expected is None and found is None
    if fact == "torch":
        return found.split("+")[0] == expected
    if fact in COMPANIONS:
        return same_build(expected, found)
    if fact == "cudnn":
        return found == ".".join(expected.split(".")[:3])
    return found == expected


def decode(raw: Mapping[str, Any]) -> Facts:
    """The facts probe's answer, decoded (torchimages.versions)."""
    return Facts(MappingProxyType({**decode_facts(raw), **decode_companions(raw)}), MappingProxyType(dict(raw)))


def compare(expected: Mapping[str, str | None], facts: Facts) -> list[Mismatch]:
    """Every fact that differs (empty when the image is what its tag says)."""
    return [
        Mismatch(name, value, facts.versions.get(name))
        for name, value in expected.items()
        if not _same(name, value, facts.versions.get(name))
    ]


def check_libraries(expected: Mapping[str, str | None], facts: Facts) -> list[LibraryProblem]:
    """Every NVIDIA library torch loaded that is not the pinned wheel's, or is missing (none for a CPU spec)."""
    return libraries.check(expected, facts.raw)


def check_constraints(facts: Facts) -> ConstraintsVerdict:
    """Every pin of the image's constraints file it no longer keeps; no file (an older or foreign image) is
    a note, not a problem."""
    return constraints.check(facts.raw)


def read_facts(engine: PythonRunner, reference: str) -> Facts:
    """Run the facts probe in a throwaway container of the image and decode its answer.

    Raises engine.ProbeError when the container fails, ValueError when the answer is unreadable.
    """
    output = engine.run_python(reference, ["-c", probe_source("facts")])
    try:
        raw = parse_payload(output)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the facts probe's answer is not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"the facts probe printed no SMOKE_JSON line: {output.strip()[-500:]!r}")
    return decode(raw)


def read_archs(engine: PythonRunner, reference: str) -> architectures.ArchReading:
    """Run the archs probe in a throwaway container of the image and decode its answer.

    Raises engine.ProbeError when the container fails, ValueError when the answer is unreadable.
    """
    output = engine.run_python(reference, ["-c", probe_source("cuda_archs")])
    try:
        raw = parse_payload(output)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the archs probe's answer is not JSON: {exc}") from exc
    if raw is None:
        raise ValueError(f"the archs probe printed no SMOKE_JSON line: {output.strip()[-500:]!r}")
    return architectures.decode(raw)
