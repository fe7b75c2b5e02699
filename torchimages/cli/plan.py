"""`plan`: what would be built, in order, or a GitHub Actions matrix."""

from __future__ import annotations

import argparse
import json
import sys

from torchimages.building.wheels import WheelSources
from torchimages.cli import options as shared
from torchimages.cli.common import EXIT_FAILED, EXIT_OK, check_reachable, load_plan, select
from torchimages.planning import views
from torchimages.problems import UsageError, shown

NAME = "plan"
HELP = "show what would be built, in order (or a CI matrix)"
# The CI matrices of `--format`, by name (`text`, the default: the numbered steps).
MATRICES = {
    "github": views.ci_matrix,
    "github-platforms": views.ci_platform_matrix,
    "github-joins": views.ci_join_matrix,
}


def options(parser: argparse.ArgumentParser) -> None:
    shared.selectors(parser, required=True)
    parser.add_argument(
        "--format",
        choices=("text", *MATRICES),
        default="text",
        help="github: a GitHub Actions matrix, one job per combination (`build.py build ${{ matrix.tags }}`); "
        "github-platforms: one job per combination and platform, with its runner and the platform's own tags; "
        "github-joins: one job per combination of several platforms, for `join` (.github/workflows/images.yml "
        "uses the last two)",
    )
    parser.add_argument(
        "--check-sources",
        action="store_true",
        help="also ask, as build does before it starts, whether each pinned wheel and registry image the selection "
        "needs is served from this machine (exit 1 naming what is not; what an index or registry asking for a login "
        "could not tell is said as not known)",
    )
    shared.wheel_sources(parser)


def run(args: argparse.Namespace) -> int:
    loaded = load_plan(args)
    chosen = select(args, loaded)
    if args.format != "text":
        print(json.dumps(MATRICES[args.format](chosen), separators=(",", ":")))
    else:
        for line in views.steps(chosen):
            print(line)
    if args.check_sources:
        sources = WheelSources(args.index_url, tuple(args.extra_index_url or ()), tuple(args.find_links or ()))
        try:
            untold = check_reachable(chosen, sources, None, loaded)
        except UsageError as exc:
            print(f"plan: {exc}", file=sys.stderr)
            return EXIT_FAILED
        if not untold:
            print("plan: every pinned wheel and registry image the selection needs is served from this machine")
            return EXIT_OK
        for line in untold:  # an index's or a registry's words among them, never a login
            print(f"plan: not known: {shown(line)}")
        print(
            f"plan: nothing the selection needs is known to be missing, but {len(untold)} "
            f"answer{'s' * (len(untold) != 1)} could not be told (not known: above)"
        )
    return EXIT_OK
