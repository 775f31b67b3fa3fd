"""Timers on the injected clock: a due timer is an ordinary `tell`."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from typing import TYPE_CHECKING, cast

from loguru import logger

from ._clock import Clock, ManualClock
from ._errors import ActorDeadError

if TYPE_CHECKING:
    from ._actor import ActorRef

__all__ = ["RuntimeTimer", "TimerHandle", "Timers"]

_COMPACT_AT = 256  # cancelled timers kept in the heap before it is rebuilt


class TimerHandle:
    """A scheduled message; `cancel()` it before it is due to drop it."""

    __slots__ = ("_cancelled", "_fired", "_timers", "due", "message", "to")

    to: ActorRef | None  # None for a timer of the runtime's own (RuntimeTimer)

    def __init__(self, timers: Timers, due: float, message: object, to: ActorRef) -> None:
        self._timers = timers
        self.due = due
        self.message = message
        self.to = to
        self._cancelled = False
        self._fired = False

    @property
    def cancelled(self) -> bool:
        """True once `cancel()` was called before the timer fired."""
        return self._cancelled

    @property
    def fired(self) -> bool:
        """True once the message was handed to the target actor (or dropped as dead)."""
        return self._fired

    def cancel(self) -> None:
        """Drop the timer; a no-op once it fired or was cancelled."""
        if self._cancelled or self._fired:
            return
        self._cancelled = True
        if type(self) is TimerHandle:
            # The entry waits in the heap until it is due or the heap is compacted (a
            # three-day timer: three days); what it would have told, and its target, go now.
            self._timers._untrack(self)
            self.message = self.to = None
        self._timers._on_cancel()

    def __repr__(self) -> str:
        if self._cancelled:
            return f"<TimerHandle due={self.due!r} cancelled>"
        state = "fired" if self._fired else "pending"
        to = self.to.name if self.to is not None else "runtime"
        return f"<TimerHandle due={self.due!r} {type(self.message).__name__} to={to} {state}>"


class RuntimeTimer(TimerHandle):
    """A timer that runs the runtime's own code when due (it must not raise); armed with
    `Timers.arm`, which sets its fields."""

    __slots__ = ()
    to = None  # no actor: fire() runs instead of a tell
    message = None

    def fire(self) -> None:
        raise NotImplementedError


class Timers:
    """The timer service of one `ActorSystem` (`system.timers`).

    Timers read only the injected clock. With a `SystemClock` (or any other real clock) the
    system's timer task sleeps until the next due time; with a `ManualClock` timers fall due
    when the test advances it. A timer due at once (delay <= 0) is delivered without the
    clock moving.
    """

    __slots__ = ("_cancelled", "_clock", "_heap", "_seq", "_sleep_until", "_targets", "_wake")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._heap: list[tuple[float, int, TimerHandle]] = []
        # The pending timers of each target, so that an actor that stops takes its timers
        # with it (``forget``): a timer is not what keeps a stopped actor in memory.
        self._targets: dict[ActorRef, dict[TimerHandle, None]] = {}
        self._seq = itertools.count()
        self._cancelled = 0
        self._wake: asyncio.Future[None] | None = None
        self._sleep_until = math.inf

    def after(self, delay: float, message: object, *, to: ActorRef) -> TimerHandle:
        """Tell `message` to `to` once `delay` seconds of the clock have passed.

        Args:
            delay: Seconds on the system's clock; <= 0 means due at once.
            message: What to tell.
            to: The receiving actor.

        Returns:
            A handle to cancel the timer.
        """
        return self.at(self._clock.now() + delay, message, to=to)

    def at(self, when: float, message: object, *, to: ActorRef) -> TimerHandle:
        """Tell `message` to `to` when the clock reaches `when`.

        Args:
            when: An absolute time on the system's clock.
            message: What to tell.
            to: The receiving actor.

        Returns:
            A handle to cancel the timer.
        """
        handle = TimerHandle(self, float(when), message, to)
        of = self._targets.get(to)
        if of is None:
            of = self._targets[to] = {}
        of[handle] = None
        return self._push(handle)

    def _untrack(self, handle: TimerHandle) -> None:
        to = handle.to
        if to is not None:
            of = self._targets.get(to)
            if of is not None:
                of.pop(handle, None)
                if not of:
                    del self._targets[to]

    def forget(self, to: ActorRef) -> int:
        """Cancel every pending timer of ``to`` (an actor that stopped: they would be
        dropped when due, and would keep it in memory until then). Returns how many."""
        of = self._targets.pop(to, None)
        if not of:
            return 0
        for handle in of:
            handle.cancel()
        return len(of)

    def arm(self, handle: RuntimeTimer, delay: float) -> None:
        """Arm a timer of the runtime's own (a handler's `sleep` or `within`) to fall due
        ``delay`` seconds from now: then its ``fire()`` runs instead of a tell."""
        handle._timers = self
        handle.due = self._clock.now() + delay
        handle._cancelled = handle._fired = False
        self._push(handle)

    def _push(self, handle: TimerHandle) -> TimerHandle:
        due = handle.due
        heapq.heappush(self._heap, (due, next(self._seq), handle))
        if self._wake is not None and (due < self._sleep_until or due <= self._clock.now()):
            self._wake_task()
        return handle

    def __len__(self) -> int:
        return len(self._heap) - self._cancelled

    def __repr__(self) -> str:
        return f"<Timers pending={len(self)} next={self.next_due()!r}>"

    def next_due(self) -> float | None:
        """The due time of the earliest pending timer, or None."""
        heap = self._heap
        while heap and heap[0][2]._cancelled:
            heapq.heappop(heap)
            self._cancelled -= 1
        return heap[0][0] if heap else None

    def _due_now(self) -> bool:
        due = self.next_due()
        return due is not None and due <= self._clock.now()

    def _fire_due(self) -> None:
        heap = self._heap
        now = self._clock.now()
        while heap and heap[0][0] <= now:
            handle = heapq.heappop(heap)[2]
            if handle._cancelled:
                self._cancelled -= 1
                continue
            handle._fired = True
            to = handle.to
            if to is None:
                cast(RuntimeTimer, handle).fire()
                continue
            self._untrack(handle)
            try:
                to.tell(handle.message)
            except ActorDeadError:
                logger.bind(actor=to.name).debug(
                    "timer {} dropped: actor stopped", type(handle.message).__name__
                )

    def _on_cancel(self) -> None:
        self._cancelled += 1
        if self._cancelled > _COMPACT_AT and self._cancelled * 2 > len(self._heap):
            self._heap = [e for e in self._heap if not e[2]._cancelled]
            heapq.heapify(self._heap)
            self._cancelled = 0

    def _cancel_all(self) -> None:
        for _, _, handle in self._heap:
            if not handle._fired:
                handle._cancelled = True
        self._heap.clear()
        self._targets.clear()
        self._cancelled = 0

    def _wake_task(self) -> None:
        wake = self._wake
        self._wake = None
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def _run(self) -> None:
        """The timer task: deliver due timers, then sleep until the next one (or a wake)."""
        loop = asyncio.get_running_loop()
        manual = isinstance(self._clock, ManualClock)
        while True:
            self._fire_due()
            due = self.next_due()
            wake: asyncio.Future[None] = loop.create_future()
            self._wake = wake
            sleeper: asyncio.TimerHandle | None = None
            if manual or due is None:
                # A manual clock only moves through advance(), which fires timers itself;
                # this task delivers timers that are due at once.
                self._sleep_until = -math.inf if manual else math.inf
            else:
                self._sleep_until = due
                sleeper = loop.call_later(max(due - self._clock.now(), 0.0), _set, wake)
            try:
                await wake
            finally:
                self._wake = None
                if sleeper is not None:
                    sleeper.cancel()


def _set(wake: asyncio.Future[None]) -> None:
    if not wake.done():
        wake.set_result(None)
