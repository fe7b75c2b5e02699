"""`doctor`: whether this machine can build and run the selected images."""

from __future__ import annotations

import argparse

from torchimages.cli import common
from torchimages.cli import options as shared
from torchimages.cli.common import EXIT_FAILED, EXIT_OK
from torchimages.problems import shown

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
    for line in doctor.report(checks):  # the engine's, a registry's, a driver's words among them
        print(shown(line))
    failed = [c.name for c in checks if c.failed]
    print(
        f"doctor: {len(failed)} failed ({', '.join(failed)})"
        if failed
        else "doctor: everything the selection needs is here"
    )
    return EXIT_FAILED if failed else EXIT_OK
