"""Tags never lie: read the versions from inside a built image and compare them with its spec.

The facts come from the smoke suites' facts probe (torchimages/probes/scripts/facts.py),
decoded by torchimages.versions: one probe and one decoder for verification and the cpu suite.
The same answer says which NVIDIA libraries torch loaded; `check_libraries` (building/libraries.py)
holds them to the pinned wheels'. It also holds the image's constraints file and every installed version;
`check_constraints` (building/constraints.py) lists each pin an image (one derived from ours) no longer keeps.
The archs probe (probes/scripts/cuda_archs.py: `read_archs`) says which GPU architectures torch and
its companions hold; building/architectures.py holds them to the label's.
Before tagging both run in one container and one interpreter (`read_both`: one `import torch`, the facts
first), each part's answer decoded and refused as its own run's would be.
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
from torchimages.probes import (
    PART_MARK,
    Split,
    combined_source,
    new_nonce,
    parse_payload,
    part_failure,
    probe_source,
    split_parts,
)
from torchimages.versions import COMPANIONS, decode_companions, decode_facts, local_label, public_version, same_build


class PythonRunner(Protocol):
    """What verification needs from the engine (engine.DockerEngine)."""

    def run_python(self, reference: str, args: list[str]) -> str: ...


FACTS_PROBE, ARCHS_PROBE = "facts", "cuda_archs"
# The facts first: its `import torch` is the one whose stderr it records (the archs part finds torch imported).
BOTH = (FACTS_PROBE, ARCHS_PROBE)


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
    return facts_of(engine.run_python(reference, ["-c", probe_source(FACTS_PROBE)]))


def read_archs(engine: PythonRunner, reference: str) -> architectures.ArchReading:
    """Run the archs probe in a throwaway container of the image and decode its answer.

    Raises engine.ProbeError when the container fails, ValueError when the answer is unreadable.
    """
    return archs_of(engine.run_python(reference, ["-c", probe_source(ARCHS_PROBE)]))


def facts_of(output: str) -> Facts:
    """The facts probe's output, decoded; ValueError when it holds no readable answer."""
    try:
        raw = parse_payload(output)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the facts probe's answer is not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"the facts probe printed no SMOKE_JSON line: {output.strip()[-500:]!r}")
    return decode(raw)


def archs_of(output: str) -> architectures.ArchReading:
    """The archs probe's output, decoded; ValueError when it holds no readable answer."""
    try:
        raw = parse_payload(output)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the archs probe's answer is not JSON: {exc}") from exc
    if raw is None:
        raise ValueError(f"the archs probe printed no SMOKE_JSON line: {output.strip()[-500:]!r}")
    return architectures.decode(raw)


@dataclass(frozen=True)
class Probed:
    """The facts and archs probes' outputs of one container run (`read_both`), by part; each is decoded when
    asked, so that a part's failure is that reading's alone."""

    split: Split
    tail: str = ""  # the end of the run's whole output, to say what came instead of a part

    def facts(self) -> Facts:
        """The facts part, decoded; ValueError when it is missing, failed or holds no readable answer."""
        return facts_of(self._part(FACTS_PROBE, "facts"))

    def archs(self) -> architectures.ArchReading:
        """The archs part, decoded; ValueError when it is missing, failed or holds no readable answer."""
        return archs_of(self._part(ARCHS_PROBE, "archs"))

    def _part(self, name: str, what: str) -> str:
        outputs = self.split.outputs.get(name, ())
        if not outputs:
            raise ValueError(f"the {what} probe did not run: no {PART_MARK}<nonce>:{name} line in {self.tail!r}")
        if len(outputs) > 1:
            raise ValueError(f"the {what} probe's answer is given twice: something in the image forges its mark")
        if not self.split.ended:
            raise ValueError(f"the {what} probe's run did not reach its end mark: {self.tail!r}")
        output = outputs[0]
        failure = part_failure(output)
        if failure is not None:
            raise ValueError(f"the {what} probe failed: {failure}")
        return output


def read_both(engine: PythonRunner, reference: str) -> Probed:
    """Run the facts and the archs probes in one throwaway container of the image, in one interpreter.

    Raises engine.ProbeError when the container fails; each part's answer is read from the result. The
    run's nonce keeps a stray mark in the image's output from reading as a part; the image's own code can read
    it and print forged parts (see probes): the answers are the image's word, not proof against a hostile image.
    """
    nonce = new_nonce()  # the host's, new for each run: a mark the image prints without it is no part's
    output = engine.run_python(reference, ["-c", combined_source(BOTH, nonce)])
    return Probed(split_parts(output, nonce), output.strip()[-500:])
