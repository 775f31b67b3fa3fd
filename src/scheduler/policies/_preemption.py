"""Preemption: which running allocations make room for an ask that waits (read only).

Two cases, as YuniKorn 1.3+ has them:

* **Between queues** (``Planner.plan``): an ask of a queue below its guarantee takes room
  from queues above theirs. Every plan keeps the laws, counted on each queue of the
  victims' and the preemptor's chains, with the preemptions already in flight counted as
  done (``Preemptions.effective``):

  1. no queue goes below its guarantee: a queue that loses a resource it has a
     guarantee for keeps at least that guarantee;
  2. the preemptor's queue gains only up to its guarantee: a queue that gains a resource it
     has a guarantee for stays at or below it, and at least one queue with a guarantee for
     a resource of the ask gains it (so a queue with no guarantee anywhere above it never
     preempts, and two siblings under one guaranteed parent never preempt each other);
  3. victims are only in other leaf queues, never of the preemptor's application, of equal
     or lower priority, never in a queue whose ``preemption.policy`` is ``disabled``, and
     never outside the nearest ``fence`` above the preemptor (a fenced subtree cannot
     reach out; others can reach in);
  4. never a victim whose release is already on its way (a placeholder being replaced, an
     allocation already preempted or timed out), a tentative permit gang member, or an
     allocation bound to its node (a DaemonSet's).

  Victims are chosen on one node, just enough to fit the ask, preferring those that allow
  it (``allow_preempt_self``), then lower priority, non-originators, tasks outside gangs,
  and younger ones. The node with the fewest victims wins; ties go to the first found.

* **A required node** (``Planner.plan_on_node``, the DaemonSet case, YuniKorn's
  ``RequiredNodePreemptor``): an ask bound to one node that does not fit there takes
  room on that node from allocations of equal or lower priority that are not bound to a
  node themselves, regular ones first, those that opted out of preemption next, and
  originators last; then by lower priority, younger, smaller. Queue guarantees do not
  hold it back, as in YuniKorn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NamedTuple

from scheduler import si
from scheduler.objects._gang_tags import has_gang_tags
from scheduler.objects._resources import Res, fits

if TYPE_CHECKING:
    from scheduler.objects._application import Application
    from scheduler.objects._asks import Allocation, Ask
    from scheduler.objects._nodes import Node
    from scheduler.objects._partition import PartitionState
    from scheduler.objects._queue import Queue

__all__ = ["Plan", "Planner", "victim_order"]

_REQUIRED_NODE: Final = si.DOMAIN_YUNIKORN + si.KEY_REQUIRED_NODE


class Plan(NamedTuple):
    """Preempt ``victims`` (each with its leaf queue) on ``node`` so that ``ask`` of ``app``
    fits there; the node's current reservation, if any, is the preemptor's to take."""

    app: Application
    ask: Ask
    node: Node
    victims: list[tuple[Allocation, Queue]]
    required_node: bool = False


def in_gang(alloc: Allocation) -> bool:
    """A member of a gang: a placeholder, a real task of a task group, a permit gang's."""
    return alloc.placeholder or bool(alloc.task_group_name) or has_gang_tags(alloc.tags)


def victim_order(alloc: Allocation) -> tuple[bool, int, bool, bool, float]:
    """Victims in the order they are taken (first first): those that allow it, lower
    priority, non-originators, outside gangs, younger."""
    return (
        not alloc.allow_preempt_self,
        alloc.priority,
        alloc.originator,
        in_gang(alloc),
        -alloc.allocation_time,
    )


def _required_order(alloc: Allocation) -> tuple[int, int, float, int]:
    # YuniKorn's SortAllocations: regular, opted out, originator; priority; younger; smaller.
    kind = 3 if alloc.originator else 2 if not alloc.allow_preempt_self else 1
    return (kind, alloc.priority, -alloc.allocation_time, sum(alloc.resource.values()))


def may_be_victim(alloc: Allocation) -> bool:
    """Not already on its way out, not tentative, not bound to its node."""
    return (
        alloc.release_pending is None
        and not alloc.tentative
        and not (alloc.tags and alloc.tags.get(_REQUIRED_NODE))
    )


def _matches(ask: Res, res: Res) -> bool:
    """They share a resource the ask needs (YuniKorn's ``MatchAny``)."""
    return any(v > 0 and res.get(name, 0) > 0 for name, v in ask.items())


def _shortfall(need: Res, available: Res) -> Res:
    """What ``available`` lacks of ``need``, per resource it lacks."""
    return {n: v - available.get(n, 0) for n, v in need.items() if v > available.get(n, 0)}


def _freed(short: Res, res: Res, sign: int = 1) -> bool:
    """``res`` freed (``sign`` 1) or taken back (-1) against ``short``; True once
    nothing is short any more."""
    for name, v in res.items():
        if name in short:
            short[name] -= sign * v
    return all(v <= 0 for v in short.values())


def _shift(net: dict[Queue, Res], chain: tuple[Queue, ...], res: Res, sign: int) -> None:
    """Each queue of ``chain`` gains ``res`` (``sign`` 1) or loses it (-1) in ``net``."""
    for q in chain:
        delta = net.setdefault(q, {})
        for name, v in res.items():
            delta[name] = delta.get(name, 0) + sign * v


class Planner:
    """The victims of one partition, looked at once per preemption round: by node, in the
    order they are taken, with each queue's usage as preemption reads it."""

    def __init__(self, partition: PartitionState) -> None:
        self.partition = partition
        self._by_node: dict[str, list[tuple[Allocation, Queue]]] | None = None
        self._usage: dict[Queue, Res] = {}
        # The last ``plan`` passed over a node that may serve once a preemption in flight
        # there ends: its failure says nothing about later (``busy``).
        self.busy = False

    def changed(self) -> None:
        """A preemption started: the queues' usage is read again. The possible victims
        are kept: those it took are now on their way out, which ``_on_node`` checks."""
        self._usage = {}

    def usage(self, queue: Queue) -> Res:
        got = self._usage.get(queue)
        if got is None:
            got = self._usage[queue] = self.partition.preemptions.effective(queue)
        return got

    def starvation(self, leaf: Queue) -> float | None:
        """The lowest share of a guarantee in use along ``leaf``'s chain (below 1.0: some
        queue of it is below its guarantee, and only then may its asks preempt between
        queues); None when no queue of the chain has a guarantee."""
        lowest: float | None = None
        for queue in leaf.chain:
            guaranteed = queue.guaranteed
            if guaranteed:
                used = self.usage(queue)
                for name, g in guaranteed.items():
                    if g > 0:
                        share = used.get(name, 0) / g
                        if lowest is None or share < lowest:
                            lowest = share
        return lowest

    # ==================================================================== between queues
    def _candidates(self) -> dict[str, list[tuple[Allocation, Queue]]]:
        by_node = self._by_node
        if by_node is None:
            by_node = {}
            for app in self.partition.applications.values():
                queue = app.queue
                if queue is None or not app.allocations or queue.preemption_policy == "disabled":
                    continue
                for alloc in app.allocations.values():
                    if may_be_victim(alloc):
                        by_node.setdefault(alloc.node_id, []).append((alloc, queue))
            for victims in by_node.values():
                victims.sort(key=_first_order)
            self._by_node = by_node
        return by_node

    def plan(self, app: Application, ask: Ask, leaf: Queue) -> Plan | None:
        """The victims on one node that let ``ask`` run there within the laws; None if no
        node has them."""
        scope = _fence(leaf)
        best: Plan | None = None
        p = self.partition
        preemptions = p.preemptions
        self.busy = False
        for node_id, candidates in self._candidates().items():
            node = p.nodes.get(node_id)
            if node is None or not self.node_usable(node, ask):
                reserved = node.reserved if node is not None else None
                if reserved is not None and preemptions.of(reserved.ask) is not None:
                    self.busy = True
                continue
            victims = self._on_node(app, ask, leaf, scope, node, candidates, None)
            if victims is None:
                continue
            if best is None or len(victims) < len(best.victims):
                best = Plan(app, ask, node, victims)
                if len(victims) == 1:
                    break
        return best

    def node_usable(self, node: Node, ask: Ask) -> bool:
        """``node`` takes allocations, can hold ``ask`` at all, and is not held for another
        ask that a preemptor may not take it from (one waiting for its own victims, one
        bound to the node, or one of higher priority)."""
        if not node.schedulable or not fits(ask.resource, node.capacity):
            return False
        reserved = node.reserved
        if reserved is None or reserved.ask is ask:
            return True
        held = reserved.ask
        return (
            not held.required_node
            and self.partition.preemptions.of(held) is None
            and held.priority <= ask.priority
        )

    def _on_node(
        self,
        app: Application,
        ask: Ask,
        leaf: Queue,
        scope: Queue,
        node: Node,
        candidates: list[tuple[Allocation, Queue]],
        within: Queue | None,
    ) -> list[tuple[Allocation, Queue]] | None:
        need = ask.resource
        short = _shortfall(need, node.available)
        if not short:
            return None  # it fits now: the pass places it, no preemption needed
        net: dict[Queue, Res] = {q: dict(need) for q in leaf.chain}
        chosen: list[tuple[Allocation, Queue]] = []
        app_id = app.application_id
        priority = ask.priority
        for alloc, queue in candidates:
            if (
                queue is leaf
                or alloc.application_id == app_id
                or alloc.priority > priority
                or alloc.release_pending is not None
                or not _matches(short, alloc.resource)  # it would not lessen the shortfall
                or scope not in queue.chain
                or (within is not None and within not in queue.chain)
                or not self._may_lose(queue, alloc.resource, net)
            ):
                continue
            _shift(net, queue.chain, alloc.resource, -1)
            chosen.append((alloc, queue))
            if _freed(short, alloc.resource):
                break
        else:
            return None
        # Just enough: drop a victim the ask fits without, least preferred first.
        for i in range(len(chosen) - 2, -1, -1):
            alloc, queue = chosen[i]
            if all(v + alloc.resource.get(n, 0) <= 0 for n, v in short.items()):
                del chosen[i]
                _freed(short, alloc.resource, -1)
                _shift(net, queue.chain, alloc.resource, 1)
        blocking = self._gain_blocked(leaf, need, net)
        if blocking is None:
            return chosen
        if within is None and blocking is not leaf:
            # A queue above the preemptor would go over its guarantee: its victims must
            # come from below it (a sibling over its share), not from outside.
            return self._on_node(app, ask, leaf, scope, node, candidates, blocking)
        return None

    def _may_lose(self, queue: Queue, res: Res, net: dict[Queue, Res]) -> bool:
        """Law 1: each queue of ``queue``'s chain that would lose a guaranteed resource by
        one more victim ``res`` keeps its guarantee of it."""
        for q in queue.chain:
            guaranteed = q.guaranteed
            if not guaranteed:
                continue
            delta = net.get(q)
            used = None
            for name, v in res.items():
                g = guaranteed.get(name)
                if g is None or not v:
                    continue
                change = (delta.get(name, 0) if delta else 0) - v
                if change < 0:
                    if used is None:
                        used = self.usage(q)
                    if used.get(name, 0) + change < g:
                        return False
        return True

    def _gain_blocked(self, leaf: Queue, need: Res, net: dict[Queue, Res]) -> Queue | None:
        """Law 2: the first queue of the preemptor's chain that would go above its
        guarantee of a resource it gains; or the leaf itself when no queue with a guarantee
        for a resource of the ask gains any (the preemption would not help a guarantee)."""
        helps = False
        for q in leaf.chain:
            guaranteed = q.guaranteed
            if not guaranteed:
                continue
            delta = net[q]
            used = self.usage(q)
            for name in need:
                g = guaranteed.get(name)
                change = delta.get(name, 0)
                if g is None or change <= 0:
                    continue
                if used.get(name, 0) + change > g:
                    return q
                helps = True
        return None if helps else leaf

    # ===================================================================== required node
    def plan_on_node(self, app: Application, ask: Ask, node: Node) -> Plan | None:
        """Victims on ``node`` for ``ask``, which must run there (the DaemonSet case)."""
        need = ask.resource
        if not node.schedulable or not fits(need, node.capacity):
            return None
        candidates: list[tuple[Allocation, Queue]] = []
        p = self.partition
        for alloc in node.allocations.values():
            owner = p.applications.get(alloc.application_id)
            queue = owner.queue if owner is not None else None
            if (
                queue is None
                or not may_be_victim(alloc)
                or alloc.priority > ask.priority
                or not _matches(need, alloc.resource)
            ):
                continue
            candidates.append((alloc, queue))
        candidates.sort(key=_required_first)
        short = _shortfall(need, node.available)
        if not short:
            return None
        victims: list[tuple[Allocation, Queue]] = []
        for alloc, queue in candidates:
            victims.append((alloc, queue))
            if _freed(short, alloc.resource):
                return Plan(app, ask, node, victims, required_node=True)
        return None


def _first_order(item: tuple[Allocation, Queue]) -> tuple[bool, int, bool, bool, float]:
    return victim_order(item[0])


def _required_first(item: tuple[Allocation, Queue]) -> tuple[int, int, float, int]:
    return _required_order(item[0])


def _fence(leaf: Queue) -> Queue:
    """The nearest queue above ``leaf`` (or itself) whose ``preemption.policy`` is
    ``fence``: victims are found within it; root when there is none."""
    for queue in leaf.chain:
        if queue.preemption_policy == "fence":
            return queue
    return leaf.root
