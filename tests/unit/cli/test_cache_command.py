"""`build.py cache`: the layer scans' folder, entries and bytes; `--clear` empties it (the cache's files only).
Exit 0 done, 1 an entry not removed, 2 a bad setting; hostile settings are refused or shown escaped, never a
traceback. And the gate of `build` gets the cache the settings name (none when TORCHIMAGES_SCAN_CACHE=off)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest

from torchimages.cli import common
from torchimages.security import layer_cache
from torchimages.security.layers import Layer
from torchimages.security.leaks import Hit

Cli = Callable[..., tuple[int, str, str]]
FOUND = Layer((Hit("/root/.netrc", "a netrc file"),), entries=2)


def fill(folder: Path, count: int) -> layer_cache.LayerCache:
    cache = layer_cache.LayerCache(folder / layer_cache.FOLDER, 1 << 20)
    for n in range(count):
        assert layer_cache.store(cache, f"sha256:{n:064x}", (), FOUND)
    return cache


def test_cache_shows_the_folder_entries_and_bytes_and_clear_empties_it(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TORCHIMAGES_CACHE_DIR", str(tmp_path / "tool"))
    code, out, err = cli("cache")
    folder = tmp_path / "tool" / "layer-scans"
    assert (code, err) == (0, "") and out == f"{folder}: 0 entries, 0 bytes (limit 67108864 bytes), on\n"
    cache = fill(tmp_path / "tool", 3)
    (cache.folder / "notes.txt").write_text("not the cache's")
    code, out, _ = cli("cache")
    assert code == 0 and f": 3 entries, {layer_cache.usage(cache).bytes} bytes" in out
    code, out, _ = cli("cache", "--clear")
    assert (code, out) == (0, f"{folder}: 3 entries removed\n")
    assert [p.name for p in cache.folder.iterdir()] == ["notes.txt"]
    monkeypatch.setenv("TORCHIMAGES_SCAN_CACHE", "off")
    assert cli("cache")[1].endswith("off (TORCHIMAGES_SCAN_CACHE=off)\n")


def test_the_default_folder_is_under_xdg_cache_home(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    code, out, _ = cli("cache")
    assert code == 0 and out.startswith(f"{tmp_path / 'torchimages' / 'layer-scans'}: 0 entries")


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("TORCHIMAGES_SCAN_CACHE_BYTES", "lots", "TORCHIMAGES_SCAN_CACHE_BYTES='lots' must be a positive whole number"),
        ("TORCHIMAGES_SCAN_CACHE_BYTES", "0", "must be a positive whole number (default 67108864)"),
        ("TORCHIMAGES_SCAN_CACHE_BYTES", "-5", "must be a positive whole number"),
        ("TORCHIMAGES_SCAN_CACHE_BYTES", "9" * 5000, "must be a positive whole number"),
        ("TORCHIMAGES_SCAN_CACHE", "maybe", "TORCHIMAGES_SCAN_CACHE='maybe' must be one of on, off"),
    ],
)
def test_a_bad_setting_is_exit_2_naming_it(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, name: str, value: str, said: str
) -> None:
    monkeypatch.setenv(name, value)
    code, out, err = cli("cache")
    assert (code, out) == (2, "") and said in err and "Traceback" not in err
    assert len(err) < 2000  # a huge value is not echoed whole


@pytest.mark.parametrize("value", ["", "   ", "9" * 40])
def test_an_empty_or_huge_limit_is_taken(cli: Cli, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("TORCHIMAGES_SCAN_CACHE_BYTES", value)
    code, out, _ = cli("cache")
    assert code == 0 and f"(limit {int(value.strip() or 67108864)} bytes)" in out


def test_a_folder_with_control_characters_is_shown_escaped(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TORCHIMAGES_CACHE_DIR", str(tmp_path / "a\x1b[31m\nb\u2028c"))
    for args in (("cache",), ("cache", "--clear")):
        code, out, err = cli(*args)
        assert code == 0 and err == ""
        assert out.count("\n") == 1 and "\x1b" not in out and "\\x1b[31m\\nb\\u2028c" in out


def test_a_file_where_the_folder_should_be(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "tool").write_text("in the way")
    monkeypatch.setenv("TORCHIMAGES_CACHE_DIR", str(tmp_path / "tool"))
    code, out, err = cli("cache")
    assert code == 0 and ": 0 entries, 0 bytes" in out and "Traceback" not in err
    (tmp_path / "tool").unlink()
    (tmp_path / "tool").mkdir()
    (tmp_path / "tool" / "layer-scans").write_text("in the way")
    code, out, err = cli("cache", "--clear")
    assert code == 1 and "error: cannot remove" in err and "Traceback" not in err
    assert (tmp_path / "tool" / "layer-scans").read_text() == "in the way"


def test_the_gate_gets_the_cache_the_settings_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    args = argparse.Namespace(allowlist=None, matrix=tmp_path / "matrix.yaml", require_scan=False, skip_check=[])
    monkeypatch.setenv("TORCHIMAGES_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("TORCHIMAGES_SCAN_CACHE_BYTES", "4096")
    assert common.security_options(args).cache == layer_cache.LayerCache(tmp_path / "c" / "layer-scans", 4096)
    monkeypatch.setenv("TORCHIMAGES_SCAN_CACHE", "off")
    assert common.security_options(args).cache is None
