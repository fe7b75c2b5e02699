"""The build digest: what decides that an image is up to date (`build` skips it only when building it now would
give the same image). It covers the static input digest (the matrix and templates, in the Dockerfile's LABEL) and
what only the build knows: the build context's bytes as they are at build time (the Dockerfile, steps/*, the lock
file: a step script edited by hand counts), the bases provider (`--bases`), each registry base's reference (with
the bases lock's digest where it pins one), a bootstrapped base's suite, sources and Release date (its labels),
the distribution mirror of a bootstrapped base, without its login, and the build's settings (its wheel sources,
without logins, and SOURCE_DATE_EPOCH). Set by `--label` (BUILD_DIGEST_LABEL) in
every build path of this tool (build, bake); an image without it (a plain `docker build images/X`) is never up to
date for `build`.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from torchimages import values
from torchimages.building import bootstrap
from torchimages.building.wheels import WheelSources
from torchimages.combination import BOOTSTRAP, INPUT_DIGEST_LABEL, LABEL_PREFIX, Combination, Image
from torchimages.engine import Engine

BUILD_DIGEST_LABEL = f"{LABEL_PREFIX}.build-digest"
# What a bootstrapped base's labels say of it that shapes the images built on it (its bootstrap digest is left
# out: it hashes mmdebstrap's command, whose mirror may hold a login).
BASE_FACTS = (bootstrap.SUITE_LABEL, bootstrap.SOURCES_LABEL, bootstrap.RELEASE_DATE_LABEL)


@dataclass(frozen=True)
class BuildInputs:
    """Everything the build digest hashes (see the module), as plain data."""

    input_digest: str
    context: tuple[tuple[str, bytes], ...]  # (path relative to the context, its bytes), sorted by path
    bases: str  # `registry` or `bootstrap`
    base: tuple[tuple[str, str], ...]  # the base's identity: ("registry", reference) or a bootstrapped base's labels
    mirror: str | None  # the distribution mirror a bootstrapped base comes from, without its login
    # The build's settings (settings_of): the wheel sources, without logins, and its SOURCE_DATE_EPOCH
    settings: tuple[tuple[str, str], ...] = ()


def without_login(mirror: str) -> str:
    """`mirror` (`[FAMILY=]URL`, or a sources.list line holding URLs) with every URL's `user:password@` removed
    (values.mirror_without_login: one rule for what is shown, written, labelled and hashed)."""
    return values.mirror_without_login(mirror)


def settings_of(sources: WheelSources, epoch: int) -> tuple[tuple[str, str], ...]:
    """What a build is told besides its context that shapes the image: where pip and uv find the wheels (an index
    may serve other files of the same version: `torch==2.14.1,!=2.14.1+cpu` is PyPI's build or the cu130 index's),
    each without its login, and the SOURCE_DATE_EPOCH (the image's creation time, its files' times)."""
    bare = values.mirror_without_login
    return (
        ("index_url", bare(sources.index_url) if sources.index_url else ""),
        ("extra_index_urls", " ".join(bare(u) for u in sources.extra_index_urls)),
        ("find_links", " ".join(bare(u) for u in sources.find_links)),
        ("source_date_epoch", str(epoch)),
    )


def context_files(folder: Path) -> tuple[tuple[str, bytes], ...]:
    """Every file of a build context (an image's folder: Dockerfile, steps/*, the lock file), read now, as BuildKit
    sends it: a symbolic link as its target's name (never followed), a folder's contents below it (a linked folder
    is not entered), anything but a regular file or a link (a FIFO, a device) as its kind alone."""
    found: list[tuple[str, bytes]] = []
    for root, folders, names in os.walk(folder, followlinks=False):
        base = Path(root)
        for name in sorted([*names, *(f for f in folders if (base / f).is_symlink())]):
            path = base / name
            where = path.relative_to(folder).as_posix()
            if path.is_symlink():
                found.append((where, b"link:" + os.fsencode(os.readlink(path))))
            elif path.is_file():
                found.append((where, path.read_bytes()))
            else:
                found.append((where, b"kind:" + stat.filemode(path.lstat().st_mode).encode()))
    return tuple(sorted(found))


def digest(inputs: BuildInputs) -> str:
    """The build digest of `inputs`: a change of any byte of any field changes it."""
    h = hashlib.sha256()
    head = {
        "input_digest": inputs.input_digest,
        "bases": inputs.bases,
        "base": inputs.base,
        "mirror": inputs.mirror,
        "settings": inputs.settings,
    }
    h.update(json.dumps(head, sort_keys=True).encode() + b"\0")
    for name, content in inputs.context:
        raw = os.fsencode(name)  # a file name need not be UTF-8
        h.update(f"{len(raw)}:".encode() + raw + f":{len(content)}:".encode() + content)
    return "sha256:" + h.hexdigest()


def base_identity(combination: Combination, image: Image, base_labels: Mapping[str, str] | None) -> tuple[str, ...]:
    """What the image is built on: each registry base its build pulls (its reference: a locked one's digest in
    it) and, for a bootstrapped base, its suite, sources and Release date (`base_labels`, its labels; None: it
    is not there yet)."""
    pulled = tuple(f"registry={base.reference}" for base in combination.pulled_bases)
    if not bootstrap.needed(combination):
        return pulled
    facts = base_labels or {}
    return (*pulled, *(f"{name}={facts.get(name, '')}" for name in BASE_FACTS))


def inputs_of(
    combination: Combination,
    image: Image,
    context: Path,
    mirrors: Sequence[str],
    base_labels: Mapping[str, str] | None,
    settings: tuple[tuple[str, str], ...],
) -> BuildInputs:
    """The build inputs of one image whose build context is `context`, built with `--mirror` values `mirrors`
    on a base labelled `base_labels` (a bootstrapped base's; ignored for a registry base) with `settings`
    (settings_of)."""
    bootstrapped = bootstrap.needed(combination)
    mirror = bootstrap.mirror_for(mirrors, combination.os.family) if bootstrapped else None
    identity = base_identity(combination, image, base_labels)
    return BuildInputs(
        input_digest=image.input_digest,
        context=context_files(context),
        bases=BOOTSTRAP if bootstrapped else "registry",
        base=tuple((str(n), value) for n, value in enumerate(identity)),
        mirror=without_login(mirror) if mirror else None,
        settings=settings,
    )


def base_reference(combination: Combination, image: Image) -> str | None:
    """The local name of the bootstrapped base an image is built on (None: a registry base)."""
    if not bootstrap.needed(combination):
        return None
    return combination.bootstrapped_base(image.platform) or bootstrap.reference(
        combination.os, image.platform, combination.multi_platform
    )


def base_labels(engine: Engine, combination: Combination, image: Image) -> dict[str, str] | None:
    """The labels of the bootstrapped base an image is built on (None: a registry base, or not there)."""
    local = base_reference(combination, image)
    return engine.labels(local) if local else None


def of_image(
    combination: Combination,
    image: Image,
    images_dir: Path,
    mirrors: Sequence[str],
    labels: Mapping[str, str] | None,
    settings: tuple[tuple[str, str], ...],
) -> str:
    """The build digest of an image built now from `images_dir` (its base's labels `labels`: `base_labels`) with
    `settings` (settings_of)."""
    return digest(inputs_of(combination, image, images_dir / combination.folder, mirrors, labels, settings))


def current(
    engine: Engine,
    combination: Combination,
    image: Image,
    images_dir: Path,
    mirrors: Sequence[str],
    settings: tuple[tuple[str, str], ...],
) -> bool:
    """Whether the engine holds the image as building it now would make it: its input digest and its build digest
    (the build context's bytes now, the bases, the mirror, the wheel sources and SOURCE_DATE_EPOCH) are this
    build's. An image without a build digest (a plain `docker build`) is not."""
    labels = engine.labels(image.platform_reference)
    if labels is None or labels.get(INPUT_DIGEST_LABEL) != image.input_digest:
        return False
    now = of_image(combination, image, images_dir, mirrors, base_labels(engine, combination, image), settings)
    return labels.get(BUILD_DIGEST_LABEL) == now
