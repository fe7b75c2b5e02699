"""What a real PyPI run showed: notes condensed (one line per project and reason), a --release's companions read
past versions without metadata, PyPI's JSON API read where pypi.org serves no metadata file (its answer hostile
input like any other), and PyPI's aarch64 cpu wheel kept in a restored release. Facts are recorded literals."""

from __future__ import annotations

import datetime
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.index_server import Reply, served
from torchimages.kb import diff, pages, sync
from torchimages.kb.derive import ReleaseFacts, VariantFacts
from torchimages.kb.index import Client

PAGE = "application/vnd.pypi.simple.v1+json"
BIG = 7_739_265  # torchvision 0.29.2's aarch64 wheel as PyPI's page gives its size (no metadata file served)
# PyPI's JSON API answer of torchaudio 2.8.0 (https://pypi.org/pypi/torchaudio/2.8.0/json), its fields trimmed.
TORCHAUDIO_280 = {
    "info": {"name": "torchaudio", "version": "2.8.0", "requires_dist": ["torch==2.8.0"], "requires_python": ">=3.9"},
    "urls": [{"filename": "torchaudio-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl"}],
}


def test_condensed_notes() -> None:
    misses = [
        sync.Miss("torchvision", sync.NO_METADATA, "torchvision-0.29.2-py3-none-manylinux_2_28_aarch64.whl", "a"),
        sync.Miss("torchvision", sync.NO_METADATA, "torchvision-0.29.1-cp311-cp311-manylinux_2_28_x86_64.whl", "b"),
        sync.Miss("torchaudio", sync.UNREADABLE, "torchaudio-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl", "c"),
    ]
    assert sync.condensed("https://pypi.org/simple", misses) == (
        "https://pypi.org/simple: torchvision: 2 wheels without a metadata file "
        "(e.g. torchvision-0.29.2-py3-none-manylinux_2_28_aarch64.whl): not read",
        "https://pypi.org/simple: torchaudio: 1 wheel whose metadata could not be read "
        "(e.g. torchaudio-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl): not read",
    )
    assert sync.condensed("x", []) == ()


def test_pypi_json_api_answer() -> None:
    release = pages.json_release(json.dumps(TORCHAUDIO_280).encode())
    assert (release.metadata.name, release.metadata.version) == ("torchaudio", "2.8.0")
    assert [str(r) for r in release.metadata.requires] == ["torch==2.8.0"] and release.metadata.bad == ()
    assert release.requires_python == ">=3.9"
    assert release.files == ("torchaudio-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl",)


def _info(**info: object) -> bytes:
    return json.dumps({"info": {"name": "torch", "version": "2.8.0", **info}, "urls": []}).encode()


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"", "does not parse"),
        (b"[" * 100_000, "nested too deeply|does not parse"),
        (b"\xff\xfe{}", "is not UTF-8"),
        (b"[]", "with an `info` object"),
        (b'{"info": []}', "with an `info` object"),
        (json.dumps({"info": {"name": 1, "version": "2.8.0"}}).encode(), "no name or no version"),
        (json.dumps({"info": {"name": "torch", "version": "x y"}}).encode(), "does not parse"),
    ],
)
def test_bad_json_api_answers(body: bytes, why: str) -> None:
    with pytest.raises(pages.PageError, match=why):
        pages.json_release(body)


def test_json_api_values_of_the_wrong_kind_are_skipped() -> None:
    assert pages.json_release(_info(requires_dist="torch==2.8.0")).metadata.bad == ("requires_dist is str",)
    assert pages.json_release(_info(requires_dist=None)).metadata.requires == ()
    found = pages.json_release(_info(requires_dist=[1, "nccl==1\nRequires-Dist: evil==1", "a==1"])).metadata
    assert [str(r) for r in found.requires] == ["a==1"] and len(found.bad) == 2  # one header per entry, never more
    assert pages.json_release(_info(requires_python=3)).requires_python is None
    assert pages.json_release(json.dumps({"info": {"name": "a", "version": "1"}, "urls": [1, {}]}).encode()).files == ()


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=200),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=20),
            lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
            max_leaves=20,
        ).map(lambda value: json.dumps({"info": value, "urls": value}).encode()),
        st.fixed_dictionaries(
            {"name": st.text(max_size=10), "version": st.text(max_size=8), "requires_dist": st.lists(st.text())}
        ).map(lambda info: json.dumps({"info": info}).encode()),
    )
)
def test_json_api_answer_property(body: bytes) -> None:
    try:
        release = pages.json_release(body)
    except pages.PageError as exc:
        assert "\n" not in str(exc)
        return
    assert release.metadata.name and release.metadata.version


def _page(files: list[tuple[str, int | None]]) -> Reply:
    entries: list[dict[str, object]] = [{"filename": n, "url": f"/f/{n}", "hashes": {}, "size": s} for n, s in files]
    return Reply(json.dumps({"files": entries}).encode(), PAGE)


TORCH = "torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl"
TORCH_META = b'Name: torch\nVersion: 2.8.0\nRequires-Dist: nvidia-cuda-runtime-cu12==12.8.90; platform_machine == "x86_64"\nRequires-Dist: nvidia-cudnn-cu12==9.10.2.21; platform_machine == "x86_64"\nRequires-Dist: nvidia-nccl-cu12==2.27.3; platform_machine == "x86_64"\n'  # noqa: E501


def _audio(version: str) -> str:
    return f"torchaudio-{version}-cp311-cp311-manylinux_2_28_x86_64.whl"


NEWER = [f"2.{minor}.0" for minor in range(9, 9 + sync.MAX_MISSES + 2)]  # no metadata file, no JSON API


def _replies(json_reply: Reply | None = None) -> dict[str, Reply]:
    replies = {
        "/simple/torch/": _page([(TORCH, 900_000_000)]),
        f"/f/{TORCH}.metadata": Reply(TORCH_META),
        "/simple/torchaudio/": _page([(_audio(v), BIG) for v in [*NEWER, "2.8.0"]]),
        "/simple/torchvision/": Reply(b"", status=404),
    }
    if json_reply is not None:
        replies["/pypi/torchaudio/2.8.0/json"] = json_reply
    return replies


def test_a_release_reads_its_companions_past_versions_without_metadata() -> None:
    answer = Reply(json.dumps({**TORCHAUDIO_280, "urls": [{"filename": _audio("2.8.0")}]}).encode(), "application/json")
    with served(_replies(answer)) as base:
        release = sync.read_index(Client(10), base + "/simple", "2.4", "2.8.0", base + "/pypi")
        every = sync.read_index(Client(10), base + "/simple", "2.4", None, base + "/pypi")
    assert [m.version for m in release.companions["torchaudio"]] == ["2.8.0"]
    assert release.json_api == 1 and len(release.misses) == len(NEWER)
    assert release.builds[0].cudnn == "9.10.2.21"
    assert every.companions["torchaudio"] == ()  # without --release: MAX_MISSES in a row, then no more read
    assert any(f"{sync.MAX_MISSES} versions in a row" in n for n in every.notes)


def test_the_json_api_is_asked_where_no_metadata_file_is_served() -> None:
    name = "torch-2.8.0-cp311-cp311-manylinux_2_28_aarch64.whl"
    body = json.dumps(
        {"info": {"name": "torch", "version": "2.8.0", "requires_dist": []}, "urls": [{"filename": name}]}
    )
    replies = {"/simple/torch/": _page([(name, 100_000_000)]), "/pypi/torch/2.8.0/json": Reply(body.encode())}
    with served(replies) as base:
        found = sync.read_index(Client(10), base + "/simple", "2.4", "2.8.0", base + "/pypi")
        unasked = sync.read_index(Client(10), base + "/simple", "2.4", "2.8.0", None)
    assert [(b.platform, b.variant, b.index, b.source) for b in found.builds] == [
        ("linux/arm64", "cpu", "pypi", base + "/pypi/torch/2.8.0/json")
    ]
    assert unasked.builds == () and unasked.misses[0].reason == sync.NO_METADATA
    assert sync.json_api_of("https://pypi.org/simple") == sync.PYPI_JSON
    assert sync.json_api_of("https://download.pytorch.org/whl/cu128") is None
    assert "PyPI's JSON API" in sync.source_tag(["https://pypi.org/simple"], found_day(), True)[1]


def found_day() -> datetime.date:
    return datetime.date(2026, 12, 4)


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (Reply(b"x" * 10, length=sync.MAX_METADATA_BYTES + 1), "announced, more than"),
        (Reply(b'{"info": {"name": "torchaudio", "version": "2.8.0"}}', length=500), "ended early"),
        (Reply(b"{" + b" " * 50, trickle=0.05), "deadline"),
        (Reply(b'{"info": {"name": "torchaudio", "version": "2.8.0"}, "urls": []}'), "lists no file"),
        (Reply(b"\x00\xff"), "not UTF-8"),
    ],
)
def test_hostile_json_api_answers(reply: Reply, why: str) -> None:
    with served(_replies(reply)) as base:
        found = sync.read_index(Client(1.0 if reply.trickle else 10), base + "/simple", "2.4", "2.8.0", base + "/pypi")
    detail = " ".join(m.detail for m in found.misses) + " " + (found.problem or "")
    assert found.companions.get("torchaudio", ()) == () and why in detail, detail


def test_pypis_aarch64_cpu_wheel_is_kept_in_a_restored_release() -> None:
    facts = ReleaseFacts(
        minor="2.8",
        patches=("2.8.0",),
        python=("3.9", "3.13"),
        pypi_default="cu128",
        variants={"cu128": VariantFacts("9.10.2.21", "2.27.3", None, "12.8.90", "s")},
        arm64={"cpu": ("pypi", "s")},
        sources=("s",),
    )
    release = diff.new_release(facts, {}, "KB")
    assert release["variants"] == {"cpu": {}, "cu128": {"cudnn": "9.10.2.21", "nccl": "2.27.3"}}
    assert release["platforms"] == {"linux/arm64": {"cpu": {"index": "pypi", "confidence": "V", "sources": ["KB"]}}}
    assert release["uncertain"] == ["variants.cpu"]


def test_a_source_key_of_the_same_day_with_another_text_is_not_reused() -> None:
    """A fact must cite the text that says how it was read: the day's key held with another text gives `-2`."""
    said = {"KB20261206": "read by range requests", "KB20261206-2": "read by the JSON API"}
    assert sync.free_tag(said, "KB20261206", "read by range requests") == "KB20261206"
    assert sync.free_tag(said, "KB20261206", "read by the JSON API") == "KB20261206-2"
    assert sync.free_tag(said, "KB20261206", "read from metadata files") == "KB20261206-3"
    assert sync.free_tag({}, "KB20261206", "anything") == "KB20261206"
