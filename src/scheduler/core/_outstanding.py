"""Outstanding requests: what an autoscaler needs to know about the asks that wait.

YuniKorn inspects the pending asks once a second (``Scheduler.inspectOutstandingRequests``)
and tells the RM, through ``UpdateContainerSchedulingState``, which of them fit their
queue's headroom but no node: more nodes would let them run. Here the partition's actor
runs the inspection on the core's clock, and only when something happened since the last
one (a pass was due, or asks came or went), so an idle core never ticks and
``ManualClock.advance`` stays cheap. Only an RM whose callback overrides
``update_container_scheduling_state`` is inspected.

Each pending ask is, in the pass's order (queues, applications, asks):

* ``FAILED``: within its queue's headroom (YuniKorn's ``getMaxHeadRoom``: the max of the
  leaf and its parents minus what is allocated, the root's size not counted) and in front
  of the asks that share it, but no node has room for it now;
* ``SKIPPED``: held by its queue's quota (the headroom, ``maxapplications``, or a gang that
  may not start yet) or by its user's or group's limits (YuniKorn 1.3+ counts the user
  headroom too), so an autoscaler leaves it alone;
* nothing: it fits a node now (the pass will place it), it is bound to one node, or it is a
  real ask of a gang that replaces a placeholder.

An ask is reported when its state differs from the last one reported for it; the memory is
rebuilt on every inspection from the asks still pending, so it never outgrows them, and an
ask that was allocated or released and comes back pending is reported afresh.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from scheduler import si
from scheduler.core._events import Event
from scheduler.core._pass import SCHEDULABLE_STATES
from scheduler.objects._application import AppState

if TYPE_CHECKING:
    from actors import TimerHandle
    from scheduler.core._partition import Partition
    from scheduler.core._pass import Scheduler
    from scheduler.objects._application import Application
    from scheduler.objects._asks import Ask
    from scheduler.objects._queue import Queue
    from scheduler.objects._resources import Res
    from scheduler.objects._ugm import Charge

__all__ = ["InspectOutstanding", "OutstandingRequests"]

State = si.SchedulingState
Size = tuple[tuple[str, int], ...]
Memory = dict[tuple[str, str], tuple["Ask", State]]


class InspectOutstanding(Event, frozen=True, kw_only=True):
    """The outstanding-requests interval passed: inspect the pending asks."""


class OutstandingRequests:
    """The autoscaler's view of one partition's pending asks; used by its actor."""

    __slots__ = ("arm", "interval", "partition", "pending_seen", "reported", "scheduler", "timer")

    def __init__(
        self,
        partition: Partition,
        scheduler: Scheduler,
        arm: Callable[[float, InspectOutstanding], TimerHandle],
    ) -> None:
        self.partition = partition
        self.scheduler = scheduler
        self.arm = arm  # a timer that tells the partition's actor the message after a delay
        self.interval = partition.timeouts.outstanding
        self.timer: TimerHandle | None = None
        # The last state reported per (application id, allocation key), with the ask it was
        # reported for (an ask the RM sends again is a new ask); the pending total then.
        self.reported: Memory = {}
        self.pending_seen: Res = {}

    def after_drain(self, woke: bool) -> None:
        """The partition's mailboxes are drained: inspect within the interval if something
        happened since the last inspection that may change an ask's state (a pass was due,
        or asks came or went without one)."""
        if self.timer is None:
            pending = self.partition.root.pending
            if (woke or pending != self.pending_seen) and (pending or self.reported):
                self.timer = self.arm(self.interval, InspectOutstanding())

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    # ====================================================================== inspection
    def inspect(self) -> None:
        """Classify every pending ask and report those whose state changed."""
        self.timer = None
        root = self.partition.root
        seen: Memory = {}
        if root.pending:
            _Inspection(self, seen).walk(root)
        self.reported = seen
        self.pending_seen = dict(root.pending)

    def report(
        self, seen: Memory, app: Application, ask: Ask, state: State | None, reason: str
    ) -> None:
        key = (app.application_id, ask.allocation_key)
        last = self.reported.get(key)
        if last is not None and last[0] is not ask:
            last = None
        if state is None:  # it needs nothing from an autoscaler now: remember what it was told
            if last is not None:
                seen[key] = last
            return
        seen[key] = (ask, state)
        if last is None or last[1] is not state:
            p = self.partition
            p.log.debug(
                "ask {} of {}: {} ({})", ask.allocation_key, app.application_id, state.name, reason
            )
            p.outbox.scheduling_state(app.application_id, ask.allocation_key, state, reason)


class _Inspection:
    """One walk over the pending asks: the headroom the asks in front already claimed, and
    which ask sizes some node has room for (nothing changes during the walk)."""

    __slots__ = ("claimed", "fits_node", "outstanding", "seen")

    def __init__(self, outstanding: OutstandingRequests, seen: Memory) -> None:
        self.outstanding = outstanding
        self.seen = seen
        self.claimed: dict[str, Res] = {}  # by queue path
        self.fits_node: dict[Size, bool] = {}

    def walk(self, queue: Queue) -> None:
        for child in queue.sorted_children():
            if child.leaf:
                self.leaf(child)
            else:
                self.walk(child)

    def leaf(self, queue: Queue) -> None:
        scheduler = self.outstanding.scheduler
        ugm = self.outstanding.partition.ugm
        chain = queue.max_set_chain
        for app in queue.sorted_applications(state_filter=False):
            if app.state not in SCHEDULABLE_STATES:
                continue
            held = ""
            charge = ugm.charge(app) if ugm is not None else None
            if (
                queue.app_limited_chain
                and app.state is AppState.ACCEPTED
                and not queue.can_run_another_app()
            ):
                held = f"queue {queue.path} runs its maximum number of applications"
            elif charge is not None and app.state is AppState.ACCEPTED:
                full = charge.full()
                if full is not None:
                    held = f"{full} runs its maximum number of applications"
            if charge is not None and not charge.res_levels:
                charge = None
            gang_waits = bool(
                chain
                and app.placeholder_ask
                and not app.gang_started
                and not scheduler.gang_fits(queue, app)
            )
            for ask in app.pending_asks.in_order():
                self.ask(queue, chain, app, ask, held, gang_waits, charge)

    def ask(
        self,
        queue: Queue,
        chain: tuple[Queue, ...],
        app: Application,
        ask: Ask,
        held: str,
        gang_waits: bool,
        charge: Charge | None,
    ) -> None:
        report = self.outstanding.report
        if ask.task_group_name and app.task_groups and not ask.placeholder:
            group = app.task_groups.get(ask.task_group_name)
            if group is not None and not ask.no_replace and (app.placeholders_wanted or group.free):
                # It takes a placeholder's place (now, or once the gang is placed): its
                # quota and its node are the placeholder's.
                report(self.seen, app, ask, None, "")
                return
        if held:
            report(self.seen, app, ask, State.SKIPPED, held)
            return
        if gang_waits and ask.placeholder:
            report(
                self.seen,
                app,
                ask,
                State.SKIPPED,
                f"the placeholders of application {app.application_id} "
                f"({app.placeholder_ask}) do not fit the quota of queue {queue.path} yet",
            )
            return
        over = charge.over(ask.resource) if charge is not None else None
        if over is not None:
            report(
                self.seen,
                app,
                ask,
                State.SKIPPED,
                f"the maxresources of {over} ({over.cap.max_resources}, used "
                f"{over.resources}) hold it",
            )
            return
        blocking = self.claim(chain, ask)
        if blocking is not None:
            report(
                self.seen,
                app,
                ask,
                State.SKIPPED,
                f"no headroom in queue {blocking.path} (max {blocking.max_resources}, "
                f"allocated {blocking.allocated}, wanted by asks in front "
                f"{self.claimed.get(blocking.path, {})})",
            )
        elif ask.required_node or self.node_fits(ask):
            report(self.seen, app, ask, None, "")
        elif self.outstanding.partition.refused.get(id(ask)):
            report(
                self.seen,
                app,
                ask,
                State.FAILED,
                f"the RM's predicates refused every node with room for {ask.resource}; "
                f"within the quota of queue {queue.path}, so more nodes may let it run",
            )
        else:
            report(
                self.seen,
                app,
                ask,
                State.FAILED,
                f"no node has room for {ask.resource}; within the quota of queue "
                f"{queue.path}, so more nodes would let it run",
            )

    def claim(self, chain: tuple[Queue, ...], ask: Ask) -> Queue | None:
        """Take the headroom the ask's pending allocations need (as many as fit), or return
        the queue that has no room for even one."""
        if not chain:
            return None
        claimed = self.claimed
        res = ask.resource
        count = ask.pending
        for queue in chain:
            used = claimed.get(queue.path)
            for name, v in res.items():
                cap = queue.max_resources.get(name)
                if cap is None or v <= 0:
                    continue
                free = cap - queue.allocated.get(name, 0) - (used.get(name, 0) if used else 0)
                count = min(count, max(free, 0) // v)
            if count <= 0:
                return queue
        for queue in chain:
            used = claimed.setdefault(queue.path, {})
            for name, v in res.items():
                used[name] = used.get(name, 0) + v * count
        return None

    def node_fits(self, ask: Ask) -> bool:
        p = self.outstanding.partition
        refused = p.refused.get(id(ask)) if p.refused else None
        if refused:
            return p.index.first_fit(ask.size, refused) is not None
        fits = self.fits_node.get(ask.size)
        if fits is None:
            fits = self.fits_node[ask.size] = p.index.first_fit(ask.size) is not None
        return fits
