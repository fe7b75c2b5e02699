"""End-to-end fixtures: a real Docker engine, real builds from a test matrix, full cleanup.

Without an engine the tests skip with the reason; with REQUIRE_DOCKER=1 (CI) they fail instead.
Wheel sources and the CA bundle come from the TORCHIMAGES_* environment (see README).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import textwrap
import time
import urllib.request
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from docker import errors as docker_errors

from torchimages import compat, engine, settings
from torchimages.building import bootstrap, builder, references
from torchimages.building.outcome import Outcome
from torchimages.building.requests import BuildOptions
from torchimages.building.wheels import WheelSources
from torchimages.combination import Combination, Image
from torchimages.planning import plan
from torchimages.security.layers import Prefixed

ROOT = Path(__file__).resolve().parents[2]


def require(reason: str) -> None:
    """Skip with the reason; with REQUIRE_DOCKER=1 (CI), fail instead."""
    if os.environ.get("REQUIRE_DOCKER") == "1":
        pytest.fail(f"REQUIRE_DOCKER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_client() -> Any:
    try:
        return engine.DockerEngine().sdk
    except engine.EngineError as exc:
        require(f"no Docker engine: {exc}")


@dataclass(frozen=True)
class Built:
    """A test matrix built for real: its plan, the build's output and status."""

    plan: plan.Plan
    status: int
    output: str
    logs: Path
    ids: Mapping[str, str] = dataclasses.field(default_factory=dict)  # flavor -> image id, right after the build

    @property
    def combination(self) -> Combination:
        (combination,) = self.plan.combinations
        return combination

    def image(self, flavor: str) -> Image:
        return self.combination.image(flavor)


def run_cli(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """build.py as a user runs it (in this environment, or `env`)."""
    command = [sys.executable, str(ROOT / "build.py"), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT, env=env)


def sh(client: Any, image: str, script: str, **kwargs: Any) -> str:
    """Run a shell script in a throwaway container of the image (no network); its output."""
    output = client.containers.run(image, ["sh", "-c", script], remove=True, network_disabled=True, **kwargs)
    return str(output.decode())


def report_dir(built: Built) -> Path:
    """Where a build made with `--report` (build_matrix's `extra`) wrote its report."""
    return built.logs.parent / "report"


def outcome(case: ElementTree.Element) -> str:
    """A JUnit test case's result: passed, failure, error or skipped."""
    return next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")


def assert_suites_passed_without_a_gpu(built: Built) -> None:
    """The build's smoke gate with `--test gpu` (every suite) on both flavors, read from its report's merged
    JUnit: nothing failed, the cpu checks passed, the GPU tests skipped saying why (no usable GPU).

    The suites come from the installed package (torchimages.smoke.suites, rootdir the package), never
    from a folder of this repository.
    """
    assert built.status == 0, built.output[-4000:]
    root = ElementTree.parse(report_dir(built) / "junit.xml").getroot()
    suites = {suite.get("name", ""): suite for suite in root.iter("testsuite")}
    for flavor in ("devel", "runtime"):
        suite = suites.get(built.image(flavor).tag)
        assert suite is not None, (built.image(flavor).tag, sorted(suites))
        cases = [c for c in suite.iter("testcase") if c.get("classname", "").startswith("suites.")]
        assert not [c.get("name") for c in cases if outcome(c) in ("failure", "error")], flavor
        passed = {c.get("classname", "") for c in cases if outcome(c) == "passed"}
        assert sum(outcome(c) == "passed" for c in cases) >= 10 and "suites.test_cpu_versions" in passed, passed
        gpu = [c for c in cases if c.get("classname", "").startswith("suites.test_gpu")]
        assert gpu and all(outcome(c) == "skipped" for c in gpu), [(c.get("name"), outcome(c)) for c in gpu]
        reasons = [skip.get("message", "") for c in gpu if (skip := c.find("skipped")) is not None]
        assert any(r.startswith("no usable GPU") for r in reasons), reasons
        properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert properties.get("gpu") == "none visible", properties


@dataclass(frozen=True)
class Saved:
    """What `docker save` wrote of some images, each file read as its content (a gzip layer uncompressed): the
    sha256 of each file's content (a layer's is its diff_id), and the needles found."""

    digests: frozenset[str]
    found: tuple[bytes, ...]


def search_saved(references: Sequence[str], needles: Sequence[bytes]) -> Saved:
    """Search every file `docker save` writes of the images (layers, configuration, manifests) for the needles,
    each layer read uncompressed: the containerd store saves its layers as the gzip blobs it stores, in whose
    bytes no needle would ever show; the classic store saves uncompressed tars. A zstd layer fails the test.
    The caller checks that every layer was read whole (`layers_read`: each diff_id among the digests). A needle
    inside a file a layer holds compressed (a .gz, a wheel) is not looked for."""
    command = [settings.text("DOCKER") or "docker", "save", *references]
    found: set[bytes] = set()
    digests: set[str] = set()
    longest = max(map(len, needles))
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as saving:
        assert saving.stdout is not None and saving.stderr is not None
        with tarfile.open(fileobj=saving.stdout, mode="r|") as archive:
            for member in archive:
                stream = archive.extractfile(member) if member.isfile() else None
                if stream is None:
                    continue
                head = stream.read(4)
                assert head != b"\x28\xb5\x2f\xfd", f"{member.name}: a zstd layer, which this search cannot read"
                source: Any = Prefixed(head, stream)
                if head[:2] == b"\x1f\x8b":
                    source = gzip.GzipFile(fileobj=source)
                tail, hashed = b"", hashlib.sha256()
                while chunk := source.read(8 * 1024 * 1024):
                    found.update(n for n in needles if n in tail + chunk)
                    tail = chunk[-longest:]
                    hashed.update(chunk)
                digests.add("sha256:" + hashed.hexdigest())
        error = saving.stderr.read().decode(errors="replace")
    assert saving.wait() == 0, f"docker save: {saving.returncode}: {error}"
    return Saved(frozenset(digests), tuple(n for n in needles if n in found))


def layers_read(client: Any, references: Sequence[str], saved: Saved) -> None:
    """Every layer of the images (inspect's diff_ids) was read whole and uncompressed by `search_saved`."""
    diff_ids = {d for r in references for d in client.images.get(r).attrs["RootFS"]["Layers"]}
    assert diff_ids and diff_ids <= saved.digests, sorted(diff_ids - saved.digests)


# find's test for a file whose group lacks a permission its owner has.
GROUP_LACKS = r"\( \( -perm -u=r ! -perm -g=r \) -o \( -perm -u=w ! -perm -g=w \) -o \( -perm -u=x ! -perm -g=x \) \)"
PACKAGE_STATE = "/var/cache/apt /var/lib/apt/lists /root/.cache /home/torch/.cache"
OS_PACKAGES = "/usr/share/torchimages/os-packages.txt"


# NCCL's RDMA userspace as each OS names its packages (noble: librdmacm1t64, the 64-bit time_t transition).
RDMA_PACKAGES = {
    "debian12": ("libibverbs1", "ibverbs-providers", "librdmacm1"),
    "ubuntu22.04": ("libibverbs1", "ibverbs-providers", "librdmacm1"),
    "ubuntu24.04": ("libibverbs1", "ibverbs-providers", "librdmacm1t64"),
}


def assert_images_are_training_bases(built: Built, client: Any) -> None:
    """What issue 9 asks of both flavors: a compiler in runtime (no nvcc), no package-manager state
    in any layer, one venv owned by uid 1000 and group 0 (group-writable), runtime's layers a prefix of devel's,
    the OS package list."""
    runtime, devel = (built.image(f).reference for f in ("runtime", "devel"))
    for image in (runtime, devel):
        leftovers = sh(client, image, f"find {PACKAGE_STATE} -type f 2>/dev/null; true", user="root")
        assert leftovers == "", f"{image}: package-manager files left: {leftovers}"
        owners = sh(client, image, "stat -c %u:%g /opt/venv; find /opt/venv ! -uid 1000 | head -3", user="root")
        assert owners.split() == ["1000:0"], owners
        # Any uid of group 0 writes what the image user writes: the group has the owner's permissions.
        shut = sh(client, image, f"find /opt/venv /home/torch ! -type l {GROUP_LACKS} -print | head -3", user="root")
        assert shut == "", f"{image}: not group-writable like their owner: {shut}"
        listed = sh(client, image, f"cat {OS_PACKAGES}").splitlines()
        assert any(line.startswith("gcc=") for line in listed) and any(line.startswith("g++=") for line in listed)
        for package in RDMA_PACKAGES[built.plan.combinations[0].os.name]:  # NCCL's RDMA userspace (issue 21)
            assert any(line.startswith(f"{package}=") for line in listed), (image, package)
    assert sh(client, runtime, "for c in gcc g++ nvcc; do command -v $c; done; true").split() == [
        "/usr/bin/gcc",
        "/usr/bin/g++",
    ]
    layers = {image: client.images.get(image).attrs["RootFS"]["Layers"] for image in (runtime, devel)}
    assert layers[devel][: len(layers[runtime])] == layers[runtime], "runtime's layers are not a prefix of devel's"


def assert_torch_compile_works_on_cpu(built: Built, client: Any) -> None:
    """Inductor compiles C++ for the CPU at run time: runtime needs gcc/g++ and the Python headers."""
    script = (
        "import torch; f = torch.compile(lambda x: torch.sin(x) * 2 + x); x = torch.randn(64); "
        "assert torch.allclose(f(x), torch.sin(x) * 2 + x); print('COMPILED')"
    )
    output = sh(client, built.image("runtime").reference, f'python -c "{script}" 2>&1')
    assert "COMPILED" in output, output


def remove_repository(client: Any, repository: str) -> None:
    """Remove this repository's tags, only those: an identical build (the same image) may carry another
    test's tags too."""
    for image in client.images.list(name=repository):
        for tag in image.tags:
            if tag.rsplit(":", 1)[0] == repository:
                client.images.remove(tag)


def own_temporary(logs: Path) -> set[str]:
    """The temporary references this run's builds were given (each build log starts with its build command).
    Not every `torchimages-tmp/<combination>:*`: on a shared engine another run (CI, a colleague's `make test`)
    may be building the same combination, and its temporary images and smoke containers are not ours."""
    commands = [log.read_text(errors="replace").split("\n", 1)[0] for log in logs.glob("*.log")]
    return {tag for command in commands for tag in re.findall(r"--tag (\S+)", command) if references.is_temporary(tag)}


def temporary_images(client: Any) -> set[str]:
    return {
        t.removeprefix("docker.io/") for i in client.images.list(name=references.TEMP_REPOSITORY + "/*") for t in i.tags
    }


def build_a_lie(built: Built, tag: str, **facts: Any) -> Outcome:
    """Build the runtime image again under a tag whose promised facts differ from the truth."""
    true_image = built.image("runtime")
    lie = dataclasses.replace(
        built.combination, **facts, images=(dataclasses.replace(true_image, tag=tag, aliases=()),)
    )
    options = BuildOptions(
        images_dir=built.plan.images_dir, log_dir=built.logs, sources=WheelSources.from_environment()
    )
    (outcome,) = builder.Builder(engine.DockerEngine(), options, out=lambda _: None).build(
        [plan.Selected(lie, lie.images)]
    )
    return outcome


def need_free_disk(client: Any, gigabytes: float, what: str) -> None:
    """Fail (skip without REQUIRE_DOCKER) at once, saying so, where the engine's data root has less free space
    than `what` needs: a full disk otherwise shows as a dozen unrelated-looking failures later."""
    root = client.info().get("DockerRootDir", "/var/lib/docker")
    free = shutil.disk_usage(root).free / 1e9 if os.path.isdir(root) else None
    if free is not None and free < gigabytes:
        require(f"{root} has {free:.1f} GB free; {what} needs about {gigabytes:.0f} GB")


UBUNTU_ARCHIVE = "http://archive.ubuntu.com/ubuntu/dists/noble/InRelease"  # the knowledge base's amd64 archive


def need_ubuntu_archive(timeout_s: float = 15.0) -> None:
    """Fail (skip without REQUIRE_DOCKER) at once where Ubuntu's archive does not answer: Ubuntu bases are
    bootstrapped from it (`bases: bootstrap`), as no registry answers here."""
    import urllib.request

    try:
        with urllib.request.urlopen(UBUNTU_ARCHIVE, timeout=timeout_s) as answer:
            answer.read(1)
    except OSError as exc:
        require(f"Ubuntu's archive does not answer ({UBUNTU_ARCHIVE}: {exc}); Ubuntu bases cannot be bootstrapped")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_registry(root: Path, read_only: bool = False) -> Iterator[str]:
    """Debian's docker-registry on a free loopback port, storing under `root`; its address."""
    binary = shutil.which("docker-registry")
    if binary is None:
        require("Debian's docker-registry is not installed (make test installs it)")
    address = f"127.0.0.1:{free_port()}"
    root.mkdir(parents=True, exist_ok=True)
    config = root / "config.yml"
    maintenance = "  maintenance:\n    readonly:\n      enabled: true\n" if read_only else ""
    storage = f"storage:\n  filesystem:\n    rootdirectory: {root}/data\n{maintenance}"
    config.write_text(f"version: 0.1\n{storage}http:\n  addr: {address}\n")
    server = subprocess.Popen([str(binary), "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            try:
                urllib.request.urlopen(f"http://{address}/v2/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        yield address
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(scope="session")
def ca_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """The CA bundle builds get (the host's, from TORCHIMAGES_CA_CERT, or certifi's) plus a unique marker."""
    source = os.environ.get("TORCHIMAGES_CA_CERT")
    if source is None:
        import certifi

        source = certifi.where()
    marker = f"# torchimages-e2e-marker-{uuid.uuid4().hex}".encode()
    path = tmp_path_factory.mktemp("ca") / "bundle.pem"
    path.write_bytes(Path(source).read_bytes() + b"\n" + marker + b"\n")
    return path, marker


def build_matrix(
    client: Any,
    tmp: Path,
    entry: str,
    ca_bundle: tuple[Path, bytes],
    registry: str | None = None,
    extra: tuple[str | Path, ...] = (),
    env: dict[str, str] | None = None,
) -> Iterator[Built]:
    """Render and build a one-combination matrix (in this environment, or `env`); remove everything it made
    afterwards."""
    repository = f"torchimages-e2e-{uuid.uuid4().hex[:8]}/pytorch"
    if registry:
        repository = f"{registry}/{repository}"
    matrix = tmp / "matrix.yaml"
    matrix.write_text(textwrap.dedent(f"repository: {repository}\nmatrix:\n  include:\n    - {entry}\n"))
    try:
        render = run_cli("render", "--matrix", matrix)
        assert render.returncode == 0, render.stderr
        options: tuple[str | Path, ...] = ("--log-dir", tmp / "logs", "--ca-cert", ca_bundle[0], *extra)
        result = run_cli("build", "--matrix", matrix, *options, "*", env=env)
        output = result.stdout + result.stderr
        planned = plan.load(matrix)
        ids = {}
        for _, image in planned.images():
            with contextlib.suppress(docker_errors.ImageNotFound):  # not built: status and output say why
                ids[image.flavor] = client.images.get(image.reference).id
        yield Built(planned, result.returncode, output, tmp / "logs", ids)
    finally:
        remove_repository(client, repository)


# The release gate's layer scan (about 15 s of a CPU image: `docker save` read whole) left out where a test's
# subject is not the gate; test_build_cpu, test_build_cuda, test_arm64, test_bake, test_report, test_progress and
# test_release_gate run every check, and the report says when one is skipped.
NO_LAYER_SCAN = ("--skip-check", "secrets")
CPU = "{torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}"
OTHER_CPU = "{torch: 2.12.1, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}"


@dataclass(frozen=True)
class Matrix:
    """A rendered test matrix under its own repository."""

    path: Path
    repository: str
    logs: Path

    @property
    def plan(self) -> plan.Plan:
        return plan.load(self.path)

    def build_args(self, ca_bundle: tuple[Path, bytes], *extra: str, logs: Path | None = None) -> list[str | Path]:
        logs = logs or self.logs
        return ["build", "--matrix", self.path, "--log-dir", logs, "--ca-cert", ca_bundle[0], *extra, "*"]


@pytest.fixture
def matrix(request: pytest.FixtureRequest, docker_client: Any, tmp_path: Path) -> Iterator[Matrix]:
    """A rendered matrix of the entries given by indirect parametrization (default: the CPU one);
    its repository is removed afterwards."""
    entries = getattr(request, "param", (CPU,))
    repository = f"torchimages-e2e-{uuid.uuid4().hex[:8]}/pytorch"
    path = tmp_path / "matrix.yaml"
    rows = "".join(f"    - {entry}\n" for entry in entries)
    path.write_text(textwrap.dedent(f"repository: {repository}\nmatrix:\n  include:\n") + rows)
    rendered = run_cli("render", "--matrix", path)
    assert rendered.returncode == 0, rendered.stderr
    try:
        yield Matrix(path, repository, tmp_path / "logs")
    finally:
        remove_repository(docker_client, repository)


# What uv says when `fail_install` made its combination fail: its error, then its cause on the next line;
# the summary gives them as one reason.
INSTALL_ERROR = "error: No solution found when resolving dependencies"
INSTALL_CAUSE = (
    "Because there is no version of numpy==0.0.1 and you require numpy==0.0.1, "
    "we can conclude that your requirements are unsatisfiable."
)
INSTALL_FAILURE = f"{INSTALL_ERROR}: {INSTALL_CAUSE}"


def fail_install(m: Matrix, torch: str) -> Combination:
    """Make the rendered Dockerfile of the matrix's combination of this torch ask uv for numpy==0.0.1 before
    torch: its builds fail at that step with INSTALL_FAILURE. The combination."""
    failing = next(c for c in m.plan.combinations if c.torch == torch)
    dockerfile = m.plan.images_dir / failing.folder / "Dockerfile"
    install = "    bash /mnt/venv.sh install --no-deps "
    text = dockerfile.read_text()
    assert install in text
    numpy = '    bash /mnt/venv.sh install "numpy==0.0.1" && bash /mnt/venv.sh install --no-deps '
    dockerfile.write_text(text.replace(install, numpy, 1))
    return failing


# --- what the whole run shares: build once, assert many times ---------------------------------------------------


@pytest.fixture(scope="session")
def debian_base(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The bootstrapped debian12 base (the distribution mirror builds default to), made here unless a build
    made it first; tests that start from it (not from a build) ask for it. Under the bootstrap's lock: a
    build on another worker that needs it at the same time waits for this one, or this one for it."""
    debian = compat.load().os["debian12"]
    log = tmp_path_factory.mktemp("debian-base") / "bootstrap.log"
    try:
        bootstrap.ensure(engine.DockerEngine(), debian, None, log)
    except engine.EngineError as exc:
        pytest.fail(f"cannot bootstrap {debian.image}: {exc}")
    return debian.image


@pytest.fixture(scope="session")
def session_registry_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the run's registry stores (docker-registry's filesystem layout under data/)."""
    return tmp_path_factory.mktemp("session-registry")


@pytest.fixture(scope="session")
def session_registry(session_registry_root: Path) -> Iterator[str]:
    """A loopback registry for the whole run (the shared CPU build pushes to it)."""
    yield from start_registry(session_registry_root)


@pytest.fixture(scope="session")
def cpu_built(
    docker_client: Any, tmp_path_factory: pytest.TempPathFactory, ca_bundle: tuple[Path, bytes], session_registry: str
) -> Iterator[Built]:
    """The CPU combination (CPU, both flavors), built once for the whole run as a release builds it: every
    check of the gate, every smoke suite (`--test gpu`), `--report`, `--progress plain` (a heartbeat every
    2 s), pushed to the run's registry.
    The modules about what a build makes (test_build_cpu, test_report, test_progress, test_push, test_clusters,
    test_any_image: tests/scheduling.py SHARED_MODULES, one worker) assert on it; tests that change it (a
    `--no-cache` rebuild) are marked `rebuilds_shared` and run after the others of that group."""
    tmp = tmp_path_factory.mktemp("cpu")
    env = {k: v for k, v in os.environ.items() if k != "TORCHIMAGES_PROGRESS"}
    env["TORCHIMAGES_HEARTBEAT_S"] = "2"  # the smoke suites alone run longer than that
    extra = ("--push", "--test", "gpu", "--report", tmp / "report", "--progress", "plain")
    yield from build_matrix(docker_client, tmp, CPU, ca_bundle, registry=session_registry, extra=extra, env=env)


MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json, "
    "application/vnd.oci.image.index.v1+json, application/vnd.docker.distribution.manifest.list.v2+json"
)


def registry_manifest(registry: str, repository: str, tag: str) -> tuple[str, dict[str, Any]]:
    """The registry's manifest of a tag (an image manifest, or an index: the containerd store pushes an image with
    its attestations as one): its digest and its content."""
    path = repository.removeprefix(registry + "/")
    request = urllib.request.Request(f"http://{registry}/v2/{path}/manifests/{tag}", headers={"Accept": MANIFEST_TYPES})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return str(answer.headers["Docker-Content-Digest"]), dict(json.load(answer))


def registry_image(
    registry: str, repository: str, tag: str, platform: str = "linux/amd64"
) -> tuple[str, dict[str, Any]]:
    """The image manifest a tag names for `platform`: its own, or its index's entry of that platform."""
    digest, found = registry_manifest(registry, repository, tag)
    if "manifests" not in found:
        return digest, found
    os_name, _, architecture = platform.partition("/")
    (entry,) = [
        e
        for e in found["manifests"]
        if (e.get("platform") or {}).get("os") == os_name
        and (e.get("platform") or {}).get("architecture") == architecture
    ]
    return registry_manifest(registry, repository, entry["digest"])


def registry_blob(registry: str, repository: str, digest: str) -> dict[str, Any]:
    """A JSON blob (a configuration) the registry stores."""
    path = repository.removeprefix(registry + "/")
    with urllib.request.urlopen(f"http://{registry}/v2/{path}/blobs/{digest}", timeout=10) as answer:
        return dict(json.load(answer))


def uncompressed_size(client: Any, reference: str) -> int:
    """An image's uncompressed layers, added (its history): what the tool reports as its size on either store."""
    return sum(int(step.get("Size") or 0) for step in client.images.get(reference).history())


def stored_blobs(root: Path) -> frozenset[str]:
    """The digests of every blob a registry under `root` stores (docker-registry's filesystem layout)."""
    return frozenset(path.name for path in (root / "data").glob("docker/registry/v2/blobs/sha256/*/*"))


@dataclass(frozen=True)
class Rebuilt:
    """The shared CPU build built again with `--no-cache --push`: what was there before it (each flavor's
    layers, the digest of each flavor's image manifest in the run's registry, the blobs the registry stored), the
    result."""

    before: Mapping[str, tuple[str, ...]]
    manifests_before: Mapping[str, str]
    blobs_before: frozenset[str]
    result: subprocess.CompletedProcess[str]


@pytest.fixture(scope="session")
def cpu_rebuilt(cpu_built: Built, docker_client: Any, session_registry: str, session_registry_root: Path) -> Rebuilt:
    """The weekly security rebuild of the shared build (`--no-cache`, every check of the gate, pushed again to
    the run's registry; the smoke suites left out: its tests are about the layers and the push, and the suites
    ran on the shared build); only tests marked `rebuilds_shared` ask for it (the tags then name the rebuilt
    images)."""
    assert cpu_built.status == 0, cpu_built.output
    flavors = ("runtime", "devel")
    before = {
        flavor: tuple(docker_client.images.get(cpu_built.image(flavor).reference).attrs["RootFS"]["Layers"])
        for flavor in flavors
    }
    manifests = {
        flavor: registry_image(session_registry, cpu_built.image(flavor).repository, cpu_built.image(flavor).tag)[0]
        for flavor in flavors
    }
    blobs = stored_blobs(session_registry_root)
    options = ("--log-dir", cpu_built.logs, "--no-cache", "--push", "--test", "none")
    result = run_cli("build", "--matrix", cpu_built.plan.matrix_path, *options, "*")
    return Rebuilt(before, manifests, blobs, result)


def gzip_level_1() -> tuple[str, ...]:
    """`--gzip-level 1` where this machine's engine keeps images in the containerd store (the large CUDA modules
    take it: their export faster, docs/benchmarks.md), else nothing (the classic store gzips at push)."""
    return ("--gzip-level", "1") if engine.DockerEngine().gzip_level_problem() is None else ()


def imagetools(reference: str, what: str) -> dict[str, Any]:
    """What `docker buildx imagetools inspect --format '{{json .WHAT}}'` (the ordinary tool) reads of a pushed tag."""
    try:
        buildx = engine.find_buildx()
    except engine.EngineError as exc:
        require(str(exc))
        raise
    cmd = [buildx, "buildx", "imagetools", "inspect", reference, "--format", "{{json ." + what + "}}"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert isinstance(found, dict), done.stdout[:2000]
    return found
