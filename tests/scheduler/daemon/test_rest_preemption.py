"""Preemption over HTTP, through real preemptions on a manual clock: the fields of YuniKorn
v1.8's dao (every answer checked against the OpenAPI document), the partition's
preemptions, and the metrics' exposition text before, during and after."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from scheduler import si
from scheduler.daemon._metrics import SchedulingCounters
from scheduler.daemon._rest import make_app
from scheduler.testing import ErrorWatch, Scenario, start_scenario

from ..core.test_preemption import MAY_PREEMPT, PREEMPTED, REQUIRED
from .test_rest import P, get, in_process, scrape

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: starved
            resources:
              guaranteed: {memory: 50}
          - name: greedy
          - name: system
"""
Json = Any


@pytest_asyncio.fixture
async def s() -> AsyncIterator[Scenario]:
    """Two nodes of memory 100, each filled by five allocations of 20 in ``greedy``."""
    with ErrorWatch() as errors:
        async with start_scenario(QUEUES) as scenario:
            await scenario.add_nodes("n1", "n2", memory=100, vcore=100)
            await scenario.submit("g", queue="root.greedy")
            await scenario.ask("g", "g", count=10, memory=20, vcore=0)
            scenario.assert_allocated("g", 10)
            await scenario.submit("s", queue="root.starved")
            await scenario.submit("ds", queue="root.system")
            yield scenario
    assert not errors, errors.report()


@pytest_asyncio.fixture
async def client(s: Scenario) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=make_app(in_process(s)))
    async with httpx.AsyncClient(transport=transport, base_url="http://scheduler") as c:
        yield c


def preemptor(s: Scenario, key: str, app_id: str, **kw: Any) -> si.AllocationAsk:
    return si.AllocationAsk(
        allocation_key=key,
        application_id=app_id,
        partition_name=s.partition,
        resource_ask=si.Resource.of(memory=20, vcore=0),
        preemption_policy=MAY_PREEMPT,
        **kw,
    )


def victims(s: Scenario) -> list[si.AllocationRelease]:
    return s.released(PREEMPTED)


def counters(m: dict[str, Any], name: str) -> dict[str, float]:
    return {next(iter(dict(k).values())): v for k, v in m[name].items()}


@pytest.mark.asyncio
async def test_the_fields_through_a_preemption(s: Scenario, client: httpx.AsyncClient) -> None:
    await s.send_asks(preemptor(s, "s-0", "s"))
    (request,) = (await get(client, f"{P}/application/s", "ApplicationInfo"))["requests"]
    assert (request["triggeredPreemption"], request["originator"]) == (False, False)
    await s.advance(30)  # preemption.delay
    (victim,) = victims(s)
    (request,) = (await get(client, f"{P}/application/s", "ApplicationInfo"))["requests"]
    assert request["triggeredPreemption"] is True
    greedy = await get(client, f"{P}/application/g", "ApplicationInfo")
    assert [a["uuid"] for a in greedy["allocations"] if a["preempted"]] == [victim.uuid]
    queue = await get(client, f"{P}/queue/root.greedy", "QueueInfo")
    assert queue["preemptingResource"] == {"memory": 20}
    info = await get(client, f"{P}/preemptions", "Preemptions")
    (flight,) = info["inFlight"]
    assert (flight["applicationID"], flight["allocationKey"], flight["requiredNode"]) == (
        "s",
        "s-0",
        False,
    )
    assert [v["uuid"] for v in flight["victims"]] == [victim.uuid]
    dump = await get(client, "/ws/v1/fullstatedump", "StateDump")
    assert dump["Preemptions"] == [{"partitionName": "default", **info}]

    await s.confirm_releases()
    greedy = await get(client, f"{P}/application/g", "ApplicationInfo")
    assert not any(a["preempted"] for a in greedy["allocations"])
    assert (await get(client, f"{P}/queue/root.greedy", "QueueInfo"))["preemptingResource"] == {}
    info = await get(client, f"{P}/preemptions", "Preemptions")
    assert info["inFlight"] == [] and info["totals"]["confirmed"] == 1
    s.assert_allocated("s", 1)


@pytest.mark.asyncio
async def test_an_unknown_partition_has_no_preemptions(client: httpx.AsyncClient) -> None:
    r = await client.get("/ws/v1/partition/nosuch/preemptions")
    assert r.status_code == 404
    assert r.json()["message"] == "Partition not found"


@pytest.mark.asyncio
async def test_the_metrics_count_preemptions(s: Scenario, client: httpx.AsyncClient) -> None:
    m = await scrape(client)
    assert counters(m, "yunikorn_scheduler_preemption_started") == {
        "queue": 0,
        "required_node": 0,
    }
    assert m["yunikorn_scheduler_preemption_in_flight"] == {(): 0}
    # A daemon's ask on n1, confirmed: one preemption of one victim, ended.
    daemon = preemptor(s, "ds-0", "ds", tags={REQUIRED: "n1"})
    await s.send_asks(daemon)
    (first,) = victims(s)
    await s.confirm_releases()
    s.assert_allocated("ds", 1)
    # A starved queue's ask, after its delay: in flight until the RM confirms.
    await s.send_asks(preemptor(s, "s-0", "s"))
    await s.advance(30)
    assert len(victims(s)) == 2
    m = await scrape(client)
    assert counters(m, "yunikorn_scheduler_preemption_started") == {
        "queue": 1,
        "required_node": 1,
    }
    assert counters(m, "yunikorn_scheduler_preemption_ended") == {
        "confirmed": 1,
        "timeout": 0,
        "cancelled": 0,
    }
    assert counters(m, "yunikorn_scheduler_preemption_victims") == {
        "released": 2,
        "confirmed": 1,
    }
    assert m["yunikorn_scheduler_preemption_in_flight"] == {(): 1}
    preempting = {
        (q, dict(k)["resource"]): v
        for q in ("root", "root_greedy", "root_starved")
        for k, v in m.get(f"yunikorn_{q}_queue_resource", {}).items()
        if dict(k)["state"] == "preempting"
    }
    assert preempting == {("root", "memory"): 20, ("root_greedy", "memory"): 20}
    histogram = m["yunikorn_scheduler_trypreemption_latency_milliseconds"]
    assert histogram[(("le", "+Inf"),)] > 0  # one observation per round: 0 s on this clock
    assert histogram[(("le", "0.0001"),)] == histogram[(("le", "+Inf"),)]

    await s.advance(60)  # Timeouts.preemption: the RM never confirmed; the ask tries again
    m = await scrape(client)
    ended = counters(m, "yunikorn_scheduler_preemption_ended")
    assert (ended["confirmed"], ended["timeout"]) == (1, 1)
    assert counters(m, "yunikorn_scheduler_preemption_started")["queue"] == 2
    assert m["yunikorn_scheduler_preemption_in_flight"] == {(): 1}
    await s.confirm_releases()
    m = await scrape(client)
    assert counters(m, "yunikorn_scheduler_preemption_ended")["confirmed"] == 2
    assert counters(m, "yunikorn_scheduler_preemption_victims") == {
        "released": 3,
        "confirmed": 3,
    }
    assert m["yunikorn_scheduler_preemption_in_flight"] == {(): 0}
    assert first.uuid not in {a.uuid for a in s.allocations("g")}


@pytest.mark.asyncio
async def test_the_exposition_text_names_them(s: Scenario, client: httpx.AsyncClient) -> None:
    await s.send_asks(preemptor(s, "s-0", "s"))
    await s.advance(30)
    text = (await client.get("/ws/v1/metrics")).text
    for line in (
        "# TYPE yunikorn_scheduler_preemption_started_total counter",
        'yunikorn_scheduler_preemption_started_total{type="queue"} 1.0',
        'yunikorn_scheduler_preemption_victims_total{state="released"} 1.0',
        'yunikorn_scheduler_preemption_ended_total{result="confirmed"} 0.0',
        "yunikorn_scheduler_preemption_in_flight 1.0",
        "# TYPE yunikorn_scheduler_trypreemption_latency_milliseconds histogram",
        'yunikorn_root_greedy_queue_resource{partition="default",resource="memory",'
        'state="preempting"} 20.0',
    ):
        assert line in text.splitlines(), line


def test_the_try_preemption_latency_is_counted_per_round() -> None:
    counters = SchedulingCounters()
    for seconds in (0.00005, 0.05, 20.0):
        counters.observe_preemption(seconds)
    latency = counters.info()["tryPreemptionLatency"]
    assert latency["buckets"] == [1, 0, 0, 1, 0, 0, 1]  # le=0.0001 .. +Inf
    assert latency["sum"] == pytest.approx(20.05005)
    assert counters.info()["schedulingLatency"]["buckets"] == [0] * 7  # passes apart
