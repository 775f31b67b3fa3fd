"""``scheduler.testing.Scenario``: each step settles, and what the RM holds is tracked."""

from __future__ import annotations

import pytest

import scheduler
from scheduler import si
from scheduler.testing import Scenario, start_scenario

pytestmark = pytest.mark.asyncio

TIMEOUT = si.TerminationType.TIMEOUT


async def test_defaults_place_ten_asks_on_a_node(scheduler_scenario: Scenario) -> None:
    s = scheduler_scenario
    await s.add_nodes("n1")  # DEFAULT_NODE holds ten DEFAULT_ASKs
    await s.submit("app-1", queue="root.a")
    first = await s.ask("app-1", count=6)
    second = await s.ask("app-1", count=6)
    assert (first, second) == ("app-1-ask-1", "app-1-ask-2")
    held = s.assert_allocated("app-1", 10)
    assert {a.node_id for a in held} == {"n1"}
    assert s.app_states("app-1") == ["Accepted", "Starting", "Running"]


async def test_released_allocations_are_no_longer_held(scheduler_scenario: Scenario) -> None:
    s = scheduler_scenario
    await s.add_nodes(
        si.NodeInfo(
            node_id="big",
            action=si.ActionFromRM.CREATE,
            schedulable_resource=si.Resource.of(memory=20, vcore=2),
        )
    )
    await s.submit("app-1", queue="root.a")
    await s.ask("app-1", count=3)
    one, two = s.assert_allocated("app-1", 2)  # the node holds two
    await s.release(one)
    kept, third = s.assert_allocated("app-1", 2)  # the third took the room
    assert kept == two and third.uuid not in (one.uuid, two.uuid)
    await s.release(*s.allocations())
    assert s.allocations() == []
    assert await s.app_state("app-1") == "Completing"
    await s.advance(30)
    assert await s.app_state("app-1") == "Completed"
    await s.remove("app-1")
    assert s.app_states("app-1")[-1] == "Completed"


async def test_a_failed_assertion_names_what_the_rm_holds(scheduler_scenario: Scenario) -> None:
    s = scheduler_scenario
    await s.add_nodes("n1")
    await s.submit("app-1", queue="root.a")
    await s.ask("app-1", "k")
    with pytest.raises(
        AssertionError, match=r"expected 2 allocations, the RM holds 1: \[\('k', 'n1'\)\]"
    ):
        s.assert_allocated("app-1", 2)


async def test_timed_out_placeholders_are_confirmed_once(scheduler_scenario: Scenario) -> None:
    s = scheduler_scenario
    await s.add_nodes("n1", memory=20, vcore=2)  # two of three placeholders
    await s.submit_gang("gang", {"tg": 3}, queue="root.a", style="Hard", timeout=60)
    s.assert_allocated("gang", 2, placeholder=True)
    await s.advance(60)
    timed_out = s.released(TIMEOUT)
    assert len(timed_out) == 2
    assert s.allocations() == []
    assert await s.confirm_releases() == timed_out
    assert await s.confirm_releases() == []  # each release is confirmed once
    assert await s.app_state("gang") == "Failed"
    assert (await s.core.get_node("default", "n1"))["allocated"] == {}


async def test_start_scenario_on_the_default_configuration() -> None:
    """YuniKorn's built-in configuration: the ``namespace`` tag names the queue, made on
    demand; an application without the tag is rejected whatever queue it names."""
    async with start_scenario() as s:
        await s.add_nodes("n1")
        await s.submit("app-1", tags={"namespace": "team"})  # root.team, made by the tag rule
        await s.ask("app-1")
        s.assert_allocated("app-1", 1)
        assert (await s.application("app-1"))["queueName"] == "root.team"
        await s.submit("app-2")  # names root.default, has no namespace tag
        assert [r.application_id for r in s.rm.rejected_apps] == ["app-2"]


async def test_start_scenario_rejects_an_invalid_configuration() -> None:
    with pytest.raises(scheduler.SchedulerError):
        async with start_scenario("partitions: ["):
            pass
