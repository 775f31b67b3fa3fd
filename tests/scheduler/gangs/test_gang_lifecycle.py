"""Gang scheduling lifecycle through the public API: timeouts, completion, recovery, events.

The placeholder timeout is counted from the first placeholder allocation; a Soft gang that
times out while still placing resumes as a normal application, a Hard one fails; a gang
that got all its placeholders only loses the unused ones. Leftover placeholders of a
completing application go after the Completing timeout. Recovered placeholders are
replaced like allocated ones. Every step is visible to the RM as events.
"""

from __future__ import annotations

from typing import Any

import pytest

import scheduler
from scheduler import si

from ..conftest import Driver, app, ask, node
from .test_gang import (
    REPLACED,
    TIMEOUT,
    confirm,
    gang_app,
    ph_data,
    placed_gang,
    placeholders,
    reals,
    released,
    state,
)

pytestmark = pytest.mark.asyncio

PH_TIMEOUT = 15 * 60.0
EXPIRY = 3 * 24 * 3600.0
COMPLETING = 30.0
HANDSHAKE = 60.0


# ============================================================================ helpers
def used(resource: dict[str, Any]) -> dict[str, Any]:
    """A resource map without its zero entries (``{}`` and ``{memory: 0}`` both mean none)."""
    return {k: v for k, v in resource.items() if v}


async def queue_info(d: Driver, path: str = "root.a") -> dict[str, Any]:
    return dict(await d.core.get_queue("default", path))


async def advance(d: Driver, seconds: float) -> None:
    await d.clock.advance(seconds)
    await d.settle()


def reasons(d: Driver, reason: str) -> list[si.EventRecord]:
    return [e for e in d.rm.events if e.reason == reason]


def state_log(info: dict[str, Any]) -> list[str]:
    return [str(s["applicationState"]) for s in info["stateLog"]]


def real_allocs(d: Driver, app_id: str = "gang") -> list[si.Allocation]:
    return [a for a in d.allocs(app_id) if not a.placeholder]


async def partly_placed_gang(d: Driver, **kw: Any) -> list[si.Allocation]:
    """A gang of 3 whose real asks wait, on a node with room for only 2 placeholders."""
    await d.nodes(node("n1", memory=20, vcore=2))
    await d.apps(gang_app("gang", **kw))
    await d.asks(*placeholders("gang"), *reals("gang"))
    await d.settle()
    phs = [a for a in d.allocs("gang") if a.placeholder]
    assert len(phs) == 2
    assert not real_allocs(d)
    assert await state(d, "gang") == "Accepted"
    return phs


async def replace(d: Driver, *real_asks: si.AllocationAsk) -> list[si.Allocation]:
    """Send real asks, confirm the PLACEHOLDER_REPLACED releases; the new real allocations."""
    before = len(real_allocs(d))
    seen = len(released(d, REPLACED))
    await d.asks(*real_asks)
    await d.settle()
    await confirm(d, released(d, REPLACED)[seen:])
    await d.settle()
    return real_allocs(d)[before:]


# ========================================================= A. placeholder timeout
async def test_timeout_counts_from_first_placeholder_allocation(driver: Driver) -> None:
    d = driver
    await d.apps(gang_app("gang"))
    await d.asks(*placeholders("gang"))
    await advance(d, 600)  # ten minutes without nodes: the clock has not started
    assert not d.allocs("gang")
    await d.nodes(node("n1"))
    await d.settle()
    phs = [a for a in d.allocs("gang") if a.placeholder]
    assert len(phs) == 3
    await advance(d, PH_TIMEOUT - 1)  # 14:59 after the first placeholder
    assert not released(d, TIMEOUT)
    await advance(d, 1)  # 15:00
    assert sorted(r.uuid for r in released(d, TIMEOUT)) == sorted(p.uuid for p in phs)


async def test_execution_timeout_milliseconds_sets_the_timeout(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"))
    phs = await placed_gang(d, execution_timeout_milliseconds=120_000)
    await advance(d, 119)
    assert not released(d, TIMEOUT)
    await advance(d, 1)
    assert sorted(r.uuid for r in released(d, TIMEOUT)) == sorted(p.uuid for p in phs)


async def test_soft_timeout_while_placing_resumes_as_normal_app(driver: Driver) -> None:
    d = driver
    phs = await partly_placed_gang(d)
    n_responses = len(d.rm.allocation_responses)
    await advance(d, PH_TIMEOUT)

    # One response carries both the placeholders and the pending placeholder ask.
    (resp,) = [r for r in d.rm.allocation_responses[n_responses:] if r.released or r.released_asks]
    assert sorted(r.uuid for r in resp.released) == sorted(p.uuid for p in phs)
    assert {r.termination_type for r in resp.released} == {TIMEOUT}
    assert [(r.allocation_key, r.termination_type) for r in resp.released_asks] == [
        ("gang-ph-2", TIMEOUT)
    ]
    assert await state(d, "gang") == "Resuming"
    assert not real_allocs(d)  # nothing is scheduled while the placeholders are held

    await confirm(d, resp.released)
    await d.settle()
    info = await d.core.get_application("default", "gang")
    # Two real allocations follow at once: Starting, then Running.
    after = ["Resuming", "Accepted", "Starting", "Running"]
    assert state_log(info)[-4:] == after
    assert d.rm.app_states("gang")[-4:] == after
    # The real asks waited for the gang; now they are normal asks (room for two).
    got = real_allocs(d)
    assert sorted(a.allocation_key for a in got) == ["gang-real-0", "gang-real-1"]
    assert {a.node_id for a in got} == {"n1"}
    assert await ph_data(d, "gang") == {
        "taskGroupName": "tg",
        "count": 3,
        "minResource": {"memory": 10, "vcore": 1},
        "replaced": 0,
        "timedout": 3,
    }


async def test_soft_timeout_stays_accepted_until_real_asks_come(driver: Driver) -> None:
    """YuniKorn's ``removeAllocationInternal``: the last placeholder of a ``Resuming``
    application going makes it ``Accepted`` (``RunApplication``), and nothing completes it
    there: it waits for asks, however long."""
    d = driver
    await d.nodes(node("n1", memory=20, vcore=2))
    await d.apps(gang_app("gang"))
    await d.asks(*placeholders("gang"))  # room for two of three; no real asks yet
    await d.settle()
    assert len(d.allocs("gang")) == 2
    await advance(d, PH_TIMEOUT)
    assert await state(d, "gang") == "Resuming"
    await confirm(d, released(d, TIMEOUT))
    await d.settle()
    info = await d.core.get_application("default", "gang")
    assert state_log(info)[-2:] == ["Resuming", "Accepted"]
    assert info["allocations"] == [] and info["requests"] == []
    await confirm(d, released(d, TIMEOUT))  # the RM confirms twice: nothing left goes
    await d.settle()
    assert await state(d, "gang") == "Accepted"

    await advance(d, 10 * 60)  # well past the 30 s a Completing application would last
    info = await d.core.get_application("default", "gang")
    assert info["applicationState"] == "Accepted"
    assert state_log(info)[-2:] == ["Resuming", "Accepted"]
    assert d.rm.app_states("gang")[-1] == "Accepted"

    await d.asks(*reals("gang", 2))  # the job's real pods, minutes later
    await d.settle()
    got = real_allocs(d)
    assert sorted(a.allocation_key for a in got) == ["gang-real-0", "gang-real-1"]
    after = ["Resuming", "Accepted", "Starting", "Running"]
    assert state_log(await d.core.get_application("default", "gang"))[-4:] == after
    assert d.rm.app_states("gang")[-4:] == after


async def test_hard_timeout_while_placing_fails_and_frees_the_queue(driver: Driver) -> None:
    d = driver
    phs = await partly_placed_gang(d, gang_scheduling_style="Hard")
    assert used((await queue_info(d))["allocatedResource"]) == {"memory": 20, "vcore": 2}
    n_responses = len(d.rm.allocation_responses)
    await advance(d, PH_TIMEOUT)

    (resp,) = [r for r in d.rm.allocation_responses[n_responses:] if r.released or r.released_asks]
    assert sorted(r.uuid for r in resp.released) == sorted(p.uuid for p in phs)
    assert {r.termination_type for r in resp.released} == {TIMEOUT}
    assert sorted(r.allocation_key for r in resp.released_asks) == [
        "gang-ph-2",
        "gang-real-0",
        "gang-real-1",
        "gang-real-2",
    ]
    assert {r.termination_type for r in resp.released_asks} == {TIMEOUT}
    assert await state(d, "gang") == "Failing"

    await confirm(d, resp.released[:1])
    await d.settle()
    assert await state(d, "gang") == "Failing"  # one placeholder still held
    await confirm(d, resp.released[1:])
    await d.settle()
    assert await state(d, "gang") == "Failed"
    assert d.rm.app_states("gang")[-2:] == ["Failing", "Failed"]
    assert not real_allocs(d)

    q = await queue_info(d)
    assert used(q["allocatedResource"]) == {}
    assert used(q["pendingResource"]) == {}
    assert "gang" not in q["applications"]
    info = await d.core.get_application("default", "gang")
    assert info["applicationState"] == "Failed"
    assert info["allocations"] == []
    assert (await ph_data(d, "gang"))["timedout"] == 3
    assert used((await d.core.get_node("default", "n1"))["allocated"]) == {}

    # Found as Failed until it expires; the id is free again after that.
    await advance(d, EXPIRY - 1)
    assert await state(d, "gang") == "Failed"
    await advance(d, 1)
    with pytest.raises(scheduler.NotFoundError):
        await d.core.get_application("default", "gang")
    await d.apps(gang_app("gang"))
    await d.settle()
    assert d.rm.accepted_apps.count("gang") == 2
    assert await state(d, "gang") == "New"


async def blocked_second_gang(d: Driver) -> None:
    """g1 ({memory 600}) placed 200 and holds 400 of root.a's max of 1000; g2 (600) waits."""
    await d.nodes(node("n1", memory=1000, vcore=100))
    await d.apps(gang_app("g1", members=60))
    await d.asks(*placeholders("g1", 20))
    await d.settle()
    assert len(d.allocs("g1")) == 20
    await d.apps(gang_app("g2", members=60))
    await d.asks(*placeholders("g2", 60))
    await d.settle()
    assert not d.allocs("g2")  # 200 + 400 held + 600 > 1000
    assert await state(d, "g2") == "Accepted"


async def test_timed_out_gang_gives_its_quota_to_a_waiting_gang(driver: Driver) -> None:
    d = driver
    await blocked_second_gang(d)
    await advance(d, PH_TIMEOUT)
    assert len(released(d, TIMEOUT)) == 20
    await confirm(d, released(d, TIMEOUT))
    await d.settle()
    assert len(d.allocs("g2")) == 60
    assert await state(d, "g2") == "Starting"
    assert used((await queue_info(d))["allocatedResource"]) == {"memory": 600, "vcore": 60}


async def test_timed_out_gang_gives_back_its_hold_before_confirmation(driver: Driver) -> None:
    d = driver
    await blocked_second_gang(d)
    await advance(d, PH_TIMEOUT)
    assert len(released(d, TIMEOUT)) == 20
    assert await state(d, "g1") == "Resuming"
    # 200 (not yet confirmed) + 600 fits the max of 1000, and the node has room.
    assert len(d.allocs("g2")) == 60


@pytest.mark.parametrize("style", ["Soft", "Hard"])
async def test_timeout_after_placing_releases_only_unused_placeholders(
    driver: Driver, style: str
) -> None:
    d = driver
    await d.nodes(node("n1"), node("n2"))
    phs = await placed_gang(d, members=4, gang_scheduling_style=style)
    (real,) = await replace(d, *reals("gang", 1))
    await advance(d, 300)  # Starting -> Running
    assert await state(d, "gang") == "Running"
    replaced_uuid = released(d, REPLACED)[0].uuid
    # A second real ask whose handshake is still in flight when the timer fires.
    await advance(d, PH_TIMEOUT - 300 - 10)
    await d.asks(ask("gang-real-1", "gang", task_group_name="tg"))
    await d.settle()
    in_flight = released(d, REPLACED)[1]
    await advance(d, 10)

    timed_out = released(d, TIMEOUT)
    unused = {p.uuid for p in phs} - {replaced_uuid, in_flight.uuid}
    assert {r.uuid for r in timed_out} == unused
    assert await state(d, "gang") == "Running"
    assert d.rm.app_states("gang")[-1] == "Running"
    data = await ph_data(d, "gang")
    assert (data["count"], data["replaced"], data["timedout"]) == (4, 1, 2)
    assert data["count"] >= data["replaced"] + data["timedout"]
    # The replaced allocation and the handshake in flight are untouched.
    info = await d.core.get_application("default", "gang")
    assert real.uuid in {a["uuid"] for a in info["allocations"]}
    await confirm(d, [in_flight])
    await d.settle()
    assert [a.allocation_key for a in real_allocs(d)] == ["gang-real-0", "gang-real-1"]
    data = await ph_data(d, "gang")
    assert (data["count"], data["replaced"], data["timedout"]) == (4, 2, 2)


async def test_timeout_counts_from_first_placeholder_even_after_a_real_allocation(
    driver: Driver,
) -> None:
    d = driver
    await d.nodes(node("n1"))
    await d.apps(gang_app("gang"))
    await d.asks(ask("driver", "gang"))  # a plain ask, allocated first
    await d.settle()
    assert await state(d, "gang") == "Starting"
    await d.asks(*placeholders("gang"))
    await d.settle()
    phs = [a for a in d.allocs("gang") if a.placeholder]
    assert len(phs) == 3
    await advance(d, PH_TIMEOUT)
    assert sorted(r.uuid for r in released(d, TIMEOUT)) == sorted(p.uuid for p in phs)
    assert (await ph_data(d, "gang"))["timedout"] == 3


async def test_no_timeout_once_every_placeholder_is_replaced(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"), node("n2"))
    await placed_gang(d)
    assert len(await replace(d, *reals("gang"))) == 3
    n_responses = len(d.rm.allocation_responses)
    n_states = len(d.rm.app_states("gang"))
    await advance(d, PH_TIMEOUT + 60)
    assert not released(d, TIMEOUT)
    assert not reasons(d, "PlaceholderTimeout")
    assert all(
        not r.released and not r.released_asks for r in d.rm.allocation_responses[n_responses:]
    )
    assert d.rm.app_states("gang")[n_states:] == []
    assert await state(d, "gang") == "Running"
    data = await ph_data(d, "gang")
    assert (data["replaced"], data["timedout"]) == (3, 0)


# ========================================================= B. completion and cleanup
async def test_completing_releases_leftover_placeholders_then_completes(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"), node("n2"))
    phs = await placed_gang(d)
    (real,) = await replace(d, *reals("gang", 1))
    await d.release(real)
    await d.settle()
    assert await state(d, "gang") == "Completing"
    replaced_uuid = released(d, REPLACED)[0].uuid
    leftover = {p.uuid for p in phs} - {replaced_uuid}

    await advance(d, COMPLETING - 1)
    assert not released(d, TIMEOUT)
    await advance(d, 1)
    timed_out = released(d, TIMEOUT)
    assert {r.uuid for r in timed_out} == leftover
    assert await state(d, "gang") == "Completing"  # until the RM confirms
    await advance(d, COMPLETING)
    assert await state(d, "gang") == "Completing"

    await confirm(d, timed_out)
    await d.settle()
    assert await state(d, "gang") == "Completed"
    assert d.rm.app_states("gang")[-2:] == ["Completing", "Completed"]
    q = await queue_info(d)
    assert used(q["allocatedResource"]) == {}
    assert "gang" not in q["applications"]
    for n in ("n1", "n2"):
        assert used((await d.core.get_node("default", n))["allocated"]) == {}

    data = await ph_data(d, "gang")
    assert (data["count"], data["replaced"], data["timedout"]) == (3, 1, 2)

    # Before it expires, the same id may be submitted again: the new one is found.
    await d.apps(gang_app("gang"))
    await d.settle()
    assert d.rm.accepted_apps.count("gang") == 2
    info = await d.core.get_application("default", "gang")
    assert info["applicationState"] == "New"
    assert info["allocations"] == []


async def test_new_ask_while_completing_runs_again(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"), node("n2"))
    await placed_gang(d)
    (real,) = await replace(d, *reals("gang", 1))
    await d.release(real)
    await d.settle()
    assert await state(d, "gang") == "Completing"
    await d.asks(ask("more", "gang"))
    await d.settle()
    assert await state(d, "gang") == "Running"
    assert [a.allocation_key for a in real_allocs(d)][-1] == "more"
    await advance(d, COMPLETING)
    assert await state(d, "gang") == "Running"
    assert not released(d, TIMEOUT)  # no Completing cleanup after it left Completing


async def test_task_group_ask_while_completing_replaces_a_leftover(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"), node("n2"))
    phs = await placed_gang(d)
    (real,) = await replace(d, *reals("gang", 1))
    await d.release(real)
    await d.settle()
    assert await state(d, "gang") == "Completing"
    (again,) = await replace(d, ask("gang-real-1", "gang", task_group_name="tg"))
    assert await state(d, "gang") == "Running"
    rel = released(d, REPLACED)[1]
    assert again.node_id == {p.uuid: p.node_id for p in phs}[rel.uuid]
    data = await ph_data(d, "gang")
    assert (data["replaced"], data["timedout"]) == (2, 0)
    # Done again: the one leftover goes after the Completing timeout.
    await d.release(again)
    await d.settle()
    await advance(d, COMPLETING)
    (last,) = released(d, TIMEOUT)
    assert last.uuid in {p.uuid for p in phs} - {r.uuid for r in released(d, REPLACED)}
    await confirm(d, [last])
    await d.settle()
    assert await state(d, "gang") == "Completed"
    data = await ph_data(d, "gang")
    assert (data["count"], data["replaced"], data["timedout"]) == (3, 2, 1)


async def test_plain_app_completes_after_completing_timeout(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"))
    await d.apps(app("plain"))
    await d.asks(ask("k", "plain"))
    await d.settle()
    (alloc,) = d.allocs("plain")
    await d.release(alloc)
    await d.settle()
    assert await state(d, "plain") == "Completing"
    await advance(d, COMPLETING - 1)
    assert await state(d, "plain") == "Completing"
    await advance(d, 1)
    assert await state(d, "plain") == "Completed"
    assert "plain" not in (await queue_info(d))["applications"]


# ======================================================================= C. recovery
def recovered_placeholder(i: int, node_id: str = "n1") -> si.Allocation:
    return si.Allocation(
        allocation_key=f"gang-ph-{i}",
        uuid=f"recovered-{i}",
        node_id=node_id,
        application_id="gang",
        partition_name="default",
        resource_per_alloc=si.Resource.of(memory=10, vcore=1),
        task_group_name="tg",
        placeholder=True,
    )


async def test_recovered_placeholders_are_replaced_through_handshake(driver: Driver) -> None:
    d = driver
    await d.apps(gang_app("gang"))
    await d.nodes(node("n1", existing_allocations=[recovered_placeholder(i) for i in range(3)]))
    await d.settle()
    assert d.rm.accepted_nodes == ["n1"]
    info = await d.core.get_application("default", "gang")
    assert sorted((a["uuid"], a["placeholder"], a["nodeId"]) for a in info["allocations"]) == [
        (f"recovered-{i}", True, "n1") for i in range(3)
    ]
    assert info["applicationState"] == "Starting"
    assert (await ph_data(d, "gang"))["count"] == 3
    assert used((await queue_info(d))["allocatedResource"]) == {"memory": 30, "vcore": 3}

    await d.asks(*reals("gang"))
    await d.settle()
    rel = released(d, REPLACED)
    assert sorted(r.uuid for r in rel) == [f"recovered-{i}" for i in range(3)]
    assert not real_allocs(d)
    await confirm(d, rel)
    await d.settle()
    got = real_allocs(d)
    assert len(got) == 3
    assert {a.node_id for a in got} == {"n1"}
    data = await ph_data(d, "gang")
    assert (data["count"], data["replaced"], data["timedout"]) == (3, 3, 0)
    n1 = await d.core.get_node("default", "n1")
    assert sorted(a["uuid"] for a in n1["allocations"]) == sorted(a.uuid for a in got)


async def test_recovered_placeholders_time_out(driver: Driver) -> None:
    d = driver
    await d.apps(gang_app("gang"))
    await d.nodes(node("n1", existing_allocations=[recovered_placeholder(i) for i in range(3)]))
    await d.settle()
    await advance(d, PH_TIMEOUT - 1)
    assert not released(d, TIMEOUT)
    await advance(d, 1)
    timed_out = released(d, TIMEOUT)
    assert sorted(r.uuid for r in timed_out) == [f"recovered-{i}" for i in range(3)]
    await confirm(d, timed_out)
    await d.settle()
    assert used((await d.core.get_node("default", "n1"))["allocated"]) == {}
    data = await ph_data(d, "gang")
    assert (data["count"], data["replaced"], data["timedout"]) == (3, 0, 3)


async def test_partly_recovered_gang_places_the_rest(driver: Driver) -> None:
    d = driver
    await d.apps(gang_app("gang"))
    await d.nodes(node("n1", existing_allocations=[recovered_placeholder(i) for i in range(2)]))
    await d.settle()
    assert await state(d, "gang") == "Accepted"
    await d.asks(placeholders("gang")[2])  # the RM asks again for the missing member
    await d.settle()
    assert await state(d, "gang") == "Starting"
    assert (await ph_data(d, "gang"))["count"] == 3
    got = await replace(d, *reals("gang"))
    assert len(got) == 3
    rel = released(d, REPLACED)
    assert {r.uuid for r in rel} >= {"recovered-0", "recovered-1"}


async def test_placeholders_recovered_after_a_real_allocation_time_out(driver: Driver) -> None:
    d = driver
    await d.apps(gang_app("gang"))
    real = si.Allocation(
        allocation_key="driver",
        uuid="recovered-driver",
        node_id="n1",
        application_id="gang",
        partition_name="default",
        resource_per_alloc=si.Resource.of(memory=10, vcore=1),
    )
    phs = [recovered_placeholder(i) for i in range(3)]
    await d.nodes(node("n1", existing_allocations=[real, *phs]))
    await d.settle()
    assert d.rm.accepted_nodes == ["n1"]
    await advance(d, PH_TIMEOUT)
    assert sorted(r.uuid for r in released(d, TIMEOUT)) == [f"recovered-{i}" for i in range(3)]


# ========================================================================= D. events
async def test_events_of_allocation_replacement_and_timeout(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"), node("n2"))
    await placed_gang(d)
    allocated = reasons(d, "PlaceholderAllocated")
    assert sorted(e.object_id for e in allocated) == [f"gang-ph-{i}" for i in range(3)]
    assert all(e.message for e in allocated)
    await replace(d, *reals("gang", 1))
    (rep,) = reasons(d, "PlaceholderReplaced")
    assert rep.object_id == "gang-real-0"
    assert rep.message
    await advance(d, PH_TIMEOUT)
    (timeout,) = reasons(d, "PlaceholderTimeout")
    assert timeout.object_id == "gang"
    assert timeout.message


def app_events(d: Driver, app_id: str = "gang") -> list[tuple[str, str]]:
    """(reason, message) of the application events of ``app_id``, in order."""
    return [
        (e.reason, e.message)
        for e in d.rm.events
        if e.type == si.EventRecordType.APP and e.object_id == app_id
    ]


@pytest.mark.parametrize(
    ("style", "after_timeout"),
    [("Soft", ["Resuming", "Accepted"]), ("Hard", ["Failing", "Failed"])],
)
async def test_state_events_name_the_state(
    driver: Driver, style: str, after_timeout: list[str]
) -> None:
    d = driver
    phs = await partly_placed_gang(d, gang_scheduling_style=style)
    await advance(d, PH_TIMEOUT)
    await confirm(d, released(d, TIMEOUT))
    await d.settle()
    assert len(released(d, TIMEOUT)) == len(phs)
    events = app_events(d)
    states = [r for r, _ in events if r in {"New", *d.rm.app_states("gang")}]
    assert states == d.rm.app_states("gang")  # one event per state change, same order
    assert states[: 1 + len(after_timeout)] == ["Accepted", *after_timeout]
    assert all(message for _, message in events)
    first = events.index(next(e for e in events if e[0] == after_timeout[0]))
    assert events[first - 1][0] == "PlaceholderTimeout"  # the releases come first


async def test_placeholder_cancelled_when_real_ask_is_larger(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"), node("n2"))
    phs = await placed_gang(d)
    await d.asks(ask("big", "gang", memory=20, task_group_name="tg"))
    await d.settle()
    (cancelled,) = reasons(d, "PlaceholderCancelled")
    assert cancelled.object_id == "big"
    assert cancelled.message
    (rel,) = released(d, TIMEOUT)
    assert rel.uuid in {p.uuid for p in phs}
    assert not released(d, REPLACED)
    # The ask goes on as a normal ask.
    (big,) = real_allocs(d)
    assert big.allocation_key == "big"
    assert (await ph_data(d, "gang"))["timedout"] == 1


async def test_overdue_release_then_late_confirmation(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"))
    phs = await placed_gang(d)
    await d.asks(*reals("gang", 1))
    await d.settle()
    (rel,) = released(d, REPLACED)
    await advance(d, HANDSHAKE - 1)
    assert not reasons(d, "PlaceholderReleaseOverdue")
    await advance(d, 1)
    (overdue,) = reasons(d, "PlaceholderReleaseOverdue")
    assert overdue.object_id == "gang-real-0"
    assert rel.uuid in overdue.message
    assert not real_allocs(d)
    await advance(d, HANDSHAKE)  # reported once
    assert len(reasons(d, "PlaceholderReleaseOverdue")) == 1

    await confirm(d, [rel])
    await d.settle()
    (real,) = real_allocs(d)
    assert real.allocation_key == "gang-real-0"
    assert real.node_id == {p.uuid: p.node_id for p in phs}[rel.uuid]
    assert (await ph_data(d, "gang"))["replaced"] == 1


async def test_ask_sent_while_failing_is_answered(driver: Driver) -> None:
    d = driver
    await partly_placed_gang(d, gang_scheduling_style="Hard")
    await advance(d, PH_TIMEOUT)
    assert await state(d, "gang") == "Failing"
    await d.asks(ask("late", "gang"))
    await d.settle()
    await confirm(d, released(d, TIMEOUT))
    await d.settle()
    assert await state(d, "gang") == "Failed"
    answered = {r.allocation_key for r in d.rm.rejected_asks} | {
        r.allocation_key for r in d.rm.released_asks
    }
    assert "late" in answered
