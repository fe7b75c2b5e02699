"""Signatures with cosign: each pushed image, by digest, signed with the user's key; a reference's signature
verified with a public key.

What is signed is always `repository@sha256:...`, never a tag: the digest is what was verified here, a tag
can move. Nothing outside the registry is asked: no Rekor transparency log (`--tlog-upload=false` when
signing, `--insecure-ignore-tlog=true` when verifying) and no Fulcio certificate (a key is given), so a
signature proves the key's holder signed that digest, and nothing is recorded anywhere else.

The key: a cosign key file (`cosign generate-key-pair`: an encrypted PEM), its password in COSIGN_PASSWORD
(empty for a key without one), which cosign reads from the environment: it is never on a command line and
never written in a log. KMS and other URIs (`awskms://...`) are not taken: a file path only.

A registry on this machine (localhost, 127.x, ::1) speaks plain HTTP, as Docker lets it: cosign is given
`--allow-insecure-registry --allow-http-registry` for those alone. Every cosign run is cancellable (its
process group stopped) and bounded in time; a missing cosign, or one that fails, is a problem string naming
the reference and cosign's own error, never a traceback.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchimages import settings
from torchimages.engine.process import run_cancellable

PASSWORD = "COSIGN_PASSWORD"
COSIGN_TIMEOUT_S = 300.0
HOW_TO_GET_COSIGN = (
    "install cosign (Debian trixie's cosign 2.5.0, which needs libc alone: on bookworm "
    "`EXTRA_PACKAGES=cosign scripts/start-docker.sh` pins it in from trixie)"
)
# cosign verify's exit statuses for an answer about the signatures (any other: it could not look)
NO_SIGNATURES, NO_IMAGE, NO_MATCHING = 10, 11, 12
# How cosign 2.x's `Error:` line starts when the input itself is bad, before any registry is asked (exit 1):
# the --key file is no public key it can load ("loading public key: pem to public key: PEM decoding failed",
# "... unknown Public key PEM file type: ENCRYPTED SIGSTORE PRIVATE KEY", "open x.pub: no such file or
# directory", "read x: is a directory"), or the reference is none it takes ("parsing reference: ...").
BAD_KEY, BAD_REFERENCE = "loading public key", "parsing reference"
PEM_BEGIN = b"-----BEGIN "


@dataclass(frozen=True)
class Verified:
    """What `verify` found: whether the reference's signature holds with the key, the digest it is for
    (`sha256:...`, also read from a tag), and cosign's words where it does not."""

    verified: bool
    digest: str | None
    message: str
    bad_input: bool = False  # cosign refused the key file or the reference itself: no verdict on a signature


def find_cosign() -> str | None:
    """The cosign on PATH."""
    return shutil.which("cosign")


def cosign_problem() -> str | None:
    """Why signing cannot be done here (no cosign), or None."""
    return None if find_cosign() else f"cosign is not installed: {HOW_TO_GET_COSIGN}"


def is_loopback(reference: str) -> bool:
    """Whether the reference names a registry on this machine (Docker's rule for plain HTTP too)."""
    first = reference.split("/", 1)[0] if "/" in reference else ""
    host = first[1:].split("]", 1)[0] if first.startswith("[") else first.rsplit(":", 1)[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name
        return False


def registry_flags(reference: str) -> list[str]:
    """The flags that let cosign speak plain HTTP, for a registry on this machine alone."""
    return ["--allow-insecure-registry", "--allow-http-registry"] if is_loopback(reference) else []


def by_digest(reference: str) -> bool:
    """Whether a reference names a manifest by its digest (`repository@sha256:<64 hex>`)."""
    _, at, digest = reference.partition("@")
    algorithm, _, hexdigest = digest.partition(":")
    return (
        bool(at) and algorithm == "sha256" and len(hexdigest) == 64 and all(c in "0123456789abcdef" for c in hexdigest)
    )


def sign_command(cosign: str, key: Path, reference: str) -> list[str]:
    """`cosign sign` of one digest with the key file, no transparency log; ValueError for a tag."""
    if not by_digest(reference):
        raise ValueError(f"{reference}: only a digest is signed (repository@sha256:...), never a tag")
    return [cosign, "sign", "--key", str(key), "--yes", "--tlog-upload=false", *registry_flags(reference), reference]


def verify_command(cosign: str, public_key: Path, reference: str) -> list[str]:
    """`cosign verify` of a reference (a tag is resolved by cosign) against the public key file, no log."""
    return [
        cosign,
        "verify",
        "--key",
        str(public_key),
        "--insecure-ignore-tlog=true",
        *registry_flags(reference),
        "--output",
        "json",
        reference,
    ]


def public_key_command(cosign: str, key: Path) -> list[str]:
    """`cosign public-key`: the key file opened with the password, its public key printed (nothing written)."""
    return [cosign, "public-key", "--key", str(key)]


class _Deadline(threading.Event):
    """Set once `outer` is (the interrupt) or the time is up: what run_cancellable looks at."""

    def __init__(self, outer: threading.Event | None, seconds: float) -> None:
        super().__init__()
        self.outer, self.deadline = outer, time.monotonic() + seconds

    def is_set(self) -> bool:
        return (self.outer is not None and self.outer.is_set()) or time.monotonic() >= self.deadline

    @property
    def timed_out(self) -> bool:
        return time.monotonic() >= self.deadline


def _run(
    cmd: Sequence[str], cancelled: threading.Event | None, timeout_s: float, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[bytes] | str:
    """Run a cosign (or docker) command, no terminal (so no prompt), output captured; what it did, or why it
    did not finish (not found, interrupted, out of time) in words."""
    deadline = _Deadline(cancelled, timeout_s)
    try:
        done = run_cancellable(
            cmd,
            deadline,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env if env is not None else os.environ),
        )
    except OSError as exc:
        return f"`{cmd[0]}` could not be run: {exc.strerror or exc}"
    if cancelled is not None and cancelled.is_set():
        return "interrupted"
    if deadline.timed_out:
        return f"no answer within {timeout_s:g} s"
    return done


def _said(result: subprocess.CompletedProcess[bytes]) -> str:
    """cosign's own error: its last `Error:` line (else its last line, else the exit status)."""
    lines = [line.strip() for line in result.stderr.decode(errors="replace").splitlines() if line.strip()]
    errors = [line.removeprefix("Error: ") for line in lines if line.startswith("Error: ")]
    return (errors or lines or [f"exit status {result.returncode}"])[-1]


def key_problem(key: Path, cosign: str | None = None, timeout_s: float = 60.0) -> str | None:
    """Why the key file cannot sign (before anything is built): no COSIGN_PASSWORD in the environment, no
    cosign, or cosign cannot open it with that password; None when it can."""
    if not settings.is_set(PASSWORD):
        return f"--sign-key {key}: set {PASSWORD} to its password (empty for a key without one): cosign reads it there"
    cosign = cosign or find_cosign()
    if cosign is None:
        return f"--sign-key: cosign is not installed: {HOW_TO_GET_COSIGN}"
    result = _run(public_key_command(cosign, key), None, timeout_s)
    if isinstance(result, str):
        return f"--sign-key {key}: cosign could not open it: {result}"
    if result.returncode != 0:
        return f"--sign-key {key}: cosign could not open it with ${PASSWORD}: {_said(result)}"
    return None


@dataclass(frozen=True)
class Signer:
    """Signs pushed digests with one key file (its password in COSIGN_PASSWORD)."""

    key: Path
    cosign: str = "cosign"
    timeout_s: float = COSIGN_TIMEOUT_S

    def sign(self, reference: str, cancelled: threading.Event | None = None) -> list[str]:
        """Sign `repository@sha256:...`; the problems (none: its signature is in the registry beside it)."""
        try:
            cmd = sign_command(self.cosign, self.key, reference)
        except ValueError as exc:
            return [str(exc)]
        result = _run(cmd, cancelled, self.timeout_s)
        if isinstance(result, str):
            return [f"{reference}: not signed: cosign sign {result}"]
        if result.returncode != 0:
            return [f"{reference}: not signed: cosign sign failed: {_said(result)}"]
        return []


def public_key_problem(data: bytes) -> str | None:
    """Why a public key file's bytes are none cosign can load (empty, not text, no PEM block), or None: the
    check before cosign runs, so that a wrong file is bad input, never "not verified"."""
    if not data.strip():
        return "it is empty, not a public key (cosign.pub of `cosign generate-key-pair`)"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "it is not UTF-8 text: a public key is a PEM file (-----BEGIN PUBLIC KEY-----)"
    if PEM_BEGIN not in data:
        return "it holds no PEM block (-----BEGIN PUBLIC KEY-----): not a public key"
    return None


def signed_digest(output: bytes) -> str | None:
    """The one digest cosign verify's JSON says its signatures are for (None when none, or several)."""
    try:
        found: Any = json.loads(output)
        digests = {str(s["critical"]["image"]["docker-manifest-digest"]) for s in found}
    except (ValueError, TypeError, KeyError):
        return None
    return digests.pop() if len(digests) == 1 else None


def verify(
    reference: str,
    public_key: Path,
    cosign: str | None = None,
    cancelled: threading.Event | None = None,
    timeout_s: float = COSIGN_TIMEOUT_S,
) -> Verified:
    """Whether `reference` (a tag or a digest) carries a signature that holds with the public key file."""
    cosign = cosign or find_cosign()
    if cosign is None:
        return Verified(False, None, f"cosign is not installed: {HOW_TO_GET_COSIGN}")
    result = _run(verify_command(cosign, public_key, reference), cancelled, timeout_s)
    if isinstance(result, str):
        return Verified(False, None, f"{reference}: not verified: cosign verify {result}")
    if result.returncode != 0:
        said = _said(result)
        if result.returncode not in (NO_SIGNATURES, NO_IMAGE, NO_MATCHING) and said.startswith(BAD_KEY):
            return Verified(False, None, f"--key {public_key}: cosign cannot load it: {said}", bad_input=True)
        if result.returncode not in (NO_SIGNATURES, NO_IMAGE, NO_MATCHING) and said.startswith(BAD_REFERENCE):
            return Verified(False, None, f"{reference}: cosign takes no such reference: {said}", bad_input=True)
        return Verified(False, None, f"{reference}: not verified: {said}")
    digest = signed_digest(result.stdout)
    if digest is None:
        return Verified(False, None, f"{reference}: not verified: cosign named no single signed digest")
    return Verified(True, digest, f"{reference}: verified with {public_key}: {digest}")
