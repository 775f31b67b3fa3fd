"""Scheduling by proposal and commit (seed 004), run by the partition's actor.

``propose()`` reads queues, applications and nodes directly and changes nothing; ``commit()``
re-checks what the proposal assumed and applies it to node, node index, application and
queue chain in one step, then hands the application's side of it (its state machine, its
gang) to the application's actor in the same turn. No mailbox round trip per queue,
application or node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec

from scheduler.objects._application import Application, AppState
from scheduler.objects._asks import Allocation, Ask, new_uuid
from scheduler.objects._nodes import Node
from scheduler.objects._resources import Size, fits, fits_under_max, to_si_shared

if TYPE_CHECKING:
    from scheduler.core._partition import Partition
    from scheduler.gangs._permit import Gang
    from scheduler.objects._queue import Queue
    from scheduler.objects._ugm import Charge

__all__ = ["SCHEDULABLE_STATES", "Proposal", "Scheduler"]


SCHEDULABLE_STATES = frozenset(
    {AppState.ACCEPTED, AppState.STARTING, AppState.RUNNING, AppState.COMPLETING}
)
# Enum members read on every allocation: a module constant is a fast global lookup, where
# ``AppState.RUNNING`` is a slow class attribute lookup in 3.11.
_ACCEPTED: Final = AppState.ACCEPTED
_RUNNING: Final = AppState.RUNNING


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

    def __repr__(self) -> str:
        what = "reserve" if self.reserve else "replace" if self.replace else "allocate"
        return f"<Proposal {what} {self.ask!r} on {self.node.node_id}>"


class Scheduler:
    """The scheduling pass of one partition."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition
        # The earliest time a young ask that found no room may reserve: a pass sets it,
        # and the partition's actor arms a timer for it.
        self.reserve_due: float | None = None
        self._no_reserve: set[Size] = set()  # sizes no node can hold
        self.checks_predicates = False  # an RM that checks predicates gets no reservations
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

    # ========================================================================== the pass
    def schedule(self, limit: int = 10_000) -> int:
        """Allocate until nothing more fits or ``limit`` allocations were made this pass.

        Each allocation is a read-only proposal followed by a commit that re-checks it. An
        ask that found no room is not tried again in the same pass (nothing frees up
        during a pass), nor is any other ask of the same size without a node constraint.
        """
        p = self.partition
        p.schedule_pending = False
        self._no_reserve = set()
        made = 0
        skip: set[int] = set()
        no_node: set[Size] = set()
        clock = p.clock
        now = clock()
        permits = p.permits if p.permits else None
        if permits is not None:
            permits.begin_pass()
        while made < limit:
            proposal = self.propose(skip, no_node)
            if permits is not None:
                # A Strict group a member of which failed goes back; the walk that stopped
                # there starts again, with what the group held free.
                if permits.after_propose():
                    skip, no_node = set(), set()
                if proposal is None and self._walk_stopped:
                    continue
            if proposal is None:
                if permits is not None and permits.resolve_deadlock():
                    p.schedule_pending = True  # another pass, with the room given back
                break
            if proposal.reserve:
                app, ask = proposal.application, proposal.ask
                if (
                    p.reservations.reserve(app, ask, proposal.node) is None
                    or len(app.reservations_of(ask)) >= ask.pending
                ):
                    skip.add(id(ask))  # else it may reserve one more node, one per pending
            elif self.commit(proposal, now, proposal.checked and permits is None) is not None:
                made += 1
                if not made & 255:
                    now = clock()  # one clock read per 256 allocations of a long pass
            else:
                skip.add(id(proposal.ask))
        else:
            p.schedule_pending = True  # more may fit: continue after the mailboxes drain
        p.total_allocations += made
        return made

    def propose_checked(self) -> Proposal | None:
        """The next proposal to put to the RM's predicates: a replacement too, on its
        placeholder's node (YuniKorn's ``tryPlaceholderAllocate``). A real ask larger
        than the placeholder is not put to them: that placeholder is cancelled on the way
        (``begin_replacement``) and the ask goes on as a normal ask."""
        p = self.partition
        p.schedule_pending = False
        skip: set[int] = set()
        permits = p.permits if p.permits else None
        if permits is not None:
            permits.begin_pass()
        while True:
            proposal = self.propose(skip)
            while (
                proposal is not None
                and proposal.replace is not None
                and not fits(proposal.ask.resource, proposal.replace.resource)
            ):
                if not self._replace(proposal):
                    skip.add(id(proposal.ask))
                proposal = self.propose(skip)
            if permits is None:
                return proposal
            if permits.after_propose():
                skip = set()
            if proposal is None and self._walk_stopped:
                continue  # a Strict group rolled back where the walk stopped: again
            if proposal is None and permits.resolve_deadlock():
                p.schedule_pending = True
            return proposal

    def predicates_checked(self, proposal: Proposal, allowed: bool) -> Allocation | None:
        """The RM's answer for ``proposal``: commit it (a replacement starts its handshake),
        or remember the refused node; a replacement that no longer holds is remembered the
        same way, so it is not proposed again until something changes."""
        p = self.partition
        p.schedule_pending = True
        if allowed:
            if proposal.replace is None:
                alloc = self.commit(proposal)
                if alloc is not None:
                    p.total_allocations += 1
                return alloc
            if self._replace(proposal):
                return None
        p.refused.setdefault(id(proposal.ask), set()).add(proposal.node.node_id)
        return None

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
        if self._reserved:
            proposal = self._propose_reserved(skip, no_node)
            if proposal is not None:
                return proposal
        if not p.index.by_id and not self._free_placeholders() and not p.permits.holding():
            # No free node; a replacement needs none, though, and a permit member that
            # finds none must be reported (a Strict group holding members rolls back).
            return None
        return self._propose_in(self._root, skip, no_node)

    def _free_placeholders(self) -> bool:
        return any(
            group.free
            for app in self.partition.applications.values()
            if app.task_groups
            for group in app.task_groups.values()
        )

    def _propose_in(self, queue: Queue, skip: set[int], no_node: set[Size]) -> Proposal | None:
        for child in queue.sorted_children():
            if child.leaf:
                proposal = self._propose_in_leaf(child, skip, no_node)
            else:
                proposal = self._propose_in(child, skip, no_node)
            if proposal is not None or self._walk_stopped:
                return proposal
        return None

    def _propose_in_leaf(self, queue: Queue, skip: set[int], no_node: set[Size]) -> Proposal | None:
        p = self.partition
        index = p.index
        limited = bool(queue.limited_chain)
        app_limited = bool(queue.app_limited_chain)
        gang_limited = bool(queue.max_set_chain)
        ugm = p.ugm
        permits = p.permits
        # sorted_applications() of a fifo leaf is its pending_list: read it without the
        # call (once per walk of a leaf, about 1% of the 100-queues case)
        apps = queue.pending_list if queue.fifo_order else queue.sorted_applications()
        for app in apps:
            if app.state not in SCHEDULABLE_STATES:
                continue
            if app_limited and app.state is _ACCEPTED and not queue.can_run_another_app():
                continue  # maxapplications: it waits until a running application finishes
            charge = None
            if ugm is not None:  # user and group limits
                charge = ugm.charge(app)
                if app.state is _ACCEPTED and not charge.can_run():
                    continue  # its user or group runs as many applications as it may
                if not charge.res_levels:
                    charge = None
            if (
                gang_limited
                and app.placeholder_ask
                and not app.gang_started
                and not self.gang_fits(queue, app)
            ):
                continue  # a gang starts only when its whole placeholder total fits
            for ask in app.pending_asks.in_order():
                if skip and id(ask) in skip:
                    continue
                if ask.gang is not None:
                    gang = permits.schedulable(ask)
                    if gang is not None:  # a member of a permit gang not yet satisfied
                        proposal = self._propose_member(
                            app, ask, gang, queue, charge, skip, no_node
                        )
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
                    skip.add(id(ask))
                    continue
                refused = p.refused.get(id(ask)) if p.refused else None
                if refused:
                    node = index.first_fit(ask.size, refused)
                    if node is not None:
                        return Proposal(app, ask, node, checked=True)
                    skip.add(id(ask))
                    continue
                size = ask.size
                if not (no_node and size in no_node):
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

    def _required_node(self, ask: Ask) -> Node | None:
        node = self.partition.nodes.get(ask.required_node)
        if (
            node is not None
            and node.schedulable
            and (node.reserved is None or node.reserved.ask is ask)
            and fits(ask.resource, node.available)
        ):
            return node
        return None

    # ====================================================================== reservations
    def _propose_reserved(self, skip: set[int], no_node: set[Size]) -> Proposal | None:
        """An allocation for a reserved ask: on one of its reserved nodes if it fits now,
        else on any other node (YuniKorn's ``tryReservedAllocate``: every reserved node
        first, then the others). An ask that fits nowhere is left to the normal path only
        while it may reserve another node (fewer reservations than pending allocations)."""
        p = self.partition
        waiting: list[tuple[Application, Ask]] = []
        for reservation in p.reservations.by_node.values():
            ask = reservation.ask
            if id(ask) in skip:
                continue
            app = p.applications.get(reservation.application_id)
            queue = app.queue if app is not None else None
            if app is None or queue is None or app.state not in SCHEDULABLE_STATES:
                continue
            if ask.task_group_name and app.task_groups and not ask.placeholder:
                step = self._gang_step(app, ask)
                if step is True:
                    continue
                if isinstance(step, Proposal):
                    return step
            res = ask.resource
            if queue.limited_chain and not queue.headroom_fits(res):
                continue
            if p.ugm is not None and not p.ugm.admits(app, res):
                continue
            if fits(res, reservation.node.available):
                return Proposal(app, ask, reservation.node)
            waiting.append((app, ask))
        for app, ask in waiting:
            if id(ask) in skip:
                continue  # an ask with several reservations is looked at once
            if ask.size not in no_node:
                other = p.index.first_fit(ask.size)
                if other is not None:
                    return Proposal(app, ask, other)
                no_node.add(ask.size)
            if len(app.reservations_of(ask)) >= ask.pending:
                skip.add(id(ask))
        return None

    def _node_to_reserve(self, app: Application, ask: Ask) -> Node | None:
        """The free node that comes closest to fitting ``ask``, if the ask may reserve one.

        An ask may reserve once it has waited ``reservation_delay`` and has fewer
        reservations than pending allocations; the node must be able to hold it at all
        (its capacity fits). Closest: the smallest sum of missing fractions (YuniKorn's
        fit-in score). A younger ask leaves a wake-up time for the pass's timer.
        """
        p = self.partition
        if self.checks_predicates or ask.required_node:
            return None
        due = ask.created + p.timeouts.reservation_delay
        if p.clock() < due:
            if self.reserve_due is None or due < self.reserve_due:
                self.reserve_due = due
            return None
        if ask.size in self._no_reserve or len(app.reservations_of(ask)) >= ask.pending:
            return None
        best: Node | None = None
        best_score = 0.0
        items = ask.size
        for node in p.index.nodes():
            capacity = node.capacity
            available = node.available
            score = 0.0
            for name, v in items:
                if v > capacity.get(name, 0):
                    break
                free = available.get(name, 0)
                if free < v:
                    score += (v - free) / v
            else:
                if best is None or score < best_score:
                    best, best_score = node, score
        if best is None:
            self._no_reserve.add(items)
        return best

    # ============================================================================ commit
    def commit(
        self, proposal: Proposal, now: float | None = None, fresh: bool = False
    ) -> Allocation | None:
        """Re-check what the proposal assumed and apply it in one step, or drop it.

        ``now`` is the allocation's time (the core's clock when None): a pass reads the
        clock once per 256 allocations, not once per allocation. ``fresh``: the proposal
        was made with every check below in this same turn, with nothing run in between
        (the pass's own walk), so it is applied without them.

        A replacement proposal starts the application's handshake instead (and returns
        None: nothing is allocated until the RM confirms the placeholder's release).
        """
        if proposal.replace is not None:
            self._replace(proposal)
            return None
        p = self.partition
        app, ask, node = proposal.application, proposal.ask, proposal.node
        queue = app.queue
        res = ask.resource
        ugm = p.ugm
        if queue is None:
            return None
        if not fresh and (
            ask.pending <= 0
            or app.asks.get(ask.allocation_key) is not ask
            or p.applications.get(app.application_id) is not app
            or not node.schedulable
            or p.nodes.get(node.node_id) is not node
            or (node.reserved is not None and node.reserved.ask is not ask)
            or not fits(res, node.available)
            or (queue.limited_chain and not queue.headroom_fits(res))
            or (
                queue.app_limited_chain
                and app.state is _ACCEPTED
                and not queue.can_run_another_app()
            )
            or (ugm is not None and not ugm.admits(app, res))
        ):
            return None
        alloc = Allocation(
            new_uuid(),
            ask.allocation_key,
            app.application_id,
            p.name,
            node.node_id,
            res,
            ask.priority,
            ask.tags,
            ask.task_group_name,
            ask.placeholder,
            ask.created,
            p.clock() if now is None else now,
        )
        node.add_allocation(alloc)
        p.index.update(node)
        app.allocate_from(ask, alloc)
        queue.allocate(res)
        if ugm is not None:
            ugm.allocated(app, res)
        if app.reservations:
            p.reservations.after_allocation(app, ask, node)
        if ask.gang is not None and p.permits.placed(app, ask, alloc):
            return alloc  # a tentative member: the RM hears of it with its whole group
        p.outbox.add("new", alloc.to_si(to_si_shared(ask.size)))
        if ask.placeholder or app.state is not _RUNNING:
            # The application's state machine or its gang moves on: its actor's part.
            p.owners[app.application_id].allocated(ask, alloc)
        return alloc

    def _replace(self, proposal: Proposal) -> bool:
        app = proposal.application
        owner = self.partition.owners.get(app.application_id)
        if owner is None or owner.app is not app:
            return False  # the application left (and maybe came back) meanwhile
        assert proposal.replace is not None
        return owner.begin_replacement(proposal.ask, proposal.replace)

    # ================================================================== gang scheduling
    def _gang_step(self, app: Application, ask: Ask) -> Proposal | bool:
        """What a real ask of a task group does now: ``True`` it waits (placeholders are
        still pending, or the RM's predicates refused the node of every free placeholder),
        a ``Proposal`` takes a free placeholder's place, ``False`` it is scheduled as a
        normal ask (no placeholder of its group is left for it).

        As YuniKorn's ``tryPlaceholderAllocate``: the free placeholders of the group are
        tried in turn, each on its own node; a node the predicates refused for this ask is
        passed over (``Partition.refused``, forgotten when the cluster changes).
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
        return bool(group.free)

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
