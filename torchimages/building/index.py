"""One public tag for several platforms: the index (OCI image index, or Docker manifest list) of the
platforms' images, written in the registry once each was verified and pushed under its own tag, then read
back: the index names exactly those images, and each, pulled back by digest, is the image verified here.

`publish` writes it after a build of every platform here; `join` after each platform was built, verified and
pushed elsewhere (a native runner per platform: `build --push <tag>-<arch>`), from the registry's copies."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from torchimages.building import signatures
from torchimages.building.progress import Progress
from torchimages.combination import INPUT_DIGEST_LABEL, PLATFORM_LABEL, Image
from torchimages.engine import Engine, shared_annotations
from torchimages.security.signing import Signer


def pushed_digest(engine: Engine, image: Image) -> str | None:
    """The manifest digest the registry holds for the image's own (platform's) tag, as the engine recorded it
    when it pushed that tag (`repository@sha256:...`); None when it has none."""
    info = engine.inspect(image.platform_reference)
    for found in info.repo_digests if info else ():
        name, _, digest = found.partition("@")
        if name == image.repository:
            return digest
    return None


def publish(
    engine: Engine,
    first: Image,
    images: Sequence[Image],
    progress: Progress,
    signer: Signer | None = None,
    cancelled: threading.Event | None = None,
) -> list[str]:
    """Write the index of `images` (one flavor, every platform, each pushed under its own tag) under `first`'s
    tag and aliases, and check it; with a `signer`, sign it by its digest; the problems (none: the public tags
    name exactly the images verified)."""
    digests = {image: pushed_digest(engine, image) for image in images}
    unknown = [image.platform_reference for image, digest in digests.items() if digest is None]
    if unknown:
        return [f"no pushed digest of {', '.join(unknown)}: the registry's copy cannot be named"]
    progress.update(first.tag, "index")
    labels = [engine.labels(image.platform_reference) for image in images]
    annotations = index_annotations([found for found in labels if found is not None])
    problems = written(engine, first, {image: str(digest) for image, digest in digests.items()}, annotations)
    wanted = {image.platform: str(digest) for image, digest in digests.items()}
    return problems or signatures.sign_index(first, wanted, signer, cancelled, progress)


def index_annotations(labels: Sequence[dict[str, str]]) -> tuple[tuple[str, str], ...]:
    """The index's annotations: the OCI labels (`org.opencontainers.image.*`) its images all carry alike, as
    each was built (source, revision, created, version, licenses, base.name, base.digest, title, ...)."""
    return tuple(shared_annotations(labels).items())


def written(
    engine: Engine, first: Image, digests: dict[Image, str], annotations: Sequence[tuple[str, str]] = ()
) -> list[str]:
    """Write the index of the images at `digests` (in the registry) under `first`'s names, `annotations` on it,
    read each back and pull each image back; the problems."""
    sources = [f"{image.repository}@{digest}" for image, digest in digests.items()]
    problems = engine.create_index(first.repository, first.names, sources, annotations)
    if problems:
        return problems
    wanted = {image.platform: str(digest) for image, digest in digests.items()}
    for name in first.names:
        found = engine.index_manifests(f"{first.repository}:{name}")
        if found != wanted:
            return [f"{first.repository}:{name} in the registry names {found or 'no index'}, not {wanted}"]
    return [problem for image, digest in digests.items() for problem in pulled_back(engine, image, str(digest))]


def pulled_back(engine: Engine, image: Image, digest: str) -> list[str]:
    """The image the registry holds at `digest`, pulled, is the one verified here (the same image id); else why
    not."""
    reference = f"{image.repository}@{digest}"
    errors = engine.pull(reference)
    if errors:
        return [f"{reference} could not be pulled back: {'; '.join(errors)}"]
    pulled, verified = engine.inspect(reference), engine.inspect(image.platform_reference)
    if pulled is None or verified is None or pulled.id != verified.id:
        found, wanted = pulled.id if pulled else "nothing", verified.id if verified else "gone"
        return [f"{reference} ({image.platform}) pulled back is {found}, not the image verified ({wanted})"]
    return []


def join(
    engine: Engine, images: Sequence[Image], signer: Signer | None = None, progress: Progress | None = None
) -> list[str]:
    """Write the index of one flavor's images of every platform from their copies in the registry, each under its
    own tag (`<tag>-<arch>`, which only a verified image gets): each is pulled and must carry this plan's input
    digest and platform (the same inputs, verified where it was built); with a `signer`, sign the index by its
    digest (`progress` says so); the problems (none: the index is there)."""
    problems, digests, labels = [], {}, []
    for image in images:
        errors = engine.pull(image.platform_reference)
        info = engine.inspect(image.platform_reference) if not errors else None
        if info is None:
            why = "; ".join(errors) or "not found"
            problems.append(f"{image.platform_reference} is not in the registry ({why}): build and push it first")
            continue
        wanted = {k: v for k, v in image.labels if k in (INPUT_DIGEST_LABEL, PLATFORM_LABEL)}
        found = {k: info.labels.get(k) for k in wanted}
        if found != wanted:
            problems.append(f"{image.platform_reference} was built from other inputs than this plan's ({found})")
            continue
        digest = pushed_digest(engine, image)
        if digest is None:
            problems.append(f"{image.platform_reference}: the engine recorded no digest of it in {image.repository}")
            continue
        digests[image] = digest
        labels.append(info.labels)
    problems = problems or written(engine, images[0], digests, index_annotations(labels))
    if problems or signer is None:
        return problems
    wanted = {image.platform: str(digest) for image, digest in digests.items()}
    return signatures.sign_index(images[0], wanted, signer, None, progress)
