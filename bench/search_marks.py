"""Benchmark the layer scan's content search (torchimages/security/content.py's Search) with and without the
marks a link is judged by (leaks.LINK_MARKS): MB/s over large binaries and over text files, fed in the chunks
layers.py feeds. "without" empties the marks (what the search cost before they were added); "with" is the
search as it is. Only `Search(secrets, mark, size).feed` and `.facts()` are called, so PYTHONPATH may name
another checkout's package to time it on the same data.

Binaries: `--binary-mb` MB of shared-library-like files (64 MiB each, half random bytes, half zeros). Text: the
.py files of this Python's standard library (a site-packages is much the same), up to `--text-mb` MB; or the
files given with `--text`. Prints the best of `--runs` for each.
Run: .venv/bin/python bench/search_marks.py [--binary-mb 512] [--text-mb 64] [--runs 3]
"""

from __future__ import annotations

import bench_cli  # first: from here on a signal is one line and 128 + N (bench/bench_cli.py)

bench_cli.early(__name__, "bench/search_marks.py")

import argparse
import random
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

from torchimages.security import content

CHUNK = 1 << 20  # layers.CHUNK


def binaries(megabytes: int) -> Iterator[bytes]:
    """Files of 64 MiB (the last smaller), half random bytes, half zeros, `megabytes` in all."""
    rng = random.Random(0)
    left = megabytes << 20
    while left > 0:
        size = min(64 << 20, left)
        yield rng.randbytes(size // 2) + bytes(size - size // 2)
        left -= size


def texts(megabytes: int, given: list[bytes]) -> list[bytes]:
    """The given files' contents, or the standard library's .py files, up to `megabytes`."""
    if given:
        return given
    found, total = [], 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        found.append(data)
        total += len(data)
        if total >= megabytes << 20:
            break
    return found


def searched(files: list[bytes]) -> float:
    """Seconds to search every file, each fed in chunks."""
    start = time.perf_counter()
    for data in files:
        search = content.Search((), None, len(data))
        for at in range(0, len(data), CHUNK):
            search.feed(data[at : at + CHUNK])
        search.facts()
    return time.perf_counter() - start


def without_marks() -> None:
    """Empty the link marks, whichever version of content.py this is."""
    for name, empty in (("LINK_MARKS", ()), ("LINK_PARTS", {})):
        if hasattr(content, name):
            setattr(content, name, empty)


def main(argv: list[str] | None = None) -> int:
    parser = bench_cli.parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary-mb", type=bench_cli.whole_number(1, 1 << 16), default=512)
    parser.add_argument("--text-mb", type=bench_cli.whole_number(1, 1 << 16), default=64)
    parser.add_argument("--text", nargs="*", default=[], help="text files to search (default: the stdlib's .py)")
    parser.add_argument("--runs", type=bench_cli.whole_number(1, 100), default=3)
    parser.add_argument("--only", choices=("with", "without"), help="time one of the two only")
    args = parser.parse_args(argv)
    given = []
    for name in args.text:
        if not Path(name).is_file():  # a FIFO or /dev/zero would be read forever
            parser.error(f"{name!r} is no regular file")
        try:
            with Path(name).open("rb") as file:
                given.append(file.read(args.text_mb << 20))  # at most --text-mb of each
        except OSError as exc:
            parser.error(f"cannot read {name!r}: {exc.strerror or exc}")
    corpora = {"binary": list(binaries(args.binary_mb)), "text": texts(args.text_mb, given)}
    sizes = {name: sum(map(len, files)) / 1e6 for name, files in corpora.items()}
    print(
        f"binary: {sizes['binary']:.0f} MB in {len(corpora['binary'])} files; "
        f"text: {sizes['text']:.0f} MB in {len(corpora['text'])} files; best of {args.runs}",
        flush=True,
    )
    figures: dict[tuple[str, str], float] = {}
    for label in ("with", "without"):
        if args.only not in (None, label):
            continue
        if label == "without":
            without_marks()
        for name, files in corpora.items():
            best = min(searched(files) for _ in range(args.runs))
            figures[label, name] = best
            print(f"{label:<8} marks  {name:<6} {best:8.2f} s  {sizes[name] / best:8.1f} MB/s", flush=True)
    for name in corpora:
        if ("with", name) in figures and ("without", name) in figures:
            print(f"{name}: the marks cost {figures['with', name] / figures['without', name] - 1:+.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(bench_cli.run("bench/search_marks.py", main))
