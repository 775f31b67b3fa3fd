"""The totals the web UI's dashboard charts over time: running applications and containers,
sampled on the core's clock into a bounded ring (``GET /ws/v1/history/apps`` and
``/ws/v1/history/containers``).

YuniKorn keeps them the same way (``pkg/metrics/history/internal_metrics.go``, fed by
``pkg/metrics/metrics_collector.go``): one sample a minute, the newest 1440 kept (a day;
``metricsHistorySize`` in ``pkg/entrypoint``), each the applications in state Running and
the allocations held. ``HistoryCollector`` is an actor that samples whether or not anyone
reads the history: a timer on the core's clock wakes it, so ``ManualClock.advance`` drives
it in a test. It asks the partitions as the REST API does, in their turns.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Final

import msgspec

from actors import Actor, ActorRef, ActorSystem
from scheduler._errors import SchedulerError

__all__ = [
    "DEFAULT_HISTORY_INTERVAL",
    "DEFAULT_HISTORY_SIZE",
    "HistoryCollector",
    "HistoryRecord",
    "MetricsHistory",
]

#: Seconds between two samples (YuniKorn's ``NewInternalMetricsCollector``: a minute).
DEFAULT_HISTORY_INTERVAL: Final = 60.0
#: Samples kept (YuniKorn's ``metricsHistorySize``: a day of minutes).
DEFAULT_HISTORY_SIZE: Final = 1440


class HistoryRecord(msgspec.Struct, frozen=True):
    """One sample: when (Unix nanoseconds of the core's clock), the applications in state
    Running and the allocations held, over every partition."""

    timestamp: int
    applications: int
    containers: int


class MetricsHistory:
    """The newest ``capacity`` samples, oldest first. Read it; its collector writes it."""

    def __init__(self, capacity: int = DEFAULT_HISTORY_SIZE) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise SchedulerError(f"history capacity must be a positive integer, got {capacity!r}")
        self.capacity = capacity
        self._records: deque[HistoryRecord] = deque(maxlen=capacity)

    def store(self, record: HistoryRecord) -> None:
        """Keep ``record``; the oldest goes once ``capacity`` are kept."""
        self._records.append(record)

    def records(self) -> list[HistoryRecord]:
        """The samples kept, oldest first."""
        return list(self._records)

    def applications(self) -> list[dict[str, Any]]:
        """YuniKorn's ``ApplicationHistoryDAOInfo`` list: ``timestamp`` and
        ``totalApplications`` (a decimal string, as YuniKorn writes it)."""
        return [
            {"timestamp": r.timestamp, "totalApplications": str(r.applications)}
            for r in self._records
        ]

    def containers(self) -> list[dict[str, Any]]:
        """YuniKorn's ``ContainerHistoryDAOInfo`` list: ``timestamp`` and
        ``totalContainers`` (a decimal string)."""
        return [
            {"timestamp": r.timestamp, "totalContainers": str(r.containers)} for r in self._records
        ]

    def __len__(self) -> int:
        return len(self._records)

    def __repr__(self) -> str:
        return f"<MetricsHistory {len(self._records)}/{self.capacity}>"


class _Tick:
    """Time for the next sample."""


# What the collector reads: every partition as ``Core.get_partitions`` shows it.
Partitions = Callable[[], Awaitable[list[dict[str, Any]]]]


class HistoryCollector(Actor):
    """Samples the partitions every ``interval`` seconds of the core's clock into
    ``history``; the first sample comes one interval after it starts, as YuniKorn's ticker
    gives it."""

    def __init__(
        self, history: MetricsHistory, partitions: Partitions, wall: Callable[[float], int]
    ) -> None:
        self.history = history
        self.partitions = partitions
        self.wall = wall
        self.interval = DEFAULT_HISTORY_INTERVAL

    def start(self, system: ActorSystem) -> ActorRef:
        """Spawn the collector on ``system`` with its first sample due one interval from
        now (armed here, not when the actor first runs: the clock may move before)."""
        ref = system.spawn(self, name="core/history")
        system.timers.after(self.interval, _Tick(), to=ref)
        return ref

    def _arm(self) -> None:
        self.actor_system.timers.after(self.interval, _Tick(), to=self.actor_ref)

    async def receive(self, message: object) -> object:
        if not isinstance(message, _Tick):
            raise SchedulerError(f"unexpected message {type(message).__name__}")
        self._arm()  # before the await: the period does not drift by the sampling time
        when = self.wall(self.actor_system.clock.now())
        try:
            parts = await self.partitions()
        except SchedulerError as exc:  # a partition stopped while it was asked
            self.log.debug("history sample skipped: {}", exc)
            return None
        running = sum(p["applications"].get("Running", 0) for p in parts)
        containers = sum(p["totalContainers"] for p in parts)
        self.history.store(HistoryRecord(when, running, containers))
        return None
