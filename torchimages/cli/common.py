"""What the commands share: exit statuses, the plan and selection, warnings, the engine, the builder with
its smoke gate, and the report's last lines."""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from torchimages import settings, textfile, values
from torchimages.building import progress, renderers, wheels
from torchimages.building.wheels import WheelSources
from torchimages.cli import preflight
from torchimages.planning import plan as planning
from torchimages.problems import InputError, Problem, UsageError, shown
from torchimages.smoke import SUITES

if TYPE_CHECKING:
    from torchimages.building import builder, requests
    from torchimages.building.provenance import Provenance
    from torchimages.combination import Combination, Image
    from torchimages.engine import CacheSpec, DockerEngine, Engine, SbomAttestation
    from torchimages.reporting.session import Finished
    from torchimages.security.gate import GateOptions
    from torchimages.security.signing import Signer

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
SOURCE_URL_SETTING = "TORCHIMAGES_SOURCE_URL"  # the images' source label, instead of the git remote's
EXIT_BROKEN_PIPE = 128 + 13  # 128 + SIGPIPE, the status a shell reports for a writer whose reader left

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "UsageError"]


def load_plan(args: argparse.Namespace) -> planning.Plan:
    """Load the plan named by the common options."""
    return planning.load(
        args.matrix, args.templates, args.images_dir, base_registry=args.base_registry, os_bases=args.os_bases or None
    )


def select(args: argparse.Namespace, loaded: planning.Plan, in_full: bool = False) -> list[planning.Selected]:
    """The selected images by combination. The warnings that concern them are said `in_full` where the user can
    act on them (validate, lock); elsewhere in one line that says how many and which command lists them."""
    chosen = planning.select(loaded, args.selectors)
    problems = [*loaded.warnings, *(w for s in chosen for w in s.combination.warnings)]
    if in_full:
        warn(problems)
    elif problems:
        print(counted(problems, getattr(args, "prog", None) or "build.py"), file=sys.stderr)
    return chosen


def provenance(images_dir: Path) -> Provenance:
    """Where the images' Dockerfiles come from (their source and revision labels): TORCHIMAGES_SOURCE_URL, else
    the git remote of the repository holding `images_dir`, and its commit. UsageError for a setting that is not a
    URL of a host (its value is not echoed: it may hold a token)."""
    from torchimages.building.provenance import of_repository

    try:
        return of_repository(images_dir, settings.text(SOURCE_URL_SETTING))
    except ValueError as exc:
        raise UsageError(f"{SOURCE_URL_SETTING} {exc}") from None


def counted(problems: Sequence[Problem], prog: str) -> str:
    """The one line that stands for the warnings of a selection outside validate and lock."""
    count = len(summarize(problems))
    return f"note: {count} warning{'s' * (count != 1)} about the matrix or its bases; `{prog} validate` lists them"


def warn(problems: Iterable[Problem]) -> None:
    """Print warnings, each distinct message once."""
    for line in summarize(list(problems)):
        print(line, file=sys.stderr)


def summarize(problems: Sequence[Problem]) -> list[str]:
    """One line per distinct message: the first place it occurs, and how many others."""
    seen: dict[tuple[str, str], list[Problem]] = {}
    for problem in problems:
        seen.setdefault((problem.key, problem.message), []).append(problem)
    return [str(ps[0]) + (f" (and {len(ps) - 1} more)" if len(ps) > 1 else "") for ps in seen.values()]


def connect(docker_cli: str | None = None) -> DockerEngine:
    """The Docker engine (imports the docker SDK)."""
    from torchimages.engine import DockerEngine

    return DockerEngine(docker_cli)


def attestations() -> SbomAttestation:
    """Whether this machine's engine can attach attestations to what it builds (its SBOM generator image made
    there): a bake file is written for the engine of the machine that writes it. Without an engine that
    answers, none are (the bake file then asks for none), said in the answer."""
    from torchimages.engine import EngineError, SbomAttestation

    try:
        return connect().sbom_attestation()
    except EngineError as exc:
        return SbomAttestation(False, f"no Docker engine answers here to make the SBOM generator in ({exc.reason})")


def check_zstd_platforms(
    chosen: Sequence[planning.Selected], push: bool, compression: str, containerd_store: bool
) -> None:
    """UsageError for a zstd push of a tag of several platforms from the containerd image store, where this run
    writes its index (every platform of a flavor selected): the index is written from each image's digest the
    engine records, which there is the gzip index the zstd push never sent. One platform's own tag alone
    (`<tag>-<arch>`, for `join`) writes no index and is pushed."""
    if not (push and compression == values.ZSTD and containerd_store):
        return
    if several := [s.combination.folder for s in chosen if writes_index(s)]:
        raise UsageError(
            f"{several[0]}: a tag of several platforms cannot be pushed with --compression zstd from the containerd "
            "image store (the index would name the gzip images the zstd push did not send): push it with gzip"
        )


def writes_index(selected: planning.Selected) -> bool:
    """Whether a run of `selected` writes an index: a combination of several platforms with every platform of
    one of its flavors selected (index.missing_platforms, as builder._index asks)."""
    from torchimages.building import index

    combination = selected.combination
    flavors = {image.flavor for image in selected.images}
    return combination.multi_platform and any(
        not index.missing_platforms(combination, [i for i in selected.images if i.flavor == flavor])
        for flavor in flavors
    )


def zstd_attestation_note(push: bool, compression: str) -> str | None:
    """What a zstd push of attested images says once: it carries none of their attestations."""
    if not push or compression != values.ZSTD:
        return None
    return (
        "Attestations: the zstd push carries none (the SBOM and provenance name the gzip manifest's digest, not the "
        "zstd one's): each image's own tag in the registry has no attestations; push with --compression gzip to "
        "publish them (docs/how-to/push-with-zstd.md)"
    )


def renderer(args: argparse.Namespace) -> progress.Renderer:
    """How `build` and `promote` show progress: --progress, the heartbeat from TORCHIMAGES_HEARTBEAT_S."""
    return renderers.renderer(args.progress, sys.stdout, settings.seconds("TORCHIMAGES_HEARTBEAT_S"))


def cache_specs(option: str, texts: Sequence[str], *placeholders: str) -> tuple[CacheSpec, ...]:
    """`--cache-from`/`--cache-to` values parsed, by `build` and `bake` alike (UsageError naming the option);
    `placeholders` (bake's `{target}`) may stand in a ref as `{tag}` does."""
    from torchimages.engine import CacheSpec

    try:
        return tuple(CacheSpec.parse(text, placeholders) for text in texts)
    except ValueError as exc:
        raise UsageError(values.hide_logins(f"{option}: {exc}")) from None


def make_builder(
    args: argparse.Namespace,
    engine: DockerEngine,
    options: requests.BuildOptions,
    shown: progress.Renderer,
    junit_dir: Path | None = None,
    security: GateOptions | None = None,
    stale: bool = False,
) -> builder.Builder:
    """The Builder of `build` and `promote`, with the smoke gate `--test` asks for (its JUnit files into
    `junit_dir` for a report) and the security gate (`security`); the gates share the builder's cancel event.
    `stale` (`build --rebuild-stale`): an up-to-date image is asked `outdated`'s question (security.staleness,
    every check, whatever `--skip-check` leaves out of the gate) before it is skipped."""
    from torchimages.building import builder
    from torchimages.security import gate as security_gate
    from torchimages.smoke import runner

    cancelled = threading.Event()
    gate = None
    if "none" not in args.test:
        suites = SUITES if "gpu" in args.test else ("cpu",)
        gate = runner.smoke_gate(runner.SmokeOptions(suites=suites), engine, cancelled, junit_dir)
    checks = None
    if security is not None:
        chosen = security

        def checks(image: Image, reference: str, secrets: tuple[tuple[str, bytes], ...]) -> security_gate.Verdict:
            return security_gate.verdict(engine, image.own_tag, reference, chosen, secrets, cancelled)

    stale_check = None
    if stale and security is not None:
        from torchimages.security import staleness

        asked = dataclasses.replace(security, skip=frozenset())

        def stale_check(combination: Combination, image: Image) -> tuple[str, ...]:
            """Why the image is stale; a check that could not look is a reason too (it is not known current)."""
            found = staleness.check(engine, combination, image, asked, cancelled=cancelled)
            return (*found.reasons, *(f"not known current: {u}" for u in found.unchecked))

    return builder.Builder(
        engine, options, gate, cancelled=cancelled, renderer=shown, security_gate=checks, stale_check=stale_check
    )


def security_options(args: argparse.Namespace, network: str | None = None) -> GateOptions:
    """The security gate's options from `--allowlist`, `--skip-check` and `--require-scan`, the layer scan's
    cache and bounds from the settings, and this command's os-updates answers; the allowlist is read and checked
    here, before anything is written or started (InputError: each problem, located)."""
    from torchimages.security import allowlist, layer_cache, layers, os_answers
    from torchimages.security.gate import GateOptions
    from torchimages.security.model import CHECKS

    path = args.allowlist or args.matrix.parent / allowlist.DEFAULT_FILE
    today = allowlist.utc_today()  # one day for reading the entries and judging them
    entries = allowlist.read(path, required=args.allowlist is not None, today=today)
    skipped = getattr(args, "skip_check", [])
    skip = frozenset(CHECKS) if "all" in skipped else frozenset(skipped)
    cache, limits = layer_cache.from_settings(), layers.Limits.configured()
    answers = os_answers.Answers()  # this command's: never outlives it
    return GateOptions(
        entries, skip, args.require_scan, network, today=today, cache=cache, limits=limits, answers=answers
    )


def told(finished: Finished) -> bool:
    """Print a finished report's problems and where it is; whether it is complete."""
    for problem in finished.problems:
        print(shown(f"error: {problem}"), file=sys.stderr)
    print(shown(f"report: {finished.where}"))
    return finished.complete


def check_file(option: str, path: Path | None) -> None:
    """InputError, naming the file, unless `path` (when given) is a regular file this user can read, within
    TORCHIMAGES_MAX_FILE_BYTES (read by `textfile`, which says what it is instead: a folder, a FIFO)."""
    if path is not None:
        textfile.read_bytes(path, f"the {option} file")


def check_report(report: Path | None) -> None:
    """UsageError unless `--report DIR` (when given) can be written and syft is there (writes nothing)."""
    from torchimages.reporting import session

    preflight.folder("--report", report)
    session.check(report)


def check_sources(sources: WheelSources) -> None:
    """UsageError naming each local wheel source that is no folder (before anything is served or built)."""
    missing = wheels.missing_folders(sources)
    if missing:
        raise UsageError(
            f"wheel source {', '.join(missing)}: not a folder (--index-url, --extra-index-url, --find-links)"
        )


def to_build(
    chosen: Sequence[planning.Selected], engine: Engine, options: requests.BuildOptions, rebuild_stale: bool
) -> list[planning.Selected]:
    """The images a build may build (all with --no-cache or --rebuild-stale; else those not up to date), by
    combination: what the source check asks about."""
    from torchimages.building import build_digest

    if options.no_cache or rebuild_stale:
        return list(chosen)
    found = []
    for s in chosen:
        images = tuple(
            i
            for i in s.images
            if not build_digest.current(
                engine, s.combination, i, options.images_dir, options.mirrors, options.digest_settings(s.combination)
            )
        )
        if images:
            found.append(dataclasses.replace(s, images=images))
    return found


def pypi_only_way(chosen: Sequence[planning.Selected], matrix: planning.Plan | None) -> str | None:
    """The way out to the images PyPI alone serves (`list --pypi-only`), where the matrix has one: of the selected
    torch releases (named), else of any; None where it has none or every selected image is one already."""
    if matrix is None or all(s.combination.pypi_only for s in chosen):
        return None
    releases = sorted({s.combination.torch for s in chosen})
    if any(c.pypi_only and c.torch in releases for c in matrix.combinations):
        return f"the images PyPI alone serves (`list --pypi-only {' '.join(releases)}`)"
    if any(c.pypi_only for c in matrix.combinations):
        return "the images PyPI alone serves (`list --pypi-only`; none of torch " + ", ".join(releases) + ")"
    return None


def check_reachable(
    chosen: Sequence[planning.Selected],
    sources: WheelSources,
    engine: Engine | None,
    matrix: planning.Plan | None = None,
) -> tuple[str, ...]:
    """Before anything is bootstrapped or built: UsageError (exit 2, in seconds) naming each pinned wheel no source
    serves and each registry image that the engine does not hold and whose registry does not answer, with the ways
    out (`matrix`: the plan, whose PyPI-only images are one where it has some). The machine's own pip set-up counts
    where it is handed to the build (`make`: scripts/host-pip-sources). `engine` None (`plan`): every registry
    image is asked of its registry. Returned: what could not be told (an index or registry that asks for a login
    this question does not have), one line each: refused nothing, never said to be served."""
    from torchimages.doctor import facts, selection
    from torchimages.kb import reach

    found = reach.check(reach.needs(chosen, sources), sources.find_links, replaced=bool(sources.index_url))
    lines = found.missing
    bases = selection.needs(chosen).registry_bases
    absent = [b.reference for b in bases if engine is None or engine.inspect(b.reference) is None]
    # A registry that wants a login (docker login's, which the engine has and this question does not) cannot tell:
    # its answer's HTTP status says so (RegistryError.login), never the words of a message or a host name.
    answers = facts.base_answers(absent)
    unreached = {ref: why for ref, why, login in answers if why and not login}
    untold = (
        *(f"wheels: {line}" for line in found.unknown),
        *(
            f"registry image {ref}: not known: its registry asks for a login this check does not have ({why})"
            for ref, why, login in answers
            if why and login
        ),
    )
    if not lines and not unreached:
        return tuple(values.mirror_without_login(line) for line in untold)
    said = [*(f"wheels: {line}" for line in lines), *(f"registry image {ref}: {why}" for ref, why in unreached.items())]
    ways = []
    if lines:
        ways.append(
            "an index that serves them (--index-url or --extra-index-url: a mirror of the index named, or a local "
            "folder)"
        )
    if unreached:
        ways.append("a registry mirror that holds them (--base-registry)")
        os_images = {s.combination.os.image for s in chosen if s.combination.os.image}
        if any(b.name in os_images and b.reference in unreached for b in bases):
            ways.append("OS bases made here from the distribution's archive (--bases bootstrap)")
        if any(b.name not in os_images and b.reference in unreached for b in bases):
            ways.append("the runtime images alone (a devel image on nvidia/cuda needs that image)")
    pypi_only = pypi_only_way(chosen, matrix)
    if pypi_only:
        ways.append(pypi_only)
    for line in said:  # a registry's or an index's words among them, never a login
        print(f"needed: {shown(values.hide_logins(line))}", file=sys.stderr)
    for line in untold:
        print(f"not known: {shown(values.hide_logins(line))}", file=sys.stderr)
    raise UsageError(f"the selection cannot be built from this machine (needed: above); ways out: {'; '.join(ways)}")


def check_docker(docker_cli: str | None) -> None:
    """UsageError when `--docker` (else $DOCKER) names a program that cannot be run (before anything is
    written): what `build`, `promote` and `outdated` check alike."""
    from torchimages.engine.discovery import client_problem

    named, where = (docker_cli, "--docker") if docker_cli is not None else (settings.text("DOCKER"), "DOCKER")
    problem = client_problem(named) if named else None
    if problem:
        raise UsageError(f"{where}: {problem}")


def check_gzip_level(level: int | None, engine: DockerEngine) -> None:
    """UsageError when `--gzip-level` cannot be done by this engine (before anything is built)."""
    if level is not None and (problem := engine.gzip_level_problem()):
        raise UsageError(f"--gzip-level {level}: {problem}")


def check_compression(compression: str, push: bool) -> None:
    """UsageError when `--compression zstd` cannot be done: without --push (only a push compresses), or
    without the programs a zstd push runs here (before anything is built)."""
    if compression == values.GZIP:
        return
    if not push:
        raise UsageError(f"--compression {compression}: only a push compresses layers; add --push (or leave it out)")
    from torchimages.engine.zstd_push import zstd_problem

    problem = zstd_problem()
    if problem:
        raise UsageError(problem)


def check_sign_key(key: Path | None, push: bool | None = None) -> Path | None:
    """The `--sign-key` file, checked before anything is written or started (UsageError, InputError): given
    with --push (`push` None: the command always writes to a registry), a file (not a KMS URI), readable,
    cosign there, and cosign opens it with $COSIGN_PASSWORD."""
    if key is None:
        return None
    if push is False:
        raise UsageError(f"--sign-key {key}: only a pushed image is signed (by its digest in the registry); add --push")
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:/", str(key)):  # awskms://..., as a Path writes it
        raise UsageError(f"--sign-key {key}: a cosign key file is taken, not a URI (KMS keys are not supported)")
    check_file("--sign-key", key)
    from torchimages.security import signing

    problem = signing.key_problem(key)
    if problem:
        raise UsageError(problem)
    return key


def check_registry_deadline(writes: bool = True) -> None:
    """SettingError for a bad TORCHIMAGES_REGISTRY_DEADLINE_S where the command writes an index (`--push`,
    `join`): every registry question it asks is bounded by it."""
    if writes:
        from torchimages import registry

        registry.deadline_s()


def signer(key: Path | None) -> Signer | None:
    """What signs with the checked `key` (None without one): cosign."""
    if key is None:
        return None
    from torchimages.security import signing

    return signing.Signer(key, cosign=signing.find_cosign() or "cosign")


def check_platforms(chosen: Sequence[planning.Selected], command: str, suggestion: str) -> None:
    """InputError when a selected combination is built for several platforms (or another than linux/amd64) and
    `command` does not handle those yet (before anything is written, an engine asked or a build started)."""
    from torchimages.building.requests import unsupported

    refused = unsupported(chosen, command, suggestion)
    if refused:
        raise InputError(refused)


def check_emulation(chosen: Sequence[planning.Selected]) -> None:
    """UsageError when a selected image is for a platform this machine runs only under emulation and the emulator
    is not set up (the doctor's check, before anything is written or started)."""
    from torchimages.doctor import checks, facts, selection

    need = selection.needs(chosen)
    found = checks.check_emulation(facts.emulation(need), need)
    if found.failed:
        raise UsageError(f"{found.message}; {found.fix}")


def check_names(chosen: Sequence[planning.Selected]) -> None:
    """InputError when two selected images would share a public name (before anything is written)."""
    from torchimages.building.requests import shared_names

    clashes = shared_names(chosen)
    if clashes:
        raise InputError(clashes)


def start_outputs(log_dir: Path, report: Path | None) -> Path | None:
    """Once every check passed: make the log folder and the report folder (both undone if either cannot be
    made); the report's JUnit folder (session.start), None without a report."""
    from torchimages.reporting import session

    with preflight.all_or_nothing(log_dir, *([report] if report else [])):
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--log-dir {log_dir}: cannot make it: {exc.strerror or exc}") from None
        return session.start(report)
