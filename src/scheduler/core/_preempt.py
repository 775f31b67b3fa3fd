"""Preemption, run by the partition's actor after a pass, and awaited by the preemptor's.

When a pass ends with asks still waiting, a preemption round (``PreemptionRound.run``)
looks for asks that may take room from others (``scheduler.policies._preemption`` decides
which victims, within the laws): asks bound to a node that has no room for them (the
DaemonSet case), and, when the partition has preemption enabled, asks of leaf queues below
their guarantee that allow it (``allow_preempt_other``) and have waited the leaf's
``preemption.delay``. For each plan it starts the handshake in the same turn: the node is
reserved for the preemptor (nothing else lands there), the victims are marked and released
to the RM with ``PREEMPTED_BY_SCHEDULER`` and stay counted where they are, and the
preemptor's application actor awaits the RM's confirmations (``PreemptionFlows``). When
the last victim is confirmed, the freed node goes to the preemptor at the next pass; when
the RM has not confirmed them all within ``Timeouts.preemption``, the node is let go, with
an event, and the ask may try again.

An RM that checks predicates is asked first (``preemption_predicates``, SI 1.3) whether
the ask fits on the node once the victims are gone; the round then starts only the plan it
accepts, in a handler of the partition's actor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from actors import DeadlineExceeded, Promise
from scheduler import si
from scheduler.core._walk import SCHEDULABLE_STATES
from scheduler.objects._application import AppState
from scheduler.objects._handshake import Preemption
from scheduler.objects._pending import Group, order
from scheduler.policies._placement import show
from scheduler.policies._preemption import Plan, Planner

if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterator
    from typing import Any

    from loguru import Logger

    from scheduler.core._partition import Partition
    from scheduler.objects._application import Application
    from scheduler.objects._asks import Ask
    from scheduler.objects._queue import Queue
    from scheduler.objects._resources import Size

__all__ = ["MAX_STARTED", "PREEMPTED", "PreemptionFlows", "PreemptionRound"]

PREEMPTED: Final = si.TerminationType.PREEMPTED_BY_SCHEDULER
# A round starts at most this many preemptions, and looks for victims at most this many
# times without finding any (each look reads every possible victim once per node).
MAX_STARTED: Final = 256
MAX_FAILED: Final = 16

_Key = tuple[int, "Size | None", int]  # a leaf (its id), a shape, a priority


def _first_order(group: Group) -> tuple[float, str, int]:
    return order(group.first())


def _share_first(item: tuple[float, int, Queue]) -> tuple[float, int]:
    return item[0], item[1]


class PreemptionRound:
    """The preemptions a partition starts after a pass (see the module docstring)."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition
        # When the earliest ask that waits for its delay, or to try again, may preempt: the
        # partition's actor arms a timer for it.
        self.due: float | None = None
        # Per leaf, the (shape, priority) of asks that found no victims, and until when
        # they are not looked at again.
        self._failed: dict[_Key, float] = {}

    def wanted(self) -> bool:
        """Whether a round may start anything: asks bound to a node wait, or preemption
        is enabled and some ask is still pending."""
        p = self.partition
        return bool(p.required_waiting) or (p.config.preemption_enabled and bool(p.root.pending))

    def next_plan(self) -> Plan | None:
        """The first preemption the round would start, without starting it (for an RM
        that checks predicates: it is put to the RM first)."""
        return next(self._plans(1, start=False), None)

    def run(self) -> int:
        """Start every preemption the round finds; returns how many."""
        return sum(1 for _ in self._plans(MAX_STARTED, start=True))

    def _plans(self, limit: int, *, start: bool) -> Iterator[Plan]:
        p = self.partition
        now = p.clock()
        self.due = None
        planner = Planner(p)
        found = 0
        waiting, p.required_waiting = p.required_waiting, {}
        for app, ask in waiting.values():
            if found >= limit:
                if start:
                    p.schedule_pending = True  # the walk finds the rest again
                break
            plan = self._required(planner, app, ask)
            if plan is not None:
                found += 1
                if start:
                    self.start(plan)
                planner.changed()
                yield plan
        if not p.config.preemption_enabled:
            return
        failed = 0
        for leaf in self._starved(planner):
            for app, group in self._groups(leaf):
                key = (id(leaf), group.size, group.priority)
                for ask in self._asks(app, group, leaf, key, now):
                    plan = planner.plan(app, ask, leaf)
                    if plan is None and planner.busy:
                        break  # nodes wait for their victims: the next round looks again
                    if plan is None:
                        retry = now + p.timeouts.preempt_retry
                        self._failed[key] = retry  # the rest of the group waits too
                        self._due(retry)
                        failed += 1
                        if failed >= MAX_FAILED:
                            return
                        break
                    found += 1
                    if start:
                        self.start(plan)
                    planner.changed()
                    yield plan
                    if found >= limit:
                        if start:
                            p.schedule_pending = True  # more may follow: another round
                        return

    def refused(self, plan: Plan) -> None:
        """The RM's predicates refused ``plan``: its ask does not try again before
        ``Timeouts.preempt_retry``."""
        p = self.partition
        retry = p.clock() + p.timeouts.preempt_retry
        plan.ask.preempt_after = retry
        self._due(retry)
        p.outbox.event(
            si.EventRecordType.REQUEST,
            plan.ask.allocation_key,
            "PreemptionRefused",
            f"the RM's predicates refused ask {plan.ask.allocation_key} on node "
            f"{plan.node.node_id} after preempting {len(plan.victims)} allocations there",
            group=plan.app.application_id,
        )

    def _due(self, when: float) -> None:
        if self.due is None or when < self.due:
            self.due = when

    def _starved(self, planner: Planner) -> list[Queue]:
        """The leaves with pending asks that may preempt others, that some queue of their
        chain below its guarantee is above, the most starved first (the lowest share of a
        guarantee in use). A read of the partition's queues, not a walk of the tree: cheap
        when none is starved."""
        starved: list[tuple[float, int, Queue]] = []
        for i, queue in enumerate(self.partition.queues.values()):
            if queue.leaf and queue.pending and queue.shapes.preempting:
                share = planner.starvation(queue)
                if share is not None and share < 1.0:
                    starved.append((share, i, queue))
        starved.sort(key=_share_first)
        return [queue for _, _, queue in starved]

    def _groups(self, leaf: Queue) -> Iterator[tuple[Application, Group]]:
        """The groups of pending asks of ``leaf`` (one shape and priority each) that may
        hold a preemptor, in scheduling order: applications in the leaf's order, priorities
        high first, and the groups of one priority by their first ask's age. The asks
        looked at one by one (permit gang members, real asks of a task group, asks bound
        to a node) never preempt between queues."""
        p = self.partition
        ugm = p.ugm
        for app in leaf.sorted_applications():
            if not app.pending_asks.preempting or app.state not in SCHEDULABLE_STATES:
                continue  # none of its asks may preempt others: no look at them
            if (
                leaf.app_limited_chain
                and app.state is AppState.ACCEPTED
                and not leaf.can_run_another_app()
            ):
                continue
            charge = ugm.charge(app) if ugm is not None else None
            for level in app.pending_asks.levels:
                groups = [g for size, g in level.items() if size is not None]
                if len(groups) > 1:
                    groups.sort(key=_first_order)
                for group in groups:
                    res = group.first().resource
                    if (leaf.limited_chain and not leaf.headroom_fits(res)) or (
                        charge is not None and not charge.fits(res)
                    ):
                        continue
                    yield app, group

    def _asks(
        self, app: Application, group: Group, leaf: Queue, key: _Key, now: float
    ) -> Iterator[Ask]:
        """The asks of ``group`` that may preempt now, oldest first: none while the group
        waits to try again; the first one still within the leaf's ``preemption.delay``
        ends the look (the rest are younger) and leaves its due time."""
        until = self._failed.get(key)
        if until is not None:
            if until > now:
                self._due(until)
                return
            del self._failed[key]
        delay = leaf.preemption_delay
        preemptions = self.partition.preemptions
        for ask in group.values():  # a start changes no group: no copy
            if not ask.allow_preempt_other or (preemptions and preemptions.of(ask) is not None):
                continue
            if app.asks.get(ask.allocation_key) is not ask or ask.pending <= 0:
                continue  # placed meanwhile
            due = ask.created + delay
            if due > now:
                self._due(due)
                return
            if ask.preempt_after > now:
                self._due(ask.preempt_after)
                continue
            yield ask
            if key in self._failed:
                return

    def _required(self, planner: Planner, app: Application, ask: Ask) -> Plan | None:
        p = self.partition
        node = p.nodes.get(ask.required_node)
        if (
            node is None
            or p.applications.get(app.application_id) is not app
            or app.asks.get(ask.allocation_key) is not ask
            or ask.pending <= 0
            or p.preemptions.of(ask) is not None
            or ask.preempt_after > p.clock()
        ):
            return None
        reserved = node.reserved
        if reserved is not None and reserved.ask is not ask and reserved.ask.required_node:
            return None  # held for another ask bound to it
        return planner.plan_on_node(app, ask, node)

    # ====================================================================== the handshake
    def start(self, plan: Plan) -> bool:
        """Reserve the node for the preemptor, release the victims to the RM, and hand the
        wait to the preemptor's application actor. False (nothing done) if the plan no
        longer holds: the ask or a victim went since it was made."""
        p = self.partition
        app, ask, node = plan.app, plan.ask, plan.node
        owner = p.owners.get(app.application_id)
        queue = app.queue
        if (
            owner is None
            or queue is None
            or app.asks.get(ask.allocation_key) is not ask
            or p.nodes.get(node.node_id) is not node
            or any(a.release_pending is not None for a, _ in plan.victims)
        ):
            return False
        reserved = node.reserved
        if reserved is not None and reserved.ask is not ask:
            p.reservations.release(reserved)
            p.outbox.event(
                si.EventRecordType.REQUEST,
                reserved.ask.allocation_key,
                "ReservationCancelled",
                f"reservation of node {node.node_id} cancelled: the node is preempted for "
                f"ask {ask.allocation_key} of application {app.application_id}",
                group=reserved.application_id,
            )
        if node.reserved is None:
            held = app.reservations_of(ask)
            if held and len(held) >= ask.pending:
                p.reservations.release(held[0])  # this one holds a node for it instead
            if p.reservations.reserve(app, ask, node) is None:
                return False
        now = p.clock()
        victims = {}
        chains = {}
        for alloc, victim_queue in plan.victims:
            alloc.release_pending = PREEMPTED
            victims[alloc.uuid] = alloc
            chains[alloc.uuid] = victim_queue.chain
            if alloc.placeholder:
                victim_app = p.applications.get(alloc.application_id)
                group = victim_app.task_groups.get(alloc.task_group_name) if victim_app else None
                if group is not None:
                    group.free.pop(alloc.uuid, None)  # no real ask may claim it now
                    group.timedout += 1  # as YuniKorn counts all but a replacement
        rec = Preemption(
            app.application_id,
            ask,
            node,
            queue.chain,
            victims,
            chains,
            Promise(),
            now,
            plan.required_node,
            len(victims),
        )
        p.preemptions.open(rec)
        ask.triggered_preemption = True
        why = (
            f"ask {ask.allocation_key} must run on node {node.node_id}"
            if plan.required_node
            else f"queue {queue.path} is below its guarantee"
        )
        # The RM's message is YuniKorn's (v1.8 preemption.go, required_node_preemptor.go);
        # the event tells the whole story.
        released = (
            "preempting allocations to free up resources to run "
            f"{'daemon set ' if plan.required_node else ''}ask: {ask.allocation_key}"
        )
        for alloc, victim_queue in plan.victims:
            message = (
                f"preempted by the scheduler to run ask {ask.allocation_key} of application "
                f"{app.application_id} (queue {queue.path}) on node {node.node_id}: {why}"
            )
            p.outbox.release(alloc, PREEMPTED, released)
            p.outbox.event(
                si.EventRecordType.REQUEST,
                alloc.allocation_key,
                "Preempted",
                f"allocation {alloc.uuid} of application {alloc.application_id} (queue "
                f"{victim_queue.path}) {message}",
                group=alloc.application_id,
            )
        p.outbox.event(
            si.EventRecordType.REQUEST,
            ask.allocation_key,
            "PreemptionTriggered",
            f"ask {ask.allocation_key} {show(ask.resource)} preempts "
            f"{', '.join(a.uuid for a in victims.values())} on node {node.node_id}: {why}",
            group=app.application_id,
        )
        p.log.info(
            "preempting {} on node {} for ask {} of application {} ({})",
            list(victims),
            node.node_id,
            ask.allocation_key,
            app.application_id,
            why,
        )
        owner.await_preemption(rec)
        return True


class PreemptionFlows:
    """The preemptor's side of the handshake: a part of its application actor."""

    app: Application
    partition: Partition

    if TYPE_CHECKING:  # the rest of the actor
        log: Logger

        def run_handler(self, coro: Coroutine[Any, Any, Any]) -> None: ...

    def await_preemption(self, rec: Preemption) -> None:
        """Await ``rec``'s victims as a handler of this actor (the turn ends meanwhile)."""
        self.run_handler(self._preemption_wait(rec))

    async def _preemption_wait(self, rec: Preemption) -> None:
        p = self.partition
        bound = p.timeouts.preemption
        try:
            outcome = await rec.done.within(bound)
        except DeadlineExceeded:
            rec.done.resolve("timeout")
            outcome = rec.done.result()
        # Anything may have changed while the RM was asked: read it all again.
        p.preemptions.close(rec, outcome)
        if outcome != "timeout":
            # Confirmed: the last victim's release woke the pass and the node's
            # reservation, which places the ask there. Cancelled: nothing is held.
            return
        reservation = rec.node.reserved
        ours = reservation is not None and reservation.ask is rec.ask
        ask = rec.ask
        left = len(rec.victims)
        self.log.warning(
            "application {}: the RM has not confirmed {} of the {} victims preempted for "
            "ask {} on node {} after {}s; the node is no longer held",
            self.app.application_id,
            left,
            rec.total,
            ask.allocation_key,
            rec.node.node_id,
            bound,
        )
        if ours:
            assert reservation is not None
            p.reservations.release(reservation)
        p.outbox.event(
            si.EventRecordType.REQUEST,
            ask.allocation_key,
            "PreemptionTimedOut",
            f"the RM did not confirm {left} of the {rec.total} victims preempted for ask "
            f"{ask.allocation_key} on node {rec.node.node_id} within {bound:g}s: the node "
            "is no longer held and the ask is tried again",
            group=self.app.application_id,
        )
        p.wake()
