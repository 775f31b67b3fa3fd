"""What an ended application leaves behind stays bounded (found by the soak, bench/soak.py:
a churning RM grew the daemon's heap by each Completed application and its actor).

A partition keeps at most ``Timeouts.terminated_kept`` terminated applications (the oldest
expires early, not after ``Timeouts.terminated``: three days), and no timer of an ended
application keeps its actor waiting."""

from __future__ import annotations

import gc

import pytest

import scheduler
from scheduler.testing import ManualClock, Scenario, gang_tags

pytestmark = pytest.mark.asyncio

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
"""


async def test_the_oldest_terminated_application_expires_early_beyond_the_limit() -> None:
    clock = ManualClock()
    timeouts = scheduler.Timeouts()
    timeouts.terminated_kept = 3
    async with scheduler.start_scheduler(clock=clock, timeouts=timeouts) as core:
        s = Scenario(core, clock)
        await s.register(QUEUES)
        await s.add_nodes("n1")
        actors = len(core.system.stats())
        for i in range(5):
            await s.submit(f"app-{i}", queue="root.a")
            await s.ask(f"app-{i}")
            await s.release(*s.allocations(f"app-{i}"))
            await s.remove(f"app-{i}")
        await s.advance(timeouts.completing)
        for i in range(2):  # the two oldest are gone, as three days later
            assert s.app_states(f"app-{i}")[-2:] == ["Completed", "Expired"]
            with pytest.raises(scheduler.NotFoundError):
                await s.application(f"app-{i}")
        for i in range(2, 5):
            assert await s.app_state(f"app-{i}") == "Completed"
        assert len(core.system.stats()) == actors + 3  # the expired ones' actors stopped
        # a rejected application counts as terminated too: app-2 makes room for it
        await s.submit("bad", queue="root.nope")
        assert s.app_states("app-2")[-1] == "Expired"
        assert await s.app_state("bad") == "Rejected"
        # the timer still expires the rest at the end of Timeouts.terminated
        await s.advance(timeouts.terminated)
        for app_id in ("app-3", "app-4", "bad"):
            with pytest.raises(scheduler.NotFoundError):
                await s.application(app_id)
        assert len(core.system.stats()) == actors


async def test_a_completed_gang_leaves_no_handshake_timer() -> None:
    clock = ManualClock()
    async with scheduler.start_scheduler(clock=clock) as core:
        s = Scenario(core, clock)
        await s.register(QUEUES)
        await s.add_nodes("n1")
        await s.submit_gang("gang", {"w": 2}, queue="root.a")
        assert len(s.allocations("gang", placeholder=True)) == 2
        await s.ask("gang", count=2, task_group="w")
        assert len(await s.confirm_releases()) == 2
        await s.release(*s.assert_allocated("gang", 2))
        await s.remove("gang")
        await s.advance(scheduler.Timeouts.completing)
        assert await s.app_state("gang") == "Completed"
        pending = [
            type(h.message).__name__ for _, _, h in core.system.timers._heap if not h.cancelled
        ]
        assert "HandshakesDue" not in pending, pending  # it held the actor for 60s


async def test_satisfied_permit_gangs_of_ended_applications_are_kept_up_to_the_limit() -> None:
    clock = ManualClock()
    timeouts = scheduler.Timeouts()
    timeouts.terminated_kept = 2
    async with scheduler.start_scheduler(clock=clock, timeouts=timeouts) as core:
        s = Scenario(core, clock)
        await s.register(QUEUES)
        await s.add_nodes("n1")
        for i in range(5):  # a gang of its own per application, as an RM names them
            await s.submit(f"app-{i}", queue="root.a")
            await s.ask(f"app-{i}", count=2, tags=gang_tags(f"g{i}", 2))
            await s.release(*s.assert_allocated(f"app-{i}", 2))
            await s.remove(f"app-{i}")
        permits = core._registrations["rm-1"].actors["default"].partition.permits
        assert sorted(permits.gangs) == ["default/g3", "default/g4"]  # they stayed forever
        assert len(permits.groups) == 2


async def test_a_stopped_rms_state_is_freed_at_once_not_by_the_cyclic_collector() -> None:
    # The soak found each Stopped RM's applications, asks, allocations, nodes and gangs
    # alive until the collector's next full collection (minutes apart under tune_gc): the
    # partition's state refers to itself, and its helpers to it. Only its empty skeleton
    # (the partition and its queues) may wait for the collector.
    def alive() -> dict[str, int]:
        names = ("Application", "ApplicationActor", "PendingAsks", "Node", "Gang", "GangGroup")
        found = [type(o).__name__ for o in gc.get_objects() if type(o).__name__ in names]
        return {name: found.count(name) for name in names if found.count(name)}

    gc.collect()
    baseline = alive()  # what earlier tests left behind
    clock = ManualClock()
    async with scheduler.start_scheduler(clock=clock) as core:
        s = Scenario(core, clock)
        await s.register(QUEUES)
        await s.add_nodes("n1", "n2")
        await s.submit("plain", queue="root.a")
        await s.ask("plain", count=3)
        await s.submit("permit", queue="root.a")
        await s.ask("permit", count=2, tags=gang_tags("g", 2))
        await s.submit("ended", queue="root.a")
        await s.ask("ended")
        await s.release(*s.allocations("ended"))
        await s.remove("ended")
        await s.submit_gang("gang", {"w": 2}, queue="root.a")
        await s.ask("gang", count=1, task_group="w")
        await s.submit("waiting", queue="root.a")
        await s.ask("waiting", "late", tags=gang_tags("g-late", 2, waiting_time="1m"))
        await core.settle()
        gc.collect()
        gc.disable()
        try:
            held = {k: n - baseline.get(k, 0) for k, n in alive().items()}
            assert held["Application"] == 5 and held["Node"] == 2, held
            assert held["Gang"] == 2 and held["GangGroup"] == 2, held
            await core.stop_resource_manager("rm-1")
            await core.settle()
            assert alive() == baseline
        finally:
            gc.enable()
