"""An ask with several pending allocations reserves up to that many nodes, one per pending
allocation (YuniKorn's ``canAskReserve``), and gives one back per allocation."""

from __future__ import annotations

import pytest

from scheduler import si

from ..conftest import Driver, app, ask, node

pytestmark = pytest.mark.asyncio

NODES = ("n1", "n2", "n3")


async def reservations(d: Driver) -> dict[str, list[str]]:
    """The reservations of n1..n3 as their node queries show them."""
    return {n: (await d.core.get_node("default", n))["reservations"] for n in NODES}


async def _three_nodes_partly_used(d: Driver) -> dict[str, si.Allocation]:
    """n1..n3 (memory 100) each hold 60 of app "small"; app "big" asks for 3 x 80: each
    node could hold one, none has room now. Returns small's allocation per node."""
    await d.nodes(*(node(n) for n in NODES))
    await d.apps(app("small", queue="root.b"), app("big", queue="root.b"))
    await d.asks(ask("s", "small", memory=60, count=3))
    await d.settle()
    await d.asks(ask("b", "big", memory=80, count=3))
    await d.settle()
    on = {a.node_id: a for a in d.allocs("small")}
    assert sorted(on) == list(NODES)
    return on


async def test_an_ask_reserves_one_node_per_pending_allocation(driver: Driver) -> None:
    d = driver
    await _three_nodes_partly_used(d)
    await d.clock.advance(1.9)
    assert await reservations(d) == {n: [] for n in NODES}
    await d.clock.advance(0.1)
    assert await reservations(d) == {n: ["big|b"] for n in NODES}
    big = await d.core.get_application("default", "big")
    assert sorted(big["reservations"]) == [f"{n}|b" for n in NODES]
    reserved = [e.object_id for e in d.rm.events if e.reason == "AskReserved"]
    assert reserved == ["b", "b", "b"]
    assert d.allocs("big") == []


async def test_allocations_land_on_reserved_nodes_and_their_reservations_go(
    driver: Driver,
) -> None:
    d = driver
    small = await _three_nodes_partly_used(d)
    await d.clock.advance(2)
    await d.release(small["n2"])
    await d.settle()
    assert [(a.allocation_key, a.node_id) for a in d.allocs("big")] == [("b", "n2")]
    assert await reservations(d) == {"n1": ["big|b"], "n2": [], "n3": ["big|b"]}
    await d.release(small["n1"], small["n3"])
    await d.settle()
    assert sorted(a.node_id for a in d.allocs("big")) == list(NODES)
    assert await reservations(d) == {n: [] for n in NODES}
    big = await d.core.get_application("default", "big")
    assert big["reservations"] == [] and not big["hasReserved"]


async def test_an_allocation_elsewhere_gives_back_one_reservation(driver: Driver) -> None:
    d = driver
    await _three_nodes_partly_used(d)
    await d.clock.advance(2)
    await d.nodes(node("n4"))  # room for one: not reserved, it takes the first allocation
    await d.settle()
    assert [a.node_id for a in d.allocs("big")] == ["n4"]
    left = [n for n, held in (await reservations(d)).items() if held]
    assert len(left) == 2  # two pending, two reserved nodes
    big = await d.core.get_application("default", "big")
    assert big["requests"][0]["pendingCount"] == 2 and len(big["reservations"]) == 2


async def test_an_ask_reserves_no_more_nodes_than_it_has_pending(driver: Driver) -> None:
    d = driver
    await d.nodes(*(node(n) for n in NODES))
    await d.apps(app("small", queue="root.b"), app("big", queue="root.b"))
    await d.asks(ask("s", "small", memory=60, count=3))
    await d.settle()
    await d.asks(ask("b", "big", memory=80, count=2))
    await d.settle()
    await d.clock.advance(2)
    assert sorted(len(held) for held in (await reservations(d)).values()) == [0, 1, 1]
    await d.nodes(node("n4"))  # one allocation on n4: one reservation goes with it
    await d.settle()
    assert sorted(len(held) for held in (await reservations(d)).values()) == [0, 0, 1]


async def test_several_reserved_nodes_freed_at_once_are_all_taken(driver: Driver) -> None:
    d = driver
    small = await _three_nodes_partly_used(d)
    await d.clock.advance(2)
    await d.release(*small.values())  # every reserved node has room now, in one pass
    await d.settle()
    assert sorted(a.node_id for a in d.allocs("big")) == list(NODES)
    assert await reservations(d) == {n: [] for n in NODES}


async def test_releasing_the_ask_frees_every_node_it_reserved(driver: Driver) -> None:
    d = driver
    await _three_nodes_partly_used(d)
    await d.clock.advance(2)
    await d.release_asks("big", "b")
    await d.settle()
    assert await reservations(d) == {n: [] for n in NODES}
    await d.asks(ask("s2", "small", memory=40, count=3))
    await d.settle()
    assert sorted(a.node_id for a in d.allocs("small")[3:]) == list(NODES)
