"""The walk of a scheduling pass: the next proposal, made without changing anything.

``Walk.propose`` reads queues, applications and nodes directly (no mailbox round trip per
queue, application or node) and returns the next ``Proposal``; the pass
(``scheduler.core._pass``) commits it. The walk goes down the queues in their order, then
the applications of a leaf, then their pending asks in order, and proposes the first ask a
node has room for (or that may reserve one). By shape (``Walk.by_shape``): the pending asks
of an application are kept in groups of one shape (``scheduler.objects._pending``), and a
group, an application, a leaf or a whole subtree that nothing in it can be placed is
passed over as a whole, so a pass costs what can change, not what waits. The ask-by-ask
walk is kept: for an RM that checks predicates (an ask the RM refused a node for is its own
case), and as the reference the tests hold the walk by shape to: both make the same
proposals in the same order.

``Reserve`` is the reservations' part: which ask may reserve a node, and which node.
"""

from __future__ import annotations

from collections.abc import Iterable
from heapq import heapify, heappop, heapreplace, merge
from typing import TYPE_CHECKING, Final

import msgspec

from scheduler.core._counters import SchedulingCounters
from scheduler.objects._application import Application, AppState
from scheduler.objects._asks import Allocation, Ask
from scheduler.objects._nodes import Node, Reservation
from scheduler.objects._pending import Group, one_by_one, order
from scheduler.objects._resources import Size, fits, fits_under_max

if TYPE_CHECKING:
    from scheduler.core._partition import Partition
    from scheduler.gangs._permit import Gang
    from scheduler.objects._queue import Queue
    from scheduler.objects._ugm import Charge

__all__ = ["MANY_SHAPES", "SCHEDULABLE_STATES", "Proposal", "Reserve", "Walk"]

SCHEDULABLE_STATES = frozenset(
    {AppState.ACCEPTED, AppState.STARTING, AppState.RUNNING, AppState.COMPLETING}
)
# An enum member read for every application walked: a module constant is a fast global
# lookup, where ``AppState.ACCEPTED`` is a slow class attribute lookup in 3.11.
_ACCEPTED: Final = AppState.ACCEPTED
# More groups of asks than this at one priority of an application: walk them ask by ask.
MANY_SHAPES: Final = 32


class Proposal(msgspec.Struct, gc=False):
    """A read-only scheduling decision: allocate one of ``ask`` on ``node``."""

    application: Application
    ask: Ask
    node: Node
    reserve: bool = False  # reserve the node for the ask instead of allocating
    replace: Allocation | None = None  # the placeholder the (real) ask takes the place of
    # Made by the walk with every check ``commit`` makes (``_propose_in_leaf``); only a
    # commit in the same turn may rely on it.
    checked: bool = False

    @property
    def allocate(self) -> bool:
        """What the RM's predicates are asked: false for a reservation and for a
        replacement on its placeholder's node (YuniKorn's ``preReserveConditions``)."""
        if self.reserve:
            return False
        return self.replace is None or self.replace.node_id != self.node.node_id

    def __repr__(self) -> str:
        what = "reserve" if self.reserve else "replace" if self.replace else "allocate"
        return f"<Proposal {what} {self.ask!r} on {self.node.node_id}>"


class Reserve:
    """Reservations in the walk: whether an ask may reserve a node now, and which node."""

    def __init__(self, partition: Partition, counters: SchedulingCounters | None = None) -> None:
        self.partition = partition
        # The partition actor's counters (the sorts of all nodes are timed there); a walk
        # run alone (domain tests) keeps its own.
        self.counters = counters if counters is not None else SchedulingCounters()
        # The earliest time a young ask that found no room may reserve: a pass sets it,
        # and the partition's actor arms a timer for it.
        self.reserve_due: float | None = None
        self._no_reserve: set[Size] = set()  # sizes no free node could hold (this pass)
        # In a pass (``schedule``): per size, the nodes a reservation may take, closest
        # first (``_closest_in_pass``); None outside a pass, where each look scans them.
        self.closest: dict[Size, list[tuple[float, int, Node]]] | None = None
        # An RM that checks predicates: the walk goes ask by ask, and a reservation is put
        # to its predicates (``allocate`` false) before it is made.
        self.checks_predicates = False
        # While the groups of one priority are looked at out of order: the young asks met
        # (``_young``), kept until the walk knows how far the walk ask by ask would go.
        self._young: list[tuple[Ask, float]] | None = None

    def _due(self, ask: Ask, due: float) -> None:
        """``ask``, too young to reserve, would reserve at ``due``: the pass's wake-up
        time is the earliest such time of the asks the walk looked at (as the walk ask by
        ask meets them: the pass runs at that time, and at no other)."""
        if self._young is not None:
            self._young.append((ask, due))
        elif self.reserve_due is None or due < self.reserve_due:
            self.reserve_due = due

    def _must_walk(self, size: Size, oldest: float) -> bool:
        """Whether the asks of ``size`` (none older than ``oldest``) of a leaf with no node
        with room for them must be walked: one may reserve a node now (old enough, and a
        free node could hold it), or one too young to reserve may set an earlier wake-up time than
        the pass has (the walk ask by ask would meet it, so this walk must too)."""
        p = self.partition
        due = oldest + p.timeouts.reservation_delay
        if p.clock() < due:
            return self.reserve_due is None or due < self.reserve_due
        return size not in self._no_reserve

    def _reserve_in_group(
        self, app: Application, group: Group, first: Ask, skip: set[int]
    ) -> Proposal | None:
        """No node has room for the asks of ``group``: the first of them (from ``first``)
        that may reserve a node reserves the closest, as ``_node_to_reserve`` decides ask
        by ask. The asks are in age order, so the first too young to reserve ends the
        look, and the asks before it are only those that reserved already."""
        p = self.partition
        now = p.clock()
        delay = p.timeouts.reservation_delay
        due = first.created + delay
        if now < due:  # the first is too young to reserve, and so is every one after it
            self._due(first, due)
            return None
        if first.size not in self._no_reserve:
            # The asks before ``first`` were all ruled out earlier in this pass.
            for ask in group.values():
                if skip and id(ask) in skip:
                    continue
                due = ask.created + delay
                if now < due:
                    self._due(ask, due)
                    return None
                if app.reserved_count(ask) < ask.pending:
                    node = self._closest(ask.size)
                    if node is not None:
                        return Proposal(app, ask, node, reserve=True)
                    break  # no free node could hold the size
            else:
                return None
        # No free node could hold them: the first too young to reserve leaves its time.
        young = group.first_due_after(now, delay)
        if young is not None:
            self._due(young, young.created + delay)
        return None

    def _node_to_reserve(self, app: Application, ask: Ask) -> Node | None:
        """The free node that comes closest to fitting ``ask``, if the ask may reserve one.

        An ask may reserve once it has waited ``reservation_delay`` and has fewer
        reservations than pending allocations; the node must be able to hold it at all
        (its capacity fits). Closest: the smallest sum of missing fractions (YuniKorn's
        fit-in score). A younger ask leaves a wake-up time for the pass's timer.

        With an RM that checks predicates the node is put to them (``allocate`` false)
        before it is reserved; nodes they refused to allocate the ask on are candidates
        all the same. An ask whose reservation they refused reserves nothing until the
        cluster changes: the same node would be the closest again (YuniKorn's
        ``tryNodes`` asks ``preReserveConditions`` of its one candidate, and reserves
        nothing when refused).
        """
        p = self.partition
        if ask.required_node:
            return None
        due = ask.created + p.timeouts.reservation_delay
        if p.clock() < due:
            self._due(ask, due)
            return None
        if ask.size in self._no_reserve or app.reserved_count(ask) >= ask.pending:
            return None
        if p.refused_reserve and id(ask) in p.refused_reserve:
            return None
        return self._closest(ask.size)

    def _elsewhere(self, ask: Ask, no_node: set[Size]) -> Node | None:
        """A node with room for reserved ``ask`` besides its reserved ones (YuniKorn's
        ``tryNodesNoReserve``), none the RM's predicates refused it."""
        p = self.partition
        refused = p.refused.get(id(ask)) if p.refused else None
        if refused:
            return p.index.first_fit(ask.size, refused)
        if ask.size in no_node:
            return None
        other = p.index.first_fit(ask.size)
        if other is None:
            no_node.add(ask.size)
        return other

    def _required_node(self, ask: Ask) -> Node | None:
        """The node ``ask`` must run on, if it has room for it now and the RM's predicates
        did not refuse it for the ask (else the ask waits until the cluster changes)."""
        p = self.partition
        node = p.nodes.get(ask.required_node)
        refused = p.refused.get(id(ask)) if p.refused else None
        if (
            node is not None
            and not (refused and node.node_id in refused)
            and node.schedulable
            and (node.reserved is None or node.reserved.ask is ask)
            and fits(ask.resource, node.available)
        ):
            return node
        return None

    def _closest(self, size: Size) -> Node | None:
        """The free node that comes closest to holding ``size`` (none: the size goes to
        ``_no_reserve`` for the pass)."""
        if self.closest is not None:
            return self._closest_in_pass(size)
        best: Node | None = None
        best_score = 0.0
        for node in self.partition.index.nodes():
            score = _missing(node, size)
            if score is not None and (best is None or score < best_score):
                best, best_score = node, score
        if best is None:
            self._no_reserve.add(size)
        return best

    def _closest_in_pass(self, size: Size) -> Node | None:
        """``_node_to_reserve``'s node for ``size`` in a pass, from a heap of the indexed
        nodes by (score, order) made at the first look in the pass: each reservation
        takes a node out of the index, and each allocation only raises a node's score;
        nothing frees up during a pass (a node whose reservation ends is held back until
        after it), so the top, checked again, is the node the scan of every node would
        find. A pass that reserves every node costs N log N, not N²."""
        assert self.closest is not None
        index = self.partition.index
        heap = self.closest.get(size)
        if heap is None:
            clock = self.partition.clock
            start = clock()  # YuniKorn's node sorting latency: the pass's only sort of all
            heap = []
            for order, node in enumerate(index.nodes()):
                score = _missing(node, size)
                if score is not None:
                    heap.append((score, order, node))
            heapify(heap)
            self.closest[size] = heap
            self.counters.observe_node_sorting(clock() - start)
        by_id = index.by_id
        while heap:
            score, order, node = heap[0]
            if by_id.get(node.node_id) is not node:
                heappop(heap)  # reserved (or gone) since
                continue
            current = _missing(node, size)
            if current is None:
                heappop(heap)  # pragma: no cover - a pass changes no capacity
            elif current != score:
                heapreplace(heap, (current, order, node))  # it was allocated to since
            else:
                return node
        self._no_reserve.add(size)
        return None


def _seq(reservation: Reservation) -> int:
    return reservation.seq


def _missing(node: Node, size: Size) -> float | None:
    """How far ``node``'s free room is from holding ``size``: the sum of the missing
    fractions (YuniKorn's fit-in score); None if its capacity cannot hold it at all."""
    capacity = node.capacity
    available = node.available
    score = 0.0
    for name, v in size:
        if v > capacity.get(name, 0):
            return None
        free = available.get(name, 0)
        if free < v:
            score += (v - free) / v
    return score


class Walk(Reserve):
    """The proposals of one partition's pass."""

    def __init__(self, partition: Partition, counters: SchedulingCounters | None = None) -> None:
        super().__init__(partition, counters)
        # Walk the pending asks of an application by shape (its asks grouped by size, a
        # size no node or quota can hold skipped as a whole) rather than ask by ask. The
        # two place the same asks on the same nodes in the same order; the ask-by-ask walk
        # is kept for an RM that checks predicates, and as the reference the tests hold
        # the walk by shape to.
        self.by_shape = True
        self._reserved = partition.reservations.by_node  # the same dict, read on every pass
        self._root = partition.root
        # A member of a Strict permit gang failed: the walk stops there, the group rolls
        # back (``PermitGangs.after_propose``) and the pass walks again with its room free.
        self._walk_stopped = False
        self._stopped_at: Ask | None = None  # the member where the walk stopped

    # ========================================================================= proposals
    def propose(
        self, skip: set[int] | None = None, no_node: set[Size] | None = None
    ) -> Proposal | None:
        """The next allocation to make, computed without changing anything.

        ``skip`` (ask ids) and ``no_node`` (ask sizes no node has room for) carry what a
        pass already learned; they are filled in as asks fail.
        """
        self._walk_stopped = False
        if not self._root.pending:
            return None
        p = self.partition
        skip = set() if skip is None else skip
        no_node = set() if no_node is None else no_node
        # The shape shortcut does not apply where the RM's predicates decide per ask.
        by_shape = self.by_shape and not self.checks_predicates and not p.refused
        if self._reserved:
            proposal = self._propose_reserved(skip, no_node, by_shape)
            if proposal is not None:
                return proposal
        if not p.index.by_id and not self._free_placeholders() and not p.permits.holding():
            # No free node; a replacement needs none, though, and a permit member that
            # finds none must be reported (a Strict group holding members rolls back).
            return None
        return self._propose_in(self._root, skip, no_node, by_shape)

    def _free_placeholders(self) -> bool:
        return any(
            group.free
            for app in self.partition.applications.values()
            if app.task_groups
            for group in app.task_groups.values()
        )

    def _propose_in(
        self, queue: Queue, skip: set[int], no_node: set[Size], by_shape: bool
    ) -> Proposal | None:
        held = by_shape
        for child in queue.sorted_children():
            if by_shape and skip and id(child) in skip:
                continue  # nothing below it could be placed earlier in this pass
            if child.leaf:
                proposal = self._propose_in_leaf(child, skip, no_node, by_shape)
            else:
                proposal = self._propose_in(child, skip, no_node, by_shape)
            if proposal is not None or self._walk_stopped:
                return proposal
            held = held and id(child) in skip
        if held:
            # Nothing frees up during a pass: what found nothing finds nothing until the
            # next (a Strict permit group that rolls back starts the walk afresh).
            skip.add(id(queue))
        return None

    def _propose_in_leaf(
        self, queue: Queue, skip: set[int], no_node: set[Size], by_shape: bool
    ) -> Proposal | None:
        if (
            by_shape
            and (no_node or queue.limited_chain)  # else no shape can be held
            and len(queue.pending_list) > 1  # one application: its walk costs no more
            and self._leaf_held(queue, no_node)
        ):
            skip.add(id(queue))
            return None
        p = self.partition
        app_limited = bool(queue.app_limited_chain)
        gang_limited = bool(queue.max_set_chain)
        ugm = p.ugm
        # sorted_applications() of a fifo leaf is its pending_list: read it without the
        # call (once per walk of a leaf, about 1% of the 100-queues case)
        apps = queue.pending_list if queue.fifo_order else queue.sorted_applications()
        # An application passed over by the checks below may pass them later in the same
        # pass (a permit gang satisfied starts it): only a leaf whose every application
        # found nothing is not walked again in the pass.
        held = by_shape
        for app in apps:
            if app.state not in SCHEDULABLE_STATES:
                held = False
                continue
            if app_limited and app.state is _ACCEPTED and not queue.can_run_another_app():
                held = False
                continue  # maxapplications: it waits until a running application finishes
            charge = None
            if ugm is not None:  # user and group limits
                charge = ugm.charge(app)
                if app.state is _ACCEPTED and not charge.can_run():
                    held = False
                    continue  # its user or group runs as many applications as it may
                if not charge.res_levels:
                    charge = None
            if (
                gang_limited
                and app.placeholder_ask
                and not app.gang_started
                and not self.gang_fits(queue, app)
            ):
                held = False
                continue  # a gang starts only when its whole placeholder total fits
            if by_shape:
                if skip and id(app) in skip:
                    continue
                group = app.pending_asks.single
                if group is None:
                    proposal = self._propose_by_shape(app, queue, charge, skip, no_node)
                elif group.size is not None:  # one shape: the usual case
                    proposal = self._propose_group(app, group, queue, charge, skip, no_node)
                else:  # only asks looked at one by one (the real asks of a gang, say)
                    proposal = self._propose_asks(app, group.values(), queue, charge, skip, no_node)
                if proposal is None and not self._walk_stopped:
                    skip.add(id(app))
            else:
                proposal = self._propose_asks(
                    app, app.pending_asks.in_order(), queue, charge, skip, no_node
                )
            if proposal is not None or self._walk_stopped:
                return proposal
        if held:
            skip.add(id(queue))
        return None

    def _leaf_held(self, queue: Queue, no_node: set[Size]) -> bool:
        """Whether no pending ask of ``queue`` can be placed or reserve a node now, known
        from its shapes and what this pass learned: every shape is over the queue's
        headroom, or no node has room for it (``no_node``) and no ask of it may reserve
        one. Asks looked at one by one, and shapes not looked at yet in this pass, need the
        walk of the applications."""
        count = queue.shapes.count
        if None in count:
            return False
        limited = bool(queue.limited_chain)
        since = queue.shapes.since
        for size in count:
            assert size is not None
            if limited and not queue.headroom_fits(dict(size)):
                continue
            if size not in no_node or self._must_walk(size, since[size]):
                return False
        return True

    def _propose_by_shape(
        self,
        app: Application,
        queue: Queue,
        charge: Charge | None,
        skip: set[int],
        no_node: set[Size],
    ) -> Proposal | None:
        """The first proposal of ``app``'s pending asks in their order, as the walk ask by
        ask would make it, looking at each group of asks of one shape as a whole: its first
        ask that a node has room for, or that may reserve one. The asks looked at one by one
        are walked as before, up to the first proposal of the groups."""
        for level in app.pending_asks.levels:
            if len(level) > MANY_SHAPES:
                # Many shapes at one priority: walk ask by ask, as the tie-break by age
                # would cost a look at every group per proposal.
                asks = merge(*(g.values() for g in level.values()), key=order)
                proposal = self._propose_asks(app, asks, queue, charge, skip, no_node)
                if proposal is not None or self._walk_stopped:
                    return proposal
                continue
            best: Proposal | None = None
            best_key: tuple[float, str, int] | None = None
            one_by_one: Group | None = None
            young = self._young = []  # the groups are looked at out of order
            try:
                for size, group in level.items():
                    if size is None:
                        one_by_one = group
                        continue
                    proposal = self._propose_group(app, group, queue, charge, skip, no_node)
                    if proposal is not None:
                        key = order(proposal.ask)
                        if best_key is None or key < best_key:
                            best, best_key = proposal, key
            finally:
                self._young = None
            end = best_key  # how far the walk ask by ask goes: to the first proposal
            if one_by_one is not None:
                proposal = self._propose_asks(
                    app, one_by_one.values(), queue, charge, skip, no_node, best_key
                )
                if proposal is not None:
                    best, end = proposal, order(proposal.ask)
                elif self._walk_stopped:
                    assert self._stopped_at is not None
                    best, end = None, order(self._stopped_at)
            for ask, due in young:  # the young asks that walk would meet on its way
                if end is None or order(ask) < end:
                    self._due(ask, due)
            if best is not None or self._walk_stopped:
                return best
        return None

    def _propose_group(
        self,
        app: Application,
        group: Group,
        queue: Queue,
        charge: Charge | None,
        skip: set[int],
        no_node: set[Size],
    ) -> Proposal | None:
        """The proposal of the first ask of ``group`` (asks of one shape, none looked at one
        by one) that the walk ask by ask would make: all of them share the queue's
        headroom, the user's limits and the nodes with room, so the first that is not
        ruled out already takes a node if one has room. If none has, the first old
        enough to reserve a node may."""
        # ``group.first()`` inline (once per allocation): a chunk that empties is dropped
        for ask in group.chunks[0].values():  # noqa: B007
            break
        if skip and id(ask) in skip:
            for ask in group.values():
                if id(ask) not in skip:
                    break
            else:
                return None  # every one was ruled out earlier in this pass
        res = ask.resource
        if queue.limited_chain and not queue.headroom_fits(res):
            return None
        if charge is not None and not charge.fits(res):
            return None
        size = ask.size
        if not (no_node and size in no_node):
            node = self.partition.index.first_fit(size)
            if node is not None:
                return Proposal(app, ask, node, checked=True)
            no_node.add(size)
        return self._reserve_in_group(app, group, ask, skip)

    def _propose_asks(
        self,
        app: Application,
        asks: Iterable[Ask],
        queue: Queue,
        charge: Charge | None,
        skip: set[int],
        no_node: set[Size],
        before: tuple[float, str, int] | None = None,
    ) -> Proposal | None:
        """The first proposal of ``asks`` (pending asks of ``app``, in order), ask by ask;
        ``before``: stop at the first ask that comes after it (``order``)."""
        p = self.partition
        index = p.index
        limited = bool(queue.limited_chain)
        permits = p.permits
        for ask in asks:
            if skip and id(ask) in skip:
                continue
            if before is not None and order(ask) > before:
                return None
            if ask.gang is not None:
                gang = permits.schedulable(ask)
                if gang is not None:  # a member of a permit gang not yet satisfied
                    proposal = self._propose_member(app, ask, gang, queue, charge, skip, no_node)
                    if proposal is not None or self._walk_stopped:
                        return proposal
                    continue
            if ask.task_group_name and app.task_groups and not ask.placeholder:
                step = self._gang_step(app, ask)
                if step is True:
                    skip.add(id(ask))  # real asks wait until the gang is placed
                    continue
                if isinstance(step, Proposal):
                    return step
            res = ask.resource
            if limited and not queue.headroom_fits(res):
                skip.add(id(ask))
                continue
            if charge is not None and not charge.fits(res):
                skip.add(id(ask))  # over its user's or group's maxresources
                continue
            if ask.required_node:
                node = self._required_node(ask)
                if node is not None:
                    return Proposal(app, ask, node, checked=True)
                if ask.required_node in p.nodes:
                    p.required_waiting[id(ask)] = (app, ask)  # preempting there may help
                skip.add(id(ask))
                continue
            refused = p.refused.get(id(ask)) if p.refused else None
            size = ask.size
            if refused:
                node = index.first_fit(size, refused)
                if node is not None:
                    return Proposal(app, ask, node, checked=True)
            elif not (no_node and size in no_node):
                node = index.first_fit(size)
                if node is not None:
                    return Proposal(app, ask, node, checked=True)
                no_node.add(size)
            node = self._node_to_reserve(app, ask)
            if node is not None:
                return Proposal(app, ask, node, reserve=True)
            skip.add(id(ask))
        return None

    def _propose_member(
        self,
        app: Application,
        ask: Ask,
        gang: Gang,
        queue: Queue,
        charge: Charge | None,
        skip: set[int],
        no_node: set[Size],
    ) -> Proposal | None:
        """A node for a member of permit ``gang``, or None; a member that cannot be placed
        is reported to the gang (``member_failed``: Strict rolls its group back after the
        proposal, and it counts for the deadlock check). Members never reserve a node."""
        p = self.partition
        permits = p.permits
        skip.add(id(ask))  # looked at once a proposal: a commit takes it off the skip list
        if permits.held(gang):
            return None
        res = ask.resource
        if queue.limited_chain and not queue.headroom_fits(res):
            self._member_failed(gang, app, ask, "quota", queue.blocking_queue(res))
            return None
        if charge is not None and not charge.fits(res):
            self._member_failed(gang, app, ask, "limit")
            return None
        node: Node | None
        if ask.required_node:
            node = self._required_node(ask)
        else:
            refused = p.refused.get(id(ask)) if p.refused else None
            size = ask.size
            if refused:
                node = p.index.first_fit(size, refused)
            elif size in no_node:
                node = None
            else:
                node = p.index.first_fit(size)
                if node is None:
                    no_node.add(size)
        if node is None:
            self._member_failed(gang, app, ask, "node")
            return None
        skip.discard(id(ask))
        return Proposal(app, ask, node)

    def _member_failed(
        self, gang: Gang, app: Application, ask: Ask, kind: str, where: Queue | None = None
    ) -> None:
        if self.partition.permits.member_failed(gang, app, ask, kind, where):
            self._walk_stopped = True  # a Strict group rolls back: walk again after it
            self._stopped_at = ask

    # ====================================================================== reservations
    def _propose_reserved(
        self, skip: set[int], no_node: set[Size], by_shape: bool
    ) -> Proposal | None:
        """An allocation for a reserved ask: on one of its reserved nodes if it fits now,
        else on any other node (YuniKorn's ``tryReservedAllocate``: every reserved node
        first, then the others). An ask that fits nowhere is left to the normal path only
        while it may reserve another node (fewer reservations than pending allocations).

        By shape, only the reservations whose answer may have changed are looked at: the
        unsettled, those whose node gained room, and those of a size some node has room
        for; one whose ask found room nowhere is settled (``Reservations.settle``), and
        within a pass one that found nothing is not looked at again."""
        p = self.partition
        reservations = p.reservations
        looked: Iterable[Reservation]
        if by_shape:
            todo = reservations.to_look_at()
            index = p.index
            for size, same in reservations.settled.items():
                if size not in no_node:
                    if index.first_fit(size) is None:
                        no_node.add(size)
                    else:
                        todo.extend(same.values())
            if len(todo) > 1:
                todo.sort(key=_seq)
            looked = todo
        else:
            looked = reservations.by_node.values()
        waiting: list[tuple[Application, Reservation]] = []
        for reservation in looked:
            ask = reservation.ask
            if skip and (id(ask) in skip or id(reservation) in skip):
                continue
            app = p.applications.get(reservation.application_id)
            queue = app.queue if app is not None else None
            if app is None or queue is None or app.state not in SCHEDULABLE_STATES:
                if by_shape:
                    skip.add(id(reservation))  # nothing frees up during a pass
                continue
            if ask.task_group_name and app.task_groups and not ask.placeholder:
                step = self._gang_step(app, ask)
                if step is True:
                    continue
                if isinstance(step, Proposal):
                    return step
            res = ask.resource
            if (queue.limited_chain and not queue.headroom_fits(res)) or (
                p.ugm is not None and not p.ugm.admits(app, res)
            ):
                if by_shape:
                    skip.add(id(reservation))
                continue
            refused = p.refused.get(id(ask)) if p.refused else None
            node = reservation.node
            if fits(res, node.available) and not (refused and node.node_id in refused):
                return Proposal(app, ask, node)
            waiting.append((app, reservation))
        for app, reservation in waiting:
            ask = reservation.ask
            if id(ask) in skip:
                continue  # an ask with several reservations is looked at once
            if ask.required_node:
                skip.add(id(ask))  # it runs on its node or nowhere
                continue
            other = self._elsewhere(ask, no_node)
            if other is not None:
                return Proposal(app, ask, other)
            if by_shape:
                skip.add(id(reservation))
                if not one_by_one(ask):
                    reservations.settle(reservation)
            if app.reserved_count(ask) >= ask.pending:
                skip.add(id(ask))
        return None

    # ================================================================== gang scheduling
    def _gang_step(self, app: Application, ask: Ask) -> Proposal | bool:
        """What a real ask of a task group does now: ``True`` it waits (placeholders are
        still pending, or the RM's predicates refused the node of every free placeholder
        and every node with room), a ``Proposal`` takes a free placeholder's place, ``False``
        it is scheduled as a normal ask (no placeholder of its group is left for it).

        As YuniKorn's ``tryPlaceholderAllocate``: the free placeholders of the group are
        tried in turn, each on its own node; a node the predicates refused for this ask is
        passed over (``Partition.refused``, forgotten when the cluster changes). Refused on
        all of them, the ask goes to any node with room the predicates allow, and the first
        free placeholder is released for it.
        """
        group = app.task_groups.get(ask.task_group_name)
        if group is None or ask.no_replace:
            return False
        if app.placeholders_wanted:
            return True
        p = self.partition
        refused = p.refused.get(id(ask)) if p.refused else None
        for placeholder in group.free.values():
            if refused is None or placeholder.node_id not in refused:
                return Proposal(app, ask, p.nodes[placeholder.node_id], replace=placeholder)
        if not group.free:
            return False
        assert refused is not None  # only the predicates refuse a placeholder's node
        node = p.index.first_fit(ask.size, refused)
        if node is None:
            return True
        return Proposal(app, ask, node, replace=next(iter(group.free.values())))

    def gang_fits(self, queue: Queue, app: Application) -> bool:
        """The whole placeholder total of ``app`` fits in the free quota of every queue
        with a configured max above it, counting what gangs that are still placing have
        yet to take. Root's max (the cluster's size) does not count, as in YuniKorn's
        ``GetMaxQueueSet``: a gang larger than the free cluster places what fits."""
        total = app.placeholder_ask
        for q in queue.max_set_chain:
            held = q.gang_reserved
            need = {n: v + held.get(n, 0) for n, v in total.items()} if held else total
            if not fits_under_max(need, q.allocated, q.max_resources):
                return False
        return True
