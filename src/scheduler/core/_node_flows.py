"""A partition's nodes as the RM reports them: added (with the allocations it recovers on
them), updated, drained, made schedulable again, and removed.

``PartitionNodes`` changes the partition's node map, node index, capacity and usage in one
step per update, and hands a node's allocations to their applications' actors: those the RM
reports on a new node (recovery), and those lost with a removed node. The partition's actor
calls ``update`` for each ``NodesUpdated``; everything here runs in the partition's turn:
plain synchronous code.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduler import si
from scheduler.core._counters import SchedulingCounters
from scheduler.core._events import AllocationSpec, NodeUpdate
from scheduler.core._partition import Partition
from scheduler.objects._asks import Allocation
from scheduler.objects._nodes import Node

__all__ = ["PartitionNodes"]


class PartitionNodes:
    """The node handling of ``partition``: each RM node update, applied; the nodes that
    failed or were decommissioned are counted in ``counters``."""

    def __init__(self, partition: Partition, counters: SchedulingCounters) -> None:
        self.partition = partition
        self.counters = counters

    def update(self, updates: Iterable[NodeUpdate]) -> None:
        """Apply the RM's node updates, in order; an update for an unknown node is an event."""
        p = self.partition
        for update in updates:
            action = update.action
            node = p.nodes.get(update.node_id)
            if action == si.ActionFromRM.CREATE:
                self._add_node(update)
            elif node is None:
                p.log.warning("node update for unknown node {}", update.node_id)
                p.outbox.event(
                    si.EventRecordType.NODE,
                    update.node_id,
                    "NodeNotFound",
                    f"{action.name} for unknown node {update.node_id}",
                )
            elif action == si.ActionFromRM.UPDATE:
                self._update_node(node, update)
            elif action == si.ActionFromRM.DRAIN_NODE:
                self._set_schedulable(node, False)
            elif action == si.ActionFromRM.DRAIN_TO_SCHEDULABLE:
                self._set_schedulable(node, True)
            elif action == si.ActionFromRM.DECOMISSION:
                self.counters.decommissioned_nodes += 1
                self._remove_node(node)

    def _add_node(self, update: NodeUpdate) -> None:
        p = self.partition
        node_id = update.node_id
        if node_id in p.nodes:
            self._reject_node(node_id, f"node {node_id} already exists in partition {p.name}")
            return
        node = Node(
            node_id, dict(update.capacity or {}), dict(update.occupied or {}), update.attributes
        )
        problem = self._check_existing(update.existing)
        if problem:
            self.counters.failed_nodes += 1
            self._reject_node(node_id, problem)
            return
        p.nodes[node_id] = node
        p.capacity_changed({}, node.capacity)
        p.index.add(node)
        for spec in update.existing:
            self._recover(spec, node)
        p.index.update(node)
        p.outbox.add("node_accepted", si.AcceptedNode(node_id=node_id))
        p.outbox.event(
            si.EventRecordType.NODE,
            node_id,
            "NodeAdded",
            f"node {node_id} added to partition {p.name}",
        )
        p.wake()

    def _reject_node(self, node_id: str, reason: str) -> None:
        p = self.partition
        p.log.info("node {} rejected: {}", node_id, reason)
        p.outbox.add("node_rejected", si.RejectedNode(node_id=node_id, reason=reason))

    def _check_existing(self, existing: tuple[AllocationSpec, ...]) -> str:
        p = self.partition
        seen: set[str] = set()
        for spec in existing:
            app = p.applications.get(spec.application_id)
            if app is None or app.queue is None:
                return (
                    f"existing allocation {spec.uuid} names application "
                    f"{spec.application_id}, which is not in partition {p.name}"
                )
            if spec.uuid in seen or spec.uuid in app.allocations:
                return f"existing allocation {spec.uuid} is already allocated"
            seen.add(spec.uuid)
        return ""

    def _recover(self, spec: AllocationSpec, node: Node) -> None:
        """An allocation the RM reports on a new node: on the node here, the rest is the
        application's."""
        p = self.partition
        now = p.clock()
        alloc = Allocation(
            uuid=spec.uuid,
            allocation_key=spec.allocation_key,
            application_id=spec.application_id,
            partition=p.name,
            node_id=node.node_id,
            resource=dict(spec.resource),
            priority=spec.priority,
            tags=spec.tags,
            task_group_name=spec.task_group_name,
            placeholder=spec.placeholder,
            request_time=now,
            allocation_time=now,
        )
        node.add_allocation(alloc)
        p.usage_changed(node)
        p.owners[spec.application_id].recover(alloc)

    def _update_node(self, node: Node, update: NodeUpdate) -> None:
        if update.capacity is not None:
            old, node.capacity = node.capacity, dict(update.capacity)
            self.partition.capacity_changed(old, node.capacity)
            self.partition.usage_changed(node)
        if update.occupied is not None:
            node.occupied = dict(update.occupied)
        if update.attributes is not None:
            node.attributes = dict(update.attributes)
        node.refresh_available()
        self.partition.index.refresh(node)
        self.partition.wake()

    def _set_schedulable(self, node: Node, schedulable: bool) -> None:
        p = self.partition
        node.schedulable = schedulable
        if schedulable:
            if node.reserved is None:
                p.index.add(node)
            p.wake()
        else:
            if node.reserved is not None:
                p.reservations.release(node.reserved)
            p.index.discard(node)

    def _remove_node(self, node: Node) -> None:
        p = self.partition
        if node.reserved is not None:
            p.reservations.release(node.reserved)
        p.index.discard(node)
        del p.nodes[node.node_id]
        p.capacity_changed(node.capacity, {})
        p.usage_changed(node, gone=True)
        gone = f"Node {node.node_id} Removed"  # YuniKorn's message (context.go)
        for alloc in list(node.allocations.values()):
            node.remove_allocation(alloc.uuid)
            owner = p.owners.get(alloc.application_id)
            if owner is not None:
                owner.allocation_lost(alloc, gone)
            else:
                p.outbox.release(alloc, si.TerminationType.STOPPED_BY_RM, gone)
            p.wake()  # the queues have quota back
        p.outbox.event(
            si.EventRecordType.NODE,
            node.node_id,
            "NodeRemoved",
            f"node {node.node_id} removed from partition {p.name}",
        )
