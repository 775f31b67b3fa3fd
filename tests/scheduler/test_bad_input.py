"""Bad input, generated at random: the core answers with SchedulerError or a rejection and
keeps working; it never raises anything else and never loses an allocation."""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scheduler
from scheduler import si
from scheduler.testing import ManualClock, RecordingCallback

junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
resources = st.one_of(
    junk,
    st.builds(
        si.Resource,
        resources=st.dictionaries(
            st.sampled_from(["memory", "vcore", "gpu"]),
            st.one_of(st.builds(si.Quantity, value=st.one_of(junk, st.integers(-5, 50))), junk),
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
    task_group_name=st.one_of(st.just(""), junk),
)
nodes = st.builds(
    si.NodeInfo,
    node_id=st.one_of(st.sampled_from(["n1", "n2", ""]), junk),
    action=st.one_of(st.sampled_from(list(si.ActionFromRM)), junk),
    schedulable_resource=resources,
    occupied_resource=st.one_of(st.none(), resources),
    attributes=st.one_of(st.just({}), junk),
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
        await core.register_resource_manager(si.RegisterResourceManagerRequest(rm_id="rm"), rm)
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
