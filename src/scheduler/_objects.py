"""Allocations, asks and nodes: the plain objects a partition's actors own.

No anyio here: these are sync classes, testable without an event loop (STYLE 2).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import count

from sortedcontainers import SortedList

from scheduler import si
from scheduler._resources import Res, add_into, sub, sub_into, to_si

__all__ = ["Allocation", "Ask", "Node", "NodeIndex", "new_uuid"]

_uuid_prefix = format(id(object()) & 0xFFFFFF, "06x")
_uuid_counter = count(1)


def new_uuid() -> str:
    """A process-unique allocation id, cheap enough for the hot path."""
    return f"{_uuid_prefix}-{next(_uuid_counter):012d}"


class Allocation:
    """One allocation of an ask on a node. Identity (``uuid``) never changes."""

    __slots__ = (
        "allocation_key",
        "allocation_time",
        "application_id",
        "node_id",
        "partition",
        "placeholder",
        "priority",
        "release_pending",
        "request_time",
        "resource",
        "tags",
        "task_group_name",
        "uuid",
    )

    def __init__(
        self,
        uuid: str,
        allocation_key: str,
        application_id: str,
        partition: str,
        node_id: str,
        resource: Res,
        priority: int = 0,
        tags: Mapping[str, str] | None = None,
        task_group_name: str = "",
        placeholder: bool = False,
        request_time: float = 0.0,
        allocation_time: float = 0.0,
    ) -> None:
        self.uuid = uuid
        self.allocation_key = allocation_key
        self.application_id = application_id
        self.partition = partition
        self.node_id = node_id
        self.resource = resource
        self.priority = priority
        self.tags = dict(tags) if tags else {}
        self.task_group_name = task_group_name
        self.placeholder = placeholder
        self.request_time = request_time
        self.allocation_time = allocation_time
        # Released to the RM and waiting for its confirmation (the protocol's own in-between).
        self.release_pending: si.TerminationType | None = None

    def to_si(self, resource: si.Resource | None = None) -> si.Allocation:
        """The SI message; ``resource`` is this allocation's resource already converted."""
        return si.Allocation(
            allocation_key=self.allocation_key,
            allocation_tags=self.tags,
            uuid=self.uuid,
            resource_per_alloc=resource if resource is not None else to_si(self.resource),
            priority=self.priority,
            node_id=self.node_id,
            application_id=self.application_id,
            partition_name=self.partition,
            task_group_name=self.task_group_name,
            placeholder=self.placeholder,
        )

    def __repr__(self) -> str:
        where = f"{self.application_id}/{self.allocation_key} on {self.node_id}"
        return f"<Allocation {self.uuid} {where}>"


class Ask:
    """A pending request of an application: ``pending`` more allocations of ``resource``."""

    __slots__ = (
        "allocation_key",
        "application_id",
        "created",
        "execution_timeout_ms",
        "max_allocations",
        "originator",
        "pending",
        "placeholder",
        "priority",
        "required_node",
        "resource",
        "seq",
        "si_resource",
        "size",
        "sort_key",
        "tags",
        "task_group_name",
    )

    def __init__(
        self,
        *,
        allocation_key: str,
        application_id: str,
        resource: Res,
        max_allocations: int = 1,
        priority: int = 0,
        tags: Mapping[str, str] | None = None,
        task_group_name: str = "",
        placeholder: bool = False,
        originator: bool = False,
        execution_timeout_ms: int = 0,
        required_node: str = "",
        created: float = 0.0,
        seq: int = 0,
    ) -> None:
        self.allocation_key = allocation_key
        self.application_id = application_id
        self.resource = resource
        self.max_allocations = max_allocations
        self.pending = max_allocations
        self.priority = priority
        self.tags = dict(tags) if tags else {}
        self.task_group_name = task_group_name
        self.placeholder = placeholder
        self.originator = originator
        self.execution_timeout_ms = execution_timeout_ms
        self.required_node = required_node
        self.created = created
        self.seq = seq
        # Asks sort by priority (high first) and then by age (old first).
        self.sort_key = (-priority, seq)
        # What the hot path needs over and over: a hashable size and the SI form.
        self.size = tuple(resource.items())
        self.si_resource = to_si(resource)

    def __repr__(self) -> str:
        return f"<Ask {self.application_id}/{self.allocation_key} pending={self.pending}>"


class Node:
    """A node of a partition: capacity, what other schedulers occupy, and our allocations."""

    __slots__ = (
        "allocated",
        "allocations",
        "attributes",
        "available",
        "capacity",
        "index_key",
        "node_id",
        "occupied",
        "schedulable",
    )

    def __init__(
        self,
        node_id: str,
        capacity: Res,
        occupied: Res | None = None,
        attributes: Mapping[str, str] | None = None,
    ) -> None:
        self.node_id = node_id
        self.capacity = capacity
        self.occupied = occupied or {}
        self.attributes = dict(attributes) if attributes else {}
        self.allocated: Res = {}
        self.allocations: dict[str, Allocation] = {}
        self.schedulable = True
        self.available: Res = {}
        self.index_key: tuple[float, str] | None = None
        self.refresh_available()

    def refresh_available(self) -> None:
        avail = sub(self.capacity, self.occupied)
        sub_into(avail, self.allocated)
        self.available = avail

    def add_allocation(self, alloc: Allocation) -> None:
        self.allocations[alloc.uuid] = alloc
        allocated = self.allocated
        available = self.available
        for name, v in alloc.resource.items():
            allocated[name] = allocated.get(name, 0) + v
            left = available.get(name, 0) - v
            if left:
                available[name] = left
            else:
                available.pop(name, None)

    def remove_allocation(self, uuid: str) -> Allocation | None:
        alloc = self.allocations.pop(uuid, None)
        if alloc is not None:
            sub_into(self.allocated, alloc.resource)
            add_into(self.available, alloc.resource)
        return alloc

    def __repr__(self) -> str:
        return (
            f"<Node {self.node_id} allocations={len(self.allocations)} available={self.available}>"
        )


DEFAULT_WEIGHTS: dict[str, float] = {"vcore": 1.0, "memory": 1.0}


class NodeIndex:
    """Schedulable nodes in the order a node sorting policy prefers them.

    ``fair`` puts the least used node first; ``binpacking`` the most used. The index is a
    sorted list keyed by (score, node id), so choosing a node never scans every node and a
    node whose usage changes moves in O(log n).
    """

    POLICIES = ("fair", "binpacking")

    def __init__(self, policy: str = "fair", weights: Mapping[str, float] | None = None) -> None:
        if policy not in self.POLICIES:
            raise ValueError(f"unknown node sorting policy {policy!r}")
        self.policy = policy
        self.weights = dict(weights) if weights else dict(DEFAULT_WEIGHTS)
        self._binpacking = policy == "binpacking"
        self._keys: SortedList = SortedList()
        self._nodes: dict[str, Node] = {}
        # Per node: (resource name, weight / (capacity * total weight)) for the weighted
        # resources the node has, so a score is one short sum.
        self._factors: dict[str, tuple[tuple[str, float], ...]] = {}

    def _set_factors(self, node: Node) -> None:
        weights = [(n, w, node.capacity.get(n, 0)) for n, w in self.weights.items()]
        present = [(n, w, c) for n, w, c in weights if c > 0]
        total = sum(w for _, w, _ in present)
        self._factors[node.node_id] = tuple((n, w / (c * total)) for n, w, c in present)

    def _key(self, node: Node) -> tuple[float, str]:
        allocated = node.allocated
        used = 0.0
        for name, factor in self._factors[node.node_id]:
            used += allocated.get(name, 0) * factor
        return (1.0 - used if self._binpacking else used, node.node_id)

    def refresh(self, node: Node) -> None:
        """Re-sort ``node`` after its capacity changed."""
        if node.index_key is not None:
            self._set_factors(node)
            self.update(node)

    def add(self, node: Node) -> None:
        if node.node_id in self._nodes:
            self.update(node)
            return
        self._set_factors(node)
        node.index_key = self._key(node)
        self._keys.add(node.index_key)
        self._nodes[node.node_id] = node

    def discard(self, node: Node) -> None:
        if self._nodes.pop(node.node_id, None) is not None and node.index_key is not None:
            self._keys.remove(node.index_key)
            node.index_key = None
            del self._factors[node.node_id]

    def update(self, node: Node) -> None:
        """Re-sort ``node`` after its usage changed."""
        old = node.index_key
        if old is None:
            return
        key = self._key(node)
        if key != old:
            keys = self._keys
            keys.remove(old)
            node.index_key = key
            keys.add(key)

    def __iter__(self) -> Iterator[Node]:
        nodes = self._nodes
        for _, node_id in self._keys:
            yield nodes[node_id]

    def first_fit(
        self, res: Mapping[str, int], exclude: set[str] | frozenset[str] = frozenset()
    ) -> Node | None:
        """The first node in policy order, not in ``exclude``, with ``res`` available."""
        nodes = self._nodes
        items = tuple(res.items())
        # SortedList keeps its keys in a list of sorted sublists (``_lists``); walking them
        # directly avoids building an iterator chain for what is usually the first node.
        for sublist in self._keys._lists:
            for _, node_id in sublist:
                if exclude and node_id in exclude:
                    continue
                node = nodes[node_id]
                available = node.available
                for name, v in items:
                    if v > available.get(name, 0):
                        break
                else:
                    return node
        return None

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._nodes
