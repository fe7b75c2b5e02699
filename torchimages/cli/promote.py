"""`promote`: verify, smoke-test and tag the images a bake built (`--from` buildx's metadata file)."""

from __future__ import annotations

import argparse
import sys

from torchimages.cli import common, preflight
from torchimages.cli import options as shared
from torchimages.cli.common import EXIT_FAILED, EXIT_OK

NAME = "promote"
HELP = "verify, smoke-test and tag images a bake built (--from its metadata)"


def options(parser: argparse.ArgumentParser) -> None:
    shared.selectors(parser)
    parser.add_argument(
        "--from",
        dest="metadata",
        type=shared.path,
        required=True,
        metavar="METADATA",
        help="the --metadata-file of `docker buildx bake` (targets of build.py bake)",
    )
    shared.engine(parser)
    shared.temporary_registry(parser)
    shared.outputs(parser)
    shared.signing(parser)
    shared.progress_mode(parser)
    shared.test_gate(parser)
    shared.security_gate(parser)
    parser.add_argument(
        "--allow-unattested",
        action="store_true",
        help="promote an image that carries no SPDX SBOM and SLSA provenance attestations about itself "
        "(default: refused; a classic-store engine's bake attaches none)",
    )


def run(args: argparse.Namespace) -> int:
    from torchimages.building import bake, interrupts, outcome, requests

    shown = common.renderer(args)
    loaded = common.load_plan(args)
    selected = common.select(args, loaded)
    promotion = bake.promotion(args.metadata, selected, bool(args.selectors), args.temporary_registry)
    # Everything is checked before anything is written or started: a refusal leaves the disk as it was.
    common.check_emulation(promotion.chosen)  # another platform's images are verified and tested here too
    preflight.folder("--log-dir", args.log_dir)
    common.check_docker(args.docker)
    common.check_compression(args.compression, args.push)
    common.check_registry_deadline(args.push)
    sign_key = common.check_sign_key(args.sign_key, args.push)
    common.check_names(promotion.chosen)
    gate = common.security_options(args)
    engine = common.connect(args.docker)
    common.check_zstd_platforms(promotion.chosen, args.push, args.compression, engine.containerd_store)
    options = requests.BuildOptions(
        images_dir=loaded.images_dir,
        log_dir=args.log_dir,
        push=args.push,
        compression=args.compression,
        signer=common.signer(sign_key),
        require_attestations=not args.allow_unattested,
    )
    if options.require_attestations and (dropped := common.zstd_attestation_note(args.push, args.compression)):
        print(dropped, file=sys.stderr)
    common.start_outputs(args.log_dir, None)
    promoter = common.make_builder(args, engine, options, shown, security=gate)
    chosen = list(promotion.chosen)
    done = interrupts.until_interrupted(promoter.cancel, lambda: promoter.promote(chosen, dict(promotion.baked)))
    outcomes = done.result
    print(outcome.summary(outcomes, always=("promoted", "failed")))
    if done.exit_status is not None:
        return done.exit_status
    return EXIT_FAILED if any(o.status == "failed" for o in outcomes) else EXIT_OK
