"""`verify-signature`: whether an image in a registry carries a cosign signature that holds with a public key
(what `--sign-key` made); the digest verified. Exit 0 verified, 1 not verified (no signature, another key's,
no such image, no answer), 2 bad input (no key file, a bad reference, no cosign)."""

from __future__ import annotations

import argparse

from torchimages import values
from torchimages.cli import common
from torchimages.cli import options as shared
from torchimages.cli.common import EXIT_FAILED, EXIT_OK, UsageError
from torchimages.problems import shown

NAME = "verify-signature"
HELP = "verify an image's cosign signature (made by --sign-key) with a public key; print the digest verified"


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "reference",
        type=shared.checked(values.reference),
        metavar="REF",
        help="the image in its registry: REGISTRY/REPOSITORY:TAG (the digest it names now is verified) or "
        "REGISTRY/REPOSITORY@sha256:...",
    )
    parser.add_argument(
        "--key",
        type=shared.path,
        required=True,
        metavar="PUB",
        help="the public key file (cosign.pub of `cosign generate-key-pair`); no transparency log is asked",
    )


def run(args: argparse.Namespace) -> int:
    from torchimages.security import signing

    common.check_file("--key", args.key)
    problem = signing.cosign_problem()
    if problem:
        raise UsageError(problem)
    found = signing.verify(args.reference, args.key)
    print(shown(found.message))  # cosign's and the registry's words, one line
    return EXIT_OK if found.verified else EXIT_FAILED
