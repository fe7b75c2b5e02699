"""Beyond one machine, for real: `build.py bake` writes the file, the real `docker buildx bake` (the buildx
plugin, the local engine's BuildKit through the `docker` driver) builds it to temporary references with
`--load --metadata-file`, and `build.py promote --from --push` verifies, smoke-tests, tags and pushes to a registry
on loopback; a metadata file
that points a target at another image gets nothing tagged. `docker buildx bake --print` accepts the bake
file of the whole default matrix.

Wheel sources: a bake serves nothing, so this machine's local wheel folders (TORCHIMAGES_* from
scripts/host-pip-sources) are served here for the bake's duration (torchimages.building.wheels.serve, as `build`
does) and handed to `build.py bake` as URLs. Not on loopback: buildx 0.13 (Debian's docker-buildx)
ignores a bake target's `network` (measured: RUN steps get the bridge), so they are served on the
engine's bridge gateway, which RUN steps on the default bridge network reach. That address is read from the
bridge itself (`bridge_address`): an engine started with another configuration (a `bip` in daemon.json, an
engine already running before this one's set-up) reports no IPAM `Gateway`.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import socket
import struct
import subprocess
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from torchimages import engine
from torchimages.building import bake, bootstrap, references
from torchimages.building.wheels import WheelSources, serve
from torchimages.combination import Image
from torchimages.planning import plan

from .conftest import imagetools, remove_repository, require, run_cli

pytestmark = pytest.mark.e2e
ENTRY = "{torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none, flavors: [runtime]}"
SOURCES = ("TORCHIMAGES_INDEX_URL", "TORCHIMAGES_EXTRA_INDEX_URLS", "TORCHIMAGES_FIND_LINKS")


def without_local_sources() -> dict[str, str]:
    """This environment less the wheel sources (bake takes URLs, given on its command line)."""
    return {k: v for k, v in os.environ.items() if k not in SOURCES}


def forget(client: Any, reference: str) -> None:
    """Remove a name this test gave (its image stays while another name holds it)."""
    with contextlib.suppress(Exception):
        client.images.remove(reference)


SIOCGIFADDR = 0x8915  # Linux: an interface's IPv4 address


def interface_address(name: str) -> str | None:
    """The IPv4 address of the network interface `name` on this machine, or None (no such interface)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            answer = fcntl.ioctl(probe.fileno(), SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(answer[20:24])


def bridge_address(client: Any) -> str:
    """The address of the engine's default bridge on this machine, which containers on it reach as their
    gateway: the IPAM `Gateway` where the engine reports one, else the address of the bridge's interface
    (`com.docker.network.bridge.name`, docker0). An engine configured otherwise (a `bip`, or started before
    this machine's set-up) reports the subnet alone: reading `Gateway` there was a KeyError."""
    network = client.networks.get("bridge").attrs
    for config in (network.get("IPAM") or {}).get("Config") or []:
        if config.get("Gateway"):
            return str(ipaddress.ip_interface(config["Gateway"]).ip)  # some engines add the prefix length
    name = (network.get("Options") or {}).get("com.docker.network.bridge.name", "docker0")
    address = interface_address(name)
    if address is None:
        pytest.fail(f"the engine's default bridge reports no gateway and {name} has no IPv4 address here: {network}")
    return address


@pytest.fixture(scope="module")
def buildx() -> str:
    try:
        return engine.find_buildx()
    except engine.EngineError as exc:
        require(str(exc))
        raise


def write_matrix(folder: Path, repository: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    matrix = folder / "matrix.yaml"
    matrix.write_text(textwrap.dedent(f"repository: {repository}\nmatrix:\n  include:\n    - {ENTRY}\n"))
    assert run_cli("render", "--matrix", matrix).returncode == 0
    return matrix


@dataclass(frozen=True)
class Baked:
    """A one-image matrix baked for real and promoted."""

    plan: plan.Plan
    folder: Path
    bake_file: Path
    metadata: Path
    bake_output: str
    promote: subprocess.CompletedProcess[str]

    @property
    def image(self) -> Image:
        (combination,) = self.plan.combinations
        return combination.image("runtime")

    @property
    def reference(self) -> str:
        (combination,) = self.plan.combinations
        return bake.bake_reference(combination, self.image)


@pytest.fixture(scope="module")
def baked(
    docker_client: Any,
    buildx: str,
    tmp_path_factory: pytest.TempPathFactory,
    ca_bundle: tuple[Path, bytes],
    session_registry: str,
) -> Iterator[Baked]:
    tmp = tmp_path_factory.mktemp("bake")
    repository = f"{session_registry}/torchimages-e2e-{uuid.uuid4().hex[:8]}/pytorch"
    matrix = write_matrix(tmp, repository)
    loaded = plan.load(matrix)
    (combination,) = loaded.combinations
    reference = bake.bake_reference(combination, combination.image("runtime"))
    bake_file, metadata = tmp / "bake.json", tmp / "metadata.json"
    try:
        print(bootstrap.ensure(engine.DockerEngine(), combination.os, None, tmp / "bootstrap.log"))
        gateway = bridge_address(docker_client)
        with serve(WheelSources.from_environment(), host=gateway) as served:
            urls = [("--index-url", served.index_url)] if served.index_url else []
            urls += [("--extra-index-url", u) for u in served.extra_index_urls]
            urls += [("--find-links", u) for u in served.find_links]
            urls += [("--trusted-host", gateway)]  # plain http beyond loopback: pip wants it named
            written = run_cli(
                "bake", "--matrix", matrix, "--output", bake_file, "--secrets-dir", tmp / "secrets",
                "--ca-cert", ca_bundle[0], *(x for pair in urls for x in pair),
                env=without_local_sources(),
            )  # fmt: skip
            assert written.returncode == 0, written.stderr
            baking = subprocess.run(
                [buildx, "buildx", "bake", "--load", "--metadata-file", str(metadata), "-f", str(bake_file)],
                capture_output=True, text=True, check=False, cwd=tmp,
            )  # fmt: skip
        assert baking.returncode == 0, baking.stdout + baking.stderr[-4000:]
        promoted = run_cli("promote", "--matrix", matrix, "--from", metadata, "--log-dir", tmp / "logs", "--push")
        yield Baked(loaded, tmp, bake_file, metadata, baking.stdout + baking.stderr, promoted)
    finally:
        remove_repository(docker_client, repository)
        forget(docker_client, reference)


def test_the_bake_file_builds_temporary_references_only(baked: Baked) -> None:
    definition = json.loads(baked.bake_file.read_text())
    (target,) = definition["target"].values()
    assert target["tags"] == [baked.reference] and references.is_temporary(baked.reference)
    assert f"naming to docker.io/{baked.reference}" in baked.bake_output
    assert baked.image.reference not in baked.bake_output, "the bake must never name the public tag"


def test_promote_verifies_then_tags_with_the_verified_labels(baked: Baked, docker_client: Any) -> None:
    output = baked.promote.stdout + baked.promote.stderr
    assert baked.promote.returncode == 0, output
    assert "1 promoted, 0 failed" in output
    for name in baked.image.names:
        labels = docker_client.images.get(f"{baked.image.repository}:{name}").labels
        assert labels.items() >= baked.image.label_map().items(), labels
    record = (baked.folder / "logs" / f"{baked.image.tag}.installed.txt").read_text()
    assert "\ntorch==2.13.0+cpu\n" in record, "promote records what the image holds, as build does"


def test_the_promoted_image_carries_the_attestations_the_bake_attached(baked: Baked) -> None:
    """Issue 46: `bake` asked this engine (the containerd image store) and wrote `attest` into the target: the
    baked image's index holds an SPDX SBOM and SLSA provenance about its manifest, promote read them before the
    tag, and the promoted tag names that index still."""
    (target,) = json.loads(baked.bake_file.read_text())["target"].values()
    (sbom, provenance) = target["attest"]
    assert sbom.startswith("type=sbom,generator=torchimages.invalid/sbom-generator:"), sbom
    assert provenance == "type=provenance,mode=max"
    attested = engine.DockerEngine().attestations(baked.image.reference, "linux/amd64")
    assert "https://spdx.dev/Document" in attested.predicates
    assert "https://slsa.dev/provenance/v0.2" in attested.predicates
    assert attested.problems() == []


def test_the_promoted_copy_in_the_registry_carries_both(baked: Baked) -> None:
    """Issue 46: `promote --push` sent the promoted tag with its index: the registry's copy, read with buildx's
    imagetools, holds provenance naming the input digest and the matrix entry, and an SBOM listing torch."""
    assert baked.promote.returncode == 0, baked.promote.stdout + baked.promote.stderr
    reference = f"{baked.image.repository}:{baked.image.tag}"
    args = imagetools(reference, "Provenance")["SLSA"]["invocation"]["parameters"]["args"]
    assert args["label:io.torchimages.input-digest"] == baked.image.input_digest
    assert args["label:io.torchimages.matrix-entry"] == "2.13.0-cpu-py3.11-debian12"
    packages = {(p.get("name"), p.get("versionInfo")) for p in imagetools(reference, "SBOM")["SPDX"]["packages"]}
    assert ("torch", "2.13.0+cpu") in packages


def test_no_temporary_reference_is_left(baked: Baked, docker_client: Any) -> None:
    assert baked.promote.returncode == 0
    left = [t for i in docker_client.images.list(name=references.TEMP_REPOSITORY + "/*") for t in i.tags]
    assert baked.reference not in left and f"docker.io/{baked.reference}" not in left, left


def test_the_metadata_is_what_the_bake_wrote(baked: Baked) -> None:
    metadata = json.loads(baked.metadata.read_text())
    entry = metadata[bake.target_name(baked.image)]
    assert any(entry.get(k, "").startswith("sha256:") for k in bake.DIGEST_KEYS), entry


@pytest.mark.parametrize("lie", ["another image", "another digest"])
def test_a_metadata_file_that_points_at_another_image_gets_nothing_tagged(
    baked: Baked, docker_client: Any, tmp_path: Path, lie: str
) -> None:
    """The target's name points at the bootstrapped base (no torch in it), or the temporary reference holds
    another image than the digest the bake reported: verification or the digest check fails it, exit 1."""
    assert baked.promote.returncode == 0
    repository = f"torchimages-e2e-{uuid.uuid4().hex[:8]}/pytorch"
    matrix = write_matrix(tmp_path, repository)
    (combination,) = plan.load(matrix).combinations
    image = combination.image("runtime")
    base = docker_client.images.get(combination.os.image)
    if lie == "another image":
        reference = f"{references.TEMP_REPOSITORY}/lie-{uuid.uuid4().hex[:8]}:runtime"
        entry = {"image.name": reference, "containerimage.digest": base.id}
    else:
        reference = bake.bake_reference(combination, image)
        entry = {"containerimage.digest": "sha256:" + "0" * 64}
    repo, tag = reference.rsplit(":", 1)
    base.tag(repo, tag)
    metadata = tmp_path / "metadata.json"
    metadata.write_text(json.dumps({bake.target_name(image): entry}))
    try:
        result = run_cli("promote", "--matrix", matrix, "--from", metadata, "--log-dir", tmp_path / "logs")
        output = result.stdout + result.stderr
        assert result.returncode == 1, output
        assert "0 promoted, 1 failed" in output
        why = "could not read the versions" if lie == "another image" else "is not the image its builder reported"
        assert why in output, output
        assert docker_client.images.list(name=repository) == [], "a lie got a tag"
        left = [t for i in docker_client.images.list(name=references.TEMP_REPOSITORY + "/*") for t in i.tags]
        assert not any(reference in t for t in left), left
        assert combination.os.image in docker_client.images.get(base.id).tags, "the base must be untouched"
    finally:
        remove_repository(docker_client, repository)
        forget(docker_client, reference)


def test_buildx_accepts_the_bake_file_of_the_whole_default_matrix(buildx: str, tmp_path: Path) -> None:
    bake_file = tmp_path / "bake.json"
    written = run_cli(
        "bake", "--output", bake_file, "--secrets-dir", tmp_path / "secrets",
        "--cache-from", "type=registry,ref=registry.example/cache:{target}", "--cache-to", "type=inline",
        env=without_local_sources(),
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    listed = run_cli("list", env=without_local_sources())
    elsewhere = tmp_path / "elsewhere"  # buildx reads the file's paths from where it runs: they must be absolute
    elsewhere.mkdir()
    printed = subprocess.run(
        [buildx, "buildx", "bake", "--print", "-f", str(bake_file)],
        capture_output=True,
        text=True,
        check=False,
        cwd=elsewhere,
    )
    assert printed.returncode == 0, printed.stderr[-3000:]
    definition = json.loads(printed.stdout)
    assert len(definition["target"]) == len(listed.stdout.split()) > 50
    assert all(references.is_temporary(t) for target in definition["target"].values() for t in target["tags"])
    assert set(definition["group"]["default"]["targets"]) == set(definition["target"])
