"""Gang scheduling through the public API: placeholders, replacement, timeouts, cleanup.

The flows of ``seeds/000`` (YuniKorn's gang scheduling design) with a recording RM and a
manual clock. ``GangDriver`` adds what a gang-aware RM does: placeholder and real asks of
a task group, and confirming the core's placeholder releases.
"""

from __future__ import annotations

from typing import Any

import pytest

from scheduler import si
from scheduler.testing import RecordingCallback, Scenario, start_scenario

from ..conftest import QUEUES, Driver, app, ask, node

pytestmark = pytest.mark.asyncio

REPLACED = si.TerminationType.PLACEHOLDER_REPLACED
TIMEOUT = si.TerminationType.TIMEOUT


def gang_app(
    app_id: str, members: int = 3, queue: str = "root.a", **kw: Any
) -> si.AddApplicationRequest:
    """A gang application whose placeholder total is ``members`` times {memory 10, vcore 1}."""
    kw.setdefault("placeholder_ask", si.Resource.of(memory=10 * members, vcore=members))
    return app(app_id, queue, **kw)


def placeholders(
    app_id: str, members: int = 3, group: str = "tg", **kw: Any
) -> list[si.AllocationAsk]:
    return [
        ask(f"{app_id}-ph-{i}", app_id, task_group_name=group, placeholder=True, **kw)
        for i in range(members)
    ]


def reals(app_id: str, members: int = 3, group: str = "tg", **kw: Any) -> list[si.AllocationAsk]:
    return [ask(f"{app_id}-real-{i}", app_id, task_group_name=group, **kw) for i in range(members)]


def released(d: Driver, termination: si.TerminationType) -> list[si.AllocationRelease]:
    return [r for r in d.rm.released if r.termination_type == termination]


async def confirm(d: Driver, releases: list[si.AllocationRelease]) -> None:
    """The RM confirms the core's releases, with the same uuid and termination type."""
    await d.core.update_allocation(
        si.AllocationRequest(
            rm_id="rm-1",
            releases=si.AllocationReleasesRequest(
                allocations_to_release=[
                    si.AllocationRelease(
                        partition_name="default",
                        application_id=r.application_id,
                        uuid=r.uuid,
                        termination_type=r.termination_type,
                    )
                    for r in releases
                ]
            ),
        )
    )


async def placed_gang(
    d: Driver, app_id: str = "gang", members: int = 3, **kw: Any
) -> list[si.Allocation]:
    """A gang application with all its placeholders allocated (so ``Starting``)."""
    await d.apps(gang_app(app_id, members, **kw))
    await d.asks(*placeholders(app_id, members))
    await d.settle()
    phs = [a for a in d.allocs(app_id) if a.placeholder]
    assert len(phs) == members
    return phs


async def state(d: Driver, app_id: str) -> str:
    info = await d.core.get_application("default", app_id)
    return str(info["applicationState"])


async def ph_data(d: Driver, app_id: str, group: str = "tg") -> dict[str, Any]:
    info = await d.core.get_application("default", app_id)
    (entry,) = [e for e in info["placeholderData"] if e["taskGroupName"] == group]
    return dict(entry)


# ============================================================================ smoke
async def test_placeholders_then_replacement_handshake(scheduler_scenario: Scenario) -> None:
    s = scheduler_scenario
    await s.add_nodes("n1", "n2")
    await s.submit_gang("gang", {"tg": 3}, queue="root.a")
    phs = s.assert_allocated("gang", 3, placeholder=True)
    assert await s.app_state("gang") == "Starting"
    await s.ask("gang", count=3, task_group="tg")
    assert sorted(r.uuid for r in s.released(REPLACED)) == sorted(p.uuid for p in phs)
    s.assert_allocated("gang", 0)  # nothing before confirmation
    await s.confirm_releases()
    real = s.assert_allocated("gang", 3)
    assert sorted(a.node_id for a in real) == sorted(p.node_id for p in phs)
    assert (await s.application("gang"))["placeholderData"] == [
        {
            "taskGroupName": "tg",
            "count": 3,
            "minResource": {"memory": 10, "vcore": 1},
            "replaced": 3,
            "timedout": 0,
        }
    ]
    assert await s.app_state("gang") == "Running"


# ====================================================================== 1. submission
PARENT_MAX = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: p
            resources:
              max: {memory: 100, vcore: 10}
            queues:
              - name: leaf
          - name: fair
            properties:
              application.sort.policy: fair
"""


async def test_gang_larger_than_the_leaf_max_is_rejected_with_the_numbers(driver: Driver) -> None:
    d = driver
    await d.apps(gang_app("big", 101))  # root.a max is {memory: 1000, vcore: 100}
    await d.settle()
    (rejected,) = d.rm.rejected_apps
    assert rejected.application_id == "big"
    assert "1010" in rejected.reason and "1000" in rejected.reason and "root.a" in rejected.reason
    assert await state(d, "big") == "Rejected"


async def test_gang_larger_than_a_parent_max_is_rejected(driver: Driver) -> None:
    d = driver
    await d.register(PARENT_MAX)
    await d.apps(
        gang_app("big", 11, queue="root.p.leaf"), gang_app("fits", 10, queue="root.p.leaf")
    )
    await d.settle()
    assert [r.application_id for r in d.rm.rejected_apps] == ["big"]
    assert "root.p" in d.rm.rejected_apps[0].reason
    assert d.rm.accepted_apps == ["fits"]


async def test_gang_in_a_fair_queue_is_rejected_a_plain_app_is_not(driver: Driver) -> None:
    d = driver
    await d.apps(gang_app("gang", queue="root.fair"), app("plain", "root.fair"))
    await d.settle()
    assert [r.application_id for r in d.rm.rejected_apps] == ["gang"]
    assert "fair" in d.rm.rejected_apps[0].reason
    assert d.rm.accepted_apps == ["plain"]


# ======================================================================= 2. placeholders
async def test_accepted_while_placing_starting_once_placed(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1", memory=20, vcore=2))  # room for two of three placeholders
    await d.apps(gang_app("gang"))
    await d.asks(*placeholders("gang"))
    await d.settle()
    assert len(d.allocs("gang")) == 2 and all(a.placeholder for a in d.allocs("gang"))
    assert all(a.task_group_name == "tg" for a in d.allocs("gang"))
    assert await state(d, "gang") == "Accepted"
    await d.nodes(node("n2"))
    await d.settle()
    assert len(d.allocs("gang")) == 3
    assert d.rm.app_states("gang") == ["Accepted", "Starting"]


async def test_real_ask_waits_until_every_placeholder_is_allocated(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1", memory=20, vcore=2))
    await d.apps(gang_app("gang"))
    await d.asks(*placeholders("gang"), *reals("gang"))
    await d.settle()
    assert d.rm.released == []  # no replacement while a placeholder is still pending
    assert [a for a in d.allocs("gang") if not a.placeholder] == []
    await d.nodes(node("n2"))
    await d.settle()
    assert len(released(d, REPLACED)) == 3


async def test_gang_waits_for_its_whole_total_in_the_queue_quota(driver: Driver) -> None:
    d = driver
    await d.register(PARENT_MAX)  # root.p max {memory: 100, vcore: 10}
    await d.nodes(node("n1", memory=1000, vcore=100))
    await d.apps(app("plain", "root.p.leaf"), gang_app("gang", 6, queue="root.p.leaf"))
    await d.asks(ask("p-1", "plain", memory=50, vcore=5))
    await d.settle()
    await d.asks(*placeholders("gang", 6), ask("p-2", "plain", memory=10, vcore=1))
    await d.settle()
    # 40 free, the gang needs 60: it places nothing, the other application goes on.
    assert d.allocs("gang") == []
    assert [a.allocation_key for a in d.allocs("plain")] == ["p-1", "p-2"]
    await d.release(*[a for a in d.allocs("plain") if a.allocation_key == "p-1"])
    await d.settle()
    assert len(d.allocs("gang")) == 6
    assert await state(d, "gang") == "Starting"


async def test_competing_gangs_each_run_whole_without_deadlock(driver: Driver) -> None:
    """Five gangs of 4 in a queue that holds 10: each places all or nothing, in turn."""
    d = driver
    await d.register(PARENT_MAX)
    await d.nodes(node("n1", memory=1000, vcore=100))
    ids = [f"g{i}" for i in range(5)]
    await d.apps(*[gang_app(i, 4, queue="root.p.leaf") for i in ids])
    await d.asks(*[a for i in ids for a in placeholders(i, 4)])
    await d.settle()
    done: list[str] = []
    for _ in range(10):
        counts = {i: len([a for a in d.allocs(i) if a.placeholder]) for i in ids}
        assert all(c in (0, 4) for c in counts.values()), counts
        started = [i for i in ids if counts[i] == 4 and i not in done]
        if not started:
            break
        for gid in started:  # replace, run, finish
            await d.asks(*reals(gid, 4))
            await d.settle()
            await confirm(d, [r for r in released(d, REPLACED) if r.application_id == gid])
            await d.settle()
            await d.release(*[a for a in d.allocs(gid) if not a.placeholder])
            await d.settle()
            done.append(gid)
        await d.clock.advance(30)  # Completing -> Completed: the quota is free again
    assert sorted(done) == ids
    for gid in ids:
        assert (await ph_data(d, gid))["replaced"] == 4


# ======================================================================== 3. replacement
async def test_smaller_real_ask_gives_the_difference_back(scheduler_scenario: Scenario) -> None:
    s = scheduler_scenario
    await s.add_nodes("n1")
    await s.submit_gang("gang", {"tg": 1}, queue="root.a")
    await s.ask("gang", "real", memory=4, vcore=1, task_group="tg")
    await s.confirm_releases()
    (real,) = s.assert_allocated("gang", 1)
    assert real.node_id == "n1" and real.allocation_key == "real"
    assert (await s.core.get_node("default", "n1"))["allocated"] == {"memory": 4, "vcore": 1}
    queue = await s.core.get_queue("default", "root.a")
    assert queue["allocatedResource"] == {"memory": 4, "vcore": 1}
    info = await s.application("gang")
    assert [a["placeholder"] for a in info["allocations"]] == [False]


async def test_larger_real_ask_cancels_its_placeholder_and_schedules_normally(
    scheduler_scenario: Scenario,
) -> None:
    s = scheduler_scenario
    await s.add_nodes("n1", memory=30, vcore=3)
    await s.submit_gang("gang", {"tg": 1}, queue="root.a")
    await s.ask("gang", "real", memory=25, vcore=1, task_group="tg")
    (cancel,) = s.released()
    assert cancel.termination_type == TIMEOUT
    assert cancel.message == "cancel placeholder: resource incompatible"
    s.assert_allocated("gang", 0)  # 25 + 10 > 30
    assert await s.confirm_releases() == [cancel]
    (real,) = s.assert_allocated("gang", 1)
    assert real.allocation_key == "real" and real.node_id == "n1"
    assert (await s.application("gang"))["placeholderData"] == [
        {
            "taskGroupName": "tg",
            "count": 1,
            "minResource": {"memory": 10, "vcore": 1},
            "replaced": 0,
            "timedout": 1,
        }
    ]


async def test_a_released_placeholder_is_never_picked_twice(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"))
    (ph,) = await placed_gang(d, members=1)
    await d.asks(*reals("gang", 1))
    await d.settle()
    await d.asks(ask("second", "gang", task_group_name="tg"))  # while the first waits
    await d.settle()
    assert [r.uuid for r in released(d, REPLACED)] == [ph.uuid]
    # The second ask has no placeholder left to take: it is allocated as a normal ask.
    assert [a.allocation_key for a in d.allocs("gang") if not a.placeholder] == ["second"]
    await confirm(d, released(d, REPLACED))
    await confirm(d, released(d, REPLACED))  # a duplicate confirmation changes nothing
    await d.settle()
    real = sorted(a.allocation_key for a in d.allocs("gang") if not a.placeholder)
    assert real == ["gang-real-0", "second"]
    assert (await d.core.get_node("default", "n1"))["allocated"] == {"memory": 20, "vcore": 2}


async def test_other_applications_are_scheduled_while_a_handshake_waits(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"))
    await placed_gang(d, members=1)
    await d.asks(*reals("gang", 1))
    await d.apps(app("other"))
    await d.settle()
    await d.asks(ask("o-1", "other"), ask("o-2", "other"))
    await d.settle()
    assert len(released(d, REPLACED)) == 1  # not confirmed yet
    assert [a.allocation_key for a in d.allocs("other")] == ["o-1", "o-2"]


async def test_confirmation_after_the_application_was_removed(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"))
    await placed_gang(d)
    await d.asks(*reals("gang"))
    await d.settle()
    await d.remove_apps("gang")
    await d.settle()
    await confirm(d, released(d, REPLACED))
    await d.settle()
    assert [a for a in d.allocs("gang") if not a.placeholder] == []
    assert (await d.core.get_node("default", "n1"))["allocated"] == {}
    assert (await d.core.get_queue("default", "root.a"))["allocatedResource"] in ({}, None)
    assert await state(d, "gang") == "Completed"


async def test_node_removed_while_a_handshake_waits(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1", memory=20, vcore=2), node("n2", memory=20, vcore=2))
    phs = await placed_gang(d, members=2)
    on_n1 = [p for p in phs if p.node_id == "n1"]
    await d.asks(*reals("gang", len(on_n1)))
    await d.settle()
    (first,) = released(d, REPLACED)
    gone = first.uuid
    gone_node = next(p.node_id for p in phs if p.uuid == gone)
    await d.nodes(si.NodeInfo(node_id=gone_node, action=si.ActionFromRM.DECOMISSION))
    await d.settle()
    # The real ask takes the other placeholder instead.
    second = [r for r in released(d, REPLACED) if r.uuid != gone]
    assert len(second) == 1
    await confirm(d, [first, *second])  # the late one for the removed node is ignored
    await d.settle()
    (real,) = [a for a in d.allocs("gang") if not a.placeholder]
    assert real.node_id != gone_node
    info = await d.core.get_application("default", "gang")
    assert [a["placeholder"] for a in info["allocations"]] == [False]
    data = await ph_data(d, "gang")
    assert data["replaced"] == 1 and data["timedout"] == 1 and data["count"] == 2


async def test_rm_reregistering_during_a_handshake(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"))
    await placed_gang(d)
    await d.asks(*reals("gang"))
    await d.settle()
    pending = released(d, REPLACED)
    await d.register()
    await d.settle()
    await d.nodes(node("n1"))
    await d.apps(gang_app("gang"))
    await d.settle()
    await confirm(d, pending)  # confirmations of the dropped state change nothing
    await d.settle()
    assert (await d.core.get_node("default", "n1"))["allocated"] == {}
    await d.asks(*placeholders("gang"))
    await d.settle()
    info = await d.core.get_application("default", "gang")
    assert len(info["allocations"]) == 3 and await state(d, "gang") == "Starting"


async def test_confirmation_for_something_else_is_harmless(driver: Driver) -> None:
    d = driver
    await d.nodes(node("n1"))
    phs = await placed_gang(d, members=1)
    await d.apps(app("plain"))
    await d.asks(ask("p", "plain"))
    await d.settle()
    (plain,) = d.allocs("plain")
    bogus = [
        si.AllocationRelease(application_id="gang", uuid="no-such-uuid", termination_type=REPLACED),
        si.AllocationRelease(application_id="gang", uuid=phs[0].uuid, termination_type=REPLACED),
    ]
    await confirm(d, bogus)
    await d.settle()
    # The placeholder was never released for replacement: the RM removed it; no real one.
    assert [a for a in d.allocs("gang") if not a.placeholder] == []
    assert (await d.core.get_node("default", "n1"))["allocated"] == {"memory": 10, "vcore": 1}
    assert plain.node_id == "n1"


class Checking(RecordingCallback):
    """An RM that checks predicates (allowing every node) and records what it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    async def predicates(self, args: si.PredicatesArgs) -> bool:
        self.asked.append(args.allocation_key)
        return True


async def test_replacement_with_an_rm_that_checks_predicates() -> None:
    async with start_scenario(QUEUES, rm=Checking()) as s:
        rm = s.rm
        assert isinstance(rm, Checking)
        await s.add_nodes("n1")
        await s.submit_gang("gang", {"tg": 2}, queue="root.a")
        phs = s.assert_allocated("gang", 2, placeholder=True)
        assert sorted(rm.asked) == ["gang-tg-ph-0", "gang-tg-ph-1"]
        await s.ask("gang", "real", count=2, task_group="tg")
        await s.confirm_releases()
        real = s.assert_allocated("gang", 2)
        assert sorted(a.node_id for a in real) == sorted(p.node_id for p in phs)
        # Each replacement was put to the predicates on its placeholder's node too (YuniKorn's
        # tryPlaceholderAllocate), before its handshake.
        assert sorted(rm.asked) == ["gang-tg-ph-0", "gang-tg-ph-1", "real", "real"]
