"""A container registry's HTTP API (the OCI distribution spec), just enough to resolve a tag to its digest.

Not Docker: a plain HTTP(S) call to a registry, so it works on a machine without an engine (the doctor
asks it whether the bases answer). `HEAD /v2/<path>/manifests/<tag>`, with the Accept headers of an OCI
index, a Docker manifest list and both single-platform manifests, answers the digest in
`Docker-Content-Digest`; an anonymous bearer token is fetched when the registry asks for one (Docker Hub).
Loopback registries, and hosts named in TORCHIMAGES_INSECURE_REGISTRIES, are spoken to over plain HTTP.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from torchimages import settings

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
OFFICIAL_PREFIX = "library"  # Docker Hub's official images (`ubuntu`) live under library/
INSECURE_VARIABLE = "TORCHIMAGES_INSECURE_REGISTRIES"
TIMEOUT_S = 10.0
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
)
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_CHALLENGE_FIELD = re.compile(r'(\w+)="([^"]*)"')


class RegistryError(Exception):
    """A registry could not be reached or refused to answer; the message says which and why."""


@dataclass(frozen=True)
class Reference:
    """An image reference split as Docker normalises it: `ubuntu:24.04` is docker.io/library/ubuntu:24.04."""

    domain: str
    path: str
    tag: str
    digest: str = ""

    @property
    def api_host(self) -> str:
        """Where the registry's API answers (Docker Hub's is not docker.io itself)."""
        return DOCKER_HUB_API if self.domain == DOCKER_HUB else self.domain

    def __str__(self) -> str:
        name = self.path.removeprefix(f"{OFFICIAL_PREFIX}/") if self.domain == DOCKER_HUB else self.path
        name = name if self.domain == DOCKER_HUB else f"{self.domain}/{name}"
        return name + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def parse(reference: str) -> Reference:
    """Split `[domain/]path[:tag][@digest]`; the first component is a domain when it has a '.' or ':' or
    is `localhost` (Docker's rule); no tag means `latest`."""
    name, _, digest = reference.partition("@")
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        domain, remainder = first, rest
    else:
        domain, remainder = DOCKER_HUB, name
    path, colon, tag = remainder.rpartition(":")
    if not colon or "/" in tag:
        path, tag = remainder, ""
    if domain == DOCKER_HUB and "/" not in path:
        path = f"{OFFICIAL_PREFIX}/{path}"
    return Reference(domain, path, tag or ("" if digest else "latest"), digest)


def full_name(reference: str) -> str:
    """`ubuntu:24.04` -> `docker.io/library/ubuntu:24.04`: the name with its registry and full path."""
    ref = parse(reference)
    return f"{ref.domain}/{ref.path}" + (f":{ref.tag}" if ref.tag else "") + (f"@{ref.digest}" if ref.digest else "")


def is_loopback(host: str) -> bool:
    """Whether a registry host (`127.0.0.1:5000`, `localhost`, `[::1]:5000`) is this machine."""
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
    name = name.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def scheme(host: str) -> str:
    """http for loopback registries and those named in TORCHIMAGES_INSECURE_REGISTRIES, else https."""
    insecure = settings.words(INSECURE_VARIABLE)
    return "http" if is_loopback(host) or host in insecure else "https"


def manifest_url(ref: Reference, what: str | None = None) -> str:
    """The manifest endpoint of a reference (by `what`: a tag or a digest)."""
    return f"{scheme(ref.api_host)}://{ref.api_host}/v2/{ref.path}/manifests/{what or ref.digest or ref.tag}"


def _token(challenge: str, timeout: float) -> str:
    """An anonymous bearer token for a `WWW-Authenticate: Bearer realm=...,service=...,scope=...` challenge."""
    fields = dict(_CHALLENGE_FIELD.findall(challenge))
    realm = fields.pop("realm", "")
    if not challenge.lower().startswith("bearer") or not realm:
        raise RegistryError(f"the registry asks for credentials ({challenge or 'no challenge'})")
    url = realm + "?" + urllib.parse.urlencode(fields)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            body = json.load(answer)
    except (OSError, ValueError) as exc:
        raise RegistryError(f"no token from {realm}: {_why(exc)}") from None
    token = body.get("token") or body.get("access_token")
    if not token:
        raise RegistryError(f"no token from {realm}")
    return str(token)


def _why(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc) or type(exc).__name__


def _request(url: str, method: str, token: str | None, timeout: float) -> tuple[dict[str, str], bytes]:
    headers = {"Accept": ", ".join(MANIFEST_TYPES)}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, method=method, headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return dict(answer.headers.items()), answer.read() if method == "GET" else b""


def resolve_digest(reference: str, timeout: float = TIMEOUT_S) -> str:
    """The digest (`sha256:...`) the registry serves for a reference's tag: of the multi-platform index
    where there is one, as `docker pull NAME@DIGEST` takes it. RegistryError says why not."""
    ref = parse(reference)
    url = manifest_url(ref)
    token = None
    for method in ("HEAD", "GET"):
        for _ in range(2):
            try:
                headers, body = _request(url, method, token, timeout)
            except urllib.error.HTTPError as exc:
                if exc.code == 401 and token is None:
                    token = _token(exc.headers.get("WWW-Authenticate", ""), timeout)
                    continue
                if exc.code == 404:
                    raise RegistryError(f"{reference}: {ref.api_host} has no such manifest (HTTP 404)") from None
                raise RegistryError(f"{reference}: {ref.api_host} answered HTTP {exc.code} {exc.reason}") from None
            except (OSError, ValueError) as exc:
                raise RegistryError(f"{reference}: {ref.api_host} does not answer ({_why(exc)})") from None
            found = {k.lower(): v for k, v in headers.items()}.get("docker-content-digest", "")
            if DIGEST.match(found):
                return found
            if method == "GET" and body:
                return "sha256:" + hashlib.sha256(body).hexdigest()
            break
    raise RegistryError(f"{reference}: {ref.api_host} answered without a digest")
