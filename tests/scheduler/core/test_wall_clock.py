"""Timestamps are wall-clock Unix nanoseconds, as YuniKorn's are (``time.Now().UnixNano()``),
while timeouts keep to the core's monotonic clock: events, application submission and
state times, allocation times, RM states and the state dump."""

from __future__ import annotations

import time

import pytest

import scheduler
from actors import ManualClock, SystemClock, wall_ns
from scheduler.testing import RecordingCallback, Scenario

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
"""
EPOCH = 1_700_000_000  # 2023-11-14, in Unix seconds


def test_a_system_clock_reading_maps_to_unix_time() -> None:
    clock = SystemClock()
    before = time.time_ns()
    stamp = wall_ns(clock, clock.now())
    after = time.time_ns()
    assert before - 1_000_000 <= stamp <= after + 1_000_000  # within a millisecond


def test_a_manual_clock_stamps_its_epoch_plus_its_reading() -> None:
    assert wall_ns(ManualClock(), 5.0) == 5 * 10**9  # no epoch: the reading itself
    assert wall_ns(ManualClock(epoch=EPOCH), 2.5) == EPOCH * 10**9 + 2_500_000_000

    class Plain:  # a clock with only now()
        def now(self) -> float:
            return 0.0

    assert wall_ns(Plain(), 3.0) == 3 * 10**9


@pytest.mark.asyncio
async def test_a_core_on_the_system_clock_stamps_unix_time() -> None:
    before = time.time_ns()
    async with scheduler.start_scheduler() as core:
        s = Scenario(core, ManualClock(), RecordingCallback())  # the core's clock is real
        await s.register(QUEUES)
        await s.add_nodes("n1")
        await s.submit("app", queue="root.a")
        await s.ask("app", count=1, memory=10, vcore=1)
        app = await s.application("app")
        dump = await core.state_dump()
        [rm] = await core.get_resource_managers()
    after = time.time_ns()
    stamps = [e.timestamp_nano for e in s.rm.events]
    stamps += [app["submissionTime"], app["allocations"][0]["allocationTime"]]
    stamps += [entry["time"] for entry in app["stateLog"]]
    stamps += [dump["timestamp"], rm["since"]]
    assert stamps and all(before <= t <= after for t in stamps), (before, stamps, after)


@pytest.mark.asyncio
async def test_a_manual_clock_with_an_epoch_moves_every_timestamp_exactly() -> None:
    clock = ManualClock(epoch=EPOCH)
    async with scheduler.start_scheduler(clock=clock) as core:
        s = Scenario(core, clock)
        await s.register(QUEUES)
        await s.advance(2)
        await s.add_nodes("n1")
        await s.submit("app", queue="root.a")
        await s.advance(3)
        await s.ask("app", count=1, memory=10, vcore=1)
        app = await s.application("app")
        assert app["submissionTime"] == (EPOCH + 2) * 10**9
        [alloc] = app["allocations"]
        assert alloc["requestTime"] == alloc["allocationTime"] == (EPOCH + 5) * 10**9
        assert alloc["allocationDelay"] == 0  # a duration, not a time
        assert {e.timestamp_nano for e in s.rm.events} <= {
            (EPOCH + 2) * 10**9,
            (EPOCH + 5) * 10**9,
        }
        assert (await core.state_dump())["timestamp"] == (EPOCH + 5) * 10**9
        [rm] = await core.get_resource_managers()
        assert rm["since"] == EPOCH * 10**9

        # a timeout still counts on the clock's reading, whatever its epoch
        assert core.rm_disconnected("rm-1")
        [rm] = await core.get_resource_managers()
        assert rm["stopsAt"] == (EPOCH + 5 + core.timeouts.rm_paused) * 10**9
        await s.advance(core.timeouts.rm_paused - 0.1)
        assert (await core.get_resource_managers())[0]["state"] == "Paused"
        await s.advance(0.2)
        assert (await core.get_resource_managers())[0]["state"] == "Stopped"
