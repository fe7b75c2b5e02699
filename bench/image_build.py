"""Benchmark both flavors of one CUDA combination: stored bytes, cold build, size against its floor,
a warm rebuild, and push/pull through a registry on loopback with the venv split into layers against
the same venv in one layer. Prints figures; record them in docs/benchmarks.md.

Needs a Docker engine, the wheel sources the build uses (TORCHIMAGES_* variables, see README) and,
for push/pull, Debian's docker-registry. Takes 20-30 minutes; removes what it builds.
Run: .venv/bin/python bench/image_build.py [--combination PREFIX] [--skip-registry]
"""

from __future__ import annotations

import bench_cli  # first: from here on a signal is one line and 128 + N (bench/bench_cli.py)

bench_cli.early(__name__, "bench/image_build.py")

import datetime
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from torchimages import render
from torchimages.building.wheels import WheelSources, secret_file, serve
from torchimages.engine import DockerEngine
from torchimages.planning import plan
from torchimages.problems import InputError

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_COMBINATION = "2.14.1-cuda13.0-cudnn9-*-debian12"
GB = 1e9


def timed(*args: str | Path, env: dict[str, str] | None = None) -> float:
    """Run a command, fail loudly, return its seconds."""
    start = time.perf_counter()
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, check=False, env=env)
    if result.returncode:
        sys.exit(f"failed: {' '.join(map(str, args))}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return time.perf_counter() - start


def stored_bytes(docker: str, *references: str) -> int:
    """Bytes the images take together, each layer counted once (the size of one `docker save`)."""
    with subprocess.Popen([docker, "save", *references], stdout=subprocess.PIPE) as saver:
        assert saver.stdout is not None
        total = 0
        while chunk := saver.stdout.read(1 << 22):
            total += len(chunk)
    return total


def layers(sdk: Any, reference: str) -> list[str]:
    return list(sdk.images.get(reference).attrs["RootFS"]["Layers"])


def du(sdk: Any, reference: str, path: str) -> int:
    out = sdk.containers.run(reference, ["du", "-sb", path], remove=True, user="root")
    return int(out.split()[0])


def os_packages_layer(sdk: Any, reference: str) -> int:
    """The size of the layer that installed the OS packages (interpreter, headers, compiler)."""
    history = sdk.images.get(reference).history()
    return max(int(h["Size"]) for h in history if "apt-get install" in (h.get("CreatedBy") or ""))


def bare_pip_install(
    sdk: Any, base: str, python: str, requirements: list[str], index_url: str, ca: str | None
) -> tuple[float, float]:
    """Seconds of a plain `pip install` of the same wheels in a container of the base image, and of the
    same install again into a new venv from pip's now warm cache (unpacking only: the floor)."""
    with serve(WheelSources.from_environment()) as served, secret_file(served.pip_conf(index_url)) as conf:
        volumes = {str(conf): {"bind": "/pip.conf", "mode": "ro"}}
        if ca:
            volumes[ca] = {"bind": "/ca", "mode": "ro"}
        box = sdk.containers.run(
            base,
            ["sleep", "infinity"],
            detach=True,
            volumes=volumes,
            network_mode="host" if served.needs_host_network else None,
        )
        try:
            py = f"python{python}"
            setup = f"apt-get update -qq && apt-get install -y -qq {py}-venv && {py} -m venv /v"
            assert box.exec_run(["bash", "-c", setup]).exit_code == 0
            env = {"PIP_CONFIG_FILE": "/pip.conf", **({"PIP_CERT": "/ca"} if ca else {})}
            install = ["/v/bin/pip", "install", "-q", "--cache-dir", "/pip-cache", *requirements]
            start = time.perf_counter()
            result = box.exec_run(install, environment=env)
            seconds = time.perf_counter() - start
            assert result.exit_code == 0, result.output[-2000:]
            assert box.exec_run(["bash", "-c", f"rm -rf /v && {py} -m venv /v"]).exit_code == 0
            start = time.perf_counter()
            result = box.exec_run(install, environment=env)
            warm = time.perf_counter() - start
            assert result.exit_code == 0, result.output[-2000:]
        finally:
            box.remove(force=True)
    return seconds, warm


@contextmanager
def loopback_registry() -> Iterator[tuple[str, Path]]:
    binary = shutil.which("docker-registry")
    if binary is None:
        sys.exit("docker-registry is not installed (apt-get install docker-registry), or pass --skip-registry")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = Path(tempfile.mkdtemp(prefix="bench-registry-"))
    config = root / "config.yml"
    address = f"127.0.0.1:{port}"
    config.write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {root}/data\nhttp:\n  addr: {address}\n"
    )
    server = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            try:
                urllib.request.urlopen(f"http://{address}/v2/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        yield address, root / "data"
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(root, ignore_errors=True)


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def push_and_pull(docker: str, sdk: Any, image: str, registry: str, data: Path, name: str) -> str:
    """Push an image to the loopback registry, remove it here (every tag) and the build cache, pull it back."""
    remote = f"{registry}/bench/{name}:{uuid.uuid4().hex[:8]}"
    before = folder_bytes(data) if data.exists() else 0
    timed(docker, "tag", image, remote)
    push = timed(docker, "push", remote)
    compressed = folder_bytes(data) - before
    sdk.images.remove(sdk.images.get(image).id, force=True)
    timed(docker, "builder", "prune", "--all", "--force")
    pull = timed(docker, "pull", remote)
    timed(docker, "tag", remote, image)
    sdk.images.remove(remote)
    return f"push {push:.0f} s, pull {pull:.0f} s, {compressed / GB:.2f} GB compressed in the registry"


def single_layer_copy(docker: str, sdk: Any, base: str, runtime: str) -> str:
    """The runtime's venv as ONE layer over the same OS layers (the layout before the split)."""
    tag = f"torchimages-bench/single-layer:{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as context:
        Path(context, "Dockerfile").write_text(
            f"FROM {runtime} AS source\nFROM {base}\nCOPY --from=source --chown=1000:1000 /opt/venv /opt/venv\n"
        )
        timed(docker, "build", "--tag", tag, context, env={**os.environ, "DOCKER_BUILDKIT": "1"})
    return tag


def main() -> None:
    parser = bench_cli.parser(description=__doc__)
    parser.add_argument("--combination", default=DEFAULT_COMBINATION, help="selector of one combination's images")
    parser.add_argument("--ca-cert", default=os.environ.get("TORCHIMAGES_CA_CERT"))
    parser.add_argument("--skip-registry", action="store_true", help="leave out the push/pull figures")
    args = parser.parse_args()
    if args.ca_cert and not Path(args.ca_cert).is_file():
        parser.error(f"--ca-cert {args.ca_cert!r}: no such file")
    loaded = plan.load(ROOT / "matrix.yaml")
    try:
        found = plan.select(loaded, [args.combination])
    except InputError as exc:
        parser.error(f"--combination {args.combination!r}: {exc}")
    if len({selected.combination.folder for selected in found}) != 1:
        parser.error(f"--combination {args.combination!r} selects {len(found)} images, not one combination's")
    combination = found[0].combination
    engine = DockerEngine()
    sdk, docker = engine.sdk, engine.build_client.docker
    devel, runtime = combination.image("devel").reference, combination.image("runtime").reference
    logs = Path(tempfile.mkdtemp()) / "logs"
    cli = [sys.executable, ROOT / "build.py", "build", args.combination, "--log-dir", logs]
    if args.ca_cert:
        cli += ["--ca-cert", args.ca_cert]

    def cold_build(*extra: str) -> float:
        """Both flavors from nothing: no image, no build cache (the bootstrapped base stays)."""
        for image in combination.images:
            for name in image.names:
                engine.remove_image(f"{image.repository}:{name}")
        timed(docker, "builder", "prune", "--all", "--force")
        return timed(*cli, *extra)

    # The build and verification alone, then the whole gate (verification and the cpu smoke suite).
    cold_verified = cold_build("--test", "none")
    cold = cold_build()
    warm = timed(*cli)
    cold_layers = {r: layers(sdk, r) for r in (devel, runtime)}
    # A weekly security rebuild: from nothing again (--no-cache), runtime first and devel on it.
    rebuilt = timed(*cli, "--no-cache")
    no_cache_together, no_cache_devel = stored_bytes(docker, devel, runtime), stored_bytes(docker, devel)
    same = {r: layers(sdk, r) == cold_layers[r] for r in (devel, runtime)}
    pip, unpack = bare_pip_install(
        sdk,
        combination.os.image,
        combination.python,
        render.requirements(combination),
        combination.index_url,
        args.ca_cert,
    )

    together = stored_bytes(docker, devel, runtime)
    devel_alone = stored_bytes(docker, devel)
    runtime_size = sdk.images.get(runtime).attrs["Size"]
    base_size = sdk.images.get(combination.os.image).attrs["Size"]
    packages = os_packages_layer(sdk, runtime)
    venv = du(sdk, runtime, "/opt/venv")
    prefix = layers(sdk, devel)[: len(layers(sdk, runtime))] == layers(sdk, runtime)

    print(f"date: {datetime.date.today()}  machine: {platform.machine()}, {os.cpu_count()} cores")
    print(f"combination: {combination.folder} (devel from {combination.devel_from})")
    print(f"runtime layers are a prefix of devel's: {prefix}")
    print(
        f"(1) stored devel + runtime {together / GB:.2f} GB / devel alone {devel_alone / GB:.2f} GB "
        f"= {together / devel_alone:.3f} (target <= 1.10)"
    )
    print(
        f"(2) cold build of both flavors {cold:.0f} s / bare pip install {pip:.0f} s = {cold / pip:.2f} (target <= 2.0)"
    )
    print(
        f"    of which build and verification alone (--test none, also cold) {cold_verified:.0f} s "
        f"= {cold_verified / pip:.2f}; the cpu smoke suite of both images adds {cold - cold_verified:.0f} s"
    )
    floor = base_size + packages + venv
    print(
        f"(3) runtime {runtime_size / GB:.2f} GB / floor (base {base_size / GB:.3f} + OS packages "
        f"{packages / GB:.3f} + venv {venv / GB:.2f} GB = {floor / GB:.2f} GB) = {runtime_size / floor:.3f} "
        "(target <= 1.05)"
    )
    print(
        f"    (--test none / unpacking the same wheels from pip's warm cache, the floor: {cold_verified:.0f} s / "
        f"{unpack:.0f} s = {cold_verified / unpack:.2f})"
    )
    print(f"    warm rebuild of the unchanged combination: {warm:.1f} s")
    print(
        f"(5) --no-cache rebuild {rebuilt:.0f} s: stored devel + runtime {no_cache_together / GB:.2f} GB / devel alone "
        f"{no_cache_devel / GB:.2f} GB = {no_cache_together / no_cache_devel:.3f} (target 1.00)"
    )
    print(f"    the same layer digests as the cold build: runtime {same[runtime]}, devel {same[devel]}")
    if not args.skip_registry:
        # devel holds every runtime layer: remove it, or the pull would find them all present.
        sdk.images.remove(sdk.images.get(devel).id, force=True)
        single = single_layer_copy(docker, sdk, combination.os.image, runtime)
        with loopback_registry() as (registry, data):
            split_figures = push_and_pull(docker, sdk, runtime, registry, data, "split")
            single_figures = push_and_pull(docker, sdk, single, registry, data, "single")
        print(f"(4) runtime, venv split into layers: {split_figures}")
        print(f"    the same venv in one layer over the base (no OS-packages layer): {single_figures}")
        engine.remove_image(single)
    for image in combination.images:
        for name in image.names:
            engine.remove_image(f"{image.repository}:{name}")


if __name__ == "__main__":
    sys.exit(bench_cli.run("bench/image_build.py", main))
