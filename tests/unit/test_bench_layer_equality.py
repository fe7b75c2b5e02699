"""bench/layer_equality.py's pure part: the comparison of two revisions' layers (literal diff IDs). The builds
need an engine (docs/benchmarks.md records a run)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import layer_equality as bench  # bench/ scripts are run by path, not installed

A, B, C = ("sha256:" + c * 64 for c in "abc")
EMPTY = "sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"


def test_equal_layers_are_equal() -> None:
    lines, equal = bench.compare([bench.Built("t", (A, B))], [bench.Built("t", (A, B))])
    assert equal and lines[0] == "t: 2 and 2 layers, equal"
    assert lines[1:] == ["   1 aaaaaaaaaaaa aaaaaaaaaaaa =", "   2 bbbbbbbbbbbb bbbbbbbbbbbb ="]


def test_an_empty_layer_more_or_less_is_said_and_not_a_difference() -> None:
    lines, equal = bench.compare([bench.Built("t", (A, EMPTY))], [bench.Built("t", (A,))])
    assert equal and lines[0] == "t: 2 and 1 layers, equal but for empty layers"
    assert lines[2] == "   2 5f70bf18a086 -            differs (empty layer)"


def test_a_changed_or_missing_layer_or_image_differs() -> None:
    assert not bench.compare([bench.Built("t", (A, B))], [bench.Built("t", (A, C))])[1]
    assert not bench.compare([bench.Built("t", (A, B))], [bench.Built("t", (B, A))])[1]  # the order is the image
    assert not bench.compare([bench.Built("t", (A, B))], [bench.Built("t", (A,))])[1]
    lines, equal = bench.compare([bench.Built("t", (A,))], [bench.Built("u", (A,))])
    assert not equal and lines == ["t: not built by the new revision"]
