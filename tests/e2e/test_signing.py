"""`--sign-key` and `verify-signature` against a real registry on loopback (Debian's docker-registry) and the
real cosign (trixie's 2.5.0, which `make test` installs): a key pair made here (`cosign generate-key-pair`,
its password in COSIGN_PASSWORD), a tiny image (an empty root file system from `docker import`) pushed and
signed by its digest through signing.Signer, then verified by `build.py verify-signature`: with the right
public key it passes and prints the digest; with another key, and for an image nobody signed, it fails
(exit 1). No transparency log is asked: nothing outside this machine is reached."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from torchimages.security import signing

from .conftest import require, run_cli, start_registry

pytestmark = pytest.mark.e2e

PASSWORD = "e2e-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from start_registry(tmp_path_factory.mktemp("registry"))


def key_pair(folder: Path) -> tuple[Path, Path]:
    """A cosign key pair made in `folder` (its password PASSWORD): the private and the public key."""
    cosign = signing.find_cosign()
    if cosign is None:
        require(signing.HOW_TO_GET_COSIGN)
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "COSIGN_PASSWORD": PASSWORD}
    made = subprocess.run(
        [str(cosign), "generate-key-pair"], cwd=folder, env=env, capture_output=True, text=True, timeout=60
    )
    assert made.returncode == 0, made.stderr
    return folder / "cosign.key", folder / "cosign.pub"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return key_pair(tmp_path_factory.mktemp("keys"))


def empty_rootfs() -> bytes:
    """A tar of one file: the smallest image `docker import` makes."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        payload = uuid.uuid4().hex.encode()  # each image its own digest
        info = tarfile.TarInfo("marker")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    return data.getvalue()


def pushed(client: Any, registry: str) -> Iterator[tuple[str, str]]:
    """A tiny image pushed to the registry: its tag and `repository@digest`; removed from the engine after."""
    repository = f"{registry}/torchimages-e2e-{uuid.uuid4().hex[:8]}/signed"
    reference = f"{repository}:1"
    client.api.import_image_from_data(empty_rootfs(), repository=repository, tag="1")
    try:
        for line in client.images.push(repository, "1", stream=True, decode=True):
            assert "error" not in line, line
        digests = client.images.get(reference).attrs["RepoDigests"]
        (digest,) = [d for d in digests if d.startswith(repository + "@")]
        yield reference, digest
    finally:
        client.images.remove(reference, force=True)


@pytest.fixture
def image(docker_client: Any, registry: str) -> Iterator[tuple[str, str]]:
    yield from pushed(docker_client, registry)


def test_a_signed_digest_verifies_with_its_public_key_and_not_another(
    image: tuple[str, str], keys: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag, by_digest = image
    private, public = keys
    monkeypatch.setenv("COSIGN_PASSWORD", PASSWORD)
    assert signing.key_problem(private) is None
    assert signing.Signer(private, cosign=str(signing.find_cosign())).sign(by_digest) == []
    digest = by_digest.split("@", 1)[1]
    for reference in (tag, by_digest):  # a tag is verified as the digest it names now
        checked = run_cli("verify-signature", reference, "--key", public)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert checked.stdout.strip() == f"{reference}: verified with {public}: {digest}", checked.stdout
        assert PASSWORD not in checked.stdout + checked.stderr
    _, other = key_pair(tmp_path / "other")
    refused = run_cli("verify-signature", tag, "--key", other)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"{tag}: not verified: no matching signatures" in refused.stdout, refused.stdout


def test_an_unsigned_image_is_not_verified(image: tuple[str, str], keys: tuple[Path, Path]) -> None:
    tag, _ = image
    refused = run_cli("verify-signature", tag, "--key", keys[1])
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert refused.stdout.strip() == f"{tag}: not verified: no signatures found", refused.stdout


def test_a_wrong_password_is_refused_before_anything(keys: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COSIGN_PASSWORD", "not-" + PASSWORD)
    problem = signing.key_problem(keys[0])
    assert problem is not None and "cosign could not open it with $COSIGN_PASSWORD" in problem, problem
    assert PASSWORD not in problem
