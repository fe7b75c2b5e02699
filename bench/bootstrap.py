"""Benchmark the bootstrap of each OS base that `--bases bootstrap` (or debian12) makes: mmdebstrap's time, the
root filesystem's size, and the imported image's size, for linux/amd64.

It runs the product's own command (torchimages.building.bootstrap.command, the knowledge base's archive facts) into
a temporary tar and imports it under a throwaway name, removed afterwards: the bases the builds use are left
alone. Needs mmdebstrap, Debian's ubuntu-keyring and a Docker engine; the archives must answer.
Run: .venv/bin/python bench/bootstrap.py [OS ...]   (default: ubuntu22.04 ubuntu24.04 debian12)
"""

from __future__ import annotations

import bench_cli  # first: from here on a signal is one line and 128 + N (bench/bench_cli.py)

bench_cli.early(__name__, "bench/bootstrap.py")

import datetime
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from torchimages import compat, settings
from torchimages.building import bootstrap


def docker(*args: str) -> str:
    command = [settings.text("DOCKER") or "docker", *args]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


def measure(name: str) -> str:
    """One OS: mmdebstrap's seconds, the tar's MB, the imported image's MB."""
    os_release = compat.load().os[name]
    with tempfile.TemporaryDirectory(prefix="torchimages-bench-") as folder:
        rootfs = Path(folder, "rootfs.tar")
        start = time.monotonic()
        done = subprocess.run(bootstrap.command(os_release, None, str(rootfs)), capture_output=True, text=True)
        seconds = time.monotonic() - start
        if done.returncode:
            return f"{name}: mmdebstrap failed ({done.returncode}): {done.stderr[-300:]}"
        reference = f"torchimages-bench-{uuid.uuid4().hex[:8]}/{name}:bootstrap"
        docker("import", str(rootfs), reference)
        try:
            size = int(docker("image", "inspect", "--format", "{{.Size}}", reference))
        finally:
            docker("rmi", reference)
        return (
            f"{name}: suite {bootstrap.archive_of(os_release).suite}, mmdebstrap {seconds:.0f} s, "
            f"root filesystem {rootfs.stat().st_size / 1e6:.0f} MB, image {size / 1e6:.1f} MB"
        )


def main() -> int:
    parser = bench_cli.parser(description=__doc__.splitlines()[0])
    parser.add_argument("oses", nargs="*", default=["ubuntu22.04", "ubuntu24.04", "debian12"])
    args = parser.parse_args()
    known = compat.load().os
    unknown = [name for name in args.oses if name not in known]
    if unknown:
        parser.error(f"no such OS: {', '.join(map(repr, unknown))[:200]} (known: {', '.join(sorted(known))})")
    print(f"# bench/bootstrap.py, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    for name in args.oses:
        print(measure(name), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(bench_cli.run("bench/bootstrap.py", main))
