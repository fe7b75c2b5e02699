"""`build`: build, verify, smoke-test and tag the selected images (`--report`: and say so in a folder)."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from torchimages import settings, values
from torchimages.cli import common, preflight
from torchimages.cli import options as shared
from torchimages.cli.common import EXIT_FAILED, EXIT_OK
from torchimages.problems import shown as printable

NAME = "build"
HELP = "build, verify, smoke-test and tag images"


def _jobs(text: str) -> int:
    """`--jobs N`: a whole number of at least 1 (the check TORCHIMAGES_JOBS gets too)."""
    number = settings.whole_number(text)
    if number is None:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of at least 1 (also $TORCHIMAGES_JOBS)")
    return number


def options(parser: argparse.ArgumentParser) -> None:
    shared.selectors(parser, required=True)
    shared.add(parser, "--jobs", type=_jobs, setting="TORCHIMAGES_JOBS", help="combinations built at once (default 1)")
    parser.add_argument("--no-cache", action="store_true", help="rebuild even when a verified image is present")
    parser.add_argument(
        "--no-source-check",
        action="store_true",
        help="start without first asking whether the wheel indexes and registry images the selection needs answer",
    )
    parser.add_argument(
        "--rebuild-stale",
        action="store_true",
        help="ask `outdated`'s question (pending OS security updates, vulnerabilities, expired allowlist entries, a "
        "moved base) of each image that is up to date, and rebuild a stale one without the build cache",
    )
    shared.build_environment(parser)
    shared.wheel_sources(parser)
    shared.engine(parser)
    shared.outputs(parser)
    shared.gzip_level(parser)
    shared.signing(parser)
    shared.report(parser)
    shared.progress_mode(parser)
    shared.cache(parser)
    shared.test_gate(parser)
    shared.security_gate(parser)


def run(args: argparse.Namespace) -> int:
    from torchimages.building import interrupts, outcome, requests
    from torchimages.building.wheels import WheelSources
    from torchimages.reporting import session

    shown = common.renderer(args)
    loaded = common.load_plan(args)
    chosen = common.select(args, loaded)
    # Everything is checked before anything is written or started: a refusal leaves the disk as it was.
    common.check_emulation(chosen)
    common.check_file("--ca-cert", args.ca_cert)
    preflight.folder("--log-dir", args.log_dir)
    common.check_report(args.report)
    common.check_docker(args.docker)
    common.check_compression(args.compression, args.push)
    common.check_registry_deadline(args.push)
    sign_key = common.check_sign_key(args.sign_key, args.push)
    options = requests.BuildOptions(
        images_dir=loaded.images_dir,
        log_dir=args.log_dir,
        jobs=args.jobs,
        no_cache=args.no_cache,
        ca_cert=args.ca_cert,
        sources=WheelSources(args.index_url, tuple(args.extra_index_url), tuple(args.find_links)),
        network=args.network,
        source_date_epoch=settings.epoch("SOURCE_DATE_EPOCH"),
        mirrors=tuple(args.mirror),
        push=args.push,
        compression=args.compression,
        gzip_level=None if args.gzip_level is None else int(args.gzip_level),
        cache_from=common.cache_specs("--cache-from", args.cache_from),
        cache_to=common.cache_specs("--cache-to", args.cache_to),
        provenance=common.provenance(loaded.images_dir),
    )
    common.check_sources(options.sources)
    common.check_names(chosen)
    gate = common.security_options(args, network=args.network)
    engine = common.connect(args.docker)
    engine.check_cache(options.cache_from, options.cache_to)  # finds the build client: a bad one is exit 2 here
    common.check_gzip_level(options.gzip_level, engine)
    common.check_zstd_platforms(chosen, options.push, options.compression, engine.containerd_store)
    if not args.no_source_check:  # what will be built: an image already up to date needs no source
        untold = common.check_reachable(
            common.to_build(chosen, engine, options, args.rebuild_stale), options.sources, engine, loaded
        )
        for line in untold:  # refused nothing: the build goes on, and says what the check could not tell
            print(f"source check: not known: {printable(line)}", file=sys.stderr)
    options = dataclasses.replace(options, signer=common.signer(sign_key))
    options = dataclasses.replace(options, sbom=engine.sbom_attestation())
    print(f"Attestations (SBOM, provenance): {options.sbom.note}", file=sys.stderr)
    if options.sbom.attached and (dropped := common.zstd_attestation_note(options.push, options.compression)):
        print(dropped, file=sys.stderr)
    junit_dir = common.start_outputs(args.log_dir, args.report)
    build = common.make_builder(args, engine, options, shown, junit_dir, gate, stale=args.rebuild_stale)
    done = interrupts.until_interrupted(build.cancel, lambda: build.build(chosen))
    outcomes = done.result
    print(outcome.summary(outcomes), flush=True)  # now, before the --report work (bench-build times this line)
    complete = True
    if args.report and junit_dir:
        from torchimages.reporting import writer

        images = writer.built_images(
            outcomes, engine, junit_dir, pushed=args.push, zstd=args.compression == values.ZSTD
        )
        finished = session.finish(args.report, "build", images, engine, junit_dir, sboms=not done.signals)
        complete = common.told(finished)
    if done.exit_status is not None:
        return done.exit_status
    return EXIT_FAILED if any(o.status == "failed" for o in outcomes) or not complete else EXIT_OK
