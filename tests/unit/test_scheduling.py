"""tests/scheduling.py: which group a test runs in, the order of the run, and a stray user of the shared build
refused at collection."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from tests import scheduling


@dataclass
class Item:
    """What arrange reads of a pytest item."""

    nodeid: str
    fixturenames: tuple[str, ...] = ()
    markers: tuple[str, ...] = field(default=())

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


@pytest.mark.parametrize(
    ("nodeid", "group"),
    [
        ("tests/unit/cli/test_cache_command.py::test_x", "unit"),
        ("tests/unit/test_scheduling.py::test_x[a::b]", "unit"),
        ("tests/e2e/test_push.py::test_pushed", "cpu-shared"),
        ("tests/e2e/test_build_cpu.py::test_lock[x]", "cpu-shared"),
        ("tests/e2e/test_build_cuda.py::test_build", "test_build_cuda"),
        ("tests/e2e/test_arm64.py::test_arm64", "test_arm64"),
        ("tests/e2e/test_new_module.py::test_y", "test_new_module"),
    ],
)
def test_each_test_has_the_group_of_its_module_or_the_shared_one(nodeid: str, group: str) -> None:
    assert scheduling.group_of(nodeid) == group


def test_the_run_goes_unit_first_then_the_longest_groups_and_a_rebuild_last_of_its_group() -> None:
    items = [
        Item("tests/e2e/test_signing.py::test_a"),
        Item("tests/e2e/test_push.py::test_re_push", ("cpu_built",), ("rebuilds_shared",)),
        Item("tests/e2e/test_push.py::test_pushed", ("cpu_built",)),
        Item("tests/e2e/test_build_cuda.py::test_b"),
        Item("tests/unit/test_x.py::test_u"),
        Item("tests/e2e/test_any_image.py::test_c", ("cpu_built",)),
        Item("tests/e2e/test_bases.py::test_d"),
    ]
    scheduling.arrange(cast(Any, items))
    assert [i.nodeid.split("/")[-1] for i in items] == [
        "test_x.py::test_u",
        "test_push.py::test_pushed",
        "test_any_image.py::test_c",
        "test_push.py::test_re_push",
        "test_build_cuda.py::test_b",
        "test_signing.py::test_a",
        "test_bases.py::test_d",
    ]


def test_a_user_of_the_shared_build_outside_its_modules_is_refused() -> None:
    items = [Item("tests/e2e/test_bake.py::test_on_the_shared_build", ("cpu_built", "docker_client"))]
    with pytest.raises(pytest.UsageError, match=r"test_bake.py::test_on_the_shared_build uses the shared CPU build"):
        scheduling.arrange(cast(Any, items))


def test_the_scheduler_scopes_by_group() -> None:
    scheduler = scheduling.GroupScheduling.__new__(scheduling.GroupScheduling)
    assert scheduler._split_scope("tests/e2e/test_clusters.py::test_x") == "cpu-shared"
    assert scheduler._split_scope("tests/unit/a/test_b.py::test_c") == "unit"


class Node:
    def __init__(self) -> None:
        self.shutting_down, self.shut = False, False

    def shutdown(self) -> None:
        self.shut = True


def test_a_worker_gets_its_next_group_only_with_one_test_of_its_own_left() -> None:
    """Two tests left (the arm64 group's build and its second test): no next group yet; one left: the next group;
    none in the queue: the worker is shut down."""
    scheduler = scheduling.GroupScheduling.__new__(scheduling.GroupScheduling)
    node = Node()
    given: list[Node] = []
    scheduler.workqueue = {"test_ubuntu_jammy": {"tests/e2e/test_ubuntu_jammy.py::test_a": False}}
    scheduler.assigned_work = {node: {"test_arm64": {"a::build": False, "a::push": False}}}
    scheduler._assign_work_unit = given.append
    scheduler._reschedule(node)
    assert given == []
    scheduler.assigned_work[node]["test_arm64"]["a::build"] = True
    scheduler._reschedule(node)
    assert given == [node] and not node.shut
    scheduler.workqueue = {}
    scheduler._reschedule(node)
    assert node.shut


def test_a_worker_whose_group_has_one_test_gets_the_next_group_at_once() -> None:
    """The initial schedule and a one-test group: one test left is enough to be given the next group."""
    scheduler = scheduling.GroupScheduling.__new__(scheduling.GroupScheduling)
    node = Node()
    given: list[Node] = []
    scheduler.workqueue = {"test_join": {"tests/e2e/test_join.py::test_a": False}}
    scheduler.assigned_work = {node: {"test_jobs": {"tests/e2e/test_jobs.py::test_a": False}}}
    scheduler._assign_work_unit = given.append
    scheduler._reschedule(node)
    assert given == [node] and not node.shut
