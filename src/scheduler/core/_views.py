"""REST-shaped views of a partition, built on demand in the partition's turn (never stored).

Field names follow YuniKorn's REST API (``dao`` package): ``queuename``, ``applicationID``,
``nodeID``, ... Resources are ``{name: int}`` maps. Times are nanoseconds since the epoch of
the core's clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import Any, Final

from scheduler import si
from scheduler._errors import NotFoundError, SchedulerError
from scheduler.config._duration import format_duration
from scheduler.config._parser import (
    ChildTemplate,
    Limit,
    PartitionConfig,
    PlacementRule,
    QueueConfig,
    SchedulerConfig,
)
from scheduler.core._partition import Partition
from scheduler.gangs._permit import Gang, PermitGangs
from scheduler.objects._application import Application
from scheduler.objects._asks import Allocation, Ask
from scheduler.objects._handshake import Preemption
from scheduler.objects._nodes import Node
from scheduler.objects._priority import current_priority
from scheduler.objects._queue import Queue
from scheduler.objects._resources import Res, add_into
from scheduler.objects._ugm import Cap, user_of
from scheduler.policies._placement import child_template

__all__ = [
    "answer",
    "application_info",
    "config_info",
    "group_usage",
    "node_info",
    "partition_info",
    "preemptions_info",
    "queue_info",
    "user_usage",
]


_PREEMPTED: Final = si.TerminationType.PREEMPTED_BY_SCHEDULER


def _duration_ns(seconds: float) -> int:
    return int(seconds * 1e9)


# Wall-clock Unix nanoseconds of a reading of the core's clock (``Partition.wall``).
Wall = Callable[[float], int]


def answer(p: Partition, kind: str, key: str) -> Any:
    if kind == "partition":
        return partition_info(p)
    if kind == "queue":
        queue = p.queues.get(key)
        if queue is None:
            raise NotFoundError(f"queue {key!r} not found in partition {p.name!r}")
        return queue_info(p, queue)
    if kind == "application":
        app = p.applications.get(key) or p.terminated.get(key)
        if app is None:
            raise NotFoundError(f"application {key!r} not found in partition {p.name!r}")
        return application_info(app, p.permits, p.wall)
    if kind == "node":
        node = p.nodes.get(key)
        if node is None:
            raise NotFoundError(f"node {key!r} not found in partition {p.name!r}")
        return node_info(node, p.wall)
    if kind == "users":
        return user_usage(p)
    if kind == "groups":
        return group_usage(p)
    if kind == "dump":
        return dump(p)
    if kind == "summary":
        return dump(p, detail=False)
    if kind == "nodes":
        return nodes_info(p)
    if kind == "applications":
        return applications_part(p)
    if kind == "preemptions":
        return preemptions_info(p)
    raise SchedulerError(f"unknown query {kind!r}")


def partition_info(p: Partition) -> dict[str, Any]:
    total, used = p.capacity()
    states = Counter(str(a.state) for a in (*p.applications.values(), *p.terminated.values()))
    utilization = {
        name: round(100 * used.get(name, 0) / cap) for name, cap in total.items() if cap > 0
    }
    return {
        "clusterId": p.rm_id,
        "name": p.name,
        "state": "Active",
        "capacity": {"capacity": total, "usedCapacity": used, "utilization": utilization},
        "nodeSortingPolicy": {
            "type": p.index.policy,
            "resourceWeights": dict(p.index.weights),
        },
        "preemptionEnabled": p.config.preemption_enabled,
        "totalNodes": len(p.nodes),
        "applications": {"total": sum(states.values()), **states},
        "totalContainers": sum(len(n.allocations) for n in p.nodes.values()),
    }


def queue_info(p: Partition, queue: Queue) -> dict[str, Any]:
    info = _queue_fields(p, queue)
    template = _template_info(p, queue)
    if template is not None:  # YuniKorn: omitted for a queue without one
        info["template"] = template
    return info


def _queue_fields(p: Partition, queue: Queue) -> dict[str, Any]:
    return {
        "queuename": queue.path,
        "status": str(queue.status),
        "partition": p.name,
        "maxResource": dict(queue.max_resources),
        "guaranteedResource": dict(queue.guaranteed),
        "allocatedResource": dict(queue.allocated),
        # YuniKorn's preemptingResource: its victims (and its children's) on their way out.
        "preemptingResource": dict(p.preemptions.leaving.get(queue, {})),
        "pendingResource": dict(queue.pending),
        "isLeaf": queue.leaf,
        "isManaged": not queue.dynamic,
        "properties": dict(queue.properties),
        "parent": queue.parent.path if queue.parent else "",
        "children": [queue_info(p, c) for c in queue.children.values()],
        "absUsedCapacity": abs_used_capacity(queue.max_resources, queue.allocated),
        "runningApps": queue.running_apps,
        "maxRunningApps": queue.max_applications,
        "currentPriority": current_priority(queue),
        "preemptionEnabled": queue.preemption_policy != "disabled",
        "isPreemptionFence": queue.preemption_policy == "fence",
        "preemptionDelay": format_duration(queue.preemption_delay),
        "applications": sorted(queue.applications),
    }


def abs_used_capacity(capacity: Res, used: Res) -> dict[str, int]:
    """Per resource of ``capacity``, ``used`` as a whole percentage of it, as YuniKorn's
    ``resources.CalculateAbsUsedCapacity`` gives it: truncated, 100 for any use of a zero
    capacity, at most 2**31 - 1; a resource nothing uses is left out."""
    out: dict[str, int] = {}
    for name, cap in capacity.items():
        value = used.get(name)
        if value is None:
            continue
        if value <= 0:
            out[name] = 0
        elif cap <= 0:
            out[name] = 100
        else:
            out[name] = min(value * 100 // cap, _INT32_MAX)
    return out


_INT32_MAX: Final = 2**31 - 1


def _template_info(p: Partition, queue: Queue) -> dict[str, Any] | None:
    """YuniKorn's ``TemplateInfo`` of a parent queue: the child template its new dynamic
    leaves take (its own, or the nearest one above it); None for a leaf."""
    template = None if queue.leaf else child_template(p, queue)
    if template is None:
        return None
    out: dict[str, Any] = {}
    if template.max_applications:
        out["maxApplications"] = template.max_applications
    if template.max_resources:
        out["maxResource"] = dict(template.max_resources)
    if template.guaranteed:
        out["guaranteedResource"] = dict(template.guaranteed)
    if template.properties:
        out["properties"] = dict(template.properties)
    return out


def _ask_info(app: Application, ask: Ask, wall: Wall) -> dict[str, Any]:
    return {
        "allocationKey": ask.allocation_key,
        "allocationTags": dict(ask.tags),
        "requestTime": wall(ask.created),
        "resource": dict(ask.resource),
        "pendingCount": ask.pending,
        "maxAllocations": ask.max_allocations,
        "priority": str(ask.priority),
        "requiredNodeId": ask.required_node,
        "applicationId": app.application_id,
        "partition": app.partition,
        "placeholder": ask.placeholder,
        "taskGroupName": ask.task_group_name,
        "triggeredPreemption": ask.triggered_preemption,
        "originator": ask.originator,
    }


def allocation_info(alloc: Allocation, wall: Wall) -> dict[str, Any]:
    return {
        "allocationKey": alloc.allocation_key,
        "allocationTags": dict(alloc.tags),
        "requestTime": wall(alloc.request_time),
        "allocationTime": wall(alloc.allocation_time),
        "allocationDelay": _duration_ns(alloc.allocation_time - alloc.request_time),
        "uuid": alloc.uuid,
        "resource": dict(alloc.resource),
        "priority": str(alloc.priority),
        "nodeId": alloc.node_id,
        "applicationId": alloc.application_id,
        "partition": alloc.partition,
        "placeholder": alloc.placeholder,
        "taskGroupName": alloc.task_group_name,
        "preempted": alloc.release_pending is _PREEMPTED,
        "originator": alloc.originator,
        "releasePending": alloc.release_pending.name if alloc.release_pending else "",
        "tentative": alloc.tentative,
    }


def application_info(
    app: Application, permits: PermitGangs | None, wall: Wall, detail: bool = True
) -> dict[str, Any]:
    """YuniKorn's ``ApplicationDAOInfo``; without ``detail``, no list of its pending asks
    (``requests``) or allocations, so it costs the same whatever the application holds."""
    info = {
        "applicationID": app.application_id,
        "usedResource": dict(app.allocated),
        "maxUsedResource": dict(app.max_allocated),
        "pendingResource": dict(app.pending),
        "partition": app.partition,
        "queueName": app.queue_name,
        "submissionTime": wall(app.submit_time),
        "finishedTime": wall(app.finished_time) if app.finished_time is not None else None,
        "requests": (
            [_ask_info(app, a, wall) for a in app.asks.values() if a.pending > 0]
            if detail
            else None
        ),
        "allocations": (
            [allocation_info(a, wall) for a in app.allocations.values()] if detail else None
        ),
        "applicationState": str(app.state),
        "user": app.user,
        "groups": list(app.groups),
        "rejectedMessage": app.rejected_message,
        "stateLog": [{"time": wall(t), "applicationState": str(s)} for t, s in app.state_log],
        "placeholderData": placeholder_data(app),
        "hasReserved": bool(app.reservations),
        "reservations": [f"{n}|{r.ask.allocation_key}" for n, r in app.reservations.items()],
        "gangs": gangs(app, permits, wall),
    }
    if not detail:
        del info["requests"], info["allocations"]
    return info


def gangs(app: Application, permits: PermitGangs | None, wall: Wall) -> list[dict[str, Any]]:
    """The permit gangs with members in ``app``, counted for the whole gang."""
    if permits is None or not app.permit_gangs:
        return []
    found = (permits.gangs.get(gang_id) for gang_id in app.permit_gangs)
    return [gang_info(gang, wall) for gang in found if gang is not None]


def gang_info(gang: Gang, wall: Wall) -> dict[str, Any]:
    spec = gang.spec
    group = gang.group
    return {
        "gangId": spec.gang_id,
        "mode": spec.mode,
        "minAvailable": spec.min_available,
        "totalNumber": spec.total_number,
        "waitingTime": spec.waiting_time,
        "gangGroup": list(group.ids),
        "createTime": wall(gang.created),
        "placed": len(gang.tentative),
        "bound": gang.bound,
        "satisfied": gang.satisfied,
        "timedOut": group.timed_out,
    }


def placeholder_data(app: Application) -> list[dict[str, Any]]:
    return [
        {
            "taskGroupName": group.name,
            "count": group.count,
            "minResource": dict(group.min_resource),
            "replaced": group.replaced,
            "timedout": group.timedout,
        }
        for group in app.task_groups.values()
    ]


def node_info(node: Node, wall: Wall, detail: bool = True) -> dict[str, Any]:
    """YuniKorn's ``NodeDAOInfo``; without ``detail``, no list of its allocations."""
    info = {
        "nodeID": node.node_id,
        "hostName": node.attributes.get("si/hostname", ""),
        "rackName": node.attributes.get("si/rackname", ""),
        "attributes": dict(node.attributes),
        "capacity": dict(node.capacity),
        "allocated": dict(node.allocated),
        "occupied": dict(node.occupied),
        "available": _available(node),
        "utilized": {
            name: round(100 * node.allocated.get(name, 0) / cap)
            for name, cap in node.capacity.items()
            if cap > 0
        },
        "allocations": (
            [allocation_info(a, wall) for a in node.allocations.values()] if detail else None
        ),
        "schedulable": node.schedulable,
        "isReserved": node.reserved is not None,
        "reservations": (
            [f"{node.reserved.application_id}|{node.reserved.ask.allocation_key}"]
            if node.reserved is not None
            else []
        ),
    }
    if not detail:
        del info["allocations"]
    return info


def _available(node: Node) -> dict[str, int]:
    """Capacity less allocated and occupied, keeping zero entries as YuniKorn shows them."""
    out = dict(node.capacity)
    for used in (node.allocated, node.occupied):
        for name, v in used.items():
            out[name] = out.get(name, 0) - v
    return out


def dump(p: Partition, detail: bool = True) -> dict[str, Any]:
    """The partition's part of ``Core.state_dump``; without ``detail`` (what the metrics
    read), no list of an application's pending asks or allocations, nor of a node's
    allocations: it costs per application, queue and node, not per ask or allocation."""
    return {
        **applications_part(p, detail),
        "partition": partition_info(p),  # in the place of the part's bare name
        "nodes": [node_info(n, p.wall, detail) for n in p.nodes.values()],
        "userUsage": user_usage(p),
        "groupUsage": group_usage(p),
        "preemptions": preemptions_info(p),
    }


def nodes_info(p: Partition) -> list[dict[str, Any]]:
    return [node_info(n, p.wall) for n in p.nodes.values()]


def applications_part(p: Partition, detail: bool = True) -> dict[str, Any]:
    """The part of ``dump`` that the REST application lists read: the same keys, and of
    ``partition`` only its name (no node is read)."""
    return {
        "partition": {"name": p.name},
        "queues": queue_info(p, p.root),
        "applications": [
            application_info(a, p.permits, p.wall, detail) for a in p.applications.values()
        ],
        "terminatedApplications": [
            application_info(a, p.permits, p.wall, detail) for a in p.terminated.values()
        ],
    }


# ========================================================================== preemptions
# Not in YuniKorn's REST API: the preemptions in flight (each preemptor waiting for the RM to
# confirm its victims) and the partition's totals. It costs per victim in flight, never per
# allocation of the partition, so the metrics' summary dump has it whole.
def preemptions_info(p: Partition) -> dict[str, Any]:
    """The partition's preemptions in flight, oldest first, and its totals since it started."""
    pre = p.preemptions
    counts = pre.counts
    return {
        "inFlight": [_preemption_info(rec, p.wall) for rec in pre.by_ask.values()],
        "totals": {
            "started": counts["started"],
            "requiredNode": counts["required_node"],
            "confirmed": counts["confirmed"],
            "timedOut": counts["timeout"],
            "cancelled": counts["cancelled"],
            "victims": counts["victims"],
            "victimsConfirmed": counts["victims_confirmed"],
        },
    }


def _preemption_info(rec: Preemption, wall: Wall) -> dict[str, Any]:
    return {
        "applicationID": rec.application_id,
        "allocationKey": rec.ask.allocation_key,
        "queueName": rec.chain[0].path,
        "nodeID": rec.node.node_id,
        "requiredNode": rec.required_node,
        "startTime": wall(rec.started),
        "victimsTotal": rec.total,
        "victims": [
            {
                "uuid": uuid,
                "allocationKey": alloc.allocation_key,
                "applicationId": alloc.application_id,
                "queueName": rec.chains[uuid][0].path,
            }
            for uuid, alloc in rec.victims.items()
        ],
    }


# ================================================================ user and group usage
# YuniKorn's /ws/v1/partition/{p}/usage/users and /groups (dao.UserResourceUsageDAOInfo,
# GroupResourceUsageDAOInfo, ResourceUsageDAOInfo), added up from the applications.
_UsageTree = dict[str, tuple[Res, list[str]]]  # queue path -> (resources, running apps)


def user_usage(p: Partition) -> list[dict[str, Any]]:
    """Every user with running applications, or with a limit of its own, by name."""
    ugm = p.ugm
    trees: dict[str, _UsageTree] = {}
    groups: dict[str, dict[str, str]] = {}
    for app in _running(p):
        user = user_of(app)
        _add_app(trees.setdefault(user, {}), app)
        group = ugm.group_of(app) if ugm is not None else ""
        if group:
            groups.setdefault(user, {})[app.application_id] = group
    limits = ugm.limits if ugm is not None else None
    if limits is not None:
        for user, paths in limits.configured("user").items():
            _add_paths(trees.setdefault(user, {}), paths)
    return [
        {
            "userName": user,
            "groups": groups.get(user, {}),
            "queues": _usage_node(
                tree, partial(limits.user_cap, user) if limits is not None else _no_cap
            ),
        }
        for user, tree in sorted(trees.items())
    ]


def group_usage(p: Partition) -> list[dict[str, Any]]:
    """Every group with running applications charged to it, or with a limit of its own;
    without limits no application is charged to a group (YuniKorn's ``ensureGroup``)."""
    ugm = p.ugm
    if ugm is None:
        return []
    limits = ugm.limits
    trees: dict[str, _UsageTree] = {}
    for app in _running(p):
        group = ugm.group_of(app)
        if group:
            _add_app(trees.setdefault(group, {}), app)
    for group, paths in limits.configured("group").items():
        _add_paths(trees.setdefault(group, {}), paths)
    return [
        {
            "groupName": group,
            "applications": sorted(tree["root"][1]),
            "queues": _usage_node(tree, partial(limits.group_cap, group)),
        }
        for group, tree in sorted(trees.items())
    ]


def _no_cap(path: str) -> Cap | None:
    return None


def _running(p: Partition) -> list[Application]:
    """The applications that count as running for the limits: they hold allocations."""
    return [a for a in p.applications.values() if a.queue is not None and a.allocations]


def _add_app(tree: _UsageTree, app: Application) -> None:
    assert app.queue is not None
    for queue in app.queue.chain:
        entry = tree.get(queue.path)
        if entry is None:
            entry = tree[queue.path] = ({}, [])
        add_into(entry[0], app.allocated)
        entry[1].append(app.application_id)


def _add_paths(tree: _UsageTree, paths: list[str]) -> None:
    for path in paths:
        parts = path.split(".")
        for end in range(1, len(parts) + 1):
            tree.setdefault(".".join(parts[:end]), ({}, []))


def _usage_node(
    tree: _UsageTree, cap_of: Callable[[str], Cap | None], path: str = "root"
) -> dict[str, Any]:
    resources, apps = tree[path]
    cap = cap_of(path)
    prefix = path + "."
    children = sorted(q for q in tree if q.startswith(prefix) and "." not in q[len(prefix) :])
    return {
        "queuePath": path,
        "resourceUsage": {name: v for name, v in resources.items() if v},
        "runningApplications": sorted(apps),
        "maxResources": dict(cap.max_resources) if cap is not None else {},
        "maxApplications": cap.max_applications if cap is not None else 0,
        "children": [_usage_node(tree, cap_of, child) for child in children],
    }


# ======================================================================= configuration
# The configuration in force, with the keys of queues.yaml (YuniKorn's GET /ws/v1/config):
# only what differs from the defaults, resources as quantities that parse back to the same
# value (vcore in milli-vcores, ``"1500m"``), so the document loads again as it is.
def config_info(config: SchedulerConfig) -> dict[str, Any]:
    """A parsed configuration as the ``queues.yaml`` document that gives it."""
    return {
        "partitions": [_partition_conf(p) for p in config.partitions],
        "checksum": config.checksum,
    }


def _partition_conf(p: PartitionConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"name": p.name, "queues": [_queue_conf(p.queue)]}
    if p.placement_rules:
        out["placementrules"] = [_rule_conf(r) for r in p.placement_rules]
    if p.limits:
        out["limits"] = [_limit_conf(lim) for lim in p.limits]
    if not p.preemption_enabled:  # absent is true (YuniKorn 1.3+)
        out["preemption"] = {"enabled": False}
    policy = p.node_sort_policy
    if policy.type != "fair" or policy.resource_weights:
        out["nodesortpolicy"] = {"type": policy.type}
        if policy.resource_weights:
            out["nodesortpolicy"]["resourceweights"] = dict(policy.resource_weights)
    if p.state_dump_file_path:
        out["statedumpfilepath"] = p.state_dump_file_path
    return out


def _queue_conf(q: QueueConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"name": q.name}
    if q.parent:
        out["parent"] = True
    resources = _resources_conf(q.guaranteed, q.max_resources)
    if resources:
        out["resources"] = resources
    if q.max_applications:
        out["maxapplications"] = q.max_applications
    if q.properties:
        out["properties"] = dict(q.properties)
    if q.submit_acl:
        out["submitacl"] = q.submit_acl
    if q.admin_acl:
        out["adminacl"] = q.admin_acl
    if q.child_template is not None:
        out["childtemplate"] = _template_conf(q.child_template)
    if q.limits:
        out["limits"] = [_limit_conf(lim) for lim in q.limits]
    if q.queues:
        out["queues"] = [_queue_conf(c) for c in q.queues]
    return out


def _template_conf(t: ChildTemplate) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if t.max_applications:
        out["maxapplications"] = t.max_applications
    if t.properties:
        out["properties"] = dict(t.properties)
    resources = _resources_conf(t.guaranteed, t.max_resources)
    if resources:
        out["resources"] = resources
    return out


def _rule_conf(r: PlacementRule) -> dict[str, Any]:
    out: dict[str, Any] = {"name": r.name}
    if r.create:
        out["create"] = True
    if r.value:
        out["value"] = r.value
    if r.parent is not None:
        out["parent"] = _rule_conf(r.parent)
    f = r.filter
    if f.type != "allow" or f.users or f.groups:
        out["filter"] = {"type": f.type}
        if f.users:
            out["filter"]["users"] = list(f.users)
        if f.groups:
            out["filter"]["groups"] = list(f.groups)
    return out


def _limit_conf(lim: Limit) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if lim.limit:
        out["limit"] = lim.limit
    if lim.users:
        out["users"] = list(lim.users)
    if lim.groups:
        out["groups"] = list(lim.groups)
    if lim.max_resources:
        out["maxresources"] = _quantities(lim.max_resources)
    if lim.max_applications:
        out["maxapplications"] = lim.max_applications
    return out


def _resources_conf(guaranteed: Res, max_resources: Res) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if guaranteed:
        out["guaranteed"] = _quantities(guaranteed)
    if max_resources:
        out["max"] = _quantities(max_resources)
    return out


def _quantities(res: Res) -> dict[str, str]:
    """Parsed resources as queues.yaml quantities: vcore is parsed in milli-vcores."""
    return {name: f"{v}m" if name == "vcore" else str(v) for name, v in res.items()}
