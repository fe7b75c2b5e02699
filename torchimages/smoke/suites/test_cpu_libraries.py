"""Every shared library of torch resolves, and the image holds one cuDNN and one NCCL."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest
import testinfra.host

from torchimages.smoke.document import SmokeSpec

pytestmark = pytest.mark.cpu

# The driver's user-space libraries. The NVIDIA Container Toolkit mounts them from
# the host at `docker run --gpus ...`, matching the host's kernel module; an image
# must never carry its own copy (it would not match the host driver). So without a
# driver they are legitimately "not found" (torch still imports: it opens them
# lazily). Once the driver's libcuda.so.1 is loadable they must resolve like
# any other library.
DRIVER_LIBRARIES = frozenset({"libcuda.so.1", "libnvidia-ml.so.1"})

LDD_ALL = (
    'find "$TORCH_DIR" -type f \\( -name "*.so" -o -name "*.so.*" \\) | sort | '
    'while IFS= read -r f; do echo "== $f"; ldd "$f" 2>&1; done'
)
FIND_COPIES = (
    "find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o "
    "\\( -name 'libcudnn.so.*' -o -name 'libnccl.so.*' \\) -print 2>/dev/null | "
    'while IFS= read -r f; do printf "%s\\t%s\\n" "$f" "$(readlink -f "$f")"; done'
)
MAIN_LIBRARY = {
    "cudnn": re.compile(r"^libcudnn\.so\.\d+(\.\d+)*$"),
    "nccl": re.compile(r"^libnccl\.so\.\d+(\.\d+)*$"),
}


def unresolved(ldd_output: str) -> dict[str, list[str]]:
    """{library file: [names ldd could not find]} from the LDD_ALL output."""
    missing: dict[str, list[str]] = {}
    current = ""
    for line in ldd_output.splitlines():
        if line.startswith("== "):
            current = line[3:]
        elif "=> not found" in line:
            missing.setdefault(current, []).append(line.split("=>")[0].strip())
    return missing


def test_torch_shared_libraries_resolve(host: testinfra.host.Host, facts: dict[str, Any]) -> None:
    assert host.exists("ldd"), "ldd is missing in the host: install libc-bin to run this check"
    result = host.run(f"TORCH_DIR={shlex.quote(facts['torch_dir'])}; export TORCH_DIR; {LDD_ALL}")
    assert "== " in result.stdout, f"found no shared library under {facts['torch_dir']}"
    allowed = frozenset() if facts.get("driver_library_loadable") else DRIVER_LIBRARIES
    problems = {
        path: [name for name in names if name not in allowed] for path, names in unresolved(result.stdout).items()
    }
    problems = {path: names for path, names in problems.items() if names}
    listing = "\n".join(f"  {path}: {', '.join(names)}" for path, names in sorted(problems.items()))
    assert not problems, (
        f"shared libraries under torch cannot resolve their dependencies:\n{listing}\n"
        "Install the package that ships them (an nvidia-* wheel or an OS package), "
        "or fix RPATH/LD_LIBRARY_PATH."
    )


@pytest.fixture(scope="module")
def library_copies(image_host: testinfra.host.Host) -> dict[str, set[str]]:
    """Real files behind every libcudnn.so.N / libnccl.so.N in the file system."""
    output = image_host.run(FIND_COPIES).stdout
    copies: dict[str, set[str]] = {name: set() for name in MAIN_LIBRARY}
    for line in output.splitlines():
        path, _, real = line.partition("\t")
        base = path.rsplit("/", 1)[-1]
        for name, pattern in MAIN_LIBRARY.items():
            if pattern.match(base):
                copies[name].add(real or path)
    return copies


@pytest.mark.parametrize("library", ["cudnn", "nccl"])
def test_exactly_one_copy(library_copies: dict[str, set[str]], spec: SmokeSpec, library: str) -> None:
    if getattr(spec, library) is None:
        pytest.skip(f"spec has no {library} version (CPU-only image): not checked")
    found = sorted(library_copies[library])
    assert len(found) == 1, (
        f"expected exactly one {library} library in the image, found {len(found)}: {found}. "
        "The torch wheels bring their own; a second copy (for example from an nvidia/cuda "
        "base image or an OS package) wastes space and can be loaded instead of the right one."
    )
