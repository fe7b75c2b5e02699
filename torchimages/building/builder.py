"""Build, verify and tag: a bounded pool over combinations (the flavors of one combination in turn,
sharing its layers), keep going past a failure, one log per image, one summary at the end.

The rules that make tags true live here, and only here: every image is built to a temporary
reference; the versions read back from inside it must equal what its tag promises, and the smoke
gate must pass, before it gets its public tag and aliases; the temporary reference is always removed.
`Builder.promote` admits images built elsewhere (a bake, CI runners) through the same steps after the
build (`_admit`): found under their temporary reference, checked to be what their builder reported,
verified, smoke-tested, then tagged. An interrupt (`Builder.cancel`) stops running builds, starts
nothing more and tags nothing more: the images it caught are `interrupted`, never `failed` and never tagged.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from torchimages.building import bootstrap, verify
from torchimages.building.progress import LogState, PlainRenderer, Progress, Renderer, following, read_line
from torchimages.building.wheels import Served, WheelSources, secret_file, serve
from torchimages.combination import INPUT_DIGEST_LABEL, Combination, Image
from torchimages.engine import BuildRequest, CacheSpec, Engine, EngineError
from torchimages.planning.plan import Selected
from torchimages.problems import InputError, Problem
from torchimages.render import OS_PACKAGES_FILE
from torchimages.sizes import format_size, layer_instruction

TEMP_REPOSITORY = "torchimages-tmp"
# The first words of a failed build's detail when the cause is the machine, not the build: the summary's reason.
ENGINE_GONE = "the Docker engine at"
NO_SPACE = "no space left on device"
# Prints what an image holds: its OS package record (written at build time), then the venv's packages.
INSTALLED_PROBE = f"""
import importlib.metadata as m
print("# OS packages ({OS_PACKAGES_FILE})")
print(open("{OS_PACKAGES_FILE}").read().strip())
print("# Python packages (sys.prefix)")
print("\\n".join(sorted(f"{{d.metadata['Name']}}=={{d.version}}" for d in m.distributions())))
"""

# The smoke gate: run on the temporary reference after verification, with the facts verification read
# (so the suites need not probe them again); returns the problems found.
SmokeGate = Callable[[Combination, Image, str, verify.Facts], list[str]]


@dataclass(frozen=True)
class BuildOptions:
    """Everything a build takes besides the images."""

    images_dir: Path
    log_dir: Path
    jobs: int = 1
    no_cache: bool = False
    ca_cert: Path | None = None
    sources: WheelSources = field(default_factory=WheelSources)
    network: str | None = None
    mirror: str | None = None
    push: bool = False
    cache_from: tuple[CacheSpec, ...] = ()  # BuildKit cache sources and exports; `{tag}` in a value
    cache_to: tuple[CacheSpec, ...] = ()  # stands for each image's tag


@dataclass(frozen=True)
class Outcome:
    """What happened to one image (built, promoted, skipped: up to date, failed, interrupted), why, and how long
    each step took."""

    combination: Combination
    image: Image
    status: str  # built | promoted | skipped | failed | interrupted
    seconds: float
    detail: str = ""
    build_seconds: float | None = None  # the BuildKit build, when one ran
    test_seconds: float | None = None  # the checks before tagging (size budget, verification, smoke gate)
    size_bytes: int | None = None  # the image's size (uncompressed), when it was read


@dataclass
class _Measures:
    """What `build_image` and `promote_image` measure of one image on the way (not shared between threads)."""

    build_seconds: float | None = None
    test_seconds: float | None = None
    size_bytes: int | None = None


def temporary_reference(
    combination: Combination, image: Image, token: str | None = None, repository: str = TEMP_REPOSITORY
) -> str:
    """A private reference an image is built to before it earns its public tags: in the temporary
    repository (never the public one), named by combination and flavor; `token` (default: random)
    tells builds apart."""
    return f"{repository}/{combination.folder.replace('+', '_')}:{image.flavor}-{token or uuid.uuid4().hex[:10]}"


def is_temporary(reference: str, repository: str = TEMP_REPOSITORY) -> bool:
    """Whether a reference names a temporary image (`[registry/]torchimages-tmp/<combination>:<tag>`)."""
    name = reference.rsplit("@", 1)[0]
    path = name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name
    return f"/{path}".rsplit("/", 1)[0].endswith(f"/{repository}")


def build_request(
    options: BuildOptions, combination: Combination, image: Image, reference: str, served: Served, pip_conf: Path
) -> BuildRequest:
    """The one BuildKit build of an image: its target of the combination's Dockerfile, the wheel sources
    (`pip_conf`) and the CA bundle as secrets, host network when a local wheel folder is served, the
    BuildKit cache sources and exports (`{tag}` made this image's)."""
    folder = options.images_dir / combination.folder
    secrets = [("pipconf", pip_conf)]
    if options.ca_cert:
        secrets.append(("cacert", options.ca_cert))
    return BuildRequest(
        context=folder,
        dockerfile=folder / "Dockerfile",
        target=image.flavor,
        reference=reference,
        secrets=tuple(secrets),
        network=options.network or ("host" if served.needs_host_network else None),
        no_cache=options.no_cache,
        cache_from=tuple(spec.for_tag(image.tag) for spec in options.cache_from),
        cache_to=tuple(spec.for_tag(image.tag) for spec in options.cache_to),
    )


@dataclass(frozen=True)
class Baked:
    """An image built elsewhere (a bake, a CI runner) to a temporary reference, waiting for promotion:
    `ids` are what its builder reported it to be (image or manifest digests; empty: not checked)."""

    reference: str
    ids: tuple[str, ...] = ()


def shared_names(selected: Sequence[Selected]) -> list[Problem]:
    """A problem for every public name (tag or alias) that two selected images would both get."""
    owners: dict[str, list[str]] = defaultdict(list)
    for s in selected:
        for image in s.images:
            for name in image.names:
                owners[f"{image.repository}:{name}"].append(f"{s.combination.folder} ({image.flavor})")
    return [
        Problem(f"two images would both be tagged '{name}': {', '.join(holders)}", key="tag")
        for name, holders in owners.items()
        if len(holders) > 1
    ]


def _tail(path: Path, lines: int = 12, width: int = 240) -> str:
    text = path.read_text(errors="replace").splitlines()
    return "\n".join("    " + (line if len(line) <= width else line[: width - 3] + "...") for line in text[-lines:])


class Builder:
    """Builds images through one engine; sequences the steps and enforces the rules that make tags true."""

    def __init__(
        self,
        engine: Engine,
        options: BuildOptions,
        smoke_gate: SmokeGate | None = None,
        out: Callable[[str], None] = print,
        cancelled: threading.Event | None = None,
        renderer: Renderer | None = None,
    ) -> None:
        self.engine, self.options, self.smoke_gate, self.out = engine, options, smoke_gate, out
        # How progress is shown (default: plain lines to `out`).
        self.renderer = renderer or PlainRenderer(out)
        # Set by cancel(); shared with the engine's builds and, through the caller, the smoke gate.
        self.cancelled = cancelled or threading.Event()

    def cancel(self) -> None:
        """Stop: running builds are cancelled, no image is started, verified or tagged after this.
        Safe from a signal handler (it only sets an event)."""
        self.cancelled.set()

    def build(self, selected: Sequence[Selected]) -> list[Outcome]:
        """Build every selected image; combinations in parallel (bounded), flavors of one combination in turn.

        Refuses (InputError) before any build when two images would share a public name.
        """
        clashes = shared_names(selected)
        if clashes:
            raise InputError(clashes)
        self.options.log_dir.mkdir(parents=True, exist_ok=True)
        with Progress(self.renderer, sum(len(s.images) for s in selected)) as progress:
            if not self.cancelled.is_set():
                self._ensure_bases([s.combination for s in selected], progress)
            with serve(self.options.sources) as served, ThreadPoolExecutor(max(1, self.options.jobs)) as pool:
                results = pool.map(
                    lambda s: [self.build_image(s.combination, image, served, progress) for image in s.images],
                    selected,
                )
                return [outcome for outcomes in results for outcome in outcomes]

    def _ensure_bases(self, combinations: Sequence[Combination], progress: Progress) -> None:
        for os in bootstrap.bootstrapped(combinations):
            if self.cancelled.is_set():
                return
            log = bootstrap.log_file(self.options.log_dir, os)
            progress.begin(os.image, "bootstrap")
            try:
                said = bootstrap.ensure(self.engine, os, self.options.mirror, log, progress.note, self.cancelled)
            except EngineError:
                progress.finish(os.image, f"{os.image}: bootstrap failed", counted=False)
                raise
            progress.finish(os.image, said, counted=False)

    def up_to_date(self, image: Image) -> bool:
        """A verified image with this input digest already carries the public tag."""
        labels = self.engine.labels(image.reference)
        return labels is not None and labels.get(INPUT_DIGEST_LABEL) == image.input_digest

    def build_image(self, combination: Combination, image: Image, served: Served, progress: Progress) -> Outcome:
        """Build to a temporary reference, verify, smoke-test, then apply the public tags; never leave a lie.
        The outcome says how long the build and the checks took, and the image's size."""
        measures = _Measures()
        outcome = self._build_image(combination, image, served, progress, measures)
        return dataclasses.replace(outcome, **dataclasses.asdict(measures))

    def _build_image(
        self, combination: Combination, image: Image, served: Served, progress: Progress, measures: _Measures
    ) -> Outcome:
        start = time.monotonic()
        if self.cancelled.is_set():
            return self._finish(combination, image, "interrupted", start, "not started", progress)
        try:
            if not self.options.no_cache and self.up_to_date(image):
                measures.size_bytes = self._size(image.reference)
                problems = self._publish(image, image.reference, progress)
                if problems:
                    return self._finish(combination, image, "failed", start, _listed("push failed", problems), progress)
                progress.finish(image.tag, f"{image.tag}: up to date (input digest unchanged), skipped")
                return Outcome(combination, image, "skipped", 0.0, "up to date")
        except EngineError as exc:
            return self._finish(combination, image, "failed", start, f"Docker engine error: {exc}", progress)
        reference = temporary_reference(combination, image)
        log = self.options.log_dir / f"{image.tag}.log"
        progress.say(f"{image.tag}: building (log: {log})")
        progress.begin(image.tag)
        try:
            began = time.monotonic()
            status = self._build(combination, image, reference, served, log, progress)
            measures.build_seconds = time.monotonic() - began
            if self.cancelled.is_set():
                return self._interrupted(combination, image, start, "during the build", progress)
            if status:
                detail = f"{self._why_failed(image, log, status)}\nlast lines of {log}:\n{_tail(log)}"
                return self._finish(combination, image, "failed", start, detail, progress)
            return self._admit(combination, image, reference, start, progress, "built", measures)
        except EngineError as exc:
            return self._engine_failed(combination, image, start, exc, progress)
        finally:
            self._remove_temporary(image, reference, progress)

    def _admit(
        self,
        combination: Combination,
        image: Image,
        reference: str,
        start: float,
        progress: Progress,
        done: str,
        measures: _Measures,
    ) -> Outcome:
        """After the build step, for `build` and `promote` alike: verify and smoke-test the temporary
        reference, record what it holds, then tag (and push) it; the outcome `done`, or why not."""
        measures.size_bytes = self._size(reference)
        began = time.monotonic()
        problems = self._check_before_tagging(combination, image, reference, progress)
        measures.test_seconds = time.monotonic() - began
        if self.cancelled.is_set():  # a gate stopped by the interrupt fails: that is no verdict
            return self._interrupted(combination, image, start, "during verification", progress)
        if problems:
            return self._finish(combination, image, "failed", start, _listed("not tagged", problems), progress)
        self._record_installed(image, reference)
        if self.cancelled.is_set():  # never tag after an interrupt
            return self._interrupted(combination, image, start, "verified, not tagged", progress)
        problems = self._publish(image, reference, progress)
        if problems:
            return self._finish(combination, image, "failed", start, _listed("push failed", problems), progress)
        return self._finish(combination, image, done, start, f"{image.reference} verified", progress)

    def promote(self, selected: Sequence[Selected], baked: Mapping[Image, Baked]) -> list[Outcome]:
        """Verify, smoke-test and tag images built elsewhere (`baked`: each image's temporary reference), one
        at a time, by the same rules as `build`; each temporary reference is removed afterwards.

        Refuses (InputError) before anything when two images would share a public name.
        """
        clashes = shared_names(selected)
        if clashes:
            raise InputError(clashes)
        self.options.log_dir.mkdir(parents=True, exist_ok=True)
        outcomes = []
        with Progress(self.renderer, sum(len(s.images) for s in selected)) as progress:
            for s in selected:  # devel first (FLAVORS order): runtime's reference is still there to compare with
                for image in s.images:
                    base = None
                    if image.flavor == "devel" and s.combination.devel_from == "runtime":
                        runtime = next((i for i in s.images if i.flavor == "runtime"), None)
                        base = baked.get(runtime) if runtime else None
                    outcomes.append(self.promote_image(s.combination, image, baked.get(image), progress, base))
        return outcomes

    def promote_image(
        self,
        combination: Combination,
        image: Image,
        baked: Baked | None,
        progress: Progress,
        base: Baked | None = None,
    ) -> Outcome:
        """Find (or pull) the baked image, check it is the one its builder reported (and, for a devel image
        FROM runtime, that `base`'s layers are its first), then `_admit` it."""
        measures = _Measures()
        outcome = self._promote_image(combination, image, baked, progress, base, measures)
        return dataclasses.replace(outcome, **dataclasses.asdict(measures))

    def _promote_image(
        self,
        combination: Combination,
        image: Image,
        baked: Baked | None,
        progress: Progress,
        base: Baked | None,
        measures: _Measures,
    ) -> Outcome:
        start = time.monotonic()
        if self.cancelled.is_set():
            return self._finish(combination, image, "interrupted", start, "not started", progress)
        if baked is None:
            return self._finish(combination, image, "failed", start, "not baked: no metadata entry", progress)
        if not is_temporary(baked.reference):
            detail = f"{baked.reference} is not a temporary reference ({TEMP_REPOSITORY}/...): not promoted"
            return self._finish(combination, image, "failed", start, detail, progress)
        progress.say(f"{image.tag}: promoting {baked.reference}")
        progress.begin(image.tag)
        try:
            problems = self._find_baked(baked, base)
            if self.cancelled.is_set():
                return self._interrupted(combination, image, start, "while finding the baked image", progress)
            if problems:
                return self._finish(combination, image, "failed", start, _listed("not tagged", problems), progress)
            return self._admit(combination, image, baked.reference, start, progress, "promoted", measures)
        except EngineError as exc:
            return self._engine_failed(combination, image, start, exc, progress)
        finally:
            self._remove_temporary(image, baked.reference, progress)

    def _engine_failed(
        self, combination: Combination, image: Image, start: float, exc: EngineError, progress: Progress
    ) -> Outcome:
        """An engine action failed: interrupted when the interrupt caused it, else failed naming the error."""
        if self.cancelled.is_set():
            return self._interrupted(combination, image, start, f"during an engine action ({exc})", progress)
        return self._finish(combination, image, "failed", start, f"Docker engine error: {exc}", progress)

    def _remove_temporary(self, image: Image, reference: str, progress: Progress) -> None:
        """Remove a temporary reference; a failure is said (the engine is gone: the outcome already says so)."""
        try:
            self.engine.remove_image(reference)
        except EngineError as exc:
            progress.say(f"{image.tag}: could not remove {reference}: {exc}")

    def _size(self, reference: str) -> int | None:
        """An image's size for the summary; None when it cannot be read (the checks that follow say why)."""
        try:
            found = self.engine.inspect(reference)
        except EngineError:
            return None
        return found.size if found and found.size else None

    def _find_baked(self, baked: Baked, base: Baked | None = None) -> list[str]:
        """The baked image is here (pulled when missing) and is what its builder reported, and built on
        `base` when one is given (its layers first); else why not."""
        found = self.engine.inspect(baked.reference)
        if found is None:
            errors = self.engine.pull(baked.reference)
            found = self.engine.inspect(baked.reference)
            if found is None:
                return [f"{baked.reference} is neither here nor could it be pulled: {'; '.join(errors) or 'not found'}"]
        known = {found.id, *(d.rsplit("@", 1)[-1] for d in found.repo_digests)}
        if baked.ids and not known.intersection(baked.ids):
            return [
                f"{baked.reference} is not the image its builder reported: it is {found.id}, "
                f"the metadata says {', '.join(baked.ids)}"
            ]
        below = self.engine.inspect(base.reference) if base else None
        if below is not None and found.layers[: len(below.layers)] != below.layers:
            return [
                f"{baked.reference} is not built on {below.reference} (runtime's layers are not its first): "
                "bake devel and runtime of a combination together"
            ]
        return []

    def _why_failed(self, image: Image, log: Path, status: int) -> str:
        """A failed build's cause when it is not the build's own: the engine stopped answering, or its
        disk is full; else plain "build failed"."""
        if not self.engine.answers():
            return (
                f"{ENGINE_GONE} {self.engine.address()} stopped answering during the build of {image.tag} "
                f"(build exit {status}); re-run once it is back"
            )
        if NO_SPACE in log.read_text(errors="replace").lower():
            return f"{NO_SPACE}: the build failed (exit {status}): the engine's disk is full; free space, re-run"
        return f"build failed (exit {status})"

    def _build(
        self, combination: Combination, image: Image, reference: str, served: Served, log: Path, progress: Progress
    ) -> int:
        """The BuildKit build into `log`; its stages and bytes fetched, read from the log as it is written,
        told to `progress`."""
        state = LogState()

        def seen(line: str) -> None:  # in the follower's thread, the only one to touch `state`
            nonlocal state
            state = read_line(state, line)
            if state.stage:
                progress.update(image.tag, state.stage, state.detail)

        with (
            secret_file(served.pip_conf(combination.index_url)) as pip_conf,
            log.open("wb") as handle,
            following(log, seen),
        ):
            request = build_request(self.options, combination, image, reference, served, pip_conf)
            return self.engine.build(request, handle, self.cancelled)

    def _check_before_tagging(
        self, combination: Combination, image: Image, reference: str, progress: Progress
    ) -> list[str]:
        """The size budget, verification (the versions inside equal the tag's), then the smoke gate. Problems,
        or none."""
        progress.update(image.tag, "verify")
        over = self._over_budget(image, reference)
        if over:
            return over
        try:
            found = verify.read_facts(self.engine, reference)
        except (EngineError, ValueError) as exc:
            return [f"could not read the versions inside the image: {exc}"]
        mismatches = verify.compare(combination.expected_facts(), found)
        if mismatches:
            return [str(m) for m in mismatches]
        if self.cancelled.is_set():
            return ["interrupted before the smoke gate"]
        if self.smoke_gate:
            progress.update(image.tag, "smoke")
        return self.smoke_gate(combination, image, reference, found) if self.smoke_gate else []

    def _over_budget(self, image: Image, reference: str, shown: int = 5) -> list[str]:
        """The image's size against its flavor's budget: none, or the size, the budget and its largest layers."""
        if image.size_budget is None:
            return []
        info = self.engine.inspect(reference)
        if info is None:
            return [f"could not read the size of {reference}: no such image"]
        if info.size <= image.size_budget:
            return []
        largest = sorted(self.engine.history(reference), key=lambda step: step.size, reverse=True)[:shown]
        return [
            f"size {format_size(info.size)} ({info.size} bytes) is over the {image.flavor} budget of "
            f"{format_size(image.size_budget)} ({image.size_budget} bytes); its {len(largest)} largest layers:",
            *(f"  {format_size(step.size):>9}  {layer_instruction(step.created_by)}" for step in largest),
        ]

    def _record_installed(self, image: Image, reference: str) -> None:
        """Write what the verified image holds beside its log, so a rebuild can be compared: the OS
        packages (the image's own record, `name=version`) and the venv's packages (`name==version`)."""
        record = self.options.log_dir / f"{image.tag}.installed.txt"
        try:
            text = self.engine.run_python(reference, ["-c", INSTALLED_PROBE])
        except EngineError as exc:
            text = f"# could not read what {reference} holds: {exc}\n"
        record.write_text(text)

    def _publish(self, image: Image, reference: str, progress: Progress) -> list[str]:
        """Apply the public tag and aliases; push them when asked. Returns the push errors."""
        for name in image.names:
            self.engine.tag(reference, image.repository, name)
        if not self.options.push:
            return []
        progress.update(image.tag, "push")
        return [error for name in image.names for error in self.engine.push(image.repository, name, progress.note)]

    def _interrupted(
        self, combination: Combination, image: Image, start: float, when: str, progress: Progress
    ) -> Outcome:
        return self._finish(combination, image, "interrupted", start, f"interrupted {when}; not tagged", progress)

    def _finish(
        self, combination: Combination, image: Image, status: str, start: float, detail: str, progress: Progress
    ) -> Outcome:
        seconds = time.monotonic() - start
        shown = f"\n    {detail}" if status not in ("built", "promoted") else ""
        progress.finish(image.tag, f"{image.tag}: {status} in {seconds:.0f} s" + shown)
        return Outcome(combination, image, status, seconds, detail)


def _listed(what: str, problems: list[str]) -> str:
    return f"{what}:\n    " + "\n    ".join(problems)


def summary(outcomes: Sequence[Outcome], always: tuple[str, ...] = ("built", "skipped", "failed")) -> str:
    """A table, one row per image: its result, total time, reference, size, build and test time (a failed
    or interrupted image with why, under its row from the image column on); then a count of each status:
    those in `always` even when none, the others (interrupted, promoted) only when some are. Plain text, one
    line per row however wide (a CI log is read a line at a time); rich lays out the columns."""
    import io

    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False, padding=(0, 1), header_style="", show_edge=False)
    for name in ("result", "total", "image", "size", "build", "test"):
        table.add_column(name, justify="left" if name in ("result", "image") else "right")
    for o in outcomes:
        size = format_size(o.size_bytes) if o.size_bytes else "-"
        build, test = (f"{s:.0f} s" if s is not None else "-" for s in (o.build_seconds, o.test_seconds))
        table.add_row(o.status, f"{o.seconds:.0f} s", o.image.reference, size, build, test)
    text = io.StringIO()
    Console(file=text, width=1_000_000, color_system=None, highlight=False, emoji=False).print(table)
    header, *rows = (line.rstrip() for line in text.getvalue().splitlines())
    lines = [header]
    for o, row in zip(outcomes, rows, strict=True):
        lines.append(row)
        if o.status in ("failed", "interrupted"):
            lines.append(" " * header.index("image") + _reason(o.detail))
    statuses = ("built", "promoted", "skipped", "failed", "interrupted")
    counts = {s: sum(o.status == s for o in outcomes) for s in statuses}
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items() if n or s in always))
    return "\n".join(lines)


# A build log's own error lines (pip's, apt's, a RUN's), not BuildKit's report of the failed step.
_STEP_ERROR = re.compile(r"^\s*#\d+ [\d.]+ (.*\b(?:ERROR|Error|error)\b.*)$")


def _reason(detail: str) -> str:
    """The line of an outcome's detail that says why: the last error line its build step printed
    (`ERROR: No matching distribution found for numpy==0.0.1`), else the detail's first line."""
    first = detail.strip().splitlines()[0] if detail.strip() else ""
    errors = [m.group(1) for m in map(_STEP_ERROR.match, detail.splitlines()) if m]
    if first.startswith((ENGINE_GONE, NO_SPACE)):
        line = first
    elif errors:
        line = errors[-1]
    else:
        lines = [line.strip() for line in detail.strip().splitlines()]
        # `not tagged:` then the problems: the first problem says why
        line = f"{lines[0]} {lines[1]}" if len(lines) > 1 and lines[0].endswith(":") else (lines or [""])[0]
    return line if len(line) <= 200 else line[:197] + "..."
