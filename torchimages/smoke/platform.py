"""What cluster platforms change about a run, and what to say when it breaks one: any uid (OpenShift), a
read-only root (Kubernetes' readOnlyRootFilesystem), the RDMA verbs userspace. Pure functions over the
platform probe's answer (torchimages/probes/scripts/platform.py); docs/how-to/run-on-clusters.md is the
recipe these name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# `docker run` options that run an image as OpenShift does: a uid without a passwd entry, group 0.
ANY_UID_RUN_ARGS = ("--user", "123456:0")
# The read-only root recipe: a root nobody writes, the two folders a training job writes as tmpfs with exec
# (Inductor and Triton load the code they compile from the temporary folder and from HOME's caches).
READ_ONLY_RUN_ARGS = ("--read-only", "--tmpfs", "/tmp:exec", "--tmpfs", "/home/torch:exec")
RECIPE = "docs/how-to/run-on-clusters.md"

# The folders of the probe's answer, and who writes there.
FOLDERS: Mapping[str, str] = {
    "home": "HOME (shells, tools' dot folders)",
    "temp": "the temporary folder (Python's tempfile, DataLoader workers, Inductor's default cache)",
    "pip_cache": "pip's cache",
    "triton_cache": "Triton's cache (compiled GPU kernels, loaded from there)",
    "inductor_cache": "Inductor's cache (compiled C++ and its .so files, loaded from there)",
}
# Folders whose compiled code is loaded (mmap PROT_EXEC): a `noexec` mount breaks torch.compile there.
EXEC_FOLDERS = ("temp", "triton_cache", "inductor_cache")

NOEXEC_FIX = (
    "mount it with exec (docker run --tmpfs /tmp:exec; Docker mounts a --tmpfs noexec by default; "
    "Kubernetes: an emptyDir volume), or point TMPDIR, TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR "
    f"at a writable folder without noexec ({RECIPE})"
)
UNWRITABLE_FIX = (
    "give the container a writable folder there: on a read-only root, docker run --tmpfs /tmp:exec "
    f"--tmpfs /home/torch:exec (Kubernetes: emptyDir volumes); as another uid, a group-0 writable HOME ({RECIPE})"
)


def folder_problem(name: str, entry: Mapping[str, Any]) -> str | None:
    """What is wrong with one folder of the probe's answer, with its fix; None when it serves."""
    what = FOLDERS.get(name, name)
    path = entry.get("path")
    if not entry.get("writable"):
        reason = entry.get("error") or "not writable"
        where = f"{path}" if path else "no folder at all"
        return f"{what}, {where}, cannot be written ({reason}): {UNWRITABLE_FIX}"
    if name in EXEC_FOLDERS and entry.get("noexec"):
        return (
            f"{what}, {path}, is on a noexec mount: code compiled there cannot be loaded (Inductor: "
            f"'failed to map segment from shared object'): {NOEXEC_FIX}"
        )
    return None


def compile_advice(payload: Mapping[str, Any] | None) -> str:
    """For a failed torch.compile: the folder problems that explain it (noexec, unwritable), or ''."""
    if not payload:
        return ""
    found = payload.get("folders") or {}
    problems = [p for name in EXEC_FOLDERS if name in found and (p := folder_problem(name, found[name]))]
    return ("\nLikely cause: " + "\n".join(problems)) if problems else ""


def verbs_problems(verbs: Mapping[str, Any]) -> list[str]:
    """The verbs libraries that did not load, each with its loader's message."""
    return [f"{name}: {error}" for name, error in (verbs.get("libraries") or {}).items() if error is not None]
