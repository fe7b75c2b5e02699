"""Every image of a matrix that this machine can build, one combination after another (issue 44): built from the
bootstrapped bases, verified, gated and smoke-tested as `make build` does (`build.py build --bases bootstrap
--no-cache`), measured (size, largest layer, build and check seconds), then removed with the build cache before
the next combination, so the disk holds one combination at a time.

Which images: those `build.py list --pypi-only --json` names (every wheel on PyPI) whose build needs no registry
image: every runtime, and a devel only where nvcc comes from NVIDIA's wheels (`devel_from: runtime`); a devel on
`nvidia/cuda` is said as left out, with the image it needs, and is no row of the table. A combination whose build
fails is said with its exit status and the run goes on; the script exits 1 if any image it set out to build was not
built (the devels left out do not count).

Removes the public tags it builds (`torchimages/pytorch:<tag>` and their aliases, as `make build` makes them) and
prunes BuildKit's whole cache after each combination (`docker builder prune -af`; the cache the engine still holds
then is said: Docker 26 on the containerd store frees a removed image's build records only when it restarts): a
machine of one's own. With
`--keep` nothing is removed (the disk must then hold every image). Stopped (a signal), it passes SIGTERM to the
running build.py, waits for its clean-up (printing what build.py said meanwhile), prints the table of the
combinations measured so far and removes nothing more: that combination's tags and the build cache stay (a stop
during a removal cuts it short). Needs a Docker engine and the wheel sources
(`eval "$(scripts/host-pip-sources)"`). Prints each build's own "not scanned" lines (a check that could not look is
not clean) and a Markdown table for docs/reference/images.md.
Run: make bench-matrix [BENCH_ARGS="--keep 2.11.0"]
  or .venv/bin/python bench/default_matrix.py [--matrix matrix.yaml] [--keep] [SELECTOR ...]
"""

from __future__ import annotations

import bench_cli  # first: from here on a signal is one line and 128 + N (bench/bench_cli.py)

bench_cli.early(__name__, "bench/default_matrix.py")

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from torchimages.sizes import format_size

ROOT = Path(__file__).resolve().parent.parent
# build.py's summary row: `built   206 s  torchimages/pytorch:TAG    5.71 GB   48 s  157 s`
SUMMARY_ROW = re.compile(
    r"^(built|failed|skipped|interrupted) +(\d+ s) +\S+:(\S+) +(-|\S+ [kMGT]?B) +(\d+ s|-) +(\d+ s|-)$"
)


# build.py's note on a check that could not look: `2.11.0-cuda13.0-cudnn9-runtime: python not scanned (...)`
NOT_SCANNED = re.compile(r"^(\S+): (?:secrets|os-updates|python) not scanned \(")


def printable(line: str) -> str:
    """The line with each control character escaped (an image's own output reaches the terminal as text)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)


@dataclass(frozen=True)
class Row:
    """One image's line of the table."""

    tag: str
    result: str
    total: str = "-"
    build: str = "-"
    checks: str = "-"
    size: str = "-"
    largest: str = "-"


STOP_GRACE_S = 120  # how long build.py may take to clean up after the bench is stopped


def cli(*args: str | Path, log: Path | None = None) -> subprocess.CompletedProcess[str]:
    """build.py with `args`, its output captured (and written to `log`). Stopped meanwhile (a signal, Ctrl-C), the
    bench passes SIGTERM on and waits for build.py to remove its temporary images and containers (further signals
    do not cut that short), killing it past STOP_GRACE_S (said), then goes on stopping."""
    command = [sys.executable, str(ROOT / "build.py"), *map(str, args)]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace"
    ) as proc:  # an undecodable byte of build.py's output is replaced, never a crash
        try:
            out, err = proc.communicate()
        except BaseException:
            proc.send_signal(signal.SIGTERM)
            said = _let_it_clean_up(proc)
            if said.strip():  # what build.py said while it stopped: what it could not remove
                print("  " + "\n  ".join(said.strip().splitlines()[-15:]), file=sys.stderr, flush=True)
            raise
    if log is not None:
        log.write_text(out + err)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _let_it_clean_up(proc: subprocess.Popen[str]) -> str:
    """Wait for a stopped build.py to end, at most STOP_GRACE_S (past it, kill it and say so); what it printed
    meanwhile."""
    deadline = time.monotonic() + STOP_GRACE_S
    while proc.poll() is None:
        try:
            out, err = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
            return (out or "") + (err or "")
        except subprocess.TimeoutExpired:
            proc.kill()
            print(
                f"bench/default_matrix.py: build.py had not ended {STOP_GRACE_S} s after SIGTERM: killed, its "
                "temporary images may remain",
                file=sys.stderr,
                flush=True,
            )
            return ""
        except BaseException:  # another signal: the clean-up goes on
            continue
    return ""


@dataclass(frozen=True)
class Selection:
    """Each combination with its images to build, (tag, the tag the summary shows), in the list's order; the devels
    left out, each with why; the repository the images are tagged in (the matrix's)."""

    combinations: list[tuple[str, list[tuple[str, str]]]]
    left_out: list[str]
    repository: str


def selection(matrix: Path, selectors: Sequence[str]) -> Selection:
    """What `build.py list` selects (ValueError: its refusal)."""
    listed = cli("list", "--matrix", matrix, "--json", "--pypi-only", "--", *selectors)
    if listed.returncode != 0:
        raise ValueError(
            f"build.py list refused the selection (exit {listed.returncode}): {listed.stderr.strip()[-500:]}"
        )
    combinations: dict[str, list[tuple[str, str]]] = {}
    left_out = []
    repository = "torchimages/pytorch"
    for image in json.loads(listed.stdout):
        repository = str(image["reference"]).rpartition(":")[0]
        if image["flavor"] == "devel" and image["devel_from"] != "runtime":
            left_out.append(f"{image['tag']}: left out (its devel stage starts from {image['devel_from']})")
            continue
        # build.py's summary names an image of a multi-platform combination by its platform tag (`TAG-arm64`)
        combinations.setdefault(image["combination"], []).append(
            (image["tag"], str(image["platform_reference"]).rpartition(":")[2])
        )
    ordered = [(name, sorted(tags, key=lambda t: "devel" in t[0])) for name, tags in combinations.items()]
    return Selection(ordered, left_out, repository)


def largest_layer(reference: str) -> str:
    """The largest layer of the image, as `docker history` says it (bytes)."""
    done = subprocess.run(
        ["docker", "history", "--no-trunc", "--human=false", "--format", "{{.Size}}", reference],
        capture_output=True,
        text=True,
        check=False,
    )
    sizes = [int(s) for s in done.stdout.split() if s.isdigit()]
    return format_size(max(sizes)) if done.returncode == 0 and sizes else "-"


def rows_of(output: str, images: Sequence[tuple[str, str]], repository: str) -> list[Row]:
    """Each image's row from build.py's summary, its last row for the image (`not in the summary` where it printed
    none)."""
    shown = dict((summary_tag, tag) for tag, summary_tag in images)
    found = {}
    for line in output.splitlines():
        match = SUMMARY_ROW.match(line.strip())
        if match and match[3] in shown:
            result, total, summary_tag, size, build, checks = match.groups()
            largest = largest_layer(f"{repository}:{summary_tag}") if result == "built" else "-"
            found[summary_tag] = Row(summary_tag, result, total, build, checks, size, largest)  # `TAG-arm64` too
    return [found.get(summary_tag, Row(summary_tag, "not in the summary")) for _, summary_tag in images]


def remove(repository: str, tags: Sequence[str]) -> None:
    """The combination's tags and aliases (every tag of the repository naming the same image), then BuildKit's cache."""
    ids = set()
    for tag in tags:
        done = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{.Id}}", f"{repository}:{tag}"], capture_output=True, text=True
        )
        ids |= {done.stdout.strip()} if done.returncode == 0 else set()
    listed = subprocess.run(
        ["docker", "images", "--no-trunc", "--format", "{{.ID}} {{.Repository}}:{{.Tag}}", repository],
        capture_output=True,
        text=True,
    )
    names = [name for line in listed.stdout.splitlines() for iid, name in [line.split(" ", 1)] if iid in ids]
    for name in names:
        subprocess.run(["docker", "rmi", name], capture_output=True, check=False)
    subprocess.run(["docker", "builder", "prune", "-af"], capture_output=True, check=False)


def held_cache() -> str:
    """The build cache the engine still holds after `docker builder prune -af` ("" where none, or unread): on
    Docker 26's containerd image store, records of images already removed stay in use until the engine restarts
    (measured: docs/benchmarks.md), so a prune frees their disk only then."""
    found = subprocess.run(
        ["docker", "system", "df", "--format", "{{json .}}"], capture_output=True, text=True, check=False
    )
    for line in found.stdout.splitlines() if found.returncode == 0 else ():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and row.get("Type") == "Build Cache" and row.get("Size") not in (None, "0B"):
            return f"{printable(str(row.get('Size')))} of build cache held after the prune (the engine keeps it)"
    return ""


def main() -> int:
    parser = bench_cli.parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--matrix", type=Path, default=ROOT / "matrix.yaml", help="the matrix (default: matrix.yaml)")
    parser.add_argument("--keep", action="store_true", help="remove nothing: neither images nor the build cache")
    parser.add_argument("selectors", nargs="*", default=["*"], help="tag selectors (default: every image)")
    args = parser.parse_args()
    if not args.matrix.is_file():
        parser.error(f"--matrix {args.matrix}: {'not a regular file' if args.matrix.exists() else 'no such file'}")
    try:
        selected = selection(args.matrix, args.selectors)
    except ValueError as exc:
        parser.error(str(exc))
    combinations, left_out, repository = selected.combinations, selected.left_out, selected.repository
    if not combinations:
        parser.error("the selection holds no image this machine can build (every wheel on PyPI, no registry image)")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    print(
        f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, commit {commit.strip() or '?'}, "
        f"{platform.machine()}, {os.cpu_count()} cores; {sum(len(images) for _, images in combinations)} images",
        flush=True,
    )
    for line in left_out:
        print(f"# {line}", flush=True)
    info = subprocess.run(["docker", "info", "--format", "{{.DockerRootDir}}"], capture_output=True, text=True)
    data_root = info.stdout.strip() if info.returncode == 0 and Path(info.stdout.strip()).is_dir() else "/"
    rows: list[Row] = []
    began = time.monotonic()
    try:
        run_all(args, combinations, repository, data_root, rows)
    finally:  # stopped too: the rows so far
        print(f"\nall: {time.monotonic() - began:.0f} s\n")
        print("| tag | result | size | largest layer | build | checks | total |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for r in rows:
            print(f"| {r.tag} | {r.result} | {r.size} | {r.largest} | {r.build} | {r.checks} | {r.total} |")
    return 0 if all(r.result == "built" for r in rows) else 1


def run_all(
    args: argparse.Namespace,
    combinations: Sequence[tuple[str, Sequence[tuple[str, str]]]],
    repository: str,
    data_root: str,
    rows: list[Row],
) -> None:
    """Build, measure and (unless --keep) remove each combination in turn, its rows added to `rows`; each build's
    own "not scanned" lines (a check that could not look) printed with it."""
    with tempfile.TemporaryDirectory(prefix="bench-matrix-") as tmp:
        for name, images in combinations:
            log = Path(tmp) / f"{name}.log"
            start = time.monotonic()
            tags = [tag for tag, _ in images]
            done = cli("build", "--matrix", args.matrix, "--bases", "bootstrap", "--no-cache", "--", *tags, log=log)
            found = rows_of(done.stdout, images, repository)
            rows += found
            free = shutil.disk_usage(data_root).free
            print(
                f"{name}: exit {done.returncode} in {time.monotonic() - start:.0f} s; "
                + ", ".join(f"{r.tag} {r.result}" for r in found)
                + f"; {format_size(free)} free at {data_root}",
                flush=True,
            )
            output = [printable(line) for line in (done.stdout + done.stderr).splitlines()]
            shown = {summary_tag for _, summary_tag in images}
            for line in output:  # build.py's own notes (`TAG: CHECK not scanned (...)`), not a build step's echo
                note = NOT_SCANNED.match(line)
                if note and note[1] in shown:
                    print(f"  {line}", flush=True)
            if done.returncode != 0:
                print("  " + "\n  ".join(output[-15:]), flush=True)
                if all(r.result == "built" for r in found):  # the table must not read as all built
                    rows.append(Row(f"{name} (build.py)", f"exit {done.returncode}"))
            if not args.keep:
                remove(repository, [*tags, *(shown for _, shown in images)])
                if held := held_cache():
                    print(f"  {held}", flush=True)


if __name__ == "__main__":
    sys.exit(bench_cli.run("bench/default_matrix.py", main))
