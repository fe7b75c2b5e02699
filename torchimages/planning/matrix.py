"""Read matrix.yaml: its keys, values and limits, into a `Matrix` of located rows.

Every scalar is read as the text the user wrote, so `cuda: 12.10` stays `12.10` (YAML would make it
the float 12.1). Each value remembers the line it came from, for error messages. The file's bytes are
read within bounds by `textfile`; the rows come from the axes, excludes and includes by `expansion`
(GitHub Actions matrix semantics).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from torchimages import platforms as platform_names
from torchimages import settings as environment
from torchimages import textfile
from torchimages.combination import FLAVORS
from torchimages.planning import expansion
from torchimages.planning.expansion import MatrixRow, Value
from torchimages.problems import InputError, Problem
from torchimages.reference import mirror_problem, repository_problem
from torchimages.sizes import ALLOWED as SIZE_ALLOWED
from torchimages.sizes import SizeBudget, SizeError, parse_size
from torchimages.suggest import closest
from torchimages.values import show

COMBINATION_KEYS = (
    "torch",
    "cuda",
    "python",
    "os",
    "cudnn",
    "nccl",
    "torchvision",
    "torchaudio",
    "flavors",
    "platforms",
    "size_budget",
    "max_layer",
    "bases",
)
# Per-flavor sizes: an image's whole size, and its largest layer's (both uncompressed, docs/reference/matrix.md).
SIZE_KEYS = ("size_budget", "max_layer")
AXIS_KEYS = tuple(k for k in COMBINATION_KEYS if k not in ("flavors", "platforms", *SIZE_KEYS, "bases"))
MATRIX_KEYS = (*AXIS_KEYS, "include", "exclude")
TOP_LEVEL_KEYS = (
    "repository",
    "base_registry",
    "require_locked_bases",
    "bases",
    "size_budget",
    "max_layer",
    "platforms",
    "matrix",
)
BASES = ("registry", "bootstrap")  # `bases:`: registry bases pulled, or made here from the archive
# A value each key takes, for the refusal of one that is no single value (a list, a mapping, a blank).
EXAMPLES = {
    "torch": "2.7.0",
    "cuda": "12.8",
    "python": "3.12",
    "os": "ubuntu24.04",
    "cudnn": "9",
    "nccl": "2.26.2",
    "torchvision": "0.22.0",
    "torchaudio": "2.7.0",
    "flavors": "runtime",
    "platforms": "linux/arm64",
    "bases": "bootstrap",
    "repository": "torchimages/pytorch",
    "base_registry": "mirror.example.com/hub",
    "require_locked_bases": "true",
    "size_budget": "9GB",
    "max_layer": "2GB",
}
DEFAULT_REPOSITORY = "torchimages/pytorch"
WHAT = "the matrix file"  # how a refusal to read it names it
# Limits on what a (possibly hostile) matrix file may ask for; each but the last is raised by its variable.
MAX_BYTES_VARIABLE = "TORCHIMAGES_MAX_MATRIX_BYTES"
MAX_COMBINATIONS_VARIABLE = "TORCHIMAGES_MAX_COMBINATIONS"
MAX_ENTRIES_VARIABLE = "TORCHIMAGES_MAX_ENTRIES"
MAX_NODES = 1_000_000


@dataclass(frozen=True)
class Matrix:
    """A parsed matrix file."""

    path: str
    repository: str
    rows: tuple[MatrixRow, ...]
    problems: tuple[Problem, ...] = field(default=())
    base_registry: str | None = None  # HOST[:PORT][/PREFIX] registry bases are pulled from (bases.py)
    require_locked_bases: bool = False  # a registry base without a digest in the bases lock is an error
    bases: str | None = None  # the top-level `bases:` (a row's own wins)


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


class _Reader:
    """Turns YAML nodes into Values and MatrixRows, collecting problems on the way."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.problems: list[Problem] = []
        self.visited = 0

    def visit(self, node: yaml.Node) -> None:
        """Count a node walked; aliases share nodes, so a small file can ask for an endless walk."""
        self.visited += 1
        if self.visited > MAX_NODES:
            problem = Problem(
                f"the matrix expands to more than {MAX_NODES} YAML nodes (aliases repeating large lists?); "
                "write it out without aliases",
                self.path,
                _line(node),
            )
            raise InputError([problem])

    def problem(self, node: yaml.Node, message: str, key: str = "", allowed: str = "", suggestion: str = "") -> None:
        self.problems.append(Problem(message, self.path, _line(node), key, allowed, suggestion))

    def mapping(self, node: yaml.Node, what: str, allowed: tuple[str, ...]) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            self.problem(node, f"{what} must be a mapping")
            return {}
        out: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            self.visit(value_node)
            if not isinstance(key_node, yaml.ScalarNode):  # str() of a list or mapping key walks all its aliases
                self.problem(key_node, f"a key in {what} must be a plain word, not a list or mapping")
                continue
            key = str(key_node.value)
            if key not in allowed:
                hint = closest(key, allowed)
                self.problem(
                    key_node,
                    f"unknown key '{key}' in {what}",
                    key=key,
                    allowed=", ".join(allowed),
                    suggestion=f"did you mean '{hint}'?" if hint else "",
                )
            elif key in out:
                self.problem(key_node, f"key '{key}' given twice in {what}", key=key)
            else:
                out[key] = value_node
        return out

    def scalar(self, node: yaml.Node, key: str) -> Value | None:
        if isinstance(node, yaml.ScalarNode) and str(node.value).strip():
            text = str(node.value)
            if text != text.strip():
                self.problem(node, f"{text!r} has spaces around it; write {text.strip()!r}", key=key)
                return None
            return Value(text, _line(node))
        example = f" such as '{EXAMPLES[key]}'" if key in EXAMPLES else ""
        self.problem(node, f"must be a single value{example}", key=key)
        return None

    def scalars(self, node: yaml.Node, key: str) -> list[Value]:
        if isinstance(node, yaml.ScalarNode):
            one = self.scalar(node, key)
            return [one] if one else []
        if not isinstance(node, yaml.SequenceNode) or not node.value:
            example = f" such as [{EXAMPLES[key]}]" if key in EXAMPLES else ""
            self.problem(node, f"must be a non-empty list of values{example}", key=key)
            return []
        values = []
        for item in node.value:
            self.visit(item)
            if value := self.scalar(item, key):
                values.append(value)
        return values

    def entry(self, node: yaml.Node, what: str) -> dict[str, Value]:
        values: dict[str, Value] = {}
        for key, value_node in self.mapping(node, what, COMBINATION_KEYS).items():
            if key == "flavors":
                items = self.scalars(value_node, key)
                if items:
                    values[key] = Value(tuple(str(i.value) for i in items), items[0].line)
            elif key == "platforms":
                if chosen := self.platforms(value_node):
                    values[key] = chosen
            elif key in SIZE_KEYS:
                if budget := self.size_budget(value_node, key):
                    values[key] = budget
            elif key == "bases":
                if chosen := self.bases(value_node):
                    values[key] = chosen
            elif value := self.scalar(value_node, key):
                values[key] = value
        return values

    def bases(self, node: yaml.Node) -> Value | None:
        """`bases: registry` or `bases: bootstrap`."""
        value = self.scalar(node, "bases")
        if value is not None and value.value not in BASES:
            allowed = ", ".join(BASES)
            self.problem(node, f"{show(str(value.value))} is not {' or '.join(BASES)}", "bases", allowed)
            return None
        return value

    def platforms(self, node: yaml.Node) -> Value | None:
        """`platforms: [linux/amd64, linux/arm64]`: a non-empty list of known platforms, each once (PLATFORMS order)."""
        if isinstance(node, yaml.SequenceNode) and not node.value:
            self.problem(node, "an empty list builds nothing", "platforms", platform_names.ALLOWED, "leave it out")
            return None
        items = self.scalars(node, "platforms")
        written = len(node.value) if isinstance(node, yaml.SequenceNode) else 1
        if len(items) != written:  # scalars() said what is wrong (a mapping, a nested list, a blank)
            return None
        try:
            chosen = platform_names.parse([str(i.value) for i in items])
        except platform_names.PlatformError as exc:
            self.problem(node, str(exc), "platforms", platform_names.ALLOWED, exc.suggestion)
            return None
        return Value(chosen, _line(node))

    def size(self, node: yaml.Node, key: str) -> int | None:
        """Bytes of one size (`3GB`, `2.5GiB`), or None with the problem recorded."""
        value = self.scalar(node, key)
        if value is None:
            return None
        try:
            return parse_size(str(value.value))
        except SizeError as exc:
            self.problem(node, str(exc), key, SIZE_ALLOWED, exc.suggestion)
            return None

    def size_budget(self, node: yaml.Node, key: str = "size_budget") -> Value | None:
        """`size_budget: 9GB` (every flavor) or `size_budget: {runtime: 3GB, devel: 9GB}`; `max_layer` alike."""
        if isinstance(node, yaml.ScalarNode):
            size = self.size(node, key)
            return None if size is None else Value(SizeBudget(tuple((f, size) for f in FLAVORS)), _line(node))
        if not isinstance(node, yaml.MappingNode):
            self.problem(node, "must be a size (9GB) or a mapping of flavor to size ({runtime: 3GB})", key)
            return None
        budgets = []
        for flavor, size_node in self.mapping(node, key, FLAVORS).items():
            size = self.size(size_node, key)
            if size is not None:
                budgets.append((flavor, size))
        return Value(SizeBudget(tuple(sorted(budgets))), _line(node)) if budgets else None

    def entries(self, node: yaml.Node, what: str) -> list[tuple[dict[str, Value], int]]:
        if not isinstance(node, yaml.SequenceNode):
            self.problem(node, f"{what} must be a list of mappings", key=what)
            return []
        limit = environment.count(MAX_ENTRIES_VARIABLE)
        if len(node.value) > limit:
            self.problem(
                node,
                f"{len(node.value)} entries, more than the limit of {limit}; set {MAX_ENTRIES_VARIABLE} to raise it",
                key=what,
            )
            return []
        entries = []
        for item in node.value:
            self.visit(item)
            entries.append((self.entry(item, f"an {what} entry"), _line(item)))
        return entries


def parse(text: str, path: str) -> Matrix:
    """Parse a matrix document; problems are collected, never raised for content."""
    reader = _Reader(path)
    root = textfile.compose_yaml(text, path, WHAT)
    if root is None:
        raise InputError([Problem("the matrix file is empty; it needs a 'matrix:' mapping", file=path)])
    top = reader.mapping(root, "the matrix file", TOP_LEVEL_KEYS)
    repository = DEFAULT_REPOSITORY
    defaults = {key: reader.size_budget(top[key], key) for key in SIZE_KEYS if key in top}
    default_platforms = reader.platforms(top["platforms"]) if "platforms" in top else None
    if "repository" in top and (repo := reader.scalar(top["repository"], "repository")):
        if broken := repository_problem(str(repo.value)):
            reader.problem(top["repository"], broken, key="repository")
        else:
            repository = str(repo.value)
    settings = _base_settings(reader, top)
    chosen_bases = reader.bases(top["bases"]) if "bases" in top else None
    default_bases = str(chosen_bases.value) if chosen_bases else None
    rows: list[MatrixRow] = []
    if "matrix" not in top:
        reader.problem(root, "missing the 'matrix:' mapping", key="matrix")
    else:
        body = reader.mapping(top["matrix"], "matrix", MATRIX_KEYS)
        axes = {k: reader.scalars(v, k) for k, v in body.items() if k in AXIS_KEYS}
        excludes = reader.entries(body["exclude"], "exclude") if "exclude" in body else []
        reader.problems += expansion.exclude_problems(path, axes, excludes)
        exclude = [e for e, _ in excludes]
        include = reader.entries(body["include"], "include") if "include" in body else []
        size = math.prod(len(values) for values in axes.values()) if axes else 0
        limit = environment.count(MAX_COMBINATIONS_VARIABLE)
        if size > limit:
            shape = " x ".join(f"{len(v)} {k}" for k, v in axes.items())
            reader.problem(
                top["matrix"],
                f"the axes multiply to {size} combinations ({shape}), more than the limit of {limit}; "
                f"set {MAX_COMBINATIONS_VARIABLE} to raise it",
                key="matrix",
            )
            return Matrix(path, repository, (), tuple(reader.problems), *settings, bases=default_bases)
        rows = expansion.expand(axes, exclude, include, _line(top["matrix"]))
        for key, default in defaults.items():
            rows = expansion.with_budget(rows, default, key)
        rows = expansion.with_platforms(rows, default_platforms)
        if not rows:
            reader.problem(top["matrix"], "the matrix yields no combination", key="matrix")
    return Matrix(path, repository, tuple(rows), tuple(reader.problems), *settings, bases=default_bases)


def _base_settings(reader: _Reader, top: dict[str, yaml.Node]) -> tuple[str | None, bool]:
    """`base_registry` (a HOST[:PORT][/PREFIX] mirror) and `require_locked_bases` (true or false)."""
    mirror = None
    if "base_registry" in top and (value := reader.scalar(top["base_registry"], "base_registry")):
        if broken := mirror_problem(str(value.value)):
            reader.problem(top["base_registry"], broken, key="base_registry")
        else:
            mirror = str(value.value)
    require = False
    if "require_locked_bases" in top and (flag := reader.scalar(top["require_locked_bases"], "require_locked_bases")):
        if flag.value not in ("true", "false"):
            reader.problem(top["require_locked_bases"], "must be true or false", key="require_locked_bases")
        require = flag.value == "true"
    return mirror, require


def read(path: Path) -> Matrix:
    """Read and parse a matrix file."""
    return parse(textfile.read_text(path, WHAT, MAX_BYTES_VARIABLE), str(path))
