"""Facts from wheel metadata, on recorded answers written here as literals: the pins each build's Requires-Dist
names for its platform, the build it is, each release's facts and the companions' pairs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.kb.test_pages import TORCH_260_METADATA
from torchimages.kb import derive, pages
from torchimages.kb.derive import Build

# torch 2.6.0's metadata as PyPI serves it, without the line that does not parse (test_pages keeps it).
TORCH_260 = TORCH_260_METADATA.replace(b"Requires-Dist: this is not ( a requirement\n", b"")
X86 = 'platform_system == "Linux" and platform_machine == "x86_64"'
# torch 2.11.0's cu130 build as PyPI serves it (plain version): cuda-toolkit and cu13 pins on Linux, any machine.
TORCH_2110 = f"""Metadata-Version: 2.4
Name: torch
Version: 2.11.0
Requires-Dist: cuda-toolkit[cublas,cudart,cufft,curand,cusolver,cusparse,nvrtc]==13.0.2; platform_system == "Linux"
Requires-Dist: cuda-bindings==13.0.3; platform_system == "Linux"
Requires-Dist: nvidia-cudnn-cu13==9.19.0.56; platform_system == "Linux"
Requires-Dist: nvidia-nccl-cu13==2.28.9; platform_system == "Linux"
Requires-Dist: nvidia-nccl-cu12==2.20.5; {X86} and python_version < "3.0"
""".encode()
CPU = b"Metadata-Version: 2.1\nName: torch\nVersion: 2.6.0+cpu\nRequires-Dist: filelock\n"


def _builds(name: str, body: bytes) -> tuple[Build, ...]:
    wheel = pages.wheel(name)
    assert wheel is not None
    return derive.builds(wheel, pages.metadata(body), "https://i/" + name + ".metadata")


def test_pypi_default_build_of_2_6() -> None:
    (build,) = _builds("torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl", TORCH_260)
    assert (build.variant, build.index, build.cudnn, build.nccl, build.cuda_runtime, build.cuda_toolkit) == (
        "cu124",
        "pypi",
        "9.1.0.70",
        "2.21.5",
        "12.4.127",
        None,
    )


def test_markers_are_evaluated_for_the_platform() -> None:
    (build,) = _builds("torch-2.6.0-cp311-cp311-manylinux_2_28_aarch64.whl", TORCH_260)
    assert (build.platform, build.variant, build.cudnn, build.nccl) == ("linux/arm64", "cpu", None, None)


def test_cu13_build_from_its_toolkit_pin() -> None:
    for name in (
        "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torch-2.11.0-cp311-cp311-manylinux_2_28_aarch64.whl",
    ):
        (build,) = _builds(name, TORCH_2110)
        assert (build.variant, build.cudnn, build.nccl, build.cuda_toolkit) == (
            "cu130",
            "9.19.0.56",
            "2.28.9",
            "13.0.2",
        )


def test_the_local_label_names_the_build() -> None:
    (build,) = _builds("torch-2.6.0+cu126-cp311-cp311-manylinux_2_28_x86_64.whl", TORCH_260)
    assert (build.variant, build.index, build.version) == ("cu126", "pytorch", "2.6.0")
    (cpu,) = _builds("torch-2.6.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", CPU)
    assert (cpu.variant, cpu.cudnn) == ("cpu", None)
    assert _builds("torch-2.6.0+rocm6.2-cp311-cp311-manylinux_2_28_x86_64.whl", CPU) == ()
    assert _builds("torch-2.6.0-cp311-cp311-win_amd64.whl", TORCH_260) == ()


def test_a_loose_pin_is_no_fact() -> None:
    meta = pages.metadata(
        b"Name: torch\nVersion: 2.6.0\nRequires-Dist: nvidia-nccl-cu12>=2.21\n"
        b"Requires-Dist: nvidia-cudnn-cu12==9.*\nRequires-Dist: nvidia-cuda-runtime-cu12==12.6.77\n"
    )
    assert derive.pins(meta.requires, {"platform_machine": "x86_64"}) == {"cuda_runtime": "12.6.77"}


def test_arbitrary_text_is_no_pin() -> None:
    meta = pages.metadata(
        b"Name: torch\nVersion: 2.6.0\nRequires-Dist: nvidia-nccl-cu12===2.21.5-evil\n"
        b"Requires-Dist: nvidia-cudnn-cu12==9.1.0.70.1.2.3\n"
    )
    assert derive.pins(meta.requires, {"platform_machine": "x86_64"}) == {}


def test_cuda_build_names() -> None:
    assert [derive.cuda_build(v) for v in ("12.4.127", "13.0.2", "11.8.89", "12", "x", None)] == [
        "cu124",
        "cu130",
        "cu118",
        None,
        None,
        None,
    ]


def _build(version: str, variant: str, index: str, platform: str = "linux/amd64", nccl: str = "2.27.3") -> Build:
    return Build(version, variant, index, platform, ("3.11",), "9.10.2.21", nccl, None, None, f"{version}+{variant}")


def test_release_facts() -> None:
    found = derive.releases(
        [
            _build("2.8.0", "cu128", "pypi"),
            _build("2.8.0", "cu126", "pytorch", nccl="2.27.1"),
            _build("2.8.1", "cu126", "pytorch", nccl="2.27.5"),  # the newest patch's pins
            _build("2.8.0", "cpu", "pypi", platform="linux/arm64"),
        ],
        [
            w
            for name in (
                "torch-2.8.0-cp313-cp313-manylinux_2_28_x86_64.whl",
                "torch-2.8.2-cp39-cp39-manylinux_2_28_aarch64.whl",
            )
            if (w := pages.wheel(name)) is not None
        ],
    )
    facts = found["2.8"]
    assert facts.patches == ("2.8.0", "2.8.1", "2.8.2")
    assert facts.python == ("3.11", "3.13")  # aarch64's cp39 is not linux/amd64's
    assert facts.pypi_default == "cu128"
    assert facts.variants["cu126"].nccl == "2.27.5"
    assert facts.arm64 == {"cpu": ("pypi", "2.8.0+cpu")}


def test_companion_pairs() -> None:
    metas = [
        pages.metadata(b"Name: torchvision\nVersion: 0.21.0+cu126\nRequires-Dist: torch==2.6.0+cu126\n"),
        pages.metadata(b"Name: torchaudio\nVersion: 2.11.1\nRequires-Dist: torch>=2.11\n"),
        pages.metadata(b"Name: torchvision\nVersion: 0.22.1\nRequires-Dist: torch (==2.7.1) ; python_version >= '3'\n"),
    ]
    assert derive.pairs(metas) == {"2.6.0": "0.21.0", "2.7.1": "0.22.1"}


_req = st.sampled_from(
    [
        "nvidia-nccl-cu12==2.21.5",
        "nvidia-cudnn-cu13===9.1",
        "cuda-toolkit[x]==13.0.2; platform_system == 'Linux'",
        "nvidia-cuda-runtime==12.4.127; python_version > 'abc'",
        "nvidia-nccl-cu12==1; platform_release > '1'",
        "nvidia-nccl-cu12==2.0; extra == 'x'",
        "torch==2.6.0",
        "x; os_name == 'nt'",
        "nvidia-cublas==1.0",
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_req, max_size=6),
    st.sampled_from(
        ["torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl", "torch-2.6.0+cu126-cp311-cp311-manylinux_2_28_aarch64.whl"]
    ),
)
def test_builds_property(lines: list[str], name: str) -> None:
    body = ("Name: torch\nVersion: 2.6.0\n" + "".join(f"Requires-Dist: {r}\n" for r in lines)).encode()
    for build in _builds(name, body):
        assert build.variant == "cpu" or build.variant.startswith("cu")


def test_only_cu13_builds_hold_their_toolkit_pin() -> None:
    builds = [
        Build("2.12.0", "cu126", "pytorch", "linux/amd64", ("3.11",), "9.10.2.21", "2.29.3", "12.6.77", "12.6.3", "a"),
        Build("2.12.0", "cu130", "pypi", "linux/amd64", ("3.11",), "9.20.0.48", "2.29.7", None, "13.0.2", "b"),
    ]
    variants = derive.releases(builds)["2.12"].variants
    assert variants["cu126"].held() == {"cudnn": "9.10.2.21", "nccl": "2.29.3"}
    assert variants["cu130"].held() == {"cudnn": "9.20.0.48", "nccl": "2.29.7", "cuda_toolkit": "13.0.2"}


# --- issue 42: only facts read (a cpu build holds no CUDA pin, an unread requirement is no cpu build, final
# releases only, indexes that disagree are refused) ---------------------------------------------------------
CUDA_PINS = (
    "Requires-Dist: nvidia-cudnn-cu12==9.10.2.21\nRequires-Dist: nvidia-nccl-cu12==2.27.3\n"
    "Requires-Dist: nvidia-cuda-runtime-cu12==12.8.90\n"
)


def test_a_cpu_build_that_pins_cuda_is_refused() -> None:
    body = f"Name: torch\nVersion: 2.8.0+cpu\n{CUDA_PINS}".encode()
    with pytest.raises(derive.Refused, match=r"a cpu build \(2.8.0\+cpu, linux/amd64\) whose metadata pins cudnn"):
        _builds("torch-2.8.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", body)
    only_nccl = b"Name: torch\nVersion: 2.8.0+cpu\nRequires-Dist: nvidia-nccl-cu12==2.27.3\n"
    with pytest.raises(derive.Refused, match=r"nccl 2\.27\.3: inconsistent"):
        _builds("torch-2.8.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", only_nccl)


@pytest.mark.parametrize(
    "line",
    [
        "nvidia-cuda-runtime-cu12 (==12.8.90; platform_machine == 'x86_64'",  # the CUDA pin does not parse
        "nvidia-cuda-runtime-cu12==12.8.90; platform_machine == 'x86_64' and",  # nor its marker
    ],
)
def test_a_requirement_that_does_not_parse_makes_the_wheel_unread_not_cpu(line: str) -> None:
    body = f"Name: torch\nVersion: 2.8.0\nRequires-Dist: {line}\n".encode()
    with pytest.raises(derive.Refused, match="does not parse: the wheel's requirements are not known"):
        _builds("torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl", body)


def test_a_marker_that_cannot_be_evaluated_makes_the_wheel_unread() -> None:
    body = b"Name: torch\nVersion: 2.8.0\nRequires-Dist: nvidia-cuda-runtime-cu12==12.8.90; python_version ~= 'x'\n"
    with pytest.raises(derive.Refused, match="cannot be evaluated"):
        _builds("torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl", body)


@pytest.mark.parametrize(
    "version", ["2.8.0.post1", "2.8.0.dev20250101", "1!2.8.0", "2.8.0rc1", "02.8.0", "2.8.0+cu128"]
)
def test_only_final_releases_are_facts(version: str) -> None:
    assert not derive.final(version)
    name = f"torch-{version}-cp311-cp311-manylinux_2_28_x86_64.whl"
    body = f"Name: torch\nVersion: {version}\n{CUDA_PINS}".encode()
    wheel = pages.wheel(name)
    if wheel is not None and wheel.public == version:  # a file name's 02.8.0 is 2.8.0, 2.8.0+cu128 a cu128 build
        assert _builds(name, body) == ()
        assert derive.releases([], [wheel]) == {}  # not a patch either


def test_only_plain_versions_are_pins_and_pairs() -> None:
    meta = pages.metadata(
        b"Name: torch\nVersion: 2.8.0\nRequires-Dist: nvidia-nccl-cu12==2.27.3+cu128\n"
        b"Requires-Dist: nvidia-cudnn-cu12==09.10.2\nRequires-Dist: nvidia-cuda-runtime-cu12==12.8.90\n"
    )
    assert derive.pins(meta.requires, {"platform_machine": "x86_64"}) == {"cuda_runtime": "12.8.90"}
    metas = [
        pages.metadata(b"Name: torchvision\nVersion: 0.23.0.post1\nRequires-Dist: torch==2.8.0\n"),
        pages.metadata(b"Name: torchvision\nVersion: 0.23.1\nRequires-Dist: torch==2.8.1.post1\n"),
        pages.metadata(b"Name: torchvision\nVersion: 0.22.0+cu126\nRequires-Dist: torch==2.7.0+cu126\n"),
    ]
    assert derive.pairs(metas) == {"2.7.0": "0.22.0"}


def _origin(origin: str, nccl: str, variant: str = "cu128", index: str = "pypi") -> Build:
    return Build("2.8.0", variant, index, "linux/amd64", ("3.11",), "9.10.2.21", nccl, None, None, "m", origin)


def test_indexes_that_disagree_on_a_pin_are_refused() -> None:
    with pytest.raises(derive.Refused) as refused:
        derive.releases([_origin("https://b/simple", "2.27.5"), _origin("https://a/simple", "2.27.3")])
    said = str(refused.value)
    assert "torch 2.8.0 linux/amd64 cu128 nccl: 2.27.3 from https://a/simple, 2.27.5 from https://b/simple" in said
    agreeing = [_origin("https://a/simple", "2.27.3"), _origin("https://b/simple", "2.27.3", index="pytorch")]
    assert derive.releases(agreeing)["2.8"].variants["cu128"].nccl == "2.27.3"


def test_indexes_that_disagree_on_the_default_build_are_refused() -> None:
    with pytest.raises(derive.Refused, match="default build: cu128 from https://a/simple, cu126 from https://b"):
        derive.releases([_origin("https://a/simple", "2.27.3"), _origin("https://b/simple", "2.27.3", "cu126")])


def test_a_releases_pythons_come_from_its_amd64_builds_alone() -> None:
    arm = Build("2.8.0", "cpu", "pypi", "linux/arm64", ("3.9", "3.11"), None, None, None, None, "arm")
    assert derive.releases([_origin("https://a/simple", "2.27.3"), arm])["2.8"].python == ("3.11",)


_lines = st.sampled_from(
    [
        "nvidia-cudnn-cu12==9.10.2.21",
        "nvidia-nccl-cu12==2.27.3; platform_machine == 'x86_64'",
        "nvidia-nccl-cu12==2.27.3.post1",
        "nvidia-cudnn-cu12==1!9.1",
        "nvidia-cuda-runtime-cu12==12.8.90",
        "nvidia-cuda-runtime-cu12==12.8.90.dev1",
        "cuda-toolkit==13.0.2; platform_system == 'Linux'",
        "nvidia-cuda-runtime-cu12==12.8.90; python_version ~= 'x'",
        "nvidia-cuda-runtime-cu12 (==12.8.90",
        "nvidia-cublas-cu12",
        "filelock",
    ]
)
_versions = st.sampled_from(["2.8.0", "2.8.0.post1", "2.8.1.dev3", "1!2.8.0", "2.8.0rc1", "2.8.2"])
_labels = st.sampled_from(["", "+cpu", "+cu126", "+cu128.post1", "+rocm6.2"])
_machines = st.sampled_from(["x86_64", "aarch64"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_versions, _labels, _machines, st.lists(_lines, max_size=6)), min_size=1, max_size=5),
    st.lists(st.tuples(_versions, st.sampled_from(["2.8.0", "2.8.0.post1", "2.8.2+cu128", "1!2.8.0"])), max_size=3),
)
def test_derivation_writes_no_cuda_pin_into_a_cpu_build_nor_a_non_final_version(
    wheels: list[tuple[str, str, str, list[str]]], companions: list[tuple[str, str]]
) -> None:
    found: list[Build] = []
    listed = []
    for n, (version, label, machine, lines) in enumerate(wheels):
        name = f"torch-{version}{label}-cp311-cp311-manylinux_2_28_{machine}.whl"
        wheel = pages.wheel(name)
        assert wheel is not None
        listed.append(wheel)
        body = f"Name: torch\nVersion: {version}{label}\n" + "".join(f"Requires-Dist: {r}\n" for r in lines)
        try:
            found += derive.builds(wheel, pages.metadata(body.encode()), f"s{n}", f"https://i{n}/simple")
        except derive.Refused:
            continue
    try:
        facts = derive.releases(found, listed)
    except derive.Refused:
        return
    for release in facts.values():
        assert all(derive.final(v) for v in (*release.patches, *release.python))
        assert "cpu" not in release.variants or release.variants["cpu"].held() == {}
        for variant in release.variants.values():
            assert all(derive.PIN.fullmatch(v) and derive.final(v) for v in variant.held().values())
            assert variant.cuda_runtime is None or derive.final(variant.cuda_runtime)
    metas = [
        pages.metadata(f"Name: torchvision\nVersion: {v}\nRequires-Dist: torch=={t}\n".encode()) for v, t in companions
    ]
    assert all(derive.final(t) and derive.final(v) for t, v in derive.pairs(metas).items())
