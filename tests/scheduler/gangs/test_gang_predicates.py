"""Replacing a placeholder with an RM that checks predicates, through the public API.

YuniKorn's ``tryPlaceholderAllocate`` puts a real ask to the predicates on the node of a
free placeholder of its task group (``preReserveConditions``: ``allocate`` is false); a
refused node sends it to the next free placeholder of the group on another node, and when
every one is refused the real ask goes to any node with room the predicates allow
(``allocate`` true), releasing the first placeholder. With no such node it waits for the
next round; here the next round comes when the cluster changes (a node update, say).
"""

from __future__ import annotations

import pytest

import scheduler
from scheduler import si
from scheduler.testing import ManualClock, RecordingCallback

from ..conftest import Driver, ask, node
from .test_gang import REPLACED, TIMEOUT, confirm, placed_gang, reals, released

pytestmark = pytest.mark.asyncio


class Choosy(RecordingCallback):
    """Refuses the (allocation key, node) pairs in ``refused``; records every question."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: set[tuple[str, str]] = set()
        self.asked: list[tuple[str, str, bool]] = []

    async def predicates(self, args: si.PredicatesArgs) -> bool:
        self.asked.append((args.allocation_key, args.node_id, args.allocate))
        return (args.allocation_key, args.node_id) not in self.refused

    def questions(self, key: str) -> list[tuple[str, bool]]:
        return [(n, allocate) for k, n, allocate in self.asked if k == key]


async def one_placeholder_per_node(
    core: scheduler.Core, clock: ManualClock
) -> tuple[Driver, Choosy, list[si.Allocation]]:
    """A gang of three placed on three nodes with room for one member each."""
    rm = Choosy()
    d = Driver(core, clock)
    d.rm = rm
    await d.register()
    await d.nodes(*(node(f"n{i}", memory=10, vcore=1) for i in (1, 2, 3)))
    phs = await placed_gang(d)
    assert sorted(p.node_id for p in phs) == ["n1", "n2", "n3"]
    return d, rm, phs


def real_allocs(d: Driver) -> list[si.Allocation]:
    return [a for a in d.allocs("gang") if not a.placeholder]


async def pending_count(d: Driver, key: str) -> int:
    info = await d.core.get_application("default", "gang")
    return sum(r["pendingCount"] for r in info["requests"] if r["allocationKey"] == key)


async def test_allowed_on_its_placeholders_node_the_handshake_goes_on(
    core: scheduler.Core, clock: ManualClock
) -> None:
    d, rm, phs = await one_placeholder_per_node(core, clock)
    await d.asks(*reals("gang", 1))
    await d.settle()
    # Put to the predicates on the first free placeholder's node, as a reservation check.
    assert rm.questions("gang-real-0") == [(phs[0].node_id, False)]
    (rel,) = released(d, REPLACED)
    assert rel.uuid == phs[0].uuid
    assert not real_allocs(d)  # nothing before the RM confirms
    await confirm(d, [rel])
    await d.settle()
    (real,) = real_allocs(d)
    assert (real.allocation_key, real.node_id) == ("gang-real-0", phs[0].node_id)


async def test_refused_there_the_next_placeholder_on_another_node_is_replaced(
    core: scheduler.Core, clock: ManualClock
) -> None:
    d, rm, phs = await one_placeholder_per_node(core, clock)
    rm.refused = {("gang-real-0", phs[0].node_id)}
    await d.asks(*reals("gang", 1))
    await d.settle()
    assert rm.questions("gang-real-0") == [(phs[0].node_id, False), (phs[1].node_id, False)]
    (rel,) = released(d, REPLACED)
    assert rel.uuid == phs[1].uuid
    await confirm(d, [rel])
    await d.settle()
    (real,) = real_allocs(d)
    assert real.node_id == phs[1].node_id
    info = await d.core.get_application("default", "gang")
    held = {a["uuid"] for a in info["allocations"] if a["placeholder"]}
    assert held == {phs[0].uuid, phs[2].uuid}  # the refused node keeps its placeholder


async def test_refused_everywhere_the_real_ask_waits_for_a_change(
    core: scheduler.Core, clock: ManualClock
) -> None:
    d, rm, phs = await one_placeholder_per_node(core, clock)
    rm.refused = {("gang-real-0", p.node_id) for p in phs}
    await d.asks(*reals("gang", 1))
    await d.settle()
    assert rm.questions("gang-real-0") == [(p.node_id, False) for p in phs]
    assert not released(d, REPLACED)
    assert await pending_count(d, "gang-real-0") == 1
    await clock.advance(10)
    await d.settle()
    assert len(rm.questions("gang-real-0")) == 3  # not asked again while nothing changed

    rm.refused = set()  # the RM would allow it now; a node update wakes the scheduler
    await d.nodes(
        si.NodeInfo(
            node_id="n3",
            action=si.ActionFromRM.UPDATE,
            schedulable_resource=si.Resource.of(memory=10, vcore=1),
        )
    )
    await d.settle()
    assert rm.questions("gang-real-0")[3:] == [(phs[0].node_id, False)]
    (rel,) = released(d, REPLACED)
    assert rel.uuid == phs[0].uuid
    await confirm(d, [rel])
    await d.settle()
    (real,) = real_allocs(d)
    assert (real.allocation_key, real.node_id) == ("gang-real-0", phs[0].node_id)
    assert await pending_count(d, "gang-real-0") == 0


async def test_a_real_ask_larger_than_its_placeholder_is_not_put_to_them_as_one(
    core: scheduler.Core, clock: ManualClock
) -> None:
    """Before any predicates, YuniKorn releases a placeholder smaller than the real ask;
    the ask is then scheduled as a normal ask, and asked about as one."""
    d, rm, phs = await one_placeholder_per_node(core, clock)
    await d.nodes(node("n4", memory=20, vcore=2))
    rm.refused = {("big", p.node_id) for p in phs}
    await d.asks(ask("big", "gang", memory=20, vcore=2, task_group_name="tg"))
    await d.settle()
    assert rm.questions("big") == [("n4", True)]
    (cancelled,) = released(d, TIMEOUT)
    assert cancelled.uuid == phs[0].uuid
    assert not released(d, REPLACED)
    (big,) = real_allocs(d)
    assert (big.allocation_key, big.node_id) == ("big", "n4")


async def test_refused_on_every_placeholders_node_the_ask_goes_to_a_node_they_allow(
    core: scheduler.Core, clock: ManualClock
) -> None:
    """A gang must not stall on a node condition: refused on the node of every free
    placeholder, the real ask is put to the predicates (``allocate`` true) on the other
    nodes with room, goes to the first they allow, and the first placeholder is released
    for it (yunikorn-core v1.2.0 objects/application.go ``tryPlaceholderAllocate``, its
    second part: ``phFit``, ``preAllocateConditions``, the real allocation added to the
    node at once; partition.go ``removeAllocation``: confirmed, the placeholder leaves its
    own node)."""
    d, rm, phs = await one_placeholder_per_node(core, clock)
    await d.nodes(node("n4", memory=10, vcore=1), node("n5", memory=10, vcore=1))
    rm.refused = {("gang-real-0", p.node_id) for p in phs} | {("gang-real-0", "n4")}
    await d.asks(*reals("gang", 1))
    await d.settle()
    asked = rm.questions("gang-real-0")
    assert asked[:3] == [(p.node_id, False) for p in phs]
    assert asked[-1] == ("n5", True) and asked[3:-1] in ([], [("n4", True)])
    (rel,) = released(d, REPLACED)
    assert rel.uuid == phs[0].uuid
    assert not real_allocs(d)  # nothing before the RM confirms
    assert (await core.get_node("default", "n5"))["allocated"]["memory"] == 10  # room kept
    await confirm(d, [rel])
    await d.settle()
    (real,) = real_allocs(d)
    assert (real.allocation_key, real.node_id) == ("gang-real-0", "n5")
    assert (await core.get_node("default", phs[0].node_id))["allocated"].get("memory", 0) == 0
    info = await core.get_application("default", "gang")
    held = {a["uuid"] for a in info["allocations"] if a["placeholder"]}
    assert held == {phs[1].uuid, phs[2].uuid}
    assert await pending_count(d, "gang-real-0") == 0


async def test_the_node_held_for_a_moved_replacement_goes_the_ask_waits_again(
    core: scheduler.Core, clock: ManualClock
) -> None:
    """The node the real allocation went to is removed before the RM confirms: the RM is
    told nothing of an allocation it never had, the ask is pending again, and the
    confirmed placeholder's release is an ordinary one."""
    d, rm, phs = await one_placeholder_per_node(core, clock)
    await d.nodes(node("n4", memory=10, vcore=1))
    rm.refused = {("gang-real-0", p.node_id) for p in phs}
    await d.asks(*reals("gang", 1))
    await d.settle()
    (rel,) = released(d, REPLACED)
    await d.nodes(si.NodeInfo(node_id="n4", action=si.ActionFromRM.DECOMISSION))
    await d.settle()
    assert [r.uuid for r in d.rm.released] == [rel.uuid]  # nothing about the held one
    assert await pending_count(d, "gang-real-0") == 1
    await confirm(d, [rel])
    await d.settle()
    assert not real_allocs(d)
    info = await core.get_application("default", "gang")
    assert {a["uuid"] for a in info["allocations"]} == {phs[1].uuid, phs[2].uuid}
