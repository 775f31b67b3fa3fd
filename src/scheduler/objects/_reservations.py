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
    from scheduler.objects._resources import Size

__all__ = ["Reservations"]


class Reservations:
    """The reserved nodes of one partition, by node id in creation order."""

    __slots__ = ("by_node", "partition", "seq", "settled", "unsettled", "woken")

    def __init__(self, partition: PartitionState) -> None:
        self.partition = partition
        self.by_node: dict[str, Reservation] = {}
        # What the pass needs to look at (``scheduler.core._walk``): a reservation whose
        # ask found room neither on its node nor on any other is ``settled`` (by the size
        # of its ask) until its node gains room (``woken``) or a node has room for its
        # size; every other one is ``unsettled`` and looked at on every pass.
        self.unsettled: dict[str, Reservation] = {}
        self.settled: dict[Size, dict[str, Reservation]] = {}
        self.woken: list[Reservation] = []
        self.seq = 0

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
        self.seq += 1
        reservation = Reservation(app.application_id, ask, node, p.clock(), self.seq, self.woken)
        node.reserved = reservation
        app.hold(reservation)
        self.by_node[node.node_id] = reservation
        self.unsettled[node.node_id] = reservation
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
        reservation.woken = None
        if self.by_node.get(node.node_id) is reservation:
            del self.by_node[node.node_id]
            if reservation.settled:
                self._take_settled(reservation)
            else:
                self.unsettled.pop(node.node_id, None)
        app = p.applications.get(reservation.application_id)
        if app is not None:
            app.unhold(node.node_id)
        if p.preemptions:
            rec = p.preemptions.of(reservation.ask)
            if rec is not None and rec.node is node:
                p.preemptions.cancel(rec)  # its ask stops waiting for the victims
        if node.schedulable and p.nodes.get(node.node_id) is node:
            if p.in_pass:
                p.held_back.append(node)  # nothing frees up during a pass: after it
            else:
                p.index.add(node)
                p.wake()

    def settle(self, reservation: Reservation) -> None:
        """``reservation``'s ask found room neither on its node nor on any other."""
        node_id = reservation.node.node_id
        if reservation.settled or self.unsettled.pop(node_id, None) is not reservation:
            return
        reservation.settled = True
        self.settled.setdefault(reservation.ask.size, {})[node_id] = reservation

    def unsettle(self, reservation: Reservation) -> None:
        """The pass looks at ``reservation`` again (its node gained room, or a node has
        room for its size)."""
        if reservation.settled:
            self._take_settled(reservation)
            self.unsettled[reservation.node.node_id] = reservation

    def _take_settled(self, reservation: Reservation) -> None:
        reservation.settled = False
        size = reservation.ask.size
        same = self.settled[size]
        del same[reservation.node.node_id]
        if not same:
            del self.settled[size]

    def to_look_at(self) -> list[Reservation]:
        """The reservations whose node may have room now: the unsettled and the woken
        (in no set order: ``Reservation.seq`` is their creation order); the settled of a
        size some node has room for are the caller's to add (``settled``)."""
        woken = self.woken
        if woken:
            for reservation in woken:
                if self.by_node.get(reservation.node.node_id) is reservation:
                    self.unsettle(reservation)
            woken.clear()
        return list(self.unsettled.values())

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
