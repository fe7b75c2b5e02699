"""The knowledge base holds the facts users rely on, each with a source and confidence."""

import pytest

from torchimages import compat

KB = compat.load()


def test_2_7_cu118_ships_cudnn_9_not_8() -> None:
    variant = KB.torch["2.7"].variants["cu118"]
    assert (variant.cudnn, variant.nccl) == ("9.1.0.70", "2.21.5")


def test_cuda_variants_per_release() -> None:
    assert KB.torch["2.7"].cuda_variants == ["11.8", "12.6", "12.8"]
    assert KB.torch["2.12"].cuda_variants == ["12.6", "13.0", "13.2"]


def test_every_release_cites_known_sources() -> None:
    for release in KB.torch.values():
        assert release.sources, release.minor
        assert set(release.sources) <= set(KB.sources), release.minor
        assert release.confidence in {"V", "S", "U"}


def test_every_cuda_variant_has_toolkit_facts() -> None:
    for release in KB.torch.values():
        for cuda in release.cuda_variants:
            assert cuda in KB.cuda, f"{release.minor} cu{cuda}"


def test_torchaudio_has_no_release_after_2_11_1() -> None:
    paired = {v for r in KB.torch.values() for v in r.torchaudio.values()}
    newer = [v for v in paired if compat.version_key(v) > compat.version_key(KB.torchaudio_last_release)]
    assert not newer


def test_uncertain_facts_are_marked() -> None:
    assert KB.torch["2.6"].is_uncertain("variants.cu126.nccl")
    assert not KB.torch["2.7"].is_uncertain("variants.cu118.nccl")
    assert KB.torch["2.15"].is_uncertain("variants.cpu")  # PyPI settled cu132 (2026-12-06), not the cpu build
    assert not KB.torch["2.15"].is_uncertain("variants.cu132.cudnn")


def test_variant_names_round_trip() -> None:
    assert compat.variant_cuda("cu118") == "11.8"
    assert compat.variant_cuda("cu130") == "13.0"
    assert compat.cuda_variant("12.6") == "cu126"
    assert compat.variant_cuda("cpu") is None


def test_os_facts() -> None:
    debian = KB.os["debian12"]
    assert (debian.family, debian.version, debian.python, debian.provider) == ("debian", "12", "3.11", "bootstrap")
    assert KB.os["ubuntu24.04"].version == "24.04"


def test_uv_is_pinned_to_one_version_and_the_hashes_of_its_linux_wheels() -> None:
    assert KB.installer.version == "0.13.8"
    x86_64 = "e18a57b8b352eb7c8feb317b9f6f533c8f0ad9673fd6cf34bbe3cf1a9f6a8984"  # manylinux_2_17_x86_64, PyPI
    assert KB.installer.sha256[0] == x86_64 and len(KB.installer.sha256) == 3


def test_a_loose_uv_entry_is_refused() -> None:
    sources = {"UV": "uv's index page"}
    good = {"version": "0.13.8", "sha256": ["ab" * 32], "sources": ["UV"]}
    assert compat._installer(good, sources) == compat.Installer("0.13.8", ("ab" * 32,))
    for bad, says in (
        ({**good, "version": ">=0.13"}, "exact version"),
        ({**good, "sha256": []}, "sha256"),
        ({**good, "sha256": ["AB" * 32]}, "sha256"),
        ({**good, "sources": ["PYPI"]}, "sources"),
    ):
        with pytest.raises(ValueError, match=says):
            compat._installer(bad, sources)


def test_linux_arm64_wheels_as_measured_on_pypi() -> None:
    """PyPI's aarch64 torch 2.9.1 is a CPU build; 2.11.0 and 2.14.1 are the CUDA 13.0 build (PYPIA)."""

    def pypi_build(minor: str) -> list[str]:
        return [v for v, w in KB.torch[minor].platforms["linux/arm64"].items() if w.index == "pypi"]

    assert pypi_build("2.9") == ["cpu"] and pypi_build("2.11") == ["cu130"] and pypi_build("2.14") == ["cu130"]
    assert pypi_build("2.15") == ["cu132"]
    assert KB.torch["2.9"].platforms["linux/arm64"]["cu128"].index == "pytorch"
    assert "cu128" not in KB.torch["2.8"].platforms["linux/arm64"]  # 2.8.0+cu128 has no aarch64 wheel


def test_wheels_for_a_platform() -> None:
    release = KB.torch["2.14"]
    assert release.wheels_for("linux/amd64") is None  # every variant
    assert set(release.wheels_for("linux/arm64") or {}) == {"cu130"}
    wheel = KB.torch["2.9"].platforms["linux/arm64"]["cu128"]
    assert KB.wheel_index_url(wheel) == "https://download.pytorch.org/whl/cu128"
    assert KB.wheel_index_url(release.platforms["linux/arm64"]["cu130"]) == "https://pypi.org/simple"


def test_a_loose_platform_entry_is_refused() -> None:
    sources = {"PYPIA": "PyPI's aarch64 wheels"}
    variants = {"cpu": compat.Variant("cpu", None, None, None, False)}
    good = {"index": "pypi", "confidence": "V", "sources": ["PYPIA"]}
    (wheel,) = compat._platform_wheels("2.9", {"linux/arm64": {"cpu": good}}, variants, sources)["linux/arm64"].values()
    assert wheel == compat.PlatformWheel("cpu", "pypi", "V", ("PYPIA",))
    for bad, says in (
        ({"linux/amd64": {"cpu": good}}, "builds are `variants`"),
        ({"linux/arm64/v8": {"cpu": good}}, "a platform is one of linux/arm64"),
        ({"linux/arm64": {"cu128": good}}, "not a variant of torch 2.9"),
        ({"linux/arm64": {"cpu": {**good, "index": "conda"}}}, "index is pypi or pytorch"),
        ({"linux/arm64": {"cpu": {**good, "confidence": "sure"}}}, "confidence is V, S, U"),
        ({"linux/arm64": {"cpu": {**good, "sources": ["BLOG"]}}}, "name its sources"),
        ({"linux/arm64": {"cpu": {**good, "sources": []}}}, "name its sources"),
        ({"linux/arm64": {"cpu": "pypi"}}, "a mapping such as"),
        ({"linux/arm64": ["cpu"]}, "a mapping of build"),
        (["linux/arm64"], "a mapping of platform"),
    ):
        with pytest.raises(ValueError, match=says):
            compat._platform_wheels("2.9", bad, variants, sources)  # type: ignore[arg-type]


def test_nvcc_wheels_as_listed_on_pypi() -> None:
    """NVIDIA's nvcc wheels of CUDA 11.8 and 12.x hold only bin/ptxas; 13.x's hold bin/nvcc, and nvidia-nvvm cicc
    (NVWHL, listed 2026-12-04)."""
    held = {version: facts.nvcc_wheels for version, facts in KB.cuda.items()}
    assert held == {
        "11.8": False,
        "12.1": False,
        "12.4": False,
        "12.6": False,
        "12.8": False,
        "12.9": False,
        "13.0": True,
        "13.2": True,
    }
    assert "NVWHL" in KB.sources and "2026-12-04" in KB.sources["NVWHL"]


def test_a_cuda_line_must_say_whether_its_wheels_hold_nvcc() -> None:
    good = {
        "image_release": "13.0.3",
        "min_driver": "580.65.06",
        "minor_compat_min_driver": "580.65.06",
        "ubuntu": ["24.04"],
        "arch_list": "9.0",
        "nvcc_wheels": True,
        "confidence": "V",
    }
    facts = compat._cuda("13.0", good)
    assert (facts.nvcc_wheels, facts.ubuntu, facts.image_release) == (True, ("24.04",), "13.0.3")
    missing = {k: v for k, v in good.items() if k != "nvcc_wheels"}
    with pytest.raises(ValueError, match=r"cuda\.13\.0\.nvcc_wheels: missing: say whether NVIDIA's nvcc wheels"):
        compat._cuda("13.0", missing)
    with pytest.raises(ValueError, match=r"cuda\.13\.0\.nvcc_wheels: 'yes' is not true or false"):
        compat._cuda("13.0", {**good, "nvcc_wheels": "yes"})
