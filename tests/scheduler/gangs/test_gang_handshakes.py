"""The replacement handshake as an awaited coroutine of the application's actor.

Each replacement is one handler: it releases the placeholder with ``PLACEHOLDER_REPLACED``,
awaits the RM's confirmation (the actor's turn ends; the core goes on), then swaps
placeholder and real allocation in one step. These tests send confirmations in any order,
twice, late and never, and end handshakes by removing the application or re-registering
the RM, through the public API on a manual clock.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler import si

from ..conftest import Driver, app, ask, node
from .test_gang import REPLACED, confirm, ph_data, placed_gang, reals, released

pytestmark = pytest.mark.asyncio

HANDSHAKE = 60.0


def real_allocs(d: Driver, app_id: str = "gang") -> list[si.Allocation]:
    return [a for a in d.allocs(app_id) if not a.placeholder]


async def app_actor_stats(d: Driver, app_id: str = "gang") -> list[dict[str, Any]]:
    """Mailbox counters of the live actors of ``app_id`` (one per submission of the id)."""
    actors = (await d.core.state_dump())["actors"]
    return [s for name, s in actors.items() if f"/app:{app_id}#" in name]


async def suspended(d: Driver, app_id: str = "gang") -> int:
    return sum(s["suspended"] for s in await app_actor_stats(d, app_id))


async def allocated_on(d: Driver, node_id: str) -> dict[str, int]:
    info = await d.core.get_node("default", node_id)
    return {k: v for k, v in info["allocated"].items() if v}


async def test_confirmations_in_any_order_complete_each_own_handshake(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1", memory=20, vcore=2), node("n2", memory=20, vcore=2))
    phs = await placed_gang(d, members=4)
    node_of = {p.uuid: p.node_id for p in phs}
    await d.asks(*reals("gang", 4))
    await d.settle()
    pending = released(d, REPLACED)
    assert len(pending) == 4
    assert await suspended(d) == 4  # four handlers wait, nothing else does

    done: list[str] = []
    for rel in [pending[2], pending[0], pending[3], pending[1]]:
        await confirm(d, [rel])
        await d.settle()
        done.append(rel.uuid)
        got = real_allocs(d)
        assert len(got) == len(done)  # one real allocation per confirmation, no more
        assert got[-1].node_id == node_of[rel.uuid]  # on the confirmed placeholder's node
    assert await suspended(d) == 0
    assert (await ph_data(d, "gang"))["replaced"] == 4
    assert await allocated_on(d, "n1") == {"memory": 20, "vcore": 2}
    assert await allocated_on(d, "n2") == {"memory": 20, "vcore": 2}


async def test_a_confirmation_sent_twice_in_one_request_swaps_once(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"))
    (ph,) = await placed_gang(d, members=1)
    await d.asks(*reals("gang", 1))
    await d.settle()
    (rel,) = released(d, REPLACED)
    await confirm(d, [rel, rel])  # the second finds the handshake settled, not yet swapped
    await d.settle()
    await confirm(d, [rel])  # and one after the swap finds no placeholder at all
    await d.settle()
    (real,) = real_allocs(d)
    assert real.node_id == ph.node_id
    assert await allocated_on(d, "n1") == {"memory": 10, "vcore": 1}
    assert (await ph_data(d, "gang"))["replaced"] == 1
    info = await d.core.get_application("default", "gang")
    assert [a["placeholder"] for a in info["allocations"]] == [False]


async def test_a_handshake_never_confirmed_waits_without_holding_up_the_core(
    driver: Driver,
) -> None:
    d = driver
    await d.nodes(node("n1"))
    await placed_gang(d, members=2)
    await d.asks(*reals("gang", 1))
    await d.apps(app("other"))
    await d.settle()  # returns: a handler waiting for the RM is not work in flight
    assert await suspended(d) == 1

    await d.clock.advance(3600)
    await d.settle()
    overdue = [e for e in d.rm.events if e.reason == "PlaceholderReleaseOverdue"]
    assert len(overdue) == 1  # said once, then the wait goes on
    assert await suspended(d) == 1
    assert real_allocs(d) == []
    # The placeholder keeps its room until the RM answers; everything else goes on.
    assert await allocated_on(d, "n1") == {"memory": 20, "vcore": 2}
    await d.asks(ask("o-1", "other"))
    await d.settle()
    assert [a.node_id for a in d.allocs("other")] == ["n1"]


async def test_removing_the_application_ends_its_waiting_handshakes(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"))
    await placed_gang(d, members=2)
    await d.asks(*reals("gang", 2))
    await d.settle()
    assert await suspended(d) == 2
    await d.remove_apps("gang")
    await d.settle()
    assert await suspended(d) == 0  # the placeholders went: each handler gave up its ask
    await confirm(d, released(d, REPLACED))  # late confirmations change nothing
    await d.settle()
    assert real_allocs(d) == []
    assert await allocated_on(d, "n1") == {}


async def test_re_registering_the_rm_stops_every_waiting_handshake(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"))
    await placed_gang(d)
    await d.asks(*reals("gang"))
    await d.settle()
    assert await suspended(d) == 3
    await d.register()
    await d.settle()
    actors = (await d.core.state_dump())["actors"]
    assert not [name for name in actors if name.startswith("rm:rm-1#1/")]  # the old actors
    assert sum(s["suspended"] for s in actors.values()) == 0
