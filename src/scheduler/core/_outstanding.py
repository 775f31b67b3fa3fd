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

An ask is reported when its state differs from the last one reported for it; the memory
holds only asks still pending (an ask that was allocated or released and comes back
pending is a new ask, reported afresh), and what was reported stays remembered while an
ask needs nothing (it is not reported again when it needs something once more).

The inspection pays per shape and per change, not per pending ask (``by_shape``). The
asks of one group of one shape (``scheduler.objects._pending``) share their state: the
node that has room depends on the size alone, the holds on the application. So the group
is classified once, and its memory is the state told to every ask of it up to the newest
then (``Told``; asks join a group in age order, numbered by ``Ask.seq``), so an unchanged
group costs O(1) and only its new asks are reported. Walked ask by ask as before: the asks
looked at one by one (a group without a shape); the applications whose gang waits for its
quota (placeholders and other asks may share a shape); while the RM's predicates refused a
node for some ask, the groups that are not held; and where a queue of the chain has a max
that its pending asks may pass (allocated plus pending over the max: the headroom is then
taken ask by ask, in order, as YuniKorn does). There, the walk stops once every group of
the priority is held by the headroom (which only shrinks during an inspection): the rest
of each group is told as a whole. Where no max binds, no ask can find its headroom taken,
so the claims are not walked at all (they only show in the reason of a held ask, and no
ask is held there). ``by_shape = False`` walks every ask (the reference the tests hold the
inspection to: both send the same reports, in the same order; switch it before the first
inspection).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from heapq import heappop, heappush
from itertools import chain as chained
from typing import TYPE_CHECKING

from scheduler import si
from scheduler.core._events import Event
from scheduler.core._pass import SCHEDULABLE_STATES
from scheduler.objects._application import AppState
from scheduler.objects._pending import order

if TYPE_CHECKING:
    from actors import TimerHandle
    from scheduler.core._partition import Partition
    from scheduler.core._pass import Scheduler
    from scheduler.objects._application import Application
    from scheduler.objects._asks import Ask
    from scheduler.objects._pending import Group, Level
    from scheduler.objects._queue import Queue
    from scheduler.objects._resources import Res, Size
    from scheduler.objects._ugm import Charge
    from scheduler.objects._ugm import Level as UserLevel

__all__ = ["InspectOutstanding", "OutstandingRequests"]

State = si.SchedulingState
SKIPPED = si.SchedulingState.SKIPPED
FAILED = si.SchedulingState.FAILED
Memory = dict[tuple[str, str], tuple["Ask", State]]
Outcome = tuple[State | None, str]  # the state of an ask (None: nothing to tell) and why


class InspectOutstanding(Event, frozen=True, kw_only=True):
    """The outstanding-requests interval passed: inspect the pending asks."""


class Told:
    """What the asks of one group of one shape were told: ``state`` (None: nothing) to
    every ask up to ``upto`` (``Ask.seq``), and otherwise to the asks in ``odd`` (walked one
    by one). An ask joins the group with a number higher than any before it, so an ask
    newer than ``upto`` was told nothing yet."""

    __slots__ = ("group", "odd", "state", "upto")

    def __init__(
        self,
        group: Group,
        state: State | None,
        upto: int,
        odd: dict[str, tuple[Ask, State | None]] | None = None,
    ) -> None:
        self.group = group  # this very group (an application made again numbers anew)
        self.state = state
        self.upto = upto
        self.odd = odd or {}

    def of(self, ask: Ask) -> State | None:
        if self.odd:
            got = self.odd.get(ask.allocation_key)
            if got is not None and got[0] is ask:
                return got[1]
        return self.state if ask.seq <= self.upto else None

    def __repr__(self) -> str:
        state = self.state.name if self.state is not None else None
        return f"<Told {state} upto={self.upto} odd={len(self.odd)}>"


class OutstandingRequests:
    """The autoscaler's view of one partition's pending asks; used by its actor."""

    __slots__ = (
        "arm",
        "by_shape",
        "interval",
        "partition",
        "pending_seen",
        "reported",
        "scheduler",
        "timer",
        "told",
    )

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
        self.by_shape = True  # False: every ask walked and remembered one by one
        # The last state reported per (application id, allocation key), with the ask it was
        # reported for (an ask the RM sends again is a new ask): the asks walked one by one.
        self.reported: Memory = {}
        # What the asks of each group of one shape were told, by (application id, group).
        self.told: dict[tuple[str, int], Told] = {}
        self.pending_seen: Res = {}  # the pending total at the last inspection

    def after_drain(self, woke: bool) -> None:
        """The partition's mailboxes are drained: inspect within the interval if something
        happened since the last inspection that may change an ask's state (a pass was due,
        or asks came or went without one)."""
        if self.timer is None:
            pending = self.partition.root.pending
            if (woke or pending != self.pending_seen) and (pending or self.reported or self.told):
                self.timer = self.arm(self.interval, InspectOutstanding())

    def stop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    # ====================================================================== inspection
    def inspect(self) -> None:
        """Classify the pending asks and report those whose state changed."""
        self.timer = None
        root = self.partition.root
        if self.by_shape:
            walk: _Inspection = _ByShape(self)
        else:
            walk = _Inspection(self)
        if root.pending:
            walk.walk(root)
        self.reported = walk.seen
        self.told = walk.told
        self.pending_seen = dict(root.pending)

    def report(
        self, seen: Memory, app: Application, ask: Ask, state: State | None, reason: str
    ) -> bool:
        """Remember ``state`` for ``ask`` in ``seen`` (from what was reported for it); True
        if it is to be reported."""
        key = (app.application_id, ask.allocation_key)
        last = self.reported.get(key)
        if last is not None and last[0] is not ask:
            last = None
        if state is None:  # it needs nothing from an autoscaler now: remember what it was told
            if last is not None:
                seen[key] = last
            return False
        seen[key] = (ask, state)
        return last is None or last[1] is not state

    def send(self, app: Application, ask: Ask, state: State, reason: str) -> None:
        p = self.partition
        p.log.debug(
            "ask {} of {}: {} ({})", ask.allocation_key, app.application_id, state.name, reason
        )
        p.outbox.scheduling_state(app.application_id, ask.allocation_key, state, reason)


# ========================================================================== the reasons
def _over_reason(over: UserLevel) -> str:
    return f"the maxresources of {over} ({over.cap.max_resources}, used {over.resources}) hold it"


def _gang_reason(app: Application, queue: Queue) -> str:
    return (
        f"the placeholders of application {app.application_id} "
        f"({app.placeholder_ask}) do not fit the quota of queue {queue.path} yet"
    )


def _no_node_reason(res: Res, queue: Queue) -> str:
    return (
        f"no node has room for {res}; within the quota of queue "
        f"{queue.path}, so more nodes would let it run"
    )


class _Inspection:
    """One walk over the pending asks, ask by ask: the headroom the asks in front already
    claimed, and which ask sizes some node has room for (nothing changes during the walk)."""

    __slots__ = ("claimed", "fits_node", "outstanding", "seen", "told")

    def __init__(self, outstanding: OutstandingRequests) -> None:
        self.outstanding = outstanding
        self.seen: Memory = {}  # the new memory of the asks walked one by one
        self.told: dict[tuple[str, int], Told] = {}  # ... and of the groups
        self.claimed: dict[str, Res] = {}  # by queue path
        self.fits_node: dict[Size, bool] = {}

    def walk(self, queue: Queue) -> None:
        for child in queue.sorted_children():
            if child.leaf:
                self.leaf(child)
            else:
                self.walk(child)

    def leaf(self, queue: Queue) -> None:
        outstanding = self.outstanding
        chain = queue.max_set_chain
        for app, held, gang_waits, charge in self.applications(queue):
            for ask in app.pending_asks.in_order():
                state, reason = self.classify(queue, chain, app, ask, held, gang_waits, charge)
                if outstanding.report(self.seen, app, ask, state, reason):
                    assert state is not None
                    outstanding.send(app, ask, state, reason)

    def applications(self, queue: Queue) -> Iterator[tuple[Application, str, bool, Charge | None]]:
        """The applications of ``queue`` to inspect, in order, each with what holds all of
        its asks (``maxapplications``: the reason), whether its gang waits for the quota,
        and its user's and group's charge (None: no ``maxresources`` limits it)."""
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
            yield app, held, gang_waits, charge

    def classify(
        self,
        queue: Queue,
        chain: tuple[Queue, ...],
        app: Application,
        ask: Ask,
        held: str,
        gang_waits: bool,
        charge: Charge | None,
    ) -> Outcome:
        """The state of one ask, and why (taking its share of the headroom if it fits)."""
        if ask.task_group_name and app.task_groups and not ask.placeholder:
            group = app.task_groups.get(ask.task_group_name)
            if group is not None and not ask.no_replace and (app.placeholders_wanted or group.free):
                # It takes a placeholder's place (now, or once the gang is placed): its
                # quota and its node are the placeholder's.
                return None, ""
        if held:
            return SKIPPED, held
        if gang_waits and ask.placeholder:
            return SKIPPED, _gang_reason(app, queue)
        over = charge.over(ask.resource) if charge is not None else None
        if over is not None:
            return SKIPPED, _over_reason(over)
        if ask.required_node:
            blocking = self.claim(chain, ask)
            return (None, "") if blocking is None else (SKIPPED, self.blocked_reason(blocking))
        return self.plain(queue, chain, ask)

    def plain(self, queue: Queue, chain: tuple[Queue, ...], ask: Ask) -> Outcome:
        """The state of an ask held by nothing but the headroom and the nodes."""
        blocking = self.claim(chain, ask)
        if blocking is not None:
            return SKIPPED, self.blocked_reason(blocking)
        if self.node_fits(ask):
            return None, ""
        if self.outstanding.partition.refused.get(id(ask)):
            return FAILED, (
                f"the RM's predicates refused every node with room for {ask.resource}; "
                f"within the quota of queue {queue.path}, so more nodes may let it run"
            )
        return FAILED, _no_node_reason(ask.resource, queue)

    def blocked_reason(self, blocking: Queue) -> str:
        return (
            f"no headroom in queue {blocking.path} (max {blocking.max_resources}, "
            f"allocated {blocking.allocated}, wanted by asks in front "
            f"{self.claimed.get(blocking.path, {})})"
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
        return self.size_fits(ask.size)

    def size_fits(self, size: Size) -> bool:
        fits = self.fits_node.get(size)
        if fits is None:
            fits = self.fits_node[size] = (
                self.outstanding.partition.index.first_fit(size) is not None
            )
        return fits


class _Retell:
    """A group of one shape walked ask by ask: what each ask walked is told from now on."""

    __slots__ = ("group", "key", "old", "states")

    def __init__(self, key: tuple[str, int], group: Group, old: Told | None) -> None:
        self.key = key
        self.group = group
        self.old = old
        self.states: dict[State | None, list[Ask]] = {}

    def add(self, ask: Ask, state: State | None) -> bool:
        """``ask`` is in ``state`` now; True if it is to be reported."""
        was = self.old.of(ask) if self.old is not None else None
        now = was if state is None else state
        asks = self.states.get(now)
        if asks is None:
            self.states[now] = [ask]
        else:
            asks.append(ask)
        return now is not was

    def odd(self, state: State | None) -> dict[str, tuple[Ask, State | None]]:
        return {
            ask.allocation_key: (ask, told)
            for told, asks in self.states.items()
            if told is not state
            for ask in asks
        }

    def done(self) -> Told | None:
        """The memory of the group, every ask walked: the most common state, and the others."""
        if not self.states:
            return None
        state = max(self.states, key=lambda s: len(self.states[s]))
        odd = self.odd(state)
        if state is None and not odd:
            return None
        return Told(self.group, state, self.group.last().seq, odd)


def _newest_first(group: Group) -> Iterator[Ask]:
    for chunk in reversed(group.chunks):
        yield from reversed(chunk.values())


def _holds(group: Group, ask: Ask) -> bool:
    chunk = group.where.get(ask.allocation_key)
    return chunk is not None and chunk.get(ask.allocation_key) is ask


class _ByShape(_Inspection):
    """One inspection that classifies a group of asks of one shape as a whole where it can
    (see the module's docstring), and reports what changed."""

    __slots__ = ("binds", "old", "out")

    def __init__(self, outstanding: OutstandingRequests) -> None:
        super().__init__(outstanding)
        self.old = outstanding.told
        self.binds: dict[str, bool] = {}  # by queue path: a max its pending asks may pass
        # The reports of the priority walked: sent in the order of its asks at its end.
        self.out: list[tuple[Ask, Application, State, str]] = []

    def leaf(self, queue: Queue) -> None:
        chain = queue.max_set_chain
        binds = bool(chain) and self.chain_binds(chain)
        for app, held, gang_waits, charge in self.applications(queue):
            for level in app.pending_asks.levels:
                if held or not (binds or gang_waits):
                    self.free_level(queue, chain, app, level, held, charge)
                else:
                    self.walk_level(queue, chain, app, level, gang_waits, charge)
                self.send(merged=len(level) > 1)

    def chain_binds(self, chain: tuple[Queue, ...]) -> bool:
        """Whether some queue of ``chain`` has a max that its allocated and pending asks
        pass: only then can an ask find the headroom taken by the asks in front."""
        binds = self.binds
        for queue in chain:
            bound = binds.get(queue.path)
            if bound is None:
                allocated, pending = queue.allocated, queue.pending
                bound = binds[queue.path] = any(
                    allocated.get(name, 0) + pending.get(name, 0) > cap
                    for name, cap in queue.max_resources.items()
                )
            if bound:
                return True
        return False

    def send(self, merged: bool) -> None:
        """Send the reports of the priority walked; ``merged``: it had several groups,
        whose reports go in the order of their asks."""
        out = self.out
        if not out:
            return
        if merged and len(out) > 1:
            out.sort(key=lambda r: order(r[0]))
        send = self.outstanding.send
        for ask, app, state, reason in out:
            send(app, ask, state, reason)
        out.clear()

    # ========================================================== groups told as a whole
    def free_level(
        self,
        queue: Queue,
        chain: tuple[Queue, ...],
        app: Application,
        level: Level,
        held: str,
        charge: Charge | None,
    ) -> None:
        """One priority of ``app``'s asks where the headroom holds none of them (or the
        application is held as a whole): each group's asks share one state."""
        refused = bool(self.outstanding.partition.refused)
        for group in level.values():
            if group.size is None:
                for ask in group.values():
                    self.one(app, ask, self.classify(queue, chain, app, ask, held, False, charge))
                continue
            state, reason = self.group_state(queue, group, held, charge)
            if refused and state is not SKIPPED:  # a refused ask has its own nodes
                key = (app.application_id, group.gid)
                retell = _Retell(key, group, self.told_of(key, group))
                for ask in group.values():
                    outcome = self.classify(queue, chain, app, ask, held, False, charge)
                    self.retold(app, ask, retell, outcome)
                self.keep(key, retell.done())
            else:
                self.whole(app, group, state, reason)

    def group_state(self, queue: Queue, group: Group, held: str, charge: Charge | None) -> Outcome:
        """The state of every ask of ``group`` where no max binds (as ``classify``)."""
        if held:
            return SKIPPED, held
        res = group.first().resource
        over = charge.over(res) if charge is not None else None
        if over is not None:
            return SKIPPED, _over_reason(over)
        assert group.size is not None
        if self.size_fits(group.size):
            return None, ""
        return FAILED, _no_node_reason(res, queue)

    def whole(self, app: Application, group: Group, state: State | None, reason: str) -> None:
        """Every ask of ``group`` is in ``state``: report those told otherwise."""
        key = (app.application_id, group.gid)
        old = self.told_of(key, group)
        if state is not None:
            asks = iter(group.values())
            self.tail(app, _Retell(key, group, old), next(asks), asks, state, reason)
        elif old is not None:  # nothing to tell: what was told stands, for the asks still here
            odd = {k: v for k, v in old.odd.items() if _holds(group, v[0])}
            if old.state is not None or odd:
                self.told[key] = Told(group, old.state, old.upto, odd)

    def tail(
        self,
        app: Application,
        retell: _Retell,
        first: Ask,
        rest: Iterable[Ask],
        state: State,
        reason: str,
    ) -> None:
        """The asks of a group from ``first`` on (``rest`` after it, in order) are all in
        ``state``; those before it were walked (``retell``)."""
        old, group = retell.old, retell.group
        out = self.out
        if old is not None and old.state is state:
            # Only a new ask, or one told otherwise while walked one by one, changes.
            since = first.seq
            otherwise = [
                ask
                for ask, told in old.odd.values()
                if told is not state and ask.seq >= since and _holds(group, ask)
            ]
            otherwise.sort(key=lambda a: a.seq)
            new: list[Ask] = []
            for ask in _newest_first(group):
                if ask.seq <= old.upto or ask.seq < since:
                    break
                new.append(ask)
            for ask in chained(otherwise, reversed(new)):
                out.append((ask, app, state, reason))
        else:
            for ask in chained((first,), rest):
                if old is None or old.of(ask) is not state:
                    out.append((ask, app, state, reason))
        upto = group.last().seq
        odd = retell.odd(state)
        if old is not None and old.state is state and old.upto == upto and not (odd or old.odd):
            self.told[retell.key] = old  # an unchanged group: nothing new to remember
        else:
            self.told[retell.key] = Told(group, state, upto, odd)

    # ============================================================ asks walked one by one
    def walk_level(
        self,
        queue: Queue,
        chain: tuple[Queue, ...],
        app: Application,
        level: Level,
        gang_waits: bool,
        charge: Charge | None,
    ) -> None:
        """One priority of ``app``'s asks ask by ask, in order, where the headroom is taken
        by the asks in front (or the gang waits): once no group of one shape is left that an
        ask may still find headroom for, the rest of each group is told as a whole."""
        groups: list[tuple[Group, Iterator[Ask], _Retell | None]] = []
        heap: list[tuple[tuple[float, str, int], int, Ask]] = []
        for group in level.values():
            retell = None
            if group.size is not None:
                key = (app.application_id, group.gid)
                first = group.first()
                over = charge.over(first.resource) if charge is not None else None
                if over is not None and not gang_waits:
                    self.whole(app, group, SKIPPED, _over_reason(over))
                    continue
                retell = _Retell(key, group, self.told_of(key, group))
            asks = iter(group.values())
            first = next(asks)
            heappush(heap, (order(first), len(groups), first))
            groups.append((group, asks, retell))
        active = len(groups)  # groups an ask of which may still take headroom
        held: set[int] = set()
        while heap and active:
            _, i, ask = heappop(heap)
            group, asks, retell = groups[i]
            if retell is None:
                self.one(app, ask, self.classify(queue, chain, app, ask, "", gang_waits, charge))
            elif gang_waits:
                outcome = self.classify(queue, chain, app, ask, "", True, charge)
                self.retold(app, ask, retell, outcome)
            else:
                outcome = self.plain(queue, chain, ask)
                self.retold(app, ask, retell, outcome)
                if outcome[0] is SKIPPED and i not in held:
                    held.add(i)  # the headroom only shrinks: its next asks are held too
                    active -= 1
            nxt = next(asks, None)
            if nxt is not None:
                heappush(heap, (order(nxt), i, nxt))
                continue
            if i not in held:
                active -= 1
            if retell is not None:
                self.keep(retell.key, retell.done())
        for _, i, ask in heap:  # every group left is held by the headroom as it is now
            group, asks, retell = groups[i]
            assert retell is not None
            blocking = self.claim(chain, ask)  # takes nothing: there is no room
            assert blocking is not None
            self.tail(app, retell, ask, asks, SKIPPED, self.blocked_reason(blocking))

    def one(self, app: Application, ask: Ask, outcome: Outcome) -> None:
        """An ask walked one by one, remembered by itself."""
        state, reason = outcome
        if self.outstanding.report(self.seen, app, ask, state, reason):
            assert state is not None
            self.out.append((ask, app, state, reason))

    def retold(self, app: Application, ask: Ask, retell: _Retell, outcome: Outcome) -> None:
        state, reason = outcome
        if retell.add(ask, state):
            assert state is not None
            self.out.append((ask, app, state, reason))

    def told_of(self, key: tuple[str, int], group: Group) -> Told | None:
        old = self.old.get(key)
        return old if old is not None and old.group is group else None

    def keep(self, key: tuple[str, int], told: Told | None) -> None:
        if told is not None:
            self.told[key] = told
