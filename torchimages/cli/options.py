"""Option groups, each declared once and used by every command that takes it.

An option backed by an environment variable is declared with `setting=`: its default is the setting's
(torchimages.settings), read after parsing and only for the command that runs, so one bad variable
refuses the command that reads it (exit 2, naming it), not every command, and `--help` reads the same
on every machine. A repeatable option's setting comes first, the command line's values after it.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torchimages import render, settings, values
from torchimages.building import renderers
from torchimages.problems import UsageError
from torchimages.smoke import SUITES

DEFAULT_MATRIX = Path("matrix.yaml")
SETTINGS_OF = "settings_of"  # the namespace attribute: option dest -> setting name
EMPTY = "an empty value names nothing (leave the option out for the default)"


def add(parser: argparse.ArgumentParser, *flags: str, setting: str | None = None, **kwargs: Any) -> None:
    """parser.add_argument; with `setting`, the default comes from that environment variable."""
    if setting is not None:
        kwargs["default"] = [] if kwargs.get("action") == "append" else None
    action = parser.add_argument(*flags, **kwargs)
    if setting is not None:
        parser.set_defaults(**{SETTINGS_OF: {**(parser.get_default(SETTINGS_OF) or {}), action.dest: setting}})


def path(text: str) -> Path:
    """The type of every file or folder option: an empty value (`--report ""`) would name the current
    folder, so it is refused (argparse names the option, exit 2)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty value names no file or folder")
    return Path(text)


def text(value: str) -> str:
    """The type of a named value (a program, a network, a size): an empty one would silently mean the
    default, so it is refused (argparse names the option, exit 2)."""
    if not value:
        raise argparse.ArgumentTypeError(EMPTY)
    return value


def checked(validator: Callable[[str, str], object]) -> Callable[[str], str]:
    """An argparse `type` that passes a value through one of torchimages.values' validators: argparse
    refuses a bad one naming the option (exit 2, the value escaped), before the command starts."""

    def check(text: str) -> str:
        if not text:
            raise argparse.ArgumentTypeError(EMPTY)
        try:
            checked_value = validator(text, "")
        except values.BadValue as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return checked_value if isinstance(checked_value, str) else text  # a registry loses its '/' at the end

    check.__name__ = validator.__name__.replace("_", " ")  # argparse's word for the value in other errors
    return check


def apply_settings(args: argparse.Namespace) -> None:
    """Fill each setting-backed option the command line left unset (settings.SettingError on a bad value)."""
    for dest, name in (getattr(args, SETTINGS_OF, None) or {}).items():
        given = getattr(args, dest)
        if settings.BY_NAME[name].kind in settings.LISTS:
            setattr(args, dest, [*settings.value(name), *given])  # type: ignore[misc]
        elif isinstance(given, list):  # a repeatable option whose setting holds one value: it comes first
            found = settings.value(name)
            setattr(args, dest, [found, *given] if found else given)
        elif given is None:
            setattr(args, dest, settings.value(name))


def common(parser: argparse.ArgumentParser, bases: bool = True) -> None:
    """The matrix every command reads, where its Dockerfiles go, the registry bases' mirror and (`bases`) whether
    the OS bases are pulled or bootstrapped (else TORCHIMAGES_BASES alone says it)."""
    add(parser, "--matrix", type=path, default=DEFAULT_MATRIX, help="matrix file (default: matrix.yaml)")
    add(parser, "--templates", type=path, default=render.DEFAULT_TEMPLATES, help=argparse.SUPPRESS)
    add(
        parser,
        "--images-dir",
        type=path,
        default=None,
        help="where Dockerfiles are rendered (default: images/ beside the matrix)",
    )
    add(
        parser,
        "--base-registry",
        setting="TORCHIMAGES_BASE_REGISTRY",
        type=checked(values.registry),
        metavar="HOST/PREFIX",
        help="pull registry bases from this mirror (ubuntu:24.04 -> HOST/PREFIX/library/ubuntu:24.04); "
        "overrides the matrix's base_registry",
    )
    if not bases:
        parser.set_defaults(os_bases=None)
        parser.set_defaults(
            **{SETTINGS_OF: {**(parser.get_default(SETTINGS_OF) or {}), "os_bases": "TORCHIMAGES_BASES"}}
        )
        return
    add(
        parser,
        "--bases",
        setting="TORCHIMAGES_BASES",
        dest="os_bases",
        choices=("registry", "bootstrap"),
        help="registry: pull each OS's base (ubuntu:24.04); bootstrap: make it here from the distribution's "
        "archive with mmdebstrap (no registry; the Dockerfiles stay as they are); overrides the matrix's "
        "`bases` (default: the matrix's, else registry; debian12 is always bootstrapped)",
    )


def selectors(parser: argparse.ArgumentParser, required: bool = False) -> None:
    """The images a command acts on."""
    add(
        parser,
        "selectors",
        nargs="+" if required else "*",
        metavar="SELECTOR",
        help="tag prefix (2.7.0-cuda11.8), glob (2.14.1-*-debian12), or a full tag or alias",
    )


def wheel_sources(parser: argparse.ArgumentParser) -> None:
    """Where pip finds the wheels (`build` serves local folders; `bake` takes URLs only)."""
    add(
        parser,
        "--index-url",
        setting="TORCHIMAGES_INDEX_URL",
        type=checked(values.wheel_source),
        help="wheel index instead of each image's PyTorch index",
    )
    add(
        parser,
        "--extra-index-url",
        action="append",
        setting="TORCHIMAGES_EXTRA_INDEX_URLS",
        type=checked(values.wheel_source),
        help="additional wheel index (repeatable; URL, or for build a local folder)",
    )
    add(
        parser,
        "--find-links",
        action="append",
        setting="TORCHIMAGES_FIND_LINKS",
        type=checked(values.wheel_source),
        help="folder or URL of wheel files (repeatable; bake: URLs only)",
    )


def build_environment(parser: argparse.ArgumentParser) -> None:
    """What the builds' RUN steps see: the CA bundle, the network, the mirror of bootstrapped bases."""
    add(
        parser,
        "--ca-cert",
        type=path,
        setting="TORCHIMAGES_CA_CERT",
        help="CA bundle for TLS inside the build (a BuildKit secret, never in a layer)",
    )
    add(
        parser,
        "--network",
        type=checked(values.network),
        setting="TORCHIMAGES_NETWORK",
        help="network for RUN steps: default, none or host (build: host is used automatically for local wheel "
        "folders; buildx 0.13 ignores a bake target's network, later releases read it)",
    )
    mirror(parser)


def mirror(parser: argparse.ArgumentParser) -> None:
    """The distribution mirror of bootstrapped bases (build, bake; outdated: the build digest it compares)."""
    add(
        parser,
        "--mirror",
        type=checked(values.mirror),
        action="append",
        setting="TORCHIMAGES_MIRROR",
        metavar="[FAMILY=]MIRROR",
        help="distribution mirror for bootstrapped bases: a URL or a whole sources.list line, for one family "
        "(ubuntu=URL, debian=URL; repeatable) or, bare, for every family (default: the knowledge base's "
        "archive for Ubuntu, mmdebstrap's for Debian); a login in the URL (http://USER:PASSWORD@HOST/...) reaches "
        "apt only as an auth.conf, never the base or the image",
    )


def cache(parser: argparse.ArgumentParser) -> None:
    """BuildKit's cache import and export."""
    add(
        parser,
        "--cache-from",
        action="append",
        setting="TORCHIMAGES_CACHE_FROM",
        metavar="REF|type=registry,ref=REF",
        help="BuildKit cache source (repeatable): an image built with --cache-to type=inline; {tag} in REF "
        "stands for each image's tag ({target}, in a bake file, for its target's name); a login in it is refused: "
        "docker login REGISTRY first",
    )
    add(
        parser,
        "--cache-to",
        action="append",
        setting="TORCHIMAGES_CACHE_TO",
        metavar="type=inline",
        help="BuildKit cache export (repeatable; type=inline: into the image, pushed with --push)",
    )


def engine(parser: argparse.ArgumentParser) -> None:
    """The docker client to drive."""
    add(
        parser, "--docker", type=text, default=None, help="docker client to run (default: $DOCKER or the first on PATH)"
    )


def outputs(parser: argparse.ArgumentParser) -> None:
    """Where `build` and `promote` write their logs, and whether they push."""
    add(parser, "--log-dir", type=path, default=Path("logs"), help="one log per image (default logs/)")
    add(parser, "--push", action="store_true", help="push the tags of every image that passed")
    add(
        parser,
        "--compression",
        type=checked(values.compression),
        default=values.GZIP,
        metavar="gzip|zstd",
        help="how --push compresses the layers: gzip (default; every engine pulls it) or zstd (pulls decompress "
        "faster; needs skopeo and zstd here, and Docker 23+ or containerd 1.5+ to pull: docs/how-to/push-with-zstd.md)",
    )


def gzip_level(parser: argparse.ArgumentParser) -> None:
    """How hard a build's export compresses the layers it writes (the containerd image store)."""
    add(
        parser,
        "--gzip-level",
        type=checked(values.gzip_level),
        default=None,
        metavar="1-9",
        help="gzip the layers each build writes at level 1 (fastest: 12%% larger, the export of a 3.9 GB layer of "
        "shared libraries 2.3x faster) to 9 (smallest); default BuildKit's. Only where the engine keeps images in the "
        "containerd store, through buildx's docker driver (the classic store gzips at push, at its own level). A gzip "
        "push sends the layers as they were written (a zstd push compresses them again); a layer taken from the build "
        "cache, and an image already up to date, keep the level they were written at",
    )


def signing(parser: argparse.ArgumentParser, what: str = "each pushed image") -> None:
    """The key that signs what a command pushes."""
    add(
        parser,
        "--sign-key",
        type=path,
        default=None,
        metavar="KEY",
        help=f"sign {what} by its digest with cosign and this key file (`cosign generate-key-pair`; its "
        "password in $COSIGN_PASSWORD); no transparency log (nothing outside the registry is asked); "
        "`verify-signature` checks it",
    )


def temporary_registry(parser: argparse.ArgumentParser) -> None:
    """Where a bake's temporary references live."""
    add(
        parser,
        "--temporary-registry",
        default=None,
        type=checked(values.registry),
        metavar="REGISTRY",
        help="temporary references go to REGISTRY/torchimages-tmp/... (for bake --push; default: none, local; "
        "promote: where the metadata names none)",
    )


def progress_mode(parser: argparse.ArgumentParser) -> None:
    """How builds show progress."""
    add(
        parser,
        "--progress",
        setting="TORCHIMAGES_PROGRESS",
        choices=renderers.MODES,
        help="tty: one live line per running image (stage, time, bytes fetched); plain: one line per stage change "
        "and a heartbeat per running image every minute (TORCHIMAGES_HEARTBEAT_S); auto (default): tty on a terminal",
    )


def report(parser: argparse.ArgumentParser) -> None:
    """The report folder."""
    add(
        parser,
        "--report",
        type=path,
        default=None,
        metavar="DIR",
        help="write DIR/manifest.json, summary.md, junit.xml (every image a testsuite) and sbom/<tag>.cdx.json "
        "(docs/reports.md)",
    )


def test_gate(parser: argparse.ArgumentParser) -> None:
    """The smoke suites that run before an image is tagged."""
    add(
        parser,
        "--test",
        action="append",
        choices=("gpu", "none"),
        default=[],
        help="the cpu smoke suite runs before tagging; gpu adds the GPU suites (--gpus auto); none skips them "
        "(the versions inside are verified regardless)",
    )


def require_gpu(parser: argparse.ArgumentParser) -> None:
    """Whether no usable GPU fails."""
    add(parser, "--require-gpu", action="store_true", help="no usable GPU is a failure, not a skip")


def suites(text: str) -> tuple[str, ...]:
    """`--suites a,b`: known suite names, at least one (UsageError otherwise)."""
    chosen = tuple(s for s in text.split(",") if s)
    unknown = [s for s in chosen if s not in SUITES]
    if unknown or not chosen:
        raise UsageError(f"--suites takes {', '.join(SUITES)}, not {','.join(unknown) or 'nothing'}")
    return chosen


def security_gate(parser: argparse.ArgumentParser, skip: bool = True) -> None:
    """The release gate's security checks (docs/security.md); `skip`: a check may be left out."""
    from torchimages.security import allowlist
    from torchimages.security.model import CHECKS

    add(
        parser,
        "--allowlist",
        type=path,
        default=None,
        metavar="FILE",
        help=f"the findings the gate lets through, each with a reason and an expiry (default: {allowlist.DEFAULT_FILE} "
        "beside the matrix, when there)",
    )
    if skip:
        add(
            parser,
            "--skip-check",
            action="append",
            choices=(*CHECKS, "all"),
            default=[],
            help="leave a security check out of the gate (the report says so); repeatable",
        )
    add(
        parser,
        "--require-scan",
        action="store_true",
        help="a check that could not look (pip-audit without its service, an archive not answering) fails the image",
    )
