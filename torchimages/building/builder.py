"""Build, verify and tag: a bounded pool over combinations (the flavors of one combination: runtime first,
then devel on exactly that runtime image, a named build context, so the two share every runtime layer whatever
the cache; devel builds while runtime's checks run, overlap.py), keep going past a failure, one log per image,
one summary at the end.

The rules that make tags true are applied here, and only here (the checks they call live in verify,
readings and references): every image is built to a temporary reference; the versions read back from
inside it must equal what its tag promises, and the security gate (docs/security.md) and the smoke gate must
pass, before it gets its public tag and aliases; the temporary reference is always removed. `Builder.promote`
admits images built elsewhere (a bake, CI runners) through the same steps after the build (`_admit`): found
under their temporary reference, checked to be what their builder reported, verified, gated, smoke-tested,
then tagged. An interrupt (`Builder.cancel`) stops running builds, starts nothing more and tags nothing more:
the images it caught are `interrupted`, never `failed` and never tagged.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from torchimages import platforms, stopping
from torchimages.building import (
    architectures,
    bootstrap,
    build_digest,
    index,
    local_index,
    readings,
    signatures,
    verify,
)
from torchimages.building.outcome import Outcome
from torchimages.building.overlap import NO_HOOKS, Hooks, SmokeStart, overlapped
from torchimages.building.progress import Progress, Renderer
from torchimages.building.references import (
    TEMP_REPOSITORY,
    Baked,
    built_on,
    find_baked,
    is_temporary,
    temporary_reference,
)
from torchimages.building.renderers import PlainRenderer
from torchimages.building.requests import (
    RUNTIME_STAGE,
    BuildOptions,
    image_context,
    run_build,
    shared_names,
    wheel_secrets,
)
from torchimages.building.wheels import Served, serve
from torchimages.combination import Combination, Image
from torchimages.engine import Engine, EngineError, manifests
from torchimages.planning.plan import Selected
from torchimages.problems import InputError, Problem, shown
from torchimages.security.gate import Verdict
from torchimages.security.model import NOT_SCANNED, CheckResult

NO_BOOTSTRAP_CONTEXTS = (
    "--bases bootstrap maps the Dockerfile's FROM to the bootstrapped base with a named build context, and this "
    "engine's builds take none (buildx on Docker 23 or later does; 20.10 does not)"
)
NO_NAMED_CONTEXTS = (
    "this engine's builds take no named build contexts (buildx on Docker 23 or later does; 20.10 does not): "
    "each devel image builds its runtime stage again instead of starting from the runtime image just built, "
    "so they share that stage only where the build cache or its reproducible layers make it the same "
    "(with --no-cache, the layers alone)"
)
FIX_NOT_ON_RUNTIME = "the engine did not build devel on the runtime image it was given: report this"

# The smoke gate: run on the temporary reference after verification, with the facts verification read
# (so the suites need not probe them again); returns the problems found.
SmokeGate = Callable[[Combination, Image, str, verify.Facts, SmokeStart], list[str]]
# The security gate (torchimages.security.gate): run on the temporary reference after verification, with the
# contents of the files the build mounted as secrets (no layer may hold them); its verdict.
SecurityGate = Callable[[Image, str, tuple[tuple[str, bytes], ...]], Verdict]
# `build --rebuild-stale`: `outdated`'s question, asked of an image its build digest calls up to date (its public
# reference, as this engine holds it): why it is stale (none: it is not).
StaleCheck = Callable[[Combination, Image], Sequence[str]]


@dataclass
class _Measures:
    """What `build_image` and `promote_image` measure of one image on the way (with the gates at once, the security
    gate's thread writes its own fields, gate_seconds and security, and the smoke gate's thread the others)."""

    build_seconds: float | None = None
    test_seconds: float | None = None
    verify_seconds: float | None = None
    gate_seconds: float | None = None
    smoke_seconds: float | None = None
    size_bytes: int | None = None
    security: tuple[CheckResult, ...] = ()
    cuda_archs: str | None = None

    def on(self, outcome: Outcome) -> Outcome:
        """The outcome with these measures (Outcome's fields of the same names)."""
        return dataclasses.replace(
            outcome,
            build_seconds=self.build_seconds,
            test_seconds=self.test_seconds,
            verify_seconds=self.verify_seconds,
            gate_seconds=self.gate_seconds,
            smoke_seconds=self.smoke_seconds,
            size_bytes=self.size_bytes,
            security=self.security,
            cuda_archs=self.cuda_archs,
        )


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
        security_gate: SecurityGate | None = None,
        stale_check: StaleCheck | None = None,
    ) -> None:
        self.engine, self.options, self.smoke_gate, self.out = engine, options, smoke_gate, out
        self.security_gate = security_gate
        self.stale_check = stale_check
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
        mapped = [s.combination.folder for s in selected if bootstrap.contexts(s.combination, s.images[0].platform)]
        if mapped and not self.cancelled.is_set() and not self.engine.named_contexts():
            raise InputError(
                [Problem(f"{mapped[0]}: {NO_BOOTSTRAP_CONTEXTS}", key="--bases", suggestion="--bases registry")]
            )
        self.options.log_dir.mkdir(parents=True, exist_ok=True)
        with Progress(self.renderer, sum(len(s.images) for s in selected)) as progress:
            if not self.cancelled.is_set():
                self._ensure_bases([s.combination for s in selected], progress)
            on_runtime = self._devel_on_runtime(selected, progress)
            with serve(self.options.sources) as served, ThreadPoolExecutor(max(1, self.options.jobs)) as pool:
                results = stopping.results(
                    pool.submit(self.build_combination, s, served, progress, on_runtime) for s in selected
                )
                return [outcome for outcomes in results for outcome in outcomes]

    def _devel_on_runtime(self, selected: Sequence[Selected], progress: Progress) -> bool:
        """Whether devel images are built on the runtime image just built (the engine takes named contexts);
        where it cannot, it is said once, and each devel build makes its runtime stage again."""
        if not any(_runtime_of(s.images) and _devel_of(s.images) for s in selected) or self.cancelled.is_set():
            return False
        if self.engine.named_contexts():
            return True
        progress.say(NO_NAMED_CONTEXTS)
        return False

    def build_combination(
        self, selected: Selected, served: Served, progress: Progress, on_runtime: bool = True
    ) -> list[Outcome]:
        """A combination's images, platform by platform (its order), runtime first: with `on_runtime`, devel is
        built on exactly that runtime image (held under a temporary reference until devel is done), so the two
        share every runtime layer whatever the cache, `--no-cache` too; devel's build starts once runtime is
        built, while runtime's checks run, and its tag waits for runtime's outcome (overlap.py). Each is verified
        on its own. Where the public tags name an index of several platforms' images, `_join` writes it once each
        flavor's images of every platform passed. Outcomes in the flavor order."""
        outcomes: dict[Image, Outcome] = {}
        for platform in selected.combination.platforms:
            mine = [i for i in selected.images if i.platform == platform]
            if mine:
                outcomes |= self._build_platform(selected.combination, mine, served, progress, on_runtime)
        if selected.combination.multi_platform:
            outcomes |= self._join(selected.combination, selected.images, outcomes, progress)
        return [outcomes[image] for image in selected.images]

    def _build_platform(
        self, combination: Combination, images: list[Image], served: Served, progress: Progress, on_runtime: bool
    ) -> dict[Image, Outcome]:
        """One platform's images of a combination, runtime first (see `build_combination`)."""
        runtime, devel = _runtime_of(images), _devel_of(images)
        held = (
            temporary_reference(combination, runtime, "base-" + uuid.uuid4().hex[:10])
            if on_runtime and runtime and devel
            else None
        )
        outcomes: dict[Image, Outcome] = {}
        try:
            if held and runtime and devel:  # devel builds while runtime's checks run (overlap.py)
                outcomes[runtime], outcomes[devel] = overlapped(
                    lambda hooks: self.build_image(combination, runtime, served, progress, held, hooks=hooks),
                    lambda hooks: self._build_on(combination, devel, served, progress, held, None, hooks),
                    lambda ended: self._build_on(combination, devel, served, progress, held, ended),
                )
                return outcomes
            for image in sorted(images, key=lambda i: i is not runtime):
                outcomes[image] = self.build_image(combination, image, served, progress)
        finally:
            if held and runtime:
                self._remove_temporary(runtime, held, progress)
        return outcomes

    def _join(
        self, combination: Combination, images: Sequence[Image], outcomes: Mapping[Image, Outcome], progress: Progress
    ) -> dict[Image, Outcome]:
        """The outcomes `_index` gives each flavor's images of every platform."""
        joined: dict[Image, Outcome] = {}
        for flavor in dict.fromkeys(i.flavor for i in images):
            joined |= self._index(combination, [i for i in images if i.flavor == flavor], outcomes, progress)
        return joined

    def _index(
        self, combination: Combination, mine: list[Image], outcomes: Mapping[Image, Outcome], progress: Progress
    ) -> dict[Image, Outcome]:
        """The public tags of one flavor's images of several platforms name an index of them: written only once
        every platform's image passed (each verified under its own tag, `<tag>-<arch>`, which still names it):
        with `push` first in the registry, each image checked to be the one verified (index.pulled_back), the index
        written under a temporary tag, read back and checked, then the tag and every alias moved to it
        (index.publish, staging.py); then on this engine where its store holds an index (the containerd store:
        local_index.py, the registry's bytes where it holds what they name, read back before the tags move).
        Otherwise no public tag moves, and the outcomes say why and what the public names still name here (a
        failed index fails every platform's image)."""
        first = mine[0]
        failed = [i for i in mine if outcomes[i].status not in ("built", "skipped", "promoted")]
        missing = index.missing_platforms(combination, mine)
        why = ""
        if failed:
            why = f"the {platforms.words([i.platform for i in failed])} image failed"
        elif missing:
            why = f"the {platforms.words(missing)} image was not selected"
        elif self.cancelled.is_set():
            why = "interrupted"
        if why:
            own = {outcomes[i].image_id: i.platform for i in mine if outcomes[i].image_id}
            stale = local_index.stale(self.engine, first, own)
            note = "; ".join(filter(None, [f"no index {first.reference}: {why}", stale]))
        else:
            problems, note = self._indexes(first, {i: outcomes[i].image_id for i in mine}, progress)
            if problems:
                stopped = self.cancelled.is_set() and "interrupted before the public tags were moved" in problems
                own = {outcomes[i].image_id: i.platform for i in mine}
                here = local_index.stale(self.engine, first, own)
                detail = problems + (f"\n    {shown(here)}" if here else "")
                status = "interrupted" if stopped else "failed"
                return {i: self._finish(combination, i, status, time.monotonic(), detail, progress) for i in mine}
        progress.say(note)
        return {i: _noted(outcomes[i], note) for i in mine if i not in failed}

    def _indexes(self, first: Image, verified: Mapping[Image, str], progress: Progress) -> tuple[str, str]:
        """The index of one flavor's images (each -> the id verified): with `push` in the registry first
        (index.publish), then on this engine (local_index.write: the registry's bytes where it holds what they
        name). What failed ("": nothing; else the detail of every image) and what is said."""
        pushed = f"the registry's index {first.reference} is written by --push"
        served, unread = None, ""
        try:
            moved = [
                f"{i.platform_reference} names {info.id if info else 'nothing'} now, not the image verified or found "
                f"up to date ({wanted})"
                for i, wanted in verified.items()
                if (info := self.engine.inspect(i.platform_reference)) is None or info.id != wanted
            ]
        except EngineError as exc:
            moved = [str(exc)]
        if moved:
            return _listed("no index written", moved), ""
        if self.options.push:
            written: list[str] = []
            problems = index.publish(
                self.engine, first, list(verified), progress, self.options.signer, self.cancelled, written.append
            )
            if problems:
                return _listed("index not written", problems), ""
            pushed = f"{first.reference} names the index of {platforms.words([i.platform for i in verified])}"
            served, unread = self._registry_index(first, written[0] if written else "")
        local, problems = local_index.write(self.engine, first, verified, self.cancelled, served)
        if problems:
            done = f"{pushed} in the registry; " if self.options.push else ""
            return done + _listed("local index not written", problems), ""
        return "", "; ".join(filter(None, [local, pushed, unread]))

    def _registry_index(self, first: Image, digest: str) -> tuple[bytes | None, str]:
        """The registry's index its public tags name once written (`digest`: what staging heard them name), read
        by that digest; else None and why the engine's is made here instead."""
        reference = f"{first.repository}@{digest}" if digest else first.reference
        made_here = "the engine's is made here"
        try:
            raw = self.engine.manifest(reference) if digest else None
        except EngineError as exc:
            return None, f"the registry's index {reference} could not be read back ({shown(str(exc))}): {made_here}"
        if raw is None or manifests.digest_of(raw) != digest:
            found = "nothing" if raw is None else f"bytes of {manifests.digest_of(raw)}"
            return None, f"the registry's index {reference} read back as {found}: {made_here}"
        return raw, ""

    def _build_on(
        self,
        combination: Combination,
        image: Image,
        served: Served,
        progress: Progress,
        held: str,
        runtime: Outcome | None,
        hooks: Hooks = NO_HOOKS,
    ) -> Outcome:
        """devel on the runtime image `held` (there when runtime was built, verified or not, or was up to date;
        devel is verified on its own either way; on a runtime built just now it is never up to date: its first
        layers changed); an up-to-date devel needs none; else not built, saying why. `runtime`: runtime's
        outcome; None: runtime was built just now and its checks still run (devel's tag waits for them: `hooks`)."""
        try:
            there = self.engine.labels(held) is not None
            if there or (not self.options.no_cache and self.up_to_date(combination, image)):
                fresh = there and (runtime is None or runtime.status == "built")
                base = held if there else None
                return self.build_image(combination, image, served, progress, base=base, fresh=fresh, hooks=hooks)
        except EngineError as exc:
            return self._engine_failed(combination, image, time.monotonic(), exc, progress)
        if runtime is None:  # its held image went away while its checks ran: not devel's to build on
            detail = f"not built: devel is built on its runtime image, and {held} is no longer there"
            return self._finish(combination, image, "failed", time.monotonic(), detail, progress)
        if self.cancelled.is_set() or runtime.status == "interrupted":
            return self._finish(combination, image, "interrupted", time.monotonic(), "not started", progress)
        detail = f"not built: devel is built on its runtime image, and the build of {runtime.image.own_tag} failed"
        return self._finish(combination, image, "failed", time.monotonic(), detail, progress)

    def _ensure_bases(self, combinations: Sequence[Combination], progress: Progress) -> None:
        for base in bootstrap.bootstrapped(combinations):
            if self.cancelled.is_set():
                return
            log = bootstrap.log_file(self.options.log_dir, base.os, base.platform)
            progress.begin(base.reference, "bootstrap")
            try:
                said = bootstrap.ensure(
                    self.engine,
                    base.os,
                    bootstrap.mirror_for(self.options.mirrors, base.os.family),
                    log,
                    progress.note,
                    self.cancelled,
                    base=base,
                )
            except EngineError:
                progress.finish(base.reference, f"{base.reference}: bootstrap failed", counted=False)
                raise
            progress.finish(base.reference, said, counted=False)

    def up_to_date(self, combination: Combination, image: Image) -> bool:
        """A verified image that building now would make again already carries the public tag
        (build_digest.current)."""
        options = self.options
        settings = options.digest_settings(combination)
        return build_digest.current(self.engine, combination, image, options.images_dir, options.mirrors, settings)

    def _stale(self, combination: Combination, image: Image, progress: Progress) -> Sequence[str]:
        """With `--rebuild-stale`, why an up-to-date image is stale all the same (`outdated`'s answer), said."""
        if self.stale_check is None:
            return ()
        progress.update(image.own_tag, "outdated?")
        reasons = self.stale_check(combination, image)
        if reasons:
            said = "; ".join(shown(r) for r in reasons)
            progress.say(
                f"{image.own_tag}: up to date by its build digest but stale ({said}): rebuilt without the cache"
            )
        return reasons

    def build_image(
        self,
        combination: Combination,
        image: Image,
        served: Served,
        progress: Progress,
        hold: str | None = None,
        base: str | None = None,
        fresh: bool = False,
        hooks: Hooks = NO_HOOKS,
    ) -> Outcome:
        """Build to a temporary reference, verify, smoke-test, then apply the public tags; never leave a lie.
        The outcome says how long the build and the checks took, and the image's size. `hold`: a temporary
        reference the image gets too once built (or found up to date), for the caller to build on and remove;
        `base`: the runtime image this one is built on (its runtime stage), checked to be its first layers;
        `fresh`: that base was built just now (the image is not up to date, whatever its labels say); `hooks`:
        told when the image is built and held, asked before it is tagged (overlap.py)."""
        measures = _Measures()
        outcome = self._build_image(combination, image, served, progress, measures, hold, base, fresh, hooks)
        return measures.on(outcome)

    def _build_image(
        self,
        combination: Combination,
        image: Image,
        served: Served,
        progress: Progress,
        measures: _Measures,
        hold: str | None,
        base: str | None,
        fresh: bool = False,
        hooks: Hooks = NO_HOOKS,
    ) -> Outcome:
        start = time.monotonic()
        if self.cancelled.is_set():
            return self._finish(combination, image, "interrupted", start, "not started", progress)
        options = self.options
        try:
            skip = not fresh and not options.no_cache and self.up_to_date(combination, image)
            if skip and self._stale(combination, image, progress):  # the cache would replay the stale layers
                skip, options = False, dataclasses.replace(options, no_cache=True)
            if (
                skip
                and options.sbom.attached
                and (lacking := self._attestation_problems(image, image.platform_reference))
            ):
                progress.note(f"{image.own_tag}: up to date, but {lacking[0]}: built again, with them")
                skip = False
            if skip:
                found = self.engine.inspect(image.platform_reference)  # the image found up to date, before retagging
                measures.size_bytes = readings.size(self.engine, image.platform_reference)
                if hold:
                    self.engine.tag(image.platform_reference, *_split(hold))
                problems = self._publish(image, image.platform_reference, progress)
                if problems:
                    return self._finish(
                        combination, image, "failed", start, _listed("not published", problems), progress
                    )
                progress.finish(image.own_tag, f"{image.own_tag}: up to date (build digest unchanged), skipped")
                return Outcome(combination, image, "skipped", 0.0, "up to date", image_id=found.id if found else "")
        except EngineError as exc:
            return self._finish(combination, image, "failed", start, f"Docker engine error: {exc}", progress)
        reference = temporary_reference(combination, image)
        log = self.options.log_dir / f"{image.own_tag}.log"
        progress.say(f"{image.own_tag}: building (log: {log})")
        progress.begin(image.own_tag)
        try:
            began = time.monotonic()
            labels = build_digest.base_labels(self.engine, combination, image)
            for attempt in (1, 2):
                runtime = image_context(base) if base else None
                status = run_build(
                    self.engine,
                    options,
                    combination,
                    image,
                    reference,
                    served,
                    log,
                    progress,
                    self.cancelled,
                    runtime,
                    labels,
                )
                measures.build_seconds = time.monotonic() - began
                if self.cancelled.is_set():
                    return self._interrupted(combination, image, start, "during the build", progress)
                if status:
                    why = readings.why_failed(self.engine, image, log, status)
                    step = readings.last_step_error(log)  # BuildKit 0.13 ends its log with the Dockerfile's lines
                    detail = f"{why}\n" + (f"{step}\n" if step else "") + f"last lines of {log}:\n{readings.tail(log)}"
                    return self._finish(combination, image, "failed", start, detail, progress)
                problems = self._not_on(combination, reference, base)
                if not problems:
                    break
                if attempt == 2 or options.no_cache:
                    return self._finish(combination, image, "failed", start, _listed("not tagged", problems), progress)
                # BuildKit served devel's steps from a cache made on another runtime image: again, without it.
                progress.say(f"{image.own_tag}: {problems[0]}; building it again without the build cache")
                options = dataclasses.replace(options, no_cache=True)
            if hold:
                self.engine.tag(reference, *_split(hold))
                hooks.built()
            secrets = self._secrets(served, combination, image)
            return self._admit(combination, image, reference, start, progress, "built", measures, secrets, hooks)
        except EngineError as exc:
            return self._engine_failed(combination, image, start, exc, progress)
        finally:
            self._remove_temporary(image, reference, progress)

    def _not_on(self, combination: Combination, reference: str, base: str | None) -> list[str]:
        """Why a devel image FROM runtime just built is not built on `base` (runtime's layers its first), or
        nothing (also when there is no base, or devel starts from an nvidia/cuda image)."""
        if not base or combination.devel_from != RUNTIME_STAGE:
            return []
        built = self.engine.inspect(reference)
        return built_on(self.engine, built.layers if built else (), reference, base, FIX_NOT_ON_RUNTIME)

    def _admit(
        self,
        combination: Combination,
        image: Image,
        reference: str,
        start: float,
        progress: Progress,
        done: str,
        measures: _Measures,
        secrets: tuple[tuple[str, bytes], ...] = (),
        hooks: Hooks = NO_HOOKS,
    ) -> Outcome:
        """After the build step, for `build` and `promote` alike: verify, run the security gate on and smoke-test
        the temporary reference (`secrets`: what the build mounted as secrets), record what it holds, wait until
        `hooks` lets it be tagged (devel: runtime's outcome is known), then tag (and push) it; the outcome `done`,
        or why not."""
        measures.size_bytes = readings.size(self.engine, reference)
        began = time.monotonic()
        try:
            problems = self._check_before_tagging(combination, image, reference, progress, measures, secrets, hooks)
        finally:
            hooks.gated()  # its security gate ended, or will not run: a neighbour's may start
        measures.test_seconds = time.monotonic() - began
        if self.cancelled.is_set():  # a gate stopped by the interrupt fails: that is no verdict
            return self._interrupted(combination, image, start, "during its checks", progress)
        if problems:
            return self._finish(combination, image, "failed", start, _listed("not tagged", problems), progress)
        readings.record_installed(self.engine, self.options.log_dir, image, reference)
        if waits := hooks.waits():
            progress.update(image.own_tag, f"waits for {waits}")
        hooks.before_tag()
        if self.cancelled.is_set():  # never tag after an interrupt
            return self._interrupted(combination, image, start, "verified, not tagged", progress)
        verified = self.engine.inspect(reference)
        problems = self._publish(image, reference, progress)
        if problems:
            return self._finish(combination, image, "failed", start, _listed("not published", problems), progress)
        outcome = self._finish(combination, image, done, start, f"{image.platform_reference} verified", progress)
        return dataclasses.replace(outcome, image_id=verified.id if verified else "")

    def promote(self, selected: Sequence[Selected], baked: Mapping[Image, Baked]) -> list[Outcome]:
        """Verify, smoke-test and tag images built elsewhere (`baked`: each image's temporary reference), one
        at a time, by the same rules as `build`; each temporary reference is removed afterwards. The images of
        several platforms get their index as `build` writes it (`_index`).

        Refuses (InputError) before anything when two images would share a public name.
        """
        clashes = shared_names(selected)
        if clashes:
            raise InputError(clashes)
        self.options.log_dir.mkdir(parents=True, exist_ok=True)
        outcomes: list[Outcome] = []
        with Progress(self.renderer, sum(len(s.images) for s in selected)) as progress:
            for s in selected:  # devel first (FLAVORS order): runtime's reference is still there to compare with
                mine: dict[Image, Outcome] = {}
                for image in s.images:
                    base = None
                    if image.flavor == "devel" and s.combination.devel_from == "runtime":
                        runtime = _runtime_of([i for i in s.images if i.platform == image.platform])
                        base = baked.get(runtime) if runtime else None
                    mine[image] = self.promote_image(s.combination, image, baked.get(image), progress, base)
                if s.combination.multi_platform:  # every platform's image promoted: their index
                    mine |= self._join(s.combination, s.images, mine, progress)
                outcomes += [mine[image] for image in s.images]
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
        return measures.on(outcome)

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
        progress.say(f"{image.own_tag}: promoting {baked.reference}")
        progress.begin(image.own_tag)
        try:
            problems = find_baked(self.engine, baked, base)
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
            progress.say(f"{image.own_tag}: could not remove {reference}: {exc}")

    def _secrets(self, served: Served, combination: Combination, image: Image) -> tuple[tuple[str, bytes], ...]:
        """The secrets an image's build mounts that may hold credentials, (name, content): the wheel sources'
        pip.conf and uv.toml (index URLs with a login), and the mirror's login (the apt auth.conf its apt steps
        mount, and the mirror's URL: its login is searched for). The CA bundle is left out: public certificates,
        which an image's own ca-certificates may hold byte for byte."""
        pip, uv = wheel_secrets(served, combination, image.platform)
        found = [("pip.conf", pip.encode()), ("uv.toml", uv.encode())]
        if auth := bootstrap.apt_auth(combination, self.options.mirrors):
            mirror = bootstrap.mirror_for(self.options.mirrors, combination.os.family) or ""
            found += [("apt auth.conf", auth.encode()), ("--mirror", mirror.encode())]
        return tuple(found)

    def _check_before_tagging(
        self,
        combination: Combination,
        image: Image,
        reference: str,
        progress: Progress,
        measures: _Measures,
        secrets: tuple[tuple[str, bytes], ...],
        hooks: Hooks = NO_HOOKS,
    ) -> list[str]:
        """The size budget and the largest layer's, verification (the versions inside equal the tag's, the NVIDIA
        libraries torch loads are the pinned wheels', the constraints file's pins are installed, the GPU architectures
        the label's), then the security gate (its results kept in `measures`) and the smoke gate: at once with
        `gates_together` (the default: the problems of both, an engine error of one said beside the other's
        problems), else the smoke gate only after a security gate that found nothing. Problems, or none. Each of the
        three phases that runs has its seconds in `measures` (verify, gate, smoke), a failed one too."""
        began = time.monotonic()
        try:
            found = self._verify(combination, image, reference, progress, measures)
        finally:
            measures.verify_seconds = time.monotonic() - began
        if isinstance(found, list):
            return found
        if self.options.gates_together and self.security_gate and self.smoke_gate and not self.cancelled.is_set():
            progress.update(image.own_tag, "security, smoke")
            with ThreadPoolExecutor(1, thread_name_prefix="security") as pool:  # both once, at the same time
                security = pool.submit(self._security, image, reference, progress, measures, secrets, hooks, False)
                smoke = _settled(lambda: self._smoke(combination, image, reference, progress, measures, found, False))
                return _both(_settled(security.result), smoke)
        problems = self._security(image, reference, progress, measures, secrets, hooks)
        if problems:
            return problems
        if self.cancelled.is_set():
            return ["interrupted before the smoke gate"]
        return self._smoke(combination, image, reference, progress, measures, found)

    def _security(
        self,
        image: Image,
        reference: str,
        progress: Progress,
        measures: _Measures,
        secrets: tuple[tuple[str, bytes], ...],
        hooks: Hooks = NO_HOOKS,
        staged: bool = True,
    ) -> list[str]:
        """The security gate's problems (none when there is none, or after an interrupt); its results kept in
        `measures`, each check that could not look said. It starts once `hooks` lets it (devel: runtime's gate
        ended, so runtime's layers are in the scan's cache) and says when it ended. `staged`: its stage is shown
        (not when run beside the smoke gate)."""
        if not self.security_gate or self.cancelled.is_set():
            return []
        if staged:
            progress.update(image.own_tag, "waiting for runtime's security gate" if hooks.gate_waits() else "security")
        hooks.before_gate()  # devel: until runtime's gate ended, a wait that is not this gate's time
        if staged:
            progress.update(image.own_tag, "security")
        began = time.monotonic()
        try:
            verdict = self.security_gate(image, reference, secrets)
        finally:
            measures.gate_seconds = time.monotonic() - began
            hooks.gated()
        measures.security = verdict.results
        for line in not_scanned(image.own_tag, verdict.results):  # never passed in silence (build, promote)
            progress.note(line)
        return list(verdict.problems)

    def _smoke(
        self,
        combination: Combination,
        image: Image,
        reference: str,
        progress: Progress,
        measures: _Measures,
        found: verify.Facts,
        staged: bool = True,
    ) -> list[str]:
        """The smoke gate's problems (none when there is none), its seconds kept in `measures`: from when its suites
        start (a wait for the GPUs held by another image's suites is shown as waiting, not counted); `staged`: its
        stage is shown."""
        if not self.smoke_gate:
            return []
        if staged:
            progress.update(image.own_tag, "smoke")
        machine = os.uname().machine
        if platforms.of_machine(machine) != image.platform:
            progress.say(f"{image.own_tag}: the suites run under emulation ({image.platform} on {machine}): slower")
        began = [time.monotonic()]

        def waiting() -> None:
            progress.update(image.own_tag, "waiting for the GPUs (another image's smoke suites)")

        def started() -> None:
            began[0] = time.monotonic()
            progress.update(image.own_tag, "smoke" if staged else "security, smoke")

        try:
            return self.smoke_gate(combination, image, reference, found, SmokeStart(waiting, started))
        finally:
            measures.smoke_seconds = time.monotonic() - began[0]

    def _verify(
        self, combination: Combination, image: Image, reference: str, progress: Progress, measures: _Measures
    ) -> list[str] | verify.Facts:
        """The size budgets, the versions and libraries inside, the constraints' pins and the GPU architectures:
        the problems found, or (none) the facts read."""
        progress.update(image.own_tag, "verify")
        over = readings.over_budget(self.engine, image, reference) or readings.over_max_layer(
            self.engine, image, reference
        )
        if over:
            return over
        with ThreadPoolExecutor(1, thread_name_prefix="attestations") as pool:  # beside the probe's container
            attested = pool.submit(self._attestation_problems, image, reference)
            try:
                probed = verify.read_both(self.engine, reference)  # one container run for the facts and the archs
                found = probed.facts()
            except (EngineError, ValueError) as exc:
                return [f"could not read the versions inside the image: {exc}", *attested.result()]
            if unattested := attested.result():
                return unattested
        expected = combination.expected_facts(image.platform)
        pins = verify.check_constraints(found)
        mismatches = [*verify.compare(expected, found), *verify.check_libraries(expected, found), *pins.drifts]
        if mismatches:
            return [str(m) for m in mismatches]
        for note in pins.notes:
            progress.note(f"{image.own_tag}: {note}")
        problems = self._check_archs(combination, image, probed, progress, measures)
        return problems or found

    def _attestation_problems(self, image: Image, reference: str) -> list[str]:
        """Where builds attach attestations (options.sbom) or they are required (promote): what the image's own
        lack, an SPDX SBOM and SLSA provenance whose subject is its manifest (engine.attestations), or why they
        could not be read."""
        if not (self.options.sbom.attached or self.options.require_attestations):
            return []
        unless = " (promote --allow-unattested takes it without)" if self.options.require_attestations else ""
        try:
            attested = self.engine.attestations(reference, image.platform, self.cancelled)
            return [problem + unless for problem in attested.problems()]
        except EngineError as exc:
            return [f"could not read the image's attestations: {exc}{unless}"]

    def _check_archs(
        self, combination: Combination, image: Image, probed: verify.Probed, progress: Progress, measures: _Measures
    ) -> list[str]:
        """The archs part's reading of the verification run (kept in `measures`) against the knowledge base
        (building/architectures.py): its problems; what it only notes is said."""
        try:
            reading = probed.archs()
        except ValueError as exc:
            return [f"could not read the GPU architectures inside the image: {exc}"]
        measures.cuda_archs = reading.label
        what = f"{combination.variant} torch {combination.torch} on {image.platform}"
        verdict = architectures.check(reading, bool(combination.cuda), combination.archs_for(image.platform), what)
        for line in verdict.notes:
            progress.note(f"{image.own_tag}: {shown(line)}")
        return list(verdict.problems)

    def _publish(self, image: Image, reference: str, progress: Progress) -> list[str]:
        """Apply the public tag and aliases (an index's image: its platform's tag alone, see `_join`); push them
        when asked. Returns the push errors."""
        names = (image.platform_tag,) if image.platform_tag else image.names  # an index's images: their own tag
        for name in names:
            self.engine.tag(reference, image.repository, name)
        if not self.options.push:
            return []
        progress.update(image.own_tag, "push")
        errors = self.engine.push(image.repository, names, progress.note, self.options.compression)
        return errors or signatures.sign_pushed(self.engine, image, self.options.signer, self.cancelled, progress)

    def _interrupted(
        self, combination: Combination, image: Image, start: float, when: str, progress: Progress
    ) -> Outcome:
        return self._finish(combination, image, "interrupted", start, f"interrupted {when}; not tagged", progress)

    def _finish(
        self, combination: Combination, image: Image, status: str, start: float, detail: str, progress: Progress
    ) -> Outcome:
        seconds = time.monotonic() - start
        said = f"\n    {detail}" if status not in ("built", "promoted") else ""
        progress.finish(image.own_tag, f"{image.own_tag}: {status} in {seconds:.0f} s" + said)
        return Outcome(combination, image, status, seconds, detail)


def _settled(call: Callable[[], list[str]]) -> list[str] | EngineError:
    """A gate's problems, or the engine error it ended on (any other exception goes on up)."""
    try:
        return call()
    except EngineError as exc:
        return exc


def _both(security: list[str] | EngineError, smoke: list[str] | EngineError) -> list[str]:
    """The problems of two gates run at once. An engine error of one is raised as it would be alone (an interrupt's
    or the engine's failure, said by the caller) unless the other found problems: then it is said beside them,
    naming its gate, so that neither is lost; two are raised as one, each named."""
    ended = {"security": security, "smoke": smoke}
    errors = {gate: r for gate, r in ended.items() if isinstance(r, EngineError)}
    problems = [p for r in ended.values() if not isinstance(r, EngineError) for p in r]
    if len(errors) == 1 and not problems:
        raise next(iter(errors.values()))
    if len(errors) == 2:
        raise EngineError("; ".join(f"the {gate} gate: {e}" for gate, e in errors.items()))
    return [*problems, *(f"Docker engine error in the {gate} gate: {e}" for gate, e in errors.items())]


def _runtime_of(images: Sequence[Image]) -> Image | None:
    return next((i for i in images if i.flavor == RUNTIME_STAGE), None)


def _devel_of(images: Sequence[Image]) -> Image | None:
    return next((i for i in images if i.flavor == "devel"), None)


def _noted(outcome: Outcome, note: str) -> Outcome:
    """The outcome with `note` after its detail."""
    return dataclasses.replace(outcome, detail=f"{outcome.detail}; {note}" if outcome.detail else note)


def _split(reference: str) -> tuple[str, str]:
    """`repository:tag` as (repository, tag)."""
    repository, tag = reference.rsplit(":", 1)
    return repository, tag


def not_scanned(tag: str, results: Sequence[CheckResult]) -> list[str]:
    """What `build` and `promote` print for each check of the gate that could not look: not a pass."""
    return [
        f"{tag}: {r.check} not scanned ({r.note or 'no reason given'}): not read as clean; --require-scan fails it"
        for r in results
        if r.status == NOT_SCANNED
    ]


def _listed(what: str, problems: list[str]) -> str:
    return f"{what}:\n    " + "\n    ".join(shown(p) for p in problems)
