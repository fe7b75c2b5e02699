"""`verify-signature`: whether an image in a registry carries a cosign signature that holds with a public key
(what `--sign-key` made); the digest verified. Exit 0 verified, 1 not verified (no signature, another key's,
no such image, no answer), 2 bad input (no key file, one that is no public key cosign can load: empty, not
text, no PEM block, a private key; a bad reference; no cosign)."""

from __future__ import annotations

import argparse

from torchimages import textfile, values
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

    key = textfile.read_bytes(args.key, "the --key file")  # none, a folder, a device: InputError, exit 2
    problem = signing.cosign_problem()
    if problem:
        raise UsageError(problem)
    unloadable = signing.public_key_problem(key)
    if unloadable:
        raise UsageError(f"--key {args.key}: {unloadable}")
    found = signing.verify(args.reference, args.key)
    if found.bad_input:  # cosign could not load the key (or take the reference): no verdict, bad input
        raise UsageError(found.message)
    print(shown(found.message))  # cosign's and the registry's words, one line
    return EXIT_OK if found.verified else EXIT_FAILED
