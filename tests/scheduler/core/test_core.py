"""The core through its public API: a recording RM, a manual clock and settle()."""

from __future__ import annotations

import asyncio
import inspect
from importlib import metadata

import pytest

import scheduler
from scheduler import si
from scheduler.testing import ManualClock, RecordingCallback

from ..conftest import PROVIDED, QUEUES, RM, Driver, app, ask, node

pytestmark = pytest.mark.asyncio


# ============================================================================ registration
async def test_public_surface_matches_the_documented_names() -> None:
    assert set(scheduler.__all__) >= {
        "start_scheduler",
        "SchedulerError",
        "NotFoundError",
        "ResourceManagerCallback",
    }
    from scheduler import testing

    assert set(testing.__all__) >= {"ManualClock"}


async def test_config_error_and_version_are_public() -> None:
    assert "ConfigError" in scheduler.__all__
    assert issubclass(scheduler.ConfigError, scheduler.SchedulerError)
    assert scheduler.__version__ == metadata.version("pyscheduler-core")


async def test_invalid_config_raises_the_public_config_error(core: scheduler.Core) -> None:
    with pytest.raises(scheduler.ConfigError, match=r"line 1, column"):
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(rm_id="rm", config="partitions: [{nme: x}]"),
            RecordingCallback(),
        )


async def test_a_callback_class_instead_of_an_instance_is_refused(core: scheduler.Core) -> None:
    with pytest.raises(scheduler.SchedulerError, match=r"pass RecordingCallback\(\), not"):
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(rm_id="rm"),
            RecordingCallback,  # type: ignore[arg-type]
        )
    assert await core.get_partitions() == []  # nothing was registered


async def test_a_callback_without_coroutine_methods_is_refused(core: scheduler.Core) -> None:
    class Sync:
        def update_allocation(self, response: si.AllocationResponse) -> None: ...

    with pytest.raises(scheduler.SchedulerError, match=r"Sync lacks .*update_allocation"):
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(rm_id="rm"),
            Sync(),  # type: ignore[arg-type]
        )


async def test_a_duck_typed_callback_instance_is_accepted(core: scheduler.Core) -> None:
    class Duck:
        async def update_allocation(self, response: si.AllocationResponse) -> None: ...
        async def update_application(self, response: si.ApplicationResponse) -> None: ...
        async def update_node(self, response: si.NodeResponse) -> None: ...
        async def predicates(self, args: si.PredicatesArgs) -> bool:
            return True

        async def send_event(self, events: list[si.EventRecord]) -> None: ...
        async def update_container_scheduling_state(
            self, request: si.UpdateContainerSchedulingStateRequest
        ) -> None: ...

    await core.register_resource_manager(
        si.RegisterResourceManagerRequest(rm_id="rm"),
        Duck(),  # type: ignore[arg-type]
    )
    assert [p["name"] for p in await core.get_partitions()] == ["default"]


async def test_register_with_invalid_config_raises(core: scheduler.Core) -> None:
    with pytest.raises(scheduler.SchedulerError):
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(rm_id="rm", config="partitions: [{name: x"),
            RecordingCallback(),
        )


async def test_register_without_rm_id_raises(core: scheduler.Core) -> None:
    with pytest.raises(scheduler.SchedulerError, match="rm_id"):
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(), RecordingCallback()
        )


async def test_user_and_group_usage_queries_extend_the_core(driver: Driver) -> None:
    for name in ("get_user_usage", "get_group_usage"):
        assert inspect.iscoroutinefunction(getattr(scheduler.Core, name))
    await driver.apps(app("app-1", user="carol"))
    await driver.nodes(node("n1"))
    await driver.asks(ask("k", "app-1"))
    await driver.settle()
    [carol] = await driver.core.get_user_usage("")  # the default partition
    assert carol["userName"] == "carol"
    assert carol["queues"]["runningApplications"] == ["app-1"]
    assert await driver.core.get_group_usage("default") == []  # no group limits: no groups
    with pytest.raises(scheduler.NotFoundError):
        await driver.core.get_user_usage("elsewhere")


async def test_default_config_when_empty(core: scheduler.Core) -> None:
    rm = RecordingCallback()
    await core.register_resource_manager(si.RegisterResourceManagerRequest(rm_id="rm"), rm)
    parts = await core.get_partitions()
    assert [p["name"] for p in parts] == ["default"]
    root = await core.get_queue("default", "root")
    assert root["queuename"] == "root" and root["isLeaf"] is False


async def test_requests_from_an_unknown_rm_raise(driver: Driver) -> None:
    with pytest.raises(scheduler.SchedulerError, match="not registered"):
        await driver.core.update_node(si.NodeRequest(rm_id="nobody", nodes=[node("n")]))
    with pytest.raises(scheduler.SchedulerError):
        await driver.core.update_allocation(si.NodeRequest(rm_id=RM))  # type: ignore[arg-type]


async def test_reregistration_drops_all_state(driver: Driver) -> None:
    await driver.nodes(node("n1"))
    await driver.apps(app("app-1"))
    await driver.settle()
    await driver.register()
    await driver.settle()
    with pytest.raises(scheduler.NotFoundError):
        await driver.core.get_node("default", "n1")
    with pytest.raises(scheduler.NotFoundError):
        await driver.core.get_application("default", "app-1")
    await driver.nodes(node("n1"))
    await driver.settle()
    assert (await driver.core.get_node("default", "n1"))["nodeID"] == "n1"


# =================================================================================== nodes
async def test_node_create_accepted_duplicate_rejected(driver: Driver) -> None:
    await driver.nodes(node("n1"), node("n1"))
    await driver.settle()
    assert driver.rm.accepted_nodes == ["n1"]
    [rejected] = driver.rm.rejected_nodes
    assert rejected.node_id == "n1" and "already exists" in rejected.reason


async def test_node_with_negative_capacity_rejected(driver: Driver) -> None:
    bad = si.NodeInfo(
        node_id="bad", action=si.ActionFromRM.CREATE, schedulable_resource=si.Resource.of(memory=-1)
    )
    await driver.nodes(bad)
    await driver.settle()
    [rejected] = driver.rm.rejected_nodes
    assert rejected.node_id == "bad" and "negative" in rejected.reason


async def test_node_update_occupied_and_capacity(driver: Driver) -> None:
    await driver.nodes(node("n1", memory=100, vcore=10))
    await driver.nodes(
        si.NodeInfo(
            node_id="n1",
            action=si.ActionFromRM.UPDATE,
            schedulable_resource=si.Resource.of(memory=200, vcore=20),
            occupied_resource=si.Resource.of(memory=50, vcore=5),
        )
    )
    await driver.settle()
    info = await driver.core.get_node("default", "n1")
    assert info["capacity"] == {"memory": 200, "vcore": 20}
    assert info["occupied"] == {"memory": 50, "vcore": 5}
    assert info["available"] == {"memory": 150, "vcore": 15}


async def test_drained_node_gets_no_allocations_until_schedulable(driver: Driver) -> None:
    await driver.nodes(node("n1"))
    await driver.nodes(si.NodeInfo(node_id="n1", action=si.ActionFromRM.DRAIN_NODE))
    await driver.apps(app("a1"))
    await driver.asks(ask("k1", "a1"))
    await driver.settle()
    assert driver.allocs() == []
    assert (await driver.core.get_node("default", "n1"))["schedulable"] is False
    await driver.nodes(si.NodeInfo(node_id="n1", action=si.ActionFromRM.DRAIN_TO_SCHEDULABLE))
    await driver.settle()
    assert [a.node_id for a in driver.allocs()] == ["n1"]


async def test_decommission_releases_the_allocations_on_the_node(driver: Driver) -> None:
    await driver.nodes(node("n1"))
    await driver.apps(app("a1"))
    await driver.asks(ask("k1", "a1"))
    await driver.settle()
    [alloc] = driver.allocs()
    await driver.nodes(si.NodeInfo(node_id="n1", action=si.ActionFromRM.DECOMISSION))
    await driver.settle()
    assert [r.uuid for r in driver.rm.released] == [alloc.uuid]
    with pytest.raises(scheduler.NotFoundError):
        await driver.core.get_node("default", "n1")
    queue = await driver.core.get_queue("default", "root.a")
    assert queue["allocatedResource"] == {}


# ============================================================================ applications
async def test_application_accepted_and_reported_new(driver: Driver) -> None:
    await driver.apps(app("a1"))
    await driver.settle()
    assert driver.rm.accepted_apps == ["a1"]
    info = await driver.core.get_application("default", "a1")
    assert info["applicationState"] == "New"
    assert info["queueName"] == "root.a"


@pytest.mark.parametrize(
    ("queue", "reason"),
    [
        ("root.nope", "does not exist"),
        ("root.parent", "not a leaf"),
        ("root", "not a leaf"),
    ],
)
async def test_application_rejected_with_reason(driver: Driver, queue: str, reason: str) -> None:
    await driver.apps(app("a1", queue=queue))
    await driver.settle()
    [rejected] = driver.rm.rejected_apps
    assert rejected.application_id == "a1" and reason in rejected.reason
    info = await driver.core.get_application("default", "a1")
    assert info["applicationState"] == "Rejected"
    assert reason in info["rejectedMessage"]


async def test_short_queue_name_is_under_root(driver: Driver) -> None:
    await driver.apps(app("a1", queue="parent.child"))
    await driver.settle()
    assert driver.rm.accepted_apps == ["a1"]
    assert (await driver.core.get_application("default", "a1"))["queueName"] == "root.parent.child"


async def test_duplicate_application_rejected(driver: Driver) -> None:
    await driver.apps(app("a1"), app("a1"))
    await driver.settle()
    assert driver.rm.accepted_apps == ["a1"]
    assert "already exists" in driver.rm.rejected_apps[0].reason


async def test_application_without_id_rejected_by_the_proxy(driver: Driver) -> None:
    await driver.apps(app(""))
    await driver.settle()
    assert "application id is missing" in driver.rm.rejected_apps[0].reason


async def test_bad_gang_style_rejected(driver: Driver) -> None:
    await driver.apps(app("a1", gang_scheduling_style="Medium"))
    await driver.settle()
    assert "neither Hard nor Soft" in driver.rm.rejected_apps[0].reason


async def test_submit_acl_is_enforced(core: scheduler.Core) -> None:
    d = Driver(core, ManualClock())
    await d.register("""
partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: open
            submitacl: "*"
          - name: closed
            submitacl: "bob"
""")
    await d.apps(
        app("a1", queue="root.closed", user="alice"),
        app("a2", queue="root.closed", user="bob"),
        app("a3", queue="root.open", user="alice"),
    )
    await d.settle()
    assert d.rm.accepted_apps == ["a2", "a3"]
    assert "may not submit" in d.rm.rejected_apps[0].reason


async def test_lifecycle_new_accepted_starting_running(driver: Driver) -> None:
    await driver.nodes(node("n1"))
    await driver.apps(app("a1"))
    await driver.asks(ask("k1", "a1"))
    await driver.settle()
    assert driver.rm.app_states("a1") == ["Accepted", "Starting"]
    await driver.asks(ask("k2", "a1"))
    await driver.settle()
    assert driver.rm.app_states("a1") == ["Accepted", "Starting", "Running"]
    info = await driver.core.get_application("default", "a1")
    assert [s["applicationState"] for s in info["stateLog"]] == [
        "New",
        "Accepted",
        "Starting",
        "Running",
    ]


async def test_starting_becomes_running_after_five_minutes(driver: Driver) -> None:
    await driver.nodes(node("n1"))
    await driver.apps(app("a1"))
    await driver.asks(ask("k1", "a1"))
    await driver.settle()
    await driver.clock.advance(299)
    assert driver.rm.app_states("a1")[-1] == "Starting"
    await driver.clock.advance(1)
    assert driver.rm.app_states("a1")[-1] == "Running"


async def test_completing_then_completed_then_expired(driver: Driver) -> None:
    await driver.nodes(node("n1"))
    await driver.apps(app("a1"))
    await driver.asks(ask("k1", "a1"), ask("k2", "a1"))
    await driver.settle()
    await driver.release(*driver.allocs("a1"))
    await driver.settle()
    assert driver.rm.app_states("a1")[-1] == "Completing"
    await driver.clock.advance(29)
    assert driver.rm.app_states("a1")[-1] == "Completing"
    await driver.clock.advance(1)
    assert driver.rm.app_states("a1")[-1] == "Completed"
    queue = await driver.core.get_queue("default", "root.a")
    assert queue["applications"] == []
    assert (await driver.core.get_application("default", "a1"))["applicationState"] == "Completed"
    await driver.clock.advance(3 * 24 * 3600)
    with pytest.raises(scheduler.NotFoundError):
        await driver.core.get_application("default", "a1")
    # the id may be used again
    await driver.apps(app("a1"))
    await driver.settle()
    assert driver.rm.accepted_apps == ["a1", "a1"]


async def test_new_ask_during_completing_brings_it_back_to_running(driver: Driver) -> None:
    await driver.nodes(node("n1"))
    await driver.apps(app("a1"))
    await driver.asks(ask("k1", "a1"))
    await driver.settle()
    await driver.release(*driver.allocs("a1"))
    await driver.settle()
    assert driver.rm.app_states("a1")[-1] == "Completing"
    await driver.asks(ask("k2", "a1"))
    await driver.settle()
    assert driver.rm.app_states("a1")[-1] == "Running"
    await driver.clock.advance(60)
    assert driver.rm.app_states("a1")[-1] == "Running"


async def test_remove_application_releases_its_allocations(driver: Driver) -> None:
    await driver.nodes(node("n1"))
    await driver.apps(app("a1"))
    await driver.asks(ask("k1", "a1", count=2), ask("k2", "a1", memory=1000))
    await driver.settle()
    uuids = {a.uuid for a in driver.allocs("a1")}
    await driver.remove_apps("a1")
    await driver.settle()
    assert {r.uuid for r in driver.rm.released} == uuids
    assert all(r.termination_type == si.TerminationType.STOPPED_BY_RM for r in driver.rm.released)
    info = await driver.core.get_application("default", "a1")
    assert info["applicationState"] == "Completed"
    queue = await driver.core.get_queue("default", "root.a")
    assert queue["allocatedResource"] == {} and queue["pendingResource"] == {}
    assert (await driver.core.get_node("default", "n1"))["allocated"] == {}


# ==================================================================================== asks
async def test_max_allocations_gives_that_many(driver: Driver) -> None:
    await driver.nodes(node("n1"))
    await driver.apps(app("a1"))
    await driver.asks(ask("k1", "a1", count=3))
    await driver.settle()
    allocs = driver.allocs("a1")
    assert [a.allocation_key for a in allocs] == ["k1"] * 3
    assert len({a.uuid for a in allocs}) == 3
    assert all(
        a.partition_name == "default"
        and a.node_id == "n1"
        and a.resource_per_alloc == si.Resource.of(memory=10, vcore=1)
        for a in allocs
    )


async def test_ask_update_with_same_key_replaces_it(driver: Driver) -> None:
    await driver.apps(app("a1"))
    await driver.asks(ask("k1", "a1", count=2))
    await driver.asks(ask("k1", "a1", memory=20, count=3))
    await driver.settle()
    info = await driver.core.get_application("default", "a1")
    assert info["pendingResource"] == {"memory": 60, "vcore": 3}
    assert [(r["allocationKey"], r["pendingCount"]) for r in info["requests"]] == [("k1", 3)]
    queue = await driver.core.get_queue("default", "root.a")
    assert queue["pendingResource"] == {"memory": 60, "vcore": 3}


async def test_ask_release_removes_pending(driver: Driver) -> None:
    await driver.apps(app("a1"))
    await driver.asks(ask("k1", "a1"), ask("k2", "a1"))
    await driver.release_asks("a1", "k1")
    await driver.settle()
    info = await driver.core.get_application("default", "a1")
    assert [r["allocationKey"] for r in info["requests"]] == ["k2"]
    await driver.release_asks("a1")
    await driver.settle()
    info = await driver.core.get_application("default", "a1")
    assert info["requests"] == [] and info["applicationState"] == "Completing"


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (
            si.AllocationAsk(
                allocation_key="", application_id="a1", resource_ask=si.Resource.of(memory=1)
            ),
            "allocation key",
        ),
        (
            si.AllocationAsk(
                allocation_key="k", application_id="a1", resource_ask=si.Resource.of(memory=-1)
            ),
            "negative",
        ),
        (si.AllocationAsk(allocation_key="k", application_id="a1"), "empty"),
        (
            si.AllocationAsk(
                allocation_key="k", application_id="nope", resource_ask=si.Resource.of(memory=1)
            ),
            "not found",
        ),
        (
            si.AllocationAsk(
                allocation_key="k",
                application_id="a1",
                partition_name="other",
                resource_ask=si.Resource.of(memory=1),
            ),
            "partition",
        ),
        (
            si.AllocationAsk(
                allocation_key="k",
                application_id="a1",
                max_allocations=-2,
                resource_ask=si.Resource.of(memory=1),
            ),
            "max allocations",
        ),
    ],
)
async def test_bad_asks_rejected_with_a_reason(
    driver: Driver, bad: si.AllocationAsk, reason: str
) -> None:
    await driver.apps(app("a1"))
    await driver.asks(bad, ask("good", "a1"))
    await driver.settle()
    [rejected] = driver.rm.rejected_asks
    assert reason in rejected.reason
    info = await driver.core.get_application("default", "a1")
    assert [r["allocationKey"] for r in info["requests"]] == ["good"]


async def test_wrong_types_raise_scheduler_error(driver: Driver) -> None:
    with pytest.raises(scheduler.SchedulerError):
        await driver.core.update_allocation(si.AllocationRequest(rm_id=RM, asks=["x"]))  # type: ignore[list-item]
    with pytest.raises(scheduler.SchedulerError):
        await driver.core.update_node(si.NodeRequest(rm_id=RM, nodes=[{"nodeID": "n"}]))  # type: ignore[list-item]


async def test_asks_sorted_by_priority_then_age(driver: Driver) -> None:
    await driver.apps(app("a1"))
    await driver.asks(ask("low", "a1"), ask("high", "a1", priority=10), ask("low2", "a1"))
    await driver.settle()
    await driver.nodes(node("n1", memory=20, vcore=2))
    await driver.settle()
    assert [a.allocation_key for a in driver.allocs()] == ["high", "low"]


# ============================================================================= allocations
async def test_release_by_rm_is_confirmed_and_frees_resources(driver: Driver) -> None:
    await driver.nodes(node("n1"))
    await driver.apps(app("a1"))
    await driver.asks(ask("k1", "a1", count=2))
    await driver.settle()
    first, _ = driver.allocs("a1")
    await driver.release(first)
    await driver.settle()
    [released] = driver.rm.released
    assert released.uuid == first.uuid
    assert released.termination_type == si.TerminationType.STOPPED_BY_RM
    assert (await driver.core.get_node("default", "n1"))["allocated"] == {"memory": 10, "vcore": 1}
    assert (await driver.core.get_queue("default", "root.a"))["allocatedResource"] == {
        "memory": 10,
        "vcore": 1,
    }


async def test_each_allocation_reaches_the_rm_once(driver: Driver) -> None:
    await driver.nodes(*(node(f"n{i}") for i in range(5)))
    await driver.apps(app("a1"), app("b1", queue="root.b"))
    await driver.asks(ask("ka", "a1", count=20), ask("kb", "b1", count=20))
    await driver.settle()
    await driver.nodes(node("n9"))
    await driver.settle()
    allocs = driver.allocs()
    assert len(allocs) == 40
    assert len({a.uuid for a in allocs}) == 40


async def test_queue_max_is_respected_up_the_chain(core: scheduler.Core) -> None:
    d = Driver(core, ManualClock())
    await d.register("""
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: p
            resources: {max: {memory: 30}}
            queues:
              - name: leaf
""")
    await d.nodes(node("n1", memory=1000, vcore=100))
    await d.apps(app("a1", queue="root.p.leaf"))
    await d.asks(ask("k", "a1", count=5))
    await d.settle()
    assert len(d.allocs()) == 3
    queue = await core.get_queue("default", "root.p")
    assert queue["allocatedResource"]["memory"] == 30
    assert queue["pendingResource"]["memory"] == 20
    await d.release(d.allocs()[0])
    await d.settle()
    assert len(d.allocs()) == 4


async def test_node_capacity_is_never_exceeded(driver: Driver) -> None:
    await driver.nodes(node("n1", memory=25, vcore=10), node("n2", memory=25, vcore=10))
    await driver.apps(app("a1", queue="root.b"))
    await driver.asks(ask("k", "a1", count=10))
    await driver.settle()
    assert sorted(a.node_id for a in driver.allocs()) == ["n1", "n1", "n2", "n2"]


async def test_queues_share_by_guaranteed(driver: Driver) -> None:
    await driver.nodes(node("n1", memory=100, vcore=100))
    await driver.apps(app("a1", queue="root.a"), app("b1", queue="root.b"))
    await driver.asks(ask("ka", "a1", count=10), ask("kb", "b1", count=10))
    await driver.settle()
    a = len(driver.allocs("a1"))
    b = len(driver.allocs("b1"))
    assert a + b == 10 and a == b == 5


async def test_fifo_queue_serves_the_oldest_application_first(driver: Driver) -> None:
    await driver.apps(app("first"), app("second"))
    await driver.asks(ask("k2", "second", count=3), ask("k1", "first", count=3))
    await driver.settle()
    await driver.nodes(node("n1", memory=40, vcore=10))
    await driver.settle()
    assert [a.application_id for a in driver.allocs()] == ["first"] * 3 + ["second"]


async def test_fair_queue_balances_applications(driver: Driver) -> None:
    await driver.apps(app("x", queue="root.fair"), app("y", queue="root.fair"))
    await driver.asks(ask("kx", "x", count=4), ask("ky", "y", count=4))
    await driver.settle()
    await driver.nodes(node("n1", memory=40, vcore=10))
    await driver.settle()
    assert sorted(a.application_id for a in driver.allocs()) == ["x", "x", "y", "y"]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("fair", ["n1", "n2", "n1", "n2"]), ("binpacking", ["n1", "n1", "n1", "n1"])],
)
async def test_node_sorting_policy(core: scheduler.Core, policy: str, expected: list[str]) -> None:
    d = Driver(core, ManualClock())
    await d.register(f"""
partitions:
  - name: default
    nodesortpolicy: {{type: {policy}}}
    queues:
      - name: root
        submitacl: "*"
        queues: [{{name: dyn}}]
""")
    await d.nodes(node("n1"), node("n2"))
    await d.apps(app("a1", queue="root.dyn"))
    for i in range(4):
        await d.asks(ask(f"k{i}", "a1"))
        await d.settle()
    assert [a.node_id for a in d.allocs()] == expected
    assert (await core.get_partitions())[0]["nodeSortingPolicy"]["type"] == policy


# ========================================================================= configuration
async def test_quantities_follow_yunikorn_rules(core: scheduler.Core) -> None:
    d = Driver(core, ManualClock())
    await d.register("""
partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: q
            resources: {max: {memory: 150M, vcore: 250m}, guaranteed: {memory: 10Mi}}
""")
    queue = await core.get_queue("default", "root.q")
    assert queue["maxResource"] == {"memory": 150_000_000, "vcore": 250}
    assert queue["guaranteedResource"] == {"memory": 10 * 1024 * 1024}


async def test_update_configuration_applies_and_invalid_keeps_old(driver: Driver) -> None:
    new = QUEUES.replace("max: {memory: 1000, vcore: 100}", "max: {memory: 2000, vcore: 100}")
    await driver.core.update_configuration(si.UpdateConfigurationRequest(rm_id=RM, config=new))
    assert (await driver.core.get_queue("default", "root.a"))["maxResource"]["memory"] == 2000
    with pytest.raises(scheduler.SchedulerError):
        await driver.core.update_configuration(
            si.UpdateConfigurationRequest(
                rm_id=RM,
                config="partitions: [{name: default, queues: [{name: root, resources: "
                "{max: {memory: -1}}}]}]",
            )
        )
    assert (await driver.core.get_queue("default", "root.a"))["maxResource"]["memory"] == 2000


async def test_removed_queue_drains(driver: Driver) -> None:
    await driver.apps(app("a1", queue="root.b"))
    await driver.asks(ask("k", "a1"))
    await driver.settle()
    new = QUEUES.replace(
        """          - name: b
            resources:
              guaranteed: {memory: 500, vcore: 50}
""",
        "",
    )
    await driver.core.update_configuration(si.UpdateConfigurationRequest(rm_id=RM, config=new))
    assert (await driver.core.get_queue("default", "root.b"))["status"] == "Draining"
    await driver.apps(app("a2", queue="root.b"))
    await driver.settle()
    assert "Draining" in driver.rm.rejected_apps[0].reason


async def test_dynamic_queue_created_and_removed_when_empty(
    core: scheduler.Core, clock: ManualClock
) -> None:
    d = Driver(core, clock)
    await d.register(PROVIDED)  # the provided rule makes the queue the application names
    await d.nodes(node("n1"))
    await d.apps(app("a1", queue="root.team.x"))
    await d.asks(ask("k", "a1"))
    await d.settle()
    queue = await core.get_queue("default", "root.team.x")
    assert queue["isManaged"] is False and queue["allocatedResource"] == {"memory": 10, "vcore": 1}
    await d.release(*d.allocs())
    await d.settle()
    await clock.advance(30)  # Completing -> Completed: the app leaves the queue
    await clock.advance(10)
    with pytest.raises(scheduler.NotFoundError):
        await core.get_queue("default", "root.team.x")
    with pytest.raises(scheduler.NotFoundError):
        await core.get_queue("default", "root.team")


# ================================================================================ queries
async def test_query_shapes(driver: Driver) -> None:
    await driver.nodes(node("n1"))
    await driver.apps(app("a1"))
    await driver.asks(ask("k1", "a1"), ask("k2", "a1", memory=10_000))
    await driver.settle()
    appinfo = await driver.core.get_application("default", "a1")
    for key in (
        "applicationID",
        "applicationState",
        "queueName",
        "partition",
        "usedResource",
        "pendingResource",
        "allocations",
        "requests",
        "placeholderData",
        "stateLog",
        "rejectedMessage",
    ):
        assert key in appinfo, key
    [alloc] = appinfo["allocations"]
    assert {"allocationKey", "uuid", "nodeId", "resource", "placeholder", "taskGroupName"} <= set(
        alloc
    )
    nodeinfo = await driver.core.get_node("default", "n1")
    for key in (
        "nodeID",
        "capacity",
        "allocated",
        "occupied",
        "available",
        "schedulable",
        "allocations",
        "reservations",
    ):
        assert key in nodeinfo, key
    root = await driver.core.get_queue("default", "root")
    assert {c["queuename"] for c in root["children"]} >= {"root.a", "root.b"}
    assert root["pendingResource"] == {"memory": 10_000, "vcore": 1}
    [part] = await driver.core.get_partitions()
    assert part["totalNodes"] == 1 and part["applications"]["Starting"] == 1
    assert part["capacity"]["capacity"] == {"memory": 100, "vcore": 10}
    dump = await driver.core.state_dump()
    assert dump["partitions"][0]["applications"][0]["applicationID"] == "a1"


async def test_not_found_errors(driver: Driver) -> None:
    for coro in (
        driver.core.get_queue("default", "root.zzz"),
        driver.core.get_queue("nopart", "root"),
        driver.core.get_application("default", "nope"),
        driver.core.get_node("default", "nope"),
    ):
        with pytest.raises(scheduler.NotFoundError):
            await coro


# ============================================================================== callbacks
class Exploding(RecordingCallback):
    async def update_node(self, response: si.NodeResponse) -> None:
        raise RuntimeError("RM bug")


@pytest.mark.logs_errors("RM callback update_node raised")
async def test_callback_exception_does_not_stop_the_core(core: scheduler.Core) -> None:
    rm = Exploding()
    await core.register_resource_manager(
        si.RegisterResourceManagerRequest(rm_id="rm", config=PROVIDED), rm
    )
    await core.update_node(si.NodeRequest(rm_id="rm", nodes=[node("n1")]))
    await core.update_application(si.ApplicationRequest(rm_id="rm", new=[app("a1", "root.x")]))
    await core.update_allocation(si.AllocationRequest(rm_id="rm", asks=[ask("k", "a1")]))
    await core.settle()
    assert len(rm.allocations) == 1


async def test_recovery_of_existing_allocations(driver: Driver) -> None:
    await driver.apps(app("a1"))
    await driver.settle()
    existing = si.Allocation(
        allocation_key="k0",
        uuid="old-1",
        application_id="a1",
        node_id="n1",
        partition_name="default",
        resource_per_alloc=si.Resource.of(memory=30, vcore=3),
    )
    await driver.nodes(node("n1", existing_allocations=[existing]))
    await driver.settle()
    assert driver.rm.accepted_nodes == ["n1"]
    info = await driver.core.get_node("default", "n1")
    assert info["allocated"] == {"memory": 30, "vcore": 3}
    appinfo = await driver.core.get_application("default", "a1")
    assert [a["uuid"] for a in appinfo["allocations"]] == ["old-1"]
    assert appinfo["applicationState"] == "Starting"
    await driver.release(si.Allocation(uuid="old-1", application_id="a1"))
    await driver.settle()
    assert [r.uuid for r in driver.rm.released] == ["old-1"]


async def test_recovery_for_unknown_application_rejects_the_node(driver: Driver) -> None:
    existing = si.Allocation(
        allocation_key="k0",
        uuid="old-1",
        application_id="ghost",
        resource_per_alloc=si.Resource.of(memory=1),
    )
    await driver.nodes(node("n1", existing_allocations=[existing]))
    await driver.settle()
    [rejected] = driver.rm.rejected_nodes
    assert "ghost" in rejected.reason


# ============================================================================== predicates
class Picky(RecordingCallback):
    """Refuses every node but ``n2``, and records what it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, str]] = []

    async def predicates(self, args: si.PredicatesArgs) -> bool:
        self.asked.append((args.allocation_key, args.node_id))
        return args.node_id == "n2"


async def test_predicates_of_the_rm_decide_the_node(core: scheduler.Core) -> None:
    rm = Picky()
    await core.register_resource_manager(
        si.RegisterResourceManagerRequest(rm_id="rm", config=PROVIDED), rm
    )
    await core.update_node(si.NodeRequest(rm_id="rm", nodes=[node("n1"), node("n2", memory=15)]))
    await core.update_application(si.ApplicationRequest(rm_id="rm", new=[app("a1", "root.x")]))
    await core.update_allocation(si.AllocationRequest(rm_id="rm", asks=[ask("k", "a1", count=2)]))
    await core.settle()
    assert [(a.allocation_key, a.node_id) for a in rm.allocations] == [("k", "n2")]
    assert ("k", "n1") in rm.asked and ("k", "n2") in rm.asked
    info = await core.get_application("default", "a1")
    assert info["requests"][0]["pendingCount"] == 1  # n2 is full, n1 refused: still pending


async def test_an_ask_bound_to_a_node_the_predicates_refuse_waits(core: scheduler.Core) -> None:
    """An ask that must run on one node, which the RM's predicates refuse, is asked about
    once and then waits (it was proposed again and again, and the core never settled),
    until the cluster changes."""
    rm = Picky()
    await core.register_resource_manager(
        si.RegisterResourceManagerRequest(rm_id="rm", config=PROVIDED), rm
    )
    await core.update_node(si.NodeRequest(rm_id="rm", nodes=[node("n1"), node("n2")]))
    await core.update_application(si.ApplicationRequest(rm_id="rm", new=[app("a1", "root.x")]))
    bound = ask("k", "a1", tags={si.DOMAIN_YUNIKORN + si.KEY_REQUIRED_NODE: "n1"})
    await core.update_allocation(si.AllocationRequest(rm_id="rm", asks=[bound]))
    await asyncio.wait_for(core.settle(), 10)
    assert rm.asked == [("k", "n1")] and not rm.allocations
    info = await core.get_application("default", "a1")
    assert info["requests"][0]["pendingCount"] == 1


async def test_default_callback_is_not_asked_for_predicates(driver: Driver) -> None:
    await driver.nodes(node("n1"))
    await driver.apps(app("a1"))
    await driver.asks(ask("k", "a1"))
    await driver.settle()
    assert len(driver.allocs()) == 1


class Checking(RecordingCallback):
    """Checks predicates: records every question (ask, node, allocate) and refuses the
    reservations of the nodes in ``no_reserve``."""

    def __init__(self, no_reserve: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.asked: list[tuple[str, str, bool]] = []
        self.no_reserve = no_reserve

    async def predicates(self, args: si.PredicatesArgs) -> bool:
        self.asked.append((args.allocation_key, args.node_id, args.allocate))
        return args.allocate or args.node_id not in self.no_reserve


async def _big_ask_waiting_with(core: scheduler.Core, clock: ManualClock, rm: Checking) -> Driver:
    """As ``_big_ask_waiting``, with an RM that checks predicates: n1 and n2 (memory 100)
    each hold 60 of "small"; "big" asks for 80."""
    d = Driver(core, clock)
    d.rm = rm
    await d.register()
    await d.nodes(node("n1"), node("n2"))
    await d.apps(app("small"), app("big", queue="root.b"))
    await d.asks(ask("s", "small", memory=60, count=2))
    await d.settle()
    await d.asks(ask("b", "big", memory=80))
    await d.settle()
    return d


async def test_an_rm_that_checks_predicates_gets_reservations(
    core: scheduler.Core, clock: ManualClock
) -> None:
    """A large ask on a busy cluster reserves a node with an RM that checks predicates too:
    the reservation is put to them with allocate false, and the ask is placed there once
    a small one finishes (yunikorn-core v1.2.0 objects/application.go ``tryNodes``:
    ``preReserveConditions`` before a reservation; ``tryReservedAllocate``: the reserved
    node first, asked with ``preAllocateConditions``)."""
    rm = Checking()
    d = await _big_ask_waiting_with(core, clock, rm)
    assert not any(key == "b" for key, _, _ in rm.asked)  # no node has room: nothing asked
    await clock.advance(2)
    assert [q for q in rm.asked if q[0] == "b"] == [("b", "n1", False)]
    assert (await core.get_node("default", "n1"))["reservations"] == ["big|b"]
    await d.asks(ask("s2", "small", memory=30, count=2))
    await d.settle()
    assert [a.node_id for a in d.allocs("small")][2:] == ["n2"]  # not on the reserved n1
    await d.release(next(a for a in d.allocs("small") if a.node_id == "n1"))
    await d.settle()
    assert [(a.allocation_key, a.node_id) for a in d.allocs("big")] == [("b", "n1")]
    assert rm.asked[-1] == ("b", "n1", True)
    assert (await core.get_node("default", "n1"))["reservations"] == []


async def test_a_reservation_the_predicates_refuse_is_not_made(
    core: scheduler.Core, clock: ManualClock
) -> None:
    """Refused with allocate false, the closest node is not reserved, nor is another in its
    place; the question is not asked again until the cluster changes (yunikorn-core
    v1.2.0 objects/application.go ``tryNodes``: one candidate, ``preReserveConditions``
    refused, no reservation)."""
    rm = Checking(no_reserve=("n1",))
    d = await _big_ask_waiting_with(core, clock, rm)
    await clock.advance(2)
    await clock.advance(2)
    assert [q for q in rm.asked if q[0] == "b"] == [("b", "n1", False)]
    assert (await core.get_application("default", "big"))["reservations"] == []
    await d.nodes(node("n3", memory=50))  # the cluster changes: asked again, refused again
    await d.settle()
    assert [q for q in rm.asked if q[0] == "b"] == [("b", "n1", False)] * 2
    assert (await core.get_application("default", "big"))["reservations"] == []


# ============================================================================ partitions
TWO_PARTITIONS = """
partitions:
  - name: default
    queues: [{name: root, submitacl: "*", queues: [{name: a}]}]
  - name: gpu
    nodesortpolicy: {type: binpacking}
    queues: [{name: root, submitacl: "*", queues: [{name: train}]}]
"""


async def test_nodes_and_applications_go_to_their_partition(core: scheduler.Core) -> None:
    d = Driver(core, ManualClock())
    await d.register(TWO_PARTITIONS)
    await d.nodes(node("cpu-1"), node("gpu-1", attributes={si.NODE_PARTITION: "gpu"}))
    await d.apps(app("t1", queue="root.train", partition_name="gpu"))
    await core.update_allocation(
        si.AllocationRequest(
            rm_id=RM,
            asks=[
                si.AllocationAsk(
                    allocation_key="k",
                    application_id="t1",
                    partition_name="gpu",
                    resource_ask=si.Resource.of(memory=10),
                    max_allocations=1,
                )
            ],
        )
    )
    await d.settle()
    [alloc] = d.allocs()
    assert (alloc.node_id, alloc.partition_name) == ("gpu-1", "gpu")
    parts = {p["name"]: p for p in await core.get_partitions()}
    assert parts["gpu"]["totalNodes"] == 1 and parts["default"]["totalNodes"] == 1
    assert parts["gpu"]["nodeSortingPolicy"]["type"] == "binpacking"
    with pytest.raises(scheduler.NotFoundError):
        await core.get_node("default", "gpu-1")


async def test_two_rms_each_have_their_own_default_partition(core: scheduler.Core) -> None:
    """YuniKorn keeps each RM's partitions apart by naming them ``[rmID]partition``
    (v1.2 ``common.GetNormalizedPartitionName``): two RMs may both have ``default``, with
    nodes and applications of the same ids, and neither sees the other's. Its REST drops
    the RM id (``GetPartitionNameWithoutClusterID``): ``/ws/v1/partitions`` lists both
    under ``name: default`` with their ``clusterId``, and a plain name finds one of them."""
    rms = {rm_id: RecordingCallback() for rm_id in ("rm-a", "rm-b")}
    for rm_id, callback in rms.items():
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(rm_id=rm_id, config=PROVIDED), callback
        )
    for rm_id, memory in (("rm-a", 100), ("rm-b", 40)):
        await core.update_node(si.NodeRequest(rm_id=rm_id, nodes=[node("n1", memory=memory)]))
        await core.update_application(si.ApplicationRequest(rm_id=rm_id, new=[app("app-1")]))
        await core.update_allocation(
            si.AllocationRequest(rm_id=rm_id, asks=[ask("t", "app-1", memory=30, count=2)])
        )
    await core.settle()
    # Each RM hears of its own objects only: rm-b's 40 fit one ask of 30, rm-a's 100 two.
    assert [a.node_id for a in rms["rm-a"].allocations] == ["n1", "n1"]
    assert [a.node_id for a in rms["rm-b"].allocations] == ["n1"]
    parts = await core.get_partitions()
    assert sorted((p["clusterId"], p["name"], p["totalNodes"]) for p in parts) == [
        ("rm-a", "default", 1),
        ("rm-b", "default", 1),
    ]
    own_a = await core.get_node("[rm-a]default", "n1")
    own_b = await core.get_node("[rm-b]default", "n1")
    assert (own_a["capacity"]["memory"], own_b["capacity"]["memory"]) == (100, 40)
    assert await core.get_node("default", "n1") == own_a  # the RM registered first
    assert len((await core.get_application("[rm-b]default", "app-1"))["allocations"]) == 1
    with pytest.raises(scheduler.NotFoundError, match=r"\[rm-c\]default"):
        await core.get_queue("[rm-c]default", "root")
    # rm-a going leaves rm-b's partition as it was, and the plain name finds it now.
    await core.stop_resource_manager("rm-a")
    assert (await core.get_node("default", "n1"))["capacity"]["memory"] == 40
    [part] = await core.get_partitions()
    assert (part["clusterId"], part["totalNodes"]) == ("rm-b", 1)


async def test_update_configuration_adds_a_partition(driver: Driver) -> None:
    config = (
        QUEUES
        + """  - name: extra
    queues: [{name: root, submitacl: "*"}]
"""
    )
    await driver.core.update_configuration(si.UpdateConfigurationRequest(rm_id=RM, config=config))
    assert {p["name"] for p in await driver.core.get_partitions()} == {"default", "extra"}


async def test_update_configuration_cannot_drop_a_busy_partition(driver: Driver) -> None:
    await driver.nodes(node("n1"))
    await driver.settle()
    other = "partitions: [{name: other, queues: [{name: root, submitacl: '*'}]}]"
    with pytest.raises(scheduler.SchedulerError, match="still has nodes"):
        await driver.core.update_configuration(
            si.UpdateConfigurationRequest(rm_id=RM, config=other)
        )
    assert (await driver.core.get_node("default", "n1"))["nodeID"] == "n1"


async def test_leaving_start_scheduler_stops_everything(clock: ManualClock) -> None:
    async with scheduler.start_scheduler(clock=clock) as core:
        d = Driver(core, clock)
        await d.register()
        await d.nodes(node("n1"))
        await d.settle()
    with pytest.raises(scheduler.SchedulerError, match="stopped"):
        await core.get_node("default", "n1")


# ============================================================================ reservations
async def _big_ask_waiting(driver: Driver) -> None:
    """n1 and n2 (memory 100) each hold 60 of app "small"; app "big" asks for 80."""
    await driver.nodes(node("n1"), node("n2"))
    await driver.apps(app("small"), app("big", queue="root.b"))
    await driver.asks(ask("s", "small", memory=60, count=2))
    await driver.settle()
    await driver.asks(ask("b", "big", memory=80))
    await driver.settle()


async def test_ask_reserves_a_node_after_two_seconds(driver: Driver) -> None:
    await _big_ask_waiting(driver)
    await driver.clock.advance(1.9)
    assert (await driver.core.get_node("default", "n1"))["reservations"] == []
    await driver.clock.advance(0.1)
    n1 = await driver.core.get_node("default", "n1")
    assert n1["isReserved"] and n1["reservations"] == ["big|b"]
    big = await driver.core.get_application("default", "big")
    assert big["hasReserved"] and big["reservations"] == ["n1|b"]
    assert driver.allocs("big") == []


async def test_a_reserved_node_takes_no_other_allocation(driver: Driver) -> None:
    await _big_ask_waiting(driver)
    await driver.clock.advance(2)
    await driver.asks(ask("s2", "small", memory=30, count=2))
    await driver.settle()
    assert [a.node_id for a in driver.allocs("small")][2:] == ["n2"]  # one fits, on n2
    assert (await driver.core.get_node("default", "n1"))["allocated"]["memory"] == 60


async def test_reserved_ask_gets_its_node_when_room_frees_up(driver: Driver) -> None:
    await _big_ask_waiting(driver)
    await driver.clock.advance(2)
    on_n1 = next(a for a in driver.allocs("small") if a.node_id == "n1")
    await driver.release(on_n1)
    await driver.settle()
    assert [(a.allocation_key, a.node_id) for a in driver.allocs("big")] == [("b", "n1")]
    n1 = await driver.core.get_node("default", "n1")
    assert n1["reservations"] == [] and not n1["isReserved"]
    assert (await driver.core.get_application("default", "big"))["reservations"] == []


async def test_reserved_ask_takes_another_node_that_frees_up_first(driver: Driver) -> None:
    await _big_ask_waiting(driver)
    await driver.clock.advance(2)
    on_n2 = next(a for a in driver.allocs("small") if a.node_id == "n2")
    await driver.release(on_n2)
    await driver.settle()
    assert [a.node_id for a in driver.allocs("big")] == ["n2"]
    assert (await driver.core.get_node("default", "n1"))["reservations"] == []
    await driver.asks(ask("s3", "small", memory=30))
    await driver.settle()
    assert driver.allocs("small")[-1].node_id == "n1"  # n1 is free for others again


async def test_releasing_the_reserved_ask_frees_the_node(driver: Driver) -> None:
    await _big_ask_waiting(driver)
    await driver.clock.advance(2)
    await driver.release_asks("big", "b")
    await driver.settle()
    assert (await driver.core.get_node("default", "n1"))["reservations"] == []
    await driver.asks(ask("s4", "small", memory=40))
    await driver.settle()
    assert driver.allocs("small")[-1].allocation_key == "s4"


async def test_an_ask_larger_than_every_node_reserves_nothing(driver: Driver) -> None:
    await driver.nodes(node("n1"))
    await driver.apps(app("a1"))
    await driver.asks(ask("huge", "a1", memory=500))
    await driver.settle()
    await driver.clock.advance(5)
    assert (await driver.core.get_node("default", "n1"))["reservations"] == []


async def test_rejected_application_expires_after_three_days(driver: Driver) -> None:
    await driver.apps(app("a1", queue="root.nope"))
    await driver.settle()
    assert (await driver.core.get_application("default", "a1"))["applicationState"] == "Rejected"
    await driver.clock.advance(3 * 24 * 3600)
    with pytest.raises(scheduler.NotFoundError):
        await driver.core.get_application("default", "a1")
    # No update for Rejected (the RejectedApplication says it), one for Expired:
    # yunikorn-core v1.2.0 objects/application.go OnStateChange.
    assert driver.rm.app_states("a1") == ["Expired"]


class SettlesInCallback(RecordingCallback):
    def __init__(self, core: scheduler.Core) -> None:
        super().__init__()
        self.core = core
        self.errors: list[str] = []

    async def update_node(self, response: si.NodeResponse) -> None:
        try:
            await self.core.settle()
        except RuntimeError as err:
            self.errors.append(str(err))
        await super().update_node(response)


async def test_settle_from_a_callback_is_an_error_not_a_hang(core: scheduler.Core) -> None:
    rm = SettlesInCallback(core)
    await core.register_resource_manager(si.RegisterResourceManagerRequest(rm_id="rm"), rm)
    await core.update_node(si.NodeRequest(rm_id="rm", nodes=[node("n1")]))
    await core.settle()
    assert rm.accepted_nodes == ["n1"]
    assert rm.errors and "wait for itself" in rm.errors[0]


# ======================================================================== maxapplications
MAX_APPS = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: capped
            maxapplications: 2
"""


async def test_maxapplications_caps_running_applications(
    core: scheduler.Core, clock: ManualClock
) -> None:
    d = Driver(core, clock)
    await d.register(MAX_APPS)
    await d.nodes(node("n1", memory=1000, vcore=100))
    await d.apps(*(app(f"a{i}", queue="root.capped") for i in range(3)))
    await d.asks(*(ask(f"k{i}", f"a{i}") for i in range(3)))
    await d.settle()
    assert sorted(a.application_id for a in d.allocs()) == ["a0", "a1"]
    assert (await core.get_application("default", "a2"))["applicationState"] == "Accepted"
    assert (await core.get_queue("default", "root.capped"))["runningApps"] == 2
    # a running application asks for more: still allowed
    await d.asks(ask("more", "a0"))
    await d.settle()
    assert len(d.allocs("a0")) == 2
    # a0 finishes: a2 may start
    await d.release(*d.allocs("a0"))
    await d.settle()
    assert [a.application_id for a in d.allocs("a2")] == ["a2"]
    assert (await core.get_queue("default", "root.capped"))["runningApps"] == 2
