"""Benchmark a CUDA runtime image: size against its floor, cold build against a bare pip install,
and a warm rebuild of an unchanged combination. Prints figures; record them in docs/benchmarks.md.

Needs a Docker engine and the wheel sources the build uses (TORCHIMAGES_* variables, see README).
Run: .venv/bin/python bench/image_build.py [--selector TAG] (takes several minutes, removes what it builds).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

from torchimages import engine, plan, render
from torchimages.wheels import WheelSources, secret_file, serve

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SELECTOR = "2.14.1-cuda13.0-cudnn9-runtime-debian12"


def run(*args: str | Path, env: dict[str, str] | None = None) -> float:
    """Run a command, fail loudly, return its seconds."""
    start = time.perf_counter()
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, check=False, env=env)
    if result.returncode:
        sys.exit(f"failed: {' '.join(map(str, args))}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return time.perf_counter() - start


def du_venv(client: Any, image: str) -> int:
    out = client.containers.run(image, ["du", "-sb", "/opt/venv"], remove=True, user="root")
    return int(out.split()[0])


def naive_dockerfile(base: str, python: str, requirements: list[str]) -> str:
    """One stage, pip install without cleanup: what a hand-written Dockerfile often does."""
    return textwrap.dedent(f"""\
        FROM {base}
        RUN apt-get update && apt-get install -y python{python}-venv
        RUN python{python} -m venv /opt/venv
        RUN --mount=type=secret,id=pipconf,target=/etc/pip.conf --mount=type=secret,id=cacert,target=/cacert \\
            PIP_CERT=/cacert /opt/venv/bin/pip install {" ".join(requirements)}
        """)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--selector", default=DEFAULT_SELECTOR)
    parser.add_argument("--ca-cert", default=None)
    args = parser.parse_args()
    client = engine.connect()
    build = engine.find_build_client()
    loaded = plan.load(ROOT / "matrix.yaml")
    (spec,) = plan.select(loaded, [args.selector])
    ca = args.ca_cert or os.environ.get("TORCHIMAGES_CA_CERT")
    cli = [sys.executable, ROOT / "build.py", "build", args.selector, "--log-dir", Path(tempfile.mkdtemp()) / "logs"]
    if ca:
        cli += ["--ca-cert", ca]

    # (b) cold build: empty the build cache and the image first.
    engine.remove_image(client, spec.reference)
    for alias in spec.aliases:
        engine.remove_image(client, f"{spec.repository}:{alias}")
    run("docker", "builder", "prune", "--all", "--force")
    cold = run(*cli)
    # (c) warm rebuild of the unchanged combination: the tool sees the verified digest and skips.
    warm = run(*cli)
    # (c') the same through BuildKit's cache alone (--no-cache would bypass it, so drop the tag).
    engine.remove_image(client, spec.reference)
    warm_buildkit = run(*cli)

    # (a) sizes: the image, its floor (base image + installed venv) and a naive single-stage image.
    size = client.images.get(spec.reference).attrs["Size"]
    base = client.images.get(spec.os.image).attrs["Size"]
    venv = du_venv(client, spec.reference)
    requirements = render.requirements(spec)
    naive_tag = f"torchimages-bench/naive:{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as context, serve(WheelSources.from_environment()) as served:
        Path(context, "Dockerfile").write_text(naive_dockerfile(spec.os.image, spec.python, requirements))
        with secret_file(served.pip_conf(spec.index_url)) as conf:
            secrets = ["--secret", f"id=pipconf,src={conf}"] + (["--secret", f"id=cacert,src={ca}"] if ca else [])
            network = ["--network", "host"] if served.needs_host_network else []
            naive_seconds = run(
                *build.command, "--tag", naive_tag, *secrets, *network, context, env=build.environment()
            )
        # (b') the bare pip install of the same wheels in a plain container of the base image.
        with secret_file(served.pip_conf(spec.index_url)) as conf:
            volumes = {str(conf): {"bind": "/pip.conf", "mode": "ro"}}
            if ca:
                volumes[ca] = {"bind": "/ca", "mode": "ro"}
            box = client.containers.run(
                spec.os.image,
                ["sleep", "infinity"],
                detach=True,
                volumes=volumes,
                network_mode="host" if served.needs_host_network else None,
            )
            try:
                py = f"python{spec.python}"
                setup = f"apt-get update -qq && apt-get install -y -qq {py}-venv && {py} -m venv /v"
                assert box.exec_run(["bash", "-c", setup]).exit_code == 0
                env = {"PIP_CONFIG_FILE": "/pip.conf", **({"PIP_CERT": "/ca"} if ca else {})}
                start = time.perf_counter()
                result = box.exec_run(["/v/bin/pip", "install", "-q", "--no-cache-dir", *requirements], environment=env)
                pip_seconds = time.perf_counter() - start
                assert result.exit_code == 0, result.output[-2000:]
            finally:
                box.remove(force=True)
    naive_size = client.images.get(naive_tag).attrs["Size"]
    engine.remove_image(client, naive_tag)

    gb = 1e9
    print(f"date: {datetime.date.today()}  machine: {platform.machine()}, {os.cpu_count()} cores")
    print(f"image: {spec.reference}")
    print(
        f"(a) image size {size / gb:.2f} GB; floor = base {base / gb:.3f} GB + venv {venv / gb:.2f} GB "
        f"= {(base + venv) / gb:.2f} GB; ratio {size / (base + venv):.3f}"
    )
    print(
        f"    naive single-stage image {naive_size / gb:.2f} GB ({naive_size / size:.2f}x), "
        f"built in {naive_seconds:.0f} s"
    )
    print(
        f"(b) cold build {cold:.0f} s; bare pip install of the same wheels {pip_seconds:.0f} s; "
        f"ratio {cold / pip_seconds:.2f}"
    )
    print(
        f"(c) warm rebuild, unchanged combination: {warm:.1f} s (skipped by digest); "
        f"through BuildKit's cache with verification: {warm_buildkit:.1f} s"
    )


if __name__ == "__main__":
    main()
