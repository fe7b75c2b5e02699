"""Credentials, private keys, the build's own secrets and stray files, in any layer of an image: read from the
layer tarballs of the image as the engine exports it (`docker save` of its id, `Engine.exported`), streamed
and never written to disk, so a file that a later layer deletes is still found in the layer that holds it.

A finding's `key` (what an allowlist entry names) is the path in the image, absolute: `/root/.netrc` (a stray
folder's findings are grouped under the entry directly in /tmp, /var/tmp or /root: `/tmp/build`); its
`subject` the layer, `layer 3 of 12 (sha256:0123456789ab)`, with `, deleted in layer 5` when a later layer's
whiteout removes it from the final filesystem (it is still in the pushed image); `detail` the path and what
it is (`/root/.netrc: a netrc file (logins and passwords)`).

The rules, each a table below:
    credentials    by path, anywhere in the image (any home): CREDENTIAL_FILES; some only with a mark in their
                   content (an auth token in .npmrc, a password in a pip.conf URL)
    private keys   by content: a PEM or OpenSSH private key's first line (KEY_MARK) in the first KB of a file
                   of at most 64 KiB; not in the test data of Python packages and of Python itself
                   (KEY_TEST_FOLDERS under site-packages, dist-packages or lib/pythonX.Y: published test keys)
    build secrets  a file whose whole content is one of `secrets` (the build's BuildKit secrets that may hold
                   credentials: its pip.conf and uv.toml), under any name: sizes first, then sha256
    stray files    anything in /tmp, /var/tmp and /root but what the distribution puts there (STRAY_PLACES);
                   not folders, whiteouts, nor empty files (BuildKit leaves one at each file mount's target,
                   e.g. /tmp/requirements.lock: it holds nothing)

Archives: Docker 25+'s OCI layout (blobs/sha256/...) and the older `<id>/layer.tar`, both through
manifest.json's `Layers` (read wherever it comes in the stream: each blob's hits are kept, and put in order at
the end). Layers are the uncompressed tars `docker save` writes; gzip ones (an engine on the containerd image
store may keep them so) are read too; a zstd layer, or one not read, makes the scan "not scanned" saying which,
never clean.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import posixpath
import re
import tarfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from torchimages.engine import Engine
from torchimages.security.model import SECRETS, Finding, Scan

HEAD = 1024  # bytes of a file read for a private key's mark
KEY_MAX = 64 * 1024  # bytes: a file larger than this is no private key (a 16384-bit RSA PEM is ~12 KB)
MARK_MAX = 64 * 1024  # bytes of a credentials file read for its mark
KEPT = 1 << 20  # archive members up to this size that are not layers are kept (manifest.json, configurations)
CHUNK = 1 << 20

# PEM private keys (RFC 7468: PRIVATE KEY, ENCRYPTED PRIVATE KEY; OpenSSL's RSA, EC, DSA; OpenSSH's own) and
# PuTTY's key files.
KEY_MARK = re.compile(rb"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----|PuTTY-User-Key-File-\d+:")
KEY_TEST_FOLDERS = frozenset({"test", "tests", "testing", "testdata", "test_data"})
USERINFO = re.compile(rb"[a-z][a-z0-9+.-]*://[^\s/@\"']+@", re.IGNORECASE)  # https://user:password@host


@dataclass(frozen=True)
class CredentialFile:
    """A credentials file by path: `suffix` its last path components (fnmatch patterns), found wherever it is
    (any home, any prefix); with a `mark`, only when its first MARK_MAX bytes match it."""

    suffix: tuple[str, ...]
    what: str
    mark: re.Pattern[bytes] | None = None


CREDENTIAL_FILES = (
    # curl, git, pip, requests and Python's netrc module read it: machine, login, password
    CredentialFile((".netrc",), "a netrc file (logins and passwords)"),
    # docs.docker.com/reference/cli/docker/login: `auths` hold base64 user:password, or identity tokens
    CredentialFile(
        (".docker", "config.json"),
        "a Docker client configuration with registry credentials",
        re.compile(rb'"(?:auth|identitytoken|registrytoken)"\s*:\s*"[^"]'),
    ),
    # packaging.python.org/specifications/pypirc: twine's upload credentials
    CredentialFile((".pypirc",), "a .pypirc (PyPI upload credentials)"),
    # git-scm.com/docs/git-credential-store
    CredentialFile((".git-credentials",), "a git credential store"),
    # docs.aws.amazon.com/cli/latest/userguide/cli-configure-files.html
    CredentialFile((".aws", "credentials"), "AWS credentials"),
    # cloud.google.com/docs/authentication/application-default-credentials; gcloud's own stores
    CredentialFile((".config", "gcloud", "application_default_credentials.json"), "Google Cloud credentials"),
    CredentialFile((".config", "gcloud", "credentials.db"), "Google Cloud credentials (gcloud)"),
    CredentialFile((".config", "gcloud", "access_tokens.db"), "Google Cloud access tokens (gcloud)"),
    CredentialFile((".config", "gcloud", "legacy_credentials", "*", "*"), "Google Cloud credentials (gcloud)"),
    # learn.microsoft.com/cli/azure: the Azure CLI's token caches and service principals
    CredentialFile((".azure", "accessTokens.json"), "Azure CLI access tokens"),
    CredentialFile((".azure", "msal_token_cache.*"), "Azure CLI token cache"),
    CredentialFile((".azure", "service_principal_entries.*"), "Azure CLI service principal secrets"),
    # kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig
    CredentialFile((".kube", "config"), "a kubeconfig (cluster credentials)"),
    # huggingface.co/docs/huggingface_hub/package_reference/environment_variables (HF_TOKEN_PATH; the old place)
    CredentialFile((".cache", "huggingface", "token"), "a Hugging Face token"),
    CredentialFile((".cache", "huggingface", "stored_tokens"), "Hugging Face tokens"),
    CredentialFile((".huggingface", "token"), "a Hugging Face token"),
    # cli.github.com/manual/gh_auth_login: oauth_token in hosts.yml
    CredentialFile((".config", "gh", "hosts.yml"), "GitHub CLI tokens", re.compile(rb"oauth_token\s*:\s*\S")),
    # docs.npmjs.com/cli/configuring-npm/npmrc: `//registry/:_authToken=...`, _auth, _password
    CredentialFile((".npmrc",), "an .npmrc with an auth token", re.compile(rb"_(?:authToken|auth|password)\s*=")),
    # pip.pypa.io/en/stable/topics/configuration; docs.astral.sh/uv/reference/settings: an index URL's userinfo
    CredentialFile(("pip.conf",), "a pip.conf with credentials in a URL", USERINFO),
    CredentialFile(("uv.toml",), "a uv.toml with credentials in a URL", USERINFO),
)


@dataclass(frozen=True)
class StrayPlace:
    """A folder that a released image keeps empty but for the distribution's own `defaults` (names in it)."""

    folder: str
    defaults: frozenset[str] = frozenset()


STRAY_PLACES = (
    StrayPlace("/tmp"),
    StrayPlace("/var/tmp"),
    # Debian's and Ubuntu's base-files install /root/.bashrc and /root/.profile (from /usr/share/base-files)
    StrayPlace("/root", frozenset({".bashrc", ".profile"})),
)

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


@dataclass(frozen=True)
class Hit:
    """What one layer holds that no image may: the path in the image (the finding's key) and what it is."""

    path: str
    detail: str


@dataclass(frozen=True)
class Layer:
    """One layer tarball read: its hits, the paths its whiteouts delete from the layers below, the folders it
    makes opaque (their lower contents gone), how many entries it has; `problem` why it was not read."""

    hits: tuple[Hit, ...] = ()
    deleted: frozenset[str] = frozenset()
    opaque: frozenset[str] = frozenset()
    entries: int = 0
    problem: str = ""


@dataclass(frozen=True)
class Secret:
    """A file of the build's secrets: its name (for messages), size and sha256."""

    name: str
    size: int
    sha256: str


# --- the rules, on one entry of a layer -------------------------------------------------------------------


def image_path(name: str) -> str:
    """A tar member's name as an absolute path in the image: `./root/.netrc` -> `/root/.netrc`."""
    return posixpath.normpath("/" + name.lstrip("/")).replace("//", "/")


def credential_rule(path: str) -> CredentialFile | None:
    """The credentials file a path is, by its last components (content marks aside)."""
    parts = path.split("/")
    for rule in CREDENTIAL_FILES:
        tail = parts[-len(rule.suffix) :]
        if len(tail) != len(rule.suffix):
            continue
        if all(fnmatch.fnmatchcase(part, pattern) for part, pattern in zip(tail, rule.suffix, strict=True)):
            return rule
    return None


def python_test_data(path: str) -> bool:
    """Whether a path is in the tests of a Python package, or of Python itself (Lib/test): under
    site-packages, dist-packages or lib/pythonX.Y, below a folder of KEY_TEST_FOLDERS."""
    parts = path.split("/")
    for at, part in enumerate(parts):
        packages = part in ("site-packages", "dist-packages")
        stdlib = at > 0 and parts[at - 1] == "lib" and re.fullmatch(r"python3(\.\d+)?", part) is not None
        if (packages or stdlib) and any(p in KEY_TEST_FOLDERS for p in parts[at + 1 : -1]):
            return True
    return False


def key_candidate(path: str, size: int) -> bool:
    return 0 < size <= KEY_MAX and not python_test_data(path)


def private_key(head: bytes) -> str | None:
    """The private key mark in a file's first bytes (`-----BEGIN OPENSSH PRIVATE KEY-----`), or None."""
    found = KEY_MARK.search(head[:HEAD])
    return found.group().decode(errors="replace") if found else None


def stray_place(path: str) -> tuple[StrayPlace, str] | None:
    """The stray place a path is in and the entry directly in it that holds it (`/tmp/build` for
    /tmp/build/x.whl); None outside them, for the folder itself, and for the distribution's defaults."""
    for place in STRAY_PLACES:
        if path.startswith(place.folder + "/"):
            name = path[len(place.folder) + 1 :].split("/", 1)[0]
            if path == f"{place.folder}/{name}" and name in place.defaults:
                return None
            return place, f"{place.folder}/{name}"
    return None


def stray_hits(found: Mapping[str, list[str]]) -> list[Hit]:
    """One hit per entry directly in a stray place, from the paths found under it."""
    hits = []
    for top, paths in sorted(found.items()):
        folder = posixpath.dirname(top)
        count = "a stray file" if len(paths) == 1 else f"{len(paths)} stray files"
        example = "" if paths == [top] else f" (e.g. {sorted(paths)[0]})"
        hits.append(Hit(top, f"{count} left in {folder}{example}"))
    return hits


def secrets_of(secrets: Sequence[tuple[str, bytes]]) -> tuple[Secret, ...]:
    """The build's secrets (name, content) by size and sha256 (empty ones left out: every empty file would
    match)."""
    return tuple(Secret(name, len(data), hashlib.sha256(data).hexdigest()) for name, data in secrets if data)


# --- one layer ----------------------------------------------------------------------------------------------


def _read(file: IO[bytes], want: int, digest: bool) -> tuple[bytes, str | None]:
    """A member's first `want` bytes, and the sha256 of all of it when `digest`."""
    head = file.read(want) if want else b""
    if not digest:
        return head, None
    hashed = hashlib.sha256(head)
    while chunk := file.read(CHUNK):
        hashed.update(chunk)
    return head, hashed.hexdigest()


def read_layer(layer: tarfile.TarFile, secrets: Sequence[Secret]) -> Layer:
    """Every rule over one layer tarball, read as a stream (mode 'r|')."""
    by_size: dict[int, list[Secret]] = {}
    for secret in secrets:
        by_size.setdefault(secret.size, []).append(secret)
    hits: list[Hit] = []
    stray: dict[str, list[str]] = {}
    deleted, opaque = set(), set()
    entries = 0
    for member in layer:
        entries += 1
        path = image_path(member.name)
        base = posixpath.basename(path)
        if base == OPAQUE:
            opaque.add(posixpath.dirname(path))
            continue
        if base.startswith(WHITEOUT):
            deleted.add(posixpath.join(posixpath.dirname(path), base[len(WHITEOUT) :]))
            continue
        if member.isdir():
            continue
        found = _file_hits(layer, member, path, by_size) if member.isfile() or member.islnk() else []
        hits += found
        where = stray_place(path)
        if where and not found and not (member.isfile() and member.size == 0):
            stray.setdefault(where[1], []).append(path)
    return Layer(tuple(hits + stray_hits(stray)), frozenset(deleted), frozenset(opaque), entries)


def _file_hits(
    layer: tarfile.TarFile, member: tarfile.TarInfo, path: str, by_size: Mapping[int, list[Secret]]
) -> list[Hit]:
    """The credential, private key and build secret rules on one file (a hard link: by its path only)."""
    rule = credential_rule(path)
    regular = member.isfile()
    want = 0
    if regular and rule is not None and rule.mark is not None:
        want = MARK_MAX
    elif regular and key_candidate(path, member.size):
        want = HEAD
    matching = by_size.get(member.size, []) if regular else []
    if not want and not matching:
        return [Hit(path, rule.what)] if rule is not None and rule.mark is None else []
    file = layer.extractfile(member)
    assert file is not None
    head, digest = _read(file, want, bool(matching))
    hits = []
    if rule is not None and (rule.mark is None or rule.mark.search(head)):
        hits.append(Hit(path, rule.what))
    key = private_key(head) if regular and key_candidate(path, member.size) else None
    if key:
        hits.append(Hit(path, f"a private key ({key})"))
    hits += [Hit(path, f"the content of the build's secret {s.name}") for s in matching if s.sha256 == digest]
    return hits


# --- the archive ----------------------------------------------------------------------------------------------


def _kind(head: bytes) -> str:
    """What an archive member is, by its first bytes: a tar (or an empty one: zero blocks), gzip, zstd."""
    if head[257:262] == b"ustar" or (len(head) >= 512 and not any(head[:512])):
        return "tar"
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if head[:4] == b"\x28\xb5\x2f\xfd":
        return "zstd"
    return "other"


def _link_target(member: tarfile.TarInfo) -> str:
    """Where a link in the archive points, as an archive path (a symlink is relative to its folder)."""
    if member.islnk():
        return image_path(member.linkname)
    return image_path(posixpath.join(posixpath.dirname(image_path(member.name)), member.linkname))


@dataclass(frozen=True)
class Archive:
    """A `docker save` archive read once: each layer-like blob read, the small other members kept, links."""

    layers: Mapping[str, Layer]
    kept: Mapping[str, bytes]
    links: Mapping[str, str]

    def resolve(self, name: str) -> str:
        name = image_path(name)
        for _ in range(40):
            if name not in self.links:
                break
            name = self.links[name]
        return name


def read_archive(stream: IO[bytes], secrets: Sequence[Secret]) -> Archive:
    """Read a `docker save` archive as a stream: every member that is a tar (or gzip'd tar) is read as a
    layer; small other members are kept (manifest.json and the configuration). tarfile.TarError when the
    archive itself breaks off."""
    layers: dict[str, Layer] = {}
    kept: dict[str, bytes] = {}
    links: dict[str, str] = {}
    with tarfile.open(fileobj=stream, mode="r|") as saved:
        for member in saved:
            name = image_path(member.name)
            if member.issym() or member.islnk():
                links[name] = _link_target(member)
                continue
            if not member.isfile():
                continue
            file = saved.extractfile(member)
            assert file is not None
            kind = _kind(file.peek(512)[:512])  # type: ignore[attr-defined]  # an io.BufferedReader
            if kind == "zstd":
                layers[name] = Layer(problem="it is zstd-compressed, which this check does not read")
            elif kind in ("tar", "gzip"):
                try:
                    with tarfile.open(fileobj=file, mode="r|gz" if kind == "gzip" else "r|") as layer:
                        layers[name] = read_layer(layer, secrets)
                except (tarfile.TarError, EOFError, OSError) as exc:
                    layers[name] = Layer(problem=f"it could not be read as a tar ({exc})")
            elif member.size <= KEPT:
                kept[name] = file.read()
    return Archive(layers, kept, links)


@dataclass(frozen=True)
class Order:
    """The image's layers from manifest.json, bottom first: each one's archive path and digest (its diff_id
    from the configuration, else the blob's name)."""

    names: tuple[str, ...]
    digests: tuple[str, ...]


def layer_order(archive: Archive) -> Order:
    """The one image's layers in order; ValueError saying why not."""
    if "/manifest.json" not in archive.kept:
        raise ValueError("the archive has no manifest.json")
    try:
        (entry,) = json.loads(archive.kept["/manifest.json"])
        names = tuple(archive.resolve(str(name)) for name in entry["Layers"])
        config_name = archive.resolve(str(entry.get("Config", "")))
    except (ValueError, TypeError, KeyError, AttributeError):
        raise ValueError("manifest.json does not name one image's layers") from None
    diff_ids: list[str] = []
    try:
        config = json.loads(archive.kept.get(config_name, b"{}"))
        diff_ids = [str(d) for d in config["rootfs"]["diff_ids"]]
    except (ValueError, TypeError, KeyError):
        pass
    if len(diff_ids) != len(names):
        diff_ids = ["sha256:" + posixpath.basename(n) if "/sha256/" in n else n.lstrip("/") for n in names]
    return Order(names, tuple(diff_ids))


def _short(digest: str) -> str:
    algorithm, _, hex_part = digest.partition(":")
    return f"{algorithm}:{hex_part[:12]}" if hex_part else digest


def deleted_by(path: str, above: Iterable[tuple[int, Layer]]) -> int | None:
    """The first layer above (number, layer) whose whiteouts delete `path`: itself, a folder above it, or an
    opaque folder above it."""
    ancestors = [posixpath.dirname(path)]
    while ancestors[-1] != "/":
        ancestors.append(posixpath.dirname(ancestors[-1]))
    for number, layer in above:
        if path in layer.deleted or any(a in layer.deleted or a in layer.opaque for a in ancestors):
            return number
    return None


def findings(archive: Archive, order: Order) -> tuple[list[Finding], list[str]]:
    """The findings of every layer in order (subject: the layer, and where a later one deletes it), and the
    problems of the layers not read."""
    found, problems = [], []
    total = len(order.names)
    read = [archive.layers.get(name) for name in order.names]
    for at, (layer, digest) in enumerate(zip(read, order.digests, strict=True)):
        where = f"layer {at + 1} of {total} ({_short(digest)})"
        if layer is None or layer.problem:
            problems.append(f"{where} not read: {layer.problem if layer else 'it is not in the archive'}")
            continue
        above = [(n + 1, lay) for n, lay in enumerate(read) if n > at and lay is not None]
        for hit in layer.hits:
            gone = deleted_by(hit.path, above)
            subject = where + (f", deleted in layer {gone}" if gone else "")
            found.append(Finding(SECRETS, hit.path, subject, f"{hit.path}: {hit.detail}"))
    return found, problems


def scan(
    engine: Engine, reference: str, secrets: Sequence[tuple[str, bytes]], cancelled: threading.Event | None = None
) -> Scan:
    """What the layers of `reference` hold that no image may (see the module). EngineError when the engine
    cannot export it; not scanned (saying why) when the archive, or one of its layers, could not be read."""
    try:
        with engine.exported(reference, cancelled) as stream:
            archive = read_archive(stream, secrets_of(secrets))
    except tarfile.TarError as exc:
        return Scan(SECRETS, scanned=False, note=f"the exported image could not be read: {exc}")
    try:
        order = layer_order(archive)
    except ValueError as exc:
        return Scan(SECRETS, scanned=False, note=f"the exported image could not be read: {exc}")
    found, problems = findings(archive, order)
    entries = sum(archive.layers[n].entries for n in set(order.names) if n in archive.layers)
    note = f"{len(order.names)} layers, {entries} entries"
    if problems:
        return Scan(SECRETS, tuple(found), scanned=False, note="; ".join([note, *problems]))
    return Scan(SECRETS, tuple(found), note=note)
