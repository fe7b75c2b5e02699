"""The multi_node suite's command lines and readings (torchimages.smoke.cluster); `docker inspect` answers and
NCCL's output are literals here."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from torchimages.engine import nodes
from torchimages.smoke import cluster

PLAIN = {"Config": {"User": "1000:0"}, "HostConfig": {"ShmSize": 2147483648, "ReadonlyRootfs": False}}


def test_nodes_run_as_the_suite_container_was_run() -> None:
    assert cluster.inherited_options(PLAIN) == ["--user", "1000:0", "--shm-size", "2147483648"]
    read_only = {
        "Config": {"User": "123456:0"},
        "HostConfig": {"ReadonlyRootfs": True, "Tmpfs": {"/tmp": "exec", "/home/torch": "exec", "/run": ""}},
    }
    assert cluster.inherited_options(read_only) == [
        "--user",
        "123456:0",
        "--read-only",
        "--tmpfs",
        "/home/torch:exec",
        "--tmpfs",
        "/run",
        "--tmpfs",
        "/tmp:exec",
    ]
    assert cluster.inherited_options({}) == []


def test_one_gpu_per_node_the_way_the_suite_container_got_its_gpus() -> None:
    runtime = {"HostConfig": {"DeviceRequests": [{"Driver": "", "Count": -1, "Capabilities": [["gpu"]]}]}}
    assert cluster.gpu_options(runtime, 1) == ["--gpus", "device=1"]
    nodes = ["/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    by_hand = {"HostConfig": {"Devices": [{"PathOnHost": n, "PathInContainer": n} for n in nodes]}}
    assert cluster.gpu_options(by_hand, 1) == [
        "--device",
        "/dev/nvidiactl",
        "--device",
        "/dev/nvidia1",
        "--device",
        "/dev/nvidia-uvm",
        "--device",
        "/dev/nvidia-uvm-tools",
    ]
    assert cluster.gpu_options({"HostConfig": {"Devices": [{"PathOnHost": "/dev/fuse"}]}}, 0) == []
    assert cluster.gpu_options(PLAIN, 0) == []


def test_a_node_is_labelled_named_and_reachable_by_its_host_name() -> None:
    command = nodes.run_command("docker", "img:1", "n-node1", "node1", "net", "abc", ["--user", "5:0"], "SCRIPT")
    assert command[:2] == ["docker", "run"] and "--detach" in command
    pairs = dict(itertools.pairwise(command[2:]))
    assert pairs["--name"] == "n-node1" and pairs["--hostname"] == "node1" and pairs["--network-alias"] == "node1"
    assert pairs["--network"] == "net" and pairs["--label"] == f"{nodes.RUN_LABEL}=abc" and pairs["--user"] == "5:0"
    assert command[-4:] == ["/bin/sh", "img:1", "-c", "SCRIPT"]


def test_a_later_node_finds_node0_by_the_address_docker_inspect_gives() -> None:
    """Where the engine's embedded DNS does not answer (dockerd --iptables=false, as on the GPU machine's
    harness), the later nodes get node0's address by --add-host, read from `docker inspect` (its JSON here)."""
    inspected = '[{"NetworkSettings": {"Networks": {"net": {"IPAddress": "172.18.0.2"}, "other": {}}}}]'
    assert nodes.address_on(inspected, "net") == "172.18.0.2"
    assert nodes.address_on(inspected, "other") is None
    assert nodes.address_on("", "net") is None and nodes.address_on("[]", "net") is None
    hostile = '[{"NetworkSettings": {"Networks": {"net": {"IPAddress": "1.2.3.4 --privileged"}}}}]'
    assert nodes.address_on(hostile, "net") is None


@pytest.mark.parametrize("backend", ["gloo", "nccl"])
def test_each_node_runs_the_probe_under_torchrun_with_a_c10d_rendezvous_on_node0(backend: str) -> None:
    script = cluster.node_command("python", 2, "run42", backend)
    assert "python -m torch.distributed.run --nnodes 2 --nproc-per-node 1" in script
    assert f"--rdzv-backend c10d --rdzv-endpoint node0:{cluster.PORT} --rdzv-id run42" in script
    assert f"script.py {backend}" in script and "dist.init_process_group(backend" in script
    assert ('NCCL_DEBUG="${NCCL_DEBUG:-INFO}"' in script) == (backend == "nccl")
    assert 'NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"' in script


def test_host_names_are_what_the_rendezvous_endpoint_names() -> None:
    assert cluster.hostnames(2) == ["node0", "node1"]
    assert "node0:" in cluster.torchrun("python", 2, "x")


def test_nccl_output_says_whether_verbs_were_found() -> None:
    found = (
        "node0:1:1 [0] NCCL INFO NET/IB : No device found.\n"
        "node0:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:172.18.0.2<0>\n"
        "node0:1:1 [0] NCCL INFO Using network Socket\n"
    )
    assert cluster.nccl_transport(found) == cluster.Transport(False, True, "Socket")
    missing = "node0:1:1 [0] NCCL INFO Failed to open libibverbs.so[.1]\nNCCL INFO Using network Socket\n"
    assert cluster.nccl_transport(missing) == cluster.Transport(True, False, "Socket")
    assert cluster.nccl_transport("") == cluster.Transport(False, False, None)


def test_a_node_describes_its_status_and_output_end() -> None:
    ended = nodes.Node("n0", "node0", 1, "x" * 5000 + "THE END", None)
    assert "exit status 1" in ended.describe() and ended.describe().endswith("THE END")
    assert "did not end in time" in nodes.Node("n1", "node1", None, "", None).describe()


def test_no_docker_cli_is_a_run_error_not_a_traceback(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-docker")
    run = nodes.run_nodes("img:1", [nodes.NodeSpec("node0")], "true", docker=missing)
    assert run.nodes == () and missing in run.error and "No such file" in run.error


# --- the verdict on the nodes' answers (the suite's check_all_reduce) -----------------------------------------

EXACT = {"exact": True, "wrong": 0, "numel": 1024, "ms": 1.0, "time_us": 10.0, "algbw_GBps": 1.0}


def answer(rank: int, world: int, hosts: list[str]) -> dict[str, object]:
    """One node's answer, as the multi_node probe prints it: every case exact (a world of 1 sums only itself)."""
    return {"rank": rank, "world_size": world, "backend": "gloo", "host": hosts[0], "hosts": hosts, "init_s": 0.1,
            "cases": {"4KiB-fp32": EXACT, "64MiB-fp32": EXACT}}  # fmt: skip


def cluster_run(*payloads: dict[str, object]) -> nodes.ClusterRun:
    found = tuple(nodes.Node(f"c{n}", f"node{n}", 0, "ok", p) for n, p in enumerate(payloads))
    return nodes.ClusterRun("run", "net", found)


def test_two_ranks_of_one_world_pass() -> None:
    from torchimages.smoke.suites import test_multi_node as suite

    both = ["node0", "node1"]
    answers = suite.check_all_reduce(cluster_run(answer(0, 2, both), answer(1, 2, both)), "gloo")
    assert [a["rank"] for a in answers] == [0, 1]


@pytest.mark.parametrize(
    "payloads",
    [
        # each container a world of its own: both rank 0 of world size 1 (no rendezvous between them)
        (answer(0, 1, ["node0"]), answer(0, 1, ["node1"])),
        # ranks 0 and 1, yet each says world size 1: its all_reduce summed itself alone
        (answer(0, 1, ["node0", "node1"]), answer(1, 1, ["node0", "node1"])),
    ],
)
def test_two_ranks_each_reporting_world_size_1_fail(payloads: tuple[dict[str, object], ...]) -> None:
    """Exact sums prove nothing in a world of 1 (the sum is the rank's own tensor): the check must fail."""
    from torchimages.smoke.suites import test_multi_node as suite

    with pytest.raises(AssertionError):
        suite.check_all_reduce(cluster_run(*payloads), "gloo")
