"""The README's main job against a bare install of the same wheels (issue 44), in one run on one machine:

  (a) bare install: `uv venv` and `uv pip install` of exactly the wheels and pins the selected images' Dockerfile
      installs (its `venv.sh` steps, under its requirements.lock where it has one), with the build's uv, its wheel
      sources (TORCHIMAGES_*: `eval "$(scripts/host-pip-sources)"`, served as the build gets them) and bytecode
      compilation, into a fresh venv with a fresh empty uv cache (cold); timed, then removed.
  (b) main job: `build.py build --bases bootstrap --report DIR TAG`, with the bootstrapped base kept. By default
      with `--no-cache` (the build cache is ignored, nothing removed: a shared engine); `--clean-engine` instead
      removes the selected images' tags and prunes BuildKit's whole cache first (`docker builder prune -af`: a
      machine of one's own only). Each image's phases come from the report's manifest.json: build, verify, gate
      (security), smoke.

Prints, per image, the phases, the checks' share of its time, and the main job / bare install ratio (issue 44's
targets: at most 2.0, checks at most a third). The main job's time is the README's job, until build.py's summary
line: the --report work after it (manifest, SBOMs), which the README's job does not do, is said apart and not
counted. The summary line is the last line shaped like one (an image's own output, a RUN step's echo, may print
such a line before it), and only where its counts are the report's. A job with an image not built (failed,
interrupted, or skipped as up to date: nothing was built for it, so the run measured no build) gets no ratio
verdict: it names the images and exits 1; so does a job that printed no summary line agreeing with its report (its
time without the --report work is unknown), and a --clean-engine whose removals or prune failed (said, not
ignored). A target missed (the ratio over 2, an image's checks over a third of its time) is said, `target missed:
...`, and exits 1. Record the figures in docs/benchmarks.md.
Run: make bench-build [TAG=2.11.0-cuda13.0]  or  .venv/bin/python bench/build_vs_install.py [--clean-engine] [TAG]
"""

from __future__ import annotations

import bench_cli  # first: from here on a signal is one line and 128 + N (bench/bench_cli.py)

bench_cli.early(__name__, "bench/build_vs_install.py")

import argparse
import datetime
import io
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NAME = "build_vs_install.py"
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TAG = "2.11.0-cuda13.0"  # README.md's main job
JOB_TARGET = 2.0  # issue 44: the main job at most twice the bare install
CHECKS_TARGET = 1 / 3  # and the checks at most a third of each image's time
# A venv step of a rendered Dockerfile (templates/steps/venv.sh): `bash /mnt/venv.sh STEP ARGUMENT...`.
VENV_STEP = re.compile(r"\bbash /mnt/venv\.sh (create|install|nvidia|nvidia-rest) (.*)$")
STAGE = re.compile(r"^FROM\s+(\S+)\s+AS\s+(\S+)\s*$", re.IGNORECASE)
PHASES = ("build", "verify", "gate", "smoke")


class BadInput(ValueError):
    """What a user gave, or a file the run reads, that the bench cannot use: its one-line message."""


@dataclass(frozen=True)
class ImagePhases:
    """One image of the main job, from its manifest entry: seconds of each phase (None: not measured)."""

    tag: str
    result: str
    total: float | None
    build: float | None
    checks: float | None  # size budget, verification, security gate, smoke suites (durations.test_seconds)
    verify: float | None = None
    gate: float | None = None
    smoke: float | None = None

    @property
    def checks_share(self) -> float | None:
        """The checks' part of the image's time (None: either unknown, or no time)."""
        if self.checks is None or not self.total:
            return None
        return self.checks / self.total


def stages(dockerfile: str) -> dict[str, tuple[str, list[str]]]:
    """Each named stage of a Dockerfile: (what it is FROM, its lines, continuation lines joined)."""
    found: dict[str, tuple[str, list[str]]] = {}
    current: list[str] | None = None
    for line in dockerfile.replace("\\\n", " ").splitlines():
        if match := STAGE.match(line.strip()):
            current = []
            found[match.group(2)] = (match.group(1), current)
        elif current is not None:
            current.append(line)
    return found


def stage_chain(found: Mapping[str, tuple[str, list[str]]], target: str) -> list[str]:
    """`target` and the stages it is built FROM, first stage first; BadInput where the Dockerfile has no such
    stage, or its stages loop."""
    if target not in found:
        raise BadInput(f"the Dockerfile has no stage {target!r}")
    chain = [target]
    while (parent := found[chain[0]][0]) in found:
        if parent in chain:
            raise BadInput(f"the Dockerfile's stage {parent!r} is built FROM itself")
        chain.insert(0, parent)
    return chain


def venv_requirements(dockerfile: str, flavors: Sequence[str]) -> tuple[str, ...]:
    """The requirements the Dockerfile's venv steps install for these flavors (its stages and those they are
    FROM), each once, in order: `create`'s pip pin and setuptools, every `install`, `nvidia` and `nvidia-rest`
    step's requirements (the nvidia steps' first argument names wheel families, no requirement; options such as
    --no-deps are left out). BadInput where a flavor has no stage or no step installs anything."""
    found = stages(dockerfile)
    names: list[str] = []
    for flavor in flavors:
        names += [n for n in stage_chain(found, flavor) if n not in names]
    requirements: list[str] = []
    for name in names:
        for line in found[name][1]:
            if not (match := VENV_STEP.search(line)):
                continue
            step = match.group(1)
            try:
                words = shlex.split(match.group(2))
            except ValueError as exc:
                raise BadInput(f"a venv step of stage {name!r} cannot be read: {exc}") from None
            if step == "create":
                wanted = [f"pip=={words[i + 1]}" for i, w in enumerate(words[:-1]) if w == "--pip"]
                wanted += ["setuptools"] if "--setuptools" in words else []
            else:
                wanted = [w for w in words[1 if step != "install" else 0 :] if not w.startswith("-")]
            requirements += [r for r in wanted if r not in requirements]
    if not requirements:
        raise BadInput(f"no venv step of stage(s) {', '.join(names)} installs a wheel")
    return tuple(requirements)


def _number(durations: Mapping[str, Any], key: str, tag: str) -> float | None:
    value = durations.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
        raise BadInput(f"manifest.json: image {tag!r}: durations.{key} is {str(value)[:40]!r}, not seconds")
    return float(value)


def phases(manifest: Any) -> list[ImagePhases]:
    """Each image of a `build --report` manifest.json (parsed) with its phase seconds; BadInput where it is not
    such a manifest."""
    images = manifest.get("images") if isinstance(manifest, dict) else None
    if not isinstance(images, list):
        raise BadInput("manifest.json holds no list of images")
    found = []
    for image in images:
        if not isinstance(image, dict) or not isinstance(image.get("tag"), str):
            raise BadInput("manifest.json: an image without a tag")
        tag, durations = image["tag"], image.get("durations")
        if not isinstance(durations, dict):
            raise BadInput(f"manifest.json: image {tag!r} has no durations")
        found.append(
            ImagePhases(
                tag=tag,
                result=str(image.get("result")),
                total=_number(durations, "total_seconds", tag),
                build=_number(durations, "build_seconds", tag),
                checks=_number(durations, "test_seconds", tag),
                verify=_number(durations, "verify_seconds", tag),
                gate=_number(durations, "gate_seconds", tag),
                smoke=_number(durations, "smoke_seconds", tag),
            )
        )
    return found


def _cell(value: float | None, unit: str = " s") -> str:
    return "-" if value is None else f"{value:.0f}{unit}"


# The result of an image the main job built as asked (manifest.schema.json). Any other is no measurement: a job
# that fails early looks fast, and an image "skipped" (up to date) was not built at all (an image --clean-engine
# did not remove, or one a run of --no-cache found): either way no ratio verdict.
DONE_RESULTS = ("built",)
SKIPPED_SAYS = "skipped: up to date, nothing built"


def unfinished(images: Sequence[ImagePhases]) -> list[str]:
    """`tag (result)` of each image the main job did not build; one entry when it made none."""
    if not images:
        return ["no image in the report"]
    return [
        f"{i.tag} ({SKIPPED_SAYS if i.result == 'skipped' else i.result})"
        for i in images
        if i.result not in DONE_RESULTS
    ]


def missed_targets(images: Sequence[ImagePhases], bare: float | None, summarized: float | None) -> list[str]:
    """Issue 44's targets the run missed, one line each: an image whose checks took over a third of its time, the
    main job (`summarized`: its seconds up to its summary) over twice the bare install (none without either)."""
    missed = [
        f"{i.tag}: the checks took {share:.0%} of its time, over the target of a third"
        for i in images
        if (share := i.checks_share) is not None and share > CHECKS_TARGET
    ]
    if bare is not None and bare > 0 and summarized is not None and summarized / bare > JOB_TARGET:
        missed.append(
            f"the main job / bare install ratio: {summarized / bare:.2f} ({summarized:.0f} s / {bare:.0f} s), "
            f"over the target of {JOB_TARGET:g}"
        )
    return missed


def exit_status(
    job_status: int, images: Sequence[ImagePhases], summarized: float | None, missed: Sequence[str] = ()
) -> int:
    """The script's: the main job's own status, else 1 where an image failed (`unfinished`), no summary line was
    seen (`summarized` None: no ratio verdict either way) or a target was missed (`missed_targets`), else 0."""
    if job_status:
        return job_status
    return 1 if unfinished(images) or summarized is None or missed else 0


def table(images: Sequence[ImagePhases], bare: float | None, job: float, summarized: float | None) -> str:
    """The figures as a Markdown table, then the main job's ratio to the bare install (None: not measured) against
    issue 44's target. `job`: the main job's whole seconds; `summarized`: its seconds at its summary line (None: none
    seen). The ratio counts the README's job only, up to the summary: the --report work after it is said, not
    counted. No ratio where an image was not built (`unfinished`) or no summary line was seen."""
    head = ["image", "result", "build", "verify", "gate", "smoke", "checks", "total", "checks' share"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for i in images:
        share = i.checks_share
        mark = "-" if share is None else f"{share:.0%}" + ("" if share <= CHECKS_TARGET else " (over a third)")
        cells = [i.tag, i.result, *(_cell(v) for v in (i.build, i.verify, i.gate, i.smoke, i.checks, i.total)), mark]
        lines.append("| " + " | ".join(cells) + " |")
    if failed := unfinished(images):
        said = f"the main job did not build every image ({', '.join(failed)}): no measure, no ratio verdict"
        return "\n".join([*lines, "", said])
    if summarized is None:
        said = (
            f"the main job ({job:.0f} s) printed no summary line agreeing with its report: without its --report work"
            " its time is unknown"
        )
        return "\n".join([*lines, "", said + ", no ratio verdict"])
    lines += ["", f"the --report work after the main job's summary: {job - summarized:.0f} s, not counted"]
    job = summarized
    if bare is None or bare <= 0:
        return "\n".join([*lines, "", f"main job {job:.0f} s (no bare install measured)"])
    ratio = job / bare
    verdict = "within" if ratio <= JOB_TARGET else "over"
    summary = (
        f"bare install {bare:.0f} s; main job {job:.0f} s; main job / bare install = {ratio:.2f} "
        f"({verdict} the target of {JOB_TARGET:g})"
    )
    return "\n".join([*lines, "", summary])


SUMMARY = re.compile(r"^\d+ built, \d+ skipped, \d+ failed\b")


def is_summary(line: str) -> bool:
    """Whether a line of build.py's output is shaped like its summary's count (`2 built, 0 skipped, 0 failed`),
    after which only the report is written."""
    return bool(SUMMARY.match(line))


def summary_count(images: Sequence[ImagePhases]) -> str:
    """The count line build.py prints for these images' results (building/outcome.py's summary: built, skipped and
    failed always, the others where some are)."""
    counts = {s: sum(i.result == s for i in images) for s in ("built", "promoted", "skipped", "failed", "interrupted")}
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n or s in ("built", "skipped", "failed"))


def summary_seconds(seen: Sequence[tuple[float, str]], images: Sequence[ImagePhases]) -> float | None:
    """The seconds at build.py's own summary line, from each line shaped like one (`is_summary`: its seconds, its
    text) in order: the last (build.py prints its own after every image's output), where its count is the report's
    (`summary_count`); else None (an image's own output printed the only such line, or the last disagrees)."""
    if not seen:
        return None
    seconds, line = seen[-1]
    return seconds if line.rstrip("\r\n") == summary_count(images) else None


def build_command(
    tag: str, report: Path, logs: Path, matrix: Path, clean_engine: bool, extra: Sequence[str] = ()
) -> list[str]:
    """The README's main job (`make build TAG=... BUILD_ARGS='--bases bootstrap'`) with a report and logs in
    the bench's own folder; without --clean-engine, `--no-cache` (the build cache is ignored, not removed)."""
    command = [sys.executable, str(ROOT / "build.py"), "build", "--matrix", str(matrix), "--bases", "bootstrap"]
    command += ["--report", str(report), "--log-dir", str(logs)]
    command += [] if clean_engine else ["--no-cache"]
    return [*command, *extra, "--", tag]


def job_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The main job's environment: `environ` with Python's output unbuffered (PYTHONUNBUFFERED=1), so that build.py's
    summary line reaches the bench when it is printed, not when its buffer is flushed at its exit (after the
    --report work, which would then be timed as the job's)."""
    return {**environ, "PYTHONUNBUFFERED": "1"}


def start_job(command: Sequence[str], environ: Mapping[str, str]) -> subprocess.Popen[str]:
    """The main job started, its output a pipe read line by line as it is printed (job_environment)."""
    return subprocess.Popen(
        list(command), stdout=subprocess.PIPE, text=True, errors="replace", env=job_environment(environ)
    )


def before_the_job(clean_engine: bool, docker: str, references: Sequence[str]) -> list[list[str]]:
    """What runs on the engine before the main job: nothing, unless --clean-engine (a machine of one's own): then
    the selected images' public references are removed (the bootstrapped base stays) and every record of
    BuildKit's cache pruned. Never an image the run does not select."""
    if not clean_engine:
        return []
    removals = [[docker, "image", "rm", "--force", r] for r in references]
    return [*removals, [docker, "builder", "prune", "--all", "--force"]]


def cleaning_problems(done: Sequence[tuple[Sequence[str], int, str]]) -> list[str]:
    """What --clean-engine could not do, one line each, from each command's (argv, exit status, stderr): an image
    removal that failed for another reason than the image not being there, a prune that failed. The run then
    measures no clean engine."""
    found = []
    for command, status, err in done:
        if status and not (command[1:3] == ["image", "rm"] and "no such image" in err.lower()):
            said = " ".join(err.split())[-300:] or f"exit {status}"
            found.append(f"{' '.join(shlex.quote(c) for c in command)}: {said}")
    return found


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = bench_cli.parser(description=__doc__, prog=NAME, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tag", nargs="?", default=DEFAULT_TAG, help="selector of the images (default: %(default)s)")
    parser.add_argument("--matrix", type=Path, default=ROOT / "matrix.yaml", help="the matrix (default: the project's)")
    parser.add_argument(
        "--clean-engine",
        action="store_true",
        help="remove the selected images and prune BuildKit's whole cache first (a machine of one's own only); "
        "without it the main job runs with --no-cache and nothing is removed",
    )
    parser.add_argument(
        "--uv", help="the uv to use (default: the build's version, fetched with pip into a temporary folder)"
    )
    parser.add_argument(
        "--python", help="the interpreter of the bare venv, for uv (default: pythonX.Y, the combination's version)"
    )
    parser.add_argument("--skip-install", action="store_true", help="leave out the bare install (no ratio)")
    parser.add_argument("--skip-build", action="store_true", help="leave out the main job (the bare install alone)")
    args = parser.parse_args(argv)
    if args.skip_install and args.skip_build:
        parser.error("--skip-install and --skip-build together leave nothing to measure")
    if args.uv is not None and not (Path(args.uv).is_file() and os.access(args.uv, os.X_OK)):
        parser.error(f"--uv {args.uv!r}: no such executable")
    if not args.matrix.is_file():
        parser.error(f"--matrix {str(args.matrix)!r}: no such file")
    return args


def run(command: Sequence[str], env: Mapping[str, str] | None = None) -> float:
    """Seconds of a command that must succeed; else its output's end and exit 1."""
    start = time.perf_counter()
    done = subprocess.run(list(command), capture_output=True, text=True, check=False, env=env)
    if done.returncode:
        shown = " ".join(shlex.quote(c) for c in command)
        sys.exit(f"{NAME}: failed ({done.returncode}): {shown}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def fetch_uv(folder: Path) -> str:
    """The build's uv (its version and wheel hashes, data/compat.yaml), fetched by this Python's pip into `folder`."""
    from torchimages import compat

    installer = compat.load().installer
    pins = folder / "uv.txt"
    hashes = " ".join(f"--hash=sha256:{h}" for h in installer.sha256)
    pins.write_text(f"uv=={installer.version} {hashes}\n")
    target = folder / "uv"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary", ":all:"]
    run([*pip, "--require-hashes", "--target", str(target), "-r", str(pins)])
    return str(target / "bin" / "uv")


def bare_install(uv: str, python: str, requirements: Sequence[str], index_url: str, lock: Path | None) -> float:
    """Seconds of `uv venv` (of `python`) and `uv pip install` of `requirements` (under the lock, where there is
    one) into a fresh venv with an empty uv cache, the build's wheel sources and settings; all removed afterwards."""
    from torchimages.building.wheels import WheelSources, secret_file, serve

    sources = WheelSources.from_environment()
    with (
        tempfile.TemporaryDirectory(prefix="bench-bare-") as tmp,
        serve(sources) as served,
        secret_file(served.uv_toml(index_url)) as config,
    ):
        env = {
            **os.environ,
            "UV_CONFIG_FILE": str(config),
            "UV_CACHE_DIR": f"{tmp}/cache",
            "UV_LINK_MODE": "copy",
            "UV_PYTHON_DOWNLOADS": "never",
        }
        if ca := os.environ.get("TORCHIMAGES_CA_CERT"):
            env["SSL_CERT_FILE"] = ca
        venv = f"{tmp}/venv"
        install = [uv, "pip", "install", "--quiet", "--python", f"{venv}/bin/python", "--compile-bytecode"]
        install += ["--constraint", str(lock)] if lock else []
        start = time.perf_counter()
        run([uv, "venv", "--quiet", "--python", python, venv], env)
        run([*install, *requirements], env)
        return time.perf_counter() - start


def main() -> int:
    args = parse()
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)  # each figure as it comes, into a file or pipe too
    from torchimages.engine import DockerEngine, EngineError
    from torchimages.planning import plan
    from torchimages.problems import InputError

    try:
        loaded = plan.load(args.matrix)
        selected = plan.select(loaded, [args.tag])
    except (InputError, OSError) as exc:
        bench_cli.fail(NAME, f"{args.tag!r}: {exc}")
    combinations = {s.combination.folder: s for s in selected}
    if len(combinations) != 1:
        bench_cli.fail(NAME, f"{args.tag!r} selects {len(combinations)} combinations' images, not one's")
    chosen = next(iter(combinations.values()))
    combination = chosen.combination
    folder = loaded.images_dir / combination.folder
    try:
        dockerfile = (folder / "Dockerfile").read_text()
        requirements = venv_requirements(dockerfile, sorted({i.flavor for i in chosen.images}))
    except (OSError, BadInput) as exc:
        bench_cli.fail(NAME, f"{folder}: {exc} (make render)")
    lock = folder / "requirements.lock"
    now = datetime.datetime.now(datetime.UTC)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    print(
        f"# {now:%Y-%m-%d %H:%M} UTC, commit {commit.stdout.strip() or '?'}, {platform.machine()}, "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}"
    )
    print(f"# {args.tag}: {', '.join(i.own_tag for i in chosen.images)}")
    bare: float | None = None
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        if not args.skip_install:
            uv = args.uv or fetch_uv(Path(tmp))
            print(
                f"# bare install: {len(requirements)} requirements" + (f" under {lock.name}" if lock.exists() else "")
            )
            index = combination.index_url_for(chosen.images[0].platform)
            try:
                python = args.python or f"python{combination.python}"
                bare = bare_install(uv, python, requirements, index, lock if lock.exists() else None)
            except (OSError, ValueError) as exc:  # a wheel source that is no folder, a setting that cannot be read
                bench_cli.fail(NAME, f"the wheel sources (TORCHIMAGES_*): {exc}")
            print(f"bare install (uv venv + uv pip install, cold cache): {bare:.0f} s  load {os.getloadavg()[0]:.2f}")
        if args.skip_build:
            return 0
        if args.clean_engine:
            try:
                docker = DockerEngine().build_client.docker
            except EngineError as exc:
                bench_cli.fail(NAME, str(exc))
            references = [f"{i.repository}:{n}" for i in chosen.images for n in i.names]
            cleaning = []
            for command in before_the_job(args.clean_engine, docker, references):
                ran = subprocess.run(command, capture_output=True, text=True, errors="replace", check=False)
                cleaning.append((command, ran.returncode, ran.stderr))
            if problems := cleaning_problems(cleaning):  # an image not there is no fault; anything else is
                print("\n".join(f"--clean-engine could not clean: {p}" for p in problems))
                print("the main job would not start from a clean engine: not run, no measurement")
                return 1
        report, logs = Path(tmp) / "report", Path(tmp) / "logs"
        command = build_command(args.tag, report, logs, args.matrix, args.clean_engine)
        print(f"# main job: {' '.join(shlex.quote(c) for c in command[1:])}", flush=True)
        start = time.perf_counter()
        seen: list[tuple[float, str]] = []  # each line shaped like the summary: its seconds, its text
        with start_job(command, os.environ) as done:
            assert done.stdout is not None
            for line in done.stdout:
                print(line, end="")
                if is_summary(line):
                    seen.append((time.perf_counter() - start, line))
        job = time.perf_counter() - start
        print(f"main job: {job:.0f} s (exit {done.returncode})  load {os.getloadavg()[0]:.2f}")
        try:
            images = phases(json.loads((report / "manifest.json").read_text()))
        except (OSError, ValueError) as exc:
            sys.exit(f"{NAME}: the main job's report cannot be read: {exc}")
        summarized = summary_seconds(seen, images)
        if summarized is not None:
            print(f"    of which after the summary (--report: manifest, SBOMs), not counted: {job - summarized:.0f} s")
    print(table(images, bare, job, summarized))
    missed = [] if unfinished(images) or summarized is None else missed_targets(images, bare, summarized)
    for line in missed:
        print(f"target missed: {line}")
    return exit_status(done.returncode, images, summarized, missed)


if __name__ == "__main__":
    sys.exit(bench_cli.run("bench/build_vs_install.py", main))
