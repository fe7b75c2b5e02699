"""`validate`: check the matrix against the knowledge base."""

from __future__ import annotations

import argparse

from torchimages.cli.common import EXIT_OK, load_plan, warn

NAME = "validate"
HELP = "check the matrix against the knowledge base"


def options(parser: argparse.ArgumentParser) -> None:
    """No options beyond the common ones."""


def run(args: argparse.Namespace) -> int:
    loaded = load_plan(args)
    warn(loaded.all_warnings())
    images = sum(len(c.images) for c in loaded.combinations)
    print(f"{args.matrix}: valid, {len(loaded.combinations)} combinations, {images} images")
    return EXIT_OK
