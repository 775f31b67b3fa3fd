"""The routes YuniKorn's web UI and scripts written against YuniKorn read besides the
partition's lists (scheduler.daemon._rest, ._dashboard): the clusters, the application and
container history sampled on the core's clock, the node utilization buckets, a queue's
absolute used capacity and child template, one user's or group's usage, and the
configuration check. Shapes from yunikorn-core's pkg/webservice (dao package), v1.2.0 and
v1.8.0; every JSON answer is checked against the OpenAPI document."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

import scheduler
from scheduler import si
from scheduler.core._views import abs_used_capacity
from scheduler.daemon._dashboard import cluster_info, node_utilization
from scheduler.daemon._rest import make_app
from scheduler.testing import ManualClock, RecordingCallback, Scenario, start_scenario

from .test_rest import QUEUES, P, busy, client, error, get, in_process, many, s

__all__ = ["busy", "client", "s"]  # the fixtures, shared with test_rest
Json = Any
MINUTE = 60.0


async def _client(core: scheduler.Core) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=make_app(core)), base_url="http://x")


# ========================================================================== clusters
@pytest.mark.asyncio
async def test_clusters_show_each_partition_with_the_counts_the_dashboard_reads(
    busy: Scenario, client: httpx.AsyncClient
) -> None:
    """YuniKorn 1.2's getClusterJSON: total and running applications are the live ones,
    total and running containers the allocations held, total and active nodes every node;
    the yunikorn-web dashboard's donuts read failed, pending, running and completed."""
    (cluster,) = await get(client, "/ws/v1/clusters", many("ClusterInfo"))
    assert cluster["partition"] == "default"
    assert cluster["clusterName"] == "kubernetes"
    assert cluster["startTime"] == busy.clock.wall_ns(0.0)  # the core's clock, not the wall's
    assert cluster["rmBuildInformation"] == [{"rmId": "rm-1"}]
    # app-1 Running, spark Starting, p-1 and big Accepted; lost Rejected, old Completed
    assert cluster["totalApplications"] == cluster["runningApplications"] == "4"
    assert cluster["pendingApplications"] == "2"
    assert (cluster["completedApplications"], cluster["failedApplications"]) == ("1", "0")
    assert cluster["totalContainers"] == cluster["runningContainers"] == "6"
    assert cluster["totalNodes"] == cluster["activeNodes"] == "3"
    assert cluster["failedContainers"] == cluster["pendingContainers"] == ""  # as YuniKorn
    assert cluster["failedNodes"] == ""


@pytest.mark.asyncio
async def test_clusters_carry_the_build_information_each_rm_registered_with() -> None:
    """YuniKorn's ClusterContext.SetRMInfo: the registration's BuildInfo plus rmId."""
    clock = ManualClock(epoch=1_700_000_000)
    async with scheduler.start_scheduler(clock=clock) as core:
        await clock.advance(5)
        build = {"version": "1.8.0", "buildDate": "2026-01-01", "rmId": "spoofed"}
        request = si.RegisterResourceManagerRequest(
            rm_id="k8s", policy_group="default", version="1", build_info=build
        )
        await core.register_resource_manager(request, RecordingCallback())
        async with await _client(core) as c:
            (cluster,) = await get(c, "/ws/v1/clusters", many("ClusterInfo"))
        assert cluster["rmBuildInformation"] == [
            {"rmId": "k8s", "version": "1.8.0", "buildDate": "2026-01-01"}
        ]
        assert cluster["startTime"] == 1_700_000_000 * 10**9
        (rm,) = await core.get_resource_managers()
        assert rm["buildInfo"] == cluster["rmBuildInformation"][0]
        bad = si.RegisterResourceManagerRequest(rm_id="x", build_info={"v": 1})  # type: ignore[dict-item]
        with pytest.raises(scheduler.SchedulerError, match="build_info"):
            await core.register_resource_manager(bad, RecordingCallback())


@pytest.mark.asyncio
async def test_without_a_resource_manager_the_new_lists_are_empty() -> None:
    async with scheduler.start_scheduler(clock=ManualClock()) as core, await _client(core) as c:
        assert await get(c, "/ws/v1/clusters", many("ClusterInfo")) == []
        assert await get(c, "/ws/v1/scheduler/node-utilizations", many("PartitionNodesUtil")) == []
        assert await get(c, "/ws/v1/history/apps", many("AppHistory")) == []
        await error(c, f"{P}/usage/user/alice", 404, "Partition not found")


def test_cluster_info_counts_failed_and_completed_applications() -> None:
    part = {
        "name": "p",
        "applications": {"total": 5, "Failed": 2, "Completed": 1, "Expired": 1, "New": 1},
        "totalContainers": 0,
        "totalNodes": 0,
    }
    info = cluster_info(part, [{"state": "Stopped", "buildInfo": {"rmId": "gone"}}], 7)
    assert info["totalApplications"] == info["pendingApplications"] == "1"
    assert (info["failedApplications"], info["completedApplications"]) == ("2", "1")
    assert info["rmBuildInformation"] == []  # a Stopped RM is not one the core serves


# =========================================================================== history
@pytest.mark.asyncio
async def test_history_is_sampled_each_minute_of_the_core_clock(
    busy: Scenario, client: httpx.AsyncClient
) -> None:
    """YuniKorn's internalMetricsCollector stores the running applications and the
    allocations held once a minute (metrics_collector.go); busy has spent 3 s."""
    assert await get(client, "/ws/v1/history/apps", many("AppHistory")) == []  # no minute yet
    await busy.advance(MINUTE - 3)
    apps = await get(client, "/ws/v1/history/apps", many("AppHistory"))
    containers = await get(client, "/ws/v1/history/containers", many("ContainerHistory"))
    at = busy.clock.wall_ns(MINUTE)
    assert apps == [{"timestamp": at, "totalApplications": "1"}]  # app-1 is Running
    assert containers == [{"timestamp": at, "totalContainers": "6"}]
    await busy.remove("app-1")
    await busy.confirm_releases()
    await busy.advance(MINUTE)
    apps = await get(client, "/ws/v1/history/apps", many("AppHistory"))
    containers = await get(client, "/ws/v1/history/containers", many("ContainerHistory"))
    assert [a["totalApplications"] for a in apps] == ["1", "0"]
    assert [c["totalContainers"] for c in containers] == ["6", "4"]
    assert apps[1]["timestamp"] - apps[0]["timestamp"] == 60 * 10**9


@pytest.mark.asyncio
async def test_the_history_keeps_only_the_newest_samples() -> None:
    """A bounded ring, as YuniKorn's InternalMetricsHistory (1440 samples by default)."""
    clock = ManualClock()
    async with scheduler.start_scheduler(clock=clock, history_size=3) as core:
        assert core.history.capacity == 3
        await clock.advance(5 * MINUTE)
        async with await _client(core) as c:
            apps = await get(c, "/ws/v1/history/apps", many("AppHistory"))
        assert [a["timestamp"] for a in apps] == [clock.wall_ns(m * MINUTE) for m in (3, 4, 5)]
        assert {a["totalApplications"] for a in apps} == {"0"}
    async with scheduler.start_scheduler() as default:
        assert default.history.capacity == 1440
    with pytest.raises(scheduler.SchedulerError, match="history capacity"):
        async with scheduler.start_scheduler(history_size=0):
            pass


# ================================================================= node utilizations
@pytest_asyncio.fixture
async def two_nodes() -> AsyncIterator[Scenario]:
    """n1 with 45 of its 100 memory and 1 of its 10 vcore in use; n2 idle."""
    async with start_scenario(QUEUES) as sc:
        await sc.add_nodes("n1", memory=100, vcore=10)
        await sc.submit("app", queue="root.a")
        await sc.ask("app", count=1, memory=45, vcore=1)
        await sc.add_nodes("n2", memory=100, vcore=10)
        yield sc


@pytest.mark.asyncio
async def test_node_utilizations_bucket_each_resource(two_nodes: Scenario) -> None:
    """YuniKorn 1.8's getPartitionNodesUtilJSON: ten buckets per resource type, a node in
    the bucket of its truncated percentage (45% in 40-50%, 10% and 0% in 0-10%); empty
    buckets have no numOfNodes or nodeNames (omitempty)."""
    async with await _client(in_process(two_nodes)) as c:
        (part,) = await get(c, "/ws/v1/scheduler/node-utilizations", many("PartitionNodesUtil"))
    assert (part["clusterId"], part["partition"]) == ("rm-1", "default")
    by_type = {u["type"]: u["utilization"] for u in part["utilizations"]}
    assert list(by_type) == ["memory", "vcore"]
    for buckets in by_type.values():
        assert [b["bucketName"] for b in buckets] == [f"{k * 10}-{k * 10 + 10}%" for k in range(10)]
    memory = {b["bucketName"]: b.get("nodeNames") for b in by_type["memory"]}
    assert memory["0-10%"] == ["n2"] and memory["40-50%"] == ["n1"]
    assert sum(b.get("numOfNodes", 0) for b in by_type["memory"]) == 2
    assert by_type["vcore"][0] == {
        "bucketName": "0-10%",
        "numOfNodes": 2,
        "nodeNames": ["n1", "n2"],
    }
    assert by_type["vcore"][1] == {"bucketName": "10-20%"}


def test_node_utilization_edges() -> None:
    """100% goes to 90-100%, a zero capacity in use to 90-100% (YuniKorn: 100%), a node
    used beyond its capacity to the last bucket too; no nodes, no utilizations."""

    def node(name: str, cap: int, used: int | None) -> dict[str, Any]:
        return {
            "nodeID": name,
            "capacity": {"x": cap},
            "allocated": {} if used is None else {"x": used},
        }

    nodes = [node("full", 10, 10), node("zero", 0, 1), node("over", 10, 25), node("idle", 10, None)]
    (util,) = node_utilization("c", "p", nodes)["utilizations"]
    assert util["utilization"][9]["nodeNames"] == ["full", "zero", "over"]
    assert util["utilization"][0]["nodeNames"] == ["idle"]
    assert node_utilization("c", "p", []) == {"clusterId": "c", "partition": "p"}


# ============================================================================ queues
TEMPLATES = """
partitions:
  - name: default
    placementrules:
      - name: provided
        create: true
    queues:
      - name: root
        submitacl: "*"
        childtemplate:
          maxapplications: 4
          properties: {application.sort.policy: fifo}
          resources:
            max: {memory: 100, vcore: 4}
            guaranteed: {memory: 10}
        queues:
          - name: a
            resources:
              max: {memory: 200, vcore: 20}
          - name: dyn
            parent: true
"""


@pytest.mark.asyncio
async def test_queues_show_abs_used_capacity_and_the_child_template() -> None:
    """YuniKorn 1.8's PartitionQueueDAOInfo: absUsedCapacity is CalculateAbsUsedCapacity of
    maxResource and allocatedResource (truncated percentages); template is the TemplateInfo
    of a parent queue, its own or inherited (queue.go addChildQueue), and a leaf has none."""
    async with start_scenario(TEMPLATES) as sc, await _client(in_process(sc)) as c:
        await sc.add_nodes("n1", memory=1000, vcore=100_000)  # milli-vcores
        await sc.submit("app-1", queue="root.a")
        await sc.ask("app-1", memory=45, vcore=3000)
        await sc.submit("app-2", queue="root.dyn.made")
        await sc.ask("app-2", memory=50, vcore=1000)
        a = await get(c, f"{P}/queue/root.a", "QueueInfo")
        assert a["absUsedCapacity"] == {"memory": 22, "vcore": 15}  # 45/200, 3000/20000
        assert "template" not in a
        root = await get(c, f"{P}/queues", "QueueInfo")
        template = {
            "maxApplications": 4,
            "maxResource": {"memory": 100, "vcore": 4000},
            "guaranteedResource": {"memory": 10},
            "properties": {"application.sort.policy": "fifo"},
        }
        assert root["template"] == template
        dyn = next(q for q in root["children"] if q["queuename"] == "root.dyn")
        assert dyn["template"] == template  # inherited
        made = await get(c, f"{P}/queue/root.dyn.made", "QueueInfo")
        assert "template" not in made
        assert made["maxResource"] == {"memory": 100, "vcore": 4000}  # the template applied
        assert made["absUsedCapacity"] == {"memory": 50, "vcore": 25}
        assert dyn["absUsedCapacity"] == {}  # no maximum of its own


@pytest.mark.asyncio
async def test_an_empty_child_template_inherits_the_one_above() -> None:
    """YuniKorn's template.FromConf makes no template of an empty childtemplate, so the
    queue inherits its parent's: a dynamic leaf below it takes the one from above."""
    config = TEMPLATES.replace(
        "          - name: dyn\n            parent: true\n",
        "          - name: dyn\n            parent: true\n            childtemplate: {}\n",
    )
    async with start_scenario(config) as sc, await _client(in_process(sc)) as c:
        await sc.submit("app", queue="root.dyn.made")
        dyn = await get(c, f"{P}/queue/root.dyn", "QueueInfo")
        assert dyn["template"]["maxApplications"] == 4
        made = await get(c, f"{P}/queue/root.dyn.made", "QueueInfo")
        assert made["maxRunningApps"] == 4


def test_abs_used_capacity_follows_yunikorn() -> None:
    """Truncated percentages of each capacity resource; 100 for use of a zero capacity, 0
    for no use, left out where the usage does not name it, capped at 2**31 - 1."""
    capacity = {"memory": 200, "gpu": 0, "vcore": 10, "pods": 10, "huge": 1}
    used = {"memory": 45, "gpu": 1, "vcore": 0, "huge": 10**12, "other": 5}
    assert abs_used_capacity(capacity, used) == {
        "memory": 22,
        "gpu": 100,
        "vcore": 0,
        "huge": 2**31 - 1,
    }
    assert abs_used_capacity({}, used) == {}


# ======================================================================= usage by name
@pytest.mark.asyncio
async def test_one_users_usage(busy: Scenario, client: httpx.AsyncClient) -> None:
    """YuniKorn 1.8's getUserResourceUsage: the user's UserResourceUsageDAOInfo; an
    invalid name is a 400 'Invalid user name', an unknown one a 404 'User not found'."""
    users = await get(client, f"{P}/usage/users", many("UserUsage"))
    alice = await get(client, f"{P}/usage/user/alice", "UserUsage")
    assert alice == next(u for u in users if u["userName"] == "alice")
    assert alice["queues"]["resourceUsage"] == {"memory": 80, "vcore": 2}
    await error(client, f"{P}/usage/user/bob", 404, "User not found")
    await error(client, f"{P}/usage/user/9lives", 400, "Invalid user name")
    await error(client, "/ws/v1/partition/nope/usage/user/alice", 404, "Partition not found")


LIMITS = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        limits:
          - limit: devs
            groups: [devs]
            maxapplications: 5
        queues:
          - name: a
"""
RUNNER = "system:serviceaccount:ns:runner"


@pytest.mark.asyncio
async def test_one_groups_usage_and_names_with_colons() -> None:
    """A group with a limit of its own is listed (GroupResourceUsageDAOInfo); YuniKorn
    1.8's user name pattern lets ':' through (Kubernetes service accounts)."""
    async with start_scenario(LIMITS) as sc, await _client(in_process(sc)) as c:
        devs = await get(c, f"{P}/usage/group/devs", "GroupUsage")
        assert devs["groupName"] == "devs" and devs["queues"]["maxApplications"] == 5
        await error(c, f"{P}/usage/group/ops", 404, "Group not found")
        await error(c, f"{P}/usage/group/-ops", 400, "Invalid group name")
        await sc.add_nodes("n1")
        await sc.submit("job", queue="root.a", user=RUNNER)
        await sc.ask("job")
        runner = await get(c, f"{P}/usage/user/{RUNNER}", "UserUsage")
        assert runner["queues"]["runningApplications"] == ["job"]


# ====================================================================== validate-conf
@pytest.mark.asyncio
async def test_validate_conf_checks_a_body_and_changes_nothing(
    busy: Scenario, client: httpx.AsyncClient
) -> None:
    """YuniKorn's validateConf: LoadSchedulerConfigFromByteArray on the body; the answer is
    {allowed, reason} with a 200 either way."""
    before = await client.get("/ws/v1/config")
    ok = await client.post("/ws/v1/validate-conf", content=QUEUES)
    assert ok.status_code == 200 and ok.json() == {"allowed": True, "reason": ""}
    bad = await client.post("/ws/v1/validate-conf", content="partitions: []")
    assert bad.status_code == 200
    assert bad.json() == {
        "allowed": False,
        "reason": "at least one partition must be defined (key 'partitions')",
    }
    bodies = (b"x: [", b"\xff\xfe", b"[" * 5000, QUEUES.replace("name: a", "name: a.b").encode())
    for body in bodies:
        r = await client.post("/ws/v1/validate-conf", content=body)
        assert r.status_code == 200 and r.json()["allowed"] is False, body
        assert r.json()["reason"]
    assert (await client.get("/ws/v1/config")).text == before.text  # nothing changed


# ============================================================ partitions of two RMs
@pytest.mark.asyncio
async def test_two_rms_default_partitions_are_listed_apart_and_found_by_full_name() -> None:
    """YuniKorn names an RM's partition ``[rmID]name`` (v1.2 common.GetNormalizedPartitionName)
    and its REST shows the plain name with the RM as ``clusterId``
    (webservice.getPartitionInfoDAO); ours also finds ``[rmID]name`` in a path, where a
    plain name finds the first RM's. The metrics add the two partitions' queues up."""
    clock = ManualClock()
    async with scheduler.start_scheduler(clock=clock) as core:
        first, second = Scenario(core, clock, rm_id="rm-1"), Scenario(core, clock, rm_id="rm-2")
        for scenario, nodes in ((first, ("n1",)), (second, ("n1", "n2"))):
            await scenario.register(QUEUES)
            await scenario.add_nodes(*nodes)
            await scenario.submit("app", queue="root.a")
            await scenario.ask("app", count=1, memory=10, vcore=1)
        async with await _client(core) as c:
            parts = await get(c, "/ws/v1/partitions", many("PartitionInfo"))
            assert sorted((p["clusterId"], p["name"], p["totalNodes"]) for p in parts) == [
                ("rm-1", "default", 1),
                ("rm-2", "default", 2),
            ]
            own = await get(c, "/ws/v1/partition/%5Brm-2%5Ddefault/nodes", many("NodeInfo"))
            assert sorted(n["nodeID"] for n in own) == ["n1", "n2"]
            plain = await get(c, "/ws/v1/partition/default/nodes", many("NodeInfo"))
            assert [n["nodeID"] for n in plain] == ["n1"]  # rm-1 registered first
            r = await c.get("/ws/v1/partition/%5Brm-3%5Ddefault/nodes")
            assert r.status_code == 404, r.text
            text = (await c.get("/ws/v1/metrics")).text
        lines = text.splitlines()
        memory = 'partition="default",queue="root.a",resource="memory",state="allocated"'
        assert f"yunikorn_queue_resource{{{memory}}} 20.0" in lines  # 10 of each RM's
        apps = 'partition="default",queue="root.a",state="starting"'
        assert f"yunikorn_queue_app{{{apps}}} 2.0" in lines
