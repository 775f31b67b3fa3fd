"""An RM's scenarios against the scheduler core, with the package's pytest plugin."""

from __future__ import annotations

import pytest

from scheduler import si
from scheduler.testing import Scenario, start_scenario

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: default
          - name: batch
            resources:
              max: {memory: 40, vcore: 4}
"""


@pytest.mark.asyncio
@pytest.mark.scheduler_config(QUEUES)
async def test_the_queue_quota_caps_a_job(scheduler_scenario: Scenario) -> None:
    s = scheduler_scenario
    await s.add_nodes("n1", "n2", memory=100, vcore=10)
    await s.submit("job-1", queue="root.batch", user="alice")
    await s.ask("job-1", count=6, memory=10, vcore=1)
    first, second, *_ = s.assert_allocated("job-1", 4)  # root.batch holds four
    await s.release(first, second)  # two containers finished
    s.assert_allocated("job-1", 4)  # the last two asks took their room


@pytest.mark.asyncio
@pytest.mark.scheduler_config(QUEUES)
async def test_a_gang_replaces_its_placeholders(scheduler_scenario: Scenario) -> None:
    s = scheduler_scenario
    await s.add_nodes("n1", "n2")
    await s.submit_gang("spark", {"driver": 1, "executors": 2})
    placeholders = s.assert_allocated("spark", 3, placeholder=True)
    await s.ask("spark", "driver", task_group="driver")
    await s.ask("spark", "executor", count=2, task_group="executors")
    s.assert_allocated("spark", 0)  # the core waits for the RM to confirm the releases
    await s.confirm_releases()
    real = s.assert_allocated("spark", 3)  # on the placeholders' nodes
    assert sorted(a.node_id for a in real) == sorted(p.node_id for p in placeholders)
    assert await s.app_state("spark") == "Running"


@pytest.mark.asyncio
@pytest.mark.scheduler_config(QUEUES)
async def test_unused_placeholders_time_out(scheduler_scenario: Scenario) -> None:
    s = scheduler_scenario
    await s.add_nodes("n1")
    await s.submit_gang("spark", {"executors": 2}, timeout=60)
    await s.advance(59)
    assert s.released() == []
    await s.advance(1)  # the manual clock: no sleeping
    assert len(s.released(si.TerminationType.TIMEOUT)) == 2
    await s.confirm_releases()
    assert s.allocations("spark") == []


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.scheduler_config(QUEUES)
async def test_under_anyio(scheduler_scenario: Scenario) -> None:
    await scheduler_scenario.add_nodes("n1")
    await scheduler_scenario.submit("job-1")
    await scheduler_scenario.ask("job-1")
    scheduler_scenario.assert_allocated("job-1", 1)


@pytest.mark.asyncio
async def test_without_the_fixtures() -> None:
    async with start_scenario(QUEUES) as s:
        await s.add_nodes("n1")
        await s.submit("job-1", queue="root.batch")
        await s.ask("job-1", count=2)
        s.assert_allocated("job-1", 2)
