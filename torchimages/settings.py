"""Every environment variable the tool reads, in one table: its name, kind, default, meaning and readers.
tests/unit/test_settings.py finds every read of the environment in the package's code and checks that the
variable it names is a row here. A `secret` (COSIGN_PASSWORD) is never shown: only whether it is set (`***`).

The code reads each one through this module (`text`, `words`, `path`, `count`, `seconds`, `choice`, and
the validated `registry`, `hosts`, `wheel_source`, `wheel_sources`): one parse and one check per kind, and a bad value
raises `SettingError` naming the variable (the command line turns it into exit status 2). The same table
feeds each command's `--help` epilog, `build.py settings` and docs/reference/settings.md. This module
imports only torchimages.values (which imports nothing of the package): every layer may read it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from torchimages import values

Kind = Literal[
    "text",
    "words",
    "path",
    "count",
    "seconds",
    "choice",
    "epoch",
    "registry",
    "hosts",
    "wheel-source",
    "wheel-sources",
    "network",
    "mirror",
    "secret",
]
LISTS = ("words", "hosts", "wheel-sources")  # the kinds that are space-separated lists
Source = Literal["environment", "default"]

MATRIX = ("validate", "list", "render", "plan", "build", "test", "bake", "promote", "lock", "doctor")
ENGINE = ("build", "test", "bake", "promote", "lock", "doctor", "join", "outdated")
SIGNING = ("build", "promote", "join")  # the commands that sign with --sign-key
BUILDS = ("build", "bake")
GATE = ("build", "promote", "outdated")  # the commands that run the release gate (its layer scan's cache)

# What each kind must look like, said in a refusal.
REQUIREMENT: dict[str, str] = {
    "count": "must be a positive whole number",
    "seconds": "must be a number of seconds above 0, e.g. 60",
    "epoch": "must be a whole number of seconds since 1970-01-01 UTC, e.g. 1795910400",
}


class SettingError(ValueError):
    """An environment variable holds a value of the wrong kind; the message names it and says what it takes."""


@dataclass(frozen=True)
class Setting:
    """One environment variable: its kind, its default (as text, "" for none), what it means, who reads it."""

    name: str
    kind: Kind
    default: str
    meaning: str
    commands: tuple[str, ...]
    choices: tuple[str, ...] = ()


SETTINGS = (
    Setting(
        "TORCHIMAGES_BASE_REGISTRY", "registry", "", "mirror to pull registry bases from (--base-registry)", MATRIX
    ),
    Setting(
        "TORCHIMAGES_BASES",
        "choice",
        "",
        "how registry OSes' bases are obtained: registry (pulled) or bootstrap (made from the distribution's "
        "archive); overrides the matrix's `bases` (--bases)",
        MATRIX,
        ("registry", "bootstrap"),
    ),
    Setting("TORCHIMAGES_MAX_MATRIX_BYTES", "count", str(1024 * 1024), "largest matrix file read, in bytes", MATRIX),
    Setting(
        "TORCHIMAGES_MAX_FILE_BYTES",
        "count",
        str(16 * 1024 * 1024),
        "largest other file read (bases lock, requirements.lock, --spec, --from, --ca-cert), in bytes",
        MATRIX,
    ),
    Setting("TORCHIMAGES_MAX_COMBINATIONS", "count", "10000", "most combinations a matrix may expand to", MATRIX),
    Setting("TORCHIMAGES_MAX_ENTRIES", "count", "1000", "most entries of one matrix list (include, axes)", MATRIX),
    Setting("TORCHIMAGES_JOBS", "count", "1", "combinations built at once (--jobs)", ("build",)),
    Setting(
        "SOURCE_DATE_EPOCH",
        "epoch",
        "",
        "the images' creation time, and the time every file a build step writes is clamped to "
        "(default: the knowledge base's source_date)",
        BUILDS,
    ),
    Setting(
        "TORCHIMAGES_PROGRESS",
        "choice",
        "auto",
        "how builds show progress (--progress)",
        ("build", "promote"),
        ("auto", "plain", "tty"),
    ),
    Setting(
        "TORCHIMAGES_HEARTBEAT_S",
        "seconds",
        "60",
        "seconds between the heartbeats of --progress plain",
        ("build", "promote"),
    ),
    Setting("TORCHIMAGES_INDEX_URL", "wheel-source", "", "wheel index instead of each image's PyTorch index", BUILDS),
    Setting("TORCHIMAGES_EXTRA_INDEX_URLS", "wheel-sources", "", "more wheel indexes, space-separated", BUILDS),
    Setting("TORCHIMAGES_FIND_LINKS", "wheel-sources", "", "folders or URLs of wheel files, space-separated", BUILDS),
    Setting("TORCHIMAGES_CA_CERT", "path", "", "CA bundle for TLS inside the build (--ca-cert)", BUILDS),
    Setting("TORCHIMAGES_NETWORK", "network", "", "network for RUN steps: default, none or host (--network)", BUILDS),
    Setting("TORCHIMAGES_MIRROR", "mirror", "", "distribution mirror for bootstrapped bases (--mirror)", BUILDS),
    Setting("TORCHIMAGES_CACHE_FROM", "words", "", "BuildKit cache sources, space-separated (--cache-from)", BUILDS),
    Setting("TORCHIMAGES_CACHE_TO", "words", "", "BuildKit cache exports, space-separated (--cache-to)", BUILDS),
    Setting(
        "TORCHIMAGES_SOURCE_URL",
        "text",
        "",
        "the images' org.opencontainers.image.source label (default: the git remote `origin` of the repository of "
        "the images folder; credentials are stripped either way)",
        ("build", "bake"),
    ),
    Setting(
        "TORCHIMAGES_SYFT",
        "path",
        "",
        "the syft binary for the SBOMs of --report and the SBOM attestation's generator image",
        ("build", "bake", "test"),
    ),
    Setting(
        "TORCHIMAGES_BUSYBOX",
        "path",
        "",
        "the static busybox of the SBOM attestation's generator image (default: /bin/busybox, /usr/bin/busybox, "
        "then PATH's)",
        ("build", "bake"),
    ),
    Setting(
        "TORCHIMAGES_CONTAINERD_ADDRESS",
        "path",
        "",
        "the socket of the engine's containerd, whose content store gives an image's attestations by digest "
        "(default: /run/containerd/containerd.sock, then dockerd's own /var/run/docker/containerd/containerd.sock; "
        "where none answers, the image's docker save is read)",
        ("build", "promote"),
    ),
    Setting(
        "TORCHIMAGES_THROUGHPUT_OUT",
        "path",
        "",
        "write the GPU suite's throughput figures there (JSON: the GPU model, each figure's samples and their "
        "medians): a host run's, for TORCHIMAGES_THROUGHPUT_REFERENCE",
        ("test",),
    ),
    Setting(
        "TORCHIMAGES_THROUGHPUT_REFERENCE",
        "path",
        "",
        "the host's throughput figures (JSON, as TORCHIMAGES_THROUGHPUT_OUT writes them): the GPU suite's parity "
        "test fails a figure whose median is under the host's median less the wider of 10% and the host's own "
        "spread, and a reference of another GPU model, lacking a figure measured or naming one it does not know",
        ("test",),
    ),
    Setting(
        "TORCHIMAGES_CACHE_DIR",
        "path",
        "",
        "the tool's cache folder (default $XDG_CACHE_HOME/torchimages, else ~/.cache/torchimages); the release "
        "gate keeps its layer scans in layer-scans/ there",
        (*GATE, "cache"),
    ),
    Setting(
        "XDG_CACHE_HOME",
        "path",
        "",
        "the user's cache folder (absolute; default ~/.cache): the tool's is torchimages/ in it, unless "
        "TORCHIMAGES_CACHE_DIR says another",
        (*GATE, "cache"),
    ),
    Setting(
        "TORCHIMAGES_SCAN_CACHE",
        "choice",
        "on",
        "whether the release gate's layer scan keeps each layer's result by its digest and reads a layer it "
        "kept no more (off: every layer is read every time, and nothing is kept)",
        (*GATE, "cache"),
        ("on", "off"),
    ),
    Setting(
        "TORCHIMAGES_SCAN_CACHE_BYTES",
        "count",
        str(64 * 1024 * 1024),
        "most bytes the layer scans' cache keeps (the least recently used go first)",
        (*GATE, "cache"),
    ),
    Setting(
        "TORCHIMAGES_SCAN_SECONDS",
        "seconds",
        "3600",
        "most wall time the release gate's layer scan spends on one image, its export (or its layers' reads from the "
        "content store) included (one layer: half of it); past it the image or layer is not scanned",
        GATE,
    ),
    Setting(
        "TORCHIMAGES_SCAN_BYTES",
        "count",
        str(1 << 40),
        "most bytes of one image's export the layer scan reads, or of its layer blobs as the content store keeps them "
        "(one layer's uncompressed tar: a quarter of it); past it the image or layer is not scanned",
        GATE,
    ),
    Setting(
        "TORCHIMAGES_INSECURE_REGISTRIES",
        "hosts",
        "",
        "registry hosts spoken to over plain HTTP (loopback ones always are), space-separated",
        ("lock", "doctor"),
    ),
    Setting(
        "TORCHIMAGES_REGISTRY_DEADLINE_S",
        "seconds",
        "30",
        "seconds one registry question may take in all (token, HEAD, GET; a manifest read or written by buildx "
        "imagetools), however slowly the answer trickles",
        ("lock", "doctor", "build", "promote", "join"),
    ),
    Setting(
        "TORCHIMAGES_PYTHON",
        "path",
        "",
        "the Python with torchimages installed that scripts/validate-host.sh runs (default .venv/bin/python)",
        (),
    ),
    Setting("DOCKER", "text", "", "the docker client to run (--docker; default: the first on PATH)", ENGINE),
    Setting(
        "TORCHIMAGES_ENGINE_TIMEOUT_S",
        "seconds",
        "600",
        "seconds one request to the engine's API may wait for its next word (the first contact: a tenth, at most "
        "30): an engine that stops answering ends the command with an error",
        (*ENGINE, "outdated", "join"),
    ),
    Setting(
        "DOCKER_HOST",
        "text",
        "unix:///var/run/docker.sock",
        "the engine the SDK and the client talk to",
        ENGINE,
    ),
    Setting("DOCKER_TLS_VERIFY", "text", "", "verify the engine's TLS certificate (read by the docker SDK)", ENGINE),
    Setting("DOCKER_CERT_PATH", "path", "", "the TLS certificates for DOCKER_HOST (read by the docker SDK)", ENGINE),
    Setting(
        "COSIGN_PASSWORD",
        "secret",
        "",
        "the password of the --sign-key file (empty for a key without one); cosign reads it, never from a command "
        "line; shown only as *** (set) or unset",
        SIGNING,
    ),
    Setting(
        "PATH",
        "text",
        "",
        "where the programs the tool runs are found (docker, cosign, syft, skopeo, zstd)",
        (*ENGINE, "verify-signature"),
    ),
    Setting("TERM", "text", "", "dumb: --progress auto draws no live lines", ("build", "promote")),
)
BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def _raw(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The variable's value as set (stripped), or None when unset or empty."""
    text = (os.environ if environ is None else environ).get(BY_NAME[name].name, "").strip()
    return text or None


def source(name: str, environ: Mapping[str, str] | None = None) -> Source:
    """Where the effective value of `name` comes from (a secret: from the environment when set, even empty)."""
    if BY_NAME[name].kind == "secret":
        return "environment" if is_set(name, environ) else "default"
    return "default" if _raw(name, environ) is None else "environment"


def is_set(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the variable is in the environment at all (an empty COSIGN_PASSWORD is a password: none)."""
    return BY_NAME[name].name in (os.environ if environ is None else environ)


HIDDEN = "***"


def secret(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """What may be shown of a secret: HIDDEN when it is set (even empty), None when not; never its value."""
    return HIDDEN if is_set(name, environ) else None


def _refuse(setting: Setting, text: str, requirement: str) -> SettingError:
    default = f" (default {setting.default})" if setting.default else ""
    return SettingError(f"{setting.name}={text!r} {requirement}{default}")


def text(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """A text setting, or its default (None when it has none)."""
    return _raw(name, environ) or BY_NAME[name].default or None


def words(name: str, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """A space-separated list."""
    return tuple((_raw(name, environ) or BY_NAME[name].default).split())


def _checked(name: str, found: str, check: Callable[[str, str], str]) -> str:
    try:
        return check(found, name)
    except values.BadValue as exc:
        default = BY_NAME[name].default
        raise SettingError(str(exc) + (f" (default {default})" if default else "")) from None


# The kinds a validator of torchimages.values checks: one value, or a space-separated list of them.
_VALIDATORS: dict[str, Callable[[str, str], str]] = {
    "registry": values.registry,  # HOST[:PORT][/PREFIX]
    "wheel-source": values.wheel_source,  # a URL with a host, or a folder
    "network": values.network,  # default, none or host
    "mirror": values.mirror,  # a URL or a sources.list line
}
_LIST_VALIDATORS: dict[str, Callable[[str, str], str]] = {
    "hosts": values.host,  # HOST[:PORT] ...
    "wheel-sources": values.wheel_source,
}


def checked(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """A setting of a validated kind (registry, wheel-source, network, mirror), checked; None when unset."""
    found = text(name, environ)
    return _checked(name, found, _VALIDATORS[BY_NAME[name].kind]) if found else None


def checked_words(name: str, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """A setting of a validated list kind (hosts, wheel-sources), each word checked."""
    check = _LIST_VALIDATORS[BY_NAME[name].kind]
    return tuple(_checked(name, word, check) for word in words(name, environ))


def path(name: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """A path, or None when unset."""
    found = text(name, environ)
    return Path(found) if found else None


def whole_number(text: str) -> int | None:
    """`text` as a whole number of at least 1 in ASCII digits, or None (also for one too long for int())."""
    text = text.strip()
    try:
        number = int(text) if text.isascii() and text.isdecimal() else 0
    except ValueError:  # more digits than Python converts
        return None
    return number if number >= 1 else None


def count(name: str, environ: Mapping[str, str] | None = None) -> int:
    """A whole number of at least 1."""
    setting = BY_NAME[name]
    found = _raw(name, environ) or setting.default
    number = whole_number(found)
    if number is None:
        raise _refuse(setting, found, REQUIREMENT["count"])
    return number


def seconds(name: str, environ: Mapping[str, str] | None = None) -> float:
    """A finite number of seconds above 0."""
    setting = BY_NAME[name]
    found = _raw(name, environ) or setting.default
    try:
        value = float(found)
    except ValueError:
        value = 0.0
    if not (value > 0 and math.isfinite(value)):
        raise _refuse(setting, found, REQUIREMENT["seconds"])
    return value


def epoch(name: str, environ: Mapping[str, str] | None = None) -> int | None:
    """Whole seconds since 1970 (0 and up), or None when unset."""
    setting = BY_NAME[name]
    found = _raw(name, environ) or setting.default
    if not found:
        return None
    number = whole_number(found) if found.strip() != "0" else 0
    if number is None or len(found.strip()) > 12:
        raise _refuse(setting, found, REQUIREMENT["epoch"])
    return number


def choice(name: str, environ: Mapping[str, str] | None = None) -> str:
    """One of the setting's choices."""
    setting = BY_NAME[name]
    found = _raw(name, environ) or setting.default
    if not found and not setting.default:  # unset, and no default: the command's own rule decides
        return ""
    if found not in setting.choices:
        raise _refuse(setting, found, f"must be one of {', '.join(setting.choices)}")
    return found


def value(name: str, environ: Mapping[str, str] | None = None) -> object:
    """The effective value of any setting, parsed and checked by its kind."""
    readers: dict[str, Callable[[str, Mapping[str, str] | None], object]] = {
        "text": text,
        "words": words,
        "path": path,
        "count": count,
        "seconds": seconds,
        "choice": choice,
        "epoch": epoch,
        "secret": secret,
        **{kind: checked for kind in _VALIDATORS},
        **{kind: checked_words for kind in _LIST_VALIDATORS},
    }
    return readers[BY_NAME[name].kind](name, environ)


def of_command(command: str) -> tuple[Setting, ...]:
    """The settings a command reads."""
    return tuple(s for s in SETTINGS if command in s.commands)


def epilog(command: str, prog: str = "torchimages") -> str | None:
    """The `--help` epilog of a command: the environment variables it reads."""
    rows = of_command(command)
    if not rows:
        return None
    lines = [f"  {s.name:<32} {s.meaning}" + (f" (default {s.default})" if s.default else "") for s in rows]
    return f"environment variables (`{prog} settings` shows their values):\n" + "\n".join(lines)
