"""Gang scheduling, the application's side (seed 000: YuniKorn's gang scheduling design).

Placeholders are placed like any ask; a real ask of a task group takes the place of one of
its placeholders through a release handshake with the RM; placeholders nobody uses time
out. Each flow that waits for the RM is one coroutine run as a handler of the
application's actor: it changes state, tells the RM, awaits the RM's confirmation (the
actor's turn ends meanwhile and the partition goes on scheduling), and reads the state
again when it goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actors import Promise, TimerHandle
from scheduler import si
from scheduler.objects._application import AppEvent, AppState, TaskGroup
from scheduler.objects._asks import Allocation, Ask, new_uuid
from scheduler.objects._handshake import Replacement
from scheduler.objects._resources import add_into, fits, sub_into, to_si_shared
from scheduler.policies._placement import show

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from typing import Any

    from loguru import Logger

    from actors import ActorRef, ActorSystem
    from scheduler.objects._application import Application
    from scheduler.objects._nodes import Node
    from scheduler.objects._partition import PartitionState

__all__ = ["REPLACED", "TIMEOUT", "GangFlows"]

REPLACED = si.TerminationType.PLACEHOLDER_REPLACED
TIMEOUT = si.TerminationType.TIMEOUT
# Releases counted in the task group's placeholder data when they were sent.
_COUNTED = (TIMEOUT, si.TerminationType.PREEMPTED_BY_SCHEDULER)


class GangFlows:
    """The gang flows of one application: a part of its actor (``ApplicationActor``), kept
    apart by concern. They run in the actor's turns; those that wait for the RM are
    handlers of the actor."""

    app: Application
    partition: PartitionState
    placeholder_timer: TimerHandle | None  # the placeholder timeout, once one is placed
    handshake_timer: TimerHandle | None  # watches the bound of the open handshakes

    if TYPE_CHECKING:  # the rest of the actor
        actor_ref: ActorRef
        actor_system: ActorSystem
        log: Logger

        def run_handler(self, coro: Coroutine[Any, Any, Any]) -> None: ...

        def placeholder_timer_after(self, delay: float) -> TimerHandle: ...

        def handshake_timer_after(self, delay: float) -> TimerHandle: ...

        def transition(self, event: AppEvent, message: str = "", *, info: str = "") -> None: ...

        def maybe_complete(self) -> None: ...

        def allocations_left(self) -> None: ...

        async def until(self, condition: Callable[[], bool]) -> None: ...

        def remove_ask(self, key: str) -> None: ...

    # ========================================================================== placing
    def placeholder_placed(self, alloc: Allocation) -> None:
        """A placeholder was allocated (or recovered): track it and move the gang on."""
        app, p = self.app, self.partition
        app.task_group(alloc.task_group_name, alloc.resource).free[alloc.uuid] = alloc
        queue = app.queue
        if not app.gang_started:
            app.gang_started = True
            if app.placeholder_ask and queue is not None and queue.max_set_chain:
                app.gang_held = dict(app.placeholder_ask)
                for q in queue.chain:
                    add_into(q.gang_reserved, app.gang_held)
        held = app.gang_held
        if held and queue is not None:
            taken = {n: min(v, held[n]) for n, v in alloc.resource.items() if held.get(n)}
            sub_into(held, taken)
            for q in queue.chain:
                sub_into(q.gang_reserved, taken)
        if self.placeholder_timer is None:
            ms = app.execution_timeout_ms
            self.placeholder_timer = self.placeholder_timer_after(
                ms / 1000 if ms > 0 else p.timeouts.placeholder
            )
        p.outbox.event(
            si.EventRecordType.REQUEST,
            alloc.allocation_key,
            "PlaceholderAllocated",
            f"placeholder {alloc.uuid} of task group {alloc.task_group_name} allocated on "
            f"node {alloc.node_id}",
            group=app.application_id,
        )
        if app.state is AppState.NEW:
            self.transition(AppEvent.RUN)
        if app.state is AppState.ACCEPTED and app.placeholders_placed():
            self.release_gang_hold()
            self.transition(AppEvent.RUN, "all placeholders allocated")
        if not app.placeholders_wanted:
            p.wake()  # real asks that waited for the gang may go now

    def release_gang_hold(self) -> None:
        """Give back the part of the queue quota the gang held for its unplaced members."""
        app = self.app
        held = app.gang_held
        if held and app.queue is not None:
            for q in app.queue.chain:
                sub_into(q.gang_reserved, held)
            self.partition.wake()  # a gang waiting for the quota may start now
        app.gang_held = {}

    # ====================================================================== replacement
    def begin_replacement(
        self, ask: Ask, placeholder: Allocation, node: Node | None = None
    ) -> bool:
        """The scheduling pass chose ``placeholder`` for real ``ask``: claim it now (in the
        pass's turn) and run the handshake as a handler of this application's actor.

        A real ask larger than the placeholder cannot use it: the placeholder is released
        with ``TIMEOUT`` and the ask goes on as a normal ask. ``node``, if not the
        placeholder's: the RM's predicates refused the node of every placeholder of the
        group, and allowed this one; the real allocation goes there at once (it keeps its
        room, re-checked now) and the placeholder is released all the same (the second
        part of YuniKorn's ``tryPlaceholderAllocate``).
        """
        app, p = self.app, self.partition
        group = app.task_groups.get(placeholder.task_group_name)
        if (
            group is None
            or group.free.get(placeholder.uuid) is not placeholder
            or ask.pending <= 0
            or app.asks.get(ask.allocation_key) is not ask
            or app.allocations.get(placeholder.uuid) is not placeholder
        ):
            return False
        if not fits(ask.resource, placeholder.resource):
            del group.free[placeholder.uuid]
            ask.no_replace = True
            self._time_out_placeholder(
                group, placeholder, "cancel placeholder: resource incompatible"
            )
            p.outbox.event(
                si.EventRecordType.REQUEST,
                ask.allocation_key,
                "PlaceholderCancelled",
                f"placeholder {placeholder.uuid} released: ask {ask.allocation_key} "
                f"{show(ask.resource)} is larger than the placeholder {show(placeholder.resource)}",
                group=app.application_id,
            )
            p.wake()
            return True
        held = None
        if node is not None and node.node_id != placeholder.node_id:
            held = self._hold(ask, node)
            if held is None:
                return False  # the node's room went meanwhile
        del group.free[placeholder.uuid]
        self.run_handler(self._replace_placeholder(ask, placeholder, held))
        return True

    def _hold(self, ask: Ask, node: Node) -> Allocation | None:
        """The real allocation of ``ask`` put on ``node`` now, if it still has room: no
        queue is charged until the placeholder's release is confirmed (YuniKorn adds it to
        the node alone, the queue "temporarily over the size")."""
        p = self.partition
        if (
            p.nodes.get(node.node_id) is not node
            or not node.schedulable
            or (node.reserved is not None and node.reserved.ask is not ask)
            or not fits(ask.resource, node.available)
        ):
            return None
        held = self._real_allocation(ask, node.node_id, new_uuid())
        held.tentative = True  # not the RM's yet, and no preemption victim
        node.add_allocation(held)
        p.index.update(node)
        return held

    def _unhold(self, held: Allocation) -> None:
        p = self.partition
        node = p.nodes.get(held.node_id)
        if node is not None and node.remove_allocation(held.uuid) is not None:
            p.index.update(node)
            p.wake()

    def held_lost(self, alloc: Allocation) -> bool:
        """``alloc`` went with its node: if it was held for a replacement, that handshake
        falls through (the real ask is pending again; the placeholder's release, when the
        RM confirms it, is an ordinary one)."""
        for rep in self.app.replacing.values():
            if rep.held is alloc:
                rep.held = None
                rep.confirmed.resolve(False)
                return True
        return False

    def _real_allocation(self, ask: Ask, node_id: str, uuid: str) -> Allocation:
        app, p = self.app, self.partition
        return Allocation(
            uuid,
            ask.allocation_key,
            app.application_id,
            p.name,
            node_id,
            ask.resource,
            ask.priority,
            ask.tags,
            ask.task_group_name,
            False,
            ask.created,
            p.clock(),
            allow_preempt_self=ask.allow_preempt_self,
            originator=ask.originator,
        )

    async def _replace_placeholder(
        self, ask: Ask, placeholder: Allocation, held: Allocation | None
    ) -> None:
        """One replacement, start to end: mark the placeholder, release it to the RM,
        await the RM's confirmation, then swap placeholder and real allocation in one step."""
        app, p = self.app, self.partition
        placeholder.release_pending = REPLACED
        app.take_pending(ask)
        if app.queue is not None:
            app.queue.remove_pending(ask.resource)
        if app.reservations:
            node = p.nodes.get((placeholder if held is None else held).node_id)
            if node is not None:
                p.reservations.after_allocation(app, ask, node)
        # The real allocation's uuid is known from the start: the release names it, as
        # YuniKorn's does ("replacing uuid: ", context.go).
        real_uuid = new_uuid() if held is None else held.uuid
        rep = Replacement(placeholder, ask, Promise(), p.clock(), held=held, real_uuid=real_uuid)
        app.replacing[placeholder.uuid] = rep
        p.outbox.release(placeholder, REPLACED, f"replacing uuid: {real_uuid}")
        p.outbox.event(  # the release names the allocation only: who it is for, here
            si.EventRecordType.REQUEST,
            ask.allocation_key,
            "PlaceholderReleasing",
            f"placeholder {placeholder.uuid} released for ask {ask.allocation_key}: "
            f"allocation {real_uuid} takes its place once the RM confirms",
            group=app.application_id,
        )
        if ask.pending:
            p.wake()
        if self.handshake_timer is None:
            self._watch_handshakes(p.timeouts.handshake)
        # The turn ends here. If the RM takes longer than the bound, handshakes_due says
        # so, and the wait goes on: a late confirmation still completes the replacement.
        confirmed = await rep.confirmed
        # Anything may have changed while the RM was asked: read it all again.
        del app.replacing[placeholder.uuid]
        if confirmed and app.allocations.get(placeholder.uuid) is placeholder:
            self._swap_placeholder(rep)
        else:
            self._replacement_fell_through(rep)

    def confirm_replacement(self, alloc: Allocation) -> bool | None:
        """The RM confirmed a ``PLACEHOLDER_REPLACED`` release. None: no handshake waits for
        it (the caller releases it as any other). True: this confirmation settled the
        handshake, which goes on as its own turn. False: an earlier one did; this one
        changes nothing (the RM sent it twice before the swap)."""
        rep = self.app.replacing.get(alloc.uuid)
        if rep is None:
            return None
        return rep.confirmed.resolve(True)

    def _watch_handshakes(self, delay: float) -> None:
        """One timer per application watches the bound of all its open handshakes (a
        deadline per handshake would cost each a timer entry, on the hottest await)."""
        self.handshake_timer = self.handshake_timer_after(delay)

    def handshakes_due(self) -> None:
        """Report every handshake that waited longer than the bound; watch the next one."""
        self.handshake_timer = None
        bound = self.partition.timeouts.handshake
        now = self.partition.clock()
        next_due: float | None = None
        for rep in self.app.replacing.values():
            if rep.overdue:
                continue
            due = rep.started + bound
            if due > now:
                next_due = due if next_due is None else min(next_due, due)
                continue
            rep.overdue = True
            self._handshake_overdue(rep)
        if next_due is not None:
            self._watch_handshakes(next_due - now)

    def _handshake_overdue(self, rep: Replacement) -> None:
        app, p = self.app, self.partition
        bound = p.timeouts.handshake
        uuid = rep.placeholder.uuid
        self.log.warning(
            "application {}: the RM has not confirmed the release of placeholder {} after {}s",
            app.application_id,
            uuid,
            bound,
        )
        p.outbox.event(
            si.EventRecordType.REQUEST,
            rep.ask.allocation_key,
            "PlaceholderReleaseOverdue",
            f"placeholder {uuid} is still waiting for the RM to confirm its release "
            f"after {bound:g}s; ask {rep.ask.allocation_key} takes its place once it does",
            group=app.application_id,
        )

    def _swap_placeholder(self, rep: Replacement) -> None:
        """The real allocation takes the placeholder's place: node, application and queue in
        one update. A real ask smaller than the placeholder gives the difference back; if
        the application no longer wants the ask, only the placeholder goes."""
        app, p = self.app, self.partition
        ph, ask, held = rep.placeholder, rep.ask, rep.held
        node = p.nodes.get(ph.node_id)
        queue = app.queue
        real: Allocation | None = None
        wanted = (
            not rep.cancelled
            and app.asks.get(ask.allocation_key) is ask
            and app.state is not AppState.FAILING
        )
        if held is not None:  # on its own node already
            if wanted:
                real, held.tentative = held, False
            else:
                self._unhold(held)
        elif node is not None and wanted:
            real = self._real_allocation(ask, node.node_id, rep.real_uuid)
        real_before = len(app.allocations) - app.placeholder_count
        if real is not None and held is None and real.resource == ph.resource:
            assert node is not None
            node.swap_allocation(ph.uuid, real)  # same size: the totals of node,
            app.swap_placeholder(ph, real)  # application and queue stay as they are
        else:
            if node is not None:
                node.remove_allocation(ph.uuid)
                if real is not None and held is None:
                    node.add_allocation(real)
                p.index.update(node)
                p.usage_changed(node)
            app.remove_allocation(ph.uuid)
            if queue is not None:
                queue.remove_allocated(ph.resource)
            if real is not None:
                app.add_allocation(real)
                if queue is not None:
                    queue.add_allocated(real.resource)
            if p.ugm is not None and queue is not None:
                if real is not None:
                    p.ugm.allocated(app, real.resource)  # first: it stays a running app
                p.ugm.released(app, ph.resource)
        group = app.task_groups.get(ph.task_group_name)
        if real is None:
            if group is not None:
                group.timedout += 1
            self.after_placeholders()
            self.allocations_left()
            self.maybe_complete()
            p.wake()
            return
        if group is not None:
            group.replaced += 1
        p.total_allocations += 1
        p.outbox.add("new", real.to_si(to_si_shared(ask.size)))
        p.outbox.event(
            si.EventRecordType.REQUEST,
            ask.allocation_key,
            "PlaceholderReplaced",
            f"placeholder {ph.uuid} replaced by allocation {real.uuid} on node {real.node_id}",
            group=app.application_id,
        )
        if app.state in (AppState.ACCEPTED, AppState.COMPLETING) or (
            app.state is AppState.STARTING and real_before
        ):
            self.transition(AppEvent.RUN)
        self.after_placeholders()
        self.allocations_left()
        p.wake()

    def _replacement_fell_through(self, rep: Replacement) -> None:
        """The placeholder went another way (node removed, released): the real ask wants an
        allocation again, and the next pass finds it another placeholder or a node."""
        app = self.app
        if rep.held is not None:
            self._unhold(rep.held)
        delta = app.give_back_pending(rep.ask)
        if delta and app.queue is not None:
            app.queue.add_pending(delta)
            self.partition.wake()
        self.maybe_complete()

    def placeholder_dropped(self, alloc: Allocation) -> None:
        """A placeholder left the application without replacing anything."""
        app = self.app
        rep = app.replacing.get(alloc.uuid) if app.replacing else None
        if rep is not None:
            rep.confirmed.resolve(False)  # its handshake gives the real ask back
        group = app.task_groups.get(alloc.task_group_name)
        if group is not None and alloc.release_pending not in _COUNTED:
            group.timedout += 1  # a TIMEOUT or preemption was counted when it was sent
        self.after_placeholders()

    def after_placeholders(self) -> None:
        """The last placeholder went: no timeout is left to run."""
        if not self.app.placeholder_count and self.placeholder_timer is not None:
            self.placeholder_timer.cancel()
            self.placeholder_timer = None

    # ========================================================================= timeouts
    async def placeholder_timeout(self) -> None:
        """The placeholder timeout ran out (YuniKorn's ``timeoutPlaceholderProcessing``).

        An application that got all its placeholders only loses the unused ones. One still
        placing them gives up: ``Hard`` releases everything, goes ``Failing`` and, once the
        RM confirmed the releases, ``Failed``; ``Soft`` goes ``Resuming`` and, once the
        placeholders are gone, ``Accepted`` as a normal application. The releases go out in
        one response, before the state change.

        A resumed application with nothing left stays ``Accepted``, waiting for asks:
        YuniKorn's ``removeAllocationInternal`` fires only ``RunApplication`` when the last
        placeholder of a ``Resuming`` application goes, and nothing completes it there.
        """
        self.placeholder_timer = None
        app = self.app
        state = app.state
        unused = "releasing allocated placeholders on placeholder timeout"
        if state in (AppState.STARTING, AppState.RUNNING, AppState.COMPLETING):
            self.release_gang_hold()
            asks = self._release_placeholder_asks(real_too=False)
            self._placeholder_timeout_event(self._release_free_placeholders(unused), asks)
            return
        if state not in (AppState.NEW, AppState.ACCEPTED):
            return
        hard = app.gang_scheduling_style == "Hard"
        asks = self._release_placeholder_asks(real_too=hard)
        released = self._release_free_placeholders(unused)
        if hard:
            for rep in app.replacing.values():
                rep.cancelled = True
        self.release_gang_hold()
        self._placeholder_timeout_event(released, asks)
        timeout = "ResourceReservationTimeout"  # YuniKorn's event info
        self.transition(AppEvent.FAIL if hard else AppEvent.RESUME, timeout, info=timeout)
        changes = len(app.state_log)
        if hard:
            await self.until(lambda: not app.allocations)
            if len(app.state_log) == changes:
                self.transition(AppEvent.FAIL, "all placeholders released")
            return
        await self.until(lambda: not app.placeholder_count)
        if len(app.state_log) == changes:
            self.transition(AppEvent.RUN, "placeholders released: scheduling normally")
            if app.allocations:  # a replacement completed while it resumed
                self.transition(AppEvent.RUN)

    async def clean_up_placeholders(self) -> None:
        """``Completing`` timed out with placeholders left: release them with ``TIMEOUT``,
        and complete once the RM confirmed (unless the application moved on meanwhile)."""
        app = self.app
        changes = len(app.state_log)
        released = self._release_free_placeholders("releasing placeholders on app complete")
        self._placeholder_timeout_event(released, 0)
        await self.until(lambda: not app.placeholder_count)
        if len(app.state_log) == changes:
            self.transition(AppEvent.COMPLETE, "placeholders released")

    def _release_free_placeholders(self, message: str) -> int:
        """Release every placeholder no real ask claimed, with ``TIMEOUT``."""
        released = 0
        for group in self.app.task_groups.values():
            for ph in group.free.values():
                self._time_out_placeholder(group, ph, message)
                released += 1
            group.free.clear()
        return released

    def _time_out_placeholder(self, group: TaskGroup, ph: Allocation, message: str) -> None:
        """Release placeholder ``ph`` with ``TIMEOUT``; it counts as timed out now, once."""
        ph.release_pending = TIMEOUT
        group.timedout += 1
        self.partition.outbox.release(ph, TIMEOUT, message)

    def _release_placeholder_asks(self, real_too: bool) -> int:
        """Release pending placeholder asks (and real ones with ``real_too``), ``TIMEOUT``."""
        app = self.app
        in_handshake = {id(r.ask) for r in app.replacing.values()}
        released = 0
        for ask in list(app.asks.values()):
            if not ask.placeholder and not real_too:
                continue
            if ask.pending <= 0 and id(ask) not in in_handshake:
                continue
            if ask.placeholder:
                group = app.task_groups.get(ask.task_group_name)
                if group is not None:
                    group.timedout += ask.pending
            self.partition.outbox.release_ask(
                ask,
                TIMEOUT,
                "releasing placeholders asks on placeholder timeout",  # YuniKorn's
            )
            self.remove_ask(ask.allocation_key)
            released += 1
        return released

    def _placeholder_timeout_event(self, released: int, asks: int) -> None:
        app = self.app
        self.partition.outbox.event(
            si.EventRecordType.APP,
            app.application_id,
            "PlaceholderTimeout",
            f"placeholder timeout of application {app.application_id}: {released} "
            f"placeholders and {asks} asks released",
            group=app.queue_name,
        )
