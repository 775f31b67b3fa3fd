"""Clocks: where the runtime's timers read the time."""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock", "wall_ns", "wall_of"]


class Clock(Protocol):
    """Anything with a monotonic `now()` in seconds."""

    def now(self) -> float:
        """The current time in seconds."""
        ...


def wall_of(clock: Clock) -> Callable[[float], int]:
    """``wall_ns`` of ``clock`` as one function, looked up once (for a hot path)."""
    convert: Callable[[float], int] | None = getattr(clock, "wall_ns", None)
    return convert if convert is not None else _unix_ns


def _unix_ns(t: float) -> int:
    return int(t * 1e9)


def wall_ns(clock: Clock, t: float) -> int:
    """Wall-clock Unix nanoseconds of ``t``, a reading of ``clock`` (for what people and
    other systems read: event and state timestamps; timeouts keep to ``now()``). A clock
    with a ``wall_ns`` method of its own says; any other counts from the Unix epoch."""
    return wall_of(clock)(t)


class SystemClock:
    """The real monotonic clock (`time.monotonic`); its readings map to wall-clock time
    by the offset between the two clocks when it was made."""

    __slots__ = ("_offset_ns",)

    def __init__(self) -> None:
        self._offset_ns = time.time_ns() - time.monotonic_ns()

    def now(self) -> float:
        """The current monotonic time in seconds."""
        return time.monotonic()

    def wall_ns(self, t: float) -> int:
        """Unix nanoseconds of the monotonic reading ``t``."""
        return self._offset_ns + int(t * 1e9)

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

    Its wall-clock time (`wall_ns`, what timestamps show) is ``epoch`` plus its reading,
    so a test knows every timestamp exactly.

    Args:
        start: The initial time in seconds.
        epoch: The Unix time, in seconds, of its reading 0 (0 by default: a timestamp is
            then the reading itself, in nanoseconds).
    """

    __slots__ = ("__weakref__", "_epoch_ns", "_now", "_systems")

    def __init__(self, start: float = 0.0, *, epoch: float = 0.0) -> None:
        self._now = float(start)
        self._epoch_ns = int(epoch * 1e9)
        self._systems: list[weakref.ref[_Attached]] = []

    def wall_ns(self, t: float) -> int:
        """Unix nanoseconds of the reading ``t``: ``epoch`` plus ``t``."""
        return self._epoch_ns + int(t * 1e9)

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
