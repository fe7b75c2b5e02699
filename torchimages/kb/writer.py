"""Apply a difference to compat.yaml's text with ruamel.yaml's round trip, which keeps the comments, the order
of keys and the flow style of the mappings it does not touch. A new release goes in version order among the
others, a new build among the builds; the pins are written quoted and in flow style, as the file writes them.
Every release a change touches names the new source tag in its `sources`; a settled fact leaves `uncertain`."""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from torchimages.kb.derive import version_key
from torchimages.kb.diff import SETTLED, Change, build_key

NESTED = ("variants", "platforms", "linux/arm64")  # keys whose values are block mappings in a release


def _yaml() -> YAML:
    yaml = YAML()  # round trip
    yaml.width = 4096  # never fold the file's long lines
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def _quoted(value: Any) -> Any:
    return DoubleQuotedScalarString(value) if isinstance(value, str) and value[:1].isdigit() else value


def _flow(value: Any) -> Any:
    """A value as the file writes it: mappings and lists in flow style, versions quoted."""
    if isinstance(value, dict):
        out = CommentedMap((_quoted(k), _flow(v)) for k, v in value.items())
        out.fa.set_flow_style()
        return out
    if isinstance(value, list | tuple):
        seq = CommentedSeq(_flow(v) for v in value)
        seq.fa.set_flow_style()
        return seq
    return _quoted(value)


def _release(value: dict[str, Any]) -> CommentedMap:
    """A new release: block mappings for its release, variants and platforms, flow style inside."""
    out = CommentedMap()
    for key, item in value.items():
        if key == "variants":
            out[key] = CommentedMap((v, _flow(f)) for v, f in item.items())
        elif key == "platforms":
            out[key] = CommentedMap((p, CommentedMap((b, _flow(e)) for b, e in bs.items())) for p, bs in item.items())
        else:
            out[key] = _flow(item)
    return out


def _insert_sorted(mapping: CommentedMap, key: str, value: Any, sort_key: Any) -> None:
    keys = list(mapping.keys())
    position = next((i for i, k in enumerate(keys) if sort_key(str(k)) > sort_key(key)), len(keys))
    if position == len(keys):
        _append(mapping, key, value)
    else:
        mapping.insert(position, _quoted(key), value)


def _append(mapping: CommentedMap, key: str, value: Any) -> None:
    """Add `key` last, the comment and blank lines that followed the last key moved after it."""
    last = next(reversed(list(mapping.keys())), None)
    trailing = mapping.ca.items.pop(last, None) if last is not None else None
    mapping[_quoted(key)] = value
    if trailing is not None:
        mapping.ca.items[key] = trailing


def _apply(document: CommentedMap, change: Change, tag: str) -> None:
    path = change.path
    if path[0] == "sources":
        _append(document["sources"], path[1], DoubleQuotedScalarString(change.new))
        return
    torch = document["torch"]
    minor = path[1]
    if len(path) == 2:
        _insert_sorted(torch, minor, _release(change.new), version_key)
        return
    release = torch[minor]
    if change.kind == SETTLED and len(path) in (4, 5) and path[2] == "variants":
        uncertain = release.get("uncertain")
        if uncertain is not None and change.old in uncertain:
            uncertain.remove(change.old)
            if not uncertain:
                del release["uncertain"]
        return
    parent = release
    for key in path[2:-1]:
        if key not in parent:
            parent[key] = CommentedMap()
        parent = parent[key]
    last = path[-1]
    if path[2] == "platforms" and path[-1] == "confidence":  # settled: confidence V, the tag among its sources
        parent[last] = change.new
        sources = parent.setdefault("sources", _flow([]))
        if tag not in sources:
            sources.append(tag)
    elif path[2] == "variants" and len(path) == 4:
        _insert_sorted(parent, last, _flow(change.new), build_key)
    elif last in parent:
        parent[last] = _flow(change.new)
    else:
        _append(parent, last, _flow(change.new))


def _mark(release: CommentedMap, tag: str) -> None:
    sources = release.get("sources")
    if sources is None:
        release["sources"] = _flow([tag])
    elif tag not in sources:
        sources.append(tag)


def apply(text: str, found: Iterable[Change], tag: str) -> str:
    """compat.yaml's text with the changes applied (comments, order and styles kept)."""
    yaml = _yaml()
    document = yaml.load(text)
    for change in found:
        _apply(document, change, tag)
        if change.path[0] == "torch" and len(change.path) > 2:
            _mark(document["torch"][change.path[1]], tag)
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue()
