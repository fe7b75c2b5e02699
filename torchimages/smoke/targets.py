"""What `build.py test` tests: the spec of each image (the matrix's, a foreign image's labels or a SPEC.json),
and the loop that runs the suites in each, one container after another."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from torchimages import textfile
from torchimages.combination import INPUT_DIGEST_LABEL, LABEL_PREFIX, Combination, Image
from torchimages.engine import ImageInfo
from torchimages.problems import InputError, Problem, UsageError
from torchimages.smoke import document, runner

SPEC_WHAT = "the spec file (--spec)"  # how a refusal to read it names it


class TargetEngine(runner.ContainerEngine, Protocol):
    """What finding and testing images needs from the engine (engine.DockerEngine)."""

    def labels(self, reference: str) -> dict[str, str] | None: ...

    def inspect(self, reference: str) -> ImageInfo | None: ...

    def images_labelled(self, key: str, value: str) -> list[ImageInfo]: ...


@dataclass(frozen=True)
class Target:
    """One image to test: the name of its JUnit file, its spec, its planned image (None for --image), and
    where its spec came from (a line to show; empty for matrix images)."""

    name: str
    spec: dict[str, Any]
    planned: tuple[Combination, Image] | None = None
    note: str = ""


@dataclass(frozen=True)
class Tested:
    """One image the suites ran on: the name its JUnit file has, its spec, its planned image (None for
    --image)."""

    name: str
    spec: dict[str, Any]
    returncode: int
    seconds: float
    error: str = ""  # the container could not start
    planned: tuple[Combination, Image] | None = None


def tag_of(reference: str) -> str:
    """A file-name-safe form of an image reference (JUnit FILE-<tag>.xml)."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in reference)


def refuse_shared_names(references: Sequence[str]) -> None:
    """UsageError, before anything runs, when two references would write their results (JUnit file, report
    entry's JUnit and SBOM) under one file name: `a/b:1` and `a_b:1` are both `a_b_1` (names that differ only
    in case are one file on a case-insensitive file system)."""
    by_name: dict[str, list[str]] = {}
    for reference in dict.fromkeys(references):
        by_name.setdefault(tag_of(reference).casefold(), []).append(reference)
    clashes = [" and ".join(shared) for shared in by_name.values() if len(shared) > 1]
    if clashes:
        raise UsageError(
            f"--image {'; '.join(clashes)}: their results would be written under one file name "
            f"({', '.join(tag_of(c.split(' and ')[0]) for c in clashes)}); test them in separate runs"
        )


def matrix_targets(engine: TargetEngine, chosen: Sequence[tuple[Combination, Image]]) -> list[Target]:
    """The matrix images to test, each built already (else UsageError naming those that are not): each platform's
    image of a tag of several platforms under its own tag (the public tag names an index, in a registry)."""
    missing = [i.platform_reference for _, i in chosen if engine.labels(i.platform_reference) is None]
    if missing:
        raise UsageError("not built yet (make build TAG=...): " + ", ".join(missing))
    return [Target(i.own_tag, document.image_document(c, i, i.platform_reference), (c, i)) for c, i in chosen]


def image_targets(engine: TargetEngine, references: Sequence[str], spec: SpecFile | None) -> list[Target]:
    """The spec of each image given by --image: from --spec FILE (read already), else from its
    io.torchimages.* labels (an image built FROM one of ours inherits them). Every image is checked before
    any runs, and no two may share a file name for their results (refuse_shared_names)."""
    refuse_shared_names(references)
    found = {reference: engine.inspect(reference) for reference in references}
    missing = [reference for reference, info in found.items() if info is None]
    if missing:
        raise UsageError(f"no such image here: {', '.join(missing)} (docker pull it, or build it, before testing it)")
    targets = []
    for reference, info in found.items():
        assert info is not None
        if spec is not None:
            note = f"{reference}: spec read from {spec.path}"
            targets.append(Target(tag_of(reference), {**spec.document, "image": reference}, None, note))
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
            labelled = document.labels_document(reference, info.labels, info.user, min_driver)
        except document.SpecError as exc:
            raise UsageError(f"{reference}: its io.torchimages.* labels do not make a spec: {exc}") from None
        note = f"{reference}: spec read from its io.torchimages.* labels{inherited(engine, info)}"
        targets.append(Target(tag_of(reference), labelled, None, note))
    return targets


@dataclass(frozen=True)
class SpecFile:
    """A `--spec` SPEC.json: where it was read from, and the plain mapping the runner writes."""

    path: Path
    document: dict[str, Any]


def read_spec_file(path: Path) -> SpecFile:
    """A SPEC.json read once (by `textfile`: a regular UTF-8 file within TORCHIMAGES_MAX_FILE_BYTES holding a
    JSON object) and validated (document.spec_from_dict); InputError naming the file otherwise."""
    data = textfile.read_json_object(path, SPEC_WHAT)
    try:
        document.spec_from_dict(data)
    except document.SpecError as exc:
        raise InputError([Problem(f"{SPEC_WHAT}: {exc}", file=str(path))]) from None
    return SpecFile(path, data)


def inherited(engine: TargetEngine, info: ImageInfo) -> str:
    """`, inherited from its base X` when another local image has the same labels and its layers are a
    prefix of this one's: this image was built FROM it."""
    digest = info.labels.get(INPUT_DIGEST_LABEL)
    if not digest:
        return ""
    for other in engine.images_labelled(INPUT_DIGEST_LABEL, digest):
        derived = len(other.layers) < len(info.layers) and info.layers[: len(other.layers)] == other.layers
        if other.id != info.id and derived:
            named = f"{min(other.tags)}, " if other.tags else ""  # an image of several tags: the first by name
            return f" (inherited from its base {named}{other.id[:19]}: it was built FROM one of ours)"
    return ""


def test_all(
    engine: TargetEngine,
    targets: Sequence[Target],
    options: runner.SmokeOptions,
    junit_dir: Path | None,
    junit: Path | None,
    on_error: Callable[[str], None] = lambda _: None,
) -> list[Tested]:
    """Run the suites in each target, one after another; a JUnit file each (into `junit_dir` for a report,
    else `junit`, FILE-<tag>.xml for several). `on_error` hears at once of a container that could not start."""
    tested = []
    for target in targets:
        path = (
            runner.junit_in(junit_dir, target.name)
            if junit_dir
            else runner.junit_path(junit, target.name, len(targets) > 1)
        )
        start = time.monotonic()
        result = runner.run_suites_in_container(engine, target.spec, options, path)
        error = "" if result.args else result.stderr  # no container could be started
        if error:
            on_error(error)
        tested.append(
            Tested(target.name, target.spec, result.returncode, time.monotonic() - start, error, target.planned)
        )
    return tested


def test_host(spec: SpecFile | None, options: runner.SmokeOptions, junit: Path | None) -> bool:
    """`test --host local`: the suites against this machine, its spec from --spec (read already) or probed
    with options.python_exe; whether they passed. UsageError when the probe fails."""
    try:
        host = spec.document if spec else runner.host_document(options.python_exe)
    except (OSError, ValueError, subprocess.CalledProcessError) as exc:
        raise UsageError(f"cannot probe the host's spec: {exc}") from None
    return runner.run_suites("local://", host, options, junit).returncode == 0
