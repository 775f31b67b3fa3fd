"""``/ws/v1/metrics`` (scheduler.daemon._metrics) for dashboards built for YuniKorn v1.2 or
v1.8: each series asserted by name, labels and the value its scenario implies. The
YuniKorn source each follows is named in the test's docstring."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import prometheus_client
import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

import scheduler
from scheduler import si
from scheduler.daemon._rest import make_app
from scheduler.testing import ErrorWatch, RecordingCallback, Scenario, start_scenario

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
            maxapplications: 3
            resources:
              guaranteed: {memory: 50, vcore: 5}
              max: {memory: 200, vcore: 20}
          - name: b
"""

Labels = tuple[tuple[str, str], ...]


@pytest_asyncio.fixture
async def s() -> AsyncIterator[Scenario]:
    with ErrorWatch() as errors:
        async with start_scenario(QUEUES) as scenario:
            yield scenario
    assert not errors, errors.report()


@pytest_asyncio.fixture
async def client(s: Scenario) -> AsyncIterator[httpx.AsyncClient]:
    assert isinstance(s.core, scheduler.Core)  # start_scenario's core runs in this process
    transport = httpx.ASGITransport(app=make_app(s.core))
    async with httpx.AsyncClient(transport=transport, base_url="http://scheduler") as c:
        yield c


async def families(client: httpx.AsyncClient) -> dict[str, prometheus_client.Metric]:
    r = await client.get("/ws/v1/metrics")
    assert r.status_code == 200, r.text
    return {f.name: f for f in text_string_to_metric_families(r.text)}


def values(family: prometheus_client.Metric, suffix: str = "") -> dict[Labels, float]:
    return {
        tuple(sorted(x.labels.items())): x.value
        for x in family.samples
        if x.name == family.name + suffix
    }


def samples(family: prometheus_client.Metric) -> list[Sample]:
    return list(family.samples)


# ============================================================================== queues
@pytest.mark.asyncio
async def test_queue_metrics_under_yunikorn_1_8_names(
    s: Scenario, client: httpx.AsyncClient
) -> None:
    """yunikorn-core v1.8.0 pkg/metrics/queue.go: one ``yunikorn_queue_resource`` family
    with a ``queue`` label, by state and resource, ``maxRunningApps`` as the resource
    ``apps`` (``SetQueueMaxRunningAppsMetrics``), and one ``yunikorn_queue_app`` by state;
    the v1.2 families per queue stay beside them with the same values."""
    await s.add_nodes("n1", "n2")
    await s.submit("app-1", queue="root.a")
    await s.ask("app-1", "work", count=2, memory=40, vcore=1)
    await s.submit("app-2", queue="root.b")
    await s.ask("app-2", "huge", memory=10_000, vcore=1)  # fits no node: stays pending
    m = await families(client)
    res = m["yunikorn_queue_resource"]
    assert res.type == "gauge"
    q = values(res)

    def key(queue: str, state: str, resource: str) -> Labels:
        return (
            ("partition", "default"),
            ("queue", queue),
            ("resource", resource),
            ("state", state),
        )

    assert q[key("root.a", "allocated", "memory")] == 80
    assert q[key("root.a", "guaranteed", "memory")] == 50
    assert q[key("root.a", "max", "vcore")] == 20_000  # milli-cores, as the RM sends them
    assert q[key("root.a", "maxRunningApps", "apps")] == 3
    assert q[key("root.b", "maxRunningApps", "apps")] == 0  # unlimited: 0, as YuniKorn
    assert q[key("root.b", "pending", "memory")] == 10_000
    assert q[key("root", "allocated", "memory")] == 80
    old = values(m["yunikorn_root_a_queue_resource"])
    assert old[(("partition", "default"), ("resource", "memory"), ("state", "allocated"))] == 80
    apps = values(m["yunikorn_queue_app"])
    assert apps == {
        (("partition", "default"), ("queue", "root.a"), ("state", "running")): 1,
        (("partition", "default"), ("queue", "root.b"), ("state", "accepted")): 1,
    }
    assert values(m["yunikorn_root_b_queue_app"]) == {
        (("partition", "default"), ("state", "accepted")): 1
    }


# ============================================================================= runtime
@pytest.mark.asyncio
async def test_process_and_python_runtime_metrics(s: Scenario, client: httpx.AsyncClient) -> None:
    """prometheus_client's ProcessCollector, PlatformCollector and GCCollector on the app's
    registry, in the place of YuniKorn's Go runtime metrics (pkg/metrics/runtime.go)."""
    m = await families(client)
    memory = values(m["process_resident_memory_bytes"])
    assert memory[()] > 1_000_000  # this process holds more than a megabyte
    assert values(m["process_cpu_seconds"], "_total")[()] > 0
    (info,) = samples(m["python_info"])
    assert info.labels["implementation"] == "CPython" and info.value == 1
    collections = values(m["python_gc_collections"], "_total")
    assert set(collections) == {(("generation", g),) for g in ("0", "1", "2")}


@pytest.mark.asyncio
async def test_two_apps_have_their_own_registries(s: Scenario) -> None:
    """Two apps in one process each register the runtime collectors on their own registry
    (registering them twice on one would raise), and never on the default one."""
    assert isinstance(s.core, scheduler.Core)
    one, two = make_app(s.core), make_app(s.core)
    assert one.state.registry is not two.state.registry
    default = {f.name for f in prometheus_client.REGISTRY.collect()}
    mine = {f.name for f in one.state.registry.collect()}
    assert "process_resident_memory_bytes" in mine
    assert not any(name.startswith("yunikorn") for name in mine)  # the core's: at a scrape
    assert not any(name.startswith("yunikorn") for name in default)


# =============================================================================== nodes
def node(node_id: str, action: si.ActionFromRM, **fields: Any) -> si.NodeInfo:
    return si.NodeInfo(
        node_id=node_id,
        action=action,
        schedulable_resource=si.Resource.of(memory=100, vcore=10),
        **fields,
    )


@pytest.mark.asyncio
async def test_node_states_count_failed_and_decommissioned_nodes(
    s: Scenario, client: httpx.AsyncClient
) -> None:
    """yunikorn-core v1.8.0 pkg/metrics/scheduler.go ``yunikorn_scheduler_node{state}``:
    active and draining are the nodes now; failed counts a new node for an unknown
    partition (v1.8.0 pkg/scheduler/context.go ``addNode``) or whose allocations could not
    be recovered (v1.2.0 pkg/scheduler/partition.go ``addNode``), decommissioned each
    ``DECOMISSION`` (context.go ``updateNode``); neither goes down again. A duplicate node
    id is refused without counting, as YuniKorn's ``addNodeToList`` does. The health
    check "Failed nodes" reads the same count (pkg/scheduler/health_checker.go)."""
    create, drain = si.ActionFromRM.CREATE, si.ActionFromRM.DRAIN_NODE
    await s.add_nodes("n1", "n2", "n3", "n4")
    lost = si.Allocation(allocation_key="k", uuid="u-1", application_id="nosuch", node_id="n5")
    await s.add_nodes(
        node("n5", create, existing_allocations=[lost]),  # its application is unknown
        node("n6", create, attributes={si.NODE_PARTITION: "nosuch"}),
        node("n1", create),  # already there: refused, not a failed node
        node("n2", si.ActionFromRM.DECOMISSION),
        node("n3", drain),
        node("n4", drain),
        node("n4", si.ActionFromRM.DECOMISSION),  # a draining node decommissioned
    )
    rejected = {n.node_id for r in s.rm.node_responses for n in r.rejected}
    assert rejected == {"n1", "n5", "n6"}
    m = await families(client)
    assert values(m["yunikorn_scheduler_node"]) == {
        (("state", "active"),): 2,  # n1, n3
        (("state", "draining"),): 1,  # n3
        (("state", "failed"),): 2,  # n5, n6
        (("state", "decommissioned"),): 2,  # n2, n4
    }
    r = await client.get("/ws/v1/scheduler/healthcheck")
    (check,) = [c for c in r.json()["HealthChecks"] if c["Name"] == "Failed nodes"]
    assert check["Succeeded"] is False
    assert check["DiagnosisMessage"] == "There were 2 failed nodes logged in the metrics"


# ============================================================================ latency
TRY_NODE = "yunikorn_scheduler_trynode_latency_milliseconds"
SCHEDULING = "yunikorn_scheduler_scheduling_latency_milliseconds"


def histogram(
    family: prometheus_client.Metric, level: str | None = None
) -> tuple[dict[str, float], float, float]:
    """A histogram's cumulative buckets by bound, its count and its sum (of the series of
    ``level``, for a family with levels)."""
    assert family.type == "histogram"
    ours = [x for x in family.samples if x.labels.get("level") == level]
    buckets = {x.labels["le"]: x.value for x in ours if x.name == family.name + "_bucket"}
    (count,) = [x.value for x in ours if x.name == family.name + "_count"]
    (total,) = [x.value for x in ours if x.name == family.name + "_sum"]
    return buckets, count, total


@pytest.mark.asyncio
async def test_try_node_latency_is_observed_per_allocation(
    s: Scenario, client: httpx.AsyncClient
) -> None:
    """yunikorn-core v1.2.0 pkg/metrics/scheduler.go ``trynode_latency_milliseconds``:
    YuniKorn's buckets (ExponentialBuckets(0.0001, 10, 6), in seconds), one observation
    per node that took an ask (pkg/scheduler/objects/application.go ``tryNodes``), on the
    core's clock: on the manual clock every one takes 0 s."""
    await s.add_nodes("n1", "n2")
    await s.submit("app-1", queue="root.a")
    await s.ask("app-1", "work", count=3, memory=10, vcore=1)
    await s.ask("app-1", "huge", memory=10_000, vcore=1)  # no node takes it: not observed
    m = await families(client)
    buckets, count, total = histogram(m[TRY_NODE])
    assert count == 3 == len(s.rm.allocations)
    assert buckets == dict.fromkeys(["0.0001", "0.001", "0.01", "0.1", "1.0", "10.0", "+Inf"], 3)
    assert total == 0


class Picky(RecordingCallback):
    """Refuses every node but ``n2``."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    async def predicates(self, args: si.PredicatesArgs) -> bool:
        self.asked.append(args.node_id)
        return args.node_id == "n2"


@pytest.mark.asyncio
async def test_try_node_latency_with_predicates_counts_the_node_that_took_the_ask() -> None:
    """With an RM that checks predicates, the observation spans its answer; a node it
    refused is not observed (YuniKorn observes ``tryNode`` only when it allocated)."""
    with ErrorWatch() as errors:
        async with start_scenario(QUEUES, rm=Picky()) as s:
            assert isinstance(s.core, scheduler.Core) and isinstance(s.rm, Picky)
            await s.add_nodes("n1", "n2")
            await s.submit("app-1", queue="root.a")
            await s.ask("app-1", "work", memory=10, vcore=1)
            assert s.rm.asked == ["n1", "n2"]  # equal nodes in id order: n1 refused first
            assert [a.node_id for a in s.rm.allocations] == ["n2"]
            transport = httpx.ASGITransport(app=make_app(s.core))
            async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
                m = await families(client)
            _buckets, count, _total = histogram(m[TRY_NODE])
            assert count == 1
    assert not errors, errors.report()


# ============================================================================== events
@pytest.mark.asyncio
async def test_event_counters(s: Scenario, client: httpx.AsyncClient) -> None:
    """yunikorn-core v1.8.0 pkg/metrics/event.go: ``yunikorn_event_total_created`` (each
    event made, pkg/events/event_system.go ``AddEvent``) and ``..._processed`` (each event
    the event system handled), gauges as YuniKorn declares them. Created counts since the
    partition's RM registered, as the partitions' other counters do; processed counts
    every event the RM got since the core started."""
    await s.add_nodes("n1", "n2")
    await s.submit("app-1", queue="root.a")
    await s.ask("app-1", "work", memory=10, vcore=1)
    sent = len(s.rm.events)
    assert sent >= 3  # two nodes added, at least one application event
    m = await families(client)
    assert m["yunikorn_event_total_created"].type == "gauge"
    assert values(m["yunikorn_event_total_created"]) == {(): sent}
    assert values(m["yunikorn_event_total_processed"]) == {(): sent}
    await s.register(QUEUES)  # new partitions: their counters start again
    await s.add_nodes("n3")
    m = await families(client)
    assert values(m["yunikorn_event_total_created"]) == {(): len(s.rm.events) - sent}
    assert values(m["yunikorn_event_total_processed"]) == {(): len(s.rm.events)}
    assert len(s.rm.events) > sent


@pytest.mark.asyncio
async def test_yunikorns_other_event_counters_say_what_is_true_here(
    s: Scenario, client: httpx.AsyncClient
) -> None:
    """yunikorn-core v1.2.0 pkg/metrics/event.go declares seven event gauges (v1.8.0 under
    the right names: v1.2 gives ``stored`` and ``not_stored`` the name ``total_processed``):
    created, channeled and not_channeled (pkg/events/event_cache.go ``AddEvent``: into its
    bounded channel or not), processed, stored and not_stored (event_store.go ``Store``: its
    store full or not), collected (``CollectEvents``, for the shim). Here a partition hands
    every event it creates to its RM's callback actor, whose mailbox never refuses one, and
    the event log takes every event sent: channeled is created, stored and collected are
    processed, the two refusals stay 0."""
    await s.add_nodes("n1", "n2")
    await s.submit("app-1", queue="root.a")
    await s.ask("app-1", "work", count=2, memory=10, vcore=1)
    sent = len(s.rm.events)
    assert sent >= 3
    m = await families(client)
    got = {
        name: values(m[f"yunikorn_event_total_{name}"])
        for name in (
            "created",
            "channeled",
            "not_channeled",
            "processed",
            "stored",
            "not_stored",
            "collected",
        )
    }
    assert {name: v[()] for name, v in got.items()} == {
        "created": sent,
        "channeled": sent,
        "not_channeled": 0,
        "processed": sent,
        "stored": sent,
        "not_stored": 0,
        "collected": sent,
    }
    assert all(m[f"yunikorn_event_total_{name}"].type == "gauge" for name in got)
    await s.register(QUEUES)  # created and channeled count per partition, the rest per core
    await s.add_nodes("n3")
    m = await families(client)
    assert values(m["yunikorn_event_total_channeled"]) == {(): len(s.rm.events) - sent}
    assert values(m["yunikorn_event_total_stored"]) == {(): len(s.rm.events)}
    assert values(m["yunikorn_event_total_collected"]) == {(): len(s.rm.events)}


NODE_SORTING = "yunikorn_scheduler_node_sorting_latency_milliseconds"


@pytest.mark.asyncio
async def test_node_sorting_latency_is_observed_when_an_ask_may_reserve(
    s: Scenario, client: httpx.AsyncClient
) -> None:
    """yunikorn-core v1.2.0 pkg/metrics/scheduler.go ``node_sorting_latency_milliseconds``
    with ``level="node"`` (pkg/scheduler/objects/node_collection.go sorts every node for
    an ask): the core sorts all nodes only when an ask has waited long enough to reserve
    one (pkg/scheduler/objects/application.go ``tryNodes``: the node closest to fitting),
    once per size and pass. Nothing is observed before that."""
    await s.add_nodes("n1", "n2", memory=100, vcore=10)
    await s.submit("app-1", queue="root.a")
    await s.ask("app-1", "half", count=2, memory=50, vcore=1)  # one on each node
    await s.ask("app-1", "big", memory=95, vcore=1)  # no room on either: waits
    buckets, count, _total = histogram((await families(client))[NODE_SORTING], "node")
    assert count == 0 and buckets["+Inf"] == 0
    await s.advance(3)  # past the reservation delay (2 s): it reserves a node
    info = await s.core.get_application("default", "app-1")
    assert info["reservations"]  # the sort picked the node it reserved
    family = (await families(client))[NODE_SORTING]
    assert {x.labels["level"] for x in family.samples} == {"node", "app", "queue"}
    buckets, count, total = histogram(family, "node")
    assert count == 1 == buckets["0.0001"]  # 0 s on the manual clock
    assert total == 0


DEEP = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: parent
            queues:
              - name: leaf
"""


@pytest.mark.asyncio
async def test_queue_and_app_sorting_latency_once_per_pass_on_its_way_down() -> None:
    """yunikorn-core v1.2.0 pkg/metrics/scheduler.go ``node_sorting_latency_milliseconds``
    with ``level="queue"`` (pkg/scheduler/objects/sorters.go ``sortQueue``, which each
    parent's ``sortQueues`` calls) and ``level="app"`` (``sortApplications``, from each
    leaf's queue.go ``sortApplications``), on YuniKorn's walk down the tree. Here each
    pass with pending work times the sorts of its first walk down, at the mean per level:
    with root.parent.leaf, two parents (root, parent) and one leaf a pass. A pass with
    nothing pending sorts nothing."""
    with ErrorWatch() as errors:
        async with start_scenario(DEEP) as s:
            assert isinstance(s.core, scheduler.Core)
            transport = httpx.ASGITransport(app=make_app(s.core))
            async with httpx.AsyncClient(transport=transport, base_url="http://x") as client:
                await s.add_nodes("n1", "n2")
                await s.submit("app-1", queue="root.parent.leaf")
                m = await families(client)
                _b, passes_before, _t = histogram(m[SCHEDULING])
                for level in ("app", "queue"):
                    assert histogram(m[NODE_SORTING], level)[1] == 0  # nothing pending yet
                await s.ask("app-1", "work", count=3, memory=10, vcore=1)
                await s.ask("app-1", "more", count=2, memory=10, vcore=1)
                assert len(s.rm.allocations) == 5
                m = await families(client)
            _b, passes, _t = histogram(m[SCHEDULING])
            app_buckets, apps, app_total = histogram(m[NODE_SORTING], "app")
            queue_buckets, queues, queue_total = histogram(m[NODE_SORTING], "queue")
            assert apps == passes - passes_before >= 2  # one leaf a pass with work
            assert queues == 2 * apps  # root and parent
            assert app_buckets["0.0001"] == apps and queue_buckets["0.0001"] == queues
            assert app_total == queue_total == 0  # the manual clock stands still
    assert not errors, errors.report()
