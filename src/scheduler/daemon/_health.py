"""The scheduler health check of ``/ws/v1/scheduler/healthcheck``, over a state dump.

YuniKorn's health checks (``pkg/scheduler/health_checker.go``) that a state dump can
answer, by YuniKorn's names, and the consistency checks of the core's own totals (node,
queue and application usage against the allocations; no orphan allocation; no negative
resource). Each check is a plain function of a dump (``Core.state_dump``), so each can be
tested on a doctored one. The walkers over a dump (``each_node``, ``each_app``,
``each_queue``) serve the metrics too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

Dump = Mapping[str, Any]
HealthCheck = dict[str, Any]


def partition_name(part: Dump) -> str:
    return str(part["partition"]["name"])


# YuniKorn's scheduler health checks (pkg/scheduler/health_checker.go) that a state dump
# can answer, by YuniKorn's names, and the consistency checks of the core's own totals.
# "Scheduling errors" and "Failed nodes" read the partitions' counters (``schedulerMetrics``), and
# "Failed nodes" the nodes the RM proxy refused too (the dump's ``failedNodes``).
def _check(name: str, description: str, label: str, bad: list[str]) -> HealthCheck:
    return {
        "Name": name,
        "Succeeded": not bad,
        "Description": description,
        "DiagnosisMessage": f"{label}: {json.dumps(sorted(set(bad)))}",
    }


def _nz(res: Mapping[str, int]) -> dict[str, int]:
    return {k: v for k, v in res.items() if v}


def _plus(resources: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for res in resources:
        for k, v in res.items():
            total[k] = total.get(k, 0) + v
    return _nz(total)


def _negative(*resources: Mapping[str, int]) -> bool:
    return any(v < 0 for res in resources for v in res.values())


def each_node(dump: Dump) -> Iterator[tuple[str, Dump]]:
    for part in dump["partitions"]:
        for node in part["nodes"]:
            yield f"{partition_name(part)}/{node['nodeID']}", node


def each_app(dump: Dump) -> Iterator[tuple[str, Dump]]:
    for part in dump["partitions"]:
        for app in (*part["applications"], *part["terminatedApplications"]):
            yield f"{partition_name(part)}/{app['applicationID']}", app


def walk_queue(queue: Dump) -> Iterator[Dump]:
    yield queue
    for child in queue["children"]:
        yield from walk_queue(child)


def each_queue(dump: Dump) -> Iterator[tuple[str, Dump]]:
    for part in dump["partitions"]:
        for queue in walk_queue(part["queues"]):
            yield f"{partition_name(part)}/{queue['queuename']}", queue


def check_negative_partitions(dump: Dump) -> HealthCheck:
    """No partition has a negative capacity or usage."""
    bad = [
        partition_name(p)
        for p in dump["partitions"]
        if _negative(
            p["partition"]["capacity"]["capacity"], p["partition"]["capacity"]["usedCapacity"]
        )
    ]
    return _check(
        "Negative resources",
        "Check for negative resources in the partitions",
        "Partitions with negative resources",
        bad,
    )


def check_negative_nodes(dump: Dump) -> HealthCheck:
    """No node has a negative capacity, allocation, occupied or available resource."""
    bad = [
        key
        for key, n in each_node(dump)
        if _negative(n["capacity"], n["allocated"], n["occupied"], n["available"])
        or any(_negative(a["resource"]) for a in n["allocations"])
    ]
    return _check(
        "Negative resources",
        "Check for negative resources in the nodes and their allocations",
        "Nodes with negative resources",
        bad,
    )


def check_negative_queues(dump: Dump) -> HealthCheck:
    """No queue has a negative allocated or pending resource."""
    bad = [
        key
        for key, q in each_queue(dump)
        if _negative(q["allocatedResource"], q["pendingResource"])
    ]
    return _check(
        "Negative resources",
        "Check for negative allocated or pending resources in the queues",
        "Queues with negative resources",
        bad,
    )


def check_negative_applications(dump: Dump) -> HealthCheck:
    """No application has a negative used or pending resource, nor an ask a negative one."""
    bad = [
        key
        for key, a in each_app(dump)
        if _negative(a["usedResource"], a["pendingResource"])
        or any(_negative(r["resource"]) for r in a["requests"])
    ]
    return _check(
        "Negative resources",
        "Check for negative used or pending resources in the applications and their asks",
        "Applications with negative resources",
        bad,
    )


def check_partition_allocated(dump: Dump) -> HealthCheck:
    """A partition's used capacity is what its nodes have allocated."""
    bad = [
        partition_name(p)
        for p in dump["partitions"]
        if _nz(p["partition"]["capacity"]["usedCapacity"])
        != _plus(n["allocated"] for n in p["nodes"])
    ]
    return _check(
        "Consistency of data",
        "Check if the partition's used capacity == sum of the nodes' allocated resources",
        "Partitions with inconsistent data",
        bad,
    )


def check_partition_capacity(dump: Dump) -> HealthCheck:
    """A partition's capacity is the sum of its nodes' capacities."""
    bad = [
        partition_name(p)
        for p in dump["partitions"]
        if _nz(p["partition"]["capacity"]["capacity"]) != _plus(n["capacity"] for n in p["nodes"])
    ]
    return _check(
        "Consistency of data",
        "Check if the partition's capacity == sum of the nodes' capacities",
        "Partitions with inconsistent data",
        bad,
    )


def check_node_totals(dump: Dump) -> HealthCheck:
    """A node's capacity is its allocated, occupied and available resources together."""
    bad = [
        key
        for key, n in each_node(dump)
        if _nz(n["capacity"]) != _plus((n["allocated"], n["occupied"], n["available"]))
    ]
    return _check(
        "Consistency of data",
        "Check if a node's capacity == allocated + occupied + available resources",
        "Nodes with inconsistent data",
        bad,
    )


def check_node_capacity(dump: Dump) -> HealthCheck:
    """No node has more allocated than its capacity."""
    bad = [
        key
        for key, n in each_node(dump)
        if any(v > n["capacity"].get(k, 0) for k, v in n["allocated"].items())
    ]
    return _check(
        "Consistency of data",
        "Check if a node's capacity >= the resources allocated on it",
        "Nodes with inconsistent data",
        bad,
    )


def check_node_allocations(dump: Dump) -> HealthCheck:
    """A node's allocated resource is the sum of its allocations."""
    bad = [
        key
        for key, n in each_node(dump)
        if _nz(n["allocated"]) != _plus(a["resource"] for a in n["allocations"])
    ]
    return _check(
        "Consistency of data",
        "Check if a node's allocated resource == sum of the allocations on it",
        "Nodes with inconsistent data",
        bad,
    )


def check_application_allocations(dump: Dump) -> HealthCheck:
    """An application's used resource is the sum of its allocations."""
    bad = [
        key
        for key, a in each_app(dump)
        if _nz(a["usedResource"]) != _plus(x["resource"] for x in a["allocations"])
    ]
    return _check(
        "Consistency of data",
        "Check if an application's used resource == sum of its allocations",
        "Applications with inconsistent data",
        bad,
    )


def check_queue_allocations(dump: Dump) -> HealthCheck:
    """A queue's allocated resource is what its applications use plus what its children
    have allocated; every application it lists is live."""
    bad: list[str] = []
    for part in dump["partitions"]:
        live = {a["applicationID"]: a for a in part["applications"]}
        for q in walk_queue(part["queues"]):
            apps = [live.get(app_id) for app_id in q["applications"]]
            used = [a["usedResource"] for a in apps if a is not None]
            used += [c["allocatedResource"] for c in q["children"]]
            if None in apps or _nz(q["allocatedResource"]) != _plus(used):
                bad.append(f"{partition_name(part)}/{q['queuename']}")
    return _check(
        "Consistency of data",
        "Check if a queue's allocated resource == sum of its applications' used resources "
        "and its children's allocated resources",
        "Queues with inconsistent data",
        bad,
    )


def check_orphans_on_nodes(dump: Dump) -> HealthCheck:
    """Every allocation on a node names that node and an application that holds it."""
    bad: list[str] = []
    for part in dump["partitions"]:
        held = _allocations_by_app(part)
        for node in part["nodes"]:
            for a in node["allocations"]:
                uuids = held.get(a["applicationId"], set())
                if a["nodeId"] != node["nodeID"] or a["uuid"] not in uuids:
                    bad.append(f"{partition_name(part)}/{node['nodeID']}/{a['uuid']}")
    return _check(
        "Orphan allocation on node check",
        "Check if every allocation on a node belongs to an application that holds it",
        "Orphan allocations",
        bad,
    )


def check_orphans_on_apps(dump: Dump) -> HealthCheck:
    """Every allocation of an application is on a node that exists and lists it."""
    bad: list[str] = []
    for part in dump["partitions"]:
        on_nodes = {n["nodeID"]: {a["uuid"] for a in n["allocations"]} for n in part["nodes"]}
        for app in (*part["applications"], *part["terminatedApplications"]):
            for a in app["allocations"]:
                if a["uuid"] not in on_nodes.get(a["nodeId"], set()):
                    bad.append(f"{partition_name(part)}/{app['applicationID']}/{a['uuid']}")
    return _check(
        "Orphan allocation on app check",
        "Check if every allocation of an application is on an existing node that lists it",
        "Orphan allocations",
        bad,
    )


def _allocations_by_app(part: Dump) -> dict[str, set[str]]:
    apps = (*part["applications"], *part["terminatedApplications"])
    return {a["applicationID"]: {x["uuid"] for x in a["allocations"]} for a in apps}


def check_reservations(dump: Dump) -> HealthCheck:
    """Every reservation names an existing node and application, and both list it."""
    bad: list[str] = []
    for part in dump["partitions"]:
        apps = {a["applicationID"]: set(a["reservations"]) for a in part["applications"]}
        nodes = {n["nodeID"]: set(n["reservations"]) for n in part["nodes"]}
        for app_id, keys in apps.items():
            bad += [
                f"{partition_name(part)}/{app_id}/{k}"
                for k in keys
                if not _mirrored(k, nodes, app_id)
            ]
        for node_id, keys in nodes.items():
            bad += [
                f"{partition_name(part)}/{node_id}/{k}"
                for k in keys
                if not _mirrored(k, apps, node_id)
            ]
    return _check(
        "Reservation check",
        "Check if every reservation names an existing node and application that both list it",
        "Broken reservations",
        bad,
    )


def _mirrored(key: str, others: Mapping[str, set[str]], own_id: str) -> bool:
    """``key`` is ``<other id>|<allocation key>`` (either id may hold a '|'): some
    ``other`` exists and lists ``<own_id>|<allocation key>``."""
    for i, char in enumerate(key):
        if char == "|" and key[:i] in others and f"{own_id}|{key[i + 1 :]}" in others[key[:i]]:
            return True
    return False


def _counted(dump: Dump, name: str, description: str, what: str, count: int) -> HealthCheck:
    return {
        "Name": name,
        "Succeeded": count == 0,
        "Description": description,
        "DiagnosisMessage": f"There were {count} {what} logged in the metrics",
    }


def _metric(dump: Dump, key: str) -> list[Any]:
    return [p["schedulerMetrics"][key] for p in dump["partitions"] if "schedulerMetrics" in p]


def check_scheduling_errors(dump: Dump) -> HealthCheck:
    """No scheduling pass of any partition raised (YuniKorn: no scheduling error counted)."""
    errors = sum(a["error"] for a in _metric(dump, "containerAllocationAttempts"))
    return _counted(
        dump,
        "Scheduling errors",
        "Check for scheduling error entries in metrics",
        "scheduling errors",
        errors,
    )


def check_failed_nodes(dump: Dump) -> HealthCheck:
    """No failed node counted: none refused for an unknown partition, none whose
    allocations could not be recovered (YuniKorn's health check reads its metric)."""
    failed = dump.get("failedNodes", 0) + sum(_metric(dump, "failedNodes"))
    return _counted(
        dump, "Failed nodes", "Check for failed nodes entries in metrics", "failed nodes", failed
    )


#: Every check of ``/ws/v1/scheduler/healthcheck``, in the order it reports them.
HEALTH_CHECKS: Final[tuple[Callable[[Dump], HealthCheck], ...]] = (
    check_scheduling_errors,
    check_failed_nodes,
    check_negative_partitions,
    check_negative_nodes,
    check_negative_queues,
    check_negative_applications,
    check_partition_allocated,
    check_partition_capacity,
    check_node_totals,
    check_node_capacity,
    check_node_allocations,
    check_application_allocations,
    check_queue_allocations,
    check_orphans_on_nodes,
    check_orphans_on_apps,
    check_reservations,
)


def health_status(dump: Dump) -> dict[str, Any]:
    """YuniKorn's ``dao.SchedulerHealthDAOInfo`` for a state dump: every check of
    ``HEALTH_CHECKS``, and ``Healthy`` when all of them succeeded."""
    checks = [check(dump) for check in HEALTH_CHECKS]
    return {"Healthy": all(c["Succeeded"] for c in checks), "HealthChecks": checks}
