"""`render`: one Dockerfile and its step scripts per combination into images/ (`--check`: fail if the committed
ones are stale)."""

from __future__ import annotations

import argparse
import sys

from torchimages import render
from torchimages.cli import preflight
from torchimages.cli.common import EXIT_FAILED, EXIT_OK, load_plan

NAME = "render"
HELP = "render one Dockerfile (and its step scripts) per combination into images/"


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help="fail (exit 1) if the committed files are stale")


def run(args: argparse.Namespace) -> int:
    loaded = load_plan(args)
    rendered = render.render_all(loaded.combinations, loaded.templates)
    if args.check:
        stale = render.stale(rendered, loaded.images_dir)
        for path in stale:
            print(f"stale: {loaded.images_dir / path}", file=sys.stderr)
        if stale:
            print("run `make render` (python build.py render) and commit the result", file=sys.stderr)
            return EXIT_FAILED
        print(f"{_count(rendered)} up to date")
        return EXIT_OK
    preflight.folder("--images-dir", loaded.images_dir)
    changed = render.write(rendered, loaded.images_dir)
    print(f"{_count(rendered)} rendered into {loaded.images_dir}, {len(changed)} files changed")
    return EXIT_OK


def _count(rendered: dict[str, str]) -> str:
    dockerfiles = len(render.dockerfiles(rendered))
    return f"{dockerfiles} Dockerfiles and {len(rendered) - dockerfiles} step scripts"
