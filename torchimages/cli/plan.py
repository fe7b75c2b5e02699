"""`plan`: what would be built, in order, or a GitHub Actions matrix."""

from __future__ import annotations

import argparse
import json

from torchimages.cli import options as shared
from torchimages.cli.common import EXIT_OK, load_plan, select
from torchimages.planning import views

NAME = "plan"
HELP = "show what would be built, in order (or a CI matrix)"


def options(parser: argparse.ArgumentParser) -> None:
    shared.selectors(parser, required=True)
    parser.add_argument(
        "--format",
        choices=("text", "github"),
        default="text",
        help="github: a GitHub Actions matrix, one job per combination (`build.py build ${{ matrix.tags }}`)",
    )


def run(args: argparse.Namespace) -> int:
    chosen = select(args, load_plan(args))
    if args.format == "github":
        print(json.dumps(views.ci_matrix(chosen), separators=(",", ":")))
    else:
        for line in views.steps(chosen):
            print(line)
    return EXIT_OK
