"""`kb sync` and `kb check`: the knowledge base against what the indexes serve (torchimages.kb). sync prints the
difference (each change with its source) and, with --write, applies it; check exits 1 when the file disagrees
with the indexes. Exit 2 on an error (a file that does not load, no index answering, indexes that disagree;
check: any not answering, or a release or an index of which no facts were read)."""

from __future__ import annotations

import argparse
import difflib
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from torchimages import values
from torchimages.cli import options as shared
from torchimages.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, UsageError
from torchimages.problems import shown

NAME = "kb"
HELP = "keep the knowledge base true: `kb sync` reads the indexes' wheel metadata, `kb check` exits 1 on a difference"


def _said(text: str) -> str:
    """A line as it is printed: one line (`shown`), and no index's login in it, whatever made the text (the last
    guard behind the kb modules, which say URLs without their logins)."""
    return shown(values.hide_logins(text))


def _release(text: str) -> str:
    from packaging.version import InvalidVersion, Version

    try:
        version = Version(text)
    except InvalidVersion:
        raise argparse.ArgumentTypeError(f"{text!r} is not a version such as 2.8.0") from None
    if len(version.release) != 3 or version.local or version.pre or version.dev or version.post:
        raise argparse.ArgumentTypeError(f"{text!r}: name one release such as 2.8.0 (no label)")
    return version.public


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError("give more than 0 and at most 3600 seconds")
    return value


def _index(text: str) -> str:
    from urllib.parse import urlsplit

    if not text.isprintable():  # a control character, or a byte that is not UTF-8 (a surrogate)
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is not an http or https URL (a character it cannot hold)")
    try:
        parts = urlsplit(text)
        good = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # a bracket that does not close
        good = False
    if not good:
        raise argparse.ArgumentTypeError(f"{text!r} is not an http or https URL")
    return text.rstrip("/")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--index",
        action="append",
        default=[],
        type=_index,
        metavar="URL",
        help="a simple-API index to read (repeat it; default: https://pypi.org/simple), such as "
        "https://download.pytorch.org/whl/cu126",
    )
    parser.add_argument("--release", type=_release, metavar="X.Y.Z", help="read one torch release only (2.8.0)")
    parser.add_argument(
        "--compat",
        type=shared.path,
        metavar="PATH",
        help="the knowledge base file (default: the one the package ships)",
    )
    parser.add_argument(
        "--deadline",
        type=_seconds,
        default=300.0,
        metavar="SECONDS",
        help="seconds all the questions to the indexes may take, in all",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="say each wheel whose metadata was not read, with every URL tried and why (default: a count)",
    )


def options(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="kb_command", required=True, metavar="{sync,check}")
    sync = sub.add_parser("sync", help="print how compat.yaml differs from the indexes; --write applies it")
    _common(sync)
    sync.add_argument(
        "--write", action="store_true", help="apply the difference to the file (whole or not at all; comments kept)"
    )
    check = sub.add_parser("check", help="exit 1 when compat.yaml disagrees with what the indexes serve")
    _common(check)


def _path(args: argparse.Namespace) -> Path:
    if args.compat is not None:
        return Path(args.compat)
    return Path(str(resources.files("torchimages").joinpath("data/compat.yaml")))


def _load(path: Path) -> tuple[str, dict[str, Any]]:
    import yaml

    from torchimages import compat, textfile

    text = textfile.read_text(path, "the knowledge base")
    try:
        document = yaml.load(text, Loader=textfile.LOADER)
        compat.parse(document)
    except (yaml.YAMLError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{path}: not a knowledge base the loader accepts ({exc!s:.200})") from None
    return text, document


def run(args: argparse.Namespace) -> int:
    from torchimages.kb import diff, sync

    path = _path(args)
    text, document = _load(path)
    result = sync.sync(document, args.index, args.release, args.deadline)
    for reading in result.readings:
        for note in reading.notes + sync.condensed(reading.index, reading.misses):
            print(_said(f"note: {note}"), file=sys.stderr)
        for miss in reading.misses if args.verbose else ():
            print(_said(f"note: not read: {miss.detail}"), file=sys.stderr)
        if reading.problem:
            print(_said(f"warning: {reading.problem}: its facts are not read (nothing is removed)"), file=sys.stderr)
    for unread in result.unread:
        print(_said(f"warning: {unread}: its facts are not compared"), file=sys.stderr)
    for change in result.changes:
        print(_said(change.line()))
    said = f"{len(result.changes)} changes, {result.requests} requests, {result.seconds:.1f} s"
    if len(result.unanswered) == len(result.readings):
        print(_said(f"error: no index answered ({said})"), file=sys.stderr)
        return EXIT_USAGE
    if result.refused is not None:
        print(_said(f"error: {result.refused}: nothing is written ({said})"), file=sys.stderr)
        return EXIT_USAGE
    if args.kb_command == "check":
        if result.unanswered:
            print(
                _said(f"error: {len(result.unanswered)} index(es) did not answer: cannot tell ({said})"),
                file=sys.stderr,
            )
            return EXIT_USAGE
        disagrees = diff.disagrees(result.changes)
        if result.unread and not disagrees:  # "agrees" only of what was read, and all of it was
            print(_said(f"error: {'; '.join(result.unread)}: cannot tell ({said})"), file=sys.stderr)
            return EXIT_USAGE
        print(f"{path}: {'disagrees with' if disagrees else 'agrees with'} the indexes ({said})")
        return EXIT_FAILED if disagrees else EXIT_OK
    return _sync(args, path, text, result, said)


def _sync(args: argparse.Namespace, path: Path, text: str, result: Any, said: str) -> int:
    import yaml

    from torchimages import compat, textfile
    from torchimages.kb import writer

    if not result.changes:
        print(f"{path}: nothing to change ({said})")
        return EXIT_OK
    written = writer.apply(text, result.changes, result.tag)
    try:
        compat.parse(yaml.load(written, Loader=textfile.LOADER))
    except (yaml.YAMLError, ValueError, KeyError, TypeError, AttributeError) as exc:
        print(_said(f"error: the changed file would not load ({exc!s:.200}): nothing written"), file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), written.splitlines(True), str(path), str(path)))
    if not args.write:
        print(f"{path}: not written ({said}); --write applies it")
        return EXIT_OK
    textfile.write_atomically(path, written)
    print(f"{path}: written ({said})")
    return EXIT_OK
