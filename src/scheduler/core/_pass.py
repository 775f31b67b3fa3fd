"""Scheduling by proposal and commit (seed 004), run by the partition's actor.

The walk (``scheduler.core._walk``) proposes; ``commit()`` re-checks what the proposal
assumed and applies it to node, node index, application and queue chain in one step, then
hands the application's side of it (its state machine, its gang) to the application's actor
in the same turn. ``schedule()`` proposes and commits until nothing more fits.
"""

from __future__ import annotations

from typing import Final

from scheduler.core._walk import SCHEDULABLE_STATES, Proposal, Walk
from scheduler.objects._application import AppState
from scheduler.objects._asks import Allocation, new_uuid
from scheduler.objects._resources import Size, fits, to_si_shared

__all__ = ["SCHEDULABLE_STATES", "Proposal", "Scheduler"]

# Enum members read on every allocation: a module constant is a fast global lookup, where
# ``AppState.RUNNING`` is a slow class attribute lookup in 3.11.
_ACCEPTED: Final = AppState.ACCEPTED
_RUNNING: Final = AppState.RUNNING


class Scheduler(Walk):
    """The scheduling pass of one partition: the walk's proposals, committed; its sorts of
    all nodes are timed in ``counters`` (the partition actor's)."""

    # ========================================================================== the pass
    def schedule(self, limit: int = 10_000) -> int:
        """Allocate until nothing more fits or ``limit`` allocations were made this pass.

        Each allocation is a read-only proposal followed by a commit that re-checks it. An
        ask that found no room is not tried again in the same pass (nothing frees up
        during a pass), nor is any other ask of the same size without a node constraint.
        """
        p = self.partition
        p.schedule_pending = False
        p.in_pass = True
        try:
            made = self._schedule(limit)
        finally:
            self.closest = None
            p.end_pass()
        p.total_allocations += made
        return made

    def time_sorts(self) -> None:
        """Time the sorts the pass's first walk makes, as it starts (YuniKorn v1.2's
        ``node_sorting_latency`` at ``level="queue"``, ``sortQueues``, and ``level="app"``,
        ``sortApplications``): from the root down the first child with pending work at
        each level, each parent's children, then the leaf's applications. Three clock reads
        a pass, none per allocation; each level is observed at its mean. A parent keeps
        its children in order, re-filing at a sort only those that moved since, and a fifo
        leaf keeps its applications in order: the walk then reads what was sorted here for
        nothing (a fair or stateaware leaf sorts again when the walk comes to it)."""
        queue = self._root
        if not queue.pending:
            return
        clock = self.partition.clock
        start = clock()
        parents = 0
        while not queue.leaf:
            children = queue.sorted_children()
            parents += 1
            if not children:
                break
            queue = children[0]
        sorted_queues = clock()
        if parents:
            self.counters.observe_queue_sorting(sorted_queues - start, parents)
        if queue.leaf:
            queue.sorted_applications()
            self.counters.observe_app_sorting(clock() - sorted_queues)

    def _schedule(self, limit: int) -> int:
        p = self.partition
        self.time_sorts()
        self._no_reserve = set()
        self.closest = {}
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
                    self.closest = {}  # the group's room is free again
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
                    or app.reserved_count(ask) >= ask.pending
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
        return made

    def propose_checked(self) -> Proposal | None:
        """The next proposal to put to the RM's predicates: a replacement too, on its
        placeholder's node (YuniKorn's ``tryPlaceholderAllocate``). A real ask larger
        than the placeholder is not put to them: that placeholder is cancelled on the way
        (``begin_replacement``) and the ask goes on as a normal ask. A reservation is put
        to them too (``predicates_checked``)."""
        p = self.partition
        p.schedule_pending = False
        self._no_reserve = set()  # the RM answered meanwhile: anything may have changed
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
        """The RM's answer for ``proposal``: commit it (a replacement starts its handshake,
        a reservation reserves the node, re-checked), or remember the refused node; a
        replacement that no longer holds is remembered the same way, so it is not proposed
        again until something changes. An ask whose reservation was refused reserves
        nothing until then (YuniKorn's ``tryNodes``: ``preReserveConditions`` refused, no
        reservation)."""
        p = self.partition
        p.schedule_pending = True
        if proposal.reserve:
            if allowed:
                p.reservations.reserve(proposal.application, proposal.ask, proposal.node)
            else:
                p.refused_reserve.add(id(proposal.ask))
            return None
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
        if ask.originator or not ask.allow_preempt_self:
            alloc.originator = ask.originator
            alloc.allow_preempt_self = ask.allow_preempt_self
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
        return owner.begin_replacement(proposal.ask, proposal.replace, proposal.node)
