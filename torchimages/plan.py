"""The validated plan: matrix -> resolved, tagged, digested ImageSpecs; and selection by tag prefix."""

from __future__ import annotations

import fnmatch
import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

from . import compat, matrix, render, tags
from .problems import InputError, Problem, errors, warnings
from .resolve import resolve
from .spec import LOCK_FILE, ImageSpec, input_digest
from .suggest import closest


@dataclass(frozen=True)
class Plan:
    """Every image a matrix asks for, in build order, plus the warnings found."""

    matrix_path: Path
    images_dir: Path
    templates: Path
    specs: tuple[ImageSpec, ...]
    warnings: tuple[Problem, ...]


def load(
    matrix_path: Path,
    templates: Path = render.DEFAULT_TEMPLATES,
    images_dir: Path | None = None,
    kb: compat.KnowledgeBase | None = None,
) -> Plan:
    """Read, expand, resolve and tag a matrix; raise InputError with every problem found."""
    kb = kb or compat.load()
    parsed = matrix.read(matrix_path)
    problems = list(parsed.problems)
    specs: list[ImageSpec] = []
    for combo in parsed.combinations:
        resolved = resolve(kb, combo, parsed.path, parsed.repository)
        problems.extend(resolved.problems)
        specs.extend(resolved.specs)
    tagged, clashes = tags.assign(kb, specs)
    problems.extend(clashes)
    if errors(problems):
        raise InputError(errors(problems) + warnings(problems))
    fingerprint = render.template_fingerprint(templates)
    images = images_dir or matrix_path.parent / "images"
    locked = (replace(s, lock=lock_digest(images / s.name / LOCK_FILE)) for s in tagged)
    ordered = sorted(
        (replace(s, digest=input_digest(s, fingerprint)) for s in locked),
        key=lambda s: (compat.version_key(s.torch), s.variant, s.os.name, s.flavor),
    )
    return Plan(matrix_path, images, templates, tuple(ordered), tuple(warnings(problems)))


def lock_digest(path: Path) -> str | None:
    """The hash of a combination's committed lock file (pip constraints), if it has one."""
    try:
        return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def matches(selector: str, name: str) -> bool:
    """A selector is a tag prefix (`2.7.0-cuda11.8`) or a glob (`2.14.1-*-debian12`)."""
    if any(c in selector for c in "*?["):
        return fnmatch.fnmatchcase(name, selector)
    return name.startswith(selector)


def select(plan: Plan, selectors: list[str]) -> list[ImageSpec]:
    """Images whose tag (or an alias) a selector matches; every selector must match something.

    A selector equal to a tag selects that image alone; otherwise it is a prefix or a glob.
    """
    if not selectors:
        return list(plan.specs)
    chosen: list[ImageSpec] = []
    problems = []
    for selector in selectors:
        exact = [s for s in plan.specs if selector in (s.tag, *s.aliases)]
        hits = exact or [s for s in plan.specs if any(matches(selector, t) for t in (s.tag, *s.aliases))]
        if not hits:
            names = [t for s in plan.specs for t in (s.tag, *s.aliases)]
            near = sorted({n for n in names if n.startswith(selector.split("-")[0])})[:5]
            guess = closest(selector, names)
            options = near or ([guess] if guess else [])
            problems.append(
                Problem(
                    f"no image tag starts with '{selector}'",
                    file=str(plan.matrix_path),
                    key="selector",
                    suggestion=f"closest: {', '.join(options)}" if options else "",
                )
            )
        chosen.extend(h for h in hits if h not in chosen)
    if problems:
        raise InputError(problems)
    return chosen
