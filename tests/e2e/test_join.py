"""`join` against a real registry (Debian's docker-registry) on loopback, with no build: each platform's image is a
one-file image (`docker import`) carrying the plan's input digest and platform labels, pushed under its own tag,
the arm64 one as an index (the way BuildKit pushes an image with its attestation). The index is written under a
temporary tag, read back and checked, and only then under the public tag and its alias: each names exactly the
two image manifests, never the arm64 tag's index. A later join refused once its index was written (the arm64 tag
now names a linux/amd64 image with arm64's labels) leaves the public tag and alias naming the old index."""

from __future__ import annotations

import json
import subprocess
import tarfile
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from torchimages import settings
from torchimages.building import staging
from torchimages.combination import INPUT_DIGEST_LABEL, PLATFORM_LABEL, Image
from torchimages.planning import plan

from .conftest import remove_repository, run_cli, start_registry

pytestmark = pytest.mark.e2e
ENTRY = (
    "{torch: 2.9.1, cuda: cpu, os: debian12, torchvision: none, torchaudio: none, flavors: [runtime], "
    "platforms: [linux/amd64, linux/arm64]}"
)
ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from start_registry(tmp_path_factory.mktemp("registry"))


def docker(*args: str) -> subprocess.CompletedProcess[str]:
    command = [settings.text("DOCKER") or "docker", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)


def served(registry: str, repository: str, reference: str) -> tuple[str, dict[str, Any]]:
    """What the registry serves under a tag or digest: its digest and its content."""
    path = repository.removeprefix(registry + "/")
    url = f"http://{registry}/v2/{path}/manifests/{reference}"
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": ACCEPT}), timeout=10) as answer:
        return str(answer.headers["Docker-Content-Digest"]), dict(json.load(answer))


def tags(registry: str, repository: str) -> list[str]:
    path = repository.removeprefix(registry + "/")
    with urllib.request.urlopen(f"http://{registry}/v2/{path}/tags/list", timeout=10) as answer:
        return list(json.load(answer)["tags"])


def push_own(image: Image, tmp: Path, as_index: bool = False, platform: str = "") -> str:
    """A one-file image with `image`'s labels, of its platform (or `platform`), pushed under its own tag
    (`as_index`: then that tag re-pointed to an index of it); its image manifest's digest."""
    platform = platform or image.platform
    input_digest = image.input_digest
    tar = tmp / f"{uuid.uuid4().hex}.tar"
    (tmp / "file").write_text(platform)
    with tarfile.open(tar, "w") as archive:
        archive.add(tmp / "file", arcname="file")
    labels = [f"LABEL {INPUT_DIGEST_LABEL}={input_digest}", f"LABEL {PLATFORM_LABEL}={image.platform}"]
    changes = [arg for label in labels for arg in ("--change", label)]
    imported = docker("import", "--platform", platform, *changes, str(tar), image.platform_reference)
    assert imported.returncode == 0, imported.stderr
    pushed = docker("push", "--quiet", image.platform_reference)
    assert pushed.returncode == 0, pushed.stderr
    digest = docker("image", "inspect", "--format", "{{index .RepoDigests 0}}", image.platform_reference)
    own = digest.stdout.strip().rsplit("@", 1)[1]
    if as_index:
        wrapped = docker(
            "buildx", "imagetools", "create", "--tag", image.platform_reference, f"{image.repository}@{own}"
        )
        assert wrapped.returncode == 0, wrapped.stderr
    return own


def test_join_stages_checks_then_moves_and_a_refused_join_leaves_the_old_index(
    registry: str, tmp_path: Path, docker_client: Any
) -> None:
    repository = f"{registry}/torchimages-e2e-{uuid.uuid4().hex[:8]}/pytorch"
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(f"repository: {repository}\nmatrix:\n  include:\n    - {ENTRY}\n")
    (selected,) = plan.select(plan.load(matrix), [])
    amd64, arm64 = selected.images
    try:
        wanted = {
            "amd64": push_own(amd64, tmp_path),
            "arm64": push_own(arm64, tmp_path, as_index=True),
        }
        pushed_as, document = served(registry, repository, arm64.platform_tag)
        assert "manifests" in document and pushed_as != wanted["arm64"]  # the arm64 tag names an index

        joined = run_cli("join", "--matrix", matrix, amd64.tag)
        assert joined.returncode == 0, joined.stdout + joined.stderr
        (staged,) = [t for t in tags(registry, repository) if t.startswith(staging.PREFIX)]
        assert f"{repository}:{staged}: the temporary tag is left in the registry" in joined.stdout
        old, index = served(registry, repository, staged)
        assert {m["platform"]["architecture"]: m["digest"] for m in index["manifests"]} == wanted
        assert [served(registry, repository, name)[0] for name in amd64.names] == [old] * 2

        # The arm64 tag now names an image of linux/amd64 that carries arm64's labels: only the index, read back,
        # tells (it names linux/amd64 twice), once written under its temporary tag.
        push_own(arm64, tmp_path, platform="linux/amd64")
        refused = run_cli("join", "--matrix", matrix, amd64.tag)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "; wanted linux/amd64 sha256:" in refused.stdout and "left as they were" in refused.stdout
        assert [served(registry, repository, name)[0] for name in amd64.names] == [old] * 2
    finally:
        remove_repository(docker_client, repository)
        for left in docker_client.images.list(name=repository):  # an image replaced under its tag, pulled by digest
            if all(r.startswith(repository + "@") for r in left.attrs.get("RepoDigests") or ()) and not left.tags:
                docker_client.images.remove(left.id)
