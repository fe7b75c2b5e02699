"""Probe: the GPU architectures the CUDA code of torch, torchvision and torchaudio holds.

Runs inside the image (or host) under test with only the standard library; torch is imported
only for its own record of the architectures it was built for (`torch._C._cuda_getArchFlags()`),
never to read the files. For every shared object (*.so, *.so.*) under the packages' folders with
an ELF `.nv_fatbin` section, it reads the fatbin containers' entry headers (seek and read: the
payloads, compressed or not, are skipped) and prints one line
`SMOKE_JSON:{"torch_flags": ..., "files": {relpath: {"sass": [...], "ptx": [...]}}, "errors": {...}}`.
Paths are relative to the folder that holds the package (site-packages). Arguments, if any, name
such folders to scan (for all three packages) instead of where the import system finds each.

The fatbin layout (what nvcc 13.0's output and cuobjdump agree on, docs/explanation/reading-gpu-architectures.md):
a container header (u32 magic 0xBA55ED50, u16 version 1, u16 header size, u64 size of the entries),
then entries, each: u16 kind (1 PTX, 2 ELF), u16, u32 header size, u64 payload size (padded),
..., u32 SM version at offset 28, u64 flags at offset 40 (0x100000: arch-specific `a`,
0x200000: family-specific `f`); the next entry follows the payload. Containers lie back to back.

The work on one file is bounded as a whole, whatever its sections hold (several sections may name the same bytes):
the ELF header and first section header (128 bytes), the section headers (at most MAX_SECTIONS, 4 MiB), the
section name table (at most MAX_NAMES_BYTES, 1 MiB), then at most MAX_ENTRIES header reads of at most 48 bytes
over all its `.nv_fatbin` sections together (each container header, entry header, 8 zero bytes of padding and
section tail spends one): about 15 MB read in at most 200,000 + 3 reads, a second or so. A file that needs more
is one error ("over budget"), reported as not read.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import struct
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

MARK = "SMOKE_JSON:"
PACKAGES = ("torch", "torchvision", "torchaudio")
FATBIN_SECTION = b".nv_fatbin"
FATBIN_MAGIC = 0xBA55ED50
KIND_PTX = 1
KIND_ELF = 2
FLAG_ARCH_SPECIFIC = 0x100000  # sm_90a, compute_100a
FLAG_FAMILY_SPECIFIC = 0x200000  # sm_100f, compute_120f
# Header reads per file, over all its sections (containers, entries, padding words, section tails); torch
# 2.14.1's libtorch_cuda.so needs about 3,000.
MAX_ENTRIES = 200_000
MAX_PADDING = 4096  # zero bytes between two containers (none in torch 2.14.1's files; alignment, if any)
MAX_SECTIONS = 65_535
MAX_NAMES_BYTES = 1 << 20  # a section-name table larger than this is not a real one
CONTAINER_HEADER = struct.Struct("<IHHQ")
ENTRY_HEADER = struct.Struct("<HHIQ")
ENTRY_FIELDS_END = 48  # the fields read from an entry header end at its flags (offset 40, u64)
SECTION_HEADER_SIZE = 64
SHT_NOBITS = 8
SHN_XINDEX = 0xFFFF

# Reads `size` bytes at `offset` (fewer at the end of the data).
Reader = Callable[[int, int], bytes]


class FormatError(Exception):
    """The bytes are not what the ELF or fatbin layout says; the message is one line."""


class Work:
    """The header reads left for one file (MAX_ENTRIES by default), shared by all of its sections."""

    def __init__(self, limit: int = MAX_ENTRIES) -> None:
        self.limit = self.left = limit

    def spend(self) -> None:
        """One header read more; FormatError (over budget) past the limit."""
        self.left -= 1
        if self.left < 0:
            raise FormatError(
                f"over budget: more than {self.limit} fatbin headers (containers, entries, padding words) "
                "in the file; not read further"
            )


def u16(data: bytes, offset: int) -> int:
    return int(struct.unpack_from("<H", data, offset)[0])


def u32(data: bytes, offset: int) -> int:
    return int(struct.unpack_from("<I", data, offset)[0])


def u64(data: bytes, offset: int) -> int:
    return int(struct.unpack_from("<Q", data, offset)[0])


def read_exactly(read: Reader, offset: int, size: int, what: str) -> bytes:
    """`size` bytes at `offset`, or FormatError naming `what` when the data ends first."""
    data = read(offset, size)
    if len(data) != size:
        raise FormatError(f"{what} at offset {offset} runs past the end of the file")
    return data


def is_elf(read: Reader) -> bool:
    """Whether the data starts with the ELF magic."""
    return read(0, 4) == b"\x7fELF"


def fatbin_sections(read: Reader, file_size: int) -> list[tuple[int, int]]:
    """(offset, size) in the file of each `.nv_fatbin` section of a little-endian ELF64 file."""
    header = read_exactly(read, 0, 64, "the ELF header")
    if header[:4] != b"\x7fELF":
        raise FormatError("not an ELF file")
    if header[4] != 2 or header[5] != 1:
        raise FormatError(f"ELF class {header[4]}, data encoding {header[5]}: only little-endian ELF64 is read")
    table, entry_size, count, names_index = u64(header, 0x28), u16(header, 0x3A), u16(header, 0x3C), u16(header, 0x3E)
    if table == 0:
        return []
    if entry_size != SECTION_HEADER_SIZE:
        raise FormatError(f"section header size {entry_size}, not {SECTION_HEADER_SIZE}")
    first = read_exactly(read, table, SECTION_HEADER_SIZE, "the first section header")
    if count == 0:
        count = u64(first, 32)  # more sections than e_shnum holds: section 0's sh_size has the count
    if names_index == SHN_XINDEX:
        names_index = u32(first, 40)
    if count > MAX_SECTIONS or table + count * SECTION_HEADER_SIZE > file_size:
        raise FormatError(f"{count} section headers at offset {table} do not fit in the file")
    if names_index >= count:
        raise FormatError(f"section name table index {names_index} is not below the {count} sections")
    headers = read_exactly(read, table, count * SECTION_HEADER_SIZE, "the section headers")
    names_at, names_size = u64(headers, names_index * 64 + 24), u64(headers, names_index * 64 + 32)
    if names_size > MAX_NAMES_BYTES or names_at + names_size > file_size:
        raise FormatError(f"the section name table ({names_size} bytes at offset {names_at}) does not fit")
    names = read_exactly(read, names_at, names_size, "the section name table")
    found = []
    for index in range(count):
        at = index * SECTION_HEADER_SIZE
        name = u32(headers, at)
        if names[name : name + len(FATBIN_SECTION) + 1] != FATBIN_SECTION + b"\0":
            continue
        kind, offset, size = u32(headers, at + 4), u64(headers, at + 24), u64(headers, at + 32)
        if kind == SHT_NOBITS:
            raise FormatError("the .nv_fatbin section has no bytes in the file (SHT_NOBITS)")
        if offset + size > file_size:
            raise FormatError(f"the .nv_fatbin section ({size} bytes at offset {offset}) runs past the end of the file")
        found.append((offset, size))
    return found


def fatbin_entries(
    read: Reader, start: int, size: int, work: Work | int = MAX_ENTRIES
) -> Iterator[tuple[int, int, int]]:
    """(kind, SM version, flags) of each entry of the fatbin containers in [start, start + size).

    Up to MAX_PADDING zero bytes between containers (alignment) are skipped; every step moves
    forward, and each read spends one of `work` (a file's, shared by its sections; a number: this call's own)."""
    work = Work(work) if isinstance(work, int) else work
    end = start + size
    position = start
    padding = 0
    while position < end:
        work.spend()
        if end - position < CONTAINER_HEADER.size:
            if read_exactly(read, position, end - position, "padding").strip(b"\0"):
                raise FormatError(f"{end - position} bytes after the last fatbin container at offset {position}")
            return
        header = read_exactly(read, position, CONTAINER_HEADER.size, "a fatbin container header")
        if not header[:8].strip(b"\0"):
            padding += 8
            if padding > MAX_PADDING:
                raise FormatError(f"more than {MAX_PADDING} zero bytes before offset {position + 8}")
            position += 8
            continue
        padding = 0
        magic, version, header_size, body = CONTAINER_HEADER.unpack(header)
        if magic != FATBIN_MAGIC:
            raise FormatError(f"no fatbin container at offset {position} (magic {magic:#010x})")
        if version != 1:
            raise FormatError(f"fatbin container version {version} at offset {position}: only version 1 is read")
        if header_size < CONTAINER_HEADER.size:
            raise FormatError(f"fatbin container header size {header_size} at offset {position}")
        container_end = position + header_size + body
        if container_end > end:
            raise FormatError(f"fatbin container at offset {position} runs past the section's end")
        entry = position + header_size
        while entry < container_end:
            work.spend()
            if container_end - entry < ENTRY_FIELDS_END:
                raise FormatError(f"a fatbin entry header at offset {entry} is cut short by its container's end")
            fields = read_exactly(read, entry, ENTRY_FIELDS_END, "a fatbin entry header")
            kind, _, entry_header_size, payload = ENTRY_HEADER.unpack_from(fields)
            if entry_header_size < ENTRY_FIELDS_END:
                raise FormatError(f"fatbin entry header size {entry_header_size} at offset {entry}")
            following = entry + entry_header_size + payload
            if following > container_end:
                raise FormatError(f"a fatbin entry at offset {entry} runs past its container's end")
            yield kind, u32(fields, 28), u64(fields, 40)
            entry = following
        position = container_end


def arch_name(kind: int, version: int, flags: int) -> str | None:
    """'sm_90a' for an ELF entry, 'compute_120' for a PTX one; None for any other kind."""
    prefix = {KIND_ELF: "sm", KIND_PTX: "compute"}.get(kind)
    if prefix is None:
        return None
    suffix = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY_SPECIFIC else ""
    return f"{prefix}_{version}{suffix}"


ARCH_PATTERN = re.compile(r"(?:sm|compute)_(\d+)([a-z]*)")


def arch_key(name: str) -> tuple[int, str, str]:
    """Sort key: the numeric version first (sm_75 < sm_80 < sm_100), then the suffix."""
    match = ARCH_PATTERN.fullmatch(name)
    if match is None:
        return (sys.maxsize, "", name)
    return (int(match.group(1)), match.group(2), name)


def sorted_archs(names: Iterable[str]) -> list[str]:
    """Deduplicated, in numeric order."""
    return sorted(set(names), key=arch_key)


def read_archs(read: Reader, file_size: int, limit: int = MAX_ENTRIES) -> dict[str, list[str]] | None:
    """{"sass": [...], "ptx": [...]} of an ELF file's `.nv_fatbin` sections; None when it has none. At most `limit`
    header reads over all the sections together (the module's docstring: the whole file's bound)."""
    sections = fatbin_sections(read, file_size)
    if not sections:
        return None
    sass: set[str] = set()
    ptx: set[str] = set()
    work = Work(limit)
    for offset, size in sections:
        for kind, version, flags in fatbin_entries(read, offset, size, work):
            name = arch_name(kind, version, flags)
            if name is not None:
                (sass if kind == KIND_ELF else ptx).add(name)
    return {"sass": sorted_archs(sass), "ptx": sorted_archs(ptx)}


def file_archs(path: str) -> dict[str, list[str]] | None:
    """read_archs of a file, read through seek and read, unbuffered: only the headers leave the disk."""
    with open(path, "rb", buffering=0) as handle:
        file_size = os.fstat(handle.fileno()).st_size

        def read(offset: int, size: int) -> bytes:
            handle.seek(offset)
            return handle.read(size)

        if not is_elf(read):
            raise FormatError("not an ELF file")
        return read_archs(read, file_size)


def shared_objects(root: str, packages: Iterable[str] = PACKAGES) -> list[str]:
    """Paths relative to `root` of the *.so and *.so.* files under root/<package>/, sorted, one per real file."""
    found: list[str] = []
    seen: set[str] = set()
    for package in packages:
        for folder, _, names in os.walk(os.path.join(root, package)):
            for name in names:
                if name.endswith(".so") or ".so." in name:
                    found.append(os.path.relpath(os.path.join(folder, name), root))
    unique: list[str] = []
    for relative in sorted(found):
        real = os.path.realpath(os.path.join(root, relative))
        if real not in seen and os.path.isfile(real):
            seen.add(real)
            unique.append(relative)
    return unique


def package_roots(packages: Iterable[str] = PACKAGES) -> list[tuple[str, str]]:
    """(site-packages folder, package) of each package the import system would load, found without importing it."""
    found: list[tuple[str, str]] = []
    for package in packages:
        try:
            spec = importlib.util.find_spec(package)
        except Exception:  # a broken installation: nothing of it to read
            continue
        origin = spec.origin if spec is not None else None
        if origin:
            found.append((os.path.dirname(os.path.dirname(os.path.abspath(origin))), package))
    return found


def one_line(error: BaseException) -> str:
    """`Type: message` on one line."""
    return " ".join(f"{type(error).__name__}: {error}".split())


def scan(packages: Iterable[tuple[str, str]]) -> tuple[dict[str, dict[str, list[str]]], dict[str, str]]:
    """(files, errors) over the shared objects of each (root, package); a file's failure is its error."""
    files: dict[str, dict[str, list[str]]] = {}
    errors: dict[str, str] = {}
    for root, package in packages:
        for relative in shared_objects(root, (package,)):
            try:
                archs = file_archs(os.path.join(root, relative))
            except FormatError as exc:
                errors[relative] = str(exc)
            except Exception as exc:  # an unreadable file is that file's error, never the probe's end
                errors[relative] = one_line(exc)
            else:
                if archs is not None:
                    files[relative] = archs
    return files, errors


def torch_flags() -> tuple[str | None, str | None]:
    """(torch._C._cuda_getArchFlags(), error): None for a CPU build; the error when torch does not import."""
    try:
        torch = importlib.import_module("torch")
    except Exception as exc:
        return None, one_line(exc)
    function = getattr(getattr(torch, "_C", None), "_cuda_getArchFlags", None)
    if function is None:
        return None, None
    try:
        return str(function()), None
    except Exception as exc:
        return None, one_line(exc)


def payload(packages: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The probe's JSON object."""
    files, errors = scan(packages)
    flags, error = torch_flags()
    if error is not None:
        errors["torch"] = error
    return {"torch_flags": flags, "files": files, "errors": errors}


def main(argv: list[str]) -> None:
    packages = [(root, package) for root in argv for package in PACKAGES] or package_roots()
    print(MARK + json.dumps(payload(packages), sort_keys=True), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
