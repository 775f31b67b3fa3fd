"""The core's history of running applications and containers (scheduler.core._history),
sampled on the core's clock as YuniKorn's internalMetricsCollector samples it
(pkg/metrics/metrics_collector.go: once a minute; pkg/metrics/history: a bounded ring)."""

from __future__ import annotations

import pytest

import scheduler
from scheduler.core._history import HistoryRecord, MetricsHistory
from scheduler.testing import ManualClock, start_scenario


@pytest.mark.asyncio
async def test_samples_come_once_a_minute_of_the_core_clock_with_no_reader() -> None:
    clock = ManualClock(epoch=1_000)
    async with start_scenario(clock=clock) as s:
        await s.add_nodes("n1")
        await s.submit("app", tags={"namespace": "default"})  # the built-in default's rule
        await s.ask("app", count=2)
        core = s.core
        assert isinstance(core, scheduler.Core)
        await clock.advance(59.9)
        assert core.history.records() == []
        await clock.advance(0.1)
        await s.remove("app")
        await s.confirm_releases()
        await clock.advance(60)
        assert core.history.records() == [
            HistoryRecord(timestamp=clock.wall_ns(60), applications=1, containers=2),
            HistoryRecord(timestamp=clock.wall_ns(120), applications=0, containers=0),
        ]


@pytest.mark.asyncio
async def test_samples_go_on_after_the_rm_stops() -> None:
    """An RM that stops between two samples leaves later samples at zero, not missing."""
    clock = ManualClock()
    async with start_scenario(clock=clock) as s:
        await s.add_nodes("n1")
        core = s.core
        assert isinstance(core, scheduler.Core)
        await clock.advance(60)
        await core.stop_resource_manager(s.rm_id)
        await clock.advance(60)
        assert [r.timestamp for r in core.history.records()] == [60 * 10**9, 120 * 10**9]
        assert core.history.records()[-1] == HistoryRecord(120 * 10**9, 0, 0)


def test_the_ring_keeps_the_newest() -> None:
    ring = MetricsHistory(2)
    for t in range(3):
        ring.store(HistoryRecord(t, t, 10 * t))
    assert ring.records() == [HistoryRecord(1, 1, 10), HistoryRecord(2, 2, 20)]
    assert ring.applications() == [
        {"timestamp": 1, "totalApplications": "1"},
        {"timestamp": 2, "totalApplications": "2"},
    ]
    assert ring.containers()[-1] == {"timestamp": 2, "totalContainers": "20"}
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(scheduler.SchedulerError):
            MetricsHistory(bad)  # type: ignore[arg-type]
