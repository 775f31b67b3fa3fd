"""Clocks: where the runtime's timers read the time."""

from __future__ import annotations

import time
import weakref
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]


class Clock(Protocol):
    """Anything with a monotonic `now()` in seconds."""

    def now(self) -> float:
        """The current time in seconds."""
        ...


class SystemClock:
    """The real monotonic clock (`time.monotonic`)."""

    __slots__ = ()

    def now(self) -> float:
        """The current monotonic time in seconds."""
        return time.monotonic()

    def __repr__(self) -> str:
        return "SystemClock()"


class _Attached(Protocol):
    """What a ManualClock needs from an actor system attached to it."""

    @property
    def _clock_running(self) -> bool: ...

    def _next_timer_due(self) -> float | None: ...

    def _fire_due_timers(self) -> None: ...

    async def settle(self) -> None: ...


class ManualClock:
    """A clock that moves only when a test calls `advance`.

    An `ActorSystem` constructed with this clock attaches itself to it (weakly) and detaches
    when it stops, so `advance` can deliver the timers of every attached system in order.

    Args:
        start: The initial time in seconds.
    """

    __slots__ = ("__weakref__", "_now", "_systems")

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)
        self._systems: list[weakref.ref[_Attached]] = []

    def now(self) -> float:
        """The current (manual) time in seconds."""
        return self._now

    async def advance(self, seconds: float) -> None:
        """Move time forward by `seconds`, firing every timer that falls due, in order.

        For each due time `t` on the way: time is set to `t`, the timers due at `t` are
        delivered, and every attached running system settles before time moves on. At the
        end time is `now + seconds` and the systems settle once more.

        Args:
            seconds: How far to move; zero delivers what is already due.

        Raises:
            ValueError: `seconds` is negative.
        """
        if seconds < 0:
            raise ValueError(f"cannot move a clock backwards ({seconds})")
        target = self._now + seconds
        while True:
            systems = self._running_systems()
            dues = [d for s in systems if (d := s._next_timer_due()) is not None]
            if not dues or min(dues) > target:
                break
            self._now = max(self._now, min(dues))
            for system in systems:
                system._fire_due_timers()
            for system in systems:
                await system.settle()
        self._now = target
        for system in self._running_systems():
            await system.settle()

    def _attach(self, system: _Attached) -> None:
        self._systems.append(weakref.ref(system))

    def _detach(self, system: _Attached) -> None:
        self._systems = [r for r in self._systems if (s := r()) is not None and s is not system]

    def _running_systems(self) -> list[_Attached]:
        alive = [s for r in self._systems if (s := r()) is not None]
        if len(alive) != len(self._systems):
            self._systems = [weakref.ref(s) for s in alive]
        return [s for s in alive if s._clock_running]

    def __repr__(self) -> str:
        return f"ManualClock(now={self._now!r}, systems={len(self._systems)})"
