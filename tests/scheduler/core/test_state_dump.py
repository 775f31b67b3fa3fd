"""A state dump (what /ws/v1/metrics reads at each scrape) while RMs come and go."""

from __future__ import annotations

import asyncio

import pytest

import scheduler
from scheduler.testing import ManualClock, Scenario

from .test_ended_apps import QUEUES

pytestmark = pytest.mark.asyncio


async def test_a_state_dump_skips_the_partitions_of_an_rm_that_stops_meanwhile() -> None:
    # the soak's metrics scrape (a summary dump) failed with a 500 when an RM was Stopped
    # (or registered again) while the dump asked the partitions one after the other
    clock = ManualClock()
    async with scheduler.start_scheduler(clock=clock) as core:
        first, second = Scenario(core, clock, rm_id="rm-a"), Scenario(core, clock, rm_id="rm-b")
        await first.register(QUEUES)
        await second.register(QUEUES.replace("name: default", "name: other"))
        dump = asyncio.create_task(core.state_dump(detail=False))
        await asyncio.sleep(0)  # it asks rm-a's partition
        await core.stop_resource_manager("rm-b")
        names = [p["partition"]["name"] for p in (await dump)["partitions"]]
        assert names == ["default"]
