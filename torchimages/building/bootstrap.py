"""Bootstrapped bases: a base image made from a distribution archive, no registry needed.

The `bootstrap` OS provider (debian12), and every registry OS with an `archive` in the knowledge base under
`--bases bootstrap` (Ubuntu: the build maps the Dockerfile's `FROM ubuntu:24.04` to the local base through a
named build context, so the committed Dockerfiles stay as they are).
`mmdebstrap --variant=minbase SUITE ROOTFS.tar [SOURCES...]`, then `docker import`, once, and again only when
what shapes it changes (recorded in a label). The image records what it was built from (suite, sources, the
archive's Release date) in labels. apt inside mmdebstrap retries downloads; a bootstrap that failed on the
network is run again (at most BOOTSTRAP_TRIES times, with backoff); an interrupt stops it at once. Two
processes on one machine that need the same base take turns (machine_lock): the second waits for the first
one's bootstrap and finds the base made.

A login in the mirror's URL (`http://USER:PASSWORD@HOST/...`) reaches apt only through an auth.conf
(AUTH_FILE, written by a setup hook, removed by the last customize hook and dropped from the tar): mmdebstrap is
given the sources without it, so the base's sources.list, its labels and its digest never hold it. An image
built on such a base gets the login for its apt steps as a BuildKit secret (`apt_auth`). The release-date label
is the newest Date: of the Release files of every suite the base was made from (noble, noble-updates,
noble-security): when its packages were published, not when the release was.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path

from torchimages import platforms, settings, values
from torchimages.building import machine_lock
from torchimages.combination import BOOTSTRAP, LABEL_PREFIX, Combination
from torchimages.compat import Archive, OsRelease
from torchimages.engine import Engine, EngineError, run_cancellable
from torchimages.security import layer_cache

IMAGE_CONTEXT = "docker-image://"  # a named build context that is an image of the engine
DIGEST_LABEL = f"{LABEL_PREFIX}.bootstrap-digest"
SUITE_LABEL = f"{LABEL_PREFIX}.bootstrap.suite"
SOURCES_LABEL = f"{LABEL_PREFIX}.bootstrap.sources"
RELEASE_DATE_LABEL = f"{LABEL_PREFIX}.bootstrap.release-date"
# Leave documentation, manual pages and translations out: smaller images, nothing lost at run time.
DPKG_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")
# apt inside mmdebstrap retries each download; the whole bootstrap is tried again after a network failure.
APT_RETRIES = 3
BOOTSTRAP_TRIES = 3
BOOTSTRAP_BACKOFF_S = 10.0
# What mmdebstrap's log says when the archive or the network failed us (worth another try).
_NETWORK_FAILURE = re.compile(
    r"Failed to fetch|Could not connect|Unable to connect|Connection failed|Temporary failure resolving|"
    r"Could not resolve|Hash Sum mismatch|\b50[0234]\b|timed out",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Provenance:
    """What a bootstrapped base was built from: the suite, the apt sources, the archive's Release date."""

    suite: str
    sources: tuple[str, ...]
    release_date: str

    def labels(self) -> dict[str, str]:
        return {
            SUITE_LABEL: self.suite,
            SOURCES_LABEL: "; ".join(values.mirror_without_login(source) for source in self.sources),
            RELEASE_DATE_LABEL: self.release_date,
        }


@dataclass(frozen=True)
class Base:
    """A bootstrapped base one build needs: the OS release, the platform, and its local name
    (`torchimages/bootstrap-debian:12`; `...:12-arm64` where a Dockerfile is for several platforms)."""

    os: OsRelease
    platform: str
    reference: str


def archive_of(os: OsRelease) -> Archive:
    """How `os`'s base is bootstrapped; EngineError where the knowledge base says no way."""
    if os.archive is None:
        raise EngineError(f"{os.name} has no archive in the knowledge base: its base cannot be bootstrapped")
    return os.archive


def reference(os: OsRelease, platform: str, multi_platform: bool) -> str:
    """The local name of `os`'s bootstrapped base for `platform`: the base itself, or its platform's
    (`<image>-<arch>`: TARGETARCH chooses it) in a Dockerfile for several platforms."""
    return archive_of(os).reference(platforms.arch(platform), multi_platform)


def needed(combination: Combination) -> bool:
    """Whether a combination's OS base is bootstrapped: a bootstrap OS, or `--bases bootstrap`."""
    return combination.os.provider == "bootstrap" or combination.bases == BOOTSTRAP


def bootstrapped(combinations: Iterable[Combination]) -> list[Base]:
    """The bases the combinations need bootstrapped, each once, in order (every platform of each)."""
    found = {}
    for c in combinations:
        if needed(c):
            for platform in c.platforms:
                base = Base(c.os, platform, reference(c.os, platform, c.multi_platform))
                found[base.reference] = base
    return list(found.values())


def contexts(combination: Combination, platform: str) -> tuple[tuple[str, str], ...]:
    """The named build contexts that map a registry OS's `FROM` (as the Dockerfile names it) to its bootstrapped
    base under `--bases bootstrap`; none for a bootstrap OS (its Dockerfile names the base itself)."""
    local = combination.bootstrapped_base(platform)
    return ((combination.os.image, IMAGE_CONTEXT + local),) if local else ()


def mirror_for(mirrors: Iterable[str], family: str) -> str | None:
    """The mirror of one distribution family from `--mirror` values (`[FAMILY=]MIRROR`): its own, else a bare one
    (every family's)."""
    split = [values.mirror_family(m) for m in mirrors]
    chosen = [m for f, m in split if f == family] or [m for f, m in split if f is None]
    return chosen[-1] if chosen else None


def apt_auth(combination: Combination, mirrors: Iterable[str]) -> str:
    """The apt auth.conf an image's build mounts as a secret for its apt steps: the login of the mirror its
    bootstrapped base was made from (its sources.list names the mirror without it); "" for none."""
    return apt_auth_text(mirror_for(mirrors, combination.os.family) if needed(combination) else None)


def apt_auth_text(mirror: str | None) -> str:
    """The apt auth.conf that gives apt `mirror`'s login; "" for a mirror without one (or none)."""
    login = values.mirror_login(mirror) if mirror else None
    return login.auth_conf() if login else ""


def log_file(log_dir: Path, os: OsRelease, platform: str = platforms.DEFAULT) -> Path:
    """Where a bootstrap of `os` for `platform` writes mmdebstrap's and the import's output."""
    suffix = "" if platform == platforms.DEFAULT else f"-{platforms.arch(platform)}"
    return log_dir / f"bootstrap-{os.name}{suffix}.log"


def provenance_in(labels: dict[str, str]) -> dict[str, str] | None:
    """A bootstrapped base's provenance from its labels (suite, sources, release_date), None without them."""
    if SUITE_LABEL not in labels:
        return None
    return {
        "suite": labels[SUITE_LABEL],
        "sources": labels.get(SOURCES_LABEL, ""),
        "release_date": labels.get(RELEASE_DATE_LABEL, "unknown"),
    }


# Made for building on (reproducible layers): /etc/hosts exists, so no build step leaves a trace of BuildKit
# mounting its own there; apt's lock files (mmdebstrap's cleanup leaves them) are dropped from the tar, so no
# step leaves the whiteouts of removing them (a whiteout carries the time it was made).
BUILD_READY_HOOK = "printf '127.0.0.1\\tlocalhost\\n::1\\tlocalhost ip6-localhost ip6-loopback\\n' > \"$1/etc/hosts\""
# The mirror's login, for mmdebstrap's apt only (apt_auth.conf(5)); never in the base (the hook removes it, and
# the tar is copied without it).
AUTH_FILE = "etc/apt/auth.conf.d/90torchimages-mirror.conf"
DROPPED = frozenset({"var/lib/apt/lists/lock", "var/cache/apt/archives/lock", AUTH_FILE})
# The rules the provenance labels follow, in the digest: a change here makes every base again (2: the release
# date is the newest of its suites', issue 42; before, the release suite's alone).
RECORDED = "provenance 2"
RELEASE_HEAD = 65536  # bytes of each suite's Release file kept to read its Date: (a header field, near the top)


def without(source: Path, target: Path, dropped: frozenset[str]) -> None:
    """Copy the tar `source` to `target`, every member but those named in `dropped` (paths without `./`)."""
    with tarfile.open(source) as original, tarfile.open(target, "w", format=original.format) as copy:
        for member in original:
            if member.name.removeprefix("./") not in dropped:
                copy.addfile(member, original.extractfile(member) if member.isfile() else None)


def command(
    os: OsRelease,
    mirror: str | None,
    output: str = "-",
    record: Path | None = None,
    platform: str = platforms.DEFAULT,
    auth: Path | None = None,
) -> list[str]:
    """The mmdebstrap command that writes the root filesystem to `output` (a tar file, or "-": stdout), of
    `platform`'s architecture (another than this machine's runs under emulation: binfmt_misc and QEMU).
    The sources are `mirror`'s without its login; `auth`, an apt auth.conf holding it, is put where apt reads
    it for the bootstrap and removed before the tar is written. With `record`, a hook copies each suite's
    Release file and the apt sources into that folder."""
    archive = archive_of(os)
    bare = values.mirror_without_login(mirror) if mirror else None
    cmd = ["mmdebstrap", "--variant=minbase", "--quiet"]
    if platform != platforms.DEFAULT:
        cmd.append(f"--architectures={platforms.arch(platform)}")
    if archive.keyring:
        cmd.append(f"--keyring={archive.keyring}")
    if archive.include:
        cmd.append(f"--include={','.join(archive.include)}")
    cmd += [f"--dpkgopt=path-exclude={p}" for p in DPKG_EXCLUDES]
    cmd += ["--dpkgopt=path-include=/usr/share/doc/*/copyright"]
    cmd += [f'--aptopt=Acquire::Retries "{APT_RETRIES}"']
    if auth is not None:
        put = f'mkdir -p "$1"/{posix_dir(AUTH_FILE)} && cat {shlex.quote(str(auth))} > "$1"/{AUTH_FILE}'
        cmd.append(f"--setup-hook={put}")
    cmd.append(f"--customize-hook={BUILD_READY_HOOK}")
    if record is not None:
        cmd.append(f"--customize-hook={record_hook(record)}")
    if auth is not None:
        cmd.append(f'--customize-hook=rm -f "$1"/{AUTH_FILE}')
    return [*cmd, archive.suite, output, *archive.sources(platforms.arch(platform), bare)]


def posix_dir(path: str) -> str:
    """The folder part of a relative POSIX path."""
    return path.rpartition("/")[0]


def record_hook(record: Path) -> str:
    """A customize hook ("$1" is the new root): each suite's Release file (its head) and the sources, before
    cleanup removes apt's lists."""
    folder = shlex.quote(str(record / "releases"))
    return (
        f'mkdir -p {folder} && for f in "$1"/var/lib/apt/lists/*_Release "$1"/var/lib/apt/lists/*_InRelease; '
        f'do [ ! -f "$f" ] || head -c {RELEASE_HEAD} "$f" > {folder}/"${{f##*/}}"; done'
        f' && cat "$1"/etc/apt/sources.list > {shlex.quote(str(record / "sources.list"))}'
    )


def release_date(releases: Iterable[str]) -> str:
    """The newest Date: of the suites' Release (or InRelease) files, as written; "unknown" without one that
    parses. Each file's first Date: line is its own (the header comes before any signature or index)."""
    newest: tuple[datetime, str] | None = None
    for text in releases:
        found = re.search(r"^Date:[ \t]*(.+?)[ \t]*$", text, re.MULTILINE)
        if found is None:
            continue
        try:
            when = parsedate_to_datetime(found[1])
        except (TypeError, ValueError, IndexError):
            continue
        when = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
        if newest is None or when > newest[0]:
            newest = (when, found[1])
    return newest[1] if newest else "unknown"


def read_provenance(suite: str, record: Path) -> Provenance:
    """The provenance the hook wrote (absent files read as unknown)."""

    def text(name: str) -> str:
        path = record / name
        return path.read_text(errors="replace") if path.is_file() else ""

    sources = tuple(" ".join(line.split()[1:]) for line in text("sources.list").splitlines() if line.startswith("deb "))
    folder = record / "releases"
    releases = sorted(folder.iterdir()) if folder.is_dir() else []
    return Provenance(suite, sources, release_date(p.read_text(errors="replace") for p in releases if p.is_file()))


def digest(os: OsRelease, mirror: str | None, platform: str = platforms.DEFAULT) -> str:
    """What shapes the base image (not where it is written, nor the mirror's login: the command holds the
    sources without it), and the rules its labels follow (RECORDED): a base labelled by older rules is made
    again, never kept with a label that is no longer true."""
    shaped = "\0".join(command(os, mirror, platform=platform))
    return "sha256:" + hashlib.sha256(f"{shaped}\0{RECORDED}".encode()).hexdigest()


def import_changes(wanted_digest: str, provenance: Provenance) -> tuple[str, ...]:
    """The Dockerfile instructions `docker import` applies: the labels (values quoted) and the command."""
    labels = {DIGEST_LABEL: wanted_digest, **provenance.labels()}
    return (*(f"LABEL {key}={json.dumps(value)}" for key, value in labels.items()), 'CMD ["/bin/bash"]')


def network_failure(log_text: str) -> bool:
    """Whether a failed bootstrap's log shows the archive or the network failing (worth another try)."""
    return bool(_NETWORK_FAILURE.search(log_text))


def up_to_date(engine: Engine, os: OsRelease, mirror: str | None, base: Base | None = None) -> bool:
    """Whether the base (default: `os` for linux/amd64, as `os.image`) is here, made by today's command."""
    labels = engine.labels(base.reference if base else archive_of(os).image)
    return labels is not None and labels.get(DIGEST_LABEL) == digest(
        os, mirror, base.platform if base else platforms.DEFAULT
    )


def lock_name(reference: str) -> str:
    """What a bootstrap of the base `reference` takes its turn under: that base on this engine (DOCKER_HOST)."""
    return f"the bootstrap of base {reference} for engine {settings.text('DOCKER_HOST') or 'default'}"


def ensure(
    engine: Engine,
    os: OsRelease,
    mirror: str | None,
    log: Path,
    say: Callable[[str], None] | None = None,
    cancelled: threading.Event | None = None,
    sleep: Callable[[float], None] = time.sleep,
    base: Base | None = None,
) -> str:
    """Make the base image (`base`; default: `os` for linux/amd64, as `os.image`) unless an identical one is
    present; return what was done. A linux/amd64 base under its platform's name is `os.image` tagged so.

    `say` hears when a bootstrap starts and each retry; once `cancelled` is set, mmdebstrap is stopped and
    nothing is imported. A failure raises EngineError naming the log."""
    archive = archive_of(os)
    base = base or Base(os, platforms.DEFAULT, archive.image)
    name = base.reference
    if up_to_date(engine, os, mirror, base):
        return f"base {name} is up to date"
    if base.platform == platforms.DEFAULT and name != archive.image and up_to_date(engine, os, mirror):
        repository, tag = name.rsplit(":", 1)
        engine.tag(archive.image, repository, tag)
        return f"base {name} is {archive.image}"
    if shutil.which("mmdebstrap") is None:
        raise EngineError(
            f"the {os.name} base image is bootstrapped with mmdebstrap, which is not installed "
            "(apt-get install mmdebstrap)"
        )
    if archive.keyring and not Path(archive.keyring).is_file():
        raise EngineError(
            f"the {os.name} base image is bootstrapped from an archive that {archive.keyring} verifies, and that "
            f"keyring is not installed (apt-get install {os.family}-keyring; scripts/start-docker.sh does)"
        )
    tell = say or (lambda _: None)
    with machine_lock.held(lock_name(name), layer_cache.tool_folder(), waiting=tell, cancelled=cancelled):
        if cancelled is not None and cancelled.is_set():
            return f"base {name}: bootstrap interrupted, nothing imported"
        if up_to_date(engine, os, mirror, base):
            return f"base {name} is up to date (another process bootstrapped it meanwhile)"
        return _bootstrap(engine, base, mirror, log, tell, cancelled, sleep)


def _bootstrap(
    engine: Engine,
    base: Base,
    mirror: str | None,
    log: Path,
    tell: Callable[[str], None],
    cancelled: threading.Event | None,
    sleep: Callable[[float], None],
) -> str:
    """mmdebstrap and import, tried again after a network failure (see `ensure`)."""
    os, name = base.os, base.reference
    log.parent.mkdir(parents=True, exist_ok=True)
    suite = archive_of(os).suite
    tell(f"base {name}: bootstrapping from the {suite} archive for {base.platform} (log: {log})")
    log.write_bytes(b"")  # every attempt's output, in turn
    for attempt in range(1, BOOTSTRAP_TRIES + 1):
        status = _bootstrap_once(engine, base, mirror, log, cancelled)
        if cancelled is not None and cancelled.is_set():
            return f"base {name}: bootstrap interrupted, nothing imported"
        if status is None:
            return f"base {name} bootstrapped from the {suite} archive"
        if attempt == BOOTSTRAP_TRIES or not network_failure(log.read_text(errors="replace")):
            raise EngineError(f"bootstrapping {name} failed ({status}); see {log}")
        delay = BOOTSTRAP_BACKOFF_S * 2 ** (attempt - 1)
        retry = f"retry {attempt}/{BOOTSTRAP_TRIES - 1} in {delay:.0f} s"
        tell(f"base {name}: bootstrap failed on the network ({status}); {retry}")
        sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def _bootstrap_once(
    engine: Engine, base: Base, mirror: str | None, log: Path, cancelled: threading.Event | None
) -> str | None:
    """One mmdebstrap run into a temporary tar, then its import; None when it worked, else what failed."""
    os, platform = base.os, base.platform
    with tempfile.TemporaryDirectory(prefix="torchimages-bootstrap-") as folder, log.open("ab") as out:
        rootfs, record = Path(folder, "rootfs.tar"), Path(folder)
        auth = None
        if text := apt_auth_text(mirror):  # in the private temporary folder, removed with it
            auth = Path(folder, "auth.conf")
            auth.write_text(text)
        cmd = command(os, mirror, str(rootfs), record, platform, auth)
        strap = run_cancellable(cmd, cancelled, stdout=out, stderr=out)
        if cancelled is not None and cancelled.is_set():
            return "interrupted"
        if strap.returncode:
            return f"mmdebstrap exit {strap.returncode}"
        changes = import_changes(digest(os, mirror, platform), read_provenance(archive_of(os).suite, record))
        ready = Path(folder, "ready.tar")
        without(rootfs, ready, DROPPED)
        with ready.open("rb") as tar:
            foreign = None if platform == platforms.DEFAULT else platform
            imported = engine.import_rootfs(tar, base.reference, changes, out, foreign)
        return f"docker import exit {imported}" if imported else None
