"""All subcommands in one table: the core ones (cli.py) plus build (and test)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from . import cli, orchestrate
from .engine import EngineError
from .wheels import WheelSources


def configure_build(parser: argparse.ArgumentParser) -> None:
    """Options of `build`; each defaults to a TORCHIMAGES_* environment variable."""
    env = os.environ.get
    defaults = WheelSources.from_environment()
    parser.add_argument("selectors", nargs="+", metavar="SELECTOR", help="tag prefixes, e.g. 2.7.0-cuda11.8")
    parser.add_argument(
        "--jobs", type=int, default=int(env("TORCHIMAGES_JOBS", "1")), help="combinations built at once (default 1)"
    )
    parser.add_argument("--no-cache", action="store_true", help="rebuild even when a verified image is present")
    parser.add_argument(
        "--ca-cert",
        type=Path,
        default=env("TORCHIMAGES_CA_CERT") or None,
        help="CA bundle for TLS inside the build (a BuildKit secret, never in a layer)",
    )
    parser.add_argument(
        "--index-url",
        default=defaults.index_url,
        help="wheel index instead of each image's PyTorch index (URL or local folder)",
    )
    parser.add_argument(
        "--extra-index-url",
        action="append",
        default=list(defaults.extra_index_urls),
        help="additional wheel index (repeatable; URL or local folder)",
    )
    parser.add_argument(
        "--find-links",
        action="append",
        default=list(defaults.find_links),
        help="folder or URL of wheel files (repeatable)",
    )
    parser.add_argument(
        "--network",
        default=env("TORCHIMAGES_NETWORK") or None,
        help="network for RUN steps (host is used automatically for local wheel folders)",
    )
    parser.add_argument("--docker", default=None, help="docker client to build with (default: $DOCKER or found)")
    parser.add_argument(
        "--mirror",
        default=env("TORCHIMAGES_MIRROR") or None,
        help="distribution mirror for bootstrapped bases (default: mmdebstrap's)",
    )
    parser.add_argument("--log-dir", type=Path, default=Path("logs"), help="one build log per image (default logs/)")


def cmd_build(args: argparse.Namespace) -> int:
    loaded = cli.load_plan(args)
    specs = cli.select(args)
    if args.ca_cert and not args.ca_cert.is_file():
        print(f"error: --ca-cert {args.ca_cert}: no such file", file=sys.stderr)
        return cli.EXIT_USAGE
    options = orchestrate.BuildOptions(
        images_dir=loaded.images_dir,
        log_dir=args.log_dir,
        jobs=args.jobs,
        no_cache=args.no_cache,
        ca_cert=args.ca_cert,
        sources=WheelSources(args.index_url, tuple(args.extra_index_url), tuple(args.find_links)),
        network=args.network,
        docker=args.docker,
        mirror=args.mirror,
    )
    try:
        outcomes = orchestrate.Builder(options).build(specs)
    except (EngineError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return cli.EXIT_USAGE
    print(orchestrate.summary(outcomes))
    return cli.EXIT_FAILED if any(o.status == "failed" for o in outcomes) else cli.EXIT_OK


COMMANDS = (("build", "build, verify and tag images (SELECTOR: tag prefix)", configure_build, cmd_build),)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of build.py."""
    return cli.main(argv, COMMANDS)
