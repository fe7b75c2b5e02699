"""`outdated`: which selected images went stale since they were built (pending security updates, known
vulnerabilities, expired allowlist entries, a moved base, other inputs), for a scheduled job to rebuild
exactly those: exit 1 when any is."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from torchimages import values
from torchimages.cli import common, image_bases
from torchimages.cli import options as shared
from torchimages.cli.common import EXIT_FAILED, EXIT_OK
from torchimages.planning.plan import Plan, Selected
from torchimages.problems import shown

NAME = "outdated"
HELP = "say which images went stale (security updates, vulnerabilities, expired allowlist entries, base); exit 1"


def options(parser: argparse.ArgumentParser) -> None:
    shared.selectors(parser)
    parser.add_argument(
        "--pull", action="store_true", help="check the published images: pull each tag first (default: this engine's)"
    )
    shared.add(
        parser,
        "--network",
        type=shared.checked(values.network),
        default=None,
        help="the network the OS check's container uses to read the image's apt sources (default: the engine's)",
    )
    parser.add_argument(
        "--tags",
        action="store_true",
        help="print the stale images' tags alone, one per line (the details go to stderr): for a job's loop",
    )
    shared.mirror(parser)
    shared.wheel_sources(parser)  # a build's image is judged as built with the sources it would be built with
    shared.security_gate(parser, skip=False)
    shared.engine(parser)


def say(line: str) -> None:
    """A note beside the details (a disagreement on the bases): on standard error, one line."""
    print(shown(f"note: {line}"), file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from torchimages import settings
    from torchimages.building import build_digest
    from torchimages.building.wheels import WheelSources
    from torchimages.security import staleness

    loaded = common.load_plan(args)
    chosen = common.select(args, loaded)
    common.check_emulation(chosen)  # another platform's image runs the checks under emulation
    common.check_docker(args.docker)
    checks = common.security_options(args, network=args.network)
    sources = WheelSources(args.index_url, tuple(args.extra_index_url or ()), tuple(args.find_links or ()))
    common.check_sources(sources)
    source_date = settings.epoch("SOURCE_DATE_EPOCH")  # as `build` reads it
    engine = common.connect(args.docker)
    engine.check_client()  # the containers' CLI answers for the engine: else nothing would be checked (exit 2)
    details = sys.stderr if args.tags else sys.stdout
    stale = 0
    plans: dict[str, Plan] = {}  # the plan of each other bases an image is judged by
    for s in chosen:
        for image in s.images:
            # Pulled first (--pull), so that the bases it is judged by are those the published image says.
            found = staleness.pulled(engine, image.platform_reference) if args.pull else None
            if found is None:
                ((combination, judged),) = image_bases.judged(
                    args, engine.labels, [Selected(s.combination, (image,))], say, plans
                )
                base = build_digest.base_labels(engine, combination, judged)
                epoch = combination.source_date_epoch if source_date is None else source_date
                made = build_digest.settings_of(sources, epoch)
                local = build_digest.base_reference(combination, judged)
                digest = (
                    None  # a bootstrapped base not made here (a fresh runner): what a build now gives is not known
                    if local is not None and base is None
                    else build_digest.of_image(combination, judged, loaded.images_dir, args.mirror or (), base, made)
                )
                found = staleness.check(engine, combination, judged, checks, build_digest=digest)
                if digest is None:
                    why = f"build digest: its base {local} is not on this machine, so what a build now gives is unknown"
                    found = dataclasses.replace(found, unchecked=(*found.unchecked, why))
            # Each line one line, whatever the image and the registry said (shown); stdout of --tags holds the
            # matrix's tags alone, one per line.
            print("\n".join(shown(line) for line in found.lines()), file=details, flush=True)
            if args.tags and found.stale:
                print(shown(image.own_tag), flush=True)
            stale += found.stale
    total = sum(len(s.images) for s in chosen)
    hint = ": rebuild them (build.py build --rebuild-stale <tag>)" if stale else ""
    said = f"{stale} of {total} images stale{hint}"
    print(said, file=sys.stderr if args.tags else sys.stdout)
    return EXIT_FAILED if stale else EXIT_OK
