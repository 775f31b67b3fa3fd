"""The preemptions of one partition in flight, and what they count against the queues.

A victim released to the RM stays on its node, application and queue until the RM
confirms it (its release of that uuid). For the next preemption's decisions, though, it
is already gone (``leaving``, per queue of its chain), and the ask it makes room for is
already there (``coming``, per queue of the preemptor's chain): so two preemptions never
take the same room, and a queue is never taken above its guarantee by asks waiting for
their victims, nor below it by victims on their way out. Plain bookkeeping: the
partition's actors start and end the handshakes (``scheduler.core._preempt``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.objects._resources import Res, add_into, sub_into

if TYPE_CHECKING:
    from scheduler.objects._asks import Allocation, Ask
    from scheduler.objects._handshake import Preemption
    from scheduler.objects._queue import Queue

__all__ = ["Preemptions"]


class Preemptions:
    """Open preemptions by victim and by ask, the queues' in-flight totals, and counts."""

    __slots__ = (
        "by_ask",
        "by_victim",
        "coming",
        "counts",
        "leaving",
    )

    def __init__(self) -> None:
        self.leaving: dict[Queue, Res] = {}
        self.coming: dict[Queue, Res] = {}
        self.by_victim: dict[str, Preemption] = {}
        self.by_ask: dict[int, Preemption] = {}
        # Totals since start: preemptions started (of them, for an ask bound to a node),
        # victims released and confirmed, and preemptions that ended each way.
        self.counts: dict[str, int] = dict.fromkeys(
            (
                "started",
                "required_node",
                "victims",
                "victims_confirmed",
                "confirmed",
                "timeout",
                "cancelled",
            ),
            0,
        )

    def __bool__(self) -> bool:
        return bool(self.by_ask)

    def of(self, ask: Ask) -> Preemption | None:
        """The open preemption ``ask`` triggered, if any."""
        rec = self.by_ask.get(id(ask))
        return rec if rec is not None and rec.ask is ask else None

    def effective(self, queue: Queue) -> Res:
        """``queue``'s usage as the next preemption reads it: allocated, less its victims
        on their way out, plus the asks waiting for their victims."""
        out = dict(queue.allocated)
        leaving = self.leaving.get(queue)
        if leaving:
            sub_into(out, leaving)
        coming = self.coming.get(queue)
        if coming:
            add_into(out, coming)
        return out

    def open(self, rec: Preemption) -> None:
        """``rec``'s victims are released to the RM now."""
        self.by_ask[id(rec.ask)] = rec
        counts = self.counts
        counts["started"] += 1
        if rec.required_node:
            counts["required_node"] += 1
        counts["victims"] += len(rec.victims)
        for uuid, alloc in rec.victims.items():
            self.by_victim[uuid] = rec
            _add(self.leaving, rec.chains[uuid], alloc.resource)
        _add(self.coming, rec.chain, rec.ask.resource)

    def victim_gone(self, alloc: Allocation) -> Preemption | None:
        """Victim ``alloc`` left its node and queue (the RM confirmed it, or it went some
        other way): it no longer counts as leaving. Returns its preemption, whose ``done``
        settles ``"confirmed"`` when it was the last one awaited."""
        rec = self.by_victim.pop(alloc.uuid, None)
        if rec is None:
            return None
        if rec.victims.pop(alloc.uuid, None) is not None:
            _sub(self.leaving, rec.chains[alloc.uuid], alloc.resource)
            self.counts["victims_confirmed"] += 1
        if not rec.victims:
            rec.done.resolve("confirmed")
        return rec

    def cancel(self, rec: Preemption) -> None:
        """``rec``'s node is no longer held for its ask: its wait ends, and its claim on
        the queues goes now, not when the preemptor's actor next runs (a round in between
        would count the ask as coming)."""
        if rec.done.resolve("cancelled"):
            self.close(rec, "cancelled")

    def close(self, rec: Preemption, outcome: str) -> None:
        """The preemptor stops waiting (``outcome``): its claim on the queues goes. Victims
        not confirmed yet stay leaving until they go (the RM was told to end them)."""
        if self.by_ask.get(id(rec.ask)) is not rec:
            return
        del self.by_ask[id(rec.ask)]
        _sub(self.coming, rec.chain, rec.ask.resource)
        self.counts[outcome] += 1


def _add(totals: dict[Queue, Res], chain: tuple[Queue, ...], res: Res) -> None:
    for queue in chain:
        add_into(totals.setdefault(queue, {}), res)


def _sub(totals: dict[Queue, Res], chain: tuple[Queue, ...], res: Res) -> None:
    for queue in chain:
        left = totals.get(queue)
        if left is None:
            continue
        sub_into(left, res)
        if not any(left.values()):
            del totals[queue]
