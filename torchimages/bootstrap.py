"""The `bootstrap` OS provider: a base image made from a distribution archive, no registry needed.

`mmdebstrap --variant=minbase SUITE - | docker import - IMAGE`, once, and again only when what
shapes it changes (recorded in a label).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Any

from .compat import OsRelease
from .engine import EngineError, image_labels
from .spec import LABEL_PREFIX

DIGEST_LABEL = f"{LABEL_PREFIX}.bootstrap-digest"
# Leave documentation, manual pages and translations out: smaller images, nothing lost at run time.
DPKG_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")


def command(os: OsRelease, mirror: str | None) -> list[str]:
    """The mmdebstrap command that writes the root filesystem as a tar stream to stdout."""
    cmd = ["mmdebstrap", "--variant=minbase", "--quiet"]
    cmd += [f"--dpkgopt=path-exclude={p}" for p in DPKG_EXCLUDES]
    cmd += ["--dpkgopt=path-include=/usr/share/doc/*/copyright"]
    cmd += [os.suite, "-"]
    if mirror:
        cmd.append(mirror)
    return cmd


def digest(os: OsRelease, mirror: str | None) -> str:
    """What shapes the base image."""
    return "sha256:" + hashlib.sha256("\0".join(command(os, mirror)).encode()).hexdigest()


def ensure(client: Any, docker_cli: str, os: OsRelease, mirror: str | None, log: Path) -> str:
    """Make the base image unless an identical one is present; return what was done."""
    wanted = digest(os, mirror)
    labels = image_labels(client, os.image)
    if labels is not None and labels.get(DIGEST_LABEL) == wanted:
        return f"base {os.image} is up to date"
    if shutil.which("mmdebstrap") is None:
        raise EngineError(
            f"the {os.name} base image is bootstrapped with mmdebstrap, which is not installed "
            "(apt-get install mmdebstrap)"
        )
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        strap = subprocess.Popen(command(os, mirror), stdout=subprocess.PIPE, stderr=out)
        imported = subprocess.run(
            [
                docker_cli,
                "import",
                "--change",
                f"LABEL {DIGEST_LABEL}={wanted}",
                "--change",
                'CMD ["/bin/bash"]',
                "-",
                os.image,
            ],
            stdin=strap.stdout,
            stdout=out,
            stderr=out,
            check=False,
        )
        assert strap.stdout is not None
        strap.stdout.close()
        strap_status = strap.wait()
    if strap_status or imported.returncode:
        raise EngineError(
            f"bootstrapping {os.image} failed (mmdebstrap exit {strap_status}, "
            f"docker import exit {imported.returncode}); see {log}"
        )
    return f"base {os.image} bootstrapped from the {os.suite} archive"
