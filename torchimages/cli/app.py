"""The command line: one table of commands, each a small function.

validate, list, render and plan need neither Docker nor the docker SDK; build, test and lock import
the engine (and through it the SDK) only when they run.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from torchimages import render
from torchimages.building import progress
from torchimages.building.wheels import WheelSources
from torchimages.combination import INPUT_DIGEST_LABEL, LABEL_PREFIX, Combination, Image
from torchimages.planning import plan as planning
from torchimages.problems import InputError, Problem, distinct, shown
from torchimages.smoke import SUITES

if TYPE_CHECKING:
    from torchimages.building import builder
    from torchimages.engine import CacheSpec, DockerEngine, ImageInfo

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_BROKEN_PIPE = 128 + 13  # 128 + SIGPIPE, the status a shell reports for a writer whose reader left
DEFAULT_MATRIX = Path("matrix.yaml")


class UsageError(Exception):
    """A command cannot run as asked (exit status 2); the message says why and what to do."""


# ---------------------------------------------------------------------------------------------
# Shared helpers


def load_plan(args: argparse.Namespace) -> planning.Plan:
    """Load the plan named by the common options."""
    return planning.load(args.matrix, args.templates, args.images_dir, base_registry=args.base_registry)


def select(args: argparse.Namespace, loaded: planning.Plan) -> list[planning.Selected]:
    """The selected images by combination; prints the warnings that concern them."""
    chosen = planning.select(loaded, args.selectors)
    warn([*loaded.warnings, *(w for s in chosen for w in s.combination.warnings)])
    return chosen


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


def image_json(combination: Combination, image: Image) -> dict[str, object]:
    """The public, stable description of one image (`list --json`)."""
    return {
        "tag": image.tag,
        "reference": image.reference,
        "aliases": list(image.aliases),
        "flavor": image.flavor,
        "combination": combination.folder,
        "torch": combination.torch,
        "torchvision": combination.torchvision,
        "torchaudio": combination.torchaudio,
        "cuda": combination.cuda or "cpu",
        "cudnn": combination.cudnn,
        "nccl": combination.nccl,
        "python": combination.python,
        "os": combination.os.name,
        "dockerfile": combination.dockerfile,
        "base_image": combination.os.image,
        "toolkit": combination.toolkit.provider if image.flavor == "devel" else "none",
        "devel_from": combination.devel_from if image.flavor == "devel" else None,
        "min_driver": combination.min_driver,
        "input_digest": image.input_digest,
    }


def describe(combination: Combination, image: Image) -> str:
    """One plan line: what is built, from what, with which target."""
    devel = image.flavor == "devel"
    base = combination.toolkit.image if devel and combination.toolkit.provider == "image" else combination.os.image
    provider = combination.toolkit.provider
    toolkit = f", nvcc from {provider}" if devel and provider != "none" else ""
    return (
        f"{image.reference}\n    dockerfile {combination.dockerfile} --target {image.flavor}\n"
        f"    base {base} ({combination.os.provider}){toolkit}; wheels from {combination.index_url}\n"
        f"    aliases {', '.join(image.aliases) or '-'}"
    )


def ci_matrix(chosen: list[planning.Selected]) -> dict[str, list[dict[str, str]]]:
    """A GitHub Actions `strategy.matrix`: one job per combination (its flavors share layers)."""
    jobs = [
        {
            "combination": s.combination.folder,
            "tags": " ".join(i.tag for i in s.images),
            "torch": s.combination.torch,
            "cuda": s.combination.cuda or "cpu",
            "os": s.combination.os.name,
        }
        for s in chosen
    ]
    return {"include": jobs}


# ---------------------------------------------------------------------------------------------
# Commands without Docker


def cmd_validate(args: argparse.Namespace) -> int:
    loaded = load_plan(args)
    warn(loaded.all_warnings())
    images = sum(len(c.images) for c in loaded.combinations)
    print(f"{args.matrix}: valid, {len(loaded.combinations)} combinations, {images} images")
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    chosen = select(args, load_plan(args))
    if args.json:
        print(json.dumps([image_json(s.combination, i) for s in chosen for i in s.images], indent=2))
    else:
        for s in chosen:
            for image in s.images:
                print(image.tag)
    return EXIT_OK


def cmd_render(args: argparse.Namespace) -> int:
    loaded = load_plan(args)
    rendered = render.render_all(loaded.combinations, loaded.templates)
    if args.check:
        stale = render.stale(rendered, loaded.images_dir)
        for path in stale:
            print(f"stale: {loaded.images_dir / path}", file=sys.stderr)
        if stale:
            print("run `make render` (python build.py render) and commit the result", file=sys.stderr)
            return EXIT_FAILED
        print(f"{len(rendered)} Dockerfiles up to date")
        return EXIT_OK
    changed = render.write(rendered, loaded.images_dir)
    print(f"{len(rendered)} Dockerfiles rendered into {loaded.images_dir}, {len(changed)} changed")
    return EXIT_OK


def cmd_plan(args: argparse.Namespace) -> int:
    chosen = select(args, load_plan(args))
    if args.format == "github":
        print(json.dumps(ci_matrix(chosen), separators=(",", ":")))
        return EXIT_OK
    bases = sorted({s.combination.os.image for s in chosen if s.combination.os.provider == "bootstrap"})
    steps = [f"bootstrap base {image} from the distribution archive" for image in bases]
    steps += [describe(s.combination, image) for s in chosen for image in s.images]
    for number, step in enumerate(steps, 1):
        print(f"{number}. {step}")
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# Commands that talk to Docker


def cmd_build(args: argparse.Namespace) -> int:
    from torchimages.building import builder

    renderer = _renderer(args)
    loaded = load_plan(args)
    chosen = select(args, loaded)
    if args.ca_cert and not args.ca_cert.is_file():
        raise UsageError(f"--ca-cert {args.ca_cert}: no such file")
    options = builder.BuildOptions(
        images_dir=loaded.images_dir,
        log_dir=args.log_dir,
        jobs=args.jobs,
        no_cache=args.no_cache,
        ca_cert=args.ca_cert,
        sources=WheelSources(args.index_url, tuple(args.extra_index_url), tuple(args.find_links)),
        network=args.network,
        mirror=args.mirror,
        push=args.push,
        cache_from=_cache_specs("--cache-from", args.cache_from),
        cache_to=_cache_specs("--cache-to", args.cache_to),
    )
    junit_dir = start_report(args.report)
    engine = connect(args.docker)
    engine.check_cache(options.cache_from, options.cache_to)  # a type this client cannot do: exit 2, no build
    build = _builder(args, engine, options, renderer, junit_dir)
    outcomes, received = _until_interrupted(build, lambda: build.build(chosen))
    print(builder.summary(outcomes))
    complete = True
    if args.report and junit_dir:
        from torchimages.reporting import writer as reporting

        images = reporting.built_images(outcomes, engine, junit_dir, pushed=args.push)
        complete = finish_report(args.report, "build", images, engine, junit_dir, sboms=not received)
    if received:
        return 128 + received[0]  # the shell's convention: 130 for SIGINT, 143 for SIGTERM
    return EXIT_FAILED if any(o.status == "failed" for o in outcomes) or not complete else EXIT_OK


def start_report(directory: Path | None) -> Path | None:
    """For `--report DIR`: check syft is there and DIR can be written, before any build or test; the folder
    the smoke suites write their JUnit files into."""
    if directory is None:
        return None
    from torchimages.reporting import sbom
    from torchimages.reporting import writer as reporting

    try:
        sbom.syft_binary()
        return reporting.prepare(directory)
    except (sbom.SbomError, reporting.ReportError) as exc:
        raise UsageError(f"--report: {exc}") from None


def finish_report(
    directory: Path, command: str, images: Any, engine: DockerEngine, junit_dir: Path, sboms: bool = True
) -> bool:
    """Write the report folder; say where; whether it is complete (every SBOM made)."""
    from torchimages.reporting import writer as reporting

    try:
        problems = reporting.write(directory, command, images, engine, junit_dir, sboms)
    except reporting.ReportError as exc:
        raise UsageError(str(exc)) from None
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    print(f"report: {directory / reporting.MANIFEST}, {reporting.SUMMARY}, {reporting.JUNIT}, {reporting.SBOM_DIR}/")
    return not problems


def _renderer(args: argparse.Namespace) -> progress.Renderer:
    """How `build` and `promote` show progress: --progress, the heartbeat from TORCHIMAGES_HEARTBEAT_S."""
    if args.progress not in progress.MODES:
        raise UsageError(
            f"--progress (or TORCHIMAGES_PROGRESS) takes {', '.join(progress.MODES)}, not {args.progress!r}"
        )
    text = os.environ.get("TORCHIMAGES_HEARTBEAT_S", str(progress.HEARTBEAT_S))
    try:
        heartbeat_s = float(text)
    except ValueError:
        heartbeat_s = 0.0
    if not 0 < heartbeat_s < float("inf"):
        raise UsageError(f"TORCHIMAGES_HEARTBEAT_S={text!r}: a number of seconds above 0, e.g. 60")
    return progress.renderer(args.progress, sys.stdout, heartbeat_s)


def cmd_bake(args: argparse.Namespace) -> int:
    from torchimages.building import bake, builder, wheels

    loaded = load_plan(args)
    chosen = select(args, loaded)
    sources = WheelSources(args.index_url, tuple(args.extra_index_url), tuple(args.find_links))
    if sources.local_folders:
        raise UsageError(
            "bake writes a file for builders elsewhere and serves no wheel folder, so a local folder "
            f"({', '.join(map(str, sources.local_folders))}) cannot be a wheel source: serve it over HTTP "
            "(python3 -m http.server -d DIR PORT) and pass its URL instead (with --network host for a server "
            "on the builder's loopback); unset TORCHIMAGES_FIND_LINKS and friends if scripts/host-pip-sources set them"
        )
    if args.ca_cert and not args.ca_cert.is_file():
        raise UsageError(f"--ca-cert {args.ca_cert}: no such file")
    if args.bootstrap:  # the docker driver builds FROM this engine's images
        from torchimages.building import bootstrap

        engine = connect()
        say = functools.partial(print, file=sys.stderr)
        for os_release in bootstrap.bootstrapped(s.combination for s in chosen):
            say(bootstrap.ensure(engine, os_release, args.mirror, bootstrap.log_file(Path("logs"), os_release), say))
    options = builder.BuildOptions(
        images_dir=loaded.images_dir,
        log_dir=Path("logs"),  # a bake writes no log here: buildx shows the builds
        no_cache=args.no_cache,
        ca_cert=args.ca_cert,
        sources=sources,
        network=args.network,
    )
    entries = []
    with wheels.serve(sources) as passed:  # remote URLs only: nothing is served, they pass through
        served = dataclasses.replace(passed, trusted_hosts=tuple(args.trusted_host))
        for s in chosen:
            pip_conf = _secret(args.secrets_dir, served.pip_conf(s.combination.index_url))
            for image in s.images:
                reference = bake.bake_reference(s.combination, image, args.temporary_registry)
                request = builder.build_request(options, s.combination, image, reference, served, pip_conf)
                entries.append(bake.Entry(s.combination, image, request))
    text = json.dumps(bake.bake_file(entries, bake.Cache(tuple(args.cache_from), tuple(args.cache_to))), indent=2)
    if args.output is None:
        print(text)
        return EXIT_OK
    try:
        args.output.write_text(text + "\n")
    except OSError as exc:
        raise UsageError(f"--output {args.output}: {exc.strerror or exc}") from None
    print(
        f"{args.output}: {len(entries)} targets; build them with `docker buildx bake -f {args.output} --load "
        f"--metadata-file bake-metadata.json` (or --push), then `build.py promote --from bake-metadata.json`",
        file=sys.stderr,
    )
    return EXIT_OK


def _secret(folder: Path, text: str) -> Path:
    """A file holding `text` (a pip.conf: index URLs may hold credentials), private, named by its content."""
    import hashlib

    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = folder / f"pip-{hashlib.sha256(text.encode()).hexdigest()[:12]}.conf"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
    except OSError as exc:
        raise UsageError(f"--secrets-dir {folder}: {exc.strerror or exc}") from None
    return path


def cmd_promote(args: argparse.Namespace) -> int:
    from torchimages.building import bake, builder

    renderer = _renderer(args)
    loaded = load_plan(args)
    source = str(args.metadata)
    if not args.metadata.is_file():
        raise UsageError(f"--from {source}: no such file (the --metadata-file of `docker buildx bake`)")
    try:
        metadata = bake.read_metadata(args.metadata.read_text(encoding="utf-8"), source)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--from {source}: cannot read it: {exc}") from None
    if args.selectors:
        chosen = select(args, loaded)
    else:  # every image of the plan the bake built
        named = [s for s in select(args, loaded) if any(bake.target_name(i) in metadata for i in s.images)]
        chosen = [
            planning.Selected(s.combination, tuple(i for i in s.images if bake.target_name(i) in metadata))
            for s in named
        ]
        if not chosen:
            raise UsageError(f"--from {source}: names no bake target of this plan's images (see build.py bake)")
    baked = bake.baked_images(metadata, chosen, source, args.temporary_registry)
    options = builder.BuildOptions(images_dir=loaded.images_dir, log_dir=args.log_dir, push=args.push)
    engine = connect(args.docker)
    promoter = _builder(args, engine, options, renderer)
    outcomes, received = _until_interrupted(promoter, lambda: promoter.promote(chosen, baked))
    print(builder.summary(outcomes, always=("promoted", "failed")))
    if received:
        return 128 + received[0]  # the shell's convention: 130 for SIGINT, 143 for SIGTERM
    return EXIT_FAILED if any(o.status == "failed" for o in outcomes) else EXIT_OK


def _builder(
    args: argparse.Namespace,
    engine: DockerEngine,
    options: builder.BuildOptions,
    renderer: progress.Renderer,
    junit_dir: Path | None = None,
) -> builder.Builder:
    """The Builder of `build` and `promote`, with the smoke gate `--test` asks for (its JUnit files into
    `junit_dir` for a report); the gate shares the builder's cancel event."""
    from torchimages.building import builder
    from torchimages.smoke import runner

    cancelled = threading.Event()
    gate = None
    if "none" not in args.test:
        suites = SUITES if "gpu" in args.test else ("cpu",)
        gate = runner.smoke_gate(runner.SmokeOptions(suites=suites), engine, cancelled, junit_dir)
    return builder.Builder(engine, options, gate, cancelled=cancelled, renderer=renderer)


def _until_interrupted(
    target: builder.Builder, work: Callable[[], list[builder.Outcome]]
) -> tuple[list[builder.Outcome], list[int]]:
    """Run `work`; SIGINT or SIGTERM cancels `target` (running builds stopped, nothing more tagged) and is
    said once. The outcomes and the signals received."""
    received: list[int] = []

    def interrupt(signum: int, _frame: object) -> None:
        if not received:
            name = signal.Signals(signum).name  # os.write: print may be mid-line in this very thread
            os.write(2, f"\n{name}: stopping; running builds are cancelled, nothing more is tagged\n".encode())
        received.append(signum)
        target.cancel()

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return work(), received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _cache_specs(option: str, values: Sequence[str]) -> tuple[CacheSpec, ...]:
    from torchimages.engine import CacheSpec

    try:
        return tuple(CacheSpec.parse(value) for value in values)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from None


def _suites(text: str) -> tuple[str, ...]:
    suites = tuple(s for s in text.split(",") if s)
    unknown = [s for s in suites if s not in SUITES]
    if unknown or not suites:
        raise UsageError(f"--suites takes {', '.join(SUITES)}, not {','.join(unknown) or 'nothing'}")
    return suites


def cmd_test(args: argparse.Namespace) -> int:
    from torchimages.engine import split_run_args
    from torchimages.smoke import document, runner

    local = args.host == "local"
    if args.images and args.selectors:
        raise UsageError(
            "SELECTOR and --image are mutually exclusive: test images of the matrix by SELECTOR, "
            "or any local image by --image REF"
        )
    if local and (args.images or args.selectors or args.run_args):
        raise UsageError("--host local tests this machine: it takes no SELECTOR, --image or --run-arg")
    if args.spec and not (local or args.images):
        raise UsageError("--spec applies to --host local or --image; matrix images get their spec from the matrix")
    if args.report and (local or args.junit):
        raise UsageError("--report takes the images' results itself: not with --host local or --junit")
    options = runner.SmokeOptions(
        _suites(args.suites),
        args.gpus,
        args.require_gpu,
        args.shm_size,
        args.python_exe or ("python3" if local else "python"),
        tuple(split_run_args(args.run_args)),
    )
    if local:
        try:
            host = json.loads(args.spec.read_text()) if args.spec else runner.host_document(options.python_exe)
        except (OSError, ValueError, subprocess.CalledProcessError) as exc:
            raise UsageError(f"cannot read the host's spec: {exc}") from None
        passed = runner.run_suites("local://", host, options, args.junit).returncode == 0
        return EXIT_OK if passed else EXIT_FAILED
    planned: list[tuple[Combination, Image] | None]
    if args.images:
        engine = connect()
        targets = [(_tag_of(reference), spec) for reference, spec in image_specs(engine, args.images, args.spec)]
        planned = [None] * len(targets)
    else:
        if not args.selectors:
            raise UsageError("name the images to test (SELECTOR... or --image REF), or use --host local")
        chosen = [(s.combination, i) for s in select(args, load_plan(args)) for i in s.images]
        engine = connect()
        missing = [i.reference for _, i in chosen if engine.labels(i.reference) is None]
        if missing:
            raise UsageError("not built yet (make build TAG=...): " + ", ".join(missing))
        targets = [(i.tag, document.image_document(c, i, i.reference)) for c, i in chosen]
        planned = list(chosen)
    junit_dir = start_report(args.report)
    results, tested = [], []
    for (tag, spec), plan_of in zip(targets, planned, strict=True):
        junit = runner.junit_in(junit_dir, tag) if junit_dir else runner.junit_path(args.junit, tag, len(targets) > 1)
        start = time.monotonic()
        result = runner.run_suites_in_container(engine, spec, options, junit)
        if not result.args:  # no container could be started
            print(f"error: {result.stderr}", file=sys.stderr)
        results.append((str(spec["image"]), result.returncode))
        error = "" if result.args else result.stderr
        tested.append((tag, spec, result.returncode, time.monotonic() - start, error, plan_of))
    print(runner.summary(results))
    complete = True
    if args.report and junit_dir:
        from torchimages.reporting import writer as reporting

        images = reporting.tested_images([reporting.Tested(*t) for t in tested], engine, junit_dir)
        complete = finish_report(args.report, "test", images, engine, junit_dir)
    return EXIT_FAILED if any(code for _, code in results) or not complete else EXIT_OK


def _tag_of(reference: str) -> str:
    """A file-name-safe form of an image reference (JUnit FILE-<tag>.xml)."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in reference)


def image_specs(
    engine: DockerEngine, references: Sequence[str], spec_file: Path | None
) -> list[tuple[str, dict[str, Any]]]:
    """The spec of each image given by --image: from --spec FILE, else from its io.torchimages.* labels
    (an image built FROM one of ours inherits them). Every image is checked before any runs."""
    from torchimages.smoke import document

    template = None
    if spec_file is not None:
        try:
            template = read_spec_file(spec_file)
        except document.SpecError as exc:
            raise UsageError(f"--spec: {exc}") from None
    found = {reference: engine.inspect(reference) for reference in references}
    missing = [reference for reference, info in found.items() if info is None]
    if missing:
        raise UsageError(f"no such image here: {', '.join(missing)} (docker pull it, or build it, before testing it)")
    specs = []
    for reference, info in found.items():
        assert info is not None
        if template is not None:
            print(f"{reference}: spec read from {spec_file}")
            specs.append((reference, {**template, "image": reference}))
            continue
        if not document.has_our_labels(info.labels):
            raise UsageError(
                f"{reference} has no io.torchimages.* labels, so there is no spec to test it against: "
                "build it FROM one of our images (it inherits their labels), or pass --spec FILE "
                "(a SPEC.json, see docs/smoke-suites.md)"
            )
        cuda = info.labels.get(f"{LABEL_PREFIX}.cuda")
        min_driver = document.known_min_driver(None if cuda in (None, "none") else cuda)
        try:
            spec = document.labels_document(reference, info.labels, info.user, min_driver)
        except document.SpecError as exc:
            raise UsageError(f"{reference}: its io.torchimages.* labels do not make a spec: {exc}") from None
        print(f"{reference}: spec read from its io.torchimages.* labels{_inherited(engine, info)}")
        specs.append((reference, spec))
    return specs


def read_spec_file(path: Path) -> dict[str, Any]:
    """A SPEC.json, validated (document.load_spec), as the plain mapping the runner writes."""
    from torchimages.smoke import document

    document.load_spec(path)
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _inherited(engine: DockerEngine, info: ImageInfo) -> str:
    """`, inherited from its base X` when another local image has the same labels and its layers are a
    prefix of this one's: this image was built FROM it."""
    digest = info.labels.get(INPUT_DIGEST_LABEL)
    if not digest:
        return ""
    for other in engine.images_labelled(INPUT_DIGEST_LABEL, digest):
        derived = len(other.layers) < len(info.layers) and info.layers[: len(other.layers)] == other.layers
        if other.id != info.id and derived:
            name = next(iter(other.tags), other.id[:19])
            return f" (inherited from its base {name}: it was built FROM one of ours)"
    return ""


def cmd_lock(args: argparse.Namespace) -> int:
    from torchimages.building import locks as lock

    if args.bases:
        return lock_bases(args)
    if args.check:
        raise UsageError("--check applies to --bases (lock files of packages are read from built images)")
    if not args.selectors:
        raise UsageError("name the combinations whose packages to lock (SELECTOR...), or lock --bases")
    loaded = load_plan(args)
    chosen = select(args, loaded)
    engine = connect()
    for s in chosen:
        image = lock.image_to_freeze(s.combination)
        if engine.labels(image.reference) is None:
            raise UsageError(f"{image.reference} is not built yet (make build TAG=...)")
        path = lock.write(loaded.images_dir, s.combination, image.reference, lock.freeze(engine, image.reference))
        print(f"locked {s.combination.folder}: {path}")
    relocked = load_plan(args)
    changed = render.write(render.render_all(relocked.combinations, relocked.templates), relocked.images_dir)
    print(f"{len(changed)} Dockerfiles re-rendered to use their lock")
    return EXIT_OK


def lock_bases(args: argparse.Namespace) -> int:
    """`lock --bases`: resolve every registry base of the selection (all without SELECTOR) to its digest, through
    the mirror where one is set, into the bases lock beside the matrix; re-render. `--check` compares instead."""
    from torchimages import registry
    from torchimages.planning import bases

    loaded = load_plan(args)
    chosen = select(args, loaded) if args.selectors else [planning.Selected(c, c.images) for c in loaded.combinations]
    settings = loaded.bases
    assert settings is not None
    wanted = {b.name: b for s in chosen for b in s.combination.registry_bases}
    if not wanted:
        print("no registry bases in the selection (bootstrapped bases need no lock)")
        return EXIT_OK
    names = sorted(wanted)
    found: dict[str, str] = {}
    failures = []
    with ThreadPoolExecutor(max_workers=min(8, len(names))) as pool:
        answers = pool.map(lambda n: _digest_or_error(registry, wanted[n].pull), names)
        for name, (digest, error) in zip(names, answers, strict=True):
            if digest:
                found[name] = digest
            else:
                failures.append(str(error))  # names the reference pulled: the base, or its mirror's name
    for failure in failures:
        print(f"error: {failure}", file=sys.stderr)
    if args.check:
        moved = [
            f"{n}: locked {settings.locks.get(n) or 'nothing'}, the registry serves {d}"
            for n, d in found.items()
            if settings.locks.get(n) != d
        ]
        for line in moved:
            print(f"stale: {line}", file=sys.stderr)
        if moved or failures:
            print(f"run `{bases.LOCK_COMMAND}` and commit {settings.lock_file.name}", file=sys.stderr)
            return EXIT_FAILED
        print(f"{settings.lock_file}: {len(found)} bases up to date")
        return EXIT_OK
    if failures:
        print(
            f"nothing written: every base must answer (`{bases.LOCK_COMMAND} --base-registry HOST/PREFIX` "
            "resolves them through a mirror)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    used = {b.name for c in loaded.combinations for b in c.registry_bases}
    digests = {n: d for n, d in settings.locks.items() if n in used} | found
    bases.write_locks(settings.lock_file, digests, args.matrix.name, settings.mirror)
    for name in names:
        print(f"locked {name}: {wanted[name].pull}@{found[name]}")
    relocked = load_plan(args)
    changed = render.write(render.render_all(relocked.combinations, relocked.templates), relocked.images_dir)
    print(f"{settings.lock_file}: {len(digests)} bases; {len(changed)} Dockerfiles re-rendered to pull them by digest")
    return EXIT_OK


def _digest_or_error(registry: Any, reference: str) -> tuple[str | None, str | None]:
    try:
        return registry.resolve_digest(reference), None
    except registry.RegistryError as exc:
        return None, str(exc)


def cmd_doctor(args: argparse.Namespace) -> int:
    from torchimages import doctor

    chosen = select(args, load_plan(args))
    need = doctor.needs(chosen, host_only=args.host_only, require_gpu=args.require_gpu)
    tags = [i.tag for i in need.images]
    shown_tags = ", ".join(tags[:3]) + (f" and {len(tags) - 3} more" if len(tags) > 3 else "")
    mode = "run without Docker (--host-only)" if args.host_only else "build and run"
    print(f"doctor: can this machine {mode} {len(tags)} image{'s' * (len(tags) != 1)} ({shown_tags})?")
    checks = doctor.run_checks(doctor.gather(need, args.docker), need)
    for line in doctor.report(checks):
        print(line)
    failed = [c.name for c in checks if c.failed]
    print(
        f"doctor: {len(failed)} failed ({', '.join(failed)})"
        if failed
        else "doctor: everything the selection needs is here"
    )
    return EXIT_FAILED if failed else EXIT_OK


# ---------------------------------------------------------------------------------------------
# Options


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--matrix", type=Path, default=DEFAULT_MATRIX, help="matrix file (default: matrix.yaml)")
    parser.add_argument("--templates", type=Path, default=render.DEFAULT_TEMPLATES, help=argparse.SUPPRESS)
    parser.add_argument(
        "--images-dir",
        type=Path,
        default=None,
        help="where Dockerfiles are rendered (default: images/ beside the matrix)",
    )
    parser.add_argument(
        "--base-registry",
        default=os.environ.get("TORCHIMAGES_BASE_REGISTRY") or None,
        metavar="HOST/PREFIX",
        help="pull registry bases from this mirror (ubuntu:24.04 -> HOST/PREFIX/library/ubuntu:24.04); "
        "overrides the matrix's base_registry",
    )


def _selectors(parser: argparse.ArgumentParser, required: bool = False) -> None:
    parser.add_argument(
        "selectors",
        nargs="+" if required else "*",
        metavar="SELECTOR",
        help="tag prefix (2.7.0-cuda11.8), glob (2.14.1-*-debian12), or a full tag or alias",
    )


def _no_options(parser: argparse.ArgumentParser) -> None:
    pass


def _list_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    _selectors(parser)


def _render_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help="fail (exit 1) if the committed files are stale")


def _plan_options(parser: argparse.ArgumentParser) -> None:
    _selectors(parser, required=True)
    parser.add_argument(
        "--format",
        choices=("text", "github"),
        default="text",
        help="github: a GitHub Actions matrix, one job per combination (`build.py build ${{ matrix.tags }}`)",
    )


def _progress_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--progress",
        default=os.environ.get("TORCHIMAGES_PROGRESS", "auto"),
        choices=progress.MODES,
        help="tty: one live line per running image (stage, time, bytes fetched); plain: one line per stage change "
        "and a heartbeat per running image every minute (TORCHIMAGES_HEARTBEAT_S); auto (default): tty on a terminal",
    )


def _jobs(text: str) -> int:
    """`--jobs N`: a whole number of at least 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of at least 1 (also $TORCHIMAGES_JOBS)")
    return int(text)


def _build_options(parser: argparse.ArgumentParser) -> None:
    """Options of `build`; each defaults to a TORCHIMAGES_* environment variable."""
    env = os.environ.get
    defaults = WheelSources.from_environment()
    _selectors(parser, required=True)
    parser.add_argument(
        "--jobs",
        type=_jobs,
        default=env("TORCHIMAGES_JOBS", "1"),  # a string default goes through _jobs too
        help="combinations built at once (default 1, or $TORCHIMAGES_JOBS)",
    )
    parser.add_argument("--no-cache", action="store_true", help="rebuild even when a verified image is present")
    parser.add_argument(
        "--ca-cert",
        type=Path,
        default=env("TORCHIMAGES_CA_CERT") or None,
        help="CA bundle for TLS inside the build (a BuildKit secret, never in a layer)",
    )
    parser.add_argument(
        "--index-url", default=defaults.index_url, help="wheel index instead of each image's PyTorch index"
    )
    parser.add_argument(
        "--extra-index-url",
        action="append",
        default=list(defaults.extra_index_urls),
        help="additional wheel index (repeatable; URL or local folder)",
    )
    parser.add_argument(
        "--find-links", action="append", default=list(defaults.find_links), help="folder or URL of wheel files"
    )
    parser.add_argument(
        "--network",
        default=env("TORCHIMAGES_NETWORK") or None,
        help="network for RUN steps (host is used automatically for local wheel folders)",
    )
    parser.add_argument("--docker", default=None, help="docker client to build with (default: $DOCKER or found)")
    parser.add_argument(
        "--mirror",
        default=env("TORCHIMAGES_MIRROR") or None,
        help="distribution mirror for bootstrapped bases (default: mmdebstrap's)",
    )
    parser.add_argument("--log-dir", type=Path, default=Path("logs"), help="one build log per image (default logs/)")
    parser.add_argument("--push", action="store_true", help="push the tags of every image that passed")
    _report_option(parser)
    _progress_option(parser)
    parser.add_argument(
        "--cache-from",
        action="append",
        default=env("TORCHIMAGES_CACHE_FROM", "").split(),
        metavar="REF|type=registry,ref=REF",
        help="BuildKit cache source (repeatable): an image built with --cache-to type=inline; {tag} in REF "
        "stands for each image's tag",
    )
    parser.add_argument(
        "--cache-to",
        action="append",
        default=env("TORCHIMAGES_CACHE_TO", "").split(),
        metavar="type=inline",
        help="BuildKit cache export (type=inline: into the image, pushed with --push)",
    )
    parser.add_argument(
        "--test",
        action="append",
        choices=("gpu", "none"),
        default=[],
        help="the cpu smoke suite runs before tagging; gpu adds the GPU suites (--gpus auto); none skips them "
        "(the versions inside are verified regardless)",
    )


def _bake_options(parser: argparse.ArgumentParser) -> None:
    """Options of `bake`: the build's own (wheel sources, CA bundle, network) and the bake file's."""
    env = os.environ.get
    defaults = WheelSources.from_environment()
    _selectors(parser)
    parser.add_argument("--output", type=Path, default=None, help="the bake file (JSON; default: standard output)")
    parser.add_argument(
        "--temporary-registry",
        default=None,
        metavar="REGISTRY",
        help="temporary references go to REGISTRY/torchimages-tmp/... (for bake --push; default: none, local)",
    )
    parser.add_argument(
        "--bootstrap",
        action="store_true",
        help="make the bootstrapped bases (debian12) in this engine first, for a bake with its docker driver",
    )
    parser.add_argument(
        "--mirror", default=env("TORCHIMAGES_MIRROR") or None, help="distribution mirror for --bootstrap"
    )
    parser.add_argument(
        "--secrets-dir",
        type=Path,
        default=Path(".bake"),
        help="where the pip.conf secrets the targets name are written (default .bake/; private, not for commits)",
    )
    parser.add_argument(
        "--cache-from",
        action="append",
        default=[],
        help="BuildKit cache import of every target ({tag}: its image's tag; {target}: its name)",
    )
    parser.add_argument(
        "--cache-to",
        action="append",
        default=[],
        help="BuildKit cache export of every target ({tag}: its image's tag; {target}: its name)",
    )
    parser.add_argument("--no-cache", action="store_true", help="targets build without BuildKit's cache")
    parser.add_argument(
        "--ca-cert", type=Path, default=env("TORCHIMAGES_CA_CERT") or None, help="CA bundle (a BuildKit secret)"
    )
    parser.add_argument("--index-url", default=defaults.index_url, help="wheel index URL (no local folder)")
    parser.add_argument(
        "--extra-index-url", action="append", default=list(defaults.extra_index_urls), help="more index URLs"
    )
    parser.add_argument("--find-links", action="append", default=list(defaults.find_links), help="wheel page URLs")
    parser.add_argument(
        "--trusted-host",
        action="append",
        default=[],
        help="a host pip may reach over plain http (a wheel server on the builder's bridge gateway)",
    )
    parser.add_argument(
        "--network",
        default=env("TORCHIMAGES_NETWORK") or None,
        help="network for RUN steps (buildx 0.13 ignores a bake target's network; later releases read it)",
    )


def _promote_options(parser: argparse.ArgumentParser) -> None:
    _selectors(parser)
    parser.add_argument(
        "--from",
        dest="metadata",
        type=Path,
        required=True,
        metavar="METADATA",
        help="the --metadata-file of `docker buildx bake` (targets of build.py bake)",
    )
    parser.add_argument("--docker", default=None, help="docker client (default: $DOCKER or found)")
    parser.add_argument(
        "--temporary-registry",
        default=None,
        metavar="REGISTRY",
        help="temporary references go to REGISTRY/torchimages-tmp/... (as for bake; where the metadata names none)",
    )
    parser.add_argument("--log-dir", type=Path, default=Path("logs"), help="what each image holds (default logs/)")
    parser.add_argument("--push", action="store_true", help="push the tags of every image that passed")
    _progress_option(parser)
    parser.add_argument(
        "--test",
        action="append",
        choices=("gpu", "none"),
        default=[],
        help="as for build: the cpu smoke suite runs before tagging; gpu adds the GPU suites; none skips them",
    )


def _test_options(parser: argparse.ArgumentParser) -> None:
    _selectors(parser)
    parser.add_argument(
        "--image",
        dest="images",
        action="append",
        default=[],
        metavar="REF",
        help="test any local image instead of matrix images (repeatable; not with SELECTOR): the spec comes from "
        "its io.torchimages.* labels (ours, or inherited by an image built FROM ours), or from --spec",
    )
    parser.add_argument(
        "--host",
        choices=("docker", "local"),
        default="docker",
        help="local: run the suites against this machine instead of image containers",
    )
    parser.add_argument(
        "--spec",
        type=Path,
        default=None,
        help="SPEC.json: with --host local (default: this host's), or with --image (default: the image's labels)",
    )
    parser.add_argument("--suites", default=",".join(SUITES), help="comma-separated: cpu,gpu,multi_gpu")
    parser.add_argument(
        "--gpus",
        choices=("all", "none", "auto"),
        default="auto",
        help="GPU request for containers (auto: when the engine has the NVIDIA runtime)",
    )
    parser.add_argument("--require-gpu", action="store_true", help="no usable GPU is a failure, not a skip")
    parser.add_argument("--shm-size", default="2g", help="shared memory of the container (default 2g)")
    parser.add_argument(
        "--run-arg",
        dest="run_args",
        action="append",
        default=[],
        metavar="ARG",
        help="extra `docker run` options for the test container (repeatable; each value is shell-split, so "
        "--run-arg='--ulimit memlock=-1' is one option; write --run-arg=--x, with '='). --network here replaces "
        "the default --network none",
    )
    parser.add_argument("--junit", type=Path, default=None, help="JUnit XML (FILE-<tag>.xml for several images)")
    _report_option(parser)
    parser.add_argument(
        "--python-exe", default=None, help="Python with torch to probe (default: python, or python3 with --host local)"
    )


def _report_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--report",
        type=Path,
        default=None,
        metavar="DIR",
        help="write DIR/manifest.json, summary.md, junit.xml (every image a testsuite) and sbom/<tag>.cdx.json "
        "(docs/reports.md)",
    )


def _lock_options(parser: argparse.ArgumentParser) -> None:
    _selectors(parser)
    parser.add_argument(
        "--bases",
        action="store_true",
        help="lock every registry base (of the SELECTORs, or all) to its digest in <matrix>.bases.lock",
    )
    parser.add_argument(
        "--check", action="store_true", help="with --bases: exit 1 if the registry serves other digests"
    )


def _doctor_options(parser: argparse.ArgumentParser) -> None:
    _selectors(parser)
    parser.add_argument(
        "--host-only",
        action="store_true",
        help="check only what running on this machine without Docker needs (driver, /dev/shm)",
    )
    parser.add_argument("--require-gpu", action="store_true", help="no usable GPU is a failure, not a skip")
    parser.add_argument("--docker", default=None, help="docker client to probe (default: $DOCKER or found)")


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, help, options and what it runs."""

    name: str
    help: str
    options: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS = (
    Command("validate", "check the matrix against the knowledge base", _no_options, cmd_validate),
    Command("list", "list image tags", _list_options, cmd_list),
    Command("render", "render one Dockerfile per combination into images/", _render_options, cmd_render),
    Command("plan", "show what would be built, in order (or a CI matrix)", _plan_options, cmd_plan),
    Command("build", "build, verify, smoke-test and tag images", _build_options, cmd_build),
    Command("test", "run the smoke suites in built images, or on this machine", _test_options, cmd_test),
    Command("bake", "write a buildx bake file: targets build to temporary references", _bake_options, cmd_bake),
    Command(
        "promote", "verify, smoke-test and tag images a bake built (--from its metadata)", _promote_options, cmd_promote
    ),
    Command(
        "lock",
        "pin every package of built combinations into images/<combination>/requirements.lock, "
        "or (--bases) every registry base to its digest",
        _lock_options,
        cmd_lock,
    ),
    Command("doctor", "check that this machine can build and run the selected images", _doctor_options, cmd_doctor),
)


def parser() -> argparse.ArgumentParser:
    """The argument parser, from the command table."""
    top = argparse.ArgumentParser(prog="build.py", description="Build, verify and test PyTorch/CUDA images.")
    sub = top.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help)
        _common(p)
        command.options(p)
        p.set_defaults(run=command.run)
    return top


class _Stdout:
    """Standard output, remembering whether writing to it failed (so that error is told from others)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.failed = False

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except OSError:
            self.failed = True
            raise

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError:
            self.failed = True
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _silence(stream: TextIO) -> None:
    """Point a standard stream at /dev/null so the interpreter's own flush at exit finds nothing to fail on."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real file descriptor (captured in tests)
        pass


def _run(args: argparse.Namespace) -> int:
    """Run the chosen command; bad input and usage print their message (exit status 2)."""
    from torchimages.engine import EngineError  # no SDK import: engine.py imports docker only when connecting

    try:
        code = int(args.run(args))
    except InputError as exc:
        for problem in distinct(exc.problems):
            print(problem, file=sys.stderr)
        return EXIT_USAGE
    except (UsageError, EngineError, FileNotFoundError) as exc:
        print(shown(f"error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.flush()  # a closed or full stdout fails here, where main catches it, not at exit
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; exit status 0 ok, 1 a check/build/test failed, 2 bad input or usage, 141 reader gone,
    128+N a build stopped by signal N (130 Ctrl-C, 143 SIGTERM)."""
    args = parser().parse_args(argv)
    if sys.stdout is None:  # started with stdout closed (`>&-`): the output would be lost without a word
        print("error: standard output is closed", file=sys.stderr)
        return EXIT_USAGE
    real_stdout = sys.stdout
    stdout = _Stdout(real_stdout)
    sys.stdout = cast(TextIO, stdout)
    try:
        return _run(args)
    except BrokenPipeError:  # the reader went away (`build.py list 2>&1 | head -1`): quiet, as shells do
        _silence(real_stdout)
        _silence(sys.stderr)
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        if not stdout.failed:
            raise
        _silence(real_stdout)
        print(f"error: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        sys.stdout = real_stdout


if __name__ == "__main__":
    sys.exit(main())
