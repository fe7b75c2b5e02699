"""The GPU architectures an image holds are the ones its tag promises (`io.torchimages.cuda.archs`).

The archs probe (torchimages/probes/scripts/cuda_archs.py) answers `{"torch_flags": "sm_75 ... compute_120" or
null, "files": {relpath: {"sass": [...], "ptx": [...]}}, "errors": {relpath or "torch": why}}`, paths relative to
site-packages. `decode` reads that answer (hostile input: anything else is `UnreadableArchs`, never a traceback);
torch's architectures are its flags' `sm_` entries plus the PTX of its flags and of libtorch_cuda.so's fatbin.
`check` holds the reading to the knowledge base: a certain fact (V, S) must equal torch's, an uncertain or
missing one is only reported; torchvision's and torchaudio's CUDA code must run on every SASS architecture torch
holds (NVIDIA's rules, torchimages/archs.py), else a torchvision op fails there with "no kernel image"; a CPU
build holds no GPU code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torchimages.archs import ArchError, Archs, Capability, coverage, difference, parse_arch, parse_archs
from torchimages.compat import CudaArchsFact
from torchimages.problems import shown

TORCH_LIBRARY = "torch/lib/libtorch_cuda.so"  # where torch's own kernels (and its PTX) are
COMPANION_FOLDERS = ("torchvision/", "torchaudio/")  # the files held to torch's architectures
MAX_FILES = 512  # a wheel set holds a few dozen shared objects with CUDA code
MAX_ARCHS = 64  # architectures of one file (CUDA 13 knows about 20)
MAX_PATH = 512  # characters of a relative path
MAX_WHY = 500  # characters of an error kept


class UnreadableArchs(ValueError):
    """The archs probe's answer is not what the probe prints."""


@dataclass(frozen=True)
class ArchReading:
    """What the archs probe found: torch's architectures (None: torch reports none, a CPU build), each file's
    (relative path, architectures), and the files (or `torch`) it could not read, with why."""

    torch: Archs | None
    files: tuple[tuple[str, Archs], ...] = ()
    errors: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str | None:
        """torch's architectures as the label writes them (None: none, a CPU build)."""
        return self.torch.label if self.torch is not None else None


@dataclass(frozen=True)
class ArchVerdict:
    """Why the image fails (problems), and what is only said (notes: a reading no certain fact holds it to)."""

    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def decode(raw: Any) -> ArchReading:
    """The archs probe's answer as an ArchReading; UnreadableArchs (saying what is wrong) for anything else."""
    if not isinstance(raw, Mapping):
        raise UnreadableArchs(f"the archs probe's answer is a {type(raw).__name__}, not an object")
    files = _mapping(raw.get("files"), "files")
    errors = _mapping(raw.get("errors"), "errors")
    read = tuple(sorted((_path(path), _file_archs(path, value)) for path, value in files.items()))
    why = tuple(sorted((_path(path), _why(path, value)) for path, value in errors.items()))
    flags = raw.get("torch_flags")
    if flags is not None and not isinstance(flags, str):
        raise UnreadableArchs(f"torch_flags is a {type(flags).__name__}, not a text or null")
    if flags is None or not flags.strip():  # a CPU torch: no such function, or an empty list
        return ArchReading(None, read, why)
    try:
        torch_flags = parse_archs(flags)
    except ArchError as exc:
        raise UnreadableArchs(f"torch_flags: {exc}") from None
    ptx = set(torch_flags.ptx) | set(dict(read).get(TORCH_LIBRARY, Archs(())).ptx)
    return ArchReading(Archs(torch_flags.sass, tuple(sorted(ptx))), read, why)


def _mapping(value: Any, key: str) -> Mapping[Any, Any]:
    """The probe's `files` or `errors`: an object (absent or null: none, a CPU build's)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise UnreadableArchs(f"{key} is a {type(value).__name__}, not an object")
    if len(value) > MAX_FILES:
        raise UnreadableArchs(f"{key} names {len(value)} files (at most {MAX_FILES})")
    return value


def _path(path: Any) -> str:
    """A path relative to site-packages, as the probe names one."""
    if not isinstance(path, str) or not path or len(path) > MAX_PATH:
        raise UnreadableArchs(f"a file's name {shown(repr(path)[:80])} is not a relative path")
    if path.startswith("/") or ".." in path.split("/") or not path.isprintable():
        raise UnreadableArchs(f"a file's name {shown(path)} is not a relative path inside site-packages")
    return path


def _file_archs(path: Any, value: Any) -> Archs:
    """One file's {"sass": [...], "ptx": [...]}."""
    if not isinstance(value, Mapping):
        raise UnreadableArchs(f"files[{shown(str(path))}] is a {type(value).__name__}, not an object")
    found = {kind: _names(path, value.get(key, []), kind) for key, kind in (("sass", "sm"), ("ptx", "compute"))}
    return Archs(found["sm"], found["compute"])


def _names(path: Any, names: Any, kind: str) -> tuple[Any, ...]:
    where = f"files[{shown(str(path))}]"
    if not isinstance(names, list) or len(names) > MAX_ARCHS:
        raise UnreadableArchs(f"{where}: a list of at most {MAX_ARCHS} `{kind}_` names is expected")
    archs = set()
    for name in names:
        if not isinstance(name, str):
            raise UnreadableArchs(f"{where}: {type(name).__name__} is not an architecture name")
        try:
            found_kind, arch = parse_arch(name)
        except ArchError as exc:
            raise UnreadableArchs(f"{where}: {shown(str(exc))}") from None
        if found_kind != kind:
            raise UnreadableArchs(f"{where}: {shown(name)} in its {'sass' if kind == 'sm' else 'ptx'} list")
        archs.add(arch)
    return tuple(sorted(archs))


def _why(path: Any, value: Any) -> str:
    if not isinstance(value, str):
        raise UnreadableArchs(f"errors[{shown(str(path))}] is a {type(value).__name__}, not a text")
    return value[:MAX_WHY]


def check(reading: ArchReading, cuda: bool, fact: CudaArchsFact | None, what: str) -> ArchVerdict:
    """The reading against the knowledge base's `fact` for this build (`what` names it: `cu130 torch 2.12 on
    linux/amd64`): a CUDA build's torch must report its architectures, equal a certain fact's; its companions'
    CUDA code must run on each of torch's SASS architectures; a file the probe could not read fails (it cannot
    be verified); a CPU build holds no GPU code."""
    problems = [f"GPU architectures: could not read {shown(path)}: {shown(why)}" for path, why in reading.errors]
    torch = reading.torch
    if not cuda:
        holding = [shown(path) for path, archs in reading.files if archs.sass or archs.ptx]
        if torch is not None or holding:
            files = ", ".join(holding) or "no other file"
            problems.append(f"GPU architectures: a CPU build holds GPU code: torch {torch or 'none'}; {files}")
        return ArchVerdict(tuple(problems))
    if torch is None:
        problems.append("GPU architectures: torch reports none (torch_flags null), but this is a CUDA build")
        return ArchVerdict(tuple(problems))
    notes = []
    if fact is None:
        notes.append(f"GPU architectures: the knowledge base knows none for {what}; the image's torch holds {torch}")
    elif lacks := difference(parse_archs(fact.archs), torch):
        said = f"the image's torch holds {torch}: {'; '.join(lacks)}"
        if fact.uncertain:
            notes.append(f"GPU architectures: the knowledge base expects (uncertain: no label) {fact.archs}, {said}")
        else:
            problems.append(f"GPU architectures: the tag promises {fact.archs}, {said}")
    problems += _companions(torch, reading.files)
    return ArchVerdict(tuple(problems), tuple(notes))


def _companions(torch: Archs, files: tuple[tuple[str, Archs], ...]) -> list[str]:
    """Each torchvision/torchaudio file with CUDA code that does not run on one of torch's SASS architectures."""
    problems = []
    for path, archs in files:
        if not path.startswith(COMPANION_FOLDERS) or not (archs.sass or archs.ptx):
            continue
        lacking = [a.name("sm") for a in torch.sass if not coverage(archs, Capability(a.major, a.minor)).runs]
        if lacking:
            problems.append(
                f"GPU architectures: {shown(path)} holds {archs}, no code for {' '.join(lacking)}, which torch"
                " serves (its ops fail there with 'no kernel image')"
            )
    return problems
