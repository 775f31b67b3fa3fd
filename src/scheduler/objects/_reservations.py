"""Reservations: a node held for one ask that fits the node but not its free room.

YuniKorn's reservations, owned by the partition: while reserved a node leaves the node
index, so nothing else lands on it; the ask gets it as soon as enough frees up, or any
other node that fits first (``scheduler.core._pass``). A node holds one reservation; an
ask may hold one per pending allocation (YuniKorn's ``canAskReserve``). A reservation goes
when its ask is allocated (one per allocation), released or replaced, its application
leaves, or its node drains or goes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from scheduler import si
from scheduler.objects._nodes import Reservation

if TYPE_CHECKING:
    from scheduler.objects._application import Application
    from scheduler.objects._asks import Ask
    from scheduler.objects._nodes import Node
    from scheduler.objects._partition import PartitionState

__all__ = ["Reservations"]


class Reservations:
    """The reserved nodes of one partition, by node id in creation order."""

    __slots__ = ("by_node", "partition")

    def __init__(self, partition: PartitionState) -> None:
        self.partition = partition
        self.by_node: dict[str, Reservation] = {}

    def __bool__(self) -> bool:
        return bool(self.by_node)

    def __len__(self) -> int:
        return len(self.by_node)

    def __iter__(self) -> Iterator[Reservation]:
        return iter(self.by_node.values())

    def reserve(self, app: Application, ask: Ask, node: Node) -> Reservation | None:
        """Re-check and reserve ``node`` for ``ask``; None (nothing changed) if it no longer may."""
        p = self.partition
        if (
            node.reserved is not None
            or not node.schedulable
            or p.nodes.get(node.node_id) is not node
            or app.asks.get(ask.allocation_key) is not ask
            or p.applications.get(app.application_id) is not app
            or app.reserved_count(ask) >= ask.pending
        ):
            return None
        reservation = Reservation(app.application_id, ask, node, p.clock())
        node.reserved = reservation
        app.hold(reservation)
        self.by_node[node.node_id] = reservation
        p.index.discard(node)
        p.outbox.event(
            si.EventRecordType.REQUEST,
            ask.allocation_key,
            "AskReserved",
            f"node {node.node_id} reserved for ask {ask.allocation_key}",
            group=app.application_id,
        )
        return reservation

    def release(self, reservation: Reservation) -> None:
        """The node is free again (back in the index, if it still takes allocations)."""
        p = self.partition
        node = reservation.node
        node.reserved = None
        self.by_node.pop(node.node_id, None)
        app = p.applications.get(reservation.application_id)
        if app is not None:
            app.unhold(node.node_id)
        if node.schedulable and p.nodes.get(node.node_id) is node:
            p.index.add(node)
            p.wake()

    def release_ask(self, app: Application, ask: Ask) -> None:
        """Every node reserved for ``ask``."""
        for reservation in app.reservations_of(ask):
            self.release(reservation)

    def release_application(self, app: Application) -> None:
        for reservation in list(app.reservations.values()):
            self.release(reservation)

    def after_allocation(self, app: Application, ask: Ask, node: Node) -> None:
        """``ask`` got one allocation (or a placeholder to replace) on ``node``: one of its
        reservations goes, the one on ``node`` if it has one there, else its oldest
        (YuniKorn's ``tryNodes`` and ``allocate``: ``AllocatedReserved`` unreserves one
        node); and never more reservations than pending allocations stay."""
        held = app.reservations_of(ask)
        if not held:
            return
        reserved = node.reserved
        self.release(reserved if reserved is not None and reserved.ask is ask else held[0])
        held = app.reservations_of(ask)
        while len(held) > ask.pending:
            self.release(held.pop())
