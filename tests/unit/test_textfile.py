"""textfile, the one reader: JSON and YAML nested no deeper than its limit, whichever YAML parser is there."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml

from torchimages import textfile
from torchimages.problems import InputError


def problem(call: object, *args: object) -> str:
    with pytest.raises(InputError) as caught:
        call(*args)  # type: ignore[operator]
    (found,) = caught.value.problems
    return str(found)


@pytest.mark.parametrize("depth", [textfile.MAX_DEPTH + 1, 10**5])
@pytest.mark.parametrize("loader", [yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)])
def test_deep_yaml_is_refused_by_either_parser(monkeypatch: pytest.MonkeyPatch, loader: type, depth: int) -> None:
    """The pure-Python composer recurses per level (RecursionError at about 330); libyaml stops at 1000."""
    monkeypatch.setattr(textfile, "LOADER", loader)
    text = "a:\n  b: " + "[" * depth + "]" * depth + "\n"
    found = problem(textfile.compose_yaml, text, "f.yaml", "the file")
    assert found.startswith("f.yaml:2: error: the file nests lists and mappings deeper than 100 levels at column")


@pytest.mark.parametrize("loader", [yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)])
def test_yaml_at_the_limit_is_read(monkeypatch: pytest.MonkeyPatch, loader: type) -> None:
    monkeypatch.setattr(textfile, "LOADER", loader)
    node = textfile.compose_yaml("[" * textfile.MAX_DEPTH + "]" * textfile.MAX_DEPTH, "f.yaml", "the file")
    assert isinstance(node, yaml.SequenceNode)
    assert textfile.compose_yaml("", "f.yaml", "the file") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[" * 101, "f.json:1: error: the file nests lists and mappings deeper than 100 levels at column 101"),
        ('{"a":\n' * 200, "f.json:101: error: the file nests lists and mappings deeper than 100 levels at column 1"),
        ("{\n  'a': 1}", "f.json:2: error: the file is not JSON: Expecting property name enclosed in double quotes"),
        ("", "f.json:1: error: the file is not JSON: Expecting value at column 1"),
        ("1" * 5000, "f.json: error: the file is not JSON this tool reads: Exceeds the limit"),
    ],
)
def test_json_refusals_are_located(text: str, expected: str) -> None:
    assert problem(textfile.parse_json, text, "f.json", "the file").startswith(expected)


def test_brackets_inside_strings_are_not_nesting() -> None:
    text = '{"a": "' + "[" * 1000 + '", "b": "\\"[[[", "c": [[1]]}'
    assert textfile.parse_json(text, "f.json", "the file")["c"] == [[1]]
    nested = "[" * textfile.MAX_DEPTH + "]" * textfile.MAX_DEPTH
    assert textfile.parse_json(nested, "f.json", "the file") is not None


def test_a_utf8_byte_order_mark_is_allowed_in_json() -> None:
    text = textfile.decode(b'\xef\xbb\xbf{"a": 1}', "f.json", "the file")
    assert textfile.parse_json(text, "f.json", "the file") == {"a": 1}


@pytest.mark.parametrize(
    ("value", "kind"),
    [(None, "null"), ([], "a list"), ({}, "an object"), ("x", "a string"), (True, "true or false"), (1.5, "a number")],
)
def test_kinds_are_named_as_json_names_them(value: object, kind: str) -> None:
    assert textfile.kind(value) == kind


def test_a_written_file_never_replaces_a_device_or_a_fifo(tmp_path: Path) -> None:
    """`bake --output /dev/null` once replaced /dev/null with a regular file (os.replace over a device)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target in (fifo, Path(os.devnull), tmp_path):
        with pytest.raises(OSError, match="not a regular file"):
            textfile.write_atomically(target, "x")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and stat.S_ISCHR(os.stat(os.devnull).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]  # no temporary file left


def test_a_link_is_followed_not_replaced(tmp_path: Path) -> None:
    (tmp_path / "real").write_text("old")
    (tmp_path / "link").symlink_to("real")
    textfile.write_atomically(tmp_path / "link", "new")
    assert (tmp_path / "link").is_symlink() and (tmp_path / "real").read_text() == "new"
