"""One public tag for several platforms: the index (OCI image index, or Docker manifest list) of the platforms'
images, each verified and pushed under its own tag (`<tag>-<arch>`). staging.py writes it under a temporary tag,
checks it as the registry serves it, and only then moves the public tag and its aliases to it.

`publish` writes it after a build of every platform here (each image must be the one verified here: pulled back
by digest and compared on the classic store; on the containerd store, the registry serving the very bytes of the
index the image's id is); `join` after each platform was built, verified and pushed elsewhere (a native runner per
platform: `build --push <tag>-<arch>`), from the registry's copies. Either takes each platform's image manifest:
where its own tag names an index (BuildKit pushes an image with its attestations as one), that index's entry of
its platform, and the attestation manifests (`unknown/unknown`) about it: the index of several platforms is made
from each platform's own index, so it carries each image's SBOM and provenance beside it, never an index inside
the index, and is checked to name exactly those."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from torchimages.building import signatures, staging
from torchimages.building.progress import Progress
from torchimages.combination import INPUT_DIGEST_LABEL, PLATFORM_LABEL, Combination, Image
from torchimages.engine import Engine, EngineError, ImageInfo, manifests, shared_annotations
from torchimages.security.signing import Signer


def missing_platforms(combination: Combination, images: Sequence[Image]) -> list[str]:
    """The platforms of `combination` that one flavor's `images` lack: where none, a run of them writes its index."""
    held = {image.platform for image in images}
    return [platform for platform in combination.platforms if platform not in held]


def pushed_digest(engine: Engine, image: Image) -> str | None:
    """The digest the engine records for the image's own (platform's) tag in its repository (`repository@sha256:...`:
    on the classic store, what a push of that tag stored; the containerd store lists `repository@<image id>` for
    every local name, pushed or not, so there it is the image's own index digest, which platform_manifest then
    asks the registry for); None when it has none."""
    info = engine.inspect(image.platform_reference)
    for found in info.repo_digests if info else ():
        name, _, digest = found.partition("@")
        if name == image.repository:
            return digest
    return None


@dataclass(frozen=True)
class PlatformImage:
    """One platform's image as the registry holds it: its image manifest's digest, the attestation manifests about
    it beside it in its own index (BuildKit's SBOM and provenance), and what an index of several platforms is made
    from to carry both (that own index; the manifest alone where it has none)."""

    digest: str
    source: str
    attestations: tuple[str, ...] = ()
    note: str = ""  # why its attestations are not carried, where it has some


def platform_manifest(engine: Engine, repository: str, reference: str, platform: str) -> PlatformImage | None:
    """`platform`'s image that `reference` names in the registry: its own image manifest where it names one; where
    it names an index, that index's entry of `platform` (the registry holding it as the entry describes it) and the
    attestations about it. None when the registry holds nothing under `reference`; EngineError or
    manifests.ManifestError says why else not."""
    raw = engine.manifest(reference)
    if raw is None:
        return None
    document = manifests.parse(raw, reference)
    named = reference.rpartition("@")[2] if "@" in reference else ""
    if named and document.digest != named:
        raise manifests.ManifestError(f"{reference}: the registry serves bytes of {document.digest} for it")
    if not document.is_index:
        return PlatformImage(document.digest, f"{repository}@{document.digest}")
    entry = manifests.platform_entry(document, platform, reference)
    problems = manifests.entry_problems(entry, engine.manifest(f"{repository}@{entry.digest}"), reference)
    if problems:
        raise manifests.ManifestError("; ".join(problems))
    attached = manifests.attestations_of(document, entry.digest)
    if not attached:
        return PlatformImage(entry.digest, f"{repository}@{entry.digest}")
    others = [e for e in document.entries if e != entry and not (e.attestation and e.about == entry.digest)]
    if others:  # buildx would copy every entry of that index into the new one: the image manifest alone
        why = (
            f"{platform}: {reference} holds {len(others)} more manifest(s) beside its image and the attestations "
            "about it, so the index is made from its image manifest alone: its SBOM and provenance are not carried"
        )
        return PlatformImage(entry.digest, f"{repository}@{entry.digest}", (), why)
    return PlatformImage(entry.digest, f"{repository}@{document.digest}", attached)


def publish(
    engine: Engine,
    first: Image,
    images: Sequence[Image],
    progress: Progress,
    signer: Signer | None = None,
    cancelled: threading.Event | None = None,
    published: Callable[[str], None] | None = None,
) -> list[str]:
    """Write the index of `images` (one flavor, every platform, each pushed under its own tag) under `first`'s
    tag and aliases (staging.publish), each image checked first to be the one verified (pulled_back)
    here; with a `signer`, signed by its digest before the tags move; the problems (none: the public tags name
    exactly the images verified, and `published` heard the index's digest)."""
    digests = {image: pushed_digest(engine, image) for image in images}
    unknown = [image.platform_reference for image, digest in digests.items() if digest is None]
    if unknown:
        return [f"no pushed digest of {', '.join(unknown)}: the registry's copy cannot be named"]
    progress.update(first.tag, "index")
    wanted: dict[str, PlatformImage] = {}
    problems: list[str] = []
    for image, pushed in digests.items():
        reference = f"{image.repository}@{pushed}"
        try:
            found = platform_manifest(engine, image.repository, reference, image.platform)
        except (EngineError, manifests.ManifestError) as exc:
            problems.append(str(exc))
            continue
        if found is None:
            problems.append(f"{reference} ({image.platform_reference}, pushed) is not in the registry")
            continue
        wanted[image.platform] = found
        problems += pulled_back(engine, image, found.digest, pushed or "")
    if problems:
        return problems
    labels = [engine.labels(image.platform_reference) for image in images]
    annotations = index_annotations([found for found in labels if found is not None])
    sign = _signing(first, signer, cancelled, progress)
    return _staged(engine, first, wanted, annotations, sign, cancelled, progress.note, published)


def _staged(
    engine: Engine,
    first: Image,
    wanted: Mapping[str, PlatformImage],
    annotations: Sequence[tuple[str, str]],
    sign: Callable[[str], list[str]] | None,
    cancelled: threading.Event | None,
    note: Callable[[str], None] | None,
    published: Callable[[str], None] | None = None,
) -> list[str]:
    """staging.publish of the platforms' images, each with the attestations about it (`note` hears of one whose
    attestations cannot be carried)."""
    for found in wanted.values():
        if found.note and note is not None:
            note(found.note)
    return staging.publish(
        engine,
        first.repository,
        first.names,
        {platform: found.digest for platform, found in wanted.items()},
        annotations,
        sign,
        cancelled,
        note,
        sources=[found.source for found in wanted.values()],
        attached={found.digest: found.attestations for found in wanted.values() if found.attestations},
        published=published,
    )


def index_annotations(labels: Sequence[dict[str, str]]) -> tuple[tuple[str, str], ...]:
    """The index's annotations: the OCI labels (`org.opencontainers.image.*`) its images all carry alike, as
    each was built (source, revision, created, version, licenses, base.name, base.digest, title, ...)."""
    return tuple(shared_annotations(labels).items())


def pulled_back(engine: Engine, image: Image, digest: str, pushed: str = "") -> list[str]:
    """The image the registry holds at `digest` is the one verified here; else why not. On the containerd image
    store the verified image's id is the digest of its index, and that is what it was `pushed` as: the registry
    served bytes of that digest (platform_manifest checked), so it holds that very index, whose entry `digest` is.
    Else (the classic store: the id is the configuration's digest) the image is pulled by `digest` and must have
    the verified id."""
    verified = engine.inspect(image.platform_reference)
    if verified is not None and pushed and verified.id == pushed:
        return []
    reference = f"{image.repository}@{digest}"
    errors = engine.pull(reference)
    if errors:
        return [f"{reference} could not be pulled back: {'; '.join(errors)}"]
    pulled = engine.inspect(reference)
    if pulled is None or verified is None or pulled.id != verified.id:
        found, wanted = pulled.id if pulled else "nothing", verified.id if verified else "gone"
        return [f"{reference} ({image.platform}) pulled back is {found}, not the image verified ({wanted})"]
    return []


def join(
    engine: Engine, images: Sequence[Image], signer: Signer | None = None, progress: Progress | None = None
) -> list[str]:
    """Write the index of one flavor's images of every platform from their copies in the registry, each under its
    own tag (`<tag>-<arch>`, which only a verified image gets): each platform's image manifest (`platform_manifest`),
    pulled by digest, must carry this plan's input digest and platform (the same inputs, verified where it was
    built); then staging.publish, signed with a `signer` (`progress` says so). The problems (none: the index is
    there)."""
    problems: list[str] = []
    wanted: dict[str, PlatformImage] = {}
    labels = []
    for image in images:
        found = _registry_image(engine, image)
        if isinstance(found, str):
            problems.append(found)
            continue
        wanted[image.platform], info = found
        labels.append(info.labels)
    if problems:
        return problems
    first = images[0]
    sign = _signing(first, signer, None, progress)
    note = progress.note if progress else None
    return _staged(engine, first, wanted, index_annotations(labels), sign, None, note)


def _registry_image(engine: Engine, image: Image) -> tuple[PlatformImage, ImageInfo] | str:
    """The image manifest the registry holds under the image's own tag (with the attestations about it), and what
    the image pulled by its digest is; else why not."""
    reference = image.platform_reference
    try:
        found = platform_manifest(engine, image.repository, reference, image.platform)
    except (EngineError, manifests.ManifestError) as exc:
        return str(exc)
    if found is None:
        return f"{reference} is not in the registry: build and push it first"
    pinned = f"{image.repository}@{found.digest}"
    errors = engine.pull(pinned)
    info = engine.inspect(pinned) if not errors else None
    if info is None:
        return f"{reference} ({pinned}) could not be pulled: {'; '.join(errors) or 'not found'}"
    wanted = {k: v for k, v in image.labels if k in (INPUT_DIGEST_LABEL, PLATFORM_LABEL)}
    labelled = {k: info.labels.get(k) for k in wanted}
    if labelled != wanted:
        return f"{reference} was built from other inputs than this plan's ({labelled})"
    return found, info


def _signing(
    first: Image, signer: Signer | None, cancelled: threading.Event | None, progress: Progress | None
) -> Callable[[str], list[str]] | None:
    """What signs the index by its digest (None without a signer)."""
    if signer is None:
        return None
    return lambda digest: signatures.sign_index(first, digest, signer, cancelled, progress)
