"""The repository part of an image reference, checked against the OCI distribution grammar.

    name            := [domain '/'] path-component ['/' path-component]*
    domain          := domain-component ['.' domain-component]* [':' port-number]
    domain-component:= /([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])/
    path-component  := alpha-numeric [separator alpha-numeric]*
    alpha-numeric   := /[a-z0-9]+/
    separator       := /[_.]|__|[-]+/

As Docker does, the first component is a registry host when it has a '.' or ':' or is `localhost`.
A repository here carries no tag and no digest: the tags come from the matrix.
A registry mirror (`--base-registry`, `base_registry:`) is `domain ['/' path-component]*`.
"""

from __future__ import annotations

import re

MAX_LENGTH = 255
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_DOMAIN_COMPONENT = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?")
_PORT = re.compile(r"[0-9]{1,5}")
PATH_RULE = "lowercase letters and digits, separated by one '.', one '_', two '_' or any number of '-'"


def repository_problem(text: str) -> str | None:
    """Why `text` is not a valid repository name (the rule it breaks), or None when it is one."""
    if not text:
        return "the repository is empty"
    if any(not c.isprintable() or c.isspace() for c in text):
        return "a repository has no spaces or control characters"
    if not text.isascii():
        return "a repository is ASCII only: " + PATH_RULE
    if "@" in text:
        return "a repository has no digest (@sha256:...): name the repository alone"
    if len(text) > MAX_LENGTH:
        return f"a repository is at most {MAX_LENGTH} characters long"
    components = text.split("/")
    first = components[0]
    if len(components) > 1 and ("." in first or ":" in first or first == "localhost"):
        if problem := _domain_problem(first):
            return problem
        components = components[1:]
    if ":" in components[-1]:
        return "a repository has no tag (:TAG): the tags come from the matrix"
    for component in components:
        if not component:
            return "a repository has no empty path component ('//', or a '/' at an end)"
        if _PATH_COMPONENT.fullmatch(component):
            continue
        if _PATH_COMPONENT.fullmatch(component.lower()):
            return f"path component '{component}' has capital letters; repository paths are lowercase"
        return f"path component '{component}' must be " + PATH_RULE
    return None


def _domain_problem(domain: str) -> str | None:
    host, colon, port = domain.partition(":")
    if colon and not (_PORT.fullmatch(port) and 0 < int(port) < 65536):
        return f"registry '{domain}': the port must be a number from 1 to 65535"
    if not all(_DOMAIN_COMPONENT.fullmatch(part) for part in host.split(".")):
        return (
            f"registry host '{host}' must be names of letters, digits and inner '-', separated by one '.' (host[:port])"
        )
    return None


def mirror_problem(text: str) -> str | None:
    """Why `text` is not a `HOST[:PORT][/PREFIX]` mirror, or None when it is one."""
    if not text or any(c.isspace() or not c.isprintable() for c in text) or not text.isascii():
        return "name a registry as HOST[:PORT][/PREFIX], without spaces"
    if "://" in text:
        return "name the registry without a scheme (HOST[:PORT][/PREFIX], not https://...)"
    if "@" in text:
        return "a mirror has no digest: HOST[:PORT][/PREFIX]"
    host, _, prefix = text.partition("/")
    if not ("." in host or ":" in host or host == "localhost"):
        return f"'{host}' is not a registry host: it needs a '.' or a ':PORT' (or is localhost), as Docker reads names"
    if broken := _domain_problem(host):
        return broken
    for component in prefix.split("/") if prefix else ():
        if not _PATH_COMPONENT.fullmatch(component):
            return f"prefix component '{component}' must be lowercase letters and digits with '.', '_' or '-' inside"
    return None
