"""`list`: the image tags of the selection (`--json`: each image's public description)."""

from __future__ import annotations

import argparse
import json

from torchimages.cli import options as shared
from torchimages.cli.common import EXIT_OK, load_plan, select
from torchimages.planning import views
from torchimages.problems import UsageError

NAME = "list"
HELP = "list image tags"


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--pypi-only",
        action="store_true",
        help="only the images whose wheels PyPI alone serves (exit 2 where the selection has none)",
    )
    shared.selectors(parser)


def run(args: argparse.Namespace) -> int:
    chosen = select(args, load_plan(args))
    if args.pypi_only:
        chosen = [s for s in chosen if s.combination.pypi_only]
        if not chosen:  # as a selector that matches no image: exit 2, never an empty list that looks like success
            selected = " ".join(args.selectors) or "the matrix"
            raise UsageError(
                f"--pypi-only: no image of {selected} builds from PyPI alone (`list --json` says each "
                "one's wheel_index)"
            )
    if args.json:
        print(json.dumps([views.image_json(s.combination, i) for s in chosen for i in s.images], indent=2))
    else:
        for tag in views.tags(chosen):
            print(tag)
    return EXIT_OK
