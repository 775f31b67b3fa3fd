"""Timers read the injected clock; a due timer is an ordinary tell."""

from __future__ import annotations

import asyncio
import gc
import weakref

import anyio
import pytest

from actors import Actor, ActorDeadError, ActorSystem, ManualClock, SystemClock, TimerHandle

from .conftest import Logs


class Stamper(Actor):
    """Records (clock time, message) for every message."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, object]] = []

    def receive(self, message: object) -> object:
        self.seen.append((self.actor_system.clock.now(), message))
        return None


@pytest.mark.asyncio
async def test_advance_fires_in_due_order_at_their_due_times(
    system: ActorSystem, clock: ManualClock
) -> None:
    stamper = Stamper()
    ref = system.spawn(stamper, name="stamper")
    system.timers.after(10, "c", to=ref)
    system.timers.after(5, "a", to=ref)
    system.timers.at(7, "b", to=ref)
    system.timers.after(5, "a2", to=ref)  # same due time: in the order they were set
    await clock.advance(6)
    assert stamper.seen == [(5, "a"), (5, "a2")]
    assert clock.now() == 6
    await clock.advance(100)
    assert stamper.seen == [(5, "a"), (5, "a2"), (7, "b"), (10, "c")]
    assert clock.now() == 106


@pytest.mark.asyncio
async def test_advance_settles_between_due_times(system: ActorSystem, clock: ManualClock) -> None:
    """A handler of an earlier timer can set a timer that falls due in the same advance."""
    seen: list[tuple[float, object]] = []

    class Rearming(Actor):
        def receive(self, message: object) -> object:
            seen.append((clock.now(), message))
            if isinstance(message, int) and message < 3:
                self.actor_system.timers.after(2, message + 1, to=self.actor_ref)
            return None

    ref = system.spawn(Rearming(), name="rearm")
    system.timers.after(1, 0, to=ref)
    system.timers.after(4, "fixed", to=ref)
    await clock.advance(10)
    assert seen == [(1, 0), (3, 1), (4, "fixed"), (5, 2), (7, 3)]


@pytest.mark.asyncio
async def test_cancelled_timers_do_not_fire(system: ActorSystem, clock: ManualClock) -> None:
    stamper = Stamper()
    ref = system.spawn(stamper, name="stamper")
    keep = system.timers.after(1, "keep", to=ref)
    drop = system.timers.after(1, "drop", to=ref)
    drop.cancel()
    drop.cancel()
    assert drop.cancelled and not keep.cancelled
    assert isinstance(drop, TimerHandle) and drop.due == 1
    assert len(system.timers) == 1
    await clock.advance(2)
    assert stamper.seen == [(1, "keep")]
    assert keep.fired
    keep.cancel()
    assert not keep.cancelled  # too late to cancel a fired timer
    assert "fired" in repr(keep)


@pytest.mark.asyncio
async def test_many_cancelled_timers_are_compacted(system: ActorSystem, clock: ManualClock) -> None:
    ref = system.spawn(Stamper(), name="stamper")
    handles = [system.timers.after(100 + i, i, to=ref) for i in range(1000)]
    for handle in handles[:900]:
        handle.cancel()
    assert len(system.timers) == 100
    assert len(system.timers._heap) < 1000
    assert system.timers.next_due() == 1000


class Payload:
    """A message a test can watch being collected."""


@pytest.mark.asyncio
async def test_a_cancelled_timer_lets_go_of_its_message_and_target_at_once(
    system: ActorSystem, clock: ManualClock
) -> None:
    # The soak found three-day timers of expired applications, cancelled but waiting in the
    # heap (fewer than half the entries: not compacted), keeping each actor and its state.
    ref = system.spawn(Stamper(), name="stamper")
    message = Payload()
    watch = weakref.ref(message)
    handle = system.timers.after(3 * 24 * 3600, message, to=ref)
    keep = [system.timers.after(10, i, to=ref) for i in range(10)]
    del message
    handle.cancel()
    gc.collect()
    assert watch() is None  # the heap still holds the entry, not the message
    assert handle.to is None and len(system.timers._heap) == 11
    assert "cancelled" in repr(handle)
    await clock.advance(3 * 24 * 3600)
    assert all(k.fired for k in keep) and not handle.fired


@pytest.mark.asyncio
async def test_zero_delay_is_due_at_once_without_moving_the_clock(
    system: ActorSystem, clock: ManualClock
) -> None:
    stamper = Stamper()
    ref = system.spawn(stamper, name="stamper")
    await clock.advance(3)
    system.timers.after(0, "now", to=ref)
    system.timers.after(-1, "overdue", to=ref)
    await system.settle()
    assert stamper.seen == [(3, "overdue"), (3, "now")]  # in due order
    assert clock.now() == 3


@pytest.mark.asyncio
async def test_zero_delay_timer_is_delivered_by_the_timer_task(
    system: ActorSystem, clock: ManualClock
) -> None:
    stamper = Stamper()
    ref = system.spawn(stamper, name="stamper")
    await system.settle()
    system.timers.after(0, "now", to=ref)
    with anyio.fail_after(5):
        while not stamper.seen:  # no settle(): the timer task alone delivers it
            await asyncio.sleep(0)
    assert stamper.seen == [(0, "now")]


@pytest.mark.asyncio
async def test_timer_to_a_stopped_actor_is_dropped(
    system: ActorSystem, clock: ManualClock, logs: Logs
) -> None:
    ref = system.spawn(Stamper(), name="stamper")
    system.timers.after(1, "late", to=ref)
    ref.stop()
    await clock.advance(1)
    assert any("dropped" in r["message"] for r in logs.at("DEBUG"))


@pytest.mark.asyncio
async def test_an_actor_that_stops_takes_its_timers_with_it(
    system: ActorSystem, clock: ManualClock
) -> None:
    # The soak found stopped application actors kept, each with all its state, for as long
    # as their timers had to run (a placeholder timeout: fifteen minutes).
    stamper = Stamper()
    watch = weakref.ref(stamper)
    ref = system.spawn(stamper, name="stamper")
    other = system.spawn(Stamper(), name="other")
    handles = [system.timers.after(900, i, to=ref) for i in range(3)]
    kept = system.timers.after(900, "kept", to=other)
    del stamper
    gc.disable()  # freed by reference counting: no cycle waits for the cyclic collector
    try:
        ref.stop()
        await system.settle()
        assert all(h.cancelled and h.to is None for h in handles)
        assert not kept.cancelled and len(system.timers) == 1
        assert watch() is None  # the ref we hold keeps neither the actor nor its cell
        assert not [
            o for o in gc.get_objects() if type(o).__name__ == "Cell" and o.name == "stamper"
        ]
    finally:
        gc.enable()
    assert not ref.alive and "stopped" in repr(ref) and ref.stats().processed == 0
    with pytest.raises(ActorDeadError):
        ref.tell("late")
    ref.stop()  # a no-op
    await clock.advance(900)
    assert kept.fired


@pytest.mark.asyncio
async def test_shutdown_cancels_pending_timers(clock: ManualClock) -> None:
    async with ActorSystem(clock) as system:
        handle = system.timers.after(5, "never", to=system.spawn(Stamper(), name="s"))
    assert handle.cancelled
    await clock.advance(10)  # a stopped system is detached: nothing to deliver


@pytest.mark.asyncio
async def test_manual_clock_drives_every_attached_system(clock: ManualClock) -> None:
    first, second = Stamper(), Stamper()
    async with ActorSystem(clock) as one, ActorSystem(clock) as two:
        one.timers.after(2, "one", to=one.spawn(first, name="s"))
        two.timers.after(1, "two", to=two.spawn(second, name="s"))
        await clock.advance(5)
    assert first.seen == [(2, "one")]
    assert second.seen == [(1, "two")]
    with pytest.raises(ValueError):
        await clock.advance(-1)
    assert "ManualClock" in repr(clock)


@pytest.mark.asyncio
async def test_system_clock_timer_fires() -> None:
    fired: asyncio.Future[float] = asyncio.get_running_loop().create_future()

    class Waiter(Actor):
        def receive(self, message: object) -> object:
            fired.set_result(self.actor_system.clock.now())
            return None

    clock = SystemClock()
    async with ActorSystem(clock) as system:
        ref = system.spawn(Waiter(), name="waiter")
        far = system.timers.after(3600, "far", to=ref)  # the task sleeps for this one...
        await asyncio.sleep(0)
        handle = system.timers.after(0.005, "soon", to=ref)  # ...and is woken for this one
        with anyio.fail_after(5):
            when = await fired
        assert when >= handle.due
        assert not far.fired
        assert "SystemClock" in repr(clock)
