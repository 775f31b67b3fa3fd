"""Spawning, stopping one actor, shutting the system down, crashes, and task ownership."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from actors import Actor, ActorDeadError, ActorSystem, ManualClock

from .conftest import Logs


class Lifecycle(Actor):
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def on_start(self) -> None:
        self.events.append("start")

    def receive(self, message: object) -> object:
        self.events.append(f"got {message}")
        return message

    def on_stop(self) -> None:
        self.events.append("stop")


class Gate(Actor):
    """Holds each message until the test opens the gate."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.entered = asyncio.Event()
        self.stopped = False

    async def receive(self, message: object) -> object:
        self.entered.set()
        await self.opened.wait()
        return message

    def on_stop(self) -> None:
        self.stopped = True


@pytest.mark.asyncio
async def test_hooks_run_around_messages(system: ActorSystem) -> None:
    events: list[str] = []
    ref = system.spawn(Lifecycle(events), name="life")
    ref.tell(1)
    await system.settle()
    ref.stop()
    await system.settle()
    assert events == ["start", "got 1", "stop"]
    assert not ref.alive
    assert "life" not in system.stats()


@pytest.mark.asyncio
async def test_tell_and_ask_after_stop_raise(system: ActorSystem) -> None:
    ref = system.spawn(Lifecycle([]), name="life")
    ref.stop()
    with pytest.raises(ActorDeadError):
        ref.tell("late")
    with pytest.raises(ActorDeadError):
        await ref.ask("late")
    await system.settle()
    assert "stopped" in repr(ref)


@pytest.mark.asyncio
async def test_a_stopped_actors_name_can_be_reused(system: ActorSystem) -> None:
    first = system.spawn(Lifecycle([]), name="life")
    with pytest.raises(ValueError, match="life"):
        system.spawn(Lifecycle([]), name="life")
    first.stop()
    await system.settle()
    second = system.spawn(Lifecycle([]), name="life")
    assert await second.ask("x") == "x"
    assert system.get("life") is second


@pytest.mark.asyncio
async def test_stop_finishes_the_message_in_hand_and_fails_queued_asks(
    system: ActorSystem,
) -> None:
    gate = Gate()
    ref = system.spawn(gate, name="gate")
    in_hand = asyncio.get_running_loop().create_task(ref.ask("in hand"))
    await gate.entered.wait()
    queued = asyncio.get_running_loop().create_task(ref.ask("queued"))
    await asyncio.sleep(0)
    ref.stop()
    gate.opened.set()
    assert await in_hand == "in hand"
    with pytest.raises(ActorDeadError):
        await queued
    await system.settle()
    assert gate.stopped


@pytest.mark.asyncio
async def test_an_actor_may_stop_itself_mid_batch(system: ActorSystem) -> None:
    seen: list[object] = []

    class Quitter(Actor):
        def receive(self, message: object) -> object:
            seen.append(message)
            if message == "quit":
                self.actor_ref.stop()
            return message

    ref = system.spawn(Quitter(), name="quitter")
    await system.settle()
    ref.tell(1)
    ref.tell("quit")
    ref.tell(2)
    pending = asyncio.get_running_loop().create_task(ref.ask(3))
    with pytest.raises(ActorDeadError):
        await pending
    await system.settle()
    assert seen == [1, "quit"]
    assert ref.stats().processed == 2


@pytest.mark.asyncio
async def test_system_shutdown_fails_pending_asks_and_calls_on_stop() -> None:
    events: list[str] = []
    system = ActorSystem(ManualClock())
    owner = asyncio.get_running_loop().create_task(system.run())
    await system.ready()
    gate = Gate()
    gate_ref = system.spawn(gate, name="gate")
    life = system.spawn(Lifecycle(events), name="life")
    in_hand = asyncio.get_running_loop().create_task(gate_ref.ask("in hand"))
    await gate.entered.wait()
    queued = asyncio.get_running_loop().create_task(gate_ref.ask("queued"))
    await asyncio.sleep(0)
    system.stop()
    with pytest.raises(ActorDeadError):
        life.tell("late")
    with pytest.raises(ActorDeadError):
        await queued
    gate.opened.set()
    with anyio.fail_after(5):
        await owner
    assert await in_hand == "in hand"
    assert gate.stopped
    assert events == ["start", "stop"]
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
    assert "stopped" in repr(system)


@pytest.mark.asyncio
async def test_stop_from_a_handler_finishes_only_the_message_in_hand() -> None:
    seen: list[object] = []

    class Stopper(Actor):
        def receive(self, message: object) -> object:
            seen.append(message)
            if message == "stop":
                self.actor_system.stop()
            return None

    system = ActorSystem()
    owner = asyncio.get_running_loop().create_task(system.run())
    ref = system.spawn(Stopper(), name="stopper")
    for message in (1, "stop", 2, 3):
        ref.tell(message)
    await system.ready()
    with anyio.fail_after(5):
        await owner
    assert seen == [1, "stop"]


@pytest.mark.asyncio
async def test_spawn_before_run_and_async_with() -> None:
    events: list[str] = []
    system = ActorSystem()
    ref = system.spawn(Lifecycle(events), name="early")
    ref.tell("before run")
    async with system:
        assert await ref.ask("after") == "after"
        late = system.spawn(Lifecycle(events), name="late")
        await late.ask("x")
    assert events == ["start", "got before run", "got after", "start", "got x", "stop", "stop"]
    with pytest.raises(RuntimeError):
        system.spawn(Lifecycle([]), name="too late")


@pytest.mark.asyncio
async def test_async_hooks_are_awaited(system: ActorSystem) -> None:
    events: list[str] = []

    class AsyncHooks(Actor):
        async def on_start(self) -> None:
            await asyncio.sleep(0)
            events.append("start")

        def receive(self, message: object) -> object:
            events.append("msg")
            return None

        async def on_stop(self) -> None:
            await asyncio.sleep(0)
            events.append("stop")

    ref = system.spawn(AsyncHooks(), name="hooks")
    ref.tell("m")
    await system.settle()
    ref.stop()
    await system.settle()
    assert events == ["start", "msg", "stop"]


@pytest.mark.asyncio
@pytest.mark.logs_errors("failed in on_start")
async def test_failing_on_start_stops_the_actor(system: ActorSystem, logs: Logs) -> None:
    class BadStart(Actor):
        def on_start(self) -> None:
            raise RuntimeError("no config")

        def receive(self, message: object) -> object:
            return message

    ref = system.spawn(BadStart(), name="bad")
    await system.settle()
    assert not ref.alive
    assert any("on_start" in r["message"] for r in logs.at("ERROR"))


class Crash(BaseException):
    """Not an Exception: handlers do not catch it, so it takes the system down."""


@pytest.mark.asyncio
async def test_a_crashed_system_is_re_raised_by_its_owner() -> None:
    class Crasher(Actor):
        def receive(self, message: object) -> object:
            raise Crash

    system = ActorSystem()
    owner = asyncio.get_running_loop().create_task(system.run())
    await system.ready()
    crasher = system.spawn(Crasher(), name="crasher")
    gate = Gate()
    other = system.spawn(gate, name="other")
    gate_in_hand = asyncio.get_running_loop().create_task(other.ask("x"))
    await gate.entered.wait()
    crasher.tell("die")
    with anyio.fail_after(5), pytest.raises(Crash):
        await owner
    with pytest.raises(ActorDeadError):
        await gate_in_hand
    with pytest.raises(ActorDeadError):
        other.tell("late")
    await system.settle()  # returns at once on a stopped system


@pytest.mark.asyncio
async def test_run_twice_and_settle_before_run_are_errors() -> None:
    system = ActorSystem()
    with pytest.raises(RuntimeError, match="settle"):
        await system.settle()
    async with system:
        with pytest.raises(RuntimeError, match="run"):
            await system.run()


@pytest.mark.asyncio
async def test_stop_before_run_makes_run_return() -> None:
    system = ActorSystem()
    ref = system.spawn(Lifecycle([]), name="x")
    system.stop()
    assert not ref.alive
    with anyio.fail_after(5):
        await system.run()
    await system.ready()


def test_a_system_can_be_built_outside_an_event_loop() -> None:
    system = ActorSystem(ManualClock(), default_ask_timeout=None)
    ref = system.spawn(Lifecycle([]), name="x")
    ref.tell("queued before the loop exists")
    assert ref.stats().queued == 1
    assert system.default_ask_timeout is None


@pytest.mark.asyncio
async def test_cancelling_the_owner_kills_the_system_without_leaking_tasks() -> None:
    system = ActorSystem()
    owner = asyncio.get_running_loop().create_task(system.run())
    await system.ready()
    gate = Gate()
    ref = system.spawn(gate, name="gate")
    in_hand = asyncio.get_running_loop().create_task(ref.ask("in hand"))
    await gate.entered.wait()
    late = system.spawn(Lifecycle([]), name="late")  # its task has not run yet
    owner.cancel()
    with anyio.fail_after(5), pytest.raises(asyncio.CancelledError):
        await owner
    with pytest.raises(ActorDeadError):
        await in_hand
    assert not late.alive
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
