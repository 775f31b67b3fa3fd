"""Root's max is the partition's node capacity (YuniKorn's ``updatePartitionResource``).

It follows nodes as they come, change size, drain and go; it is never configured; quota
checks count it like any other queue max, and the gang rules leave it out.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler import si

from ..conftest import QUEUES, RM, Driver, app, ask, node

pytestmark = pytest.mark.asyncio


def update(node_id: str, **res: int) -> si.NodeInfo:
    return si.NodeInfo(
        node_id=node_id, action=si.ActionFromRM.UPDATE, schedulable_resource=si.Resource.of(**res)
    )


def action(node_id: str, what: si.ActionFromRM) -> si.NodeInfo:
    return si.NodeInfo(node_id=node_id, action=what)


async def root(d: Driver) -> dict[str, Any]:
    return await d.core.get_queue("default", "root")


async def root_max(d: Driver) -> dict[str, int]:
    queue = await root(d)
    [partition] = await d.core.get_partitions()
    assert partition["capacity"]["capacity"] == queue["maxResource"]  # one total, two views
    return dict(queue["maxResource"])


async def test_root_max_follows_the_nodes(driver: Driver) -> None:
    d = driver
    assert await root_max(d) == {}  # no nodes: no limit shown
    await d.nodes(node("n1", memory=100, vcore=10), node("n2", memory=50, vcore=5))
    await d.settle()
    assert await root_max(d) == {"memory": 150, "vcore": 15}
    await d.nodes(update("n1", memory=200, vcore=10))
    await d.settle()
    assert await root_max(d) == {"memory": 250, "vcore": 15}
    await d.nodes(action("n2", si.ActionFromRM.DRAIN_NODE))
    await d.settle()
    assert await root_max(d) == {"memory": 250, "vcore": 15}  # a draining node still counts
    await d.nodes(action("n2", si.ActionFromRM.DECOMISSION))
    await d.settle()
    assert await root_max(d) == {"memory": 200, "vcore": 10}
    await d.nodes(action("n1", si.ActionFromRM.DECOMISSION))
    await d.settle()
    assert await root_max(d) == {}


async def test_a_new_resource_name_joins_root_max_and_leaves_with_its_node(driver: Driver) -> None:
    d = driver
    gpu_node = si.NodeInfo(
        node_id="g1",
        action=si.ActionFromRM.CREATE,
        schedulable_resource=si.Resource.of(memory=10, vcore=1, gpu=4),
    )
    await d.nodes(node("n1"), gpu_node)
    await d.settle()
    assert await root_max(d) == {"memory": 110, "vcore": 11, "gpu": 4}
    await d.nodes(action("g1", si.ActionFromRM.DECOMISSION))
    await d.settle()
    assert await root_max(d) == {"memory": 100, "vcore": 10}


async def test_a_configuration_change_keeps_root_max(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"))
    await d.settle()
    new = QUEUES.replace("max: {memory: 1000, vcore: 100}", "max: {memory: 2000, vcore: 100}")
    await d.core.update_configuration(si.UpdateConfigurationRequest(rm_id=RM, config=new))
    await d.settle()
    assert await root_max(d) == {"memory": 100, "vcore": 10}
    assert (await d.core.get_queue("default", "root.a"))["maxResource"]["memory"] == 2000


async def test_removing_a_node_takes_its_capacity_and_its_allocations(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"), node("n2"))
    await d.apps(app("a1", queue="root.b"))
    await d.asks(ask("x", "a1", memory=60))
    await d.settle()
    [alloc] = d.allocs("a1")
    await d.nodes(action(alloc.node_id, si.ActionFromRM.DECOMISSION))
    await d.settle()
    queue = await root(d)
    assert queue["maxResource"] == {"memory": 100, "vcore": 10}
    assert queue["allocatedResource"] == {}
    assert [r.uuid for r in d.rm.released] == [alloc.uuid]


async def _overcommitted(d: Driver) -> None:
    """n1 shrinks below what it holds (80 of 50); n2 (100) is empty: root has 150 - 80 = 70
    left, though n2 alone has room for 100."""
    await d.nodes(node("n1", memory=100, vcore=10))
    await d.apps(app("old", queue="root.b"), app("new", queue="root.b"))
    await d.asks(ask("o", "old", memory=80))
    await d.settle()
    await d.nodes(update("n1", memory=50, vcore=10), node("n2", memory=100, vcore=10))
    await d.asks(ask("big", "new", memory=80))
    await d.settle()


async def test_root_max_limits_an_ask_that_a_node_has_room_for(driver: Driver) -> None:
    d = driver
    await _overcommitted(d)
    assert (await root(d))["maxResource"] == {"memory": 150, "vcore": 20}
    assert d.allocs("new") == []  # 80 + 80 > 150
    assert (await d.core.get_node("default", "n2"))["available"]["memory"] == 100
    await d.clock.advance(5)
    assert (await d.core.get_node("default", "n2"))["reservations"] == []  # no headroom
    await d.release(*d.allocs("old"))
    await d.settle()
    assert [(a.allocation_key, a.node_id) for a in d.allocs("new")] == [("big", "n2")]


async def test_root_max_growing_wakes_what_it_held_back(driver: Driver) -> None:
    d = driver
    await _overcommitted(d)
    assert d.allocs("new") == []
    await d.nodes(update("n1", memory=100, vcore=10))  # root: 200, 120 left
    await d.settle()
    assert [(a.allocation_key, a.node_id) for a in d.allocs("new")] == [("big", "n2")]


async def test_a_gang_larger_than_the_cluster_places_what_fits(driver: Driver) -> None:
    """Root's max stays out of the gang rules (YuniKorn's ``GetMaxQueueSet``): a gang
    larger than every node together is accepted and places what fits; it does not wait
    for its whole total."""
    d = driver
    await d.nodes(node("n1", memory=30, vcore=10))
    await d.apps(app("gang", queue="root.b", placeholder_ask=si.Resource.of(memory=50, vcore=5)))
    placeholders = [
        ask(f"ph-{i}", "gang", placeholder=True, task_group_name="tg") for i in range(5)
    ]
    await d.asks(*placeholders)
    await d.settle()
    assert d.rm.accepted_apps == ["gang"]
    assert len(d.allocs("gang")) == 3  # 3 x 10 of 30: the other two wait
