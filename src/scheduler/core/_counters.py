"""A partition's counters for YuniKorn's counter metrics (allocation attempts by state,
application submissions by result, failed and decommissioned nodes, the scheduling,
try-node, node, queue and application sorting and try-preemption latency histograms),
kept in the partition actor per pass, per outbox flush and per node update, never per
allocation (a pass's allocations are observed at its mean time per allocation, its
sorts of queues and applications once per pass). ``scheduler.daemon._metrics``
turns them into Prometheus families; this module needs no Prometheus client, so the core
does not import one.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable
from typing import Any, Final

__all__ = ["ATTEMPTS", "LATENCY_BUCKETS", "SUBMISSIONS", "Latency", "SchedulingCounters"]

# YuniKorn's ``scheduling_latency_milliseconds`` buckets: ExponentialBuckets(0.0001, 10, 6),
# observed in seconds as YuniKorn does despite the name.
LATENCY_BUCKETS: Final = (0.0001, 0.001, 0.01, 0.1, 1.0, 10.0)
ATTEMPTS: Final = ("allocated", "rejected", "error", "released")
SUBMISSIONS: Final = ("accepted", "rejected")


class Latency:
    """One latency histogram: observations per bucket of ``LATENCY_BUCKETS`` (the last is
    +Inf) and their sum, in seconds."""

    __slots__ = ("buckets", "total")

    def __init__(self) -> None:
        self.buckets = [0] * (len(LATENCY_BUCKETS) + 1)
        self.total = 0.0

    def observe(self, seconds: float, count: int = 1) -> None:
        """``count`` observations that took ``seconds`` together, each at the mean."""
        self.buckets[bisect_left(LATENCY_BUCKETS, seconds / count)] += count
        self.total += seconds

    def info(self) -> dict[str, Any]:
        return {"buckets": list(self.buckets), "sum": self.total}


class SchedulingCounters:
    """A partition's counters since it started: allocation attempts by state, application
    submissions by result, and how long its scheduling passes and its preemption rounds
    took (core's clock). ``try_node``: how long each allocation took from trying its node
    to having it allocated (YuniKorn's ``trynode_latency``, observed only for a node that
    took the ask, as YuniKorn does): in a pass, its time per allocation; with an RM that
    checks predicates, each one, its answer included; per bucket of ``LATENCY_BUCKETS``,
    the last +Inf. ``node_sorting``: how long each sort
    of all the nodes took (YuniKorn v1.2's ``node_sorting_latency{level="node"}``): the
    pass sorts them only when an ask may reserve one, once per size and pass, by how close
    each comes to holding it. ``queue_sorting`` and ``app_sorting`` (v1.2's
    ``level="queue"`` and ``level="app"``): each pass's first walk down the tree (a
    parent's children, a leaf's applications, as the pass meets them first), timed as
    the pass starts, each level at its mean (``Scheduler.time_sorts``). ``failed_nodes``:
    new nodes refused because the allocations the RM reported on them could not be
    recovered (YuniKorn v1.2's ``partition.addNode``);
    ``decommissioned_nodes``: nodes the RM decommissioned (``DECOMISSION``, YuniKorn's
    ``updateNode``). YuniKorn never lowers either. ``events_created``: the events the
    partition made for the RM (YuniKorn's ``IncEventsCreated``), counted per flush."""

    __slots__ = (
        "app_sorting",
        "attempts",
        "decommissioned_nodes",
        "events_created",
        "failed_nodes",
        "latency",
        "node_sorting",
        "preemption_latency",
        "queue_sorting",
        "submissions",
        "try_node",
    )

    def __init__(self) -> None:
        self.attempts = dict.fromkeys(ATTEMPTS, 0)
        self.submissions = dict.fromkeys(SUBMISSIONS, 0)
        self.failed_nodes = 0
        self.decommissioned_nodes = 0
        self.events_created = 0
        self.latency = Latency()
        self.preemption_latency = Latency()
        self.try_node = Latency()
        self.node_sorting = Latency()
        self.queue_sorting = Latency()
        self.app_sorting = Latency()

    def observe_pass(self, seconds: float) -> None:
        """One scheduling pass took ``seconds``."""
        self.latency.observe(seconds)

    def observe_preemption(self, seconds: float) -> None:
        """One preemption round took ``seconds`` (YuniKorn's ``trypreemption_latency``)."""
        self.preemption_latency.observe(seconds)

    def observe_try_node(self, seconds: float, count: int = 1) -> None:
        """``count`` nodes took an ask in ``seconds`` together (YuniKorn's
        ``trynode_latency``): each is observed at the mean, ``seconds / count``. A pass
        without predicates reports its allocations this way, timed by the clock reads
        that time the pass, so it reads no clock per allocation (two reads per
        allocation cost 3.9% of its instructions); an RM's predicates time each one."""
        self.try_node.observe(seconds, count)

    def observe_node_sorting(self, seconds: float) -> None:
        """One sort of all the nodes took ``seconds``."""
        self.node_sorting.observe(seconds)

    def observe_queue_sorting(self, seconds: float, count: int) -> None:
        """``count`` parents sorted their children in ``seconds`` together (YuniKorn's
        ``level="queue"``): each is observed at the mean."""
        self.queue_sorting.observe(seconds, count)

    def observe_app_sorting(self, seconds: float, count: int = 1) -> None:
        """``count`` leaves sorted their applications in ``seconds`` together (YuniKorn's
        ``level="app"``): each is observed at the mean."""
        self.app_sorting.observe(seconds, count)

    def count_flush(self, entries: Iterable[tuple[str, object]], events: int = 0) -> None:
        """What one flush of the outbox tells the RM, counted by field in one go, so the
        pass itself counts nothing per allocation: its ``entries`` and ``events`` events.
        An allocation counts when the RM hears of it (a permit gang's member held back
        counts when the gang lets it go)."""
        self.events_created += events
        fields = Counter(field for field, _item in entries)
        self.attempts["allocated"] += fields["new"]
        self.attempts["rejected"] += fields["rejected"]
        self.attempts["released"] += fields["released"]
        self.submissions["accepted"] += fields["app_accepted"]
        self.submissions["rejected"] += fields["app_rejected"]

    def info(self) -> dict[str, Any]:
        """The counters as the state dump shows them (``schedulerMetrics``)."""
        return {
            "containerAllocationAttempts": dict(self.attempts),
            "failedNodes": self.failed_nodes,
            "decommissionedNodes": self.decommissioned_nodes,
            "eventsCreated": self.events_created,
            "applicationSubmissions": dict(self.submissions),
            "schedulingLatency": self.latency.info(),
            "tryNodeLatency": self.try_node.info(),
            "nodeSortingLatency": self.node_sorting.info(),
            "queueSortingLatency": self.queue_sorting.info(),
            "appSortingLatency": self.app_sorting.info(),
            "tryPreemptionLatency": self.preemption_latency.info(),
        }
