"""The application actor: one application's conversations and every flow that changes it.

Asks and releases come to it straight from the RM proxy; its timers come to it; the
partition's scheduling pass and node flows call into it in the same turn (``allocated``,
``begin_replacement``, ``allocation_lost``, ``recover``). It owns the application's state
machine and what entering a state means, and its gang: placeholder
timers and every handshake with the RM, as handlers that await the RM's confirmation
(``GangFlows``, a part of this actor kept in ``scheduler.gangs._placeholders``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from actors import Actor, Promise, TimerHandle
from scheduler import si
from scheduler._errors import SchedulerError
from scheduler.core._events import (
    AllocationReleased,
    AllocationsReleased,
    AppTimer,
    AsksReleased,
    AsksUpdated,
    HandshakesDue,
    PlaceholderTimer,
    Retire,
)
from scheduler.core._preempt import PREEMPTED, PreemptionFlows
from scheduler.gangs._placeholders import REPLACED, GangFlows
from scheduler.objects._application import AppEvent, Application, AppState
from scheduler.objects._resources import Res

if TYPE_CHECKING:
    from scheduler.core._partition import Partition
    from scheduler.objects._asks import Allocation, Ask

__all__ = ["ApplicationActor"]

_COMPLETABLE_STATES = frozenset({AppState.ACCEPTED, AppState.STARTING, AppState.RUNNING})
# What YuniKorn counts as a running application (``maxapplications``).
_RUNNING_STATES = frozenset({AppState.STARTING, AppState.RUNNING})
# Leaving one of these may let the next application of a ``stateaware`` queue start.
_STATE_AWARE_GATES = frozenset({AppState.ACCEPTED, AppState.STARTING})
# What confirms a release the RM asked for (YuniKorn v1.2's processAllocationReleases).
_AS_PER_RM = "allocation remove as per RM request"
_STOPPED_BY_RM = si.TerminationType.STOPPED_BY_RM
# The timer entering a state starts: the ``Timeouts`` field and the event it fires.
_STATE_TIMERS: dict[AppState, tuple[str, AppEvent]] = {
    AppState.STARTING: ("starting", AppEvent.RUN),
    AppState.COMPLETING: ("completing", AppEvent.COMPLETE),
    AppState.COMPLETED: ("terminated", AppEvent.EXPIRE),
    AppState.FAILED: ("terminated", AppEvent.EXPIRE),
    AppState.REJECTED: ("terminated", AppEvent.EXPIRE),
}


class ApplicationActor(GangFlows, PreemptionFlows, Actor):
    """Owns one ``Application`` of a partition (it shares the partition's dispatcher).

    Its gang flows are in ``GangFlows`` (``scheduler.gangs._placeholders``), its side of
    a preemption it triggered in ``PreemptionFlows`` (``scheduler.core._preempt``).
    """

    partition: Partition  # the core's: GangFlows needs only its ``PartitionState``

    def __init__(self, partition: Partition, app: Application) -> None:
        self.partition = partition
        self.app = app
        self.state_timer: TimerHandle | None = None
        self.placeholder_timer = None
        self.handshake_timer = None
        # Handlers waiting for the application's allocations to reach a condition.
        self._waiters: list[tuple[Callable[[], bool], Promise[None]]] = []

    async def receive(self, message: object) -> object:
        match message:
            case AsksUpdated(asks=asks):
                self.update_asks(asks)
            case AllocationsReleased(releases=releases):
                self.release_allocations(releases)
            case AsksReleased(allocation_keys=keys):
                self.release_asks(keys)
            case AppTimer():
                await self.on_state_timer(message)
            case PlaceholderTimer():
                timer = self.placeholder_timer
                if timer is not None and timer.fired:  # not one cancelled and set anew
                    await self.placeholder_timeout()
            case HandshakesDue():
                self.handshakes_due()
            case Retire():
                self.actor_ref.stop()  # an application of the same id took its place
            case _:
                raise SchedulerError(
                    f"application {self.app.application_id}: unexpected {message!r}"
                )
        return None

    def placeholder_timer_after(self, delay: float) -> TimerHandle:
        """The gang's placeholder timeout: ``PlaceholderTimer`` to this actor after ``delay``."""
        return self.actor_system.timers.after(
            delay, PlaceholderTimer(application_id=self.app.application_id), to=self.actor_ref
        )

    def handshake_timer_after(self, delay: float) -> TimerHandle:
        """The bound of the open handshakes: ``HandshakesDue`` to this actor after ``delay``."""
        return self.actor_system.timers.after(
            delay, HandshakesDue(application_id=self.app.application_id), to=self.actor_ref
        )

    # ============================================================================= asks
    def update_asks(self, asks: tuple[Ask, ...]) -> None:
        """Add or replace asks; the application owns the ``Ask`` values from now on."""
        app, p = self.app, self.partition
        if app.terminated or app.queue is None or app.state is AppState.FAILING:
            for ask in asks:
                p.outbox.reject_ask(ask, f"application {app.application_id} is {app.state}")
            return
        delta: Res = {}
        seq = p.take_seq(len(asks))
        app.add_asks(asks, delta, seq=seq, now=p.clock(), other=self._update_ask)
        if delta:
            app.apply_pending(delta)
            app.queue.add_pending(delta)
        if app.reservations and app.placeholders_wanted:
            # Real asks of a task group wait for the placeholders: they hold no node meanwhile.
            for reservation in list(app.reservations.values()):
                held = reservation.ask
                if held.task_group_name in app.task_groups and not (
                    held.placeholder or held.no_replace
                ):
                    p.reservations.release(reservation)
        if asks:
            if app.state in (AppState.NEW, AppState.COMPLETING):
                self.transition(AppEvent.RUN)
            p.asks_came()

    def _update_ask(self, ask: Ask, delta: Res) -> None:
        """An ask of ``update_asks`` that is not the usual (``Application.add_asks``): it
        replaces one of the same key, is a placeholder or a permit gang member."""
        app, p = self.app, self.partition
        old = app.asks.get(ask.allocation_key)
        if old is not None:
            if app.reservations:
                p.reservations.release_ask(app, old)
            if old.gang is not None:
                p.permits.ask_removed(app, old)  # its tentative members go with it
        if ask.gang is not None:
            reason = p.permits.admit(app, ask)
            if reason:
                if old is not None:
                    self.remove_ask(ask.allocation_key)  # replaced, and refused
                p.outbox.reject_ask(ask, reason)
                return
        app.add_ask(ask, delta)

    def release_asks(self, keys: Iterable[str]) -> None:
        """The RM withdraws asks (all of them when ``keys`` is empty)."""
        app = self.app
        if not app.asks:
            return  # nothing to withdraw, nothing to check (YuniKorn's removeAsksInternal)
        for key in list(keys) or list(app.asks):
            self.remove_ask(key)
        self.maybe_complete()

    def remove_ask(self, key: str) -> None:
        app, p = self.app, self.partition
        ask = app.asks.get(key)
        if ask is not None and app.reservations:
            p.reservations.release_ask(app, ask)
        if ask is not None and ask.gang is not None:
            p.permits.ask_removed(app, ask)
            p.wake()  # a cluster change for the gangs: a parked one may go again
        placing = app.placeholders_wanted
        delta = app.remove_ask(key)
        if delta and app.queue is not None:
            app.queue.add_pending(delta)
        if placing and not app.placeholders_wanted:
            p.wake()  # real asks that waited for the placeholders may go now
            if app.gang_held:
                self.release_gang_hold()  # nothing left to place: the hold goes

    # ====================================================================== allocations
    def release_allocations(self, releases: Iterable[AllocationReleased]) -> None:
        """The RM releases allocations, or confirms releases the core asked for."""
        app = self.app
        held = len(app.allocations)
        for rel in releases:
            if not rel.uuid:
                for each in list(app.allocations.values()):
                    self._release(each, rel.termination, _AS_PER_RM)
                continue
            alloc = app.allocations.get(rel.uuid)
            if alloc is None:
                self.log.warning(
                    "release of unknown allocation {} of {}", rel.uuid, app.application_id
                )
                continue
            self._release(alloc, rel.termination, _AS_PER_RM)
        if len(app.allocations) < held:
            self.maybe_complete()  # only when one went, as YuniKorn's removeAllocationInternal

    def _release(self, alloc: Allocation, termination: si.TerminationType, message: str) -> None:
        """Take an allocation away and confirm the release to the RM.

        As YuniKorn v1.2 (``context.go`` ``processAllocationReleases``, unchanged in v1.8):
        every release of the RM's that takes an allocation away is sent back in
        ``AllocationResponse.released`` as ``STOPPED_BY_RM`` with ``message``, whatever
        type the RM gave it: its own releases, and its confirmations of the core's
        (a placeholder's ``TIMEOUT`` or ``PLACEHOLDER_REPLACED``, a victim's
        ``PREEMPTED_BY_SCHEDULER``). YuniKorn's shim acts on a release of any other type
        as the core's own, so the echo must not carry the RM's type back. A release that
        finds nothing is not answered."""
        if alloc.tentative:
            self.log.warning(
                "release of allocation {} of {} ignored: it is a tentative permit gang "
                "member the RM has not been sent",
                alloc.uuid,
                self.app.application_id,
            )
            return
        p = self.partition
        if termination is REPLACED and alloc.release_pending is REPLACED:
            first = self.confirm_replacement(alloc)
            if first is not None:
                # The handshake that waited for this swaps it as its own turn; the echo
                # goes now, before the real allocation, as YuniKorn sends the two; once:
                # a second confirmation before the swap takes nothing away.
                if first:
                    p.outbox.release(alloc, _STOPPED_BY_RM, message)
                return
        p.free_on_node(alloc)
        self.drop_allocation(alloc)
        p.outbox.release(alloc, _STOPPED_BY_RM, message)
        p.wake()

    def drop_allocation(self, alloc: Allocation) -> None:
        """``alloc`` leaves the application and its queue (its node is the caller's)."""
        app = self.app
        if app.remove_allocation(alloc.uuid) is None:
            return
        if app.queue is not None:
            app.queue.remove_allocated(alloc.resource)
            if self.partition.ugm is not None:
                self.partition.ugm.released(app, alloc.resource)
        if alloc.release_pending is PREEMPTED:
            self.partition.preemptions.victim_gone(alloc)  # its preemptor may go on
        if alloc.placeholder:
            self.placeholder_dropped(alloc)
        self.allocations_left()

    def allocated(self, ask: Ask, alloc: Allocation) -> None:
        """The scheduling pass committed ``alloc`` (node, queue and application updated)."""
        if ask.placeholder:
            self.placeholder_placed(alloc)
        elif self.app.state is not AppState.RUNNING:
            self.transition(AppEvent.RUN)

    def allocation_lost(self, alloc: Allocation, message: str) -> None:
        """``alloc`` went with its node (already taken off it)."""
        if alloc.tentative and self.app.replacing and self.held_lost(alloc):
            return  # held for a replacement: the RM never knew of it
        if self.partition.permits.lost(alloc):
            self.partition.wake()  # a tentative member: pending again, the RM never knew
            return
        self.drop_allocation(alloc)
        self.partition.outbox.release(alloc, si.TerminationType.STOPPED_BY_RM, message)
        self.maybe_complete()
        self.partition.wake()

    def recover(self, alloc: Allocation) -> None:
        """``alloc`` exists on a node the RM registered (already put on it)."""
        app = self.app
        app.add_allocation(alloc)
        assert app.queue is not None
        app.queue.add_allocated(alloc.resource)
        if self.partition.ugm is not None:
            self.partition.ugm.allocated(app, alloc.resource)
        if app.state is AppState.NEW:
            self.transition(AppEvent.RUN)
        if alloc.placeholder:
            # It has no ask to count it.
            app.task_group(alloc.task_group_name, alloc.resource).count += 1
            self.placeholder_placed(alloc)
        else:
            self.transition(AppEvent.RUN)

    def allocations_left(self) -> None:
        """An allocation left: wake the handlers whose condition now holds."""
        if self._waiters:
            waiting = self._waiters
            self._waiters = []
            for condition, promise in waiting:
                if condition():
                    promise.resolve(None)
                else:
                    self._waiters.append((condition, promise))

    async def until(self, condition: Callable[[], bool]) -> None:
        """Await (in a handler) the moment ``condition`` of the allocations holds."""
        if condition():
            return
        promise: Promise[None] = self.promise()
        self._waiters.append((condition, promise))
        await promise

    # ==================================================================== the lifecycle
    def reject(self, reason: str) -> None:
        """The partition could not place it."""
        self.app.rejected_message = reason
        self.transition(AppEvent.REJECT, reason)

    def remove(self) -> None:
        """The RM removes the application: everything it holds goes."""
        app = self.app
        self.partition.permits.app_leaving(app)  # tentative members first: the RM has none
        for key in list(app.asks):
            self.remove_ask(key)
        for alloc in list(app.allocations.values()):
            self._release(alloc, _STOPPED_BY_RM, f"Application {app.application_id} Removed")
        while app.state not in (AppState.COMPLETED, AppState.FAILED, AppState.REJECTED):
            if app.state is AppState.RESUMING:
                self.transition(AppEvent.RUN)
                continue
            event = AppEvent.FAIL if app.state is AppState.FAILING else AppEvent.COMPLETE
            self.transition(event, "application removed by the RM")

    def reject_asks(self, asks: Iterable[Ask], reason: str) -> None:
        """The core gives up on ``asks`` (a permit gang timed out): each is withdrawn and
        answered with ``RejectedAllocationAsk``."""
        app, p = self.app, self.partition
        removed = False
        for ask in asks:
            if app.asks.get(ask.allocation_key) is ask:
                self.remove_ask(ask.allocation_key)
                p.outbox.reject_ask(ask, reason)
                removed = True
        if removed:
            self.maybe_complete()

    def maybe_complete(self) -> None:
        app = self.app
        if app.is_idle and app.state in _COMPLETABLE_STATES:
            self.transition(AppEvent.COMPLETE)

    def transition(self, event: AppEvent, message: str = "", *, info: str = "") -> None:
        """Fire ``event`` and carry out what entering the new state means.

        The RM hears of the new state as YuniKorn's ``OnStateChange`` tells it: an
        ``UpdatedApplication`` whose message is ``info`` (YuniKorn's event info) or else
        the event's name, and none for ``Rejected`` (the ``RejectedApplication`` says
        it). ``message`` is for people: the event record's text."""
        app, p = self.app, self.partition
        old = app.state
        new = app.fire(event, p.clock())
        if new is old:
            return
        was_running, is_running = old in _RUNNING_STATES, new in _RUNNING_STATES
        if was_running != is_running and app.queue is not None:
            app.queue.count_running(1 if is_running else -1)
            if was_running and app.queue.app_limited_chain:
                p.wake()  # an application waiting for maxapplications may start now
        if (
            old in _STATE_AWARE_GATES
            and new is not AppState.STARTING
            and app.queue is not None
            and app.queue.sort_policy == "stateaware"
        ):
            p.wake()  # the next application of a stateaware queue may start now
        self.log.debug("application {} {} -> {}", app.application_id, old, new)
        if new is not AppState.REJECTED:
            p.outbox.add(
                "app_updated",
                si.UpdatedApplication(
                    application_id=app.application_id,
                    state=str(new),
                    state_transition_timestamp=p.wall(p.clock()),
                    message=info or str(event),
                ),
            )
        p.outbox.event(
            si.EventRecordType.APP,
            app.application_id,
            str(new),
            message or f"application {app.application_id} is {new}",
            group=app.queue_name,
        )
        self._start_state_timer(new)
        if new in (AppState.COMPLETED, AppState.FAILED):
            self._leave_queue()
        elif new is AppState.EXPIRED:
            self._expired()

    def _start_state_timer(self, state: AppState) -> None:
        if self.state_timer is not None:
            self.state_timer.cancel()
            self.state_timer = None
        timer = _STATE_TIMERS.get(state)
        if timer is not None:
            field, event = timer
            self.state_timer = self.actor_system.timers.after(
                getattr(self.partition.timeouts, field),
                AppTimer(application_id=self.app.application_id, event=event, state=str(state)),
                to=self.actor_ref,
            )

    async def on_state_timer(self, msg: AppTimer) -> None:
        app = self.app
        if str(app.state) != msg.state:
            return  # set in a state it has left
        if app.state is AppState.COMPLETING and app.placeholder_count:
            await self.clean_up_placeholders()  # leftover placeholders go first
            return
        event = AppEvent(msg.event)
        if app.can_fire(event):
            self.transition(event)

    def _leave_queue(self) -> None:
        app, p = self.app, self.partition
        p.reservations.release_application(app)
        for key in list(app.asks):
            self.remove_ask(key)
        self.release_gang_hold()
        if self.placeholder_timer is not None:
            self.placeholder_timer.cancel()
            self.placeholder_timer = None
        if self.handshake_timer is not None:  # it would keep this actor for its bound
            self.handshake_timer.cancel()
            self.handshake_timer = None
        p.application_left(app)

    def _expired(self) -> None:
        """Three days after it ended: the id is forgotten and this actor stops."""
        p, app_id = self.partition, self.app.application_id
        if p.terminated.get(app_id) is self.app:
            del p.terminated[app_id]
        p.forget_actor(app_id, self.actor_ref)
        self.actor_ref.stop()

    def __repr__(self) -> str:
        return f"<ApplicationActor {self.app!r}>"
