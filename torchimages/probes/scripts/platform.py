"""Probe: what a cluster platform changes about a run (any uid, a read-only root, RDMA), in one process.

- who runs: uid, gid, the passwd name (None without an entry: OpenShift's random uid), HOME;
- the folders a training job writes: HOME, the temporary folder, pip's, Triton's and Inductor's caches:
  each made if missing and written to; whether the file system under it is read-only or `noexec`
  (Inductor and Triton load the code they compile from there);
- the RDMA verbs userspace NCCL dlopens (libibverbs, a provider, librdmacm) and the devices it sees;
- a DataLoader with two worker processes (shared memory, the temporary folder) giving the exact batches.

Prints one JSON line; standard library, then torch for the DataLoader last.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import tempfile
import traceback
from typing import Any

MARK = "SMOKE_JSON:"
# libibverbs1, ibverbs-providers (mlx5, the provider of most InfiniBand and RoCE cards), librdmacm1.
VERBS_LIBRARIES = ("libibverbs.so.1", "libmlx5.so.1", "librdmacm.so.1")


def passwd_name(uid: int) -> str | None:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (KeyError, ImportError):
        return None


def nearest_existing(path: str) -> str:
    while path and not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path or "/"


def mount_flags(path: str) -> dict[str, bool]:
    try:
        flags = os.statvfs(nearest_existing(path)).f_flag
    except OSError:
        return {"read_only": False, "noexec": False}
    return {"read_only": bool(flags & os.ST_RDONLY), "noexec": bool(flags & getattr(os, "ST_NOEXEC", 8))}


def writable(path: str) -> dict[str, Any]:
    """Make the folder if missing, write a file in it, remove the file (the folder stays: it is a cache)."""
    entry: dict[str, Any] = {"path": path, **mount_flags(path)}
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".smoke-write-"):
            pass
        entry["writable"] = True
    except OSError as exc:
        entry["writable"] = False
        entry["error"] = f"{type(exc).__name__}: {exc}"
    return entry


def inductor_cache(temp: str) -> str:
    """Inductor's cache folder as torch computes it (TORCHINDUCTOR_CACHE_DIR, else torchinductor_<user> in the
    temporary folder; `uid_<uid>` for a uid without a name); the same rule where this torch has no such helper."""
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        return os.environ["TORCHINDUCTOR_CACHE_DIR"]
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir

        return str(default_cache_dir())
    except Exception:
        import getpass

        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = f"uid_{os.getuid()}"
        return os.path.join(temp, "torchinductor_" + user)


def folders() -> dict[str, Any]:
    home = os.path.expanduser("~")
    try:
        temp = tempfile.gettempdir()
    except FileNotFoundError as exc:  # no usable temporary folder at all
        temp = None
        temp_error = str(exc)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    found: dict[str, Any] = {
        "home": writable(home),
        "pip_cache": writable(os.environ.get("PIP_CACHE_DIR") or os.path.join(cache, "pip")),
        "triton_cache": writable(os.environ.get("TRITON_CACHE_DIR") or os.path.join(home, ".triton", "cache")),
    }
    if temp is None:
        found["temp"] = {"path": None, "writable": False, "read_only": False, "noexec": False, "error": temp_error}
    else:
        found["temp"] = writable(temp)
        found["inductor_cache"] = writable(inductor_cache(temp))
    return found


def verbs() -> dict[str, Any]:
    loaded: dict[str, Any] = {}
    for name in VERBS_LIBRARIES:
        try:
            ctypes.CDLL(name)
            loaded[name] = None
        except OSError as exc:
            loaded[name] = str(exc)
    devices = None
    if loaded["libibverbs.so.1"] is None:
        library = ctypes.CDLL("libibverbs.so.1", use_errno=True)
        library.ibv_get_device_list.restype = ctypes.c_void_p
        count = ctypes.c_int(0)
        listed = library.ibv_get_device_list(ctypes.byref(count))
        devices = count.value if listed else 0
        if listed:
            library.ibv_free_device_list(ctypes.c_void_p(listed))
    return {"libraries": loaded, "devices": devices, "dev_infiniband": os.path.isdir("/dev/infiniband")}


class Squares:
    """A map-style dataset: item i is (i, i*i)."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> tuple[int, int]:
        return index, index * index


def dataloader() -> dict[str, Any]:
    try:
        import torch.utils.data

        loader = torch.utils.data.DataLoader(Squares(), batch_size=8, num_workers=2, shuffle=False)  # type: ignore[arg-type]
        total = sum(int(y.sum()) for _, y in loader)
        expected = sum(i * i for i in range(64))
        return {"ok": total == expected, "total": total, "expected": expected, "workers": 2}
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-2000:]}


def main() -> None:
    result: dict[str, Any] = {
        "uid": os.getuid(),
        "gid": os.getgid(),
        "groups": sorted(os.getgroups()),
        "name": passwd_name(os.getuid()),
        "home_env": os.environ.get("HOME"),
        "folders": folders(),
        "verbs": verbs(),
        "root": mount_flags("/"),
    }
    print(MARK + json.dumps(result), flush=True)  # what was found so far, should the DataLoader kill the process
    result["dataloader"] = dataloader()
    print(MARK + json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
