"""The repository part of an image reference, and a registry mirror, as the matrix checks them: the rule each
breaks, or None. The grammar itself is torchimages.values' (one validator for every image reference).

A repository here carries no tag and no digest: the tags come from the matrix.
A registry mirror (`--base-registry`, `base_registry:`) is `HOST[:PORT][/PREFIX]`.
"""

from __future__ import annotations

from torchimages import values


def repository_problem(text: str) -> str | None:
    """Why `text` is not a valid repository name (the rule it breaks), or None when it is one."""
    try:
        values.repository(text)
    except values.BadValue as exc:
        return exc.reason
    return None


def mirror_problem(text: str) -> str | None:
    """Why `text` is not a `HOST[:PORT][/PREFIX]` mirror, or None when it is one."""
    try:
        values.registry(text)
    except values.BadValue as exc:
        return exc.reason
    return None
