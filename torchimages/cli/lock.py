"""`lock`: pin every package of built combinations, or (`--bases`) every registry base to its digest."""

from __future__ import annotations

import argparse
import sys

from torchimages.cli import common
from torchimages.cli import options as shared
from torchimages.cli.common import EXIT_FAILED, EXIT_OK, UsageError
from torchimages.problems import shown

NAME = "lock"
HELP = (
    "pin every package of built combinations into images/<combination>/requirements.lock, "
    "or (--bases) every registry base to its digest"
)


def options(parser: argparse.ArgumentParser) -> None:
    shared.selectors(parser)
    parser.add_argument(
        "--bases",
        action="store_true",
        help="lock every registry base (of the SELECTORs, or all) to its digest in <matrix>.bases.lock",
    )
    parser.add_argument(
        "--check", action="store_true", help="with --bases: exit 1 if the registry serves other digests"
    )


def run(args: argparse.Namespace) -> int:
    from torchimages import render
    from torchimages.planning import locking
    from torchimages.planning import plan as planning

    if args.bases:
        from torchimages import registry

        registry.check_settings()
        loaded = common.load_plan(args)
        render.refuse_links(loaded.images_dir)  # the re-render after the lock would refuse them: before any write
        if args.selectors:
            chosen = common.select(args, loaded, in_full=True)
        else:  # every registry base of the plan
            chosen = [planning.Selected(c, c.images) for c in loaded.combinations]
        outcome = locking.lock_bases(loaded, chosen, args.check)
        for line in outcome.err:  # a registry's words among them
            print(shown(line), file=sys.stderr)
        for line in outcome.out:
            print(shown(line))
        return EXIT_OK if outcome.ok else EXIT_FAILED
    if args.check:
        raise UsageError("--check applies to --bases (lock files of packages are read from built images)")
    if not args.selectors:
        raise UsageError("name the combinations whose packages to lock (SELECTOR...), or lock --bases")
    from torchimages.building import locks

    loaded = common.load_plan(args)
    render.refuse_links(loaded.images_dir)  # before a lock file is written into images/, and the re-render
    chosen = common.select(args, loaded, in_full=True)
    common.check_platforms(  # packages are read from built images, found by their public tags
        chosen, "lock", "leave it unlocked for now: one lock file would constrain every platform's build"
    )
    paths = locks.lock_packages(common.connect(), loaded.images_dir, [s.combination for s in chosen])
    for s, path in zip(chosen, paths, strict=True):
        print(shown(f"locked {s.combination.folder}: {path}"))
    _, changed = locking.rerender(loaded)
    print(f"{changed} Dockerfiles re-rendered to use their lock")
    return EXIT_OK
