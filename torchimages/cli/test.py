"""`test`: the smoke suites in built matrix images, in any local image (`--image`), or on this machine."""

from __future__ import annotations

import argparse
import sys

from torchimages import values
from torchimages.cli import common, image_bases, preflight
from torchimages.cli import options as shared
from torchimages.cli.common import EXIT_FAILED, EXIT_OK, UsageError
from torchimages.problems import shown, shown_lines
from torchimages.smoke import SUITES

NAME = "test"
HELP = "run the smoke suites in built images, or on this machine"


def options(parser: argparse.ArgumentParser) -> None:
    shared.selectors(parser)
    parser.add_argument(
        "--image",
        dest="images",
        action="append",
        default=[],
        type=shared.checked(values.reference),
        metavar="REF",
        help="test any local image instead of matrix images (repeatable; not with SELECTOR): the spec comes from "
        "its io.torchimages.* labels (ours, or inherited by an image built FROM ours), or from --spec",
    )
    parser.add_argument(
        "--host",
        choices=("docker", "local"),
        default="docker",
        help="local: run the suites against this machine instead of image containers",
    )
    parser.add_argument(
        "--spec",
        type=shared.path,
        default=None,
        help="SPEC.json: with --host local (default: this host's), or with --image (default: the image's labels)",
    )
    parser.add_argument("--suites", default=",".join(SUITES), help=f"comma-separated: {','.join(SUITES)}")
    parser.add_argument(
        "--gpus",
        choices=("all", "none", "auto"),
        default="auto",
        help="GPU request for containers (auto: when the engine has the NVIDIA runtime)",
    )
    shared.require_gpu(parser)
    parser.add_argument(
        "--shm-size", type=shared.checked(values.size), default="2g", help="shared memory of the container (default 2g)"
    )
    parser.add_argument(
        "--run-arg",
        dest="run_args",
        action="append",
        default=[],
        metavar="ARG",
        help="extra `docker run` options for the test container (repeatable; each value is shell-split, so "
        "--run-arg='--ulimit memlock=-1' is one option; write --run-arg=--x, with '='). --network here replaces "
        "the default --network none",
    )
    parser.add_argument("--junit", type=shared.path, default=None, help="JUnit XML (FILE-<tag>.xml for several images)")
    shared.report(parser)
    parser.add_argument(
        "--python-exe",
        type=shared.text,
        default=None,
        help="Python with torch to probe (default: python, or python3 with --host local)",
    )


def _refuse_mixes(args: argparse.Namespace, local: bool) -> None:
    if args.images and args.selectors:
        raise UsageError(
            "SELECTOR and --image are mutually exclusive: test images of the matrix by SELECTOR, "
            "or any local image by --image REF"
        )
    if local and (args.images or args.selectors or args.run_args):
        raise UsageError("--host local tests this machine: it takes no SELECTOR, --image or --run-arg")
    if args.spec and not (local or args.images):
        raise UsageError("--spec applies to --host local or --image; matrix images get their spec from the matrix")
    if args.report and (local or args.junit):
        raise UsageError("--report takes the images' results itself: not with --host local or --junit")


def _say_error(error: str) -> None:
    print(shown(f"error: {error}"), file=sys.stderr)


def _say_note(note: str) -> None:
    print(shown(f"note: {note}"), file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from torchimages.engine import split_run_args
    from torchimages.reporting import session
    from torchimages.smoke import runner, targets

    local = args.host == "local"
    _refuse_mixes(args, local)
    # Everything is checked before anything is written or started: a refusal leaves the disk as it was.
    preflight.file("--junit", args.junit)
    common.check_report(args.report)
    spec = targets.read_spec_file(args.spec) if args.spec else None  # read once, checked before anything runs
    python_exe = args.python_exe or ("python3" if local else "python")
    run_args = tuple(split_run_args(args.run_args))
    options = runner.SmokeOptions(
        shared.suites(args.suites), args.gpus, args.require_gpu, args.shm_size, python_exe, run_args
    )
    if local:
        return EXIT_OK if targets.test_host(spec, options, args.junit) else EXIT_FAILED
    if args.images:
        engine = common.connect()
        chosen = targets.image_targets(engine, args.images, spec)
        for target in chosen:
            print(shown(target.note))
    else:
        if not args.selectors:
            raise UsageError("name the images to test (SELECTOR... or --image REF), or use --host local")
        selected = common.select(args, common.load_plan(args))
        common.check_emulation(selected)  # another platform's images are tested under emulation
        engine = common.connect()
        # Judged by the bases each image was built on (its label), unless --bases says otherwise.
        images = image_bases.judged(args, engine.labels, selected, _say_note)
        chosen = targets.matrix_targets(engine, images)
    junit_dir = session.start(args.report)
    tested = targets.test_all(engine, chosen, options, junit_dir, args.junit, on_error=_say_error)
    print(shown_lines(runner.summary([(shown(str(t.spec["image"])), t.returncode) for t in tested])))
    complete = True
    if args.report and junit_dir:
        from torchimages.reporting import writer

        reports = writer.tested_images(tested, engine, junit_dir)
        complete = common.told(session.finish(args.report, "test", reports, engine, junit_dir))
    return EXIT_FAILED if any(t.returncode for t in tested) or not complete else EXIT_OK
