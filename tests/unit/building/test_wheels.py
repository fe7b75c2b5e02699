"""Wheel sources: local folders are served on loopback only while the context is open."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest

from torchimages.building.wheels import WheelSources, local_path, serve


def make_index(root: Path) -> Path:
    """A PEP 503 index whose project page links `../../files/`, like the ones pip mirrors write."""
    (root / "files").mkdir(parents=True)
    (root / "files" / "demo-1.0-py3-none-any.whl").write_bytes(b"wheel bytes")
    (root / "simple" / "demo").mkdir(parents=True)
    (root / "simple" / "demo" / "index.html").write_text('<a href="../../files/demo-1.0-py3-none-any.whl">x</a>')
    return root / "simple"


def test_local_index_and_find_links_are_served_and_then_gone(tmp_path: Path) -> None:
    index = make_index(tmp_path / "mirror")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "other-2.0-py3-none-any.whl").write_bytes(b"other")
    sources = WheelSources(f"file://{index}", ("https://example.invalid/simple",), (str(wheels),))
    with serve(sources) as served:
        assert served.needs_host_network
        assert served.index_url and served.index_url.startswith("http://127.0.0.1:")
        page = urllib.request.urlopen(served.index_url + "demo/").read().decode()
        wheel_url = served.index_url + "demo/../../files/demo-1.0-py3-none-any.whl"
        assert urllib.request.urlopen(wheel_url).read() == b"wheel bytes" and "demo-1.0" in page
        assert "other-2.0" in urllib.request.urlopen(served.find_links[0]).read().decode()
        conf = served.pip_conf("https://download.pytorch.org/whl/cu130")
        assert f"index-url = {served.index_url}" in conf
        assert "extra-index-url = https://example.invalid/simple" in conf
        url = served.index_url
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=2)


def test_without_local_sources_each_image_keeps_its_index() -> None:
    with serve(WheelSources()) as served:
        assert not served.needs_host_network
        assert served.pip_conf("https://download.pytorch.org/whl/cu118").startswith(
            "[global]\nindex-url = https://download.pytorch.org/whl/cu118\n"
        )


def test_a_missing_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError), serve(WheelSources(find_links=(str(tmp_path / "nope"),))):
        pass


def test_local_path() -> None:
    assert local_path("file:///srv/mirror/simple") == Path("/srv/mirror/simple")
    assert local_path("https://example.invalid/simple") is None
