"""Build, verify and tag: a bounded pool over combinations, devel and runtime of one combination
sharing the venv stage, keep going past a failure, one log per image, one summary at the end."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import docker.errors

from . import bootstrap, engine, render, verify
from .spec import INPUT_DIGEST_LABEL, ImageSpec
from .wheels import Served, WheelSources, secret_file, serve

TEMP_REPOSITORY = "torchimages-tmp"

# A check run on the temporary image before it gets its public tags, with the facts verification
# read from it (so the check need not probe them again); returns problems found.
Check = Callable[[ImageSpec, str, verify.Facts], list[str]]


@dataclass(frozen=True)
class BuildOptions:
    """Everything a build takes besides the specs."""

    images_dir: Path
    log_dir: Path
    jobs: int = 1
    no_cache: bool = False
    ca_cert: Path | None = None
    sources: WheelSources = field(default_factory=WheelSources)
    network: str | None = None
    docker: str | None = None
    mirror: str | None = None
    push: bool = False


@dataclass(frozen=True)
class Outcome:
    """What happened to one image."""

    spec: ImageSpec
    status: str  # built | skipped | failed
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


def temporary_reference(spec: ImageSpec) -> str:
    """A private reference an image is built to before it earns its public tags."""
    return f"{TEMP_REPOSITORY}/{spec.name.replace('+', '_')}:{spec.flavor}-{uuid.uuid4().hex[:10]}"


def build_command(
    client: engine.BuildClient, spec: ImageSpec, reference: str, options: BuildOptions, served: Served, pip_conf: Path
) -> list[str]:
    """The BuildKit invocation for one target."""
    folder = options.images_dir / spec.name
    cmd = [
        *client.command,
        "--file",
        str(folder / "Dockerfile"),
        "--target",
        spec.flavor,
        "--tag",
        reference,
        "--progress",
        "plain",
        "--secret",
        f"id=pipconf,src={pip_conf}",
    ]
    if options.ca_cert:
        cmd += ["--secret", f"id=cacert,src={options.ca_cert}"]
    network = options.network or ("host" if served.needs_host_network else None)
    if network:
        cmd += ["--network", network]
    if options.no_cache:
        cmd.append("--no-cache")
    return [*cmd, str(folder)]


def _tail(path: Path, lines: int = 12, width: int = 240) -> str:
    text = path.read_text(errors="replace").splitlines()
    return "\n".join("    " + (line if len(line) <= width else line[: width - 3] + "...") for line in text[-lines:])


class Builder:
    """Builds a plan's images through one engine."""

    def __init__(self, options: BuildOptions, checks: Sequence[Check] = (), out: Callable[[str], None] = print):
        self.options, self.checks, self.out = options, tuple(checks), out
        self.docker = engine.connect()
        self.engine = engine.DockerEngine(self.docker)
        self.client = engine.find_build_client(options.docker)

    def up_to_date(self, spec: ImageSpec) -> bool:
        """A verified image with this input digest already carries the public tag."""
        labels = engine.image_labels(self.docker, spec.reference)
        return labels is not None and labels.get(INPUT_DIGEST_LABEL) == spec.digest

    def _bases(self, specs: Sequence[ImageSpec]) -> None:
        for os in {s.os.name: s.os for s in specs if s.os.provider == "bootstrap"}.values():
            log = self.options.log_dir / f"bootstrap-{os.name}.log"
            self.out(bootstrap.ensure(self.docker, self.client.command[0], os, self.options.mirror, log))

    def _verify(self, spec: ImageSpec, reference: str) -> list[str]:
        try:
            facts = verify.read_facts(self.engine, reference)
        except (engine.ProbeError, ValueError) as exc:
            return [f"could not read the versions inside the image: {exc}"]
        problems = [str(m) for m in verify.compare(spec.facts(), facts)]
        for check in self.checks:
            if not problems:
                problems += check(spec, reference, facts)
        return problems

    def _tag(self, spec: ImageSpec, reference: str) -> None:
        image = self.docker.images.get(reference)
        for tag in (spec.tag, *spec.aliases):
            image.tag(spec.repository, tag)

    def _push(self, spec: ImageSpec) -> list[str]:
        """Push the public tag and aliases (only verified images have them); return the errors."""
        errors = []
        for tag in (spec.tag, *spec.aliases):
            for line in self.docker.images.push(spec.repository, tag, stream=True, decode=True):
                if "error" in line:
                    errors.append(f"{spec.repository}:{tag}: {line['error']}")
        return errors

    def _publish(self, spec: ImageSpec, reference: str) -> list[str]:
        """Apply the public tag and aliases; push them when asked. Returns the errors."""
        self._tag(spec, reference)
        return self._push(spec) if self.options.push else []

    def build_one(self, spec: ImageSpec, served: Served, progress: _Progress) -> Outcome:
        """Build to a temporary reference, verify, then apply the public tags; never leave a lie."""
        start = time.monotonic()
        if not self.options.no_cache and self.up_to_date(spec):
            problems = self._publish(spec, spec.reference)
            if problems:
                return self._finish(spec, "failed", start, "push failed:\n    " + "\n    ".join(problems), progress)
            progress.say(f"{spec.tag}: up to date (input digest unchanged), skipped", finished=True)
            return Outcome(spec, "skipped", 0.0, "up to date")
        reference = temporary_reference(spec)
        log = self.options.log_dir / f"{spec.tag}.log"
        progress.say(f"{spec.tag}: building (log: {log})")
        try:
            with secret_file(served.pip_conf(spec.index_url)) as pip_conf, log.open("wb") as handle:
                cmd = build_command(self.client, spec, reference, self.options, served, pip_conf)
                handle.write((" ".join(cmd) + "\n").encode())
                handle.flush()
                status = subprocess.run(
                    cmd, stdout=handle, stderr=subprocess.STDOUT, env=self.client.environment(), check=False
                ).returncode
            if status:
                detail = f"build failed (exit {status}); last lines of {log}:\n{_tail(log)}"
                return self._finish(spec, "failed", start, detail, progress)
            problems = self._verify(spec, reference)
            if problems:
                detail = "verification failed:\n    " + "\n    ".join(problems)
                return self._finish(spec, "failed", start, detail, progress)
            problems = self._publish(spec, reference)
            if problems:
                return self._finish(spec, "failed", start, "push failed:\n    " + "\n    ".join(problems), progress)
            return self._finish(spec, "built", start, f"{spec.reference} verified", progress)
        except docker.errors.DockerException as exc:
            return self._finish(spec, "failed", start, f"Docker engine error: {exc}", progress)
        finally:
            engine.remove_image(self.docker, reference)

    def _finish(self, spec: ImageSpec, status: str, start: float, detail: str, progress: _Progress) -> Outcome:
        seconds = time.monotonic() - start
        progress.say(
            f"{spec.tag}: {status} in {seconds:.0f} s" + (f"\n    {detail}" if status == "failed" else ""),
            finished=True,
        )
        return Outcome(spec, status, seconds, detail)

    def build(self, specs: Sequence[ImageSpec]) -> list[Outcome]:
        """Build every spec; combinations in parallel (bounded), flavors of one combination in turn."""
        self.options.log_dir.mkdir(parents=True, exist_ok=True)
        self._bases(specs)
        progress = _Progress(len(specs), self.out)
        groups = list(render.group(specs).values())
        with serve(self.options.sources) as served, ThreadPoolExecutor(max(1, self.options.jobs)) as pool:
            results = pool.map(lambda group: [self.build_one(s, served, progress) for s in group], groups)
            return [outcome for group in results for outcome in group]


def summary(outcomes: Sequence[Outcome]) -> str:
    """One line per image and a count."""
    lines = [f"{o.status:8} {o.seconds:6.0f} s  {o.spec.reference}" for o in outcomes]
    counts = {s: sum(o.status == s for o in outcomes) for s in ("built", "skipped", "failed")}
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items()))
    return "\n".join(lines)
