"""Bad input: the core answers with SchedulerError or a rejection with a reason and keeps
working; it never raises anything else and never loses an allocation.

First each entry point of a resource (ask, node capacity and occupied on create and update,
recovered allocation, placeholder ask, configuration) with a negative quantity and one that
does not fit the SI's int64, and a placeholder without a task group; then the same on the
wire; then bad input generated at random.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scheduler
from scheduler import si
from scheduler.testing import ManualClock, RecordingCallback

from ..conftest import PROVIDED, RM, Driver, app, ask, node

INT64_MAX = 2**63 - 1

# (resource, what the reason says about it): vcore is the bad entry in each.
BAD_RESOURCES = [
    pytest.param(si.Resource.of(memory=10, vcore=-1), "-1 is negative", id="negative"),
    pytest.param(
        si.Resource.of(memory=10, vcore=INT64_MAX + 1),
        f"{INT64_MAX + 1} overflows a 64-bit integer",
        id="int64-overflow",
    ),
    pytest.param(si.Resource.of(memory=10, vcore=-(2**63) - 1), "is negative", id="below-int64"),
]


async def assert_still_allocates(d: Driver, app_id: str = "good") -> None:
    """The core keeps working: a good ask is allocated."""
    if app_id not in d.rm.accepted_apps:
        await d.apps(app(app_id))
    if not d.rm.accepted_nodes:
        await d.nodes(node("spare"))
    await d.asks(ask("probe", app_id))
    await d.settle()
    assert [a.allocation_key for a in d.allocs(app_id)].count("probe") == 1


# ====================================================================== asks
@pytest.mark.asyncio
@pytest.mark.parametrize(("resource", "reason"), BAD_RESOURCES)
async def test_ask_with_a_bad_quantity_is_rejected(
    driver: Driver, resource: si.Resource, reason: str
) -> None:
    d = driver
    await d.nodes(node("n1"))
    await d.apps(app("good"))
    bad = si.AllocationAsk(
        allocation_key="bad", application_id="good", partition_name="default", resource_ask=resource
    )
    await d.asks(bad)
    await d.settle()
    [rejected] = d.rm.rejected_asks
    assert (rejected.allocation_key, rejected.application_id) == ("bad", "good")
    assert "ask bad" in rejected.reason and "'vcore'" in rejected.reason
    assert reason in rejected.reason
    assert (await d.core.get_application("default", "good"))["pendingResource"] in ({}, None)
    await assert_still_allocates(d)


@pytest.mark.asyncio
async def test_placeholder_ask_without_task_group_is_rejected(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"))
    await d.apps(app("good", placeholder_ask=si.Resource.of(memory=10, vcore=1)))
    await d.asks(ask("ph", "good", placeholder=True))
    await d.settle()
    [rejected] = d.rm.rejected_asks
    assert rejected.allocation_key == "ph"
    assert "placeholder" in rejected.reason and "task group" in rejected.reason
    assert d.allocs() == []
    info = await d.core.get_application("default", "good")
    assert info["requests"] == [] and info["placeholderData"] in ([], None)
    await assert_still_allocates(d)


# ====================================================================== nodes
def _node(node_id: str, action: si.ActionFromRM, **kw: Any) -> si.NodeInfo:
    return si.NodeInfo(node_id=node_id, action=action, **kw)


@pytest.mark.asyncio
@pytest.mark.parametrize("field", ["schedulable_resource", "occupied_resource"])
@pytest.mark.parametrize(("resource", "reason"), BAD_RESOURCES)
async def test_node_create_with_a_bad_quantity_is_rejected(
    driver: Driver, field: str, resource: si.Resource, reason: str
) -> None:
    d = driver
    kw: dict[str, Any] = {"schedulable_resource": si.Resource.of(memory=100, vcore=10)}
    kw[field] = resource
    await d.nodes(_node("bad", si.ActionFromRM.CREATE, **kw))
    await d.settle()
    [rejected] = d.rm.rejected_nodes
    assert rejected.node_id == "bad" and "node bad" in rejected.reason
    assert "'vcore'" in rejected.reason and reason in rejected.reason
    with pytest.raises(scheduler.NotFoundError):
        await d.core.get_node("default", "bad")
    await assert_still_allocates(d)


@pytest.mark.asyncio
@pytest.mark.parametrize("field", ["schedulable_resource", "occupied_resource"])
@pytest.mark.parametrize(("resource", "reason"), BAD_RESOURCES)
async def test_node_update_with_a_bad_quantity_is_rejected_and_the_node_kept(
    driver: Driver, field: str, resource: si.Resource, reason: str
) -> None:
    d = driver
    await d.nodes(node("n1", memory=100, vcore=10, occupied_resource=si.Resource.of(memory=5)))
    await d.settle()
    before = await d.core.get_node("default", "n1")
    await d.nodes(
        _node(
            "n1",
            si.ActionFromRM.UPDATE,
            attributes={"a": "b"},
            **{field: resource},
        )
    )
    await d.settle()
    [rejected] = d.rm.rejected_nodes
    assert rejected.node_id == "n1" and "'vcore'" in rejected.reason and reason in rejected.reason
    after = await d.core.get_node("default", "n1")
    for key in ("capacity", "occupied", "available", "schedulable", "attributes"):
        assert after.get(key) == before.get(key), key
    await assert_still_allocates(d)  # on n1, the only node
    [probe] = d.allocs("good")
    assert probe.node_id == "n1"


@pytest.mark.asyncio
@pytest.mark.parametrize(("resource", "reason"), BAD_RESOURCES)
async def test_recovered_allocation_with_a_bad_quantity_rejects_the_node(
    driver: Driver, resource: si.Resource, reason: str
) -> None:
    d = driver
    await d.apps(app("good"))
    recovered = si.Allocation(
        allocation_key="r1",
        uuid="u1",
        application_id="good",
        partition_name="default",
        resource_per_alloc=resource,
    )
    await d.nodes(node("n1", existing_allocations=[recovered]))
    await d.settle()
    [rejected] = d.rm.rejected_nodes
    assert rejected.node_id == "n1" and "allocation u1" in rejected.reason
    assert reason in rejected.reason
    assert (await d.core.get_application("default", "good"))["allocations"] == []
    await assert_still_allocates(d)


@pytest.mark.asyncio
async def test_recovered_placeholder_without_task_group_rejects_the_node(driver: Driver) -> None:
    d = driver
    await d.apps(app("good"))
    recovered = si.Allocation(
        allocation_key="ph",
        uuid="u1",
        application_id="good",
        partition_name="default",
        resource_per_alloc=si.Resource.of(memory=10, vcore=1),
        placeholder=True,
    )
    await d.nodes(node("n1", existing_allocations=[recovered]))
    await d.settle()
    [rejected] = d.rm.rejected_nodes
    assert rejected.node_id == "n1"
    assert "u1" in rejected.reason and "placeholder without a task group" in rejected.reason
    await assert_still_allocates(d)


# ====================================================================== applications
@pytest.mark.asyncio
@pytest.mark.parametrize(("resource", "reason"), BAD_RESOURCES)
async def test_placeholder_ask_with_a_bad_quantity_rejects_the_application(
    driver: Driver, resource: si.Resource, reason: str
) -> None:
    d = driver
    await d.apps(app("gang", placeholder_ask=resource, gang_scheduling_style="Hard"))
    await d.settle()
    [rejected] = d.rm.rejected_apps
    assert rejected.application_id == "gang"
    assert "placeholder ask" in rejected.reason and reason in rejected.reason
    with pytest.raises(scheduler.NotFoundError):
        await d.core.get_application("default", "gang")
    await assert_still_allocates(d)


# ====================================================================== configuration
def _config(queue_a: str, partition_extra: str = "") -> str:
    return (
        "partitions:\n  - name: default\n"
        + partition_extra
        + "    queues:\n      - name: root\n        submitacl: '*'\n        queues:\n"
        + "          - name: A\n"
        + "".join(f"            {line}\n" for line in queue_a.splitlines())
    )


CONFIG_PLACES = [
    pytest.param("resources:\n  max: {{memory: 10, vcore: {v}}}", "", "queue 'root.a'", id="max"),
    pytest.param(
        "resources:\n  guaranteed: {{memory: 10, vcore: {v}}}",
        "",
        "queue 'root.a'",
        id="guaranteed",
    ),
    pytest.param(
        "parent: true\nchildtemplate:\n  resources:\n    max: {{memory: 10, vcore: {v}}}",
        "",
        "queue 'root.a', childtemplate",
        id="childtemplate",
    ),
    pytest.param(
        "limits:\n  - limit: l\n    users: [bob]\n    maxresources: {{memory: 10, vcore: {v}}}",
        "",
        "queue 'root.a'",
        id="queue-limit",
    ),
    pytest.param(
        "",
        "    limits:\n      - limit: l\n        users: [bob]\n"
        "        maxresources: {{memory: 10, vcore: {v}}}\n",
        "partition 'default'",
        id="partition-limit",
    ),
]
CONFIG_VALUES = [
    pytest.param("-1", "-1000 is negative", id="negative"),
    pytest.param("9223372036854775808m", "overflows a 64-bit integer", id="int64-overflow"),
    pytest.param("9223372036854776", "overflows a 64-bit integer", id="int64-overflow-vcores"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(("value", "problem"), CONFIG_VALUES)
@pytest.mark.parametrize(("queue_a", "partition_extra", "where"), CONFIG_PLACES)
async def test_configuration_with_a_bad_quantity_raises_and_keeps_the_old_one(
    driver: Driver, queue_a: str, partition_extra: str, where: str, value: str, problem: str
) -> None:
    d = driver
    config = _config(queue_a.format(v=value), partition_extra.format(v=value))
    with pytest.raises(scheduler.SchedulerError) as info:
        await d.core.update_configuration(si.UpdateConfigurationRequest(rm_id=RM, config=config))
    message = str(info.value)
    assert where in message and "'vcore'" in message and problem in message
    assert f"'{value}'" in message
    queue = await d.core.get_queue("default", "root.a")  # the old configuration's
    assert queue["maxResource"] == {"memory": 1000, "vcore": 100_000}
    with pytest.raises(scheduler.SchedulerError, match="vcore"):
        await d.core.register_resource_manager(
            si.RegisterResourceManagerRequest(rm_id="rm-2", config=config), RecordingCallback()
        )
    await assert_still_allocates(d)


# ====================================================================== on the wire
WIRE_REQUEST = {
    "rmID": RM,
    "asks": [
        {
            "allocationKey": "k",
            "applicationID": "good",
            "resourceAsk": {"resources": {"memory": {"value": 10}, "vcore": {"value": 0}}},
        }
    ],
}


def _with_vcore(value: int) -> dict[str, Any]:
    doc: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(WIRE_REQUEST))
    doc["asks"][0]["resourceAsk"]["resources"]["vcore"]["value"] = value
    return doc


@pytest.mark.parametrize("value", [INT64_MAX + 1, 2**64 - 1, -(2**63) - 1, 10**30])
def test_a_quantity_outside_int64_does_not_decode(value: int) -> None:
    doc = _with_vcore(value)
    with pytest.raises(msgspec.ValidationError, match="9223372036854775"):
        si.decode_json(msgspec.json.encode(doc), si.AllocationRequest)
    if -(2**63) <= value < 2**64:  # what MessagePack can carry at all
        with pytest.raises(msgspec.ValidationError, match="9223372036854775"):
            si.decode_msgpack(msgspec.msgpack.encode(doc), si.AllocationRequest)


@pytest.mark.parametrize("value", [INT64_MAX, -(2**63)])
def test_int64_bounds_decode(value: int) -> None:
    doc = _with_vcore(value)
    for request in (
        si.decode_json(msgspec.json.encode(doc), si.AllocationRequest),
        si.decode_msgpack(msgspec.msgpack.encode(doc), si.AllocationRequest),
    ):
        assert request.asks[0].resource_ask is not None
        assert request.asks[0].resource_ask.resources["vcore"].value == value


@pytest.mark.asyncio
@pytest.mark.parametrize(("value", "reason"), [(-1, "is negative"), (INT64_MAX, "")])
async def test_a_decoded_request_is_checked_like_an_in_process_one(
    driver: Driver, value: int, reason: str
) -> None:
    d = driver
    await d.nodes(node("n1"))
    await d.apps(app("good"))
    request = si.decode_json(msgspec.json.encode(_with_vcore(value)), si.AllocationRequest)
    await d.core.update_allocation(request)
    await d.settle()
    if reason:
        [rejected] = d.rm.rejected_asks
        assert reason in rejected.reason
    else:  # valid, but fits no node: pending
        assert d.rm.rejected_asks == []
        info = await d.core.get_application("default", "good")
        assert info["pendingResource"] == {"memory": 10, "vcore": INT64_MAX}
    await assert_still_allocates(d)


# ====================================================================== at random

junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
# small ones, and the edges of the SI's int64 (a valid 2**63 - 1 fits no node)
quantities = st.one_of(
    st.integers(-5, 50),
    st.sampled_from([INT64_MAX, INT64_MAX + 1, -(2**63), -(2**63) - 1, 2**64, -(10**30)]),
)
resources = st.one_of(
    junk,
    st.builds(
        si.Resource,
        resources=st.dictionaries(
            st.sampled_from(["memory", "vcore", "gpu"]),
            st.one_of(st.builds(si.Quantity, value=st.one_of(junk, quantities)), junk),
            max_size=3,
        ),
    ),
)
asks = st.builds(
    si.AllocationAsk,
    allocation_key=st.one_of(st.sampled_from(["k1", "k2", ""]), junk),
    application_id=st.one_of(st.sampled_from(["app-1", "nope", ""]), junk),
    partition_name=st.one_of(st.sampled_from(["", "default", "other"]), junk),
    resource_ask=resources,
    max_allocations=st.one_of(st.integers(-2, 3), junk),
    priority=st.one_of(st.integers(-5, 5), junk),
    tags=st.one_of(st.just({}), junk),
    task_group_name=st.one_of(st.sampled_from(["", "tg"]), junk),
    placeholder=st.one_of(st.booleans(), junk),
)
nodes = st.builds(
    si.NodeInfo,
    node_id=st.one_of(st.sampled_from(["n1", "n2", ""]), junk),
    action=st.one_of(st.sampled_from(list(si.ActionFromRM)), junk),
    schedulable_resource=resources,
    occupied_resource=st.one_of(st.none(), resources),
    attributes=st.one_of(st.just({}), junk),
    existing_allocations=st.lists(
        st.builds(
            si.Allocation,
            allocation_key=st.just("recovered"),
            uuid=st.sampled_from(["u1", "u2"]),
            application_id=st.sampled_from(["good-app", "app-1"]),
            resource_per_alloc=resources,
            task_group_name=st.sampled_from(["", "tg"]),
            placeholder=st.booleans(),
        ),
        max_size=2,
    ),
)
apps = st.builds(
    si.AddApplicationRequest,
    application_id=st.one_of(st.sampled_from(["app-1", "app-2", ""]), junk),
    queue_name=st.one_of(st.sampled_from(["root.a", "root", "a", ""]), junk),
    partition_name=st.one_of(st.just(""), junk),
    ugi=st.one_of(st.none(), st.builds(si.UserGroupInformation, user=st.text(max_size=3))),
    placeholder_ask=st.one_of(st.none(), resources),
    gang_scheduling_style=st.one_of(st.sampled_from(["", "Hard", "soft"]), junk),
)


async def _drive(node_list: list[Any], app_list: list[Any], ask_list: list[Any]) -> None:
    rm = RecordingCallback()
    clock = ManualClock()
    async with scheduler.start_scheduler(clock=clock) as core:
        # the provided rule accepts the random applications' queues: more of them get in
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(rm_id="rm", config=PROVIDED), rm
        )
        good_node = si.NodeInfo(
            node_id="good",
            action=si.ActionFromRM.CREATE,
            schedulable_resource=si.Resource.of(memory=10**6, vcore=10**6),
        )
        await core.update_node(si.NodeRequest(rm_id="rm", nodes=[good_node]))
        await core.update_application(
            si.ApplicationRequest(
                rm_id="rm",
                new=[si.AddApplicationRequest(application_id="good-app", queue_name="root.good")],
            )
        )
        with suppress(scheduler.SchedulerError):
            await core.update_node(si.NodeRequest(rm_id="rm", nodes=node_list))
        with suppress(scheduler.SchedulerError):
            await core.update_application(si.ApplicationRequest(rm_id="rm", new=app_list))
        with suppress(scheduler.SchedulerError):
            await core.update_allocation(si.AllocationRequest(rm_id="rm", asks=ask_list))
        await core.settle()
        await clock.advance(3)
        # the core still works: a good ask on the good node is allocated exactly once
        await core.update_allocation(
            si.AllocationRequest(
                rm_id="rm",
                asks=[
                    si.AllocationAsk(
                        allocation_key="probe",
                        application_id="good-app",
                        resource_ask=si.Resource.of(memory=1, vcore=1),
                        max_allocations=1,
                    )
                ],
            )
        )
        await core.settle()
        probes = [a for a in rm.allocations if a.allocation_key == "probe"]
        assert len(probes) == 1  # random asks cannot fill the good node
        uuids = [a.uuid for a in rm.allocations]
        assert len(uuids) == len(set(uuids))
        state = await core.state_dump()
        assert state["partitions"]
        for node in state["partitions"][0]["nodes"]:
            assert sum(a["resource"].get("memory", 0) for a in node["allocations"]) == node[
                "allocated"
            ].get("memory", 0)
            # every quantity the RM sent that the core took is a valid SI quantity
            taken = [node["capacity"], node["occupied"]]
            taken += [a["resource"] for a in node["allocations"]]
            for res in taken:
                assert all(0 <= v <= INT64_MAX for v in res.values()), res
        for application in state["partitions"][0]["applications"]:
            for request in application["requests"]:
                assert all(0 <= v <= INT64_MAX for v in request["resource"].values()), request


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    node_list=st.lists(nodes, max_size=3),
    app_list=st.lists(apps, max_size=3),
    ask_list=st.lists(asks, max_size=4),
)
def test_random_bad_input_never_breaks_the_core(
    node_list: list[Any], app_list: list[Any], ask_list: list[Any]
) -> None:
    asyncio.run(_drive(node_list, app_list, ask_list))
