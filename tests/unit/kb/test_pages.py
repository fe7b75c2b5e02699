"""The parsers of what an index serves, on recorded answers (literals) and on hostile ones (hypothesis): a page
or metadata file that cannot be read is a PageError, never another exception; a name that is not a wheel is
None."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchimages.kb import pages
from torchimages.kb.pages import Link, PageError

# PyPI's JSON page of torch, two files as it served them on 2026-12-04 (https://pypi.org/simple/torch/).
PYPI_TORCH = b"""{"files": [
 {"filename": "torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl",
  "hashes": {"sha256": "7979834102cd5b7a43cc64e87f2f3b14bd0e1458f06e9f88ffa386d07c7446e1"},
  "requires-python": ">=3.9.0", "size": 766715424, "upload-time": "2025-01-29T16:25:15.874217Z",
  "url": "https://files.pythonhosted.org/packages/78/a9/97cbbc97002fff0de394a2da2cdfa859481fdca36996d7bd845d50aa9d8d/torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl",
  "yanked": false},
 {"filename": "torch-2.9.1-cp314-cp314t-win_amd64.whl",
  "hashes": {"sha256": "c88d3299ddeb2b35dcc31753305612db485ab6f1823e37fb29451c8b2732b87e"},
  "requires-python": ">=3.10", "size": 111163659, "upload-time": "2025-11-12T15:23:20.009736Z",
  "url": "https://files.pythonhosted.org/packages/db/2b/f7818f6ec88758dfd21da46b6cd46af9d1b3433e53ddbb19ad1e0da17f9b/torch-2.9.1-cp314-cp314t-win_amd64.whl",
  "yanked": false, "core-metadata": {"sha256": "AB12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12"}}
], "meta": {"_last-serial": "42872345", "api-version": "1.1"}, "name": "torch", "versions": ["2.6.0", "2.9.1"]}"""

# download.pytorch.org's HTML page shape: PEP 503 anchors, a `#sha256=` fragment, PEP 714's metadata attribute.
SHA, META_SHA = "0123456789abcdef" * 4, "fedcba9876543210" * 4
PYTORCH_TORCH = (
    "<!DOCTYPE html>\n<html><body><h1>Links for torch</h1>\n"
    f'<a href="/whl/cu126/torch-2.6.0%2Bcu126-cp311-cp311-manylinux_2_28_x86_64.whl#sha256={SHA}" '
    f'data-dist-info-metadata="sha256={META_SHA}" data-core-metadata="sha256={META_SHA}">'
    "torch-2.6.0+cu126-cp311-cp311-manylinux_2_28_x86_64.whl</a><br/>\n"
    '<a href="/whl/cu126/torch-2.6.0%2Bcu126-cp311-cp311-win_amd64.whl" data-yanked="">'
    "torch-2.6.0+cu126-cp311-cp311-win_amd64.whl</a><br/>\n"
    '<a href="javascript:alert(1)">torch-evil.whl</a>\n</body></html>'
).encode()

# The head of torch 2.6.0's METADATA as PyPI served it (torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl.metadata).
TORCH_260_METADATA = b"""Metadata-Version: 2.1
Name: torch
Version: 2.6.0
Requires-Python: >=3.9.0
Requires-Dist: filelock
Requires-Dist: typing-extensions (>=4.10.0)
Requires-Dist: nvidia-cuda-runtime-cu12 (==12.4.127) ; platform_system == "Linux" and platform_machine == "x86_64"
Requires-Dist: nvidia-cudnn-cu12 (==9.1.0.70) ; platform_system == "Linux" and platform_machine == "x86_64"
Requires-Dist: nvidia-nccl-cu12 (==2.21.5) ; platform_system == "Linux" and platform_machine == "x86_64"
Requires-Dist: opt-einsum (>=3.3) ; extra == 'opt-einsum'
Requires-Dist: this is not ( a requirement

PyTorch is a Python package ...
Requires-Dist: nvidia-nccl-cu12==9.9.9
"""


def test_pypi_json_page() -> None:
    links = pages.json_page(PYPI_TORCH, "https://pypi.org/simple/torch/")
    assert [link.filename for link in links] == [
        "torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl",
        "torch-2.9.1-cp314-cp314t-win_amd64.whl",
    ]
    assert links[0].sha256 == "7979834102cd5b7a43cc64e87f2f3b14bd0e1458f06e9f88ffa386d07c7446e1"
    assert links[0].metadata is None  # the page does not say
    assert links[1].metadata is True and links[1].metadata_sha256 == "ab12" * 16


def test_pytorch_html_page() -> None:
    links = pages.html_page(PYTORCH_TORCH, "https://download.pytorch.org/whl/cu126/torch/")
    assert len(links) == 2  # javascript: is no link
    first = links[0]
    assert first.filename == "torch-2.6.0+cu126-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert first.url == (
        "https://download.pytorch.org/whl/cu126/torch-2.6.0%2Bcu126-cp311-cp311-manylinux_2_28_x86_64.whl"
    )
    assert first.sha256 == "0123456789abcdef" * 4
    assert first.metadata is True and first.metadata_sha256 == "fedcba9876543210" * 4
    assert links[1].yanked and links[1].metadata is None


def test_project_page_by_media_type() -> None:
    url = "https://pypi.org/simple/torch/"
    assert pages.project_page(PYPI_TORCH, "application/vnd.pypi.simple.v1+json", url)
    assert pages.project_page(PYTORCH_TORCH, "text/html", url)
    with pytest.raises(PageError, match="neither"):
        pages.project_page(b"\x89PNG", "image/png", url)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply|does not parse"),
        (b'{"files": 3}', "list of `files`"),
        (b"{", "does not parse"),
    ],
)
def test_bad_json_pages(body: bytes, why: str) -> None:
    with pytest.raises(PageError, match=why):
        pages.json_page(body, "https://pypi.org/simple/torch/")


def test_wheel_names() -> None:
    plain = pages.wheel("torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl")
    assert plain is not None
    assert (plain.version, plain.public, plain.local, plain.pythons, plain.platforms) == (
        "2.6.0",
        "2.6.0",
        None,
        ("3.11",),
        ("linux/amd64",),
    )
    labelled = pages.wheel("torch-2.9.0+cu130-cp314-cp314t-manylinux_2_28_aarch64.whl")
    assert labelled is not None
    assert (labelled.public, labelled.local, labelled.pythons, labelled.platforms) == (
        "2.9.0",
        "cu130",
        ("3.14",),
        ("linux/arm64",),
    )
    both = pages.wheel("uv-0.13.8-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64.whl")
    assert both is not None and both.pythons == () and both.platforms == ("linux/amd64",)
    for name in (
        "torch-2.6.0.tar.gz",
        "torch-notaversion-cp311-cp311-linux_x86_64.whl",
        "x.whl",
        "",
        "torch-2.6.0-cp311-cp311-win_amd64.whl",
    ):
        found = pages.wheel(name)
        assert found is None or found.platforms == ()


def test_metadata_reads_the_headers_only() -> None:
    meta = pages.metadata(TORCH_260_METADATA)
    assert (meta.name, meta.version) == ("torch", "2.6.0")
    names = [str(r.name) for r in meta.requires]
    assert "nvidia-nccl-cu12" in names and names.count("nvidia-nccl-cu12") == 1  # not the description's line
    assert meta.bad == ("this is not ( a requirement",)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"Name: torch\n", "no Name or no Version"),
        (b"Name: torch\nVersion: two\n", "does not parse"),
        (b"\xc3\x28", "not UTF-8"),
    ],
)
def test_bad_metadata(body: bytes, why: str) -> None:
    with pytest.raises(PageError, match=why):
        pages.metadata(body)


# --- hostile input: every parser of index data ------------------------------------------------------------

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
_entry = st.fixed_dictionaries(
    {},
    optional={
        "filename": st.text(max_size=60) | _json_values,
        "url": st.sampled_from(["x.whl", "https://h/x.whl", "file:///etc/passwd", "//h/y", ""]) | _json_values,
        "hashes": st.dictionaries(st.sampled_from(["sha256", "md5"]), _json_values, max_size=2) | _json_values,
        "core-metadata": _json_values,
        "yanked": _json_values,
    },
)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=300), st.builds(lambda f: json.dumps({"files": f}).encode(), st.lists(_entry, max_size=5))
    )
)
def test_json_page_property(body: bytes) -> None:
    try:
        links = pages.json_page(body, "https://pypi.org/simple/torch/")
    except PageError:
        return
    for link in links:
        assert isinstance(link, Link) and link.url.startswith(("http://", "https://"))
        assert link.sha256 is None or len(link.sha256) == 64


_html_bits = st.sampled_from(
    [
        "<a href='",
        "'>",
        "</a>",
        "<a ",
        "href=",
        "data-core-metadata=",
        "sha256=",
        "#sha256=",
        "<!",
        "<![CDATA[",
        "&#x110000;",
        "&",
        ">",
        "<",
        "x.whl",
        "javascript:",
        "%2B",
        "\x00",
        "<script>",
        "data-yanked",
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=300),
        st.lists(_html_bits | st.text(max_size=8), max_size=30).map(lambda p: "".join(p).encode()),
    )
)
def test_html_page_property(body: bytes) -> None:
    try:
        links = pages.html_page(body, "https://download.pytorch.org/whl/cu126/torch/")
    except PageError:
        return
    for link in links:
        assert link.url.startswith(("http://", "https://")) and link.filename and "/" not in link.filename


_name_bits = st.sampled_from(
    [
        "torch",
        "-",
        "2.6.0",
        "+cu126",
        "+",
        "cp311",
        "cp3",
        "manylinux_2_28_x86_64",
        "manylinux2014_aarch64",
        ".",
        "_",
        "win_amd64",
        ".whl",
        "py3",
        "none",
        "1",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=80), st.lists(_name_bits, max_size=14).map("".join)))
def test_wheel_name_property(name: str) -> None:
    found = pages.wheel(name)
    if found is not None:
        assert found.public and all(p.startswith("3.") for p in found.pythons)
        assert set(found.platforms) <= {"linux/amd64", "linux/arm64"}


_meta_lines = st.sampled_from(
    [
        "Name: torch",
        "Version: 2.6.0",
        "Version: x",
        "Requires-Dist: torch==2.6.0",
        "Requires-Dist: nvidia-nccl-cu12 (==2.21.5) ; platform_machine == 'x86_64'",
        "Requires-Dist: ((",
        "Requires-Dist: a; python_version > 'abc'",
        " continued",
        "",
        ":",
        "Requires-Dist:",
        "\udcff",
    ]
)


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=200),
        st.lists(_meta_lines | st.text(max_size=20), max_size=12).map(
            lambda ls: "\n".join(ls).encode("utf-8", "surrogateescape")
        ),
    )
)
def test_metadata_property(body: bytes) -> None:
    try:
        meta = pages.metadata(body)
    except PageError:
        return
    assert meta.name and meta.version


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_the_metadata_inside_a_wheel() -> None:
    body = _zip({"torch/__init__.py": b"", "torch-2.6.0.dist-info/METADATA": TORCH_260_METADATA})
    assert pages.wheel_metadata(body, 100_000).version == "2.6.0"


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"PK\x03\x04 not a zip", "not a readable zip"),
        (_zip({"a.dist-info/METADATA": b"Name: a\nVersion: 1\n", "b.dist-info/METADATA": b""}), "2 .dist-info"),
        (_zip({"x/a.dist-info/METADATA": b"Name: a\nVersion: 1\n"}), "0 .dist-info"),
        (_zip({"a.dist-info/METADATA": b"Name: a\nVersion: 1\n" + b" " * 10_000_000}), "inflates past"),  # a bomb
    ],
)
def test_bad_wheels(body: bytes, why: str) -> None:
    with pytest.raises(PageError, match=why):
        pages.wheel_metadata(body, 100_000)


_good_wheel = _zip({"t-1.0.dist-info/METADATA": b"Name: t\nVersion: 1.0\n"})


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=300),
        st.tuples(st.integers(0, len(_good_wheel) - 1), st.binary(min_size=1, max_size=8)).map(
            lambda cut: _good_wheel[: cut[0]] + cut[1] + _good_wheel[cut[0] + len(cut[1]) :]
        ),
    )
)
def test_wheel_metadata_property(body: bytes) -> None:
    try:
        meta = pages.wheel_metadata(body, 100_000)
    except PageError:
        return
    assert meta.name and meta.version


# PyTorch's torch_stable.html shape (the link text is a path) and nginx autoindex's (the text cut short at 50).
TORCH_STABLE = (
    b'<a href="cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl">'
    b"cpu/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl</a><br>\n"
)
AUTOINDEX = (
    '<a href="../">../</a>\n<a href="torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl#sha256='
    f'{SHA}">torch-2.13.0+cpu-cp311-cp311-manyli..&gt;</a> 06-Dec-2026 10:00  190M\n'
).encode()


@pytest.mark.parametrize("body", [TORCH_STABLE, AUTOINDEX])
def test_a_file_is_named_by_its_href_as_pip_names_it(body: bytes) -> None:
    """pip takes a file's name from the href's last path component (unquoted, no fragment), never the anchor's
    text: a text that is a path or cut short still names the wheel the href serves."""
    names = [link.filename for link in pages.html_page(body, "https://download.pytorch.org/whl/torch_stable.html")]
    assert "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl" in names
    assert all("/" not in n and ".." not in n for n in names)


def test_a_local_link_counts_only_on_a_local_page() -> None:
    """A `file://` index's page may link its files on disk (`../../files/x.whl`); a page served over http may
    not name a file of this machine."""
    body = b'<a href="../../files/numpy-2.2.6-cp311-cp311-manylinux_2_28_x86_64.whl">numpy</a>'
    (local,) = pages.html_page(body, "file:///srv/pypi/simple/numpy/index.html")
    assert local.filename == "numpy-2.2.6-cp311-cp311-manylinux_2_28_x86_64.whl"
    assert local.url == "file:///srv/pypi/files/numpy-2.2.6-cp311-cp311-manylinux_2_28_x86_64.whl"
    hostile = b'<a href="file:///etc/numpy-2.2.6-cp311-cp311-manylinux_2_28_x86_64.whl">x</a>'
    assert pages.html_page(hostile, "https://mirror.example/simple/numpy/") == ()


@settings(max_examples=100, deadline=None)
@given(st.lists(_html_bits | st.sampled_from(["file:", "../", "/", "%2F", "a.whl"]) | st.text(max_size=8), max_size=30))
def test_a_local_page_property(bits: list[str]) -> None:
    """A `file://` index's page, hostile: a PageError or links that are http(s) or file, named without a `/`."""
    try:
        links = pages.html_page("".join(bits).encode(), "file:///srv/pypi/simple/torch/index.html")
    except PageError:
        return
    for link in links:
        assert link.url.startswith(("http://", "https://", "file:")) and link.filename and "/" not in link.filename
