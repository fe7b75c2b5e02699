"""`cache`: where the tool's cache is and what it holds (the release gate's layer scans); `--clear` empties
it. Exit 0 done, 1 some entry could not be removed, 2 a bad setting or no folder to name."""

from __future__ import annotations

import argparse
import sys

from torchimages.cli.common import EXIT_FAILED, EXIT_OK, UsageError
from torchimages.problems import shown

NAME = "cache"
HELP = "show the layer scans' cache (its folder, entries and bytes); --clear empties it"


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clear", action="store_true", help="remove every entry of the cache (nothing else)")


def run(args: argparse.Namespace) -> int:
    from torchimages import settings
    from torchimages.security import layer_cache

    cache = layer_cache.configured()
    if cache is None:
        raise UsageError("no cache folder: set TORCHIMAGES_CACHE_DIR (there is no home folder)")
    state = "on" if settings.choice("TORCHIMAGES_SCAN_CACHE") == "on" else "off (TORCHIMAGES_SCAN_CACHE=off)"
    if args.clear:
        cleared = layer_cache.clear(cache)
        for problem in cleared.problems:
            print(shown(f"error: cannot remove {problem}"), file=sys.stderr)
        print(shown(f"{cache.folder}: {cleared.removed} entries removed"))
        return EXIT_FAILED if cleared.problems else EXIT_OK
    held = layer_cache.usage(cache)
    print(shown(f"{cache.folder}: {held.entries} entries, {held.bytes} bytes (limit {cache.limit} bytes), {state}"))
    return EXIT_OK
