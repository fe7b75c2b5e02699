"""The cuda_archs probe (torchimages/probes/scripts/cuda_archs.py) without an image: ELF and fatbin
bytes built here with known entries read back exactly; real entry headers nvcc 13.0 and torch
2.14.1's libtorch_cuda.so wrote (payloads zeroed) read as cuobjdump lists them; hostile bytes
(random, mutated, truncated) end in a FormatError, never another exception, never a loop; and the
JSON the probe prints over a made-up site-packages."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchimages.probes import parse_payload, probe_source


@pytest.fixture(scope="module")
def probe() -> types.ModuleType:
    """The probe script, loaded from the package data as the image receives it."""
    module = types.ModuleType("cuda_archs_probe")
    exec(compile(probe_source("cuda_archs"), "cuda_archs.py", "exec"), module.__dict__)
    return module


# --- building ELF and fatbin bytes --------------------------------------------------------------

# Entry flags as nvcc 13.0 writes them: 0x11 (64-bit, Linux), 0x8000 compressed, 0x100000 `a`,
# 0x200000 `f`, 0x1000000 on every sm_100+ entry.
PLAIN, COMPRESSED, ARCH_A, FAMILY_F, NEW = 0x11, 0x8000, 0x100000, 0x200000, 0x1000000


def entry(kind: int, sm: int, flags: int = PLAIN, payload: int = 8, header_size: int = 64) -> bytes:
    """One fatbin entry: its header (kind, header size, payload size, SM version, flags) and a zero payload."""
    header = bytearray(max(header_size, 48))  # a shorter one still holds the fields, for the error tests
    struct.pack_into("<HHIQ", header, 0, kind, 0x101, header_size, payload)
    struct.pack_into("<I", header, 28, sm)
    struct.pack_into("<Q", header, 40, flags)
    return bytes(header) + b"\0" * payload


def container(*entries: bytes) -> bytes:
    """A fatbin container: magic, version 1, header size 16, the entries' size."""
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def elf(sections: dict[str, bytes]) -> bytes:
    """A little-endian ELF64 file with these sections (and .shstrtab), section headers at the end."""
    names = b"\0" + b"".join(name.encode() + b"\0" for name in [*sections, ".shstrtab"])
    data, offsets = bytearray(b"\0" * 64), []
    for content in [*sections.values(), names]:
        offsets.append(len(data))
        data += content + b"\0" * (-len(content) % 8)
    table = len(data)
    data += b"\0" * 64  # section 0
    name_at = 1
    for (name, content), offset in zip([*sections.items(), (".shstrtab", names)], offsets, strict=True):
        data += struct.pack("<IIQQQQIIQQ", name_at, 1, 0, 0, offset, len(content), 0, 0, 8, 0)
        name_at += len(name) + 1
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x28, table)
    struct.pack_into("<HHH", header, 0x3A, 64, len(sections) + 2, len(sections) + 1)
    data[:64] = header
    return bytes(data)


class Budget:
    """A Reader over bytes that fails the test past a number of reads: a parser that loops ends here."""

    def __init__(self, data: bytes, reads: int = 10_000) -> None:
        self.data, self.left = data, reads

    def __call__(self, offset: int, size: int) -> bytes:
        self.left -= 1
        assert self.left >= 0, "the parser did not stop"
        assert offset >= 0 and size >= 0, f"read({offset}, {size})"
        return self.data[offset : offset + size]


def archs(probe: types.ModuleType, data: bytes) -> Any:
    return probe.read_archs(Budget(data), len(data))


KNOWN = elf(
    {
        ".text": b"\x90" * 40,
        ".nv_fatbin": container(
            entry(2, 75),
            entry(2, 90, PLAIN | ARCH_A),
            entry(0x40, 61),  # a kind that is neither PTX nor ELF: not listed
            entry(1, 120, PLAIN | COMPRESSED, payload=24, header_size=80),
        )
        + b"\0" * 8  # alignment between containers
        + container(
            entry(2, 100, PLAIN | NEW | FAMILY_F, payload=16, header_size=112),
            entry(2, 75, PLAIN | COMPRESSED),
            entry(1, 90, PLAIN | ARCH_A, header_size=80),
        ),
        ".data": b"x" * 16,
    }
)


def test_a_fatbin_with_known_entries_reads_back_exactly(probe: types.ModuleType) -> None:
    assert archs(probe, KNOWN) == {"sass": ["sm_75", "sm_90a", "sm_100f"], "ptx": ["compute_90a", "compute_120"]}


def test_an_elf_file_without_a_fatbin_section_has_none(probe: types.ModuleType) -> None:
    assert archs(probe, elf({".text": b"\x90" * 8})) is None
    assert archs(probe, elf({})) is None


# The .nv_fatbin of `nvcc -shared -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_100f,code=sm_100f
# -gencode arch=compute_100a,code=compute_100a -gencode arch=compute_120,code=compute_120 -gencode
# arch=compute_120f,code=sm_120f -gencode arch=compute_80,code=sm_80` (nvcc 13.0.88): its two containers'
# headers and entry headers as written, the payloads zeroed. cuobjdump 13.5 lists sm_90a, sm_100, sm_120 and
# sm_80 cubins and sm_100a and sm_120 PTX: it leaves out a cubin's `f`, which the flags (0x200000) keep.
NVCC_13_0 = [
    "50ed55ba01001000f019000000000000",
    (
        "020001014000000010060000000000000000000000000000080001005a00000000000000000000001100100000000000"
        "00000000000000000000000000000000"
    ),
    (
        "020001016000000070060000000000000000000040000000080001006400000000000000000000001100200100000000"
        "0000000000000000000000000000000048000000100000000002090000040b0800000000000000000000000000000000"
    ),
    (
        "020001016000000070060000000000000000000040000000080001007800000000000000000000001100200100000000"
        "0000000000000000000000000000000048000000100000000002090000040b0800000000000000000000000000000000"
    ),
    (
        "0200010140000000c0050000000000000000000000000000080001005000000000000000000000001100000000000000"
        "00000000000000000000000000000000"
    ),
    "50ed55ba01001000e048000000000000",
    (
        "0200010140000000780e0000000000000000000000000000080001005a00000000000000000000001100100000000000"
        "00000000000000000000000000000000"
    ),
    (
        "0200010170000000c8140000000000000000000040000000080001006400000000000000000000001100200100000000"
        "000000000000000000000000000000004800000024000000000209000002020100020505000307010102030000020601"
        "00040b08000900000000000000000000"
    ),
    (
        "010001015000000018010000000000001501000040000000000009006400000000000000000000001180100000000000"
        "0000000000000000e60100000000000048000000000000000000000000000000"
    ),
    (
        "010001015000000018010000000000001401000040000000000009007800000000000000000000001180000000000000"
        "0000000000000000e50100000000000048000000000000000000000000000000"
    ),
    (
        "0200010170000000c8140000000000000000000040000000080001007800000000000000000000001100200100000000"
        "000000000000000000000000000000004800000024000000000209000002020100020505000307010102030000020601"
        "00040b08005000000000000000000000"
    ),
    (
        "0200010140000000a80c0000000000000000000000000000080001005000000000000000000000001100000000000000"
        "00000000000000000000000000000000"
    ),
]
# Three entry headers of torch 2.14.1's libtorch_cuda.so (compressed payloads, flag 0x8000): sm_75, sm_103f, sm_90a.
LIBTORCH_CUDA_2_14_1 = [
    (
        "020001014000000050220000000000004f22000000000000080001004b00000000000000000000001180000000000000"
        "000000000000000080ec010000000000"
    ),
    (
        "020001017000000080050000000000007d05000040000000080001006700000000000000000000001180200100000000"
        "0000000000000000f01f0000000000004800000024000000000209000002020100020505000307010102030000020601"
        "00040b08000000000000000000000000"
    ),
    (
        "0200010140000000702f0000000000006a2f000000000000080001005a00000000000000000000001180100000000000"
        "00000000000000009096010000000000"
    ),
]


def recorded(headers: list[str]) -> bytes:
    """Recorded headers, each followed by as many zero bytes as its payload size says (a container's: none)."""
    data = b""
    for text in headers:
        header = bytes.fromhex(text)
        payload = 0 if header[:4] == b"\x50\xed\x55\xba" else struct.unpack_from("<Q", header, 8)[0]
        data += header + b"\0" * payload
    return data


def test_nvcc_13_0_headers_read_as_cuobjdump_lists_them_with_the_f_kept(probe: types.ModuleType) -> None:
    assert archs(probe, elf({".nv_fatbin": recorded(NVCC_13_0)})) == {
        "sass": ["sm_80", "sm_90a", "sm_100f", "sm_120f"],
        "ptx": ["compute_100a", "compute_120"],
    }


def test_libtorch_cuda_headers_read_as_cuobjdump_lists_them(probe: types.ModuleType) -> None:
    body = recorded(LIBTORCH_CUDA_2_14_1)
    fatbin = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body
    assert archs(probe, elf({".nv_fatbin": fatbin})) == {"sass": ["sm_75", "sm_90a", "sm_103f"], "ptx": []}


def test_more_containers_and_entries_than_the_bound_is_an_error(probe: types.ModuleType) -> None:
    fatbin = container(*[entry(2, 75)] * 4)
    data = elf({".nv_fatbin": fatbin})
    assert probe.read_archs(Budget(data), len(data), limit=5) == {"sass": ["sm_75"], "ptx": []}
    with pytest.raises(probe.FormatError, match=r"over budget: more than 4 fatbin headers"):
        probe.read_archs(Budget(data), len(data), limit=4)
    empty = elf({".nv_fatbin": container() * 6})  # containers with no entries count too
    with pytest.raises(probe.FormatError, match=r"over budget: more than 5 fatbin headers"):
        probe.read_archs(Budget(empty), len(empty), limit=5)


def many_sections(count: int, region: bytes) -> bytes:
    """An ELF64 file of `count` `.nv_fatbin` sections that all name the same bytes (`region`): each alone is
    within bounds, the file is not."""
    names = b"\0.nv_fatbin\0.shstrtab\0"
    region_at = 64
    names_at = region_at + len(region) + (-len(region) % 8)
    table = names_at + len(names) + (-len(names) % 8)
    headers = bytearray(64)  # section 0
    headers += struct.pack("<IIQQQQIIQQ", 1, 1, 0, 0, region_at, len(region), 0, 0, 8, 0) * count
    headers += struct.pack("<IIQQQQIIQQ", 12, 3, 0, 0, names_at, len(names), 0, 0, 1, 0)
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x28, table)
    struct.pack_into("<HHH", header, 0x3A, 64, count + 2, count + 1)
    body = region + b"\0" * (-len(region) % 8) + names + b"\0" * (-len(names) % 8)
    return bytes(header) + body + bytes(headers)


def test_the_bound_covers_the_whole_file_not_each_section(probe: types.ModuleType) -> None:
    """Three sections over one container of 4 entries: 15 reads in all, each section's 5 under a limit of 6."""
    data = many_sections(3, container(*[entry(2, 75, header_size=48, payload=0)] * 4))
    assert probe.read_archs(Budget(data), len(data), limit=15) == {"sass": ["sm_75"], "ptx": []}
    with pytest.raises(probe.FormatError, match=r"over budget: more than 14 fatbin headers"):
        probe.read_archs(Budget(data, reads=14 + 10), len(data), limit=14)


def test_padding_spends_the_budget_too(probe: types.ModuleType) -> None:
    """Zero padding between containers is header reads like any other: 512 words of it under a limit of 100."""
    data = elf({".nv_fatbin": container(entry(2, 75)) + b"\0" * 4096 + container(entry(2, 80))})
    assert probe.read_archs(Budget(data), len(data)) == {"sass": ["sm_75", "sm_80"], "ptx": []}
    with pytest.raises(probe.FormatError, match=r"over budget: more than 100 fatbin headers"):
        probe.read_archs(Budget(data, reads=100 + 10), len(data), limit=100)


def test_a_crafted_4_mb_file_is_reported_over_budget_in_seconds(probe: types.ModuleType, tmp_path: Path) -> None:
    """65,000 sections over the same 3,000 entries (4.3 MB): 195 million header reads at a bound per section (hours);
    the bound per file stops it after MAX_ENTRIES, and the probe reports the file as not read, over budget."""
    region = container(*[entry(2, 75, header_size=48, payload=0)] * 3000)
    data = many_sections(65_000, region)
    assert 4_000_000 < len(data) < 5_000_000
    with pytest.raises(probe.FormatError, match=r"over budget"):  # fails fast where the bound is not the file's
        probe.read_archs(Budget(data, reads=probe.MAX_ENTRIES + 10), len(data))
    root = tmp_path / "site-packages"
    (root / "torch" / "lib").mkdir(parents=True)
    (root / "torch" / "lib" / "libcrafted.so").write_bytes(data)
    start = time.monotonic()
    files, errors = probe.scan([(str(root), "torch")])
    assert time.monotonic() - start < 30
    assert files == {}
    assert errors == {
        "torch/lib/libcrafted.so": f"over budget: more than {probe.MAX_ENTRIES} fatbin headers (containers, entries, "
        "padding words) in the file; not read further"
    }


def test_a_long_run_of_zero_bytes_is_an_error(probe: types.ModuleType) -> None:
    zeros = b"\0" * 4096
    assert archs(probe, elf({".nv_fatbin": zeros + container(entry(2, 75))})) == {"sass": ["sm_75"], "ptx": []}
    with pytest.raises(probe.FormatError, match="more than 4096 zero bytes before offset"):
        archs(probe, elf({".nv_fatbin": zeros + b"\0" * 8 + container(entry(2, 75))}))


MALFORMED_FATBINS = [
    (b"\x50\xed\x55\xba" + b"\0" * 12, "fatbin container version 0"),
    (struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 9999), "runs past the section's end"),
    (struct.pack("<IHHQ", 0xBA55ED50, 1, 8, 0), "header size 8"),
    (struct.pack("<IHHQ", 0x12345678, 1, 16, 0), "no fatbin container at offset"),
    (container(entry(2, 75)) + b"\0\0\0\x01", "4 bytes after the last fatbin container"),
    (container(entry(2, 75, header_size=40)), "entry header size 40"),
    (container(entry(2, 75)[:40]), "cut short by its container's end"),
    (struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 64) + entry(2, 75)[:64], "runs past its container's end"),
]


@pytest.mark.parametrize(("fatbin", "message"), MALFORMED_FATBINS, ids=[message for _, message in MALFORMED_FATBINS])
def test_a_malformed_fatbin_says_what_is_wrong(probe: types.ModuleType, fatbin: bytes, message: str) -> None:
    with pytest.raises(probe.FormatError, match=message):
        archs(probe, elf({".nv_fatbin": fatbin}))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x7fELF", "the ELF header at offset 0 runs past the end"),
        (b"MZ" + b"\0" * 62, "not an ELF file"),
        (b"\x7fELF\x01\x01" + b"\0" * 58, "ELF class 1, data encoding 1"),
        (b"\x7fELF\x02\x02" + b"\0" * 58, "ELF class 2, data encoding 2"),
    ],
)
def test_a_malformed_elf_file_says_what_is_wrong(probe: types.ModuleType, data: bytes, message: str) -> None:
    with pytest.raises(probe.FormatError, match=message):
        archs(probe, data)


def test_a_section_table_past_the_end_is_an_error(probe: types.ModuleType) -> None:
    data = bytearray(KNOWN)
    struct.pack_into("<H", data, 0x3C, 60000)
    with pytest.raises(probe.FormatError, match="60000 section headers"):
        archs(probe, bytes(data))


# --- hostile bytes ---------------------------------------------------------------------------------


def never_raises_otherwise(probe: types.ModuleType, data: bytes) -> None:
    """read_archs returns None, a result of the right shape, or raises FormatError with a one-line message."""
    try:
        result = probe.read_archs(Budget(data, reads=4 * len(data) + 100), len(data), limit=1000)
    except probe.FormatError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert result is None or (set(result) == {"sass", "ptx"} and all(isinstance(v, list) for v in result.values()))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600))
def test_random_bytes_never_raise_otherwise(probe: types.ModuleType, data: bytes) -> None:
    never_raises_otherwise(probe, b"\x7fELF\x02\x01" + data)
    never_raises_otherwise(probe, data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(0, len(KNOWN) - 1), st.integers(0, 255)), min_size=1, max_size=8),
    st.integers(0, len(KNOWN)),
)
def test_mutated_and_truncated_files_never_raise_otherwise(
    probe: types.ModuleType, changes: list[tuple[int, int]], length: int
) -> None:
    data = bytearray(KNOWN)
    for offset, value in changes:
        data[offset] = value
    never_raises_otherwise(probe, bytes(data))
    never_raises_otherwise(probe, bytes(data[:length]))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(0, 420), st.integers(0, 420))
def test_fatbin_entries_over_random_bytes_stop(probe: types.ModuleType, data: bytes, start: int, size: int) -> None:
    try:
        entries = list(probe.fatbin_entries(Budget(data, reads=2 * len(data) + 10), start, size, 1000))
    except probe.FormatError:
        return
    assert len(entries) <= 1000


ENTRIES = st.lists(
    st.tuples(
        st.sampled_from([1, 2]),
        st.integers(10, 200),
        st.sampled_from([PLAIN, PLAIN | COMPRESSED, PLAIN | ARCH_A, PLAIN | NEW | FAMILY_F]),
        st.integers(0, 40),
        st.sampled_from([64, 80, 96, 112]),
    ),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(ENTRIES, min_size=1, max_size=4))
def test_any_containers_read_back_as_the_model_says(
    probe: types.ModuleType, containers: list[list[tuple[int, int, int, int, int]]]
) -> None:
    fatbin = b"".join(container(*[entry(*item) for item in items]) for items in containers)
    expected: dict[str, set[str]] = {"sass": set(), "ptx": set()}
    for kind, sm, flags, _, _ in [item for items in containers for item in items]:
        suffix = "a" if flags & ARCH_A else "f" if flags & FAMILY_F else ""
        expected["sass" if kind == 2 else "ptx"].add(("sm_" if kind == 2 else "compute_") + f"{sm}{suffix}")
    result = archs(probe, elf({".nv_fatbin": fatbin}))
    assert {key: set(value) for key, value in result.items()} == expected
    for names in result.values():
        numbers = [int(name.split("_")[1].rstrip("af")) for name in names]
        assert numbers == sorted(numbers) and len(set(names)) == len(names)


# --- sorting and the printed JSON --------------------------------------------------------------------


def test_architectures_sort_by_number_then_suffix(probe: types.ModuleType) -> None:
    names = ["sm_120", "sm_100f", "sm_90a", "sm_75", "sm_100", "sm_90", "sm_100a", "sm_80", "sm_80", "sm_121a"]
    assert probe.sorted_archs(names) == [
        "sm_75",
        "sm_80",
        "sm_90",
        "sm_90a",
        "sm_100",
        "sm_100a",
        "sm_100f",
        "sm_120",
        "sm_121a",
    ]
    assert probe.sorted_archs(["compute_120", "compute_90", "compute_100a"]) == [
        "compute_90",
        "compute_100a",
        "compute_120",
    ]


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A made-up site-packages: torch's CUDA library and a CPU one, a link to the first, torchvision's
    extension, a torchaudio library that is not ELF, and a file of another package (not read)."""
    root = tmp_path / "site-packages"
    files = {
        "torch/lib/libtorch_cuda.so": KNOWN,
        "torch/lib/libc10.so": elf({".text": b"\x90" * 8}),
        "torch/_C.cpython-311-x86_64-linux-gnu.so": elf({}),
        "torchvision/_C.so": elf({".nv_fatbin": container(entry(2, 80), entry(1, 120, header_size=80))}),
        "torchaudio/lib/libtorchaudio.so.2": b"not an ELF file",
        "torchaudio/__init__.py": b"",
        "other/lib/libcuda_other.so": KNOWN,
    }
    for relative, content in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(content)
    os.symlink("libtorch_cuda.so", root / "torch/lib/libtorch_cuda.so.2")
    return root


FILES = {
    "torch/lib/libtorch_cuda.so": {"sass": ["sm_75", "sm_90a", "sm_100f"], "ptx": ["compute_90a", "compute_120"]},
    "torchvision/_C.so": {"sass": ["sm_80"], "ptx": ["compute_120"]},
}


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> Callable[[Any], None]:
    """Put a torch module whose _C is `c` in sys.modules."""

    def install(c: Any) -> None:
        torch = types.ModuleType("torch")
        torch.__dict__["_C"] = c
        monkeypatch.setitem(sys.modules, "torch", torch)

    return install


def printed(probe: types.ModuleType, root: Path | None, capsys: pytest.CaptureFixture[str]) -> Any:
    probe.main([str(root)] if root else [])
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("SMOKE_JSON:")
    return parse_payload(out)


def test_the_probe_prints_each_fatbin_file_and_the_flags(
    probe: types.ModuleType, site: Path, fake_torch: Callable[[Any], None], capsys: pytest.CaptureFixture[str]
) -> None:
    fake_torch(types.SimpleNamespace(_cuda_getArchFlags=lambda: "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"))
    assert printed(probe, site, capsys) == {
        "torch_flags": "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120",
        "files": FILES,
        "errors": {"torchaudio/lib/libtorchaudio.so.2": "not an ELF file"},
    }


def test_a_cpu_build_has_no_flags_and_no_error(
    probe: types.ModuleType, site: Path, fake_torch: Callable[[Any], None], capsys: pytest.CaptureFixture[str]
) -> None:
    fake_torch(types.SimpleNamespace())
    payload = printed(probe, site, capsys)
    assert payload["torch_flags"] is None and set(payload["errors"]) == {"torchaudio/lib/libtorchaudio.so.2"}


def test_files_are_read_when_torch_does_not_import(
    probe: types.ModuleType, site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    payload = printed(probe, site, capsys)
    assert payload["torch_flags"] is None
    assert payload["files"] == FILES
    assert payload["errors"]["torch"].startswith("ModuleNotFoundError: import of torch halted")


def test_an_unreadable_file_is_that_files_error(
    probe: types.ModuleType, site: Path, fake_torch: Callable[[Any], None], capsys: pytest.CaptureFixture[str]
) -> None:
    fake_torch(types.SimpleNamespace())
    (site / "torch/lib/libtorch_cuda.so").unlink()
    (site / "torch/lib/libtorch_cuda.so").mkdir()  # the link now names a folder: left out
    (site / "torch/lib/libbroken.so").write_bytes(KNOWN[:200])
    payload = printed(probe, site, capsys)
    assert payload["files"] == {"torchvision/_C.so": FILES["torchvision/_C.so"]}
    assert payload["errors"]["torch/lib/libbroken.so"].endswith("runs past the end of the file")


def test_package_roots_are_found_without_importing(
    probe: types.ModuleType, site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (site / "torchvision/__init__.py").write_text("raise SystemExit('imported')\n")
    monkeypatch.syspath_prepend(str(site))
    assert probe.package_roots(("torchvision", "torchaudio", "no_such_package_4e1f")) == [
        (str(site), "torchvision"),
        (str(site), "torchaudio"),
    ]
    assert "torchvision" not in sys.modules


def test_each_package_is_read_where_it_is_imported_from(
    probe: types.ModuleType,
    site: Path,
    tmp_path: Path,
    fake_torch: Callable[[Any], None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    other = tmp_path / "other-site"  # a second site-packages: only its torchvision is the one imported
    (other / "torchvision").mkdir(parents=True)
    (other / "torchvision/_C.so").write_bytes(elf({".nv_fatbin": container(entry(2, 86))}))
    fake_torch(types.SimpleNamespace())
    monkeypatch.setattr(probe, "package_roots", lambda: [(str(site), "torch"), (str(other), "torchvision")])
    payload = printed(probe, None, capsys)  # no argument: where the import system finds each package
    assert payload["files"] == {
        "torch/lib/libtorch_cuda.so": FILES["torch/lib/libtorch_cuda.so"],
        "torchvision/_C.so": {"sass": ["sm_86"], "ptx": []},
    }
    assert payload["errors"] == {}  # site's torchaudio (not ELF) and torchvision are not the imported ones


def test_a_torch_without_its_extension_has_no_flags(
    probe: types.ModuleType, site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    assert printed(probe, site, capsys)["torch_flags"] is None


def test_the_script_runs_alone_with_the_standard_library(site: Path, tmp_path: Path) -> None:
    script = tmp_path / "run" / "script.py"
    script.parent.mkdir()
    script.write_text(probe_source("cuda_archs"))
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    result = subprocess.run(
        [sys.executable, "-I", str(script), str(site)], capture_output=True, text=True, env=env, timeout=60
    )
    payload = parse_payload(result.stdout)
    assert result.returncode == 0 and payload["files"] == FILES, result.stderr
    assert json.dumps(payload)  # plain JSON
