"""What a build is asked to do: the options besides the images (`BuildOptions`), the one BuildKit
build of each image (`build_request`) and running it into its log (`run_build`), and the refusals of
two images sharing a public name (`shared_names`) and of combinations of several platforms where a command does
not handle them yet (`unsupported`)."""

from __future__ import annotations

import contextlib
import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torchimages import platforms, values
from torchimages.building import bootstrap, build_digest
from torchimages.building.buildkit_log import LogState, following, read_line
from torchimages.building.progress import Progress
from torchimages.building.provenance import Provenance, provenance_labels
from torchimages.building.wheels import PYPI, Served, WheelSources, secret_file
from torchimages.combination import INPUT_DIGEST_LABEL, LABEL_PREFIX, Combination, Image
from torchimages.engine import NOT_ASKED, BuildRequest, CacheSpec, Engine, SbomAttestation
from torchimages.planning.plan import Selected
from torchimages.problems import Problem
from torchimages.security.signing import Signer

RUNTIME_STAGE = "runtime"  # the Dockerfile stage devel is built on (FROM runtime, or COPY --from=runtime)


def image_context(reference: str) -> str:
    """A named context's value that is an image of this engine (BuildKit's docker driver finds it locally)."""
    return bootstrap.IMAGE_CONTEXT + reference


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
    mirrors: tuple[str, ...] = ()  # `--mirror` values, `[FAMILY=]MIRROR` (bootstrap.mirror_for)
    push: bool = False
    compression: str = values.GZIP  # how a push compresses the layers (values.COMPRESSIONS)
    gzip_level: int | None = None  # the gzip level of the layers each build exports (None: BuildKit's default)
    cache_from: tuple[CacheSpec, ...] = ()  # BuildKit cache sources and exports; `{tag}` in a value
    cache_to: tuple[CacheSpec, ...] = ()  # stands for each image's tag
    # The builds' SOURCE_DATE_EPOCH (creation time, files clamped to it); None: each combination's own (the
    # knowledge base's source_date, also the default of the Dockerfile's ARG).
    source_date_epoch: int | None = None
    # `--sign-key`: each pushed digest (every image, every index) signed with cosign; None: none signed.
    signer: Signer | None = None
    # Where the Dockerfiles come from (repository URL, commit): the images' source and revision labels.
    provenance: Provenance = field(default_factory=Provenance)
    # Whether builds attach an SBOM and provenance as attestations, and why (engine.sbom_attestation): `note` says it.
    sbom: SbomAttestation = NOT_ASKED
    # Whether an image's security gate and smoke gate run at the same time (after verification; the tag waits for
    # both, the problems of both are said): on, as measured on a quiet 2-core machine, 21-33% off the checks of
    # each image of 2.11.0-cuda13.0 (docs/benchmarks.md); off only in tests of the gates one after the other.
    gates_together: bool = True
    # Whether an image must carry its own attestations (an SPDX SBOM and SLSA provenance) to be tagged even where
    # this run attaches none (`promote`: a baked image's; `--allow-unattested` turns it off)
    require_attestations: bool = False

    def epoch(self, combination: Combination) -> int:
        """The SOURCE_DATE_EPOCH of the combination's builds: this option's, else the combination's own."""
        return combination.source_date_epoch if self.source_date_epoch is None else self.source_date_epoch

    def digest_settings(self, combination: Combination) -> tuple[tuple[str, str], ...]:
        """What of these options the combination's build digests cover (build_digest.settings_of)."""
        return build_digest.settings_of(self.sources, self.epoch(combination))


def build_request(
    options: BuildOptions,
    combination: Combination,
    image: Image,
    reference: str,
    served: Served,
    pip_conf: Path,
    uv_conf: Path,
    runtime: str | None = None,
    apt_auth: Path | None = None,
    base_labels: Mapping[str, str] | None = None,
) -> BuildRequest:
    """The one BuildKit build of an image: its target of the combination's Dockerfile, the wheel sources
    (`uv_conf` for uv, `pip_conf` for pip, see `wheel_secrets`) and the CA bundle as secrets, host network
    when a local wheel folder is served, the BuildKit cache sources and exports (`{tag}` made this image's).
    `runtime`: what the runtime stage is instead of being built again, a named context's value
    (`docker-image://REF`, bake's `target:NAME`). `apt_auth`: the mirror's login for the apt steps, an apt
    auth.conf (`bootstrap.apt_auth`), mounted as the aptauth secret; `base_labels`: a bootstrapped base's labels
    (its build digest's base facts; None: not known here)."""
    folder = options.images_dir / combination.folder
    secrets = [("pipconf", pip_conf), ("uvconf", uv_conf)]
    if options.ca_cert:
        secrets.append(("cacert", options.ca_cert))
    if apt_auth is not None:
        secrets.append(("aptauth", apt_auth))
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
        contexts=(*(((RUNTIME_STAGE, runtime),) if runtime else ()), *bootstrap.contexts(combination, image.platform)),
        build_args=(("SOURCE_DATE_EPOCH", str(options.epoch(combination))),),
        platform=image.platform if combination.multi_platform else None,
        labels=build_labels(options, combination, image, base_labels),
        sbom_generator=options.sbom.generator if options.sbom.attached else "",
        gzip_level=options.gzip_level,
    )


def wheel_secrets(served: Served, combination: Combination, platform: str = platforms.DEFAULT) -> tuple[str, str]:
    """The texts of the two wheel-source secrets of a combination's builds for `platform`: pip's (its tools come
    from PyPI unless an index was given) and uv's (the venv: the platform's wheel index unless one was given)."""
    return served.pip_conf(PYPI), served.uv_toml(combination.index_url_for(platform))


def platform_labels(combination: Combination, image: Image) -> tuple[tuple[str, str], ...]:
    """The labels of `image` that its Dockerfile's LABEL does not give it (the Dockerfile has the labels of each
    flavor's first platform's image): another platform's input digest and platform, set by `--label`."""
    written = combination.image(image.flavor).label_map()
    return tuple((k, v) for k, v in image.labels if written.get(k) != v)


# The matrix entry an image was built from (its combination: the folder of its Dockerfile under images/), set by
# `--label` so that the image's provenance attestation names it beside the input digest
MATRIX_ENTRY_LABEL = f"{LABEL_PREFIX}.matrix-entry"


def build_labels(
    options: BuildOptions, combination: Combination, image: Image, base_labels: Mapping[str, str] | None = None
) -> tuple[tuple[str, str], ...]:
    """Every `--label` of an image's build: those its Dockerfile's LABEL lacks (`platform_labels`), what varies
    per commit or build (`provenance_labels`: created, revision, source), which touches its configuration only
    (no layer, no input digest), its build digest (build_digest.py: what decides it is up to date), and what
    its provenance attestation names (buildx records every `--label`): its matrix entry and its input digest."""
    digest = build_digest.of_image(
        combination, image, options.images_dir, options.mirrors, base_labels, options.digest_settings(combination)
    )
    named = dict(platform_labels(combination, image))
    input_digest = dict(image.labels).get(INPUT_DIGEST_LABEL)
    return (
        *named.items(),
        *bases_labels(combination, image),
        *provenance_labels(options.provenance, options.epoch(combination)),
        (build_digest.BUILD_DIGEST_LABEL, digest),
        (MATRIX_ENTRY_LABEL, combination.folder),
        *(((INPUT_DIGEST_LABEL, input_digest),) if input_digest and INPUT_DIGEST_LABEL not in named else ()),
    )


def bases_labels(combination: Combination, image: Image) -> tuple[tuple[str, str], ...]:
    """The labels saying what a registry OS's image was built on under `--bases bootstrap` (see
    Combination.bases_labels)."""
    return tuple(combination.bases_labels(image.flavor, image.platform).items())


def shared_names(selected: Sequence[Selected]) -> list[Problem]:
    """A problem for every public name (tag or alias) that two selected images would both get (the platforms'
    images of one flavor share theirs: an index of them)."""
    owners: dict[str, list[str]] = defaultdict(list)
    for s in selected:
        for image in s.images:
            for name in image.names:
                holder = f"{s.combination.folder} ({image.flavor})"
                if holder not in owners[f"{image.repository}:{name}"]:
                    owners[f"{image.repository}:{name}"].append(holder)
    return [
        Problem(f"two images would both be tagged '{name}': {', '.join(holders)}", key="tag")
        for name, holders in owners.items()
        if len(holders) > 1
    ]


def unsupported(selected: Sequence[Selected], command: str, suggestion: str) -> list[Problem]:
    """A problem, at its row, for every selected combination built for anything but linux/amd64 alone, for a
    command that does not handle such combinations yet (`build` does: a build per platform, then the index)."""
    problems = []
    for s in selected:
        if not s.combination.multi_platform:
            continue
        problems.append(
            Problem(
                f"{s.combination.folder} is built for {platforms.words(s.combination.platforms)}: "
                f"`{command}` of such combinations is not supported yet",
                file=s.combination.defined_at.file,
                line=s.combination.defined_at.line,
                key="platforms",
                allowed=platforms.DEFAULT,
                suggestion=suggestion,
            )
        )
    return problems


def run_build(
    engine: Engine,
    options: BuildOptions,
    combination: Combination,
    image: Image,
    reference: str,
    served: Served,
    log: Path,
    progress: Progress,
    cancelled: threading.Event,
    runtime: str | None = None,
    base_labels: Mapping[str, str] | None = None,
) -> int:
    """The BuildKit build into `log`; its stages and bytes fetched, read from the log as it is written,
    told to `progress`. `runtime`, `base_labels`: see `build_request`."""
    state = LogState()

    def seen(line: str) -> None:  # in the follower's thread, the only one to touch `state`
        nonlocal state
        state = read_line(state, line)
        if state.stage:
            progress.update(image.tag, state.stage, state.detail)

    pip_text, uv_text = wheel_secrets(served, combination, image.platform)
    auth_text = bootstrap.apt_auth(combination, options.mirrors)
    with (
        secret_file(pip_text) as pip_conf,
        secret_file(uv_text) as uv_conf,
        secret_file(auth_text) if auth_text else contextlib.nullcontext() as apt_auth,
        log.open("wb") as handle,
        following(log, seen),
    ):
        request = build_request(
            options,
            combination,
            image,
            reference,
            served,
            pip_conf,
            uv_conf,
            runtime,
            apt_auth=apt_auth,
            base_labels=base_labels,
        )
        return engine.build(request, handle, cancelled)
