"""Applications: their asks, allocations and lifecycle state machine (YuniKorn's)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import TYPE_CHECKING

from scheduler.objects._asks import Allocation, Ask
from scheduler.objects._nodes import Reservation
from scheduler.objects._pending import PendingAsks
from scheduler.objects._priority import MIN_PRIORITY, app_priority_moved
from scheduler.objects._resources import Res, Size, add_into, add_scaled_into, fits, sub_into

if TYPE_CHECKING:
    from scheduler.objects._handshake import Replacement
    from scheduler.objects._queue import Queue

__all__ = [
    "TERMINAL_STATES",
    "AppEvent",
    "AppState",
    "Application",
    "InvalidTransition",
    "TaskGroup",
    "next_state",
]


class AppState(StrEnum):
    NEW = "New"
    ACCEPTED = "Accepted"
    STARTING = "Starting"
    RUNNING = "Running"
    REJECTED = "Rejected"
    COMPLETING = "Completing"
    COMPLETED = "Completed"
    FAILING = "Failing"
    FAILED = "Failed"
    EXPIRED = "Expired"
    RESUMING = "Resuming"


class AppEvent(StrEnum):
    RUN = "runApplication"
    REJECT = "rejectApplication"
    COMPLETE = "completeApplication"
    FAIL = "failApplication"
    EXPIRE = "expireApplication"
    RESUME = "resumeApplication"


S, E = AppState, AppEvent
# Every legal edge, nothing else (YuniKorn's application_state.go). One addition: an
# application the RM removes while still New (it never asked for anything) completes at once.
_NEXT: dict[tuple[AppState, AppEvent], AppState] = {
    (S.NEW, E.REJECT): S.REJECTED,
    (S.NEW, E.RUN): S.ACCEPTED,
    (S.RESUMING, E.RUN): S.ACCEPTED,
    (S.ACCEPTED, E.RUN): S.STARTING,
    (S.STARTING, E.RUN): S.RUNNING,
    (S.RUNNING, E.RUN): S.RUNNING,
    (S.COMPLETING, E.RUN): S.RUNNING,
    (S.ACCEPTED, E.COMPLETE): S.COMPLETING,
    (S.STARTING, E.COMPLETE): S.COMPLETING,
    (S.RUNNING, E.COMPLETE): S.COMPLETING,
    (S.COMPLETING, E.COMPLETE): S.COMPLETED,
    (S.NEW, E.COMPLETE): S.COMPLETED,
    (S.NEW, E.FAIL): S.FAILING,
    (S.ACCEPTED, E.FAIL): S.FAILING,
    (S.STARTING, E.FAIL): S.FAILING,
    (S.RUNNING, E.FAIL): S.FAILING,
    (S.FAILING, E.FAIL): S.FAILED,
    (S.NEW, E.RESUME): S.RESUMING,
    (S.ACCEPTED, E.RESUME): S.RESUMING,
    (S.COMPLETED, E.EXPIRE): S.EXPIRED,
    (S.FAILED, E.EXPIRE): S.EXPIRED,
    (S.REJECTED, E.EXPIRE): S.EXPIRED,
}
del S, E

TERMINAL_STATES = frozenset(
    {AppState.REJECTED, AppState.COMPLETED, AppState.FAILED, AppState.EXPIRED}
)


class InvalidTransition(Exception):
    """An event that has no edge from the current state (a bug in the caller)."""


def next_state(state: AppState, event: AppEvent) -> AppState:
    try:
        return _NEXT[(state, event)]
    except KeyError:
        raise InvalidTransition(f"no transition for {event} from {state}") from None


class TaskGroup:
    """What became of the placeholders of one task group (YuniKorn's ``PlaceholderData``).

    ``count`` placeholders were asked for; ``replaced`` and ``timedout`` count what became
    of them (a placeholder preempted counts as timed out, as in YuniKorn's
    ``removeAllocationInternal``: all but a replacement do), so ``count >= replaced +
    timedout``. ``free`` holds the allocated placeholders that no real ask has claimed
    and no release is pending for, oldest first.
    """

    __slots__ = ("count", "free", "min_resource", "name", "replaced", "timedout")

    def __init__(self, name: str, min_resource: Res) -> None:
        self.name = name
        self.min_resource = dict(min_resource)
        self.count = 0
        self.replaced = 0
        self.timedout = 0
        self.free: dict[str, Allocation] = {}


class Application:
    """An application of a partition: its asks, allocations, usage and state.

    Only the application's own actor and the partition's commit (in the same turn) change it.
    """

    def __init__(
        self,
        *,
        application_id: str,
        partition: str,
        queue_name: str,
        user: str = "",
        groups: list[str] | None = None,
        tags: dict[str, str] | None = None,
        submit_time: float = 0.0,
        submit_seq: int = 0,
        placeholder_ask: Res | None = None,
        gang_scheduling_style: str = "Soft",
        execution_timeout_ms: int = 0,
    ) -> None:
        self.application_id = application_id
        self.partition = partition
        self.queue_name = queue_name
        self.queue: Queue | None = None
        self.user = user
        self.groups = list(groups or [])
        self.tags = dict(tags or {})
        self.submit_time = submit_time
        self.submit_seq = submit_seq
        self.finished_time: float | None = None
        self.placeholder_ask: Res = dict(placeholder_ask or {})
        self.gang_scheduling_style = gang_scheduling_style
        self.execution_timeout_ms = execution_timeout_ms
        self.state = AppState.NEW
        self.state_log: list[tuple[float, AppState]] = [(submit_time, AppState.NEW)]
        self.rejected_message = ""
        self.asks: dict[str, Ask] = {}
        self.pending_asks = PendingAsks()
        # The highest priority of the pending asks (YuniKorn's askMaxPriority).
        self.priority = MIN_PRIORITY
        self.allocations: dict[str, Allocation] = {}
        self.allocated: Res = {}
        self.max_allocated: Res = {}
        self.pending: Res = {}
        # Nodes reserved for asks of this application, by node id, and the same by ask
        # (``id`` of the ask, which its reservations keep alive), oldest first.
        self.reservations: dict[str, Reservation] = {}
        self._reserved_by_ask: dict[int, list[Reservation]] = {}
        # -- gang scheduling ------------------------------------------------------------
        self.task_groups: dict[str, TaskGroup] = {}
        self.placeholder_count = 0  # placeholder allocations held (released or not)
        self.placeholder_allocated: Res = {}
        self.placeholders_wanted = 0  # pending placeholder allocations of its asks
        self.replacing: dict[str, Replacement] = {}  # handshakes in flight, by placeholder
        self.had_real = False  # a real (non-placeholder) allocation was ever made
        # Part of ``placeholder_ask`` still held against the queue quota while placing.
        self.gang_held: Res = {}
        self.gang_started = False  # the first placeholder was allocated
        # The permit gangs its asks were members of (``scheduler.gangs._permit``), in order.
        self.permit_gangs: dict[str, None] = {}

    # -- state -------------------------------------------------------------------------
    def fire(self, event: AppEvent, now: float) -> AppState:
        """Move along the edge for ``event``; raises ``InvalidTransition`` on a miss."""
        new = next_state(self.state, event)
        if new is not self.state:
            self.state = new
            self.state_log.append((now, new))
            if new in TERMINAL_STATES and self.finished_time is None:
                self.finished_time = now  # when it finished, not when it expired
        return new

    def can_fire(self, event: AppEvent) -> bool:
        return (self.state, event) in _NEXT

    @property
    def terminated(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def is_idle(self) -> bool:
        """Nothing allocated and nothing pending: the application may complete.

        Placeholders are not work: once a real allocation was made, leftover placeholders do
        not keep the application from completing (the Completing timeout cleans them up).
        """
        if self.pending_asks or self.replacing:
            return False
        if self.placeholder_count and not self.had_real:
            return False
        return len(self.allocations) == self.placeholder_count

    def placeholders_placed(self) -> bool:
        """The allocated placeholders add up to ``placeholder_ask`` (or none are pending)."""
        if self.placeholder_ask:
            return fits(self.placeholder_ask, self.placeholder_allocated)
        return self.placeholders_wanted == 0

    def task_group(self, name: str, min_resource: Res) -> TaskGroup:
        """The task group ``name``, made on first sight (by an ask or a recovery)."""
        group = self.task_groups.get(name)
        if group is None:
            group = self.task_groups[name] = TaskGroup(name, min_resource)
        return group

    # -- asks ----------------------------------------------------------------------------
    def add_ask(self, ask: Ask, delta: Res) -> None:
        """Add or replace (same key) an ask; adds the change of pending resources to ``delta``.

        The caller applies ``delta`` (to ``self.pending`` with ``apply_pending`` and to the
        queue chain) once for a batch of asks.
        """
        had_pending = bool(self.pending_asks)
        moved = False
        old = self.asks.get(ask.allocation_key)
        if old is not None:
            add_scaled_into(delta, old.resource, -old.pending)
            if old.pending:
                moved = self.pending_asks.remove(old)
            if old.placeholder:
                self.placeholders_wanted -= old.pending
        self.asks[ask.allocation_key] = ask
        if ask.placeholder:
            self.placeholders_wanted += ask.pending
            group = self.task_group(ask.task_group_name, ask.resource)
            before = old.max_allocations if old is not None and old.placeholder else 0
            group.count += max(0, ask.max_allocations - before)
        if ask.pending > 0:
            moved = self.pending_asks.add(ask) or moved
            add_scaled_into(delta, ask.resource, ask.pending)
        if had_pending != bool(self.pending_asks):
            self._tell_queue()
        if moved:
            self._priority_moved()

    def add_asks(
        self,
        asks: Iterable[Ask],
        delta: Res,
        *,
        seq: int,
        now: float,
        other: Callable[[Ask, Res], None] | None = None,
    ) -> None:
        """Take in new asks, in order: each is numbered (from ``seq``), stamped (``now``)
        and wants ``max_allocations``; then the usual ask (a key new here, no placeholder,
        no permit gang) is added at once, and any other goes to ``other`` (``add_ask``
        when there is none). As ``add_ask``, adds the change of pending resources to
        ``delta``; those of the usual asks are added up by size."""
        mine = self.asks
        fresh: list[Ask] = []
        by_size: dict[Size, int] = {}
        for ask in asks:
            ask.seq = seq
            seq += 1
            ask.created = now
            pending = ask.pending = ask.max_allocations
            key = ask.allocation_key
            if key not in mine and ask.gang is None and not ask.placeholder and pending > 0:
                mine[key] = ask
                fresh.append(ask)
                size = ask.size
                by_size[size] = by_size.get(size, 0) + pending
                continue
            if fresh:
                self._add_fresh(fresh, by_size, delta)
                fresh, by_size = [], {}
            (other or self.add_ask)(ask, delta)
        if fresh:
            self._add_fresh(fresh, by_size, delta)

    def _add_fresh(self, asks: list[Ask], by_size: dict[Size, int], delta: Res) -> None:
        """The usual asks of ``add_asks`` (already in ``self.asks``) and their pending
        allocations by size."""
        had_pending = bool(self.pending_asks)
        moved = self.pending_asks.extend(asks)
        for size, count in by_size.items():
            for name, v in size:
                delta[name] = delta.get(name, 0) + v * count
        if not had_pending:
            self._tell_queue()
        if moved:
            self._priority_moved()

    def remove_ask(self, allocation_key: str) -> Res:
        """Drop an ask; returns the (negative) change of pending resources."""
        ask = self.asks.pop(allocation_key, None)
        delta: Res = {}
        if ask is not None and ask.pending > 0:
            if ask.placeholder:
                self.placeholders_wanted -= ask.pending
            moved = self.pending_asks.remove(ask)
            add_scaled_into(delta, ask.resource, -ask.pending)
            ask.pending = 0
            self.apply_pending(delta)
            if not self.pending_asks:
                self._tell_queue()
            if moved:
                self._priority_moved()
        return delta

    def _tell_queue(self) -> None:
        """The application started or stopped wanting allocations: its queue keeps count."""
        if self.queue is not None:
            self.queue.pending_changed(self)

    def _priority_moved(self) -> None:
        """A priority level of the pending asks came or went: the highest may have moved."""
        priority = self.pending_asks.highest()
        if priority != self.priority:
            self.priority = priority
            if self.queue is not None:
                app_priority_moved(self.queue, self)

    def apply_pending(self, delta: Res) -> None:
        add_into(self.pending, delta)
        for name in [n for n, v in self.pending.items() if not v]:
            del self.pending[name]

    # -- allocations (called by the partition's commit) -------------------------------
    def allocate_from(self, ask: Ask, alloc: Allocation) -> None:
        """One allocation of ``ask``: pending moves to allocated."""
        self.take_pending(ask)
        self.add_allocation(alloc)

    def take_pending(self, ask: Ask) -> None:
        """One pending allocation of ``ask`` is spoken for (allocated, or being replaced)."""
        ask.pending -= 1
        if ask.placeholder:
            self.placeholders_wanted -= 1
        if ask.pending == 0 and self.pending_asks.remove(ask):
            # the last ask of its priority: the last of all, or the highest may have moved
            if not self.pending_asks:
                self._tell_queue()
            self._priority_moved()
        pending = self.pending
        for name, v in ask.size:
            left = pending.get(name, 0) - v
            if left:
                pending[name] = left
            else:
                pending.pop(name, None)

    def give_back_pending(self, ask: Ask) -> Res:
        """Undo ``take_pending`` (a replacement fell through); returns the pending delta."""
        if self.asks.get(ask.allocation_key) is not ask:
            return {}
        if ask.pending == 0:
            had_pending = bool(self.pending_asks)
            moved = self.pending_asks.add(ask)
            if not had_pending:
                self._tell_queue()
            if moved:
                self._priority_moved()
        ask.pending += 1
        delta = dict(ask.resource)
        self.apply_pending(delta)
        return delta

    def add_allocation(self, alloc: Allocation) -> None:
        self.allocations[alloc.uuid] = alloc
        if alloc.placeholder:
            self.placeholder_count += 1
            add_into(self.placeholder_allocated, alloc.resource)
        else:
            self.had_real = True
        allocated = self.allocated
        peak = self.max_allocated
        for name, v in alloc.resource.items():
            total = allocated.get(name, 0) + v
            allocated[name] = total
            if total > peak.get(name, 0):
                peak[name] = total

    def swap_placeholder(self, placeholder: Allocation, real: Allocation) -> None:
        """``real`` takes the place of ``placeholder``, of the same resource: the totals of
        what the application holds stay as they are."""
        del self.allocations[placeholder.uuid]
        self.allocations[real.uuid] = real
        self.placeholder_count -= 1
        sub_into(self.placeholder_allocated, placeholder.resource)
        self.had_real = True
        group = self.task_groups.get(placeholder.task_group_name)
        if group is not None:
            group.free.pop(placeholder.uuid, None)

    def reservations_of(self, ask: Ask) -> list[Reservation]:
        """The reservations of ``ask``, oldest first (a list of its own)."""
        return list(self._reserved_by_ask.get(id(ask), ()))

    def reserved_count(self, ask: Ask) -> int:
        held = self._reserved_by_ask.get(id(ask))
        return len(held) if held is not None else 0

    def hold(self, reservation: Reservation) -> None:
        """Keep ``reservation`` (of one of this application's asks)."""
        self.reservations[reservation.node.node_id] = reservation
        self._reserved_by_ask.setdefault(id(reservation.ask), []).append(reservation)

    def unhold(self, node_id: str) -> None:
        """Forget the reservation on ``node_id``, if this application holds it."""
        reservation = self.reservations.pop(node_id, None)
        if reservation is None:
            return
        key = id(reservation.ask)
        held = self._reserved_by_ask[key]
        held.remove(reservation)
        if not held:
            del self._reserved_by_ask[key]

    def remove_allocation(self, uuid: str) -> Allocation | None:
        alloc = self.allocations.pop(uuid, None)
        if alloc is not None:
            sub_into(self.allocated, alloc.resource)
            if alloc.placeholder:
                self.placeholder_count -= 1
                sub_into(self.placeholder_allocated, alloc.resource)
                group = self.task_groups.get(alloc.task_group_name)
                if group is not None:
                    group.free.pop(uuid, None)
        return alloc

    def __repr__(self) -> str:
        return (
            f"<Application {self.application_id} {self.state} asks={len(self.pending_asks)} "
            f"allocations={len(self.allocations)}>"
        )
