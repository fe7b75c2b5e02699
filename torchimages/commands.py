"""All subcommands in one table: the core ones (cli.py) plus build (and test)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from . import cli, engine, lock, orchestrate, render
from . import plan as planning
from .engine import EngineError
from .smoke import SUITES, runner
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
    parser.add_argument("--push", action="store_true", help="push the tags of every image that passed")
    parser.add_argument(
        "--test",
        action="append",
        choices=("gpu", "none"),
        default=[],
        help="the cpu smoke suite always runs before tagging; gpu adds the GPU suites (--gpus auto); none skips",
    )


def cmd_build(args: argparse.Namespace) -> int:
    loaded = cli.load_plan(args)
    specs = cli.select(args, loaded)
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
        push=args.push,
    )
    try:
        checks = []
        if "none" not in args.test:
            suites = SUITES if "gpu" in args.test else ("cpu",)
            checks.append(runner.pretag_check(runner.SmokeOptions(suites=suites), engine.DockerEngine()))
        outcomes = orchestrate.Builder(options, checks).build(specs)
    except (EngineError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return cli.EXIT_USAGE
    print(orchestrate.summary(outcomes))
    return cli.EXIT_FAILED if any(o.status == "failed" for o in outcomes) else cli.EXIT_OK


def configure_test(parser: argparse.ArgumentParser) -> None:
    """Options of `test`."""
    parser.add_argument("selectors", nargs="*", metavar="SELECTOR", help="tag prefixes or globs of built images")
    parser.add_argument(
        "--host",
        choices=("docker", "local"),
        default="docker",
        help="local: run the suites against this machine instead of image containers",
    )
    parser.add_argument("--spec", type=Path, default=None, help="with --host local: SPEC.json (default: this host's)")
    parser.add_argument("--suites", default=",".join(SUITES), help="comma-separated: cpu,gpu,multi_gpu")
    parser.add_argument(
        "--gpus",
        choices=("all", "none", "auto"),
        default="auto",
        help="GPU request for containers (auto: when the engine has the NVIDIA runtime)",
    )
    parser.add_argument("--require-gpu", action="store_true", help="no usable GPU is a failure, not a skip")
    parser.add_argument("--shm-size", default=runner.DEFAULT_SHM, help="shared memory of the container (default 2g)")
    parser.add_argument("--junit", type=Path, default=None, help="JUnit XML (FILE-<tag>.xml for several images)")
    parser.add_argument(
        "--python-exe", default=None, help="Python with torch to probe (default: python, or python3 with --host local)"
    )


def cmd_test(args: argparse.Namespace) -> int:
    suites = tuple(s for s in args.suites.split(",") if s)
    unknown = [s for s in suites if s not in SUITES]
    if unknown or not suites:
        print(f"error: --suites takes {', '.join(SUITES)}, not {','.join(unknown) or 'nothing'}", file=sys.stderr)
        return cli.EXIT_USAGE
    local = args.host == "local"
    options = runner.SmokeOptions(
        suites,
        args.gpus,
        args.require_gpu,
        args.shm_size,
        args.python_exe or ("python3" if local else "python"),
    )
    if local:
        try:
            document = json.loads(args.spec.read_text()) if args.spec else runner.host_document(options.python_exe)
        except (OSError, ValueError, subprocess.CalledProcessError) as exc:
            print(f"error: cannot read the host's spec: {exc}", file=sys.stderr)
            return cli.EXIT_USAGE
        return (
            cli.EXIT_OK
            if runner.run_suites("local://", document, options, args.junit).returncode == 0
            else cli.EXIT_FAILED
        )
    if not args.selectors:
        print("error: name the images to test (SELECTOR...), or use --host local", file=sys.stderr)
        return cli.EXIT_USAGE
    specs = cli.select(args)
    try:
        client = engine.connect()
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return cli.EXIT_USAGE
    docker_engine = engine.DockerEngine(client)
    missing = [s.reference for s in specs if engine.image_labels(client, s.reference) is None]
    if missing:
        print("error: not built yet (make build TAG=...): " + ", ".join(missing), file=sys.stderr)
        return cli.EXIT_USAGE
    results = []
    for spec in specs:
        junit = runner.junit_path(args.junit, spec.tag, len(specs) > 1)
        result = runner.run_suites_in_container(docker_engine, spec, spec.reference, options, junit)
        if not result.args:
            print(f"error: {result.stderr}", file=sys.stderr)
        results.append((spec.reference, result.returncode))
    print(runner.summary(results))
    return cli.EXIT_FAILED if any(code for _, code in results) else cli.EXIT_OK


def configure_lock(parser: argparse.ArgumentParser) -> None:
    """Options of `lock`."""
    parser.add_argument("selectors", nargs="+", metavar="SELECTOR", help="tag prefixes or globs of built images")


def cmd_lock(args: argparse.Namespace) -> int:
    loaded = cli.load_plan(args)
    specs = cli.select(args, loaded)
    try:
        client = engine.connect()
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return cli.EXIT_USAGE
    for members in render.group(specs).values():
        spec = lock.source(members)
        if engine.image_labels(client, spec.reference) is None:
            print(f"error: {spec.reference} is not built yet (make build TAG=...)", file=sys.stderr)
            return cli.EXIT_USAGE
        path = lock.write(loaded.images_dir, spec, lock.freeze(client, spec.reference))
        print(f"locked {spec.name}: {path}")
    relocked = planning.load(args.matrix, args.templates, args.images_dir)
    changed = render.write(render.render_all(relocked.specs, relocked.templates), relocked.images_dir)
    print(f"{len(changed)} Dockerfiles re-rendered to use their lock")
    return cli.EXIT_OK


COMMANDS = (
    ("build", "build, verify, smoke-test and tag images (SELECTOR: tag prefix)", configure_build, cmd_build),
    ("test", "run the smoke suites in built images, or on this machine", configure_test, cmd_test),
    ("lock", "pin every package of built combinations into images/<name>/requirements.lock", configure_lock, cmd_lock),
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of build.py."""
    return cli.main(argv, COMMANDS)
