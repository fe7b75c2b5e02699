"""GPU architectures: parsing, NVIDIA's coverage rules and the knowledge base's facts, on literal lists."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchimages import archs, compat
from torchimages.archs import Arch, ArchError, Capability

CU130 = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_120"
WHEEL = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"  # PyPI's torch 2.14.1 (cu130), read 2026-12-04


def test_parse_sorts_by_capability_and_writes_the_label_back() -> None:
    found = archs.parse_archs("compute_120 sm_120 sm_100 sm_90 sm_86 sm_80 sm_75 sm_75")
    assert found.sass == (Arch(7, 5), Arch(8, 0), Arch(8, 6), Arch(9, 0), Arch(10, 0), Arch(12, 0))
    assert found.ptx == (Arch(12, 0),)
    assert found.label == CU130


@pytest.mark.parametrize("text", ["", "  ", "sm_7", "sm75", "sm_075", "sm_90b", "compute_", "SM_90", "sm_90 x"])
def test_parse_refuses_what_is_no_architecture_list(text: str) -> None:
    with pytest.raises(ArchError):
        archs.parse_archs(text)


def test_parse_refuses_a_huge_text() -> None:
    with pytest.raises(ArchError, match="at most"):
        archs.parse_archs("sm_90 " * 2000)


@given(st.text(max_size=200))
def test_parse_raises_only_arch_error(text: str) -> None:
    try:
        parsed = archs.parse_archs(text)
    except ArchError:
        return
    assert archs.parse_archs(parsed.label) == parsed


@pytest.mark.parametrize(
    ("listed", "device", "how", "by"),
    [
        (CU130, "9.0", "sass", "sm_90"),  # H100/H200
        (CU130, "8.9", "sass", "sm_86"),  # Ada runs Ampere's 8.6 cubin (same major, minor not below)
        (CU130, "12.1", "sass", "sm_120"),  # GB10 runs 12.0's cubin
        (CU130, "10.3", "sass", "sm_100"),
        ("sm_75 compute_90", "11.0", "ptx", "compute_90"),
        (CU130, "7.0", "none", ""),  # Volta: no cubin of major 7 at or below 7.0, PTX only for 12.0 and newer
        (CU130, "13.0", "ptx", "compute_120"),  # a future GPU JIT-compiles the PTX
        ("sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90", "12.0", "none", ""),  # cu126 on a Blackwell workstation
        ("sm_90a", "9.0", "sass", "sm_90a"),
        ("sm_90a", "9.1", "none", ""),  # arch-specific cubins run on that very capability only
        ("sm_100f", "10.3", "sass", "sm_100f"),  # family-specific: same major, minor not below
        ("sm_80 compute_90a", "9.0", "none", ""),  # arch-specific PTX is not forward compatible
    ],
)
def test_coverage_follows_nvidias_rules(listed: str, device: str, how: str, by: str) -> None:
    found = archs.coverage(archs.parse_archs(listed), archs.parse_capability(device))
    assert (found.how, found.by, found.runs) == (how, by, how != "none")


@pytest.mark.parametrize("text", ["9", "9.", ".0", "9.10", "0.9", "nine", "", "9,0"])
def test_capability_refuses_other_text(text: str) -> None:
    with pytest.raises(ArchError):
        archs.parse_capability(text)


def test_capability_reads_nvidia_smi() -> None:
    assert archs.parse_capability(" 12.0\n") == Capability(12, 0)


def test_difference_names_each_side() -> None:
    expected, found = archs.parse_archs(CU130), archs.parse_archs("sm_75 sm_80 sm_86 sm_90 sm_100 sm_121")
    assert archs.difference(expected, found) == ["missing sm_120", "not promised sm_121", "missing compute_120"]
    assert archs.difference(expected, expected) == []


def test_the_knowledge_base_knows_the_readmes_image() -> None:
    fact = compat.load().archs_of("2.14.1", "cu130", "linux/amd64")
    assert fact is not None and fact.archs == WHEEL and not fact.uncertain
    assert compat.load().archs_of("2.14.1", "cpu", "linux/amd64") is None


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ({"torch": ["2.9"], "archs": "sm_80 sm_75", "confidence": "V", "sources": ["REL"]}, "write"),
        ({"torch": ["2.9"], "archs": "sm_80 bogus", "confidence": "V", "sources": ["REL"]}, "not an architecture"),
        ({"torch": ["2.9"], "archs": "", "confidence": "V", "sources": ["REL"]}, "empty"),
        ({"torch": [], "archs": "sm_80", "confidence": "V", "sources": ["REL"]}, "torch minors"),
        ({"torch": ["2.9"], "archs": "sm_80", "confidence": "X", "sources": ["REL"]}, "confidence"),
        ({"torch": ["2.9"], "archs": "sm_80", "confidence": "V", "sources": ["NOPE"]}, "sources"),
    ],
)
def test_knowledge_base_entries_are_checked(entry: dict[str, object], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        compat._cuda_archs({"linux/amd64": {"cu130": [entry]}}, {"REL": "x"})


def test_a_minor_listed_twice_is_refused() -> None:
    entry = {"torch": ["2.9"], "archs": "sm_80", "confidence": "V", "sources": ["REL"]}
    with pytest.raises(ValueError, match="twice"):
        compat._cuda_archs({"linux/amd64": {"cu130": [entry, entry]}}, {"REL": "x"})


def test_errors_show_outside_text_escaped() -> None:
    """A label or nvidia-smi answer comes from outside: its control characters reach no terminal raw."""
    with pytest.raises(ArchError) as caught:
        archs.parse_archs("sm_90 \x1b[31mred\x1b[0m")
    assert "\x1b" not in str(caught.value) and "\\x1b" in str(caught.value)
    with pytest.raises(ArchError) as caught:
        archs.parse_capability("9.0\x07")
    assert "\x07" not in str(caught.value)
