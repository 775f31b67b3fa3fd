"""Replacing a placeholder with an RM that checks predicates, through the public API.

YuniKorn's ``tryPlaceholderAllocate`` puts a real ask to the predicates on the node of a
free placeholder of its task group (``preReserveConditions``: ``allocate`` is false); a
refused node sends it to the next free placeholder of the group on another node, and when
every one is refused the real ask waits for the next round. Here the next round comes
when the cluster changes (a node update, say).
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
