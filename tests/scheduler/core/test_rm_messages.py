"""What the RM is told for an application's state change and for each release, compared
with what yunikorn-core v1.2.0 tells it for the same event (a k8shim logs these messages
and shows them on pods, so an RM ported from YuniKorn expects the same text)."""

from __future__ import annotations

import pytest

from scheduler import si
from scheduler.testing import ManualClock

from ..conftest import Driver, app, ask, node
from ..gangs.test_gang import REPLACED, confirm, gang_app, placeholders, reals, released

pytestmark = pytest.mark.asyncio


def updates(d: Driver, app_id: str) -> list[si.UpdatedApplication]:
    return [u for r in d.rm.application_responses for u in r.updated if u.application_id == app_id]


async def test_a_state_change_carries_the_event_name_and_its_time(
    driver: Driver, clock: ManualClock
) -> None:
    """yunikorn-core v1.2.0 objects/application.go ``OnStateChange``: the new state, the
    time of the change in Unix nanoseconds, and the event info or else the event's name
    (application_state.go: ``runApplication``, ``completeApplication``...)."""
    await clock.advance(5)
    await driver.nodes(node("n1"))
    await driver.apps(app("a1"))
    await driver.asks(ask("k", "a1", count=2))
    await driver.settle()
    seen = [(u.state, u.message) for u in updates(driver, "a1")]
    assert seen == [
        ("Accepted", "runApplication"),
        ("Starting", "runApplication"),
        ("Running", "runApplication"),
    ]
    assert {u.state_transition_timestamp for u in updates(driver, "a1")} == {
        clock.wall_ns(clock.now())
    }
    await driver.release(*driver.allocs("a1"))
    await driver.settle()
    assert (updates(driver, "a1")[-1].state, updates(driver, "a1")[-1].message) == (
        "Completing",
        "completeApplication",
    )


async def test_a_rejected_application_gets_no_state_update(driver: Driver) -> None:
    """yunikorn-core v1.2.0 objects/application.go ``OnStateChange``: ``Rejected`` is the
    one state the RM is not sent an ``UpdatedApplication`` for; the
    ``RejectedApplication`` tells it."""
    await driver.apps(app("a1", queue="root.nope"))
    await driver.settle()
    assert [r.application_id for r in driver.rm.rejected_apps] == ["a1"]
    assert updates(driver, "a1") == []


async def test_the_placeholder_timeout_says_resource_reservation_timeout(
    driver: Driver, clock: ManualClock
) -> None:
    """yunikorn-core v1.2.0 objects/application.go ``timeoutPlaceholderProcessing``: the
    state change's info is ``ResourceReservationTimeout``, and the placeholder asks go
    with "releasing placeholders asks on placeholder timeout"."""
    await driver.nodes(node("n1", memory=20, vcore=2))
    await driver.apps(gang_app("gang", execution_timeout_milliseconds=1000))
    await driver.asks(*placeholders("gang"))
    await driver.settle()
    await clock.advance(1)
    assert (updates(driver, "gang")[-1].state, updates(driver, "gang")[-1].message) == (
        "Resuming",
        "ResourceReservationTimeout",
    )
    (dropped,) = driver.rm.released_asks
    assert dropped.termination_type == si.TerminationType.TIMEOUT
    assert dropped.message == "releasing placeholders asks on placeholder timeout"
    assert {r.message for r in driver.rm.released} == {
        "releasing allocated placeholders on placeholder timeout"
    }


async def test_release_messages_name_what_yunikorn_names(driver: Driver) -> None:
    """yunikorn-core v1.2.0 context.go: an RM's release is confirmed with "allocation
    remove as per RM request", a removed application's allocations go with "Application
    <id> Removed" and a removed node's with "Node <id> Removed"."""
    await driver.nodes(node("n1"), node("n2"))
    await driver.apps(app("a1"), app("a2"), app("a3"))
    await driver.asks(ask("k1", "a1"), ask("k2", "a2"))
    await driver.settle()
    await driver.release(driver.allocs("a1")[0])
    await driver.remove_apps("a2")
    await driver.settle()
    by_app = {r.application_id: r for r in driver.rm.released}
    assert by_app["a1"].message == "allocation remove as per RM request"
    assert by_app["a2"].message == "Application a2 Removed"
    await driver.asks(ask("k3", "a3"))
    await driver.settle()
    (on,) = driver.allocs("a3")
    await driver.nodes(si.NodeInfo(node_id=on.node_id, action=si.ActionFromRM.DECOMISSION))
    await driver.settle()
    assert driver.rm.released[-1].uuid == on.uuid
    assert driver.rm.released[-1].message == f"Node {on.node_id} Removed"


async def test_a_replaced_placeholder_names_the_real_allocation(driver: Driver) -> None:
    """yunikorn-core v1.2.0 context.go ``processAllocations``: a placeholder released for a
    replacement says "replacing uuid: " and the uuid of the real allocation that the RM
    is sent once it confirms."""
    await driver.nodes(node("n1"))
    await driver.apps(gang_app("gang", members=1))
    await driver.asks(*placeholders("gang", 1))
    await driver.settle()
    await driver.asks(*reals("gang", 1))
    await driver.settle()
    (rel,) = released(driver, REPLACED)
    await confirm(driver, [rel])
    await driver.settle()
    (real,) = [a for a in driver.allocs("gang") if not a.placeholder]
    assert rel.message == f"replacing uuid: {real.uuid}"
