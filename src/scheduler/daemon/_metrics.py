"""``/ws/v1/metrics``: the core's state as Prometheus metrics, named as YuniKorn v1.2 names
them (``pkg/metrics``), the queues under v1.8's names too, computed from a state dump at
each scrape; beside them the process and Python runtime collectors of prometheus_client."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Final

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from scheduler.core import (
    ATTEMPTS,
    LATENCY_BUCKETS,
    SUBMISSIONS,
    AppState,
    Core,
    SchedulingCounters,
)
from scheduler.daemon._health import Dump, each_app, each_node, partition_name, walk_queue

__all__ = [
    "LATENCY_BUCKETS",
    "CoreCollector",
    "SchedulingCounters",
    "actor_kind",
    "event_families",
    "metric_families",
    "metric_name",
    "metrics_registry",
]

# YuniKorn v1.2's names (pkg/metrics): namespace ``yunikorn``; scheduler metrics under the
# subsystem ``scheduler``; each queue's metrics under its path as the subsystem
# (``yunikorn_root_default_queue_app``). Most are gauges of the state at the scrape; the
# counters of allocation attempts and submissions and the latency histograms come from each
# partition's ``SchedulingCounters``, counted per pass and per flush, never per allocation.
# YuniKorn v1.8 counts nothing of preemption but the try-preemption latency and the queues'
# ``preempting`` resource; the ``yunikorn_scheduler_preemption_*`` families are ours, read
# from each partition's ``preemptions`` (its totals, and those in flight).

_USAGE_BUCKETS: Final = (
    "[0,10%]",
    "(10%, 20%]",
    "(20%,30%]",
    "(30%,40%]",
    "(40%,50%]",
    "(50%,60%]",
    "(60%,70%]",
    "(70%,80%]",
    "(80%,90%]",
    "(90%,100%]",
)


class CoreCollector:
    """Prometheus collector over the state dump that the scrape in progress read, and the
    event log of ``core`` (its events count since the core started, the dump's partitions
    only since their RM registered)."""

    def __init__(self, core: Core | None = None) -> None:
        self.core = core
        self.dump: Dump | None = None

    def collect(self) -> Iterable[Metric]:
        if self.dump is None:
            return []
        logged = self.core.events.highest_id + 1 if self.core is not None else None
        return [*metric_families(self.dump), *event_families(self.dump, logged)]


# YuniKorn's event counters (pkg/metrics/event.go; ``yunikorn_event_total_<name>``), each
# with what it counts here: (name, help, where its value comes from). YuniKorn passes an
# event from its creator through a bounded channel to a store, from which the shim's
# publisher collects it; here the partition hands its events to its RM's callback actor
# (an unbounded mailbox) at each flush, and that actor logs each one (the core's
# ``EventLog``, a ring that keeps the newest) as it sends it to the RM. So what may be
# refused in YuniKorn (``not_channeled``: the channel full; ``not_stored``: the store
# full) never is here: both are 0, always; ``channeled`` is ``created``; ``stored`` and
# ``collected`` are ``processed``. (v1.2 declares ``stored`` and ``not_stored`` under
# ``total_processed`` by mistake, and neither v1.2 nor v1.8 registers any of them: the
# names are v1.8's.)
_EVENT_COUNTERS: Final = (
    ("created", "Events created by the partitions since their RM registered.", "created"),
    (
        "channeled",
        "Events the partitions handed on to their RM's callback (all they created: its "
        "mailbox never refuses one), since their RM registered.",
        "created",
    ),
    (
        "not_channeled",
        "Events the partitions could not hand on: always 0, the callback's mailbox is "
        "unbounded (YuniKorn's channel may be full).",
        "zero",
    ),
    ("processed", "Events the core logged and sent to the RMs, since the core started.", "logged"),
    (
        "stored",
        "Events the core's event log took (every one it sent: it keeps the newest), since "
        "the core started.",
        "logged",
    ),
    (
        "not_stored",
        "Events the core's event log refused: always 0, it drops the oldest instead "
        "(YuniKorn's store may be full).",
        "zero",
    ),
    (
        "collected",
        "Events collected for the RMs (each is sent as it is logged), since the core started.",
        "logged",
    ),
)


def event_families(dump: Dump, logged: int | None) -> list[Metric]:
    """YuniKorn's event counters (pkg/metrics/event.go: gauges, though YuniKorn v1.2 and
    v1.8 never register them), each with the value that is true of the core's events
    (``_EVENT_COUNTERS``): the events the partitions created (the dump's, since their
    RM registered) and those the core's log took as the callback sent them to the RM
    (``logged``, since the core started; None without a core, which leaves out the
    counters that depend on it)."""
    created = sum(p["schedulerMetrics"]["eventsCreated"] for p in _counted(dump))
    source = {"created": created, "logged": logged, "zero": 0}
    families: list[Metric] = []
    for name, doc, key in _EVENT_COUNTERS:
        value = source[key]
        if value is None:
            continue
        family = GaugeMetricFamily(f"yunikorn_event_total_{name}", doc)
        family.add_metric([], value)
        families.append(family)
    return families


def _counted(dump: Dump) -> list[Dump]:
    return [p for p in dump["partitions"] if "schedulerMetrics" in p]


def metrics_registry(collector: CoreCollector) -> CollectorRegistry:
    """The registry of one app's ``/ws/v1/metrics``: the core's metrics, and the process
    and Python runtime ones that prometheus_client provides (``process_*``,
    ``python_info``, ``python_gc_*``), in the place of YuniKorn's Go runtime metrics. Never
    the default registry: two apps in one process each have their own."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


def metric_name(text: str) -> str:
    """YuniKorn's ``formatMetricName``: every byte that may not be in a Prometheus name
    becomes ``_``, and a name starting with a digit gets a ``_`` in front."""
    name = "".join(c if c.isascii() and (c.isalnum() or c in "_:") else "_" for c in text)
    return "_" + name if name[:1].isdigit() else name


def metric_families(dump: Dump) -> list[Metric]:
    """Every metric of ``/ws/v1/metrics`` for a state dump."""
    return [
        *_scheduler_metrics(dump),
        *_queue_metrics(dump),
        *_actor_metrics(dump),
        *_retired_metrics(dump),
    ]


def _scheduler_metrics(dump: Dump) -> list[Metric]:
    apps = GaugeMetricFamily(
        "yunikorn_scheduler_application_total",
        "Applications known to the scheduler, by state (live, and terminated until they expire).",
        labels=["state"],
    )
    states = Counter(a["applicationState"] for _k, a in each_app(dump))
    for state in AppState:
        apps.add_metric([state.lower()], states[state])
    nodes = GaugeMetricFamily(
        "yunikorn_scheduler_node",
        "Nodes, by state: active (all registered), draining (not schedulable); and since "
        "the start, as YuniKorn counts them: failed (new nodes refused for an unknown "
        "partition or allocations that could not be recovered), decommissioned.",
        labels=["state"],
    )
    all_nodes = [n for _k, n in each_node(dump)]
    counted = [p["schedulerMetrics"] for p in _counted(dump)]
    nodes.add_metric(["active"], len(all_nodes))
    nodes.add_metric(["draining"], sum(not n["schedulable"] for n in all_nodes))
    failed = dump.get("failedNodes", 0) + sum(c["failedNodes"] for c in counted)
    nodes.add_metric(["failed"], failed)
    nodes.add_metric(["decommissioned"], sum(c["decommissionedNodes"] for c in counted))
    return [apps, nodes, *_node_usage(all_nodes), *_counters(dump), *_preemptions(dump)]


# (family, help, ((level, key of the partition's ``schedulerMetrics``), ...)): YuniKorn's
# latency histograms (pkg/metrics/scheduler.go), observed in seconds on the core's clock;
# a level (None: the family has no label) is the ``level`` label of the sorting one.
_HISTOGRAMS: Final[tuple[tuple[str, str, tuple[tuple[str | None, str], ...]], ...]] = (
    (
        "yunikorn_scheduler_scheduling_latency_milliseconds",
        "Latency of a scheduling pass, in seconds (YuniKorn's name), on the core's clock.",
        ((None, "schedulingLatency"),),
    ),
    (
        "yunikorn_scheduler_trynode_latency_milliseconds",
        "Latency of trying a node that took an ask, to its allocation (the RM's predicates "
        "included, if it checks them), in seconds (YuniKorn's name), on the core's clock.",
        ((None, "tryNodeLatency"),),
    ),
    (
        "yunikorn_scheduler_node_sorting_latency_milliseconds",
        "Latency of sorting, by level: node (all nodes, by how close each comes to holding "
        "an ask that may reserve one, once per size and pass), queue (a parent's children) "
        "and app (a leaf's applications), those two on the way down of each pass's first "
        "walk, at their mean; in seconds (YuniKorn's name), on the core's clock.",
        (
            ("node", "nodeSortingLatency"),
            ("app", "appSortingLatency"),
            ("queue", "queueSortingLatency"),
        ),
    ),
    (
        "yunikorn_scheduler_trypreemption_latency_milliseconds",
        "Latency of a preemption round after a pass, in seconds (YuniKorn's name), on the "
        "core's clock.",
        ((None, "tryPreemptionLatency"),),
    ),
)


def _counters(dump: Dump) -> list[Metric]:
    """YuniKorn's counters and latency histograms, added up over the partitions."""
    attempts = dict.fromkeys(ATTEMPTS, 0)
    submissions = dict.fromkeys(SUBMISSIONS, 0)
    keys = [key for _name, _doc, levels in _HISTOGRAMS for _level, key in levels]
    buckets = {key: [0] * (len(LATENCY_BUCKETS) + 1) for key in keys}
    sums = dict.fromkeys(keys, 0.0)
    for part in dump["partitions"]:
        info = part.get("schedulerMetrics")
        if info is None:
            continue
        for totals, key in (
            (attempts, "containerAllocationAttempts"),
            (submissions, "applicationSubmissions"),
        ):
            for name, n in info[key].items():
                totals[name] += n
        for key, counts in buckets.items():
            for i, n in enumerate(info[key]["buckets"]):
                counts[i] += n
            sums[key] += info[key]["sum"]
    allocation = CounterMetricFamily(
        "yunikorn_scheduler_container_allocation_attempt",
        "Attempts to allocate containers, by state: allocated, rejected, error, released.",
        labels=["state"],
    )
    for name, n in attempts.items():
        allocation.add_metric([name], n)
    submission = CounterMetricFamily(
        "yunikorn_scheduler_application_submission",
        "Application submissions, by result: accepted, rejected.",
        labels=["result"],
    )
    for name, n in submissions.items():
        submission.add_metric([name], n)
    histograms = [
        _histogram(name, doc, [(level, buckets[key], sums[key]) for level, key in levels])
        for name, doc, levels in _HISTOGRAMS
    ]
    return [allocation, submission, *histograms]


def _histogram(
    name: str, doc: str, series: list[tuple[str | None, list[int], float]]
) -> HistogramMetricFamily:
    """A histogram of ``LATENCY_BUCKETS`` from the count in each bucket (the last: +Inf)
    and the sum of each series: one without a label (its level None), or one per
    ``level``."""
    labelled = series[0][0] is not None
    family = HistogramMetricFamily(name, doc, labels=["level"] if labelled else None)
    for level, counts, total in series:
        cumulative, buckets = 0, []
        for bound, n in zip((*map(str, LATENCY_BUCKETS), "+Inf"), counts, strict=True):
            cumulative += n
            buckets.append((bound, cumulative))
        family.add_metric([level] if level is not None else [], buckets, total)
    return family


# (family, help, label, ((label value, key of the partition's preemption totals), ...))
_PREEMPTION_COUNTERS: Final = (
    (
        "yunikorn_scheduler_preemption_started",
        "Preemptions started (victims released to the RM for an ask), by type: queue (a "
        "queue below its guarantee), required_node (an ask bound to its node).",
        "type",
        (("queue", "queue"), ("required_node", "requiredNode")),
    ),
    (
        "yunikorn_scheduler_preemption_ended",
        "Preemptions whose ask stopped waiting for its victims, by result: confirmed (every "
        "victim confirmed by the RM), timeout, cancelled (the ask or its node went).",
        "result",
        (("confirmed", "confirmed"), ("timeout", "timedOut"), ("cancelled", "cancelled")),
    ),
    (
        "yunikorn_scheduler_preemption_victims",
        "Victims of preemption, by state: released (to the RM, with PREEMPTED_BY_SCHEDULER), "
        "confirmed (the RM released them).",
        "state",
        (("released", "victims"), ("confirmed", "victimsConfirmed")),
    ),
)


def _preemptions(dump: Dump) -> list[Metric]:
    """The preemption counters and the preemptions in flight, added up over the partitions."""
    totals: Counter[str] = Counter()
    in_flight = 0
    for part in dump["partitions"]:
        info = part.get("preemptions")
        if info is None:
            continue
        totals.update(info["totals"])
        in_flight += len(info["inFlight"])
    totals["queue"] = totals["started"] - totals["requiredNode"]
    families: list[Metric] = []
    for name, doc, label, values in _PREEMPTION_COUNTERS:
        family = CounterMetricFamily(name, doc, labels=[label])
        for value, key in values:
            family.add_metric([value], totals[key])
        families.append(family)
    gauge = GaugeMetricFamily(
        "yunikorn_scheduler_preemption_in_flight",
        "Preemptions whose ask waits for the RM to confirm its victims.",
    )
    gauge.add_metric([], in_flight)
    return [*families, gauge]


def _node_usage(nodes: list[Dump]) -> list[Metric]:
    """Nodes by how much of each resource they have allocated, in tenths of the capacity."""
    buckets: dict[str, list[int]] = {}
    for node in nodes:
        for resource, percent in node["utilized"].items():
            index = min(max(math.ceil(percent / 10) - 1, 0), 9)
            buckets.setdefault(resource, [0] * 10)[index] += 1
    families: list[Metric] = []
    for resource, counts in sorted(buckets.items()):
        family = GaugeMetricFamily(
            f"yunikorn_scheduler_{metric_name(resource)}_node_usage_total",
            "Total resource usage of node, by resource name.",
            labels=["range"],
        )
        for label, count in zip(_USAGE_BUCKETS, counts, strict=True):
            family.add_metric([label], count)
        families.append(family)
    return families


_QUEUE_RESOURCES: Final = (
    ("guaranteed", "guaranteedResource"),
    ("max", "maxResource"),
    ("allocated", "allocatedResource"),
    ("pending", "pendingResource"),
    ("preempting", "preemptingResource"),
)


def _queue_metrics(dump: Dump) -> list[Metric]:
    """Per queue: its resources by kind, and its applications by state (live, and
    terminated until they expire), labelled with the partition too: two partitions may
    have queues of the same path. Two RMs' partitions of the same name (YuniKorn's
    ``[rmID]name``) share their series, as their queues share YuniKorn's: the values add
    up. Each under both of YuniKorn's names: v1.2's family per
    queue (``yunikorn_root_a_queue_app``), and v1.8's one family for every queue with a
    ``queue`` label (``yunikorn_queue_app{queue="root.a"}``, ``pkg/metrics/queue.go``),
    where each queue's ``maxRunningApps`` is a resource state of its own (``apps``)."""
    resources: dict[str, dict[tuple[str, ...], float]] = {}
    apps: dict[str, Counter[tuple[str, ...]]] = {}
    by_label: dict[tuple[str, ...], float] = {}
    apps_by_label: Counter[tuple[str, ...]] = Counter()
    for part in dump["partitions"]:
        pname = partition_name(part)
        for q in walk_queue(part["queues"]):
            path = q["queuename"]
            samples = resources.setdefault(_queue_metric(path, "resource"), {})
            for state, key in _QUEUE_RESOURCES:
                for resource, value in sorted(q[key].items()):
                    _add(samples, (state, resource, pname), value)
                    _add(by_label, (path, state, resource, pname), value)
            _add(by_label, (path, "maxRunningApps", "apps", pname), q["maxRunningApps"])
        for app in (*part["applications"], *part["terminatedApplications"]):
            if app["queueName"] and app["applicationState"] != AppState.REJECTED:
                counts = apps.setdefault(_queue_metric(app["queueName"], "app"), Counter())
                state = app["applicationState"].lower()
                counts[(state, pname)] += 1
                apps_by_label[(app["queueName"], state, pname)] += 1
    families: list[Metric] = []
    for name, values in resources.items():
        doc = "Queue resource metrics, by state (guaranteed, max, allocated, pending, preempting)."
        families.append(_gauge(name, doc, ["state", "resource", "partition"], values))
    for name, counts in apps.items():
        doc = "Queue application metrics, by application state."
        families.append(_gauge(name, doc, ["state", "partition"], dict(counts)))
    families.append(
        _gauge(
            "yunikorn_queue_resource",
            "Resources of each queue, by state (guaranteed, max, allocated, pending, "
            "preempting, and maxRunningApps as the resource apps).",
            ["queue", "state", "resource", "partition"],
            by_label,
        )
    )
    families.append(
        _gauge(
            "yunikorn_queue_app",
            "Applications of each queue, by application state.",
            ["queue", "state", "partition"],
            dict(apps_by_label),
        )
    )
    return families


def _add(values: dict[tuple[str, ...], float], key: tuple[str, ...], value: float) -> None:
    values[key] = values.get(key, 0) + value


def _queue_metric(path: str, kind: str) -> str:
    return f"yunikorn_{metric_name(path)}_queue_{kind}"


def _gauge(
    name: str, doc: str, labels: list[str], values: Mapping[tuple[str, ...], float]
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=labels)
    for label_values, value in values.items():
        family.add_metric(list(label_values), value)
    return family


def actor_kind(name: str, dump: Dump) -> str:
    """The kind of an actor from its name, ``rm:<rm>#<n>/partition:<p>[/queue:..|/app:..]``
    or ``rm:<rm>#<n>/callback``: ``partition``, ``queue``, ``app``, ``callback`` or
    ``other``. The RM ids and partition names come from the dump, so ids holding a '/' or
    a ':' are read right."""
    rest = _after_rm(name, dump["resourceManagers"])
    if rest is None:
        return "other"
    if rest == "callback":
        return "callback"
    for pname in sorted((partition_name(p) for p in dump["partitions"]), key=len, reverse=True):
        prefix = f"partition:{pname}"
        if rest == prefix:
            return "partition"
        if rest.startswith(prefix + "/"):
            kind = rest[len(prefix) + 1 :].split(":", 1)[0]
            return kind if kind in ("queue", "app") else "other"
    return "other"


def _after_rm(name: str, rm_ids: Iterable[str]) -> str | None:
    for rm_id in sorted(rm_ids, key=len, reverse=True):
        prefix = f"rm:{rm_id}#"
        if name.startswith(prefix):
            generation, _sep, rest = name[len(prefix) :].partition("/")
            if generation.isdigit():
                return rest
    return None


_ACTOR_GAUGES: Final = (
    ("yunikorn_actor_live", "Live actors, by kind."),
    ("yunikorn_actor_mailbox_depth", "Messages waiting in the mailboxes, by actor kind."),
    ("yunikorn_actor_mailbox_peak", "The largest mailbox length seen by one actor of the kind."),
    ("yunikorn_actor_messages_processed", "Messages handled by the live actors of the kind."),
    ("yunikorn_actor_handler_seconds", "Wall time spent in the handlers of the live actors."),
    ("yunikorn_actor_handler_latency_seconds", "Mean handler time per message, by actor kind."),
    ("yunikorn_actor_handler_failures", "Handler and hook exceptions of the live actors."),
)


# The actor classes of the core, by the kind the metrics name them.
_KIND_OF_CLASS: Final = {
    "PartitionActor": "partition",
    "QueueActor": "queue",
    "ApplicationActor": "app",
    "CallbackActor": "callback",
}
_RETIRED_GAUGES: Final = (
    ("yunikorn_actor_retired_messages_processed", "processed", "Messages handled by actors"),
    (
        "yunikorn_actor_retired_handler_seconds",
        "handler_time",
        "Wall time in the handlers of actors",
    ),
    (
        "yunikorn_actor_retired_handler_failures",
        "failures",
        "Handler and hook exceptions of actors",
    ),
)


def _retired_metrics(dump: Dump) -> list[Metric]:
    """The counters of the actors that have stopped, added up per kind (the runtime keeps
    them when an actor goes: ``ActorSystem.retired_stats``)."""
    families: list[Metric] = []
    retired = dump.get("retiredActors", {})
    for name, field, doc in _RETIRED_GAUGES:
        family = GaugeMetricFamily(name, f"{doc} that have stopped, by kind.", labels=["kind"])
        totals: Counter[str] = Counter()
        for cls, stats in retired.items():
            totals[_KIND_OF_CLASS.get(cls, "other")] += stats[field]
        for kind, value in sorted(totals.items()):
            family.add_metric([kind], value)
        families.append(family)
    return families


def _actor_metrics(dump: Dump) -> list[Metric]:
    """Mailbox depth and handler latency per actor kind, from the runtime's counters of
    the live actors (an actor's counters go with it when it stops, so these are gauges)."""
    by_kind: dict[str, list[Dump]] = {}
    for name, stats in dump["actors"].items():
        by_kind.setdefault(actor_kind(name, dump), []).append(stats)
    families = {name: GaugeMetricFamily(name, doc, labels=["kind"]) for name, doc in _ACTOR_GAUGES}
    for kind, stats in sorted(by_kind.items()):
        processed = sum(s["processed"] for s in stats)
        seconds = sum(s["handler_time"] for s in stats)
        values = (
            len(stats),
            sum(s["queued"] for s in stats),
            max(s["peak"] for s in stats),
            processed,
            seconds,
            seconds / processed if processed else 0.0,
            sum(s["failures"] for s in stats),
        )
        for (name, _doc), value in zip(_ACTOR_GAUGES, values, strict=True):
            families[name].add_metric([kind], value)
    return list(families.values())
