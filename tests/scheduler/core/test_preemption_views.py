"""Preemption as the views show it, through real preemptions driven as in test_preemption:
YuniKorn v1.8's ``preempted`` and ``originator`` on allocations, ``triggeredPreemption``
and ``originator`` on pending asks, the queues' ``preemptingResource``, and the
partition's preemptions in flight with their totals (``Core.query(p, "preemptions")``)."""

from __future__ import annotations

from typing import Any

import pytest

from ..conftest import Driver, app, ask, node
from .test_preemption import (
    NO_GUARANTEES,
    confirm,
    daemon,
    full_cluster,
    preemptor,
    victims,
)

pytestmark = pytest.mark.asyncio

Json = Any


async def application(d: Driver, app_id: str) -> Json:
    return await d.core.get_application("default", app_id)


async def preemptions(d: Driver) -> Json:
    return await d.core.query("default", "preemptions")


async def preempting(d: Driver, queue: str) -> dict[str, int]:
    info = await d.core.get_queue("default", queue)
    return {k: v for k, v in info["preemptingResource"].items() if v}


def totals(**kw: int) -> dict[str, int]:
    out = dict.fromkeys(
        (
            "started",
            "requiredNode",
            "confirmed",
            "timedOut",
            "cancelled",
            "victims",
            "victimsConfirmed",
        ),
        0,
    )
    out.update(kw)
    return out


async def test_fields_before_during_and_after_a_preemption(driver: Driver) -> None:
    d = driver
    await full_cluster(d)
    await d.asks(preemptor("s-0", "s"))
    await d.settle()
    (request,) = (await application(d, "s"))["requests"]
    assert (request["triggeredPreemption"], request["originator"]) == (False, False)
    greedy = await application(d, "g")
    assert {a["preempted"] for a in greedy["allocations"]} == {False}
    assert await preemptions(d) == {"inFlight": [], "totals": totals()}

    await d.clock.advance(30)
    await d.settle()
    (victim,) = victims(d)
    (request,) = (await application(d, "s"))["requests"]
    assert request["triggeredPreemption"] is True
    greedy = await application(d, "g")
    marked = {a["uuid"]: a for a in greedy["allocations"] if a["preempted"]}
    assert list(marked) == [victim.uuid]
    assert marked[victim.uuid]["releasePending"] == "PREEMPTED_BY_SCHEDULER"
    on_node = (await d.core.get_node("default", "n1"))["allocations"]
    assert [a["uuid"] for a in on_node if a["preempted"]] == [victim.uuid]
    assert await preempting(d, "root.greedy") == {"memory": 10}
    assert await preempting(d, "root") == {"memory": 10}  # YuniKorn counts up the chain
    assert await preempting(d, "root.starved") == {}
    (triggered,) = [e for e in d.rm.events if e.reason == "PreemptionTriggered"]
    assert await preemptions(d) == {
        "inFlight": [
            {
                "applicationID": "s",
                "allocationKey": "s-0",
                "queueName": "root.starved",
                "nodeID": "n1",
                "requiredNode": False,
                "startTime": triggered.timestamp_nano,
                "victimsTotal": 1,
                "victims": [
                    {
                        "uuid": victim.uuid,
                        "allocationKey": victim.allocation_key,
                        "applicationId": "g",
                        "queueName": "root.greedy",
                    }
                ],
            }
        ],
        "totals": totals(started=1, victims=1),
    }

    await confirm(d, [victim])
    await d.settle()
    assert (await application(d, "s"))["requests"] == []  # allocated: no longer pending
    greedy = await application(d, "g")
    assert victim.uuid not in {a["uuid"] for a in greedy["allocations"]}
    assert {a["preempted"] for a in greedy["allocations"]} == {False}
    assert await preempting(d, "root.greedy") == {} == await preempting(d, "root")
    assert await preemptions(d) == {
        "inFlight": [],
        "totals": totals(started=1, confirmed=1, victims=1, victimsConfirmed=1),
    }


async def test_a_preemptor_of_two_shows_it_triggered_one_while_the_rest_waits(
    driver: Driver,
) -> None:
    d = driver
    await full_cluster(d)
    await d.asks(preemptor("s-0", "s", count=2))
    await d.settle()
    await d.clock.advance(30)
    await d.settle()
    (request,) = (await application(d, "s"))["requests"]
    assert request["triggeredPreemption"] is True
    first = victims(d)
    await confirm(d, first)
    await d.settle()
    (info,) = (await preemptions(d))["inFlight"]  # the second allocation preempts in turn
    assert [v["uuid"] for v in info["victims"]] != [v.uuid for v in first]
    (request,) = (await application(d, "s"))["requests"]
    assert (request["pendingCount"], request["triggeredPreemption"]) == (1, True)


async def test_originators_show_on_their_asks_and_allocations(driver: Driver) -> None:
    d = driver
    await full_cluster(d)
    await d.asks(ask("boss", "s", memory=10, vcore=0, originator=True))
    await d.settle()
    (request,) = (await application(d, "s"))["requests"]  # the cluster is full
    assert request["originator"] is True
    await d.release(d.allocs("g")[0])
    await d.settle()
    (alloc,) = (await application(d, "s"))["allocations"]
    assert (alloc["originator"], alloc["preempted"]) == (True, False)
    assert {a["originator"] for a in (await application(d, "g"))["allocations"]} == {False}


async def test_a_timeout_is_counted_and_its_victim_stays_preempted_until_it_goes(
    driver: Driver,
) -> None:
    d = driver
    await full_cluster(d)
    await d.asks(preemptor("s-0", "s"))
    await d.settle()
    await d.clock.advance(30)
    await d.settle()
    (first,) = victims(d)
    await d.clock.advance(60)  # Timeouts.preemption: the ask tries again
    await d.settle()
    second = victims(d)[-1]
    info = await preemptions(d)
    assert info["totals"] == totals(started=2, timedOut=1, victims=2)
    (again,) = info["inFlight"]
    assert [v["uuid"] for v in again["victims"]] == [second.uuid]
    greedy = await application(d, "g")
    assert {a["uuid"] for a in greedy["allocations"] if a["preempted"]} == {
        first.uuid,
        second.uuid,
    }
    assert await preempting(d, "root.greedy") == {"memory": 20}  # the late one still leaves
    await confirm(d, [first, second])
    await d.settle()
    assert await preemptions(d) == {
        "inFlight": [],
        "totals": totals(started=2, confirmed=1, timedOut=1, victims=2, victimsConfirmed=2),
    }
    assert await preempting(d, "root.greedy") == {}


async def test_an_ask_withdrawn_is_counted_cancelled(driver: Driver) -> None:
    d = driver
    await full_cluster(d)
    await d.asks(preemptor("s-0", "s"))
    await d.settle()
    await d.clock.advance(30)
    await d.settle()
    await d.release_asks("s", "s-0")
    await d.settle()
    assert await preemptions(d) == {
        "inFlight": [],
        "totals": totals(started=1, cancelled=1, victims=1),
    }


async def test_a_required_node_preemption_shows_its_victims_left(driver: Driver) -> None:
    d = driver
    await d.register(NO_GUARANTEES)
    await d.nodes(node("n1", memory=50, vcore=100), node("n2", memory=50, vcore=100))
    await d.apps(app("w", "root.apps"), app("ds", "root.system"))
    await d.asks(*(ask(f"w-{i}", "w", memory=10, vcore=0) for i in range(10)))
    await d.settle()
    await d.asks(daemon("ds-n2", "ds", "n2", memory=20))
    await d.settle()
    first, second = victims(d)
    await confirm(d, [first])
    await d.settle()
    (info,) = (await preemptions(d))["inFlight"]
    assert (info["nodeID"], info["requiredNode"], info["victimsTotal"]) == ("n2", True, 2)
    assert [v["uuid"] for v in info["victims"]] == [second.uuid]
    assert (await preemptions(d))["totals"] == totals(
        started=1, requiredNode=1, victims=2, victimsConfirmed=1
    )
    (request,) = (await application(d, "ds"))["requests"]
    assert (request["requiredNodeId"], request["triggeredPreemption"]) == ("n2", True)


async def test_the_state_dump_holds_each_partitions_preemptions(driver: Driver) -> None:
    d = driver
    await full_cluster(d)
    await d.asks(preemptor("s-0", "s"))
    await d.settle()
    await d.clock.advance(30)
    await d.settle()
    for detail in (True, False):
        (part,) = (await d.core.state_dump(detail=detail))["partitions"]
        assert part["preemptions"] == await preemptions(d)
        assert len(part["preemptions"]["inFlight"]) == 1


async def test_removing_the_preemptor_ends_its_preemption(driver: Driver) -> None:
    d = driver
    await full_cluster(d)
    await d.asks(preemptor("s-0", "s"))
    await d.settle()
    await d.clock.advance(30)
    await d.settle()
    await d.remove_apps("s")
    await d.settle()
    info = await preemptions(d)
    assert info["inFlight"] == []
    assert info["totals"]["cancelled"] == 1
