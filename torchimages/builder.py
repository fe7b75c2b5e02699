"""Build, verify and tag: a bounded pool over combinations (the flavors of one combination in turn,
sharing its layers), keep going past a failure, one log per image, one summary at the end.

The rules that make tags true live here, and only here: every image is built to a temporary
reference; the versions read back from inside it must equal what its tag promises, and the smoke
gate must pass, before it gets its public tag and aliases; the temporary reference is always removed.
An interrupt (`Builder.cancel`) stops running builds, starts nothing more and tags nothing more: the
images it caught are `interrupted`, never `failed` and never tagged.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import bootstrap, verify
from .combination import INPUT_DIGEST_LABEL, Combination, Image
from .engine import BuildRequest, CacheSpec, Engine, EngineError
from .plan import Selected
from .problems import InputError, Problem
from .render import OS_PACKAGES_FILE
from .wheels import Served, WheelSources, secret_file, serve

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
    """What happened to one image: built, skipped (up to date) or failed, and why."""

    combination: Combination
    image: Image
    status: str  # built | skipped | failed | interrupted
    seconds: float
    detail: str = ""


class _Progress:
    """Thread-safe progress lines."""

    def __init__(self, total: int, out: Callable[[str], None]) -> None:
        self.total, self.done, self.out, self.lock = total, 0, out, threading.Lock()

    def say(self, message: str, finished: bool = False) -> None:
        with self.lock:
            self.done += finished
            self.out(f"[{self.done}/{self.total}] {message}")


def temporary_reference(combination: Combination, image: Image) -> str:
    """A private reference an image is built to before it earns its public tags."""
    return f"{TEMP_REPOSITORY}/{combination.folder.replace('+', '_')}:{image.flavor}-{uuid.uuid4().hex[:10]}"


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
    ) -> None:
        self.engine, self.options, self.smoke_gate, self.out = engine, options, smoke_gate, out
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
        if not self.cancelled.is_set():
            self._ensure_bases([s.combination for s in selected])
        progress = _Progress(sum(len(s.images) for s in selected), self.out)
        with serve(self.options.sources) as served, ThreadPoolExecutor(max(1, self.options.jobs)) as pool:
            results = pool.map(
                lambda s: [self.build_image(s.combination, image, served, progress) for image in s.images], selected
            )
            return [outcome for outcomes in results for outcome in outcomes]

    def _ensure_bases(self, combinations: Sequence[Combination]) -> None:
        for os in {c.os.name: c.os for c in combinations if c.os.provider == "bootstrap"}.values():
            log = self.options.log_dir / f"bootstrap-{os.name}.log"
            self.out(bootstrap.ensure(self.engine, os, self.options.mirror, log))

    def up_to_date(self, image: Image) -> bool:
        """A verified image with this input digest already carries the public tag."""
        labels = self.engine.labels(image.reference)
        return labels is not None and labels.get(INPUT_DIGEST_LABEL) == image.input_digest

    def build_image(self, combination: Combination, image: Image, served: Served, progress: _Progress) -> Outcome:
        """Build to a temporary reference, verify, smoke-test, then apply the public tags; never leave a lie."""
        start = time.monotonic()
        if self.cancelled.is_set():
            return self._finish(combination, image, "interrupted", start, "not started", progress)
        try:
            if not self.options.no_cache and self.up_to_date(image):
                problems = self._publish(image, image.reference)
                if problems:
                    return self._finish(combination, image, "failed", start, _listed("push failed", problems), progress)
                progress.say(f"{image.tag}: up to date (input digest unchanged), skipped", finished=True)
                return Outcome(combination, image, "skipped", 0.0, "up to date")
        except EngineError as exc:
            return self._finish(combination, image, "failed", start, f"Docker engine error: {exc}", progress)
        reference = temporary_reference(combination, image)
        log = self.options.log_dir / f"{image.tag}.log"
        progress.say(f"{image.tag}: building (log: {log})")
        try:
            status = self._build(combination, image, reference, served, log)
            if self.cancelled.is_set():
                return self._interrupted(combination, image, start, "during the build", progress)
            if status:
                detail = f"{self._why_failed(image, log, status)}\nlast lines of {log}:\n{_tail(log)}"
                return self._finish(combination, image, "failed", start, detail, progress)
            problems = self._check_before_tagging(combination, image, reference)
            if self.cancelled.is_set():  # a gate stopped by the interrupt fails: that is no verdict
                return self._interrupted(combination, image, start, "during verification", progress)
            if problems:
                return self._finish(combination, image, "failed", start, _listed("not tagged", problems), progress)
            self._record_installed(image, reference)
            if self.cancelled.is_set():  # never tag after an interrupt
                return self._interrupted(combination, image, start, "verified, not tagged", progress)
            problems = self._publish(image, reference)
            if problems:
                return self._finish(combination, image, "failed", start, _listed("push failed", problems), progress)
            return self._finish(combination, image, "built", start, f"{image.reference} verified", progress)
        except EngineError as exc:
            if self.cancelled.is_set():
                return self._interrupted(combination, image, start, f"during an engine action ({exc})", progress)
            return self._finish(combination, image, "failed", start, f"Docker engine error: {exc}", progress)
        finally:
            try:
                self.engine.remove_image(reference)
            except EngineError as exc:  # the engine is gone: the outcome already says so
                progress.say(f"{image.tag}: could not remove {reference}: {exc}")

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

    def _build(self, combination: Combination, image: Image, reference: str, served: Served, log: Path) -> int:
        folder = self.options.images_dir / combination.folder
        with secret_file(served.pip_conf(combination.index_url)) as pip_conf, log.open("wb") as handle:
            secrets = [("pipconf", pip_conf)]
            if self.options.ca_cert:
                secrets.append(("cacert", self.options.ca_cert))
            request = BuildRequest(
                context=folder,
                dockerfile=folder / "Dockerfile",
                target=image.flavor,
                reference=reference,
                secrets=tuple(secrets),
                network=self.options.network or ("host" if served.needs_host_network else None),
                no_cache=self.options.no_cache,
                cache_from=tuple(spec.for_tag(image.tag) for spec in self.options.cache_from),
                cache_to=tuple(spec.for_tag(image.tag) for spec in self.options.cache_to),
            )
            return self.engine.build(request, handle, self.cancelled)

    def _check_before_tagging(self, combination: Combination, image: Image, reference: str) -> list[str]:
        """Verification (the versions inside equal the tag's), then the smoke gate. Problems, or none."""
        try:
            found = verify.read_facts(self.engine, reference)
        except (EngineError, ValueError) as exc:
            return [f"could not read the versions inside the image: {exc}"]
        mismatches = verify.compare(combination.expected_facts(), found)
        if mismatches:
            return [str(m) for m in mismatches]
        if self.cancelled.is_set():
            return ["interrupted before the smoke gate"]
        return self.smoke_gate(combination, image, reference, found) if self.smoke_gate else []

    def _record_installed(self, image: Image, reference: str) -> None:
        """Write what the verified image holds beside its log, so a rebuild can be compared: the OS
        packages (the image's own record, `name=version`) and the venv's packages (`name==version`)."""
        record = self.options.log_dir / f"{image.tag}.installed.txt"
        try:
            text = self.engine.run_python(reference, ["-c", INSTALLED_PROBE])
        except EngineError as exc:
            text = f"# could not read what {reference} holds: {exc}\n"
        record.write_text(text)

    def _publish(self, image: Image, reference: str) -> list[str]:
        """Apply the public tag and aliases; push them when asked. Returns the push errors."""
        for name in image.names:
            self.engine.tag(reference, image.repository, name)
        if not self.options.push:
            return []
        return [error for name in image.names for error in self.engine.push(image.repository, name, self.out)]

    def _interrupted(
        self, combination: Combination, image: Image, start: float, when: str, progress: _Progress
    ) -> Outcome:
        return self._finish(combination, image, "interrupted", start, f"interrupted {when}; not tagged", progress)

    def _finish(
        self, combination: Combination, image: Image, status: str, start: float, detail: str, progress: _Progress
    ) -> Outcome:
        seconds = time.monotonic() - start
        progress.say(
            f"{image.tag}: {status} in {seconds:.0f} s" + (f"\n    {detail}" if status != "built" else ""),
            finished=True,
        )
        return Outcome(combination, image, status, seconds, detail)


def _listed(what: str, problems: list[str]) -> str:
    return f"{what}:\n    " + "\n    ".join(problems)


def summary(outcomes: Sequence[Outcome]) -> str:
    """One line per image (a failed or interrupted one with why) and a count (interrupted only when some are)."""
    lines = []
    for o in outcomes:
        lines.append(f"{o.status:11} {o.seconds:6.0f} s  {o.image.reference}")
        if o.status in ("failed", "interrupted"):
            lines.append(f"{'':22}{_reason(o.detail)}")
    counts = {s: sum(o.status == s for o in outcomes) for s in ("built", "skipped", "failed", "interrupted")}
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items() if n or s != "interrupted"))
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
        line = detail.strip().splitlines()[0] if detail.strip() else ""
    return line if len(line) <= 200 else line[:197] + "..."
