"""What built an image, said in the OCI labels that change per commit or per build (set by `--label`, so they
change the image's configuration only, never a layer nor the input digest): where the source is
(`org.opencontainers.image.source`), its commit (`revision`) and the build's creation time (`created`).

- source: TORCHIMAGES_SOURCE_URL, else the git remote (`origin`, else the only one) of the repository the
  Dockerfiles come from; credentials, query and fragment stripped, an SSH or scp-like address made the host's
  https URL; absent for a local path or anything that is not a URL of a host.
- revision: that repository's HEAD commit; `<commit>-dirty` when a tracked file differs from it (an untracked
  file does not count); absent outside a git repository.
- created: the build's SOURCE_DATE_EPOCH in RFC 3339 (UTC), which is also the image's own `Created` (BuildKit
  takes the build argument for the configuration's time), so it holds for a rebuild of the same inputs.
"""

from __future__ import annotations

import datetime
import subprocess
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

OCI = "org.opencontainers.image"
SOURCE_LABEL = f"{OCI}.source"
REVISION_LABEL = f"{OCI}.revision"
CREATED_LABEL = f"{OCI}.created"
DIRTY = "-dirty"
REMOTE = "origin"
SCHEMES = ("https", "http", "git", "ssh")  # git+ssh and scp-like addresses become https

# Runs a git command (its arguments after `git`) in a folder: its stdout, or None when it fails or git is missing.
Git = Callable[[Path, Sequence[str]], str | None]


@dataclass(frozen=True)
class Provenance:
    """Where the Dockerfiles come from: the repository's public URL and its commit (None: unknown)."""

    source: str | None = None
    revision: str | None = None


def public_url(url: str) -> str | None:
    """`url` as a label may say it: no user, password or token, no query or fragment, no trailing `.git` or `/`;
    `ssh://git@host/path` and `git@host:path` as `https://host/path`. None for a local path, a `file:` URL, or
    anything without a host."""
    text = url.strip()
    if not text or any(c.isspace() or not c.isprintable() for c in text):
        return None
    if "://" not in text:  # scp-like `[user@]host:path` (a local path has no `:` before its first `/`)
        address, colon, path = text.partition(":")
        if not colon or "/" in address or len(address) < 2 or not path or path.startswith("//"):  # `C:/...` a drive
            return None
        text = f"ssh://{address}/{path.lstrip('/')}"
    try:
        parts = urllib.parse.urlsplit(text)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower().replace("git+ssh", "ssh")
    if scheme not in SCHEMES or not host:
        return None
    if scheme == "ssh":
        scheme, port = "https", None  # the SSH port is not the web server's
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    path = parts.path.rstrip("/").removesuffix(".git").rstrip("/")
    return urllib.parse.urlunsplit((scheme, netloc, path, "", ""))


def revision(commit: str | None, dirty: bool) -> str | None:
    """The revision label of a commit: `<commit>`, or `<commit>-dirty` when tracked files differ from it."""
    if not commit:
        return None
    return commit + DIRTY if dirty else commit


def created(epoch: int) -> str:
    """A SOURCE_DATE_EPOCH in RFC 3339, UTC: `2026-11-29T00:00:00Z`."""
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def provenance_labels(provenance: Provenance, epoch: int) -> tuple[tuple[str, str], ...]:
    """The build-time OCI labels of an image built at `epoch` from `provenance` (the unknown ones left out)."""
    found = {CREATED_LABEL: created(epoch), REVISION_LABEL: provenance.revision, SOURCE_LABEL: provenance.source}
    return tuple((name, value) for name, value in found.items() if value)


def run_git(folder: Path, args: Sequence[str]) -> str | None:
    """`git -C folder ARGS`: its stdout, stripped; None when git is missing or the command fails."""
    try:
        done = subprocess.run(
            ["git", "--no-optional-locks", "-C", str(folder), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def remote_url(folder: Path, git: Git = run_git) -> str | None:
    """The URL of the repository's `origin` remote, else of its only remote; None without one."""
    found = git(folder, ["remote", "get-url", REMOTE])
    if found:
        return found
    names = (git(folder, ["remote"]) or "").split()
    return git(folder, ["remote", "get-url", names[0]]) if len(names) == 1 else None


def of_repository(folder: Path, configured: str | None = None, git: Git = run_git) -> Provenance:
    """The provenance of the Dockerfiles in `folder`: the `configured` source URL (TORCHIMAGES_SOURCE_URL), else
    its git remote's, made public (`public_url`); its repository's HEAD, `-dirty` when a tracked file differs.
    ValueError when `configured` is not a URL a label can carry (the message leaves the value out)."""
    source = public_url(configured) if configured else None
    if configured and source is None:
        raise ValueError("is not the URL of a host (https://host/path, or git@host:path)")  # not echoed: a token?
    commit = git(folder, ["rev-parse", "--verify", "HEAD^{commit}"])
    if not commit:  # not a git repository (or one without a commit): no revision, no remote
        return Provenance(source, None)
    changes = git(folder, ["status", "--porcelain", "--untracked-files=no"])
    url = source or public_url(remote_url(folder, git) or "")
    # A status that cannot be read vouches for nothing: no revision rather than a guess of clean or dirty.
    return Provenance(url, revision(commit, dirty=bool(changes)) if changes is not None else None)
