"""The validated plan: matrix -> resolved, tagged, digested Combinations; selection by tag."""

from __future__ import annotations

import fnmatch
import hashlib
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

from torchimages import compat, reference, render, textfile
from torchimages.combination import BOOTSTRAP, LOCK_FILE, Combination, Image, make_image
from torchimages.planning import bases, matrix, tags
from torchimages.planning.resolve import resolve
from torchimages.problems import InputError, Problem, Severity, errors, warnings
from torchimages.suggest import closest


@dataclass(frozen=True)
class Plan:
    """Every combination a matrix asks for, in build order, plus the warnings that concern no single one."""

    matrix_path: Path
    images_dir: Path
    templates: Path
    combinations: tuple[Combination, ...]
    warnings: tuple[Problem, ...]
    bases: bases.BaseSettings | None = None  # the registry bases' mirror and lock (None: no matrix read)

    def images(self) -> list[tuple[Combination, Image]]:
        """Every image with its combination, in plan order."""
        return [(c, image) for c in self.combinations for image in c.images]

    def all_warnings(self) -> list[Problem]:
        """The matrix's own warnings and every combination's."""
        return [*self.warnings, *(w for c in self.combinations for w in c.warnings)]


@dataclass(frozen=True)
class Selected:
    """A combination and the images of it that a command acts on (its Dockerfile always has every flavor)."""

    combination: Combination
    images: tuple[Image, ...]


def load(
    matrix_path: Path,
    templates: Path = render.DEFAULT_TEMPLATES,
    images_dir: Path | None = None,
    kb: compat.KnowledgeBase | None = None,
    base_registry: str | None = None,
    os_bases: str | None = None,
) -> Plan:
    """Read, expand, resolve and tag a matrix; raise InputError with every problem found.

    `base_registry` (a HOST[:PORT][/PREFIX] mirror) overrides the matrix's `base_registry`; `os_bases`
    (`registry` or `bootstrap`, `--bases`) every row's and the matrix's `bases`."""
    kb = kb or compat.load()
    parsed = matrix.read(matrix_path)
    problems = list(parsed.problems)
    if base_registry is not None and (broken := reference.mirror_problem(base_registry)):
        raise InputError([Problem(broken, key="--base-registry")])
    lock_file = bases.lock_path(matrix_path)
    settings = bases.BaseSettings(
        lock_file, bases.read_locks(lock_file), base_registry or parsed.base_registry, parsed.require_locked_bases
    )
    resolved = [resolve(kb, row, parsed.path, parsed.repository) for row in parsed.rows]
    for result in resolved:
        problems.extend(result.problems)
    images_folder = images_dir or matrix_path.parent / "images"
    _check_folder(images_folder)
    found = []
    for r, row in zip(resolved, parsed.rows, strict=True):
        if r.combination:
            chosen, said = _bases(r.combination, os_bases or row.get("bases") or parsed.bases, r.flavors)
            locked = replace(
                r.combination,
                lock_digest=lock_digest(images_folder / r.combination.folder / LOCK_FILE),
                bases=chosen,
            )
            pinned, base_problems = bases.apply(locked, settings)
            base_problems += said + bases.eol_problems(kb, pinned)
            problems.extend(p for p in base_problems if p.severity is Severity.ERROR)
            pinned = replace(pinned, warnings=(*pinned.warnings, *warnings(base_problems)))
            found.append((pinned, r.flavors))
    problems.extend(_defined_twice([c for c, _ in found]))
    slots = [(c, flavor) for c, flavors in found for flavor in flavors]
    namings, clashes = tags.assign(kb, slots)
    problems.extend(clashes)
    if errors(problems):
        raise InputError(errors(problems) + warnings(problems))
    fingerprint = render.template_fingerprint(templates)
    images: dict[str, list[Image]] = defaultdict(list)
    for (c, flavor), naming in zip(slots, namings, strict=True):
        for platform in c.platforms:
            images[c.folder].append(make_image(c, flavor, naming.tag, naming.aliases, fingerprint, platform))
    complete = [replace(c, images=tuple(images[c.folder])) for c, _ in found]
    complete.sort(key=lambda c: (compat.version_key(c.torch), c.variant, c.os.name))
    plan_warnings = warnings(list(parsed.problems)) + bases.unused_entries(settings, complete)
    return Plan(matrix_path, images_folder, templates, tuple(complete), tuple(plan_warnings), settings)


def _bases(combination: Combination, asked: str | None, flavors: tuple[str, ...]) -> tuple[str, list[Problem]]:
    """How a combination's OS base is obtained: a bootstrap OS's always bootstrapped; a registry OS's pulled, or
    bootstrapped where asked (`--bases`, the row's or the matrix's `bases`) and its archive is known (a warning
    where its devel still starts from a registry's toolkit image)."""
    os = combination.os
    if os.provider == "bootstrap":
        return BOOTSTRAP, []
    if asked != BOOTSTRAP:
        return "registry", []
    if os.archive is None:
        where = combination.defined_at
        problem = Problem(
            f"{os.name} cannot be bootstrapped: the knowledge base names no archive for it",
            file=where.file,
            line=where.line,
            key="bases",
            suggestion="bases: registry",
        )
        return "registry", [problem]
    if "devel" in flavors and combination.toolkit.provider == "image":
        where = combination.defined_at
        warning = Problem(
            f"devel starts from {combination.toolkit.image}, which a registry must serve: --bases bootstrap makes "
            f"the {os.name} base alone (NVIDIA's nvcc wheels of CUDA {combination.cuda} hold no nvcc)",
            file=where.file,
            line=where.line,
            key="bases",
            suggestion="flavors: [runtime] where no registry answers",
            severity=Severity.WARNING,
        )
        return BOOTSTRAP, [warning]
    return BOOTSTRAP, []


def _check_folder(folder: Path) -> None:
    """The images folder, or the first of its parents that exists, must be a directory."""
    for path in (folder, *folder.parents):
        if path.exists() or path.is_symlink():
            if not path.is_dir():
                what = "is" if path == folder else f"is inside {path}, which is"
                raise InputError(
                    [
                        Problem(
                            f"the images folder {what} not a directory",
                            file=str(folder),
                            key="--images-dir",
                            suggestion="name a folder (it is created when missing)",
                        )
                    ]
                )
            return


def _defined_twice(combinations: list[Combination]) -> list[Problem]:
    """Two matrix rows that resolve to the same combination would share one Dockerfile."""
    first: dict[str, Combination] = {}
    problems = []
    for c in combinations:
        if c.folder in first:
            problems.append(
                Problem(
                    f"this row resolves to the same combination as line {first[c.folder].defined_at.line} ({c.folder})",
                    file=c.defined_at.file,
                    line=c.defined_at.line,
                    suggestion="keep one row (list both flavors in it)",
                )
            )
        else:
            first[c.folder] = c
    return problems


def lock_digest(path: Path) -> str | None:
    """The hash of a combination's committed lock file (pip constraints), if it has one; read by `textfile`
    (a regular UTF-8 file within TORCHIMAGES_MAX_FILE_BYTES, else an InputError naming it)."""
    what = f"the lock file ({LOCK_FILE})"
    try:
        data = textfile.read_bytes(path, what)
    except textfile.Missing:
        return None
    textfile.decode(data, str(path), what)  # pip reads it as text
    return "sha256:" + hashlib.sha256(data).hexdigest()


def matches(selector: str, name: str) -> bool:
    """A selector is a tag prefix (`2.7.0-cuda11.8`) or a glob (`2.14.1-*-debian12`)."""
    if any(c in selector for c in "*?["):
        return fnmatch.fnmatchcase(name, selector)
    return name.startswith(selector)


def select(plan: Plan, selectors: list[str]) -> list[Selected]:
    """The images whose tag (or an alias) a selector matches, by combination; every selector must match.

    A selector equal to a tag or alias selects that image alone (the images of every platform it names), one equal
    to a platform's tag (`<tag>-arm64`) that platform's image; otherwise it is a prefix or a glob.
    No selector selects everything.
    """
    blank = [
        Problem(
            f"selector {selector!r} is empty or has spaces around it",
            key="selector",
            suggestion=f"did you mean {selector.strip()!r}?" if selector.strip() else "name a tag prefix or glob",
        )
        for selector in selectors
        if not selector.strip() or selector != selector.strip()
    ]
    if blank:
        raise InputError(blank)
    everything = plan.images()
    if not selectors:
        chosen = everything
    else:
        chosen = []
        problems = []
        for selector in selectors:
            exact = [(c, i) for c, i in everything if selector in (*i.names, i.platform_tag)]
            hits = exact or [(c, i) for c, i in everything if any(matches(selector, n) for n in i.names)]
            if not hits:
                problems.append(_no_match(plan, selector))
            chosen.extend(h for h in hits if h not in chosen)
        if problems:
            raise InputError(problems)
    picked = {image for _, image in chosen}
    return [
        Selected(c, tuple(i for i in c.images if i in picked))
        for c in plan.combinations
        if picked.intersection(c.images)
    ]


def _no_match(plan: Plan, selector: str) -> Problem:
    names = [n for _, i in plan.images() for n in i.names]
    near = sorted({n for n in names if n.startswith(selector.split("-")[0])})[:5]
    guess = closest(selector, names)
    options = near or ([guess] if guess else [])
    return Problem(
        f"no image tag starts with '{selector}'",
        file=str(plan.matrix_path),
        key="selector",
        suggestion=f"closest: {', '.join(options)}" if options else "",
    )
