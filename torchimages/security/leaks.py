"""What no layer of a released image may hold, as rules on one entry of a layer (layers.py reads the layers
and applies them).

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
"""

from __future__ import annotations

import fnmatch
import hashlib
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

HEAD = 1024  # bytes of a file read for a private key's mark
KEY_MAX = 64 * 1024  # bytes: a file larger than this is no private key (a 16384-bit RSA PEM is ~12 KB)
MARK_MAX = 64 * 1024  # bytes of a credentials file read for its mark

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


@dataclass(frozen=True)
class Hit:
    """What one layer holds that no image may: the path in the image (the finding's key) and what it is."""

    path: str
    detail: str


@dataclass(frozen=True)
class Secret:
    """A file of the build's secrets: its name (for messages), size and sha256."""

    name: str
    size: int
    sha256: str


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
