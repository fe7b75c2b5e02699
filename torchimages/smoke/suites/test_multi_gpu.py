"""NCCL all_reduce over every visible GPU: exact sums and bus bandwidth.

One process per GPU (world size = GPUs visible; 1 still initialises NCCL). Each
case's bandwidth goes to the terminal summary and to the JUnit file
(record_property). NVLink multicast stays off (see torchimages.probes.SAFE_GPU_ENV).
"""

from __future__ import annotations

from typing import Any

import pytest

from torchimages.probes import ScriptResult
from torchimages.smoke import cluster
from torchimages.smoke.diagnosis import GpuStatus

pytestmark = [
    pytest.mark.multi_gpu,
    # Per-test properties are outside the xunit2 schema, yet JUnit readers show them;
    # the bandwidths also go to schema-valid test-suite properties.
    pytest.mark.filterwarnings("ignore:record_property is incompatible:pytest.PytestWarning"),
]

SIZES = ["4KiB", "1MiB", "256MiB"]
DTYPES = ["fp32", "bf16"]


@pytest.fixture(scope="module")
def nccl(nccl_run: ScriptResult) -> dict[str, Any]:
    """The NCCL probe's summary; fails with the ranks' errors when it did not run."""
    payload = nccl_run.payload
    assert payload is not None, f"the NCCL probe died before reporting: {nccl_run.describe()}"
    errors = [payload["error"]] if payload.get("error") else []
    for rank in payload.get("ranks", []):
        if rank.get("error"):
            errors.append(f"rank {rank['rank']}: {rank['error']}\n    " + "\n    ".join(rank.get("trace", [])))
    assert not errors, (
        "NCCL all_reduce did not run:\n" + "\n".join(errors) + "\nCheck /dev/shm (--shm-size or "
        "--ipc=host), that every GPU is visible, and NCCL_DEBUG=INFO output."
    )
    assert len(payload["ranks"]) == payload["world_size"], (
        f"only {len(payload['ranks'])} of {payload['world_size']} ranks reported: {nccl_run.describe()}"
    )
    return dict(payload)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", SIZES)
def test_all_reduce_exact_sum(
    nccl: dict[str, Any],
    size: str,
    dtype: str,
    record_property: Any,
    record_testsuite_property: Any,
    bandwidth_rows: list[dict[str, Any]],
) -> None:
    case = f"{size}-{dtype}"
    world = int(nccl["world_size"])
    results = [rank["cases"].get(case) for rank in nccl["ranks"]]
    assert all(results), f"case {case} did not run on every rank"
    bandwidth = {key: max(float(r[key]) for r in results) for key in ("time_us", "algbw_GBps")}
    bandwidth["busbw_GBps"] = bandwidth["algbw_GBps"] * 2 * (world - 1) / world
    for key, value in bandwidth.items():
        record_property(key, round(value, 3))
    record_property("world_size", world)
    record_testsuite_property(f"nccl_busbw_GBps[{case},x{world}]", round(bandwidth["busbw_GBps"], 3))
    row = {"case": case, "world": world, **bandwidth}
    bandwidth_rows.append(row)
    print(f"NCCL all_reduce {case} x{world}: busbw {bandwidth['busbw_GBps']:.2f} GB/s")
    wrong = {rank["rank"]: rank["cases"][case]["mismatches"] for rank in nccl["ranks"]}
    wrong = {rank: count for rank, count in wrong.items() if count}
    assert not wrong, (
        f"all_reduce({case}) over {world} GPUs gave a wrong sum; elements wrong per rank: {wrong}. "
        "NCCL or the GPU interconnect corrupts data: try NCCL_P2P_DISABLE=1 to narrow it down"
    )


def test_all_reduce_spans_several_gpus(nccl: dict[str, Any], gpu: GpuStatus) -> None:
    if gpu.device_count < 2:
        pytest.skip(f"{gpu.device_count} GPU visible: the multi-rank all_reduce needs 2 or more")
    world = int(nccl["world_size"])
    indices = sorted(rank["device_index"] for rank in nccl["ranks"])
    assert world == gpu.device_count and indices == list(range(world)), (
        f"NCCL ran {world} ranks on devices {indices} for {gpu.device_count} visible GPUs: expected one rank per GPU"
    )


def test_nccl_finds_its_ib_transport_library(
    nccl: dict[str, Any], nccl_run: ScriptResult, record_property: Any
) -> None:
    """NCCL_DEBUG=INFO: the IB transport loaded (here, with no adapter: "No device found"), not "Failed to open
    libibverbs", which means NCCL falls back to TCP sockets between nodes without a word."""
    transport = cluster.nccl_transport(nccl_run.stdout + nccl_run.stderr)
    assert not transport.ib_library_missing, (
        "NCCL could not open libibverbs: across nodes it would use TCP sockets silently; install libibverbs1, "
        "ibverbs-providers and librdmacm1 in the image"
    )
    if not transport.ib_no_device and transport.network is None and "NET/IB" not in nccl_run.stdout:
        pytest.skip(
            f"NCCL said nothing of its IB transport for {nccl['world_size']} rank(s) (NCCL_DEBUG set below INFO?)"
        )
    record_property("nccl_ib", "no device" if transport.ib_no_device else (transport.network or "IB found"))
