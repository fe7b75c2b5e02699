"""The difference between a knowledge base and what an index serves, and its writing: a changed pin, a pin that
settles an uncertain fact, a new build, a new release in its place; nothing the index does not show is removed;
the file's comments, order and quoting stay. The index's facts are literals here."""

from __future__ import annotations

import yaml

from torchimages.kb import diff, writer
from torchimages.kb.derive import ReleaseFacts, VariantFacts

KB = """\
# top comment
sources:
  PYPI: "PyPI"

torch:
  "2.6":
    patches: ["2.6.0"]
    python: ["3.9", "3.10"]
    pypi_default: cu124
    variants:
      cpu: {}
      cu124: {cudnn: "9.1.0.70", nccl: "2.21.5"}     # the default
      cu126: {cudnn: "9.5.1.17", nccl: "2.21.5"}
    torchvision: {"2.6.0": "0.21.0"}
    torchaudio: {"2.6.0": "2.6.0"}
    platforms:
      linux/arm64:
        cpu: {index: pypi, confidence: S, sources: [PYPI]}
    confidence: V
    uncertain: [variants.cu126.nccl]
    sources: [PYPI]
  "2.8":
    patches: ["2.8.0"]
    python: ["3.9"]
    pypi_default: cu128
    variants:
      cu128: {cudnn: "9.10.2.21", nccl: "2.27.3"}
    confidence: V
    sources: [PYPI]
# after torch
"""
TAG = "KB20261204"


def _v(cudnn: str | None, nccl: str | None, toolkit: str | None = None, source: str = "f.metadata") -> VariantFacts:
    return VariantFacts(cudnn, nccl, toolkit, None, source)


def _facts(minor: str, variants: dict[str, VariantFacts], **more: object) -> ReleaseFacts:
    fields: dict[str, object] = {
        "patches": (f"{minor}.0",),
        "python": ("3.9",),
        "pypi_default": None,
        "arm64": {},
        "sources": ("s.metadata",),
    }
    fields.update(more)
    return ReleaseFacts(minor=minor, variants=variants, **fields)  # type: ignore[arg-type]


def _changes(
    found: dict[str, ReleaseFacts], companions: dict[str, dict[str, str]] | None = None
) -> tuple[diff.Change, ...]:
    return diff.changes(yaml.safe_load(KB), found, companions or {}, TAG, "the index")


def test_a_changed_pin_disagrees() -> None:
    found = _changes({"2.6": _facts("2.6", {"cu124": _v("9.1.0.70", "2.21.6")})})
    kinds = {(c.kind, c.path) for c in found}
    assert ("changed", ("torch", "2.6", "variants", "cu124", "nccl")) in kinds
    assert diff.disagrees(found)
    text = writer.apply(KB, found, TAG)
    assert 'cu124: {cudnn: "9.1.0.70", nccl: "2.21.6"}     # the default' in text
    assert "    sources: [PYPI, KB20261204]\n" in text and '  KB20261204: "the index"\n\ntorch:' in text


def test_a_seen_pin_settles_its_uncertain_fact() -> None:
    found = _changes({"2.6": _facts("2.6", {"cu126": _v("9.5.1.17", "2.21.5")})})
    assert [(c.kind, c.old) for c in found if c.path[0] == "torch"] == [("settled", "variants.cu126.nccl")]
    assert not diff.disagrees(found)
    text = writer.apply(KB, found, TAG)
    assert "uncertain" not in text
    assert yaml.safe_load(text)["torch"]["2.6"]["variants"]["cu126"] == {"cudnn": "9.5.1.17", "nccl": "2.21.5"}


def test_nothing_unseen_is_removed() -> None:
    assert _changes({"2.6": _facts("2.6", {})}) == ()  # cpu, cu124, cu126 not shown: not gone
    assert _changes({}) == ()


def test_a_new_build_goes_among_the_builds() -> None:
    found = _changes({"2.6": _facts("2.6", {"cu118": _v("9.1.0.70", "2.21.5")})})
    assert [c.kind for c in found if c.path[0] == "torch"] == ["new"]
    text = writer.apply(KB, found, TAG)
    order = list(yaml.safe_load(text)["torch"]["2.6"]["variants"])
    assert order == ["cpu", "cu118", "cu124", "cu126"]
    assert '      cu118: {cudnn: "9.1.0.70", nccl: "2.21.5"}\n' in text


def test_a_new_release_goes_in_its_place_and_older_ones_are_not_its_concern() -> None:
    facts = _facts(
        "2.7",
        {"cpu": _v(None, None), "cu126": _v("9.5.1.17", "2.26.2")},
        patches=("2.7.0", "2.7.1"),
        python=("3.9", "3.13"),
        pypi_default="cu126",
        arm64={"cpu": ("pypi", "a.metadata")},
    )
    old = _facts("2.5", {"cu124": _v("9.1.0.70", "2.21.5")})
    found = _changes({"2.7": facts, "2.5": old}, {"torchvision": {"2.7.1": "0.22.1"}})
    assert [c.path for c in found] == [("sources", TAG), ("torch", "2.7")]
    text = writer.apply(KB, found, TAG)
    assert text.index('  "2.6":') < text.index('  "2.7":') < text.index('  "2.8":')
    release = yaml.safe_load(text)["torch"]["2.7"]
    assert release["variants"] == {"cpu": {}, "cu126": {"cudnn": "9.5.1.17", "nccl": "2.26.2"}}
    assert release["torchvision"] == {"2.7.1": "0.22.1"} and release["sources"] == [TAG]
    assert release["platforms"] == {"linux/arm64": {"cpu": {"index": "pypi", "confidence": "V", "sources": [TAG]}}}
    assert '    torchvision: {"2.7.1": "0.22.1"}\n' in text
    assert text.startswith("# top comment\n") and text.endswith("# after torch\n")


def test_patches_pythons_companions_and_platforms() -> None:
    facts = _facts(
        "2.6",
        {"cu124": _v("9.1.0.70", "2.21.5")},
        patches=("2.6.0", "2.6.1"),
        python=("3.9", "3.13"),
        pypi_default="cu126",
        arm64={"cpu": ("pypi", "a.metadata"), "cu126": ("pytorch", "b.metadata")},
    )
    found = _changes({"2.6": facts}, {"torchvision": {"2.6.0": "0.21.1", "2.6.1": "0.21.2"}})
    said = {c.path: (c.kind, c.new) for c in found}
    assert said[("torch", "2.6", "patches")] == ("added", ["2.6.0", "2.6.1"])
    assert said[("torch", "2.6", "python")] == ("added", ["3.9", "3.10", "3.13"])
    assert said[("torch", "2.6", "pypi_default")] == ("changed", "cu126")
    assert said[("torch", "2.6", "torchvision", "2.6.0")] == ("changed", "0.21.1")
    assert said[("torch", "2.6", "torchvision", "2.6.1")] == ("added", "0.21.2")
    assert said[("torch", "2.6", "platforms", "linux/arm64", "cpu", "confidence")] == ("settled", "V")
    assert said[("torch", "2.6", "platforms", "linux/arm64", "cu126")][0] == "added"
    loaded = yaml.safe_load(writer.apply(KB, found, TAG))["torch"]["2.6"]
    assert loaded["platforms"]["linux/arm64"]["cpu"] == {"index": "pypi", "confidence": "V", "sources": ["PYPI", TAG]}
    assert loaded["torchvision"] == {"2.6.0": "0.21.1", "2.6.1": "0.21.2"}


def test_the_lines_name_their_source() -> None:
    found = _changes({"2.6": _facts("2.6", {"cu124": _v("9.1.0.70", "2.21.6", source="https://i/t.whl.metadata")})})
    lines = [c.line() for c in found]
    assert "~ torch.2.6.variants.cu124.nccl: 2.21.5 -> 2.21.6 [https://i/t.whl.metadata]" in lines


# --- issue 43: planted bugs no test caught ---------------------------------------------------------------------
def test_an_added_pin_goes_in_its_build_not_its_release() -> None:
    assert _changes({"2.8": _facts("2.8", {"cu128": _v("9.10.2.21", "2.27.3")})}) == ()  # agrees
    added = _changes({"2.8": _facts("2.8", {"cu128": _v("9.10.2.21", "2.27.3", "12.8.1")})})
    assert [(c.kind, c.path, c.new) for c in added if c.path[0] == "torch"] == [
        ("added", ("torch", "2.8", "variants", "cu128", "cuda_toolkit"), "12.8.1")
    ]
    release = yaml.safe_load(writer.apply(KB, added, TAG))["torch"]["2.8"]
    assert release == {
        "patches": ["2.8.0"],
        "python": ["3.9"],
        "pypi_default": "cu128",
        "variants": {"cu128": {"cudnn": "9.10.2.21", "nccl": "2.27.3", "cuda_toolkit": "12.8.1"}},
        "confidence": "V",
        "sources": ["PYPI", TAG],
    }


def test_a_changed_pin_goes_in_its_build_not_its_release() -> None:
    found = _changes({"2.6": _facts("2.6", {"cu126": _v("9.5.1.17", "2.21.6")})})
    release = yaml.safe_load(writer.apply(KB, found, TAG))["torch"]["2.6"]
    assert release["variants"]["cu126"] == {"cudnn": "9.5.1.17", "nccl": "2.21.6"}
    assert set(release) == {*yaml.safe_load(KB)["torch"]["2.6"]}  # no key of the release added or lost


def test_an_arm64_build_of_a_build_the_release_lacks_is_left_out() -> None:
    # PyPI's aarch64 wheel of a build that is not among the release's (file's or index's) builds: no fact
    facts = _facts("2.6", {"cu124": _v("9.1.0.70", "2.21.5")}, arm64={"cu129": ("pypi", "a.metadata")})
    assert [c for c in _changes({"2.6": facts}) if c.path[0] == "torch"] == []
    new = _facts("2.7", {"cu126": _v("9.5.1.17", "2.26.2")}, pypi_default="cu126", arm64={"cu129": ("pypi", "a")})
    release = diff.new_release(new, {}, TAG)
    assert "platforms" not in release and list(release["variants"]) == ["cu126"]


UNCERTAIN_RELEASE = """\
sources:
  PYPI: "PyPI"
torch:
  "2.15":
    patches: ["2.15.0"]
    python: ["3.12"]
    pypi_default: cu132
    variants:
      cpu: {}
      cu132: {cudnn: "9.26.0.51", nccl: "2.30.7"}
    torchvision: {}
    torchaudio: {"2.15.0": "2.11.1"}
    confidence: U
    sources: [PYPI]
"""


def _release_changes(
    facts: ReleaseFacts, companions: dict[str, dict[str, str]] | None = None
) -> tuple[diff.Change, ...]:
    return diff.changes(yaml.safe_load(UNCERTAIN_RELEASE), {"2.15": facts}, companions or {}, TAG, "the index")


def test_a_release_read_but_for_a_build_is_settled_but_for_what_was_not_read() -> None:
    """PyPI serves 2.15.0's default build (cu132) and no `+cpu` wheel: the release is settled, and the cpu build it
    did not read stays uncertain by name (never "verified" unread)."""
    facts = _facts("2.15", {"cu132": _v("9.26.0.51", "2.30.7")}, patches=("2.15.0",), python=("3.12",))
    found = _release_changes(facts)
    assert not diff.disagrees(found)
    release = yaml.safe_load(writer.apply(UNCERTAIN_RELEASE, found, TAG))["torch"]["2.15"]
    assert release["confidence"] == "V"
    assert release["uncertain"] == ["variants.cpu"]


def test_a_release_whose_default_build_or_a_patch_was_not_read_stays_uncertain() -> None:
    other = _facts("2.15", {"cpu": _v(None, None)}, patches=("2.15.0",), python=("3.12",))
    assert _release_changes(other) == ()
    no_patch = _facts("2.15", {"cu132": _v("9.26.0.51", "2.30.7")}, patches=("2.15.1",), python=("3.12",))
    assert all(c.path[-1] != "confidence" for c in _release_changes(no_patch))
