"""`workflow`: write the GitHub Actions workflow of the plan (.github/workflows/images.yml beside the matrix:
plan, bake and promote per combination and platform, join, keyless signing); `--check`: fail if the committed
one is stale."""

from __future__ import annotations

import argparse
import sys

from torchimages import textfile
from torchimages.cli import options as shared
from torchimages.cli import preflight
from torchimages.cli.common import EXIT_FAILED, EXIT_OK, load_plan
from torchimages.planning import workflow

NAME = "workflow"
HELP = "write the GitHub Actions workflow that builds, promotes, joins and signs the matrix's images"


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output",
        type=shared.path,
        default=None,
        help=f"where the workflow goes (default: {workflow.PATH} beside the matrix)",
    )
    parser.add_argument("--check", action="store_true", help="fail (exit 1) if the file there is stale")


def run(args: argparse.Namespace) -> int:
    loaded = load_plan(args)
    text = workflow.render(loaded, args.matrix.name, args.os_bases or None)
    output = args.output or args.matrix.parent / workflow.PATH
    if args.check:
        try:
            found = textfile.read_bytes(output, "the workflow")
        except textfile.Missing:
            found = None
        if found != text.encode():
            print(f"stale: {output}", file=sys.stderr)
            print("run `make workflow` (python build.py workflow) and commit the result", file=sys.stderr)
            return EXIT_FAILED
        print(f"{output} up to date")
        return EXIT_OK
    preflight.folder("--output", output.parent)
    output.parent.mkdir(parents=True, exist_ok=True)
    preflight.file("--output", output)
    textfile.write_atomically(output, text)
    print(f"wrote {output}")
    return EXIT_OK
