"""Two nodes on one machine: two containers of the image on a network of their own, `torchrun --nnodes 2
--nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint node0:29400`, an all_reduce across them with exact
sums (real rendezvous, real sockets between two network namespaces). gloo on the CPU always; NCCL, one GPU
per container, where two GPUs are visible. The containers share the suite container's user, read-only root,
tmpfs mounts and /dev/shm size; they and their network are removed whatever happens (smoke.cluster)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import testinfra.host

from torchimages.smoke import cluster
from torchimages.smoke.diagnosis import GpuQuery
from torchimages.smoke.document import SmokeSpec
from torchimages.smoke.hosts import container_inspect, is_docker

pytestmark = [
    pytest.mark.multi_node,
    # Per-test properties are outside the xunit2 schema, yet JUnit readers show them.
    pytest.mark.filterwarnings("ignore:record_property is incompatible:pytest.PytestWarning"),
]
NODES = 2


@pytest.fixture(scope="module")
def inspected(host: testinfra.host.Host, spec: SmokeSpec) -> dict[str, Any]:
    """The suite container's `docker inspect`: the nodes are containers of its image, run the way it was."""
    if not is_docker(host) or spec.image is None:
        pytest.skip("multi_node starts containers of an image: it needs the docker backend and an image")
    text = container_inspect(host, "{{json .}}")
    assert text, "cannot read the suite container's configuration (docker inspect)"
    return dict(json.loads(text))


def image_of(inspected: dict[str, Any], spec: SmokeSpec) -> str:
    """The image by its id (a temporary reference may be retagged meanwhile), else the spec's reference."""
    return str(inspected.get("Image") or spec.image)


def check_all_reduce(run: cluster.ClusterRun, backend: str) -> list[dict[str, Any]]:
    """Both nodes exited 0, each reported, in distinct containers, with exact sums; their answers."""
    assert not run.error, f"the nodes did not start: {run.error}"
    assert len(run.nodes) == NODES, f"{len(run.nodes)} of {NODES} nodes ran"
    failed = [node.describe() for node in run.nodes if node.returncode != 0 or not node.payload]
    assert not failed, f"{backend} all_reduce across {NODES} containers failed:\n" + "\n".join(failed)
    answers = [dict(node.payload) for node in run.nodes]
    errors = [
        f"{a.get('rank')}: {a['error']}\n    " + "\n    ".join(a.get("trace", [])) for a in answers if "error" in a
    ]
    assert not errors, "ranks failed:\n" + "\n".join(errors)
    assert sorted(a["rank"] for a in answers) == list(range(NODES)), answers
    assert all(a["world_size"] == NODES for a in answers), answers
    hosts = answers[0]["hosts"]
    assert len(set(hosts)) == NODES, f"the ranks did not run in {NODES} distinct containers: host names {hosts}"
    wrong = {
        f"rank {a['rank']} {case}": r["wrong"] for a in answers for case, r in a["cases"].items() if not r["exact"]
    }
    assert not wrong, f"{backend} all_reduce gave wrong sums (elements wrong per case): {wrong}"
    return answers


def test_gloo_all_reduce_across_two_containers(
    inspected: dict[str, Any], spec: SmokeSpec, python_exe: str, record_property: Any
) -> None:
    options = cluster.inherited_options(inspected)
    run = cluster.run(image_of(inspected, spec), python_exe, "gloo", [options] * NODES)
    answers = check_all_reduce(run, "gloo")
    record_property("gloo_init_s", max(a["init_s"] for a in answers))


def test_nccl_all_reduce_across_two_containers_one_gpu_each(
    inspected: dict[str, Any],
    spec: SmokeSpec,
    python_exe: str,
    gpu_query: GpuQuery,
    request: pytest.FixtureRequest,
    record_property: Any,
) -> None:
    if spec.cuda is None:
        pytest.skip("NCCL across containers: a CPU-only torch has no NCCL (the gloo test ran)")
    request.getfixturevalue("gpu")  # skips (fails with --require-gpu) naming why no GPU is usable
    visible = len(gpu_query.names) or sum(node[len("/dev/nvidia") :].isdigit() for node in gpu_query.device_nodes)
    if visible < NODES:
        pytest.skip(f"NCCL across containers needs {NODES} GPUs, one per container; {visible} visible here")
    common = cluster.inherited_options(inspected)
    per_node = [common + cluster.gpu_options(inspected, index) for index in range(NODES)]
    run = cluster.run(image_of(inspected, spec), python_exe, "nccl", per_node)
    answers = check_all_reduce(run, "nccl")
    transports = [cluster.nccl_transport(node.output) for node in run.nodes]
    assert not any(t.ib_library_missing for t in transports), (
        "NCCL could not open libibverbs: the verbs userspace is missing, so it falls back to TCP sockets between "
        "nodes silently; install libibverbs1, ibverbs-providers and librdmacm1\n" + run.nodes[0].describe()
    )
    record_property("nccl_ib_no_device", all(t.ib_no_device for t in transports))
    record_property("nccl_network", ",".join(sorted({t.network or "?" for t in transports})))
    record_property("nccl_init_s", max(a["init_s"] for a in answers))
    # Bus bandwidth and latency by message size across the containers (NCCL over sockets without InfiniBand),
    # named as the multi_gpu suite's single-container figures with the transport after them.
    for case in answers[0]["cases"]:
        time_us = max(float(a["cases"][case]["time_us"]) for a in answers)
        busbw = min(float(a["cases"][case]["algbw_GBps"]) for a in answers) * 2 * (NODES - 1) / NODES
        network = ",".join(sorted({t.network or "?" for t in transports}))
        record_property(f"nccl_busbw_GBps[{case},x{NODES},{network}]", round(busbw, 3))
        record_property(f"nccl_time_us[{case},x{NODES},{network}]", round(time_us, 1))
        print(
            f"NCCL all_reduce across containers {case} x{NODES} ({network}): {time_us:.1f} us, busbw {busbw:.2f} GB/s"
        )
