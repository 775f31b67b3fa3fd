"""Permit gangs (seed 001: Koordinator's gang scheduling), declared through ask tags.

A member of a permit gang is placed *tentatively*: the commit counts it on its node, queue
and application like any allocation, but it is not sent to the RM. When every gang of its
GangGroup has at least ``min_available`` members placed, all of them are sent together
(one run of ``AllocationResponse.new``) and the gangs are satisfied: later members are
normal asks. ``Strict`` rolls every tentative member of the group back when one member
cannot be placed; ``NonStrict`` lets members accumulate. A group's wait runs from its first
tentative member; when it passes, the group is rolled back and its members rejected.

Beyond both designs, no deadlock: when a group cannot place a member and younger groups
hold tentative room that would let it, the youngest of them is rolled back and parked, so
the oldest completes instead of every group waiting out its timeout. That choice, and the
groups that gave way, are ``scheduler.gangs._deadlock``'s; ``PermitGangs.resolve_deadlock``
hands it the groups that could not place a member in a pass.

Who does what: the proxy parses the tags (``scheduler.objects._gang_tags.parse_gang``) into a
``GangSpec`` that travels on the ``Ask``; the application's actor admits members
(``PermitGangs.admit``) and forgets them; the scheduling pass reports members it could
not place (``member_failed``) and commits tentative ones (``placed``); the partition's
actor awaits each group's wait (``GangGroup.wait``, a promise settled when the group is
bound or rolled back) and times it out. Everything here runs in the partition's shared
turn: plain synchronous code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import msgspec
from loguru import logger

from actors import Promise
from scheduler import si
from scheduler.gangs._deadlock import DeadlockResolver
from scheduler.objects._gang_tags import TAG_GROUPS, GangSpec, spec_conflict
from scheduler.objects._resources import to_si_shared

if TYPE_CHECKING:
    from scheduler.objects._application import Application
    from scheduler.objects._asks import Allocation, Ask
    from scheduler.objects._partition import PartitionState
    from scheduler.objects._queue import Queue

__all__ = ["Gang", "GangGroup", "PermitGangs"]


# ======================================================================== live state
class Member(msgspec.Struct, gc=False):
    """One tentative member: ``alloc`` of ``ask`` of ``app``, not sent to the RM yet."""

    alloc: Allocation
    app: Application
    ask: Ask


class Gang:
    """One permit gang: its spec, its member asks, and its members placed but not bound."""

    __slots__ = ("apps", "asks", "bound", "created", "group", "satisfied", "spec", "tentative")

    def __init__(self, spec: GangSpec, created: float, group: GangGroup) -> None:
        self.spec = spec
        self.created = created  # the core's clock when its first member arrived
        self.group = group
        self.asks: dict[tuple[str, str], Ask] = {}  # (application id, key) -> member ask
        self.tentative: dict[str, Member] = {}  # by allocation uuid, in placement order
        self.bound = 0  # members sent to the RM
        self.satisfied = group.satisfied  # a gang that joins a satisfied group is, too
        self.apps: set[str] = set()  # applications its members came in

    @property
    def gang_id(self) -> str:
        return self.spec.gang_id

    @property
    def ready(self) -> bool:
        return len(self.tentative) + self.bound >= self.spec.min_available

    def __repr__(self) -> str:
        return (
            f"<Gang {self.gang_id} placed={len(self.tentative)} bound={self.bound} "
            f"min={self.spec.min_available}>"
        )


class GangGroup:
    """Gangs that reach the RM together: every gang of it must have ``min_available``
    members placed first. A gang alone is a group of one."""

    __slots__ = (
        "blocked",
        "created",
        "failing",
        "gangs",
        "ids",
        "parked",
        "parked_at",
        "satisfied",
        "timed_out",
        "timed_out_at",
        "wait",
        "wait_gang",
    )

    def __init__(self, ids: tuple[str, ...], created: float) -> None:
        self.ids = ids
        self.created = created  # of its oldest gang
        self.gangs: dict[str, Gang] = {}  # the gangs of ``ids`` a member has declared
        self.wait: Promise[bool] | None = None  # runs while a member is tentative
        self.wait_gang: Gang | None = None  # whose waiting time the wait has
        self.satisfied = False
        self.timed_out = False
        self.timed_out_at = 0.0
        # Not scheduled while the partition's generation is ``parked_at`` (a Strict
        # rollback, or rolled back for an older group): "" or "strict" or "deadlock".
        self.parked = ""
        self.parked_at = -1
        # This pass's first member that could not be placed: (ask, queue, kind, where);
        # and whether one of a Strict gang failed (the group rolls back after the proposal).
        self.blocked: tuple[Ask, Queue, str, Queue | None] | None = None
        self.failing = False

    @property
    def key(self) -> tuple[float, str]:
        """Age order: the older group first, ties by gang id."""
        return (self.created, self.ids[0])

    @property
    def name(self) -> str:
        return self.ids[0] if len(self.ids) == 1 else "[" + ", ".join(self.ids) + "]"

    def placed(self) -> int:
        return sum(len(g.tentative) for g in self.gangs.values())

    def ready(self) -> bool:
        if len(self.gangs) < len(self.ids):
            return False  # a gang of the group has no member yet
        for gang in self.gangs.values():
            if not gang.ready:
                return False
        return True

    def park(self, why: str, generation: int) -> None:
        """Not scheduled while the partition's generation is ``generation``."""
        self.parked = why
        self.parked_at = generation

    def members(self) -> Iterator[Member]:
        for gang in self.gangs.values():
            yield from gang.tentative.values()

    def __repr__(self) -> str:
        return f"<GangGroup {self.name} placed={self.placed()} satisfied={self.satisfied}>"


class PermitGangs:
    """The permit gangs of a partition, and every change they make to its shared state.

    ``on_wait`` is set by the partition's actor: it is called with a group whose wait just
    started (its first tentative member) and awaits ``group.wait`` with the group's
    waiting time, calling ``time_out`` when it passes. Without it (domain tests) no wait
    runs.
    """

    def __init__(self, partition: PartitionState) -> None:
        self.partition = partition
        self.gangs: dict[str, Gang] = {}
        self.groups: dict[str, GangGroup] = {}  # by every gang id of the group
        self.on_wait: Callable[[GangGroup], None] | None = None
        self._failed: list[tuple[GangGroup, Application, Ask, str]] = []  # this pass
        self._blocked: list[GangGroup] = []  # groups with a member not placed this pass
        self._deadlocks = DeadlockResolver(self)
        self._timed_out: dict[int, GangGroup] = {}  # oldest timeout first, by id()
        # Satisfied gangs with no member ask and no live application, since when: kept for
        # Timeouts.terminated (as a terminated application is), so a late member is still
        # a normal ask; oldest first, by id().
        self._idle: dict[int, tuple[Gang, float]] = {}
        self.log = logger.bind(partition=partition.name)

    def __bool__(self) -> bool:
        return bool(self.groups)

    # ==================================================================== membership
    def admit(self, app: Application, ask: Ask) -> str:
        """A member ask arrives: join (or start) its gang. Returns a rejection reason, or
        "" when admitted (``ask.gang_time`` is then its gang's creation time)."""
        spec = ask.gang
        assert spec is not None
        key = ask.allocation_key
        if ask.placeholder or app.placeholder_ask or app.task_groups:
            return (
                f"ask {key}: application {app.application_id} uses placeholder gang "
                f"scheduling; its asks cannot be members of permit gang {spec.gang_id}"
            )
        group = self.groups.get(spec.gang_id)
        if group is not None and (group.timed_out or group.satisfied):
            self._prune_timed_out()  # remembered for Timeouts.terminated, then forgotten
            group = self.groups.get(spec.gang_id)
        if group is not None and group.timed_out:
            return self._timeout_reason(group)
        gang = self.gangs.get(spec.gang_id)
        if gang is not None:
            conflict = spec_conflict(gang.spec, spec)
            if conflict:
                return f"ask {key}: permit gang {spec.gang_id} differs in tag {conflict}"
        else:
            for gid in spec.groups:
                other = self.groups.get(gid)
                if other is not None and other.ids != spec.groups:
                    return (
                        f"ask {key}: tag {TAG_GROUPS} {list(spec.groups)} of gang "
                        f"{spec.gang_id} conflicts with GangGroup {list(other.ids)}"
                    )
                if other is not None and other.timed_out:
                    return self._timeout_reason(other)
            now = self.partition.clock()
            if group is None:
                group = GangGroup(spec.groups, now)
                for gid in spec.groups:
                    self.groups[gid] = group
            gang = Gang(spec, now, group)
            group.gangs[spec.gang_id] = gang
            group.created = min(g.created for g in group.gangs.values())
            self.gangs[spec.gang_id] = gang
        gang.asks[(app.application_id, key)] = ask
        gang.apps.add(app.application_id)
        self._idle.pop(id(gang), None)
        ask.gang_time = gang.created
        app.permit_gangs[spec.gang_id] = None
        return ""

    def ask_removed(self, app: Application, ask: Ask) -> None:
        """``ask`` leaves its application: its tentative members are undone (the RM never
        had them) and the gang forgets it."""
        spec = ask.gang
        if spec is None:
            return
        gang = self.gangs.get(spec.gang_id)
        if gang is None:
            return
        mine = [m for m in gang.tentative.values() if m.ask is ask]
        if mine:
            for member in mine:
                del gang.tentative[member.alloc.uuid]
                self._undo(member, give_back=False)
            self._wait_check(gang.group)
            self.partition.wake()
        if gang.asks.get((app.application_id, ask.allocation_key)) is ask:
            del gang.asks[(app.application_id, ask.allocation_key)]
        if not gang.asks and not gang.tentative:
            self._forget(gang)

    def _forget(self, gang: Gang) -> None:
        """A gang without member asks goes, unless it is satisfied and one of its
        applications is still there (its bound members run: a later member is a normal
        ask), or its group timed out (remembered, to reject late members, until
        ``Timeouts.terminated`` has passed)."""
        group = gang.group
        if group.timed_out:
            return
        live = self.partition.applications
        if gang.satisfied:
            if not any(app_id in live for app_id in gang.apps) and id(gang) not in self._idle:
                self._idle[id(gang)] = (gang, self.partition.clock())
                self._prune_timed_out()
            return
        self._drop_gang(gang)

    def _drop_gang(self, gang: Gang) -> None:
        group = gang.group
        self._idle.pop(id(gang), None)
        del self.gangs[gang.gang_id]
        del group.gangs[gang.gang_id]
        if group.wait_gang is gang:
            group.wait_gang = None
        if group.gangs:
            group.created = min(g.created for g in group.gangs.values())
        else:
            self._drop_group(group)

    def _drop_group(self, group: GangGroup) -> None:
        for gid in group.ids:
            if self.groups.get(gid) is group:
                del self.groups[gid]
            gang = self.gangs.get(gid)
            if gang is not None and gang.group is group:
                del self.gangs[gid]
                self._idle.pop(id(gang), None)
        if group.wait is not None:
            group.wait.resolve(False)
            group.wait = None
        # Gangs and group point at each other: unlinked, they go by reference counting now,
        # not at the cyclic collector's next full collection (minutes away under tune_gc;
        # the soak, bench/soak.py, saw thousands waiting).
        group.gangs = {}
        group.wait_gang = None

    def clear(self) -> None:
        """The partition is gone: forget every gang and group (each unlinked, see
        ``_drop_group``), and whatever the pass and the deadlock resolver noted."""
        for group in {id(g): g for g in self.groups.values()}.values():
            self._drop_group(group)
        for gang in self.gangs.values():  # none should be left; unlinked all the same
            gang.group.gangs = {}
            gang.group.wait_gang = None
        self.gangs.clear()
        self._idle.clear()
        self._timed_out.clear()
        self._failed = []
        self._blocked = []
        self._deadlocks.gave_way = {}

    def app_left(self, app: Application) -> None:
        """``app`` left the partition: a satisfied gang kept for it may go now."""
        for gang_id in app.permit_gangs:
            gang = self.gangs.get(gang_id)
            if gang is not None:
                gang.apps.discard(app.application_id)
                if not gang.asks and not gang.tentative:
                    self._forget(gang)

    def app_leaving(self, app: Application) -> None:
        """``app`` is removed: its member asks leave their gangs first."""
        for ask in list(app.asks.values()):
            if ask.gang is not None:
                self.ask_removed(app, ask)

    def lost(self, alloc: Allocation) -> bool:
        """A tentative ``alloc`` went with its node (already off it): the member is pending
        again. False if ``alloc`` is no tentative member."""
        if not alloc.tentative:
            return False
        app = self.partition.applications.get(alloc.application_id)
        ask = app.asks.get(alloc.allocation_key) if app is not None else None
        gang = self.gangs.get(ask.gang.gang_id) if ask is not None and ask.gang else None
        member = gang.tentative.pop(alloc.uuid, None) if gang is not None else None
        if gang is None or member is None:
            return False
        self._undo(member, give_back=True, on_node=False)
        self._wait_check(gang.group)
        return True

    # ================================================================== the pass's side
    def schedulable(self, ask: Ask) -> Gang | None:
        """The unsatisfied gang ``ask`` is a member of, if the pass places it as a member
        (None: the gang is satisfied, and ``ask`` is a normal ask). Raises nothing; a
        parked or timed-out group's members are skipped by the caller (``held``)."""
        assert ask.gang is not None
        gang = self.gangs.get(ask.gang.gang_id)
        if gang is None or gang.satisfied:
            return None
        return gang

    def holding(self) -> bool:
        """Some group not yet satisfied holds tentative members."""
        for group in self.groups.values():
            if not group.satisfied and group.placed():
                return True
        return False

    def held(self, gang: Gang) -> bool:
        """The pass leaves ``gang``'s members alone now: its group is parked (until the
        cluster changes), timed out, or rolls back after this proposal (a member of a
        Strict gang of it failed)."""
        group = gang.group
        if group.timed_out or group.failing:
            return True
        return bool(group.parked) and group.parked_at == self.partition.generation

    def member_failed(
        self, gang: Gang, app: Application, ask: Ask, kind: str, where: Queue | None = None
    ) -> bool:
        """The pass could not place member ``ask``: ``kind`` is ``quota`` (``where`` is the
        queue whose max holds it), ``limit`` (user or group limits) or ``node``. Read-only:
        what follows happens in ``after_propose``. True when its group rolls back then
        (a Strict gang's member): the walk should stop here."""
        group = gang.group
        queue = app.queue
        if group.blocked is None and queue is not None:
            group.blocked = (ask, queue, kind, where)
            self._blocked.append(group)
        if gang.spec.strict and not group.failing:
            group.failing = True
            self._failed.append((group, app, ask, kind))
            return True
        return False

    def begin_pass(self) -> None:
        for group in self._blocked:
            group.blocked = None
        for group, _app, _ask, _kind in self._failed:
            group.failing = False
        self._blocked = []
        self._failed = []

    def after_propose(self) -> bool:
        """Roll back the Strict groups a member of which could not be placed; True if that
        freed anything."""
        if not self._failed:
            return False
        failed, self._failed = self._failed, []
        freed = False
        for group, app, ask, kind in failed:
            group.failing = False
            why = {"quota": "its queue's quota is full", "limit": "its user or group limit"}
            reason = why.get(kind, "no node has room for it")
            held = group.placed()
            self.roll_back(
                group,
                "GangRolledBack",
                f"Strict gang {group.name}: member {ask.allocation_key} of application "
                f"{app.application_id} cannot be placed ({reason}); {held} tentative "
                "member(s) rolled back, tried again when the cluster changes",
                always=True,
            )
            group.park("strict", self.partition.generation)
            freed = freed or held > 0
        return freed

    def resolve_deadlock(self) -> bool:
        """After a pass: let the oldest group that could not place a member complete, if
        younger groups hold its room (``DeadlockResolver.resolve``)."""
        return self._deadlocks.resolve(self._blocked)

    # ============================================================================ commit
    def placed(self, app: Application, ask: Ask, alloc: Allocation) -> bool:
        """The commit applied ``alloc`` of member ``ask``. True: it is tentative (not sent
        to the RM; or sent now with its whole group, which this completed). False: the
        gang is satisfied, ``alloc`` is a normal allocation."""
        assert ask.gang is not None
        gang = self.gangs.get(ask.gang.gang_id)
        if gang is None or gang.satisfied:
            if gang is not None:
                gang.bound += 1
            return False
        alloc.tentative = True
        gang.tentative[alloc.uuid] = Member(alloc, app, ask)
        group = gang.group
        if group.wait is None:
            self._start_wait(group, gang)
        if gang.ready and group.ready():
            self._bind(group)
        return True

    def _start_wait(self, group: GangGroup, gang: Gang) -> None:
        group.wait = Promise()
        group.wait_gang = gang
        p = self.partition
        self._event(
            group,
            "GangWaiting",
            f"gang {group.name}: first member placed tentatively; waiting up to "
            f"{gang.spec.waiting_time:g}s for every gang to reach min-available",
        )
        if self.on_wait is not None:
            self.on_wait(group)
        else:
            p.log.debug("gang {} waits with nobody timing it", group.name)

    def _wait_check(self, group: GangGroup) -> None:
        """The wait runs while a member is tentative; with none left it stops."""
        if group.wait is not None and not group.placed():
            group.wait.resolve(False)
            group.wait = None
            group.wait_gang = None

    def _bind(self, group: GangGroup) -> None:
        """Every gang of ``group`` reached min-available: send all its tentative members to
        the RM in one run of ``new``, then let their applications move on."""
        p = self.partition
        outbox = p.outbox
        members: list[Member] = []
        for gid in group.ids:
            gang = group.gangs[gid]
            gang.satisfied = True
            for member in gang.tentative.values():
                member.alloc.tentative = False
                outbox.add("new", member.alloc.to_si(to_si_shared(member.ask.size)))
                members.append(member)
            gang.bound += len(gang.tentative)
            gang.tentative = {}
        group.satisfied = True
        group.parked = ""
        if group.wait is not None:
            group.wait.resolve(True)
            group.wait = None
        group.wait_gang = None
        self._event(
            group,
            "GangSatisfied",
            f"gang {group.name}: every gang reached min-available; {len(members)} member(s) "
            "sent to the RM together, later members are scheduled as normal asks",
        )
        for member in members:
            owner = p.owners.get(member.app.application_id)
            if owner is not None and owner.app is member.app:
                owner.allocated(member.ask, member.alloc)
        self._deadlocks.let_go()  # groups that gave way to an older one may go again

    # ========================================================================= rollback
    def roll_back(
        self, group: GangGroup, reason: str, message: str, *, always: bool = False
    ) -> int:
        """Undo every tentative member of ``group``: freed on node, queue and application,
        pending again. Returns how many; sends an event when there were any (or ``always``)."""
        members = list(group.members())
        for gang in group.gangs.values():
            gang.tentative = {}
        for member in members:
            self._undo(member, give_back=True)
        if group.wait is not None:
            group.wait.resolve(False)
            group.wait = None
            group.wait_gang = None
        if members or always:
            self._event(group, reason, message)
        if members:
            self.partition.schedule_pending = True
        return len(members)

    def _undo(self, member: Member, *, give_back: bool, on_node: bool = True) -> None:
        p = self.partition
        alloc, app, ask = member.alloc, member.app, member.ask
        if on_node:
            p.free_on_node(alloc)
        if app.remove_allocation(alloc.uuid) is None:
            return
        alloc.tentative = False
        queue = app.queue
        if queue is not None:
            queue.remove_allocated(alloc.resource)
            if p.ugm is not None:
                p.ugm.released(app, alloc.resource)
        if give_back:
            delta = app.give_back_pending(ask)
            if delta and queue is not None:
                queue.add_pending(delta)

    # ========================================================================== timeout
    def time_out(self, group: GangGroup) -> list[tuple[Application, Ask]]:
        """``group``'s wait passed: roll it back and mark it timed out. Returns the member
        asks for their applications to reject (with ``timeout_reason``)."""
        if group.satisfied or group.timed_out:
            return []
        p = self.partition
        self.roll_back(
            group,
            "GangRolledBack",
            f"gang {group.name}: waiting time passed; tentative members rolled back",
        )
        group.timed_out = True
        group.timed_out_at = p.clock()
        self._prune_timed_out()  # the older ones, before this one is kept
        self._timed_out[id(group)] = group
        self._event(
            group,
            "GangTimeout",
            f"{self._timeout_reason(group)}; its members are rejected and it is not "
            "scheduled again",
        )
        members = [
            (app, ask)
            for gang in group.gangs.values()
            for (app_id, _key), ask in gang.asks.items()
            if (app := p.applications.get(app_id)) is not None
        ]
        self._prune_timed_out()
        return members

    def _timeout_reason(self, group: GangGroup) -> str:
        gang = group.wait_gang or next(iter(group.gangs.values()), None)
        wait = f" of {gang.spec.waiting_time:g}s" if gang is not None else ""
        return (
            f"permit gang {group.name} timeout: the waiting time{wait} passed before every "
            "gang of the group reached min-available"
        )

    def timeout_reason(self, group: GangGroup) -> str:
        return self._timeout_reason(group)

    def _prune_timed_out(self) -> None:
        """Forget timed-out groups and idle satisfied gangs once ``Timeouts.terminated`` (3
        days) has passed, or sooner beyond ``Timeouts.terminated_kept`` of each (as
        terminated applications): the oldest go first. Run as one is kept: with gang ids
        never used again, nothing else would (the soak, bench/soak.py, found them piling
        up)."""
        p = self.partition
        horizon = p.clock() - p.timeouts.terminated
        kept = p.timeouts.terminated_kept
        while self._timed_out:
            key, group = next(iter(self._timed_out.items()))
            if group.timed_out_at >= horizon and len(self._timed_out) <= kept:
                break
            del self._timed_out[key]
            group.timed_out = False  # let _drop_group run
            self._drop_group(group)
        live = p.applications
        while self._idle:
            gang, since = next(iter(self._idle.values()))
            if since >= horizon and len(self._idle) <= kept:
                break
            if gang.asks or gang.tentative or any(a in live for a in gang.apps):
                self._idle.pop(id(gang))  # in use again
            else:
                self._drop_gang(gang)

    # =========================================================================== events
    def _event(self, group: GangGroup, reason: str, message: str) -> None:
        """One event per application with members in the group (the RM shows events on
        applications), the gang ids as the group."""
        p = self.partition
        app_ids = sorted(
            {app_id for gang in group.gangs.values() for (app_id, _k) in gang.asks}
            | {m.app.application_id for m in group.members()}
        )
        p.log.info("gang {}: {} {}", group.name, reason, message)
        for app_id in app_ids or [""]:
            p.outbox.event(si.EventRecordType.APP, app_id, reason, message, group=group.name)
