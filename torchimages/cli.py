"""Command line: validate, list, render, plan (build and test live in their own modules)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from . import plan as planning
from . import render
from .problems import InputError, Problem
from .spec import ImageSpec

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_MATRIX = Path("matrix.yaml")


def load_plan(args: argparse.Namespace) -> planning.Plan:
    """Load the plan named by the common options."""
    return planning.load(args.matrix, args.templates, args.images_dir)


def select(args: argparse.Namespace, loaded: planning.Plan | None = None) -> list[ImageSpec]:
    """The selected images; prints the warnings that concern them."""
    loaded = loaded or load_plan(args)
    chosen = planning.select(loaded, args.selectors)
    lines = {s.source.rpartition(":")[2] for s in chosen}
    warn(p for p in loaded.warnings if str(p.line) in lines)
    return chosen


def warn(problems: Iterable[Problem]) -> None:
    """Print warnings, each distinct message once."""
    for line in summarize(list(problems)):
        print(line, file=sys.stderr)


def summarize(problems: Sequence[Problem]) -> list[str]:
    """One line per distinct message: the first place it occurs, and how many others."""
    seen: dict[tuple[str, str], list[Problem]] = {}
    for problem in problems:
        seen.setdefault((problem.key, problem.message), []).append(problem)
    return [str(ps[0]) + (f" (and {len(ps) - 1} more)" if len(ps) > 1 else "") for ps in seen.values()]


def spec_json(spec: ImageSpec) -> dict[str, object]:
    """The public, stable description of one image (`list --json`)."""
    return {
        "tag": spec.tag,
        "reference": spec.reference,
        "aliases": list(spec.aliases),
        "flavor": spec.flavor,
        "torch": spec.torch,
        "torchvision": spec.torchvision,
        "torchaudio": spec.torchaudio,
        "cuda": spec.cuda or "cpu",
        "cudnn": spec.cudnn,
        "nccl": spec.nccl,
        "python": spec.python,
        "os": spec.os.name,
        "dockerfile": spec.dockerfile,
        "base_image": spec.os.image,
        "toolkit": spec.toolkit.source,
        "min_driver": spec.min_driver,
        "input_digest": spec.digest,
    }


def cmd_validate(args: argparse.Namespace) -> int:
    loaded = load_plan(args)
    warn(loaded.warnings)
    count = len(render.group(loaded.specs))
    print(f"{args.matrix}: valid, {count} combinations, {len(loaded.specs)} images")
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    chosen = select(args)
    if args.json:
        print(json.dumps([spec_json(s) for s in chosen], indent=2))
    else:
        for spec in chosen:
            print(spec.tag)
    return EXIT_OK


def cmd_render(args: argparse.Namespace) -> int:
    loaded = load_plan(args)
    rendered = render.render_all(loaded.specs, loaded.templates)
    if args.check:
        stale = render.stale(rendered, loaded.images_dir)
        for path in stale:
            print(f"stale: {loaded.images_dir / path}", file=sys.stderr)
        if stale:
            print("run `make render` (python build.py render) and commit the result", file=sys.stderr)
            return EXIT_FAILED
        print(f"{len(rendered)} Dockerfiles up to date")
        return EXIT_OK
    changed = render.write(rendered, loaded.images_dir)
    print(f"{len(rendered)} Dockerfiles rendered into {loaded.images_dir}, {len(changed)} changed")
    return EXIT_OK


def describe(spec: ImageSpec) -> str:
    """One plan line: what is built, from what, with which target."""
    base = spec.toolkit.image if spec.flavor == "devel" and spec.toolkit.source == "image" else spec.os.image
    toolkit = f", nvcc from {spec.toolkit.source}" if spec.flavor == "devel" and spec.toolkit.source != "none" else ""
    return (
        f"{spec.reference}\n    dockerfile {spec.dockerfile} --target {spec.flavor}\n"
        f"    base {base} ({spec.os.provider}){toolkit}; wheels from {spec.index_url}\n"
        f"    aliases {', '.join(spec.aliases) or '-'}"
    )


def ci_matrix(specs: list[ImageSpec]) -> dict[str, list[dict[str, str]]]:
    """A GitHub Actions `strategy.matrix`: one job per combination (its flavors share the venv stage)."""
    jobs = []
    for name, members in render.group(specs).items():
        tags = [s.tag for s in members]
        jobs.append(
            {
                "combination": name.removesuffix("/Dockerfile"),
                "tags": " ".join(tags),
                "torch": members[0].torch,
                "cuda": members[0].cuda or "cpu",
                "os": members[0].os.name,
            }
        )
    return {"include": jobs}


def cmd_plan(args: argparse.Namespace) -> int:
    chosen = select(args)
    if args.format == "github":
        print(json.dumps(ci_matrix(chosen), separators=(",", ":")))
        return EXIT_OK
    bootstraps = sorted({s.os.image for s in chosen if s.os.provider == "bootstrap"})
    step = 1
    for image in bootstraps:
        print(f"{step}. bootstrap base {image} from the distribution archive")
        step += 1
    for spec in chosen:
        print(f"{step}. {describe(spec)}")
        step += 1
    return EXIT_OK


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--matrix", type=Path, default=DEFAULT_MATRIX, help="matrix file (default: matrix.yaml)")
    parser.add_argument("--templates", type=Path, default=render.DEFAULT_TEMPLATES, help=argparse.SUPPRESS)
    parser.add_argument(
        "--images-dir",
        type=Path,
        default=None,
        help="where Dockerfiles are rendered (default: images/ beside the matrix)",
    )


Command = Callable[[argparse.Namespace], int]


def parser(
    extra: Sequence[tuple[str, str, Callable[[argparse.ArgumentParser], None], Command]] = (),
) -> argparse.ArgumentParser:
    """The argument parser; `extra` adds (name, help, configure, run) subcommands."""
    top = argparse.ArgumentParser(prog="build.py", description="Build, verify and test PyTorch/CUDA images.")
    sub = top.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="check the matrix against the knowledge base")
    _common(p)
    p.set_defaults(run=cmd_validate)
    p = sub.add_parser("list", help="list image tags (SELECTOR: tag prefix)")
    _common(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("selectors", nargs="*", metavar="SELECTOR")
    p.set_defaults(run=cmd_list)
    p = sub.add_parser("render", help="render Dockerfiles into images/")
    _common(p)
    p.add_argument("--check", action="store_true", help="fail (exit 1) if the committed files are stale")
    p.set_defaults(run=cmd_render)
    p = sub.add_parser("plan", help="show what would be built, in order (or a CI matrix)")
    _common(p)
    p.add_argument("selectors", nargs="+", metavar="SELECTOR")
    p.add_argument(
        "--format",
        choices=("text", "github"),
        default="text",
        help="github: a GitHub Actions matrix, one job per combination (`build.py build ${{ matrix.tags }}`)",
    )
    p.set_defaults(run=cmd_plan)
    for name, help_text, configure, run in extra:
        p = sub.add_parser(name, help=help_text)
        _common(p)
        configure(p)
        p.set_defaults(run=run)
    return top


def main(
    argv: Sequence[str] | None = None,
    extra: Sequence[tuple[str, str, Callable[[argparse.ArgumentParser], None], Command]] = (),
) -> int:
    """Run one command; exit status 0 ok, 1 a check/build/test failed, 2 bad input or usage."""
    args = parser(extra).parse_args(argv)
    try:
        return int(args.run(args))
    except InputError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_USAGE
