"""Wheel sources: local folders are served on loopback only while the context is open."""

from __future__ import annotations

import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from torchimages.building import requests
from torchimages.building.wheels import Served, WheelSources, local_path, serve
from torchimages.planning import plan


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
        uv = served.uv_toml("https://download.pytorch.org/whl/cu130")  # the same served URLs reach uv
        assert f'index-url = "{served.index_url}"' in uv and f'find-links = ["{served.find_links[0]}"]' in uv
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


def test_without_sources_uv_gets_the_variant_index_and_pip_gets_pypi(write_matrix: Callable[[str], Path]) -> None:
    """The builds' two secrets when nothing was given: uv (the venv) asks the variant's index, pip (uv itself,
    a newer pip) PyPI; uv searches its sources as pip does."""
    (combination,) = plan.load(write_matrix("matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0'}\n")).combinations
    with serve(WheelSources()) as served:
        pip_text, uv_text = requests.wheel_secrets(served, combination)
    assert pip_text == "[global]\nindex-url = https://pypi.org/simple\n"
    assert uv_text == 'index-url = "https://download.pytorch.org/whl/cu130"\nindex-strategy = "unsafe-best-match"\n'


def test_one_source_description_gives_pip_conf_and_uv_toml() -> None:
    """Every source reaches both: the index, the extra indexes (for uv last first: uv takes a version's file
    from the first source that has it, pip from the last), find-links, the plain-http hosts to trust."""
    served = Served(
        "https://pypi.example/simple",
        ("http://127.0.0.1:8001/simple/", "http://127.0.0.1:8002/simple/"),
        ("http://127.0.0.1:8003/", "https://wheels.example/torch/"),
        needs_host_network=True,
        trusted_hosts=("172.17.0.1",),
    )
    assert served.pip_conf("https://download.pytorch.org/whl/cpu") == (
        "[global]\n"
        "index-url = https://pypi.example/simple\n"
        "extra-index-url = http://127.0.0.1:8001/simple/ http://127.0.0.1:8002/simple/\n"
        "find-links = http://127.0.0.1:8003/ https://wheels.example/torch/\n"
        "trusted-host = 172.17.0.1\n"
    )
    assert served.uv_toml("https://download.pytorch.org/whl/cpu") == (
        'index-url = "https://pypi.example/simple"\n'
        'extra-index-url = ["http://127.0.0.1:8002/simple/", "http://127.0.0.1:8001/simple/"]\n'
        'find-links = ["http://127.0.0.1:8003/", "https://wheels.example/torch/"]\n'
        'index-strategy = "unsafe-best-match"\n'
        'allow-insecure-host = ["172.17.0.1"]\n'
    )


def test_a_url_uv_toml_cannot_misread() -> None:
    """Credentials, quotes and backslashes in a URL stay text in the uv.toml (TOML strings, JSON's escapes)."""
    served = Served('https://user:p"w\\x@mirror.example/simple', (), (), needs_host_network=False)
    first = served.uv_toml("https://download.pytorch.org/whl/cpu").splitlines()[0]
    assert first == 'index-url = "https://user:p\\"w\\\\x@mirror.example/simple"'
    assert tomllib.loads(first)["index-url"] == 'https://user:p"w\\x@mirror.example/simple'
