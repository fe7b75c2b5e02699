"""Beyond one machine: a buildx bake file from the plan, and buildx's metadata file read back for promotion.

`bake_file` turns the builds `build` would run (one `BuildRequest` per image, made by
`requests.build_request`: the same context, Dockerfile, target, secrets and network) into a bake
definition: one target per image, pushed to (or loaded as) its temporary reference, never a public
tag; groups per combination, per torch minor, per flavor, and `default`. `promote` then verifies and
tags what the bake built (builder.Builder.promote). A combination of several platforms has a target per platform
(`platforms`, its own labels and wheel index), and groups per architecture (`arm64`), so a native runner bakes its
own; `promote` writes their index once every platform's image passed.

devel is built on its runtime: a devel target's `contexts` say `runtime=target:<the runtime target>`, so
buildx builds the runtime target once and devel on its result (every runtime layer is a layer of devel,
with `no-cache` too). Builders whose BuildKit takes no named contexts (Docker 20.10) get a file without
them (`bake --no-named-contexts`): a devel target then builds the runtime stage itself, shared with the
runtime target only as far as the builder's cache does. Either way targets list runtime before devel, a
combination's flavors stay in one group, and `promote` checks runtime's layers are a prefix of devel's.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchimages import platforms, textfile, values
from torchimages.building import bootstrap, build_digest, wheels
from torchimages.building.references import TEMP_REPOSITORY, Baked, is_temporary, temporary_reference
from torchimages.building.requests import RUNTIME_STAGE, BuildOptions, build_request, wheel_secrets
from torchimages.building.wheels import WheelSources
from torchimages.combination import Combination, Image
from torchimages.engine import TAG_PLACEHOLDER, BuildRequest
from torchimages.planning.plan import Selected
from torchimages.problems import InputError, Problem, UsageError

TARGET_PLACEHOLDER = "{target}"  # in a cache value: the bake target's name

# What buildx writes per target into --metadata-file: the image name it gave, and what it built.
IMAGE_NAME = "image.name"
DIGEST_KEYS = ("containerimage.config.digest", "containerimage.digest")
METADATA_WHAT = "the bake metadata file (--from)"  # how a refusal to read it names it


@dataclass(frozen=True)
class Entry:
    """One image of the bake: its combination, and the build `build` would run for it."""

    combination: Combination
    image: Image
    request: BuildRequest


@dataclass(frozen=True)
class Cache:
    """BuildKit cache import/export for every target (`type=registry,ref=...`); in a value, `{tag}` becomes
    the image's tag (as in `build --cache-from`) and `{target}` the target's name."""

    cache_from: tuple[str, ...] = ()
    cache_to: tuple[str, ...] = ()


def bake_token(image: Image) -> str:
    """The temporary tag's token of a baked image: from its input digest, so a later `promote` finds it from
    the plan alone (the same inputs make the same image)."""
    return "bake-" + image.input_digest.rsplit(":", 1)[-1][:12]


def bake_reference(combination: Combination, image: Image, registry: str | None = None) -> str:
    """Where a bake puts an image: its temporary reference (references.temporary_reference's naming), under
    `registry/` (`ghcr.io/team`) when the bake pushes."""
    repository = f"{registry.rstrip('/')}/{TEMP_REPOSITORY}" if registry else TEMP_REPOSITORY
    return temporary_reference(combination, image, bake_token(image), repository)


def _name(text: str) -> str:
    """A bake target or group name (letters, digits, `_`, `-`)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)


def target_name(image: Image) -> str:
    """The bake target of an image: its own tag, `.` as `_` (`2_13_0-cpu-runtime`; a platform's image of an index:
    `2_9_1-cpu-runtime-arm64`)."""
    return _name(image.own_tag)


def torch_minor(combination: Combination) -> str:
    """`2.13` for torch 2.13.0."""
    return ".".join(combination.torch.split(".")[:2])


def target(entry: Entry, cache: Cache) -> dict[str, Any]:
    """One image's bake target: the build request's fields, the image's labels and the build's own (`--label`'s:
    created, revision, source), cache settings."""
    request, name = entry.request, target_name(entry.image)
    definition: dict[str, Any] = {
        "context": str(request.context),
        "dockerfile": str(_relative(request.dockerfile, request.context)),
        "target": request.target,
        "tags": [request.reference],
        "labels": dict(sorted({**entry.image.label_map(), **dict(request.labels)}.items())),
        "secret": [f"id={secret_id},src={path}" for secret_id, path in request.secrets],
    }
    if request.network:
        definition["network"] = request.network
    if request.no_cache:
        definition["no-cache"] = True
    if request.contexts:
        definition["contexts"] = dict(request.contexts)
    if request.build_args:
        definition["args"] = dict(request.build_args)
    if request.platform:
        definition["platforms"] = [request.platform]
    if request.sbom_generator:
        definition["attest"] = [f"type=sbom,generator={request.sbom_generator}", "type=provenance,mode=max"]

    def placed(values: tuple[str, ...]) -> list[str]:
        return [value.replace(TAG_PLACEHOLDER, entry.image.tag).replace(TARGET_PLACEHOLDER, name) for value in values]

    if cache.cache_from:
        definition["cache-from"] = placed(cache.cache_from)
    if cache.cache_to:
        definition["cache-to"] = placed(cache.cache_to)
    return definition


def _relative(path: Path, folder: Path) -> Path:
    """A bake target's dockerfile is relative to its context."""
    return path.relative_to(folder) if path.is_relative_to(folder) else path


def _ordered(entries: Sequence[Entry]) -> list[Entry]:
    """Plan order, and runtime before devel within a combination (devel builds on runtime's stage)."""
    rank = {"runtime": 0, "devel": 1}
    position = {e.combination.folder: n for n, e in enumerate(entries)}
    return sorted(entries, key=lambda e: (position[e.combination.folder], rank.get(e.image.flavor, 2)))


def bake_file(entries: Sequence[Entry], cache: Cache = Cache()) -> dict[str, Any]:
    """The bake definition (JSON) of these builds: a target per image, groups per combination, torch minor,
    flavor, and `default` (everything). Raises ValueError when two names would clash."""
    ordered = _ordered(entries)
    targets = {target_name(e.image): target(e, cache) for e in ordered}
    groups: dict[str, list[str]] = {}
    for e in ordered:
        platform = [platforms.arch(e.image.platform)] if e.combination.multi_platform else []  # a native runner's
        for group in (
            _name(e.combination.folder),
            "torch-" + _name(torch_minor(e.combination)),
            e.image.flavor,
            *platform,
        ):
            groups.setdefault(group, []).append(target_name(e.image))
    groups["default"] = list(targets)
    clashes = sorted(set(targets).intersection(groups))
    if len(targets) != len(ordered) or clashes:
        raise ValueError(f"bake names clash: {', '.join(clashes) or 'two images share a target name'}")
    return {
        "group": {name: {"targets": members} for name, members in groups.items()},
        "target": targets,
    }


def read_metadata(text: str, source: str) -> dict[str, Any]:
    """buildx's --metadata-file: an object of target name -> object (other keys, such as buildx's
    `buildx.build.warnings`, may be anything). InputError, located, when it is not JSON or not that shape."""
    data = textfile.parse_json(text, source, METADATA_WHAT)
    if not isinstance(data, dict):
        message = f"expected a JSON object of bake target -> build result, not {textfile.kind(data)}"
        raise InputError([Problem(message, file=source, key="--from")])
    return data


def baked_images(
    metadata: Mapping[str, Any], selected: Sequence[Selected], source: str, registry: str | None = None
) -> dict[Image, Baked]:
    """Each selected image's temporary reference (the entry's image.name, else its bake reference under
    `registry`) and the digests its builder reported, from the metadata; InputError naming every selected
    image the metadata has no entry for, or a malformed entry."""
    found: dict[Image, Baked] = {}
    problems = []
    for s in selected:
        for image in s.images:
            name = target_name(image)
            entry = metadata.get(name)
            if name not in metadata:
                problems.append(
                    Problem(
                        f"no entry for bake target '{name}' ({image.tag}): it was not baked, or not with this plan",
                        file=source,
                        key="--from",
                        suggestion="bake it (build.py bake, docker buildx bake --metadata-file), or leave it out",
                    )
                )
                continue
            if not isinstance(entry, dict):
                message = f"target '{name}': its entry is {textfile.kind(entry)}, not an object of its build result"
                problems.append(Problem(message, file=source, key="--from"))
                continue
            names = entry.get(IMAGE_NAME, "")
            ids = tuple(entry[k] for k in DIGEST_KEYS if k in entry)
            if not isinstance(names, str):
                problems.append(
                    Problem(
                        f"target '{name}': malformed entry: {IMAGE_NAME} is not a string", file=source, key="--from"
                    )
                )
                continue
            if broken := [str(i) for i in ids if not values.is_digest(i)]:
                problems.append(
                    Problem(
                        f"target '{name}': malformed entry: {values.show(broken[0])} is not a digest "
                        f"({values.DIGEST_RULE})",
                        file=source,
                        key="--from",
                    )
                )
                continue
            listed = [n.strip() for n in names.split(",") if n.strip()]
            try:
                checked = [str(values.reference(n, f"target '{name}': malformed entry: {IMAGE_NAME}")) for n in listed]
            except values.BadValue as exc:
                problems.append(Problem(str(exc), file=source, key="--from"))
                continue
            reference = next((n for n in checked if is_temporary(n)), checked[0] if checked else "")
            reference = reference or bake_reference(s.combination, image, registry)
            found[image] = Baked(reference, ids)
    if problems:
        raise InputError(problems)
    return found


@dataclass(frozen=True)
class BakeRequest:
    """What a bake file is made of beyond the selection: the builds' options and wheel sources, the hosts pip
    and uv may reach over http, where the pip.conf and uv.toml secrets go, the temporary registry and the
    cache of every target."""

    options: BuildOptions
    sources: WheelSources
    trusted_hosts: tuple[str, ...] = ()
    secrets_dir: Path = Path(".bake")
    temporary_registry: str | None = None
    cache: Cache = Cache()
    named_contexts: bool = True  # devel targets built on their runtime target (`contexts`); False for 20.10 builders
    # The labels of each bootstrapped base (by its local name) where `--bootstrap` made them here: their facts go
    # into the targets' build digests (without them, `build` never takes a baked image of that base as up to date).
    base_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


def check_sources(sources: WheelSources) -> None:
    """UsageError for a local wheel folder: a bake file is for builders elsewhere, and nothing serves it."""
    if sources.local_folders:
        raise UsageError(
            "bake writes a file for builders elsewhere and serves no wheel folder, so a local folder "
            f"({', '.join(map(str, sources.local_folders))}) cannot be a wheel source: serve it over HTTP "
            "(python3 -m http.server -d DIR PORT) and pass its URL instead (with --network host for a server "
            "on the builder's loopback); unset TORCHIMAGES_FIND_LINKS and friends if scripts/host-pip-sources set them"
        )


def entries(chosen: Sequence[Selected], request: BakeRequest) -> list[Entry]:
    """One entry per selected image, each the build `build` would run, its pip.conf and uv.toml written as secret
    files under the request's secrets_dir; every path absolute (buildx resolves them from the folder it runs
    in). UsageError for a local wheel folder (nothing serves it to the builders elsewhere) or a secrets
    folder that cannot be written."""
    check_sources(request.sources)
    # buildx reads a bake file's paths from where it runs, not from the file: every path is absolute, so
    # `docker buildx bake -f FILE` works from any folder.
    ca_cert = request.options.ca_cert
    options = dataclasses.replace(
        request.options, images_dir=request.options.images_dir.absolute(), ca_cert=ca_cert and ca_cert.absolute()
    )
    secrets_dir = request.secrets_dir.absolute()
    found = []
    with wheels.serve(request.sources) as passed:  # remote URLs only: nothing is served, they pass through
        served = dataclasses.replace(passed, trusted_hosts=request.trusted_hosts)
        for s in chosen:
            for image in s.images:
                pip_text, uv_text = wheel_secrets(served, s.combination, image.platform)  # its platform's index
                auth_text = bootstrap.apt_auth(s.combination, options.mirrors)  # the mirror's login, for apt
                apt_auth = None
                try:
                    pip_conf = wheels.write_secret(secrets_dir, pip_text)
                    uv_conf = wheels.write_secret(secrets_dir, uv_text, "uv-{digest}.toml")
                    if auth_text:
                        apt_auth = wheels.write_secret(secrets_dir, auth_text, "apt-auth-{digest}.conf")
                except OSError as exc:
                    raise UsageError(f"--secrets-dir {request.secrets_dir}: {exc.strerror or exc}") from None
                runtime = next(
                    (i for i in s.images if i.flavor == RUNTIME_STAGE and i.platform == image.platform), None
                )
                reference = bake_reference(s.combination, image, request.temporary_registry)
                on = runtime and image.flavor == "devel" and request.named_contexts
                base = f"target:{target_name(runtime)}" if on and runtime else None
                local = build_digest.base_reference(s.combination, image)
                labels = request.base_labels.get(local) if local else None
                build = build_request(
                    options,
                    s.combination,
                    image,
                    reference,
                    served,
                    pip_conf,
                    uv_conf,
                    base,
                    apt_auth=apt_auth,
                    base_labels=labels,
                )
                found.append(Entry(s.combination, image, build))
    return found


@dataclass(frozen=True)
class Promotion:
    """What `promote` tags: the selected images the bake built, and each one's temporary reference."""

    chosen: tuple[Selected, ...]
    baked: Mapping[Image, Baked]


def promotion(metadata_file: Path, selected: Sequence[Selected], named: bool, registry: str | None) -> Promotion:
    """The images to promote from buildx's metadata file: those `selected` when the user `named` them (each
    must be in the file), else every image of the plan the bake built. The file is read by `textfile` (a regular
    UTF-8 file within TORCHIMAGES_MAX_FILE_BYTES, JSON no deeper than its limit): InputError, located, for one
    that is missing, malformed or names none of the plan's targets."""
    source = str(metadata_file)
    metadata = read_metadata(textfile.read_text(metadata_file, METADATA_WHAT), source)
    chosen = list(selected)
    if not named:
        chosen = [Selected(s.combination, tuple(i for i in s.images if target_name(i) in metadata)) for s in selected]
        chosen = [s for s in chosen if s.images]
        if not chosen:
            message = "names no bake target of this plan's images (see build.py bake)"
            raise InputError([Problem(message, file=source, key="--from")])
    return Promotion(tuple(chosen), baked_images(metadata, chosen, source, registry))
