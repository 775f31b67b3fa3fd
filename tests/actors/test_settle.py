"""settle(): quiescence by counting, without polling or sleeping."""

from __future__ import annotations

import asyncio

import pytest

from actors import Actor, ActorRef, ActorSystem, ManualClock


class Relay(Actor):
    """Passes each number on to the next actor, decremented, until it reaches zero."""

    def __init__(self, journal: list[str]) -> None:
        self.journal = journal
        self.next: ActorRef | None = None

    def receive(self, message: object) -> object:
        assert isinstance(message, int)
        self.journal.append(f"{self.actor_ref.name}:{message}")
        if message and self.next is not None:
            self.next.tell(message - 1)
        return None


@pytest.mark.asyncio
async def test_settle_waits_for_nested_tells(system: ActorSystem) -> None:
    journal: list[str] = []
    relays = [Relay(journal) for _ in range(3)]
    refs = [system.spawn(r, name=f"r{i}") for i, r in enumerate(relays)]
    for i, relay in enumerate(relays):
        relay.next = refs[(i + 1) % 3]
    refs[0].tell(8)
    await system.settle()
    assert journal[-1] == "r2:0"
    assert len(journal) == 9


@pytest.mark.asyncio
async def test_settle_waits_for_tells_after_an_outside_await(system: ActorSystem) -> None:
    journal: list[str] = []
    sink = system.spawn(Relay(journal), name="sink")

    async def outside_work(n: int) -> None:
        for _ in range(5):
            await asyncio.sleep(0)
        sink.tell(n)

    class Caller(Actor):
        async def receive(self, message: object) -> object:
            assert isinstance(message, int)
            await outside_work(message)
            return None

    caller = system.spawn(Caller(), name="caller")
    caller.tell(0)
    await system.settle()
    assert journal == ["sink:0"]


@pytest.mark.asyncio
async def test_settle_delivers_due_timers(system: ActorSystem, clock: ManualClock) -> None:
    journal: list[str] = []

    class Chain(Actor):
        def receive(self, message: object) -> object:
            assert isinstance(message, int)
            journal.append(f"chain:{message}")
            if message:
                self.actor_system.timers.after(0, message - 1, to=self.actor_ref)
            return None

    ref = system.spawn(Chain(), name="chain")
    ref.tell(3)
    await system.settle()
    assert journal == ["chain:3", "chain:2", "chain:1", "chain:0"]
    assert clock.now() == 0


@pytest.mark.asyncio
async def test_settle_waits_for_on_start_and_on_drained(system: ActorSystem) -> None:
    events: list[str] = []

    class Hooks(Actor):
        async def on_start(self) -> None:
            await asyncio.sleep(0)
            events.append("start")

        def receive(self, message: object) -> object:
            return None

        async def on_drained(self) -> None:
            await asyncio.sleep(0)
            events.append("drained")

    system.spawn(Hooks(), name="hooks")
    await system.settle()
    assert events == ["start", "drained"]


@pytest.mark.asyncio
async def test_concurrent_settles_and_a_cancelled_one(system: ActorSystem) -> None:
    gate = asyncio.Event()

    class Slow(Actor):
        async def receive(self, message: object) -> object:
            await gate.wait()
            return None

    system.spawn(Slow(), name="slow").tell("x")
    loop = asyncio.get_running_loop()
    first = loop.create_task(system.settle())
    second = loop.create_task(system.settle())
    await asyncio.sleep(0)
    first.cancel()
    gate.set()
    await second
    assert first.cancelled()
    await system.settle()


@pytest.mark.asyncio
async def test_owner_task_pattern_from_a_fixture(system: ActorSystem) -> None:
    """The `system` fixture starts run() in an owner task and stops it in teardown."""
    owner_tasks = [t for t in asyncio.all_tasks() if t.get_coro().__qualname__ == "ActorSystem.run"]  # type: ignore[union-attr]
    assert len(owner_tasks) == 1
    assert owner_tasks[0] is not asyncio.current_task()
    assert system.running


class SettlesInside(Actor):
    async def receive(self, message: object) -> object:
        await self.actor_system.settle()
        return None


@pytest.mark.asyncio
async def test_settle_inside_a_handler_is_refused_not_a_deadlock(system: ActorSystem) -> None:
    ref = system.spawn(SettlesInside(), name="selfish")
    with pytest.raises(RuntimeError, match="wait for itself"):
        await ref.ask("go")
    await system.settle()
