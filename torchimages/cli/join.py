"""`join`: write the index of each selected tag of several platforms from its platforms' images in the registry
(each built, verified and pushed on its own machine: `build --push <tag>-<arch>`), under a temporary tag first,
checked before the tag and its aliases move to it (building/staging.py). Exit 1 when any tag's index was not
written, whatever the others did."""

from __future__ import annotations

import argparse

from torchimages.cli import common
from torchimages.cli import options as shared
from torchimages.cli.common import EXIT_FAILED, EXIT_OK, UsageError
from torchimages.problems import shown as one_line  # the engine's and cosign's words: one line each

NAME = "join"
HELP = "write the index of each selected tag from its platforms' verified images in the registry"


def options(parser: argparse.ArgumentParser) -> None:
    shared.selectors(parser, required=True)
    shared.engine(parser)
    shared.signing(parser, "each index written")


def run(args: argparse.Namespace) -> int:
    from torchimages.building import index, progress, renderers

    common.check_docker(args.docker)  # the client that writes each index: checked as build's and outdated's are
    chosen = [s for s in common.select(args, common.load_plan(args)) if s.combination.multi_platform]
    if not chosen:
        raise UsageError("no selected image is built for several platforms (or another than linux/amd64): no index")
    sign_key = common.check_sign_key(args.sign_key)  # join always writes to the registry: no --push to ask for
    common.check_registry_deadline()
    engine = common.connect(args.docker)
    signer = common.signer(sign_key)
    shown = progress.Progress(renderers.PlainRenderer(print))  # says each signature
    failed = False
    for s in chosen:
        for flavor in dict.fromkeys(i.flavor for i in s.images):
            images = [s.combination.image(flavor, p) for p in s.combination.platforms]
            problems = index.join(engine, images, signer, shown)
            failed = failed or bool(problems)
            said = f"{images[0].reference}: " + (
                "no index:\n    " + "\n    ".join(one_line(p) for p in problems)
                if problems
                else "the index of " + ", ".join(i.platform_reference for i in images)
            )
            print(said)
    return EXIT_FAILED if failed else EXIT_OK
