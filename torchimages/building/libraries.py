"""The NVIDIA libraries torch loads are the pinned wheels': the facts probe's `libraries` answer (what the
process mapped, from /proc/self/maps; torchimages/probes/scripts/facts.py) against what the tag promises.

For a CUDA combination, libcudnn, libnccl, libcublas and libcublasLt must be loaded (by `import torch`, or by
path when torch loads them lazily: cuDNN's sub-libraries), and every loaded file of those, of NVIDIA's other
wheels, and any other copy of a library those wheels ship must lie inside the venv and be listed by the RECORD
of an installed distribution. A file of cuDNN or NCCL must belong to the version the tag claims
(io.torchimages.cudnn, .nccl); one of cuDNN, NCCL or cuBLAS to a distribution torch's requirements pin (read
from the image: torch's Requires-Dist, through the cuda-toolkit meta-package for CUDA 13), at the pinned
version; one library loaded twice (a system copy beside the wheel's) is a problem. A CPU combination is not
checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion

# Torch links these (libtorch_cuda NEEDS them): a CUDA image that loads none of them is not what its tag says.
REQUIRED = ("libcudnn", "libnccl", "libcublas", "libcublasLt")
# The libraries checked file by file (by the start of a file's name), with the fact that states their version.
FAMILIES: Mapping[str, str | None] = {"libcudnn": "cudnn", "libnccl": "nccl", "libcublas": None}
_SHOWN = {"cudnn": "cuDNN", "nccl": "NCCL"}


@dataclass(frozen=True)
class LibraryProblem:
    """One library that is not the pinned wheel's: which, the file (None: none loaded), what is wrong and
    what was expected."""

    library: str
    file: str | None
    problem: str
    expected: str

    def __str__(self) -> str:
        where = f"{self.file} " if self.file else ""
        return f"{self.library}: {where}{self.problem}; expected {self.expected}"


@dataclass(frozen=True)
class _Loaded:
    path: str
    distribution: str | None
    version: str | None

    @property
    def name(self) -> str:
        return library_name(self.path)

    def owner(self) -> str:
        return f"{self.distribution} {self.version}" if self.distribution else "no distribution"


@dataclass(frozen=True)
class _Pin:
    requirement: Requirement
    required_by: str


def library_name(path: str) -> str:
    """'/x/libcudnn_cnn.so.9' -> 'libcudnn_cnn' (as the probe names them)."""
    return path.rsplit("/", 1)[-1].split(".so", 1)[0]


def _family(name: str) -> str | None:
    return next((family for family in FAMILIES if name.startswith(family)), None)


def _is_nvidia(distribution: str) -> bool:
    return canonicalize_name(distribution).startswith(("nvidia-", "cuda-"))


def torch_pins(distributions: Mapping[str, Any], environment: Mapping[str, str]) -> dict[str, list[_Pin]]:
    """Every requirement on an installed NVIDIA distribution reached from torch's Requires-Dist (with the
    extras asked for and the image's marker values), by the distribution's normalized name."""
    pins: dict[str, list[_Pin]] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo: list[tuple[str, frozenset[str]]] = [("torch", frozenset())]
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen or name not in distributions:
            continue
        seen.add((name, extras))
        for text in distributions[name].get("requires") or ():
            requirement = Requirement(text)
            marker = requirement.marker
            if marker and not any(marker.evaluate({**environment, "extra": e}) for e in {"", *extras}):
                continue
            wanted = canonicalize_name(requirement.name)
            pins.setdefault(wanted, []).append(_Pin(requirement, name))
            todo.append((wanted, frozenset(requirement.extras)))
    return pins


def _expected(family: str | None, expected: Mapping[str, str | None], prefix: str) -> str:
    fact = FAMILIES.get(family or "")
    version = expected.get(fact) if fact else None
    promise = f" ({_SHOWN[fact]} {version}, as the tag claims)" if fact and version else ""
    return f"the file of the wheel torch pins{promise}, inside the venv {prefix}"


def _same_version(found: str, promised: str) -> bool:
    parts = promised.split(".")
    return found.split(".")[: len(parts)] == parts


def _check_copy(
    copy: _Loaded, family: str | None, expected: Mapping[str, str | None], prefix: str, pins: Mapping[str, list[_Pin]]
) -> list[LibraryProblem]:
    want = _expected(family, expected, prefix)
    problems = []
    if not copy.path.startswith(prefix.rstrip("/") + "/"):
        unlisted = "" if copy.distribution else " and no installed distribution lists it"
        problems.append(LibraryProblem(copy.name, copy.path, f"is loaded from outside the venv{unlisted}", want))
    if not copy.distribution or not copy.version:
        if not problems:
            problems.append(LibraryProblem(copy.name, copy.path, "is loaded, but no RECORD lists it", want))
        return problems
    fact = FAMILIES.get(family or "")
    promised = expected.get(fact) if fact else None
    if promised and not _same_version(copy.version, promised):
        problems.append(LibraryProblem(copy.name, copy.path, f"belongs to {copy.owner()}", want))
    named = pins.get(canonicalize_name(copy.distribution), [])
    if family and not named:
        problem = f"belongs to {copy.owner()}, which torch's requirements do not name"
        problems.append(LibraryProblem(copy.name, copy.path, problem, want))
    for pin in named:
        try:
            ok = pin.requirement.specifier.contains(copy.version, prereleases=True)
        except InvalidVersion:
            ok = False
        if not ok:
            pinned = f"{copy.distribution}{pin.requirement.specifier} ({pin.required_by}'s requirement)"
            where = f"{pinned}, inside the venv {prefix}"
            problems.append(LibraryProblem(copy.name, copy.path, f"belongs to {copy.owner()}", where))
    return problems


def _loaded(entries: Iterable[Mapping[str, Any]]) -> list[_Loaded]:
    found = []
    for entry in entries:
        path = entry["path"]
        if not isinstance(path, str):
            raise TypeError(f"a loaded library's path is {path!r}")
        found.append(_Loaded(path, entry.get("distribution"), entry.get("version")))
    return found


def check(expected: Mapping[str, str | None], raw: Mapping[str, Any]) -> list[LibraryProblem]:
    """Every way the NVIDIA libraries the image's torch loads differ from the pinned wheels' (empty when they
    are the pinned wheels', or for a CPU combination: `expected` says no CUDA)."""
    if expected.get("cuda") is None:
        return []
    answer = raw.get("libraries")
    listing = "the facts probe's list of the libraries torch loads"
    if not isinstance(answer, Mapping) or answer.get("error"):
        why = answer.get("error") if isinstance(answer, Mapping) else "`import torch` failed, or an older probe"
        return [LibraryProblem("libraries", None, f"were not read ({why})", listing)]
    try:
        prefix = str(answer["prefix"])
        loaded = _loaded(answer["loaded"])
        failed = _loaded(answer["failed"])
        errors = {entry["path"]: str(entry.get("error")) for entry in answer["failed"]}
        pins = torch_pins(answer["distributions"], answer["environment"])
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # packaging's errors are ValueErrors
        return [LibraryProblem("libraries", None, f"were not read (a malformed answer: {exc!r})", listing)]
    problems = [
        LibraryProblem(
            copy.name,
            copy.path,
            f"({copy.owner()}) cannot be loaded: {errors[copy.path]}",
            _expected(_family(copy.name), expected, prefix),
        )
        for copy in failed
    ]
    present = {copy.name for copy in (*loaded, *failed)}
    for name in REQUIRED:
        if name not in present:
            problem = "is not loaded: `import torch` did not map it and no installed distribution ships it"
            problems.append(LibraryProblem(name, None, problem, _expected(_family(name), expected, prefix)))
    copies: dict[str, list[_Loaded]] = {}
    for copy in loaded:
        copies.setdefault(copy.name, []).append(copy)
    for name, found in copies.items():
        family = _family(name)
        if len({copy.path for copy in found}) > 1:
            listed = ", ".join(f"{copy.path} ({copy.owner()})" for copy in found)
            problem = f"is loaded {len(found)} times: {listed}"
            problems.append(LibraryProblem(name, None, problem, "one copy: " + _expected(family, expected, prefix)))
        for copy in found:
            problems.extend(_check_copy(copy, family, expected, prefix, pins))
    return problems
