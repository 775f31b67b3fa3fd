"""Permit gangs (Koordinator's gang scheduling, the contract's "Permit gangs"), through the
public API on the manual clock: tentative members, one response for a satisfied GangGroup,
Strict rollback, NonStrict accumulation, waiting time, order, and no deadlock."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from scheduler import si
from scheduler.testing import ErrorWatch, RecordingCallback, Scenario, gang_tags, start_scenario

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: default
          - name: b
          - name: small
            resources:
              max: {memory: 100, vcore: 10}
"""

ANN = "kubernetes.io/annotation/gang.scheduling.koordinator.sh/"

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def s() -> AsyncIterator[Scenario]:
    with ErrorWatch() as errors:
        async with start_scenario(QUEUES) as scenario:
            yield scenario
    assert not errors, errors.report()


def new_allocations(s: Scenario) -> list[list[si.Allocation]]:
    """The ``new`` list of every allocation response that had one, in order."""
    return [r.new for r in s.rm.allocation_responses if r.new]


def events(s: Scenario, reason: str) -> list[si.EventRecord]:
    return [e for e in s.rm.events if e.reason == reason]


async def queue(s: Scenario, path: str) -> dict[str, Any]:
    return await s.core.get_queue("default", path)


async def gang_view(s: Scenario, app_id: str, gang_id: str) -> dict[str, Any]:
    gangs = (await s.application(app_id))["gangs"]
    return next(g for g in gangs if g["gangId"] == gang_id)


# ================================================================== tentative placement
async def test_members_are_tentative_until_min_available_then_sent_together(
    s: Scenario,
) -> None:
    await s.add_nodes("n1", "n2")
    await s.submit("app-1", queue="root.default")
    tags = gang_tags("g1", 3)
    await s.ask("app-1", "m1", tags=tags)
    await s.ask("app-1", "m2", tags=tags)
    assert s.allocations() == []
    # Tentative members count on node, queue and application at once.
    assert (await queue(s, "root.default"))["allocatedResource"] == {"memory": 20, "vcore": 2}
    app = await s.application("app-1")
    assert app["usedResource"] == {"memory": 20, "vcore": 2}
    assert all(a["tentative"] for a in app["allocations"])
    nodes = [await s.core.get_node("default", n) for n in ("n1", "n2")]
    assert sum(n["allocated"].get("memory", 0) for n in nodes) == 20
    assert app["applicationState"] == "Accepted"
    view = await gang_view(s, "app-1", "default/g1")
    assert view["placed"] == 2 and view["bound"] == 0 and not view["satisfied"]

    await s.ask("app-1", "m3", tags=tags)
    # All three reach the RM in one AllocationResponse.new.
    assert [sorted(a.allocation_key for a in new) for new in new_allocations(s)] == [
        ["m1", "m2", "m3"]
    ]
    view = await gang_view(s, "app-1", "default/g1")
    assert view == {
        "gangId": "default/g1",
        "mode": "Strict",
        "minAvailable": 3,
        "totalNumber": 3,
        "waitingTime": 600.0,
        "gangGroup": ["default/g1"],
        "createTime": 0,
        "placed": 0,
        "bound": 3,
        "satisfied": True,
        "timedOut": False,
    }
    assert not any(a["tentative"] for a in (await s.application("app-1"))["allocations"])
    assert await s.app_state("app-1") == "Running"  # each allocation fires RUN, as ever
    assert len(events(s, "GangSatisfied")) == 1

    # A satisfied gang schedules later members as normal asks.
    await s.ask("app-1", "m4", tags=tags)
    assert [a.allocation_key for a in new_allocations(s)[-1]] == ["m4"]
    assert (await gang_view(s, "app-1", "default/g1"))["bound"] == 4


async def test_an_ask_with_max_allocations_n_is_n_members(s: Scenario) -> None:
    await s.add_nodes("n1")
    await s.submit("app-1")
    await s.ask("app-1", "two", count=2, tags=gang_tags("g", 3))
    assert s.allocations() == []
    await s.ask("app-1", "one", tags=gang_tags("g", 3))
    assert [sorted(a.allocation_key for a in new) for new in new_allocations(s)] == [
        ["one", "two", "two"]
    ]


# =================================================================================== Strict
async def test_strict_rolls_the_group_back_when_a_member_cannot_be_placed(s: Scenario) -> None:
    await s.add_nodes("n1", memory=20, vcore=2)  # room for two members
    await s.submit("app-1")
    await s.ask("app-1", "m", count=3, tags=gang_tags("g", 3))
    assert s.allocations() == []
    # Rolled back: nothing held anywhere, the members are pending again.
    assert (await queue(s, "root.default"))["allocatedResource"] == {}
    assert (await s.core.get_node("default", "n1"))["allocated"] == {}
    app = await s.application("app-1")
    assert app["allocations"] == []
    assert app["requests"][0]["pendingCount"] == 3
    rolled = events(s, "GangRolledBack")
    assert len(rolled) == 1
    assert "member m of application app-1 cannot be placed" in rolled[0].message
    assert rolled[0].object_id == "app-1" and rolled[0].group_id == "default/g"

    # New asks are no cluster change: the group stays parked.
    await s.submit("other")
    await s.ask("other", "x", memory=1, vcore=1)
    assert len(events(s, "GangRolledBack")) == 1
    # A node added is: the group is tried again and completes.
    await s.add_nodes("n2")
    assert [sorted(a.allocation_key for a in n) for n in new_allocations(s)][-1] == ["m", "m", "m"]


async def test_strict_rollback_when_the_queue_quota_is_full(s: Scenario) -> None:
    await s.add_nodes("n1", "n2")
    await s.submit("app-1", queue="root.small")  # max memory 100: ten members
    await s.ask("app-1", "m", count=11, tags=gang_tags("g", 11))
    assert s.allocations() == []
    assert (await queue(s, "root.small"))["allocatedResource"] == {}
    assert "its queue's quota is full" in events(s, "GangRolledBack")[0].message


# ================================================================================ NonStrict
async def test_non_strict_members_accumulate_until_the_cluster_has_room(s: Scenario) -> None:
    await s.add_nodes("n1", memory=20, vcore=2)
    await s.submit("app-1")
    await s.ask("app-1", "m", count=3, tags=gang_tags("g", 3, mode="NonStrict"))
    assert s.allocations() == []
    assert not events(s, "GangRolledBack")
    assert (await queue(s, "root.default"))["allocatedResource"] == {"memory": 20, "vcore": 2}
    assert (await gang_view(s, "app-1", "default/g"))["placed"] == 2
    await s.add_nodes("n2")
    assert [len(n) for n in new_allocations(s)] == [3]


async def test_both_modes_side_by_side_on_one_workload(s: Scenario) -> None:
    await s.add_nodes("n1", memory=40, vcore=4)  # room for four members
    await s.submit("strict")
    await s.submit("loose", queue="root.b")
    await s.ask("strict", "s", count=3, tags=gang_tags("s", 3))
    await s.ask("loose", "l", count=3, tags=gang_tags("l", 3, mode="NonStrict"))
    # The Strict gang got three members, the NonStrict one the last room and then waits.
    assert [sorted(a.allocation_key for a in n) for n in new_allocations(s)] == [["s", "s", "s"]]
    assert (await gang_view(s, "loose", "default/l"))["placed"] == 1
    held = s.allocations("strict")
    await s.release(*held[:2])
    assert [sorted(a.allocation_key for a in n) for n in new_allocations(s)][-1] == ["l", "l", "l"]


# ============================================================================ waiting time
async def test_waiting_time_rejects_the_gang_and_its_late_members(s: Scenario) -> None:
    await s.add_nodes("n1")
    await s.submit("app-1")
    tags = gang_tags("g", 3, waiting_time="30s", mode="NonStrict")
    await s.ask("app-1", "m1", tags=tags)
    await s.advance(10)
    await s.ask("app-1", "m2", tags=tags)
    await s.advance(19)
    assert s.rm.rejected_asks == []
    await s.advance(1)  # 30 s after the first tentative member
    rejected = {r.allocation_key: r.reason for r in s.rm.rejected_asks}
    assert set(rejected) == {"m1", "m2"}
    assert all("default/g" in r and "timeout" in r for r in rejected.values())
    assert s.allocations() == []
    assert (await queue(s, "root.default"))["allocatedResource"] == {}
    assert len(events(s, "GangTimeout")) == 1
    view = await gang_view(s, "app-1", "default/g")
    assert view["timedOut"] and view["placed"] == 0
    # A member that arrives later is rejected at once, and the gang is not scheduled.
    await s.ask("app-1", "m3", tags=tags)
    late = [r for r in s.rm.rejected_asks if r.allocation_key == "m3"]
    assert len(late) == 1 and "default/g" in late[0].reason and "timeout" in late[0].reason
    assert s.allocations() == []


async def test_a_strict_rollback_stops_the_wait_and_the_next_placement_starts_it(
    s: Scenario,
) -> None:
    await s.add_nodes("n1", memory=10, vcore=1)
    await s.submit("app-1")
    await s.ask("app-1", "m", count=3, tags=gang_tags("g", 3, waiting_time="60s"))
    await s.advance(50)
    await s.add_nodes("n2", memory=10, vcore=1)  # still one short: placed and rolled back
    assert len(events(s, "GangRolledBack")) == 2
    await s.advance(50)  # 100 s since the first placement: no wait was running long enough
    assert s.rm.rejected_asks == []
    await s.add_nodes("n3", memory=10, vcore=1)
    assert [len(n) for n in new_allocations(s)] == [3]


async def test_a_satisfied_gang_has_no_waiting_time(s: Scenario) -> None:
    await s.add_nodes("n1")
    await s.submit("app-1")
    await s.ask("app-1", "m", count=2, tags=gang_tags("g", 2, waiting_time="5s"))
    await s.advance(3600)
    assert s.rm.rejected_asks == []
    assert len(s.allocations("app-1")) == 2


# =============================================================================== GangGroup
async def test_a_gang_group_across_applications_and_queues_binds_together(s: Scenario) -> None:
    await s.add_nodes("n1", "n2")
    await s.submit("app-a", queue="root.default")
    await s.submit("app-b", queue="root.b")
    group = ["default/ga", "default/gb"]
    await s.ask("app-a", "a", count=2, tags=gang_tags("ga", 2, groups=group))
    assert s.allocations() == []  # ga reached min-available, gb has no member yet
    await s.ask("app-b", "b1", tags=gang_tags("gb", 2, groups=group))
    assert s.allocations() == []
    await s.ask("app-b", "b2", tags=gang_tags("gb", 2, groups=group))
    assert [sorted(a.allocation_key for a in n) for n in new_allocations(s)] == [
        ["a", "a", "b1", "b2"]
    ]
    for app_id, gang_id in (("app-a", "default/ga"), ("app-b", "default/gb")):
        view = await gang_view(s, app_id, gang_id)
        assert view["satisfied"] and view["gangGroup"] == group


async def test_a_gang_group_member_in_another_namespace(s: Scenario) -> None:
    await s.add_nodes("n1")
    await s.submit("app-1")
    group = ["ns1/x", "ns2/x"]
    await s.ask("app-1", "x1", tags=gang_tags("x", 1, groups=group, namespace="ns1"))
    assert s.allocations() == []
    await s.ask("app-1", "x2", tags=gang_tags("x", 1, groups=group, namespace="ns2"))
    assert len(new_allocations(s)) == 1 and len(new_allocations(s)[0]) == 2


async def test_a_group_whose_wait_passes_rejects_members_of_every_gang(s: Scenario) -> None:
    await s.add_nodes("n1")
    await s.submit("app-1")
    group = ["default/g1", "default/g2"]
    await s.ask("app-1", "a", tags=gang_tags("g1", 1, groups=group))
    await s.advance(600)
    assert {r.allocation_key for r in s.rm.rejected_asks} == {"a"}
    await s.ask("app-1", "b", tags=gang_tags("g2", 1, groups=group))
    assert {r.allocation_key for r in s.rm.rejected_asks} == {"a", "b"}


# ==================================================================================== order
async def test_members_of_an_older_gang_go_before_a_younger_gang_in_one_application(
    s: Scenario,
) -> None:
    await s.submit("app-1")
    await s.ask("app-1", "old-1", tags=gang_tags("old", 3, mode="NonStrict"))  # t=0
    await s.advance(1)
    await s.ask("app-1", "young-1", count=2, tags=gang_tags("young", 2))  # t=1
    await s.advance(1)
    await s.ask("app-1", "old-2", count=2, tags=gang_tags("old", 3, mode="NonStrict"))
    await s.ask("app-1", "hi", priority=5, tags=gang_tags("hi", 1))
    # Priority first, then the older gang (all its members, the late ones too), then the
    # younger: room for three members goes to hi and two of old's.
    await s.add_nodes("n1", memory=30, vcore=3)
    assert [sorted(a.allocation_key for a in n) for n in new_allocations(s)] == [["hi"]]
    tentative = [a["allocationKey"] for a in (await s.application("app-1"))["allocations"]]
    assert sorted(tentative) == ["hi", "old-1", "old-2"]
    assert (await gang_view(s, "app-1", "default/young"))["placed"] == 0


async def test_same_age_gangs_go_by_gang_id(s: Scenario) -> None:
    await s.submit("app-1")
    await s.send_asks(
        *(
            si.AllocationAsk(
                allocation_key=key,
                application_id="app-1",
                resource_ask=si.Resource.of(memory=10, vcore=1),
                tags=gang_tags(name, 2, mode="NonStrict"),
            )
            for key, name in (("k-b", "b"), ("k-a", "a"))
        )
    )
    await s.add_nodes("n1", memory=10, vcore=1)  # room for one member
    placed = [a["allocationKey"] for a in (await s.application("app-1"))["allocations"]]
    assert placed == ["k-a"]


# ================================================================================ deadlock
async def test_koordinators_example_three_non_strict_gangs_of_five_in_a_quota_of_ten(
    s: Scenario,
) -> None:
    """Quota 10, three NonStrict gangs of 5 whose members come late: they hold 3, 3 and 4
    and none can complete. The youngest gives way; all three complete, one after another,
    as resources free."""
    await s.add_nodes("n1", "n2")
    for i in (1, 2, 3):
        await s.submit(f"job-{i}", queue="root.small")  # max memory 100: ten members
    tags = {i: gang_tags(f"gang-{i}", 5, mode="NonStrict") for i in (1, 2, 3)}
    for i, first in ((1, 3), (2, 3), (3, 4)):
        await s.ask(f"job-{i}", f"j{i}-early", count=first, tags=tags[i])
        await s.advance(1)
    assert s.allocations() == []
    assert (await queue(s, "root.small"))["allocatedResource"]["memory"] == 100
    # The rest of every gang arrives: the quota is full, no gang can complete by itself.
    for i, rest in ((1, 2), (2, 2), (3, 1)):
        await s.ask(f"job-{i}", f"j{i}-late", count=rest, tags=tags[i])
    done = {a.application_id for a in s.allocations()}
    assert done == {"job-1", "job-2"}
    assert len(s.allocations("job-1")) == 5 and len(s.allocations("job-2")) == 5
    rolled = events(s, "GangRolledBack")
    assert rolled and all(e.group_id == "default/gang-3" for e in rolled)
    assert s.rm.rejected_asks == []
    # gang-3 gave its room back and waits; when job-1 finishes it completes.
    assert (await gang_view(s, "job-3", "default/gang-3"))["placed"] == 0
    await s.release(*s.allocations("job-1"))
    assert len(s.allocations("job-3")) == 5
    assert (await queue(s, "root.small"))["allocatedResource"]["memory"] == 100


async def test_no_deadlock_when_the_cluster_is_full(s: Scenario) -> None:
    await s.add_nodes("n1", memory=40, vcore=4)  # four members fit
    await s.submit("old")
    await s.advance(1)
    await s.submit("young")
    await s.ask("old", "o1", count=2, tags=gang_tags("old", 3, mode="NonStrict"))
    await s.advance(1)
    await s.ask("young", "y1", count=2, tags=gang_tags("young", 3, mode="NonStrict"))
    assert s.allocations() == []
    await s.ask("old", "o2", tags=gang_tags("old", 3, mode="NonStrict"))
    assert [a.allocation_key for a in s.allocations()] == ["o1", "o1", "o2"]
    # The young gang gave way; once the old one was bound it took the room that was left.
    assert (await gang_view(s, "young", "default/young"))["placed"] == 1
    assert [e.group_id for e in events(s, "GangRolledBack")] == ["default/young"]


async def test_an_older_gang_is_not_rolled_back_for_a_younger_one(s: Scenario) -> None:
    await s.add_nodes("n1", memory=40, vcore=4)
    await s.submit("app-1")
    await s.ask("app-1", "o", count=3, tags=gang_tags("old", 4, mode="NonStrict"))
    await s.advance(1)
    await s.ask("app-1", "y", count=2, tags=gang_tags("young", 2, mode="NonStrict"))
    # The young gang cannot place its second member; the old one keeps what it holds.
    assert (await gang_view(s, "app-1", "default/old"))["placed"] == 3
    assert s.allocations() == []
    assert not events(s, "GangRolledBack")


# ======================================================================== the rest of life
async def test_a_node_removed_under_tentative_members_makes_them_pending_again(
    s: Scenario,
) -> None:
    await s.add_nodes("n1", memory=20, vcore=2)
    await s.submit("app-1")
    await s.ask("app-1", "m", count=3, tags=gang_tags("g", 3, mode="NonStrict"))
    remove = si.NodeInfo(node_id="n1", action=si.ActionFromRM.DECOMISSION)
    await s.core.update_node(si.NodeRequest(rm_id=s.rm_id, nodes=[remove]))
    await s.core.settle()
    assert s.released() == []  # the RM never had them
    app = await s.application("app-1")
    assert app["allocations"] == [] and app["requests"][0]["pendingCount"] == 3
    await s.add_nodes("n2")
    assert [len(n) for n in new_allocations(s)] == [3]


async def test_withdrawing_a_member_frees_its_tentative_room(s: Scenario) -> None:
    await s.add_nodes("n1")
    await s.submit("app-1")
    await s.ask("app-1", "m1", count=2, tags=gang_tags("g", 3))
    release = si.AllocationAskRelease(
        application_id="app-1", allocation_key="m1", partition_name="default"
    )
    await s.core.update_allocation(
        si.AllocationRequest(
            rm_id=s.rm_id,
            releases=si.AllocationReleasesRequest(allocation_asks_to_release=[release]),
        )
    )
    await s.core.settle()
    assert (await queue(s, "root.default"))["allocatedResource"] == {}
    assert (await s.core.get_node("default", "n1"))["allocated"] == {}
    assert s.released() == []


async def test_removing_the_application_frees_its_tentative_members(s: Scenario) -> None:
    await s.add_nodes("n1")
    await s.submit("app-1")
    await s.ask("app-1", "m1", count=2, tags=gang_tags("g", 3))
    await s.remove("app-1")
    assert (await queue(s, "root.default"))["allocatedResource"] == {}
    assert (await s.core.get_node("default", "n1"))["allocated"] == {}
    assert s.released() == []
    assert await s.app_state("app-1") == "Completed"


async def test_a_release_of_a_tentative_uuid_changes_nothing(s: Scenario) -> None:
    await s.add_nodes("n1")
    await s.submit("app-1")
    await s.ask("app-1", "m1", tags=gang_tags("g", 2))
    uuid = (await s.application("app-1"))["allocations"][0]["uuid"]
    await s.release(si.Allocation(uuid=uuid, application_id="app-1"))
    assert s.released() == []
    assert (await gang_view(s, "app-1", "default/g"))["placed"] == 1


async def test_a_placeholder_gang_and_a_permit_gang_in_one_queue(s: Scenario) -> None:
    await s.add_nodes("n1", "n2")
    await s.submit_gang("ph-app", {"workers": 2})
    await s.submit("permit-app")
    await s.ask("permit-app", "p", count=2, tags=gang_tags("p", 2))
    assert len(s.allocations("ph-app", placeholder=True)) == 2
    assert len(s.allocations("permit-app")) == 2
    await s.ask("ph-app", "real", task_group="workers")
    await s.confirm_releases()
    assert len(s.allocations("ph-app", placeholder=False)) == 1


async def test_a_placeholder_application_cannot_have_permit_members(s: Scenario) -> None:
    await s.add_nodes("n1")
    await s.submit_gang("ph-app", {"workers": 1})
    await s.ask("ph-app", "x", tags=gang_tags("g", 1))
    [rejected] = s.rm.rejected_asks
    assert "placeholder gang scheduling" in rejected.reason and "default/g" in rejected.reason


# =============================================================================== bad tags
@pytest.mark.parametrize(
    ("tags", "named"),
    [
        ({ANN + "name": "g"}, ANN + "min-available"),
        ({ANN + "min-available": "2"}, ANN + "name"),
        ({ANN + "name": "g", ANN + "min-available": "two"}, ANN + "min-available"),
        ({ANN + "name": "g", ANN + "min-available": "0"}, ANN + "min-available"),
        (
            {ANN + "name": "g", ANN + "min-available": "1", ANN + "total-number": "x"},
            ANN + "total-number",
        ),
        (
            {ANN + "name": "g", ANN + "min-available": "1", ANN + "waiting-time": "10 minutes"},
            ANN + "waiting-time",
        ),
        (
            {ANN + "name": "g", ANN + "min-available": "1", ANN + "waiting-time": "-5s"},
            ANN + "waiting-time",
        ),
        ({ANN + "name": "g", ANN + "min-available": "1", ANN + "groups": "[1]"}, ANN + "groups"),
        (
            {ANN + "name": "g", ANN + "min-available": "1", ANN + "groups": '["nons"]'},
            ANN + "groups",
        ),
    ],
)
async def test_invalid_gang_tags_are_rejected_naming_the_tag(
    s: Scenario, tags: dict[str, str], named: str
) -> None:
    await s.add_nodes("n1")
    await s.submit("app-1")
    await s.ask("app-1", "bad", tags=tags)
    [rejected] = s.rm.rejected_asks
    assert rejected.allocation_key == "bad" and named in rejected.reason
    assert (await s.application("app-1"))["requests"] == []


async def test_a_member_that_disagrees_with_its_gang_is_rejected(s: Scenario) -> None:
    await s.add_nodes("n1", memory=10, vcore=1)
    await s.submit("app-1")
    await s.ask("app-1", "m1", tags=gang_tags("g", 2))
    await s.ask("app-1", "m2", tags=gang_tags("g", 3))
    [rejected] = s.rm.rejected_asks
    assert rejected.allocation_key == "m2" and "min-available" in rejected.reason
    await s.ask("app-1", "m3", tags=gang_tags("h", 1, groups=["default/h", "default/g"]))
    assert "conflicts with GangGroup" in s.rm.rejected_asks[-1].reason


async def test_scheduler_plugins_pod_group_labels(s: Scenario) -> None:
    await s.add_nodes("n1")
    await s.submit("app-1")
    label = "kubernetes.io/label/pod-group.scheduling.sigs.k8s.io"
    for key, tags in (
        ("m1", {label: "pg", label + "/min-available": "2"}),
        (
            "m2",
            {
                label + "/name": "pg",
                "kubernetes.io/annotation/pod-group.scheduling.sigs.k8s.io/min-available": "2",
            },
        ),
    ):
        await s.ask("app-1", key, tags=tags)
    assert [sorted(a.allocation_key for a in n) for n in new_allocations(s)] == [["m1", "m2"]]
    assert (await gang_view(s, "app-1", "default/pg"))["minAvailable"] == 2


async def test_groups_that_gave_way_do_not_take_turns_grabbing_the_room(s: Scenario) -> None:
    """The old gang needs the room of both younger ones, whose applications come first in
    fifo order. Rolling back one young gang must not let the other, rolled back before,
    take the room again: the core would never settle."""
    await s.add_nodes("n1", memory=60, vcore=6)  # six members fit
    for app_id in ("y1", "y2", "o"):  # fifo: the young gangs' applications go first
        await s.submit(app_id)
    await s.ask("o", "o-early", tags=gang_tags("old", 5, mode="NonStrict"))  # the oldest gang, t=0
    await s.advance(1)
    await s.ask("y1", "y1", count=2, tags=gang_tags("young-1", 3, mode="NonStrict"))
    await s.advance(1)
    await s.ask("y2", "y2", count=3, tags=gang_tags("young-2", 4, mode="NonStrict"))
    assert s.allocations() == []
    async with asyncio.timeout(20):  # a watchdog: a livelock would never settle
        await s.ask("o", "o-late", count=4, tags=gang_tags("old", 5, mode="NonStrict"))
    assert len(s.allocations("o")) == 5
    rolled = [e.group_id for e in events(s, "GangRolledBack")]
    assert rolled[:2] == ["default/young-2", "default/young-1"]
    assert (await queue(s, "root.default"))["allocatedResource"]["memory"] <= 60


# ============================================================== an RM that checks predicates
class Choosy(RecordingCallback):
    """Refuses the (allocation key, node) pairs in ``refused``."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: set[tuple[str, str]] = set()

    async def predicates(self, args: si.PredicatesArgs) -> bool:
        return (args.allocation_key, args.node_id) not in self.refused


async def test_members_are_put_to_the_rms_predicates() -> None:
    rm = Choosy()
    rm.refused = {("m2", "n1")}
    async with start_scenario(QUEUES, rm=rm) as s:
        await s.add_nodes("n1", "n2")
        await s.submit("app-1")
        await s.ask("app-1", "m1", tags=gang_tags("g", 2))
        await s.ask("app-1", "m2", tags=gang_tags("g", 2))
        [new] = new_allocations(s)
        assert {a.allocation_key: a.node_id for a in new}["m2"] == "n2"
        assert len(new) == 2


async def test_a_strict_member_every_node_refuses_rolls_the_group_back() -> None:
    rm = Choosy()
    rm.refused = {("m2", "n1"), ("m2", "n2")}
    async with start_scenario(QUEUES, rm=rm) as s:
        await s.add_nodes("n1", "n2")
        await s.submit("app-1")
        await s.ask("app-1", "m1", tags=gang_tags("g", 2))
        await s.ask("app-1", "m2", tags=gang_tags("g", 2))
        assert s.allocations() == []
        assert len(events(s, "GangRolledBack")) == 1
        assert (await queue(s, "root.default"))["allocatedResource"] == {}
        rm.refused = set()
        await s.add_nodes("n3")  # a change: the group goes again
        assert len(s.allocations()) == 2


async def test_a_strict_member_that_fits_nowhere_is_reported_once_per_change(s: Scenario) -> None:
    await s.add_nodes("n1", memory=5, vcore=1)  # too small for any member
    await s.submit("app-1")
    await s.ask("app-1", "m", count=2, tags=gang_tags("g", 2))
    [event] = events(s, "GangRolledBack")
    assert "member m of application app-1 cannot be placed" in event.message
    assert "0 tentative member(s)" in event.message
    await s.submit("app-2")
    await s.ask("app-2", "x", memory=1, vcore=1)  # not a change of the cluster
    assert len(events(s, "GangRolledBack")) == 1
    await s.add_nodes("n2", memory=5, vcore=1)  # a change, still too small
    assert len(events(s, "GangRolledBack")) == 2


async def test_a_timed_out_gang_is_forgotten_after_three_days(s: Scenario) -> None:
    await s.add_nodes("n1")
    await s.submit("app-1")
    await s.ask("app-1", "m1", tags=gang_tags("g", 2, waiting_time="1m"))
    await s.advance(60)  # the group times out at t=60
    await s.advance(3 * 24 * 3600 - 1)
    await s.submit("app-2")
    await s.ask("app-2", "m2", tags=gang_tags("g", 2, waiting_time="1m"))
    reasons = {r.allocation_key: r.reason for r in s.rm.rejected_asks}
    assert set(reasons) == {"m1", "m2"} and "timeout" in reasons["m2"]
    await s.advance(2)  # three days since the timeout: a new gang of the same id
    await s.submit("app-3")
    await s.ask("app-3", "m3", count=2, tags=gang_tags("g", 2, waiting_time="1m"))
    assert {r.allocation_key for r in s.rm.rejected_asks} == {"m1", "m2"}
    assert [a.allocation_key for a in s.allocations()] == ["m3", "m3"]


async def test_a_satisfied_gang_stays_satisfied_after_its_application_completed(
    s: Scenario,
) -> None:
    await s.add_nodes("n1")
    await s.submit("first")
    await s.ask("first", "a", count=2, tags=gang_tags("g", 2))
    await s.release(*s.allocations("first"))
    await s.remove("first")  # done: the gang's only application is gone
    await s.advance(60)
    await s.submit("second")
    await s.ask("second", "b", tags=gang_tags("g", 2))  # a late member: a normal ask
    assert [a.allocation_key for a in new_allocations(s)[-1]] == ["b"]
    view = await gang_view(s, "second", "default/g")
    assert view["satisfied"] and view["bound"] == 3


async def test_forgotten_gangs_are_freed_at_once_not_by_the_cyclic_collector(
    s: Scenario,
) -> None:
    # The soak found thousands of forgotten gangs and groups alive, each pointing at the
    # other, until the collector's next full collection (minutes away under tune_gc).
    def alive(gang_id: str) -> list[object]:
        return [
            o
            for o in gc.get_objects()
            if type(o).__name__ in ("Gang", "GangGroup") and gang_id in repr(o)
        ]

    await s.add_nodes("n1")
    gc.collect()
    gc.disable()
    try:
        await s.submit("done")
        await s.ask("done", "a", count=2, tags=gang_tags("g-done", 2))  # satisfied
        await s.submit("late")
        await s.ask("late", "b", tags=gang_tags("g-late", 2, waiting_time="1m"))
        await s.advance(60)  # g-late times out
        await s.release(*s.allocations("done"))
        await s.remove("done")  # g-done is kept idle, for a late member
        assert alive("g-done") and alive("g-late")
        await s.advance(3 * 24 * 3600 + 1)
        await s.submit("next")
        await s.ask("next", "c", count=2, tags=gang_tags("g-next", 2))
        await s.release(*s.allocations("next"))
        await s.remove("next")  # another idle gang: the three-day-old ones are forgotten
        assert not alive("g-done") and not alive("g-late")
    finally:
        gc.enable()
