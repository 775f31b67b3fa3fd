"""What YuniKorn's web UI reads on its dashboard and node charts, built from the core's
answers: ``/ws/v1/clusters`` (``dao.ClusterDAOInfo``) and
``/ws/v1/scheduler/node-utilizations`` (``dao.PartitionNodesUtilDAOInfo``, YuniKorn 1.5+).
Plain functions of ``Core.get_partitions``, ``Core.get_resource_managers`` and
``Core.get_nodes`` answers, so each can be tested on a made-up answer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

from scheduler.core import TERMINAL_STATES, AppState

__all__ = ["CLUSTER_NAME", "cluster_info", "node_utilization"]

#: The name YuniKorn gives every cluster (``getClusterJSON``).
CLUSTER_NAME: Final = "kubernetes"
_PENDING: Final = frozenset({AppState.NEW, AppState.ACCEPTED})
_BUCKETS: Final = 10


def cluster_info(
    partition: Mapping[str, Any], rms: Iterable[Mapping[str, Any]], start_time: int
) -> dict[str, Any]:
    """One partition as YuniKorn 1.2's ``getClusterJSON`` shows it: the counts are decimal
    strings. As there, the total and the running applications are the live (not
    terminated) ones, the total and the running containers the allocations held, the total
    and the active nodes every node. Where YuniKorn 1.2 leaves a count empty and the core
    knows it, the core's count is given: failed, completed (terminated ones still kept) and
    pending (New or Accepted) applications. Failed and pending containers and failed nodes
    stay empty, as in YuniKorn. YuniKorn 1.8 keeps only the first four fields."""
    states: Mapping[str, int] = partition["applications"]
    live = sum(
        n for state, n in states.items() if state != "total" and state not in TERMINAL_STATES
    )
    containers = str(partition["totalContainers"])
    nodes = str(partition["totalNodes"])
    return {
        "startTime": start_time,
        "rmBuildInformation": [dict(rm["buildInfo"]) for rm in rms if rm["state"] != "Stopped"],
        "partition": partition["name"],
        "clusterName": CLUSTER_NAME,
        "totalApplications": str(live),
        "failedApplications": str(states.get(AppState.FAILED, 0)),
        "pendingApplications": str(sum(states.get(s, 0) for s in _PENDING)),
        "runningApplications": str(live),
        "completedApplications": str(states.get(AppState.COMPLETED, 0)),
        "totalContainers": containers,
        "failedContainers": "",
        "pendingContainers": "",
        "runningContainers": containers,
        "activeNodes": nodes,
        "totalNodes": nodes,
        "failedNodes": "",
    }


def node_utilization(cluster_id: str, partition: str, nodes: Iterable[Mapping[str, Any]]) -> Any:
    """The nodes of one partition in ten buckets of utilization (0-10%, ..., 90-100%) per
    resource type a node has, as YuniKorn 1.8's ``getPartitionNodesUtilJSON``: a node's
    percentage is truncated, a bucket holds the nodes above its lower bound up to and
    including its upper one (0% in the first), a resource the node has and nothing uses
    counts as 0%. A node used beyond its capacity goes to the last bucket, where YuniKorn
    would index past it. Types are sorted by name (YuniKorn: map order); as there, an empty
    bucket has no ``numOfNodes`` or ``nodeNames`` and a partition without nodes no
    ``utilizations``."""
    buckets: dict[str, list[list[str]]] = {}
    for node in nodes:
        capacity: Mapping[str, int] = node["capacity"]
        allocated: Mapping[str, int] = node["allocated"]
        for name, cap in capacity.items():
            used = allocated.get(name, 0)
            pct = 0 if used <= 0 else 100 if cap <= 0 else min(used * 100 // cap, 2**31 - 1)
            index = min(max(math.ceil(pct / 10) - 1, 0), _BUCKETS - 1)
            rows = buckets.setdefault(name, [[] for _ in range(_BUCKETS)])
            rows[index].append(node["nodeID"])
    info: dict[str, Any] = {"clusterId": cluster_id, "partition": partition}
    if buckets:
        info["utilizations"] = [
            {"type": name, "utilization": [_bucket(k, ids) for k, ids in enumerate(rows)]}
            for name, rows in sorted(buckets.items())
        ]
    return info


def _bucket(k: int, node_ids: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"bucketName": f"{k * 10}-{(k + 1) * 10}%"}
    if node_ids:
        out["numOfNodes"] = len(node_ids)
        out["nodeNames"] = node_ids
    return out
