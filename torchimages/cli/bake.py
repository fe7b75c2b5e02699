"""`bake`: a buildx bake file of the selection, whose targets build to temporary references."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
from pathlib import Path

from torchimages import settings, textfile, values
from torchimages.cli import common, preflight
from torchimages.cli import options as shared
from torchimages.cli.common import EXIT_OK, UsageError

NAME = "bake"
HELP = "write a buildx bake file: targets build to temporary references"


def options(parser: argparse.ArgumentParser) -> None:
    shared.selectors(parser)
    parser.add_argument(
        "--output", type=shared.path, default=None, help="the bake file (JSON; default: standard output)"
    )
    shared.temporary_registry(parser)
    parser.add_argument(
        "--bootstrap",
        action="store_true",
        help="make the bootstrapped bases (debian12) in this engine first, for a bake with its docker driver",
    )
    parser.add_argument(
        "--secrets-dir",
        type=shared.path,
        default=Path(".bake"),
        help="where the pip.conf and uv.toml secrets the targets name are written (default .bake/; private, "
        "not for commits)",
    )
    shared.cache(parser)
    parser.add_argument("--no-cache", action="store_true", help="targets build without BuildKit's cache")
    parser.add_argument(
        "--no-named-contexts",
        action="store_true",
        help="for builders on Docker 20.10 (no named build contexts): devel targets build their runtime stage "
        "themselves instead of starting from the runtime target (shared only as far as the cache does)",
    )
    shared.build_environment(parser)
    shared.wheel_sources(parser)
    parser.add_argument(
        "--trusted-host",
        action="append",
        default=[],
        type=shared.checked(values.host),
        metavar="HOST[:PORT]",
        help="a host pip may reach over plain http (a wheel server on the builder's bridge gateway)",
    )


def run(args: argparse.Namespace) -> int:
    from torchimages.building import bake, bootstrap, requests
    from torchimages.building.wheels import WheelSources

    loaded = common.load_plan(args)
    chosen = common.select(args, loaded)
    sources = WheelSources(args.index_url, tuple(args.extra_index_url), tuple(args.find_links))
    options = requests.BuildOptions(
        images_dir=loaded.images_dir,
        log_dir=Path("logs"),  # a bake writes no log here: buildx shows the builds
        no_cache=args.no_cache,
        ca_cert=args.ca_cert,
        sources=sources,
        network=args.network,
        mirrors=tuple(args.mirror),
        source_date_epoch=settings.epoch("SOURCE_DATE_EPOCH"),
        provenance=common.provenance(loaded.images_dir),
    )
    cache = bake.Cache(
        tuple(map(str, common.cache_specs("--cache-from", args.cache_from, bake.TARGET_PLACEHOLDER))),
        tuple(map(str, common.cache_specs("--cache-to", args.cache_to, bake.TARGET_PLACEHOLDER))),
    )
    request = bake.BakeRequest(
        options,
        sources,
        tuple(args.trusted_host),
        args.secrets_dir,
        args.temporary_registry,
        cache,
        named_contexts=not args.no_named_contexts,
    )
    bake.check_sources(sources)
    if args.no_named_contexts and (
        mapped := [s.combination.folder for s in chosen if bootstrap.contexts(s.combination, s.images[0].platform)]
    ):
        raise UsageError(
            f"{mapped[0]}: --bases bootstrap maps the Dockerfile's FROM to the bootstrapped base with a named build "
            "context, which --no-named-contexts leaves out: use --bases registry, or a builder that takes them"
        )
    common.check_file("--ca-cert", args.ca_cert)
    # Everything is checked before anything is written or started: a refusal leaves the disk as it was.
    preflight.file("--output", args.output)
    preflight.folder("--secrets-dir", args.secrets_dir)
    if args.bootstrap:  # the docker driver builds FROM this engine's images
        engine = common.connect()
        say = functools.partial(print, file=sys.stderr)
        for base in bootstrap.bootstrapped(s.combination for s in chosen):
            log = bootstrap.log_file(Path("logs"), base.os, base.platform)
            mirror = bootstrap.mirror_for(args.mirror, base.os.family)
            say(bootstrap.ensure(engine, base.os, mirror, log, say, base=base))
            request = dataclasses.replace(
                request, base_labels={**request.base_labels, base.reference: engine.labels(base.reference) or {}}
            )
    sbom = common.attestations()
    print(f"Attestations (SBOM, provenance): {sbom.note}", file=sys.stderr)
    request = dataclasses.replace(request, options=dataclasses.replace(request.options, sbom=sbom))
    with preflight.all_or_nothing(args.secrets_dir):  # no secret (it may hold credentials) without its bake file
        entries = bake.entries(chosen, request)
        try:
            text = json.dumps(bake.bake_file(entries, cache), indent=2)
        except ValueError as exc:  # two images' target names clash
            raise UsageError(str(exc)) from None
        if args.output is None:
            print(text)
            return EXIT_OK
        try:
            textfile.write_atomically(args.output, text + "\n")
        except OSError as exc:
            raise UsageError(f"--output {args.output}: {exc.strerror or exc}") from None
    print(
        f"{args.output}: {len(entries)} targets; build them with `docker buildx bake -f {args.output} --load "
        f"--metadata-file bake-metadata.json` (or --push), then `build.py promote --from bake-metadata.json`",
        file=sys.stderr,
    )
    return EXIT_OK
