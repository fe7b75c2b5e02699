"""`doctor`: whether this machine can build and run the selected images."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from torchimages.cli import common
from torchimages.cli import options as shared
from torchimages.cli.common import EXIT_FAILED, EXIT_OK
from torchimages.problems import shown

if TYPE_CHECKING:
    from torchimages.doctor import Check
    from torchimages.planning.plan import Plan, Selected

NAME = "doctor"
HELP = "check that this machine can build and run the selected images"


def options(parser: argparse.ArgumentParser) -> None:
    shared.selectors(parser)
    parser.add_argument(
        "--host-only",
        action="store_true",
        help="check only what running on this machine without Docker needs (driver, /dev/shm)",
    )
    parser.add_argument(
        "--rdma",
        action="store_true",
        help="also check what NCCL over InfiniBand/RoCE across nodes needs: /dev/infiniband (a uverbs device) and "
        "the locked-memory limit",
    )
    shared.require_gpu(parser)
    shared.engine(parser)
    shared.wheel_sources(parser)


def _wheel_sources(chosen: list[Selected], args: argparse.Namespace, matrix: Plan) -> Check:
    """Whether the sources a build would search serve every wheel the selection pins (kb.reach): FAIL naming
    those none serves; WARN (never `ok`) where a source asking for a login could not tell."""
    from torchimages import doctor
    from torchimages.building.wheels import WheelSources
    from torchimages.kb import reach

    sources = WheelSources(args.index_url, tuple(args.extra_index_url or ()), tuple(args.find_links or ()))
    wanted = reach.needs(chosen, sources)
    found = reach.check(wanted, sources.find_links, replaced=bool(sources.index_url))
    if found.missing:
        ways = ["--index-url or --extra-index-url: an index that serves them"]
        pypi_only = common.pypi_only_way(chosen, matrix)
        fix = "; or ".join([*ways, pypi_only] if pypi_only else ways)
        return doctor.Check("wheel sources", doctor.FAIL, " | ".join([*found.missing, *found.unknown]), fix)
    if found.unknown:
        return doctor.Check(
            "wheel sources",
            doctor.WARN,
            "none is known missing, but " + " | ".join(found.unknown),
            "give the index's login in its URL (https://USER:PASSWORD@HOST/...) to have it asked, or check by hand",
        )
    return doctor.Check(
        "wheel sources", doctor.OK, f"each pinned wheel ({len(wanted)}) is served by a source the build searches"
    )


def run(args: argparse.Namespace) -> int:
    from torchimages import doctor, registry

    registry.check_settings()
    loaded = common.load_plan(args)
    chosen = common.select(args, loaded)
    if not args.selectors:  # not every image of the matrix at once: what a user builds first
        chosen, why = doctor.default_selection(loaded)
        print(f"doctor: no SELECTOR, so checking for {why} (`{args.prog} doctor SELECTOR...` names others)")
    need = doctor.needs(chosen, host_only=args.host_only, require_gpu=args.require_gpu, rdma=args.rdma, matrix=loaded)
    tags = [i.tag for i in need.images]
    shown_tags = ", ".join(tags[:3]) + (f" and {len(tags) - 3} more" if len(tags) > 3 else "")
    mode = "run without Docker (--host-only)" if args.host_only else "build and run"
    print(f"doctor: can this machine {mode} {len(tags)} image{'s' * (len(tags) != 1)} ({shown_tags})?")
    checks = doctor.run_checks(doctor.gather(need, args.docker), need)
    if not args.host_only:
        checks.append(_wheel_sources(chosen, args, loaded))
    for line in doctor.report(checks):  # the engine's, a registry's, a driver's words among them
        print(shown(line))
    failed = [c.name for c in checks if c.failed]
    print(
        f"doctor: {len(failed)} failed ({', '.join(failed)})"
        if failed
        else "doctor: everything the selection needs is here"
    )
    return EXIT_FAILED if failed else EXIT_OK
