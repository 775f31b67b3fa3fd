"""The read-only REST API (scheduler.daemon._rest) over a real in-process core on a manual clock:
YuniKorn's paths and field names, the errors, the health checks and the metrics, every JSON
answer checked against the OpenAPI document's schema."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import prometheus_client
import pytest
import pytest_asyncio
import yaml
from prometheus_client.parser import text_string_to_metric_families
from starlette.routing import Route

import scheduler
from scheduler import si
from scheduler.config._parser import parse_config
from scheduler.daemon._health import HEALTH_CHECKS, check_reservations, health_status
from scheduler.daemon._metrics import (
    LATENCY_BUCKETS,
    SchedulingCounters,
    actor_kind,
    metric_families,
    metric_name,
)
from scheduler.daemon._openapi import openapi_document
from scheduler.daemon._rest import make_app
from scheduler.testing import ErrorWatch, RecordingCallback, Scenario, gang_tags, start_scenario

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
            resources:
              guaranteed: {memory: 50, vcore: 5}
              max: {memory: 200, vcore: 20}
          - name: b
            queues:
              - name: c
          - name: default
"""

DOC = openapi_document()
P = "/ws/v1/partition/default"
Json = Any


@pytest_asyncio.fixture
async def s() -> AsyncIterator[Scenario]:
    with ErrorWatch() as errors:
        async with start_scenario(QUEUES) as scenario:
            yield scenario
    assert not errors, errors.report()


@pytest_asyncio.fixture
async def busy(s: Scenario) -> Scenario:
    """Nodes, running and pending applications, a placeholder gang, a permit gang member,
    a reservation, a draining node, a rejected and a completed application."""
    await s.add_nodes("n1", "n2")
    await s.submit("app-1", queue="root.a", user="alice")
    await s.ask("app-1", "work", count=2, memory=40, vcore=1)
    await s.submit_gang("spark", {"driver": 1, "executor": 2}, queue="root.b.c")
    await s.submit("p-1", queue="root.default")
    await s.ask("p-1", "m1", tags=gang_tags("g1", 2))
    await s.submit("big", queue="root.default")
    await s.ask("big", "huge", memory=95, vcore=1)  # fits no node: reserves one after 2 s
    await s.advance(3)
    await s.add_nodes("n3", memory=20, vcore=2)
    await s.core.update_node(
        si.NodeRequest(
            rm_id=s.rm_id, nodes=[si.NodeInfo(node_id="n3", action=si.ActionFromRM.DRAIN_NODE)]
        )
    )
    await s.submit("lost", queue="root.nosuch")  # no placement rules: rejected
    await s.submit("old", queue="root.a")
    await s.remove("old")  # removed while New: Completed
    return s


@pytest_asyncio.fixture
async def client(s: Scenario) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=make_app(in_process(s)))
    async with httpx.AsyncClient(transport=transport, base_url="http://scheduler") as c:
        yield c


async def get(client: httpx.AsyncClient, path: str, schema: Json, **kw: Any) -> Json:
    """GET ``path``, expect 200, check the body against ``schema`` (a component's name or
    a schema) and return it."""
    r = await client.get(path, **kw)
    assert r.status_code == 200, r.text
    body = r.json()
    problems = conforms(
        body, {"$ref": f"#/components/schemas/{schema}"} if isinstance(schema, str) else schema
    )
    assert not problems, problems
    return body


async def error(client: httpx.AsyncClient, path: str, status: int, message: str) -> Json:
    r = await client.get(path)
    assert r.status_code == status, r.text
    body = r.json()
    assert body["status_code"] == status
    assert body["message"] == message
    assert not conforms(body, {"$ref": "#/components/schemas/YAPIError"})
    return body


def many(name: str) -> Json:
    """The schema of a list of the component ``name``."""
    return {"type": "array", "items": {"$ref": f"#/components/schemas/{name}"}}


def in_process(s: Scenario) -> scheduler.Core:
    """The scenario's core, which start_scenario starts in this process."""
    assert isinstance(s.core, scheduler.Core)
    return s.core


def conforms(value: Json, schema: Json, where: str = "$") -> list[str]:
    """Where ``value`` departs from an OpenAPI ``schema`` of DOC: missing or unknown
    fields, wrong types."""
    if "$ref" in schema:
        schema = DOC["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    if value is None:
        return [] if schema.get("nullable") else [f"{where}: null"]
    kind = schema.get("type")
    checks: dict[str, Callable[[Json], bool]] = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "boolean": lambda v: isinstance(v, bool),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    }
    if kind is not None and not checks[kind](value):
        return [f"{where}: {value!r} is not {kind}"]
    problems: list[str] = []
    if kind == "array":
        for i, item in enumerate(value):
            problems += conforms(item, schema["items"], f"{where}[{i}]")
    if kind == "object":
        props = schema.get("properties")
        if props is not None:
            problems += [f"{where}: unknown field {k!r}" for k in value if k not in props]
            problems += [f"{where}: missing {k!r}" for k in schema["required"] if k not in value]
            for k, v in value.items():
                if k in props:
                    problems += conforms(v, props[k], f"{where}.{k}")
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for k, v in value.items():
                problems += conforms(v, extra, f"{where}.{k}")
    return problems


def ids(apps: list[Json]) -> list[str]:
    return sorted(a["applicationID"] for a in apps)


# ================================================================================ routes
@pytest.mark.asyncio
async def test_every_route_is_in_the_openapi_document_and_back(s: Scenario) -> None:
    app = make_app(in_process(s))
    api = [r for r in app.routes if isinstance(r, Route) and r.include_in_schema]
    assert {r.path_format for r in api} == set(DOC["paths"])
    pages = {r.path_format for r in app.routes if isinstance(r, Route) and not r.include_in_schema}
    assert pages == {"/"}  # the status page, outside the API
    for path, item in DOC["paths"].items():
        assert set(item) == ({"post"} if path == "/ws/v1/validate-conf" else {"get"})
        (op,) = item.values()
        in_path = {p["name"] for p in op["parameters"] if p["in"] == "path"}
        assert {f"{{{name}}}" for name in in_path} == {
            part for part in path.split("/") if part.startswith("{")
        }
        assert {"200", "405"} <= set(op["responses"])
    assert DOC["openapi"].startswith("3.")


@pytest.mark.asyncio
async def test_the_status_page_is_served(client: httpx.AsyncClient) -> None:
    response = await client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "<title>Scheduler</title>" in response.text
    assert "/ws/v1" in response.text  # it reads the API itself
    assert (await client.head("/")).status_code == 200
    assert (await client.post("/")).status_code == 405


@pytest.mark.asyncio
async def test_the_document_is_served(client: httpx.AsyncClient) -> None:
    assert await get(client, "/ws/v1/openapi.json", {"type": "object"}) == DOC


@pytest.mark.asyncio
async def test_without_a_resource_manager_everything_is_empty() -> None:
    async with scheduler.start_scheduler() as core:
        transport = httpx.ASGITransport(app=make_app(core))
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as c:
            assert await get(c, "/ws/v1/partitions", many("PartitionInfo")) == []
            await error(c, f"{P}/queues", 404, "Partition not found")
            await error(c, f"{P}/nodes", 404, "Partition not found")
            await error(c, "/ws/v1/config", 404, "no resource manager is registered")
            dump = await get(c, "/ws/v1/fullstatedump", "StateDump")
            assert dump["Partitions"] == dump["Applications"] == dump["Nodes"] == []
            health = await get(c, "/ws/v1/scheduler/healthcheck", "SchedulerHealth")
            assert health["Healthy"] is True
            r = await c.get("/ws/v1/metrics")
            assert r.status_code == 200
            names = {f.name for f in text_string_to_metric_families(r.text)}
            assert "yunikorn_scheduler_node" in names


# ======================================================================== partitions
@pytest.mark.asyncio
async def test_partitions(busy: Scenario, client: httpx.AsyncClient) -> None:
    (part,) = await get(client, "/ws/v1/partitions", many("PartitionInfo"))
    assert part["name"] == "default"
    assert part["clusterId"] == "rm-1"
    assert part["totalNodes"] == 3
    assert part["capacity"]["capacity"] == {"memory": 220, "vcore": 22}
    used = {"memory": 40 * 2 + 10 * 3 + 10, "vcore": 6}  # app-1, spark's placeholders, p-1
    assert part["capacity"]["usedCapacity"] == used
    assert part["applications"] == {
        "total": 6,
        "Running": 1,
        "Starting": 1,
        "Accepted": 2,
        "Rejected": 1,
        "Completed": 1,
    }
    assert part["totalContainers"] == 6
    assert part["preemptionEnabled"] is True  # the configuration says nothing: enabled
    assert part["rmState"] == "Running" and "rmStopsAt" not in part


@pytest.mark.asyncio
async def test_a_paused_rms_partition_says_so(s: Scenario, client: httpx.AsyncClient) -> None:
    await s.add_nodes("n1")
    await s.advance(5)
    assert in_process(s).rm_disconnected(s.rm_id) is True
    [rm] = await in_process(s).get_resource_managers()
    (part,) = await get(client, "/ws/v1/partitions", many("PartitionInfo"))
    assert (part["state"], part["rmState"]) == ("Active", "Paused")  # its state is kept
    assert part["rmStopsAt"] == rm["stopsAt"]
    dump = await get(client, "/ws/v1/fullstatedump", "StateDump")
    assert dump["Partitions"] == [part]


# ============================================================================ queues
@pytest.mark.asyncio
async def test_queue_tree_and_one_queue(busy: Scenario, client: httpx.AsyncClient) -> None:
    root = await get(client, f"{P}/queues", "QueueInfo")
    assert root["queuename"] == "root"
    assert [c["queuename"] for c in root["children"]] == ["root.a", "root.b", "root.default"]
    a = await get(client, f"{P}/queue/root.a", "QueueInfo")
    assert a["allocatedResource"] == {"memory": 80, "vcore": 2}
    assert a["maxResource"] == {"memory": 200, "vcore": 20_000}  # milli-vcores
    assert a["guaranteedResource"] == {"memory": 50, "vcore": 5_000}
    assert a["applications"] == ["app-1"]
    assert a["isLeaf"] is True and a["parent"] == "root"
    assert (a["preemptionEnabled"], a["isPreemptionFence"], a["preemptionDelay"]) == (
        True,
        False,
        "30s",
    )
    b = await get(client, f"{P}/queue/root.b", "QueueInfo")
    assert "children" not in b  # YuniKorn: children only with ?subtree
    b = await get(client, f"{P}/queue/root.b?subtree", "QueueInfo")
    assert [c["queuename"] for c in b["children"]] == ["root.b.c"]
    assert b["allocatedResource"] == {"memory": 30, "vcore": 3}


@pytest.mark.asyncio
async def test_queue_errors(busy: Scenario, client: httpx.AsyncClient) -> None:
    body = await error(client, f"{P}/queue/root.zz", 404, "Queue not found")
    assert "root.zz" in body["description"]
    await error(client, "/ws/v1/partition/nope/queue/root.a", 404, "Partition not found")
    await error(client, f"{P}/queue/root.zz/applications", 404, "Queue not found")
    r = await client.get(f"{P}/queue/root.a!b/applications")
    assert r.status_code == 400
    assert r.json()["status_code"] == 400
    assert "'a!b'" in r.json()["description"]
    r = await client.get(f"{P}/queue/root..a")
    assert r.status_code == 400


# ====================================================================== applications
@pytest.mark.asyncio
async def test_queue_applications(busy: Scenario, client: httpx.AsyncClient) -> None:
    apps = await get(client, f"{P}/queue/root.a/applications", many("ApplicationInfo"))
    assert ids(apps) == ["app-1", "old"]  # live, then terminated (YuniKorn v1.2)
    apps = await get(client, f"{P}/queue/root.b.c/applications", many("ApplicationInfo"))
    assert ids(apps) == ["spark"]
    assert await get(client, f"{P}/queue/root.b/applications", {"type": "array"}) == []


@pytest.mark.asyncio
async def test_queue_application(busy: Scenario, client: httpx.AsyncClient) -> None:
    app = await get(client, f"{P}/queue/root.a/application/app-1", "ApplicationInfo")
    assert app["applicationID"] == "app-1"
    assert app["user"] == "alice"
    await error(
        client,
        f"{P}/queue/root.default/application/app-1",
        404,
        "Application not found",
    )
    await error(
        client,
        f"{P}/queue/root.a/application/ghost",
        404,
        "Application not found",
    )
    await error(client, f"{P}/queue/root.zz/application/app-1", 404, "Queue not found")


@pytest.mark.asyncio
async def test_applications_by_state(busy: Scenario, client: httpx.AsyncClient) -> None:
    base = f"{P}/applications"
    apps = many("ApplicationInfo")
    assert ids(await get(client, f"{base}/active", apps)) == ["app-1", "big", "p-1", "spark"]
    assert ids(await get(client, f"{base}/ACTIVE", apps)) == ["app-1", "big", "p-1", "spark"]
    assert ids(await get(client, f"{base}/active?status=Accepted", apps)) == ["big", "p-1"]
    assert ids(await get(client, f"{base}/active?status=running", apps)) == ["app-1"]
    (lost,) = await get(client, f"{base}/rejected", apps)
    assert lost["applicationID"] == "lost"
    assert "root.nosuch" in lost["rejectedMessage"]
    (old,) = await get(client, f"{base}/completed", apps)
    assert old["applicationID"] == "old"
    assert old["applicationState"] == "Completed"
    body = await error(
        client,
        f"{base}/running",
        400,
        "application state must be one of active, rejected, completed",
    )
    assert body["description"] == body["message"]
    r = await client.get(f"{base}/active?status=completed")
    assert r.status_code == 400
    r = await client.get(f"{base}/completed?status=running")
    assert r.status_code == 400
    await error(client, "/ws/v1/partition/nope/applications/active", 404, "Partition not found")


@pytest.mark.asyncio
async def test_one_application(busy: Scenario, client: httpx.AsyncClient) -> None:
    app = await get(client, f"{P}/application/app-1", "ApplicationInfo")
    assert app["queueName"] == "root.a"
    assert app["applicationState"] == "Running"
    assert app["usedResource"] == {"memory": 80, "vcore": 2}
    assert sorted(a["nodeId"] for a in app["allocations"]) == ["n1", "n2"]
    spark = await get(client, f"{P}/application/spark", "ApplicationInfo")
    assert {(p["taskGroupName"], p["count"]) for p in spark["placeholderData"]} == {
        ("driver", 1),
        ("executor", 2),
    }
    assert all(a["placeholder"] for a in spark["allocations"])
    p1 = await get(client, f"{P}/application/p-1", "ApplicationInfo")
    (gang,) = p1["gangs"]
    assert gang["gangId"] == "default/g1" and gang["minAvailable"] == 2 and gang["placed"] == 1
    assert p1["allocations"][0]["tentative"] is True
    big = await get(client, f"{P}/application/big", "ApplicationInfo")
    assert big["hasReserved"] is True
    assert big["pendingResource"] == {"memory": 95, "vcore": 1}
    lost = await get(client, f"{P}/application/lost", "ApplicationInfo")
    assert lost["applicationState"] == "Rejected"
    body = await error(client, f"{P}/application/ghost", 404, "Application not found")
    assert "ghost" in body["description"]


# ============================================================================= nodes
@pytest.mark.asyncio
async def test_nodes(busy: Scenario, client: httpx.AsyncClient) -> None:
    nodes = await get(client, f"{P}/nodes", many("NodeInfo"))
    assert sorted(n["nodeID"] for n in nodes) == ["n1", "n2", "n3"]
    n3 = await get(client, f"{P}/node/n3", "NodeInfo")
    assert n3["schedulable"] is False and n3["allocations"] == []
    assert n3["capacity"] == n3["available"] == {"memory": 20, "vcore": 2}
    held = [a["uuid"] for n in nodes for a in n["allocations"] if a["applicationId"] == "app-1"]
    app = await get(client, f"{P}/application/app-1", "ApplicationInfo")
    assert sorted(held) == sorted(a["uuid"] for a in app["allocations"])
    assert [n["reservations"] for n in nodes if n["isReserved"]] == [["big|huge"]]
    await error(client, f"{P}/node/ghost", 404, "Node not found")
    await error(client, "/ws/v1/partition/nope/node/n1", 404, "Partition not found")


@pytest.mark.asyncio
async def test_user_and_group_usage(busy: Scenario, client: httpx.AsyncClient) -> None:
    users = await get(client, f"{P}/usage/users", many("UserUsage"))
    alice = next(u for u in users if u["userName"] == "alice")
    assert alice["queues"]["resourceUsage"] == {"memory": 80, "vcore": 2}
    assert await get(client, f"{P}/usage/groups", {"type": "array"}) == []
    await error(client, "/ws/v1/partition/nope/usage/users", 404, "Partition not found")


# ======================================================================== state dump
@pytest.mark.asyncio
async def test_full_state_dump(busy: Scenario, client: httpx.AsyncClient) -> None:
    dump = await get(client, "/ws/v1/fullstatedump", "StateDump")
    assert [p["name"] for p in dump["Partitions"]] == ["default"]
    assert ids(dump["Applications"]) == ["app-1", "big", "lost", "old", "p-1", "spark"]
    (nodes,) = dump["Nodes"]
    assert nodes["partitionName"] == "default" and len(nodes["nodesInfo"]) == 3
    assert [q["queuename"] for q in dump["Queues"]] == ["root"]
    assert any(name.endswith("/app:app-1#1") for name in dump["Actors"])


# ============================================================================ config
@pytest.mark.asyncio
async def test_config_as_yaml_and_json(busy: Scenario, client: httpx.AsyncClient) -> None:
    r = await client.get("/ws/v1/config")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/x-yaml")
    doc = yaml.safe_load(r.text)
    assert not conforms(doc, {"$ref": "#/components/schemas/Config"})
    assert doc["checksum"] == parse_config(QUEUES).checksum
    assert parse_config(r.text).partitions == parse_config(QUEUES).partitions  # loads again
    (root,) = doc["partitions"][0]["queues"]
    a = next(q for q in root["queues"] if q["name"] == "a")
    assert a["resources"] == {
        "guaranteed": {"memory": "50", "vcore": "5000m"},
        "max": {"memory": "200", "vcore": "20000m"},
    }
    as_json = await get(client, "/ws/v1/config", "Config", headers={"Accept": "application/json"})
    assert as_json == doc


@pytest.mark.asyncio
async def test_preemption_settings_show_in_the_partition_and_queue_views(
    s: Scenario, client: httpx.AsyncClient
) -> None:
    partition = "partitions:\n  - name: default\n"
    off = QUEUES.replace(partition, partition + "    preemption: {enabled: false}\n")
    off = off.replace(
        "          - name: b\n",
        "          - name: b\n            properties:\n"
        "              preemption.policy: DISABLED\n              preemption.delay: 90s\n",
    )
    await s.core.update_configuration(si.UpdateConfigurationRequest(rm_id=s.rm_id, config=off))
    (part,) = await get(client, "/ws/v1/partitions", many("PartitionInfo"))
    assert part["preemptionEnabled"] is False
    b = await get(client, f"{P}/queue/root.b", "QueueInfo")
    c = await get(client, f"{P}/queue/root.b.c", "QueueInfo")
    assert (b["preemptionEnabled"], b["isPreemptionFence"], b["preemptionDelay"]) == (
        False,
        False,
        "30s",  # a parent's delay is its leaves'
    )
    assert (c["preemptionEnabled"], c["preemptionDelay"]) == (False, "1m30s")
    assert b["properties"] == {"preemption.policy": "DISABLED", "preemption.delay": "90s"}


@pytest.mark.asyncio
async def test_config_writes_preemption_only_when_disabled(
    s: Scenario, client: httpx.AsyncClient
) -> None:
    doc = yaml.safe_load((await client.get("/ws/v1/config")).text)
    assert "preemption" not in doc["partitions"][0]  # enabled: the default
    partition = "partitions:\n  - name: default\n"
    off = QUEUES.replace(partition, partition + "    preemption: {enabled: false}\n")
    await s.core.update_configuration(si.UpdateConfigurationRequest(rm_id=s.rm_id, config=off))
    r = await client.get("/ws/v1/config")
    assert yaml.safe_load(r.text)["partitions"][0]["preemption"] == {"enabled": False}
    (partition_config,) = parse_config(r.text).partitions  # loads again, still disabled
    assert partition_config.preemption_enabled is False


@pytest.mark.asyncio
async def test_config_with_two_resource_managers(s: Scenario, client: httpx.AsyncClient) -> None:
    other = """
partitions:
  - name: gpu
    queues:
      - name: root
        submitacl: "*"
"""
    request = si.RegisterResourceManagerRequest(
        rm_id="rm-2", policy_group="default", version="1", config=other
    )
    await s.core.register_resource_manager(request, RecordingCallback())
    await error(
        client,
        "/ws/v1/config",
        400,
        "several resource managers are registered: name one with ?rm= (rm-1, rm-2)",
    )
    r = await client.get("/ws/v1/config?rm=rm-2", headers={"Accept": "application/json"})
    assert r.status_code == 200
    assert [p["name"] for p in r.json()["partitions"]] == ["gpu"]
    await error(client, "/ws/v1/config?rm=rm-9", 404, "resource manager 'rm-9' is not registered")
    names = [p["name"] for p in (await client.get("/ws/v1/partitions")).json()]
    assert sorted(names) == ["default", "gpu"]


# ============================================================================ errors
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
@pytest.mark.asyncio
async def test_only_get_is_allowed(busy: Scenario, client: httpx.AsyncClient, method: str) -> None:
    for path in ("/ws/v1/partitions", "/ws/v1/config", f"{P}/node/n1"):
        r = await client.request(method, path)
        assert r.status_code == 405
        assert r.json() == {
            "status_code": 405,
            "message": "Method Not Allowed",
            "description": f"{method} is not allowed: {path} answers GET only",
        }
        assert "GET" in r.headers["allow"]


@pytest.mark.parametrize("method", ["GET", "HEAD", "PUT", "DELETE"])
@pytest.mark.asyncio
async def test_validate_conf_answers_post_only(client: httpx.AsyncClient, method: str) -> None:
    """YuniKorn's routes.go registers validate-conf for POST alone: any other method is a 405
    (a YAPIError; none for HEAD, which has no body)."""
    r = await client.request(method, "/ws/v1/validate-conf")
    assert r.status_code == 405
    assert r.headers["allow"] == "POST"
    if method != "HEAD":
        assert r.json()["description"] == (
            f"{method} is not allowed: /ws/v1/validate-conf answers POST only"
        )


@pytest.mark.asyncio
async def test_head_answers_as_get_without_a_body(
    busy: Scenario, client: httpx.AsyncClient
) -> None:
    r = await client.head("/ws/v1/partitions")
    assert r.status_code == 200 and r.content == b""


@pytest.mark.asyncio
async def test_unknown_path(client: httpx.AsyncClient) -> None:
    body = await error(client, "/ws/v1/nothing", 404, "Not Found")
    assert body["description"] == "no such path: /ws/v1/nothing"
    await error(client, "/ws/v2/partitions", 404, "Not Found")


@pytest.mark.asyncio
async def test_a_stopped_core_is_an_internal_error() -> None:
    async with start_scenario() as s:
        app = make_app(in_process(s))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://x") as c:
        await error(c, "/ws/v1/partitions", 500, "Internal Server Error")


# ====================================================================== health check
@pytest.mark.asyncio
async def test_healthcheck_of_a_consistent_core(busy: Scenario, client: httpx.AsyncClient) -> None:
    health = await get(client, "/ws/v1/scheduler/healthcheck", "SchedulerHealth")
    assert health["Healthy"] is True
    assert all(c["Succeeded"] for c in health["HealthChecks"]), health
    names = {c["Name"] for c in health["HealthChecks"]}
    assert names == {
        "Scheduling errors",
        "Failed nodes",
        "Negative resources",
        "Consistency of data",
        "Orphan allocation on node check",
        "Orphan allocation on app check",
        "Reservation check",
    }
    assert len(health["HealthChecks"]) == len(HEALTH_CHECKS)


@pytest.mark.asyncio
async def test_an_unhealthy_core_answers_503_with_the_checks(
    busy: Scenario, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    dump = await busy.core.state_dump()
    dump["partitions"][0]["nodes"][0]["allocated"]["memory"] += 1

    async def doctored() -> dict[str, Any]:
        return dump

    monkeypatch.setattr(busy.core, "state_dump", doctored)
    r = await client.get("/ws/v1/scheduler/healthcheck")
    assert r.status_code == 503
    body = r.json()
    assert not conforms(body, {"$ref": "#/components/schemas/SchedulerHealth"})
    assert body["Healthy"] is False
    failed = [c for c in body["HealthChecks"] if not c["Succeeded"]]
    assert failed and all(c["Name"] == "Consistency of data" for c in failed)
    assert any("default/n" in c["DiagnosisMessage"] for c in failed)


@pytest.mark.asyncio
async def test_the_core_stays_healthy_through_gangs_and_node_loss(s: Scenario) -> None:
    async def healthy() -> bool:
        status = health_status(await s.core.state_dump())
        failed = [c for c in status["HealthChecks"] if not c["Succeeded"]]
        assert not failed, failed
        return bool(status["Healthy"])

    await s.add_nodes("n1", "n2")
    await s.submit_gang("spark", {"driver": 1, "executor": 2}, queue="root.b.c")
    await s.ask("spark", "driver", task_group="driver")
    await s.ask("spark", "executor", count=2, task_group="executor")
    assert await healthy()  # placeholders released, the RM's confirmation pending
    await s.confirm_releases()
    assert await healthy()
    await s.submit("p", queue="root.default")
    await s.ask("p", "m1", tags=gang_tags("g", 2, waiting_time="5s"))
    await s.advance(6)  # the permit gang times out
    assert await healthy()
    drop = si.NodeInfo(node_id="n1", action=si.ActionFromRM.DECOMISSION)
    await s.core.update_node(si.NodeRequest(rm_id=s.rm_id, nodes=[drop]))
    await s.core.settle()
    assert await healthy()
    await s.release(*s.allocations())
    await s.remove("spark", "p")
    assert await healthy()


def node(dump: Json, node_id: str) -> Json:
    return next(n for n in dump["partitions"][0]["nodes"] if n["nodeID"] == node_id)


def busy_node(dump: Json) -> Json:
    return next(n for n in dump["partitions"][0]["nodes"] if n["allocations"])


def app(dump: Json, app_id: str) -> Json:
    part = dump["partitions"][0]
    return next(
        a
        for a in (*part["applications"], *part["terminatedApplications"])
        if a["applicationID"] == app_id
    )


def queue(dump: Json, path: str) -> Json:
    def walk(q: Json) -> Iterator[Json]:
        yield q
        for c in q["children"]:
            yield from walk(c)

    return next(q for q in walk(dump["partitions"][0]["queues"]) if q["queuename"] == path)


def bump(res: Json, name: str = "memory", by: int = 1) -> None:
    res[name] = res.get(name, 0) + by


def metric(d: Json, key: str) -> Json:
    return d["partitions"][0]["schedulerMetrics"][key]


# check's name (its function), how to break it
DOCTORS: dict[str, Callable[[Json], None]] = {
    "check_scheduling_errors": lambda d: bump(metric(d, "containerAllocationAttempts"), "error"),
    "check_failed_nodes": lambda d: d["partitions"][0]["schedulerMetrics"].update(failedNodes=2),
    "check_negative_partitions": lambda d: d["partitions"][0]["partition"]["capacity"][
        "usedCapacity"
    ].update(memory=-1),
    "check_negative_nodes": lambda d: node(d, "n3")["occupied"].update(vcore=-1),
    "check_negative_queues": lambda d: queue(d, "root.b.c")["pendingResource"].update(memory=-5),
    "check_negative_applications": lambda d: app(d, "big")["requests"][0]["resource"].update(
        memory=-95
    ),
    "check_partition_allocated": lambda d: bump(
        d["partitions"][0]["partition"]["capacity"]["usedCapacity"]
    ),
    "check_partition_capacity": lambda d: bump(
        d["partitions"][0]["partition"]["capacity"]["capacity"], "gpu"
    ),
    "check_node_totals": lambda d: bump(node(d, "n3")["available"]),
    "check_node_capacity": lambda d: busy_node(d)["capacity"].update(memory=1),
    "check_node_allocations": lambda d: busy_node(d)["allocations"].pop(),
    "check_application_allocations": lambda d: bump(app(d, "app-1")["usedResource"], by=-40),
    "check_queue_allocations": lambda d: bump(queue(d, "root.b")["allocatedResource"]),
    "check_orphans_on_nodes": lambda d: busy_node(d)["allocations"][0].update(
        applicationId="ghost"
    ),
    "check_orphans_on_apps": lambda d: app(d, "spark")["allocations"][0].update(nodeId="n9"),
    "check_reservations": lambda d: app(d, "app-1")["reservations"].append("n2|work"),
}


def test_every_check_has_a_doctor() -> None:
    assert set(DOCTORS) == {check.__name__ for check in HEALTH_CHECKS}


@pytest.mark.parametrize("check", HEALTH_CHECKS, ids=lambda c: c.__name__)
@pytest.mark.asyncio
async def test_each_check_fails_on_a_doctored_dump(
    busy: Scenario, check: Callable[[Json], Json]
) -> None:
    dump = await busy.core.state_dump()
    assert check(dump)["Succeeded"] is True, check(dump)
    doctored = copy.deepcopy(dump)
    DOCTORS[check.__name__](doctored)
    result = check(doctored)
    assert result["Succeeded"] is False
    message = result["DiagnosisMessage"]
    assert message.split(": ", 1)[1] != "[]" if ": " in message else "There were 0" not in message
    assert health_status(doctored)["Healthy"] is False
    assert health_status(dump)["Healthy"] is True


@pytest.mark.parametrize(
    "doctor",
    [
        lambda d: queue(d, "root.a")["applications"].append("ghost"),  # lists a dead app
        lambda d: node(d, "n1")["reservations"].append("app-1|work"),  # app does not list it
        lambda d: node(d, "n2")["reservations"].append("ghost|x"),  # no such application
        lambda d: busy_node(d)["allocations"][0].update(nodeId="elsewhere"),
    ],
)
@pytest.mark.asyncio
async def test_more_ways_to_break_the_state(busy: Scenario, doctor: Callable[[Json], None]) -> None:
    dump = copy.deepcopy(await busy.core.state_dump())
    doctor(dump)
    assert health_status(dump)["Healthy"] is False


def test_reservation_keys_may_hold_the_separator() -> None:
    dump = {
        "partitions": [
            {
                "partition": {"name": "p"},
                "applications": [{"applicationID": "a|1", "reservations": ["n|2|k|3"]}],
                "nodes": [{"nodeID": "n|2", "reservations": ["a|1|k|3"]}],
            }
        ]
    }
    assert check_reservations(dump)["Succeeded"] is True


# =========================================================================== metrics
async def scrape(client: httpx.AsyncClient) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    r = await client.get("/ws/v1/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    return {
        family.name: {tuple(sorted(x.labels.items())): x.value for x in family.samples}
        for family in text_string_to_metric_families(r.text)
    }


@pytest.mark.asyncio
async def test_metrics_read_a_dump_without_asks_or_allocations(busy: Scenario) -> None:
    """A scrape reads the state dump without the lists of pending asks and allocations (it
    costs per application, queue and node, however deep the backlog), and finds in it the
    same metrics as in the whole dump."""
    core = busy.core
    assert isinstance(core, scheduler.Core)  # the in-process core (the REST's own)
    full = await core.state_dump()
    summary = await core.state_dump(detail=False)
    (part,) = summary["partitions"]
    assert part["applications"] and all(
        "requests" not in a and "allocations" not in a for a in part["applications"]
    )
    assert part["nodes"] and all("allocations" not in n for n in part["nodes"])
    assert any(a["requests"] for a in full["partitions"][0]["applications"])

    def samples(dump: Json) -> list[tuple[str, list[Any]]]:
        return sorted((f.name, sorted(map(repr, f.samples))) for f in metric_families(dump))

    summary["actors"] = full["actors"]  # the actors' own counters moved in between
    summary["retiredActors"] = full["retiredActors"]
    assert samples(summary) == samples(full)


@pytest.mark.asyncio
async def test_scheduler_and_queue_metrics(busy: Scenario, client: httpx.AsyncClient) -> None:
    m = await scrape(client)
    apps = m["yunikorn_scheduler_application_total"]
    assert apps[(("state", "running"),)] == 1
    assert apps[(("state", "accepted"),)] == 2
    assert apps[(("state", "rejected"),)] == 1
    assert apps[(("state", "completed"),)] == 1
    assert apps[(("state", "failed"),)] == 0
    assert m["yunikorn_scheduler_node"] == {
        (("state", "active"),): 3,
        (("state", "draining"),): 1,
        (("state", "failed"),): 0,
        (("state", "decommissioned"),): 0,
    }
    memory = m["yunikorn_scheduler_memory_node_usage_total"]
    assert sum(memory.values()) == 3
    assert memory[(("range", "[0,10%]"),)] == 1  # n3, empty
    res = m["yunikorn_root_a_queue_resource"]
    assert res[(("partition", "default"), ("resource", "memory"), ("state", "allocated"))] == 80
    assert res[(("partition", "default"), ("resource", "vcore"), ("state", "max"))] == 20_000
    assert res[(("partition", "default"), ("resource", "memory"), ("state", "guaranteed"))] == 50
    assert m["yunikorn_root_a_queue_app"] == {
        (("partition", "default"), ("state", "running")): 1,
        (("partition", "default"), ("state", "completed")): 1,
    }
    pending = m["yunikorn_root_default_queue_resource"]
    assert pending[(("partition", "default"), ("resource", "memory"), ("state", "pending"))] == 95
    assert m["yunikorn_root_b_c_queue_app"] == {
        (("partition", "default"), ("state", "starting")): 1
    }


@pytest.mark.asyncio
async def test_counter_metrics_match_what_the_rm_was_told(
    busy: Scenario, client: httpx.AsyncClient
) -> None:
    rm = busy.rm
    mine = [a for r in rm.allocation_responses for a in r.new if a.application_id == "app-1"]
    await busy.release(mine[0])  # the RM's own release, confirmed: counted as released
    m = await scrape(client)
    attempts = m["yunikorn_scheduler_container_allocation_attempt"]  # ..._total samples
    told = {
        "allocated": sum(len(r.new) for r in rm.allocation_responses),
        "rejected": sum(len(r.rejected) for r in rm.allocation_responses),
        "released": sum(len(r.released) for r in rm.allocation_responses),
        "error": 0,
    }
    assert told["allocated"] > 0 and told["released"] > 0
    assert {dict(k)["state"]: v for k, v in attempts.items()} == told
    submissions = m["yunikorn_scheduler_application_submission"]
    assert {dict(k)["result"]: v for k, v in submissions.items()} == {
        "accepted": sum(len(r.accepted) for r in rm.application_responses),
        "rejected": sum(len(r.rejected) for r in rm.application_responses),
    }


@pytest.mark.asyncio
async def test_the_latency_histogram_reads_the_core_clock(
    busy: Scenario, client: httpx.AsyncClient
) -> None:
    r = await client.get("/ws/v1/metrics")
    name = "yunikorn_scheduler_scheduling_latency_milliseconds"
    (family,) = [f for f in text_string_to_metric_families(r.text) if f.name == name]
    assert family.type == "histogram"
    samples = {(x.name, x.labels.get("le")): x.value for x in family.samples}
    count = samples[(name + "_count", None)]
    assert count > 0  # one observation per pass, every one 0 s on the manual clock
    assert samples[(name + "_bucket", "0.0001")] == count == samples[(name + "_bucket", "+Inf")]
    assert samples[(name + "_sum", None)] == 0


def test_counters_count_per_flush_and_pass() -> None:
    counters = SchedulingCounters()
    counters.count_flush([("new", 1), ("new", 2), ("released", 3), ("app_accepted", 4)])
    counters.count_flush([("rejected", 5), ("app_rejected", 6), ("new", 7)])
    for seconds in (0.00005, 0.0001, 0.05, 20.0):
        counters.observe_pass(seconds)
    info = counters.info()
    assert info["containerAllocationAttempts"] == {
        "allocated": 3,
        "rejected": 1,
        "error": 0,
        "released": 1,
    }
    assert info["applicationSubmissions"] == {"accepted": 1, "rejected": 1}
    assert info["schedulingLatency"]["buckets"] == [2, 0, 0, 1, 0, 0, 1]  # le=0.0001 .. +Inf
    assert info["schedulingLatency"]["sum"] == pytest.approx(20.05015)
    assert len(LATENCY_BUCKETS) == 6


@pytest.mark.asyncio
async def test_actor_metrics(busy: Scenario, client: httpx.AsyncClient) -> None:
    m = await scrape(client)
    live = m["yunikorn_actor_live"]
    assert {dict(k)["kind"] for k in live} == {"callback", "partition", "queue", "app", "other"}
    assert live[(("kind", "partition"),)] == 1
    assert live[(("kind", "other"),)] == 1  # the core's own: its history collector
    assert live[(("kind", "queue"),)] == 5  # root, a, b, b.c, default
    assert all(v == 0 for v in m["yunikorn_actor_mailbox_depth"].values())  # settled
    assert m["yunikorn_actor_messages_processed"][(("kind", "partition"),)] > 0
    latency = m["yunikorn_actor_handler_latency_seconds"][(("kind", "partition"),)]
    seconds = m["yunikorn_actor_handler_seconds"][(("kind", "partition"),)]
    processed = m["yunikorn_actor_messages_processed"][(("kind", "partition"),)]
    assert latency == pytest.approx(seconds / processed)
    assert all(v == 0 for v in m["yunikorn_actor_handler_failures"].values())


@pytest.mark.asyncio
async def test_stopped_actors_keep_their_counts(busy: Scenario, client: httpx.AsyncClient) -> None:
    before = await scrape(client)
    assert before["yunikorn_actor_retired_messages_processed"] == {}  # nothing stopped yet
    live = before["yunikorn_actor_messages_processed"][(("kind", "app"),)]
    await busy.register(QUEUES)  # registering again replaces every actor of the RM
    m = await scrape(client)
    retired = m["yunikorn_actor_retired_messages_processed"][(("kind", "app"),)]
    assert retired >= live > 0  # (and the messages that stopped them)
    kinds = {dict(k)["kind"] for k in m["yunikorn_actor_retired_handler_seconds"]}
    assert kinds == {"partition", "queue", "app", "callback"}
    assert m["yunikorn_actor_retired_handler_failures"][(("kind", "app"),)] == 0
    dump = await busy.core.state_dump()
    assert dump["retiredActors"]["ApplicationActor"]["processed"] == retired


@pytest.mark.asyncio
async def test_metrics_use_the_app_registry_only(busy: Scenario) -> None:
    app = make_app(in_process(busy))
    assert app.state.registry is not prometheus_client.REGISTRY
    core = [f.name for f in app.state.registry.collect() if f.name.startswith("yunikorn")]
    assert core == []  # collected on a scrape only
    default = {f.name for f in prometheus_client.REGISTRY.collect()}
    assert not any(name.startswith("yunikorn") for name in default)


def test_metric_names_follow_yunikorn() -> None:
    assert metric_name("root.a-b") == "root_a_b"
    assert metric_name("ephemeral-storage") == "ephemeral_storage"
    assert metric_name("nvidia.com/gpu") == "nvidia_com_gpu"
    assert metric_name("1x") == "_1x"


def test_actor_kinds_are_read_with_the_dump_names() -> None:
    dump = {
        "resourceManagers": ["rm/1"],
        "partitions": [{"partition": {"name": "p:x"}}, {"partition": {"name": "p"}}],
    }
    assert actor_kind("rm:rm/1#3/callback", dump) == "callback"
    assert actor_kind("rm:rm/1#3/partition:p:x", dump) == "partition"
    assert actor_kind("rm:rm/1#3/partition:p:x/queue:root.a#2", dump) == "queue"
    assert actor_kind("rm:rm/1#3/partition:p/app:ns/app:1#4", dump) == "app"
    assert actor_kind("something-else", dump) == "other"


def test_metric_families_of_an_empty_dump() -> None:
    families = metric_families(
        {"timestamp": 0, "resourceManagers": [], "partitions": [], "actors": {}}
    )
    names = {f.name for f in families}
    assert {"yunikorn_scheduler_application_total", "yunikorn_actor_mailbox_depth"} <= names
