"""tell/ask ordering, failures crossing the actor boundary, policies, async and batch handlers."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from actors import Actor, ActorSystem, AskTimeoutError

from .conftest import Logs


class Boom(Exception):
    pass


class Recorder(Actor):
    """Records every message; replies with ("ok", message); raises on a Boom instance."""

    def __init__(self, seen: list[object] | None = None) -> None:
        self.seen: list[object] = [] if seen is None else seen

    def receive(self, message: object) -> object:
        if isinstance(message, Boom):
            raise message
        self.seen.append(message)
        return ("ok", message)


@pytest.mark.asyncio
async def test_tells_and_asks_are_handled_in_send_order(system: ActorSystem) -> None:
    recorder = Recorder()
    ref = system.spawn(recorder, name="rec")
    ref.tell(1)
    ref.tell(2)
    reply = await ref.ask(3)
    ref.tell(4)
    await system.settle()
    assert reply == ("ok", 3)
    assert recorder.seen == [1, 2, 3, 4]


@pytest.mark.asyncio
async def test_concurrent_asks_each_get_their_reply(system: ActorSystem) -> None:
    ref = system.spawn(Recorder(), name="rec")
    replies = await asyncio.gather(*(ref.ask(i) for i in range(50)))
    assert replies == [("ok", i) for i in range(50)]


@pytest.mark.asyncio
async def test_ask_raises_the_handlers_exception_and_the_actor_continues(
    system: ActorSystem,
) -> None:
    recorder = Recorder()
    ref = system.spawn(recorder, name="rec")
    boom = Boom("bad request")
    with pytest.raises(Boom) as caught:
        await ref.ask(boom)
    assert caught.value is boom
    assert await ref.ask("next") == ("ok", "next")
    assert ref.alive
    assert ref.stats().failures == 1


@pytest.mark.asyncio
@pytest.mark.logs_errors("failed handling")
async def test_tell_failure_is_logged_and_the_actor_resumes(
    system: ActorSystem, logs: Logs
) -> None:
    recorder = Recorder()
    ref = system.spawn(recorder, name="rec")
    ref.tell("a")
    ref.tell(Boom("bad"))
    ref.tell("b")
    await system.settle()
    assert recorder.seen == ["a", "b"]
    assert ref.alive
    errors = logs.at("ERROR")
    assert len(errors) == 1
    record = errors[0]
    assert record["extra"]["actor"] == "rec"
    assert record["extra"]["message_type"] == "Boom"
    assert record["exception"] is not None and record["exception"].type is Boom
    assert "rec" in record["message"] and "Boom" in record["message"]
    assert ref.stats().failures == 1


@pytest.mark.asyncio
@pytest.mark.logs_errors("failed handling")
async def test_restart_policy_rebuilds_the_actor_and_keeps_the_mailbox(
    system: ActorSystem, logs: Logs
) -> None:
    built: list[Counting] = []
    events: list[str] = []

    class Counting(Actor):
        def __init__(self) -> None:
            self.count = 0
            built.append(self)

        def on_start(self) -> None:
            events.append(f"start {len(built)}")

        def on_stop(self) -> None:
            events.append(f"stop {len(built)}")

        def receive(self, message: object) -> object:
            if message == "boom":
                raise Boom("state is broken")
            self.count += 1
            return self.count

    ref = system.spawn(Counting, name="counting", restart=True)
    ref.tell("x")
    ref.tell("x")
    ref.tell("boom")
    ref.tell("x")
    await system.settle()
    assert len(built) == 2
    assert built[0].count == 2
    assert built[1].count == 1  # the message after the failure went to the new instance
    assert built[1].actor_ref is ref
    assert await ref.ask("x") == 2
    assert events == ["start 1", "stop 1", "start 2"]
    assert logs.at("ERROR")[0]["extra"]["actor"] == "counting"


@pytest.mark.asyncio
async def test_failed_ask_does_not_restart(system: ActorSystem) -> None:
    built: list[Recorder] = []

    def factory() -> Recorder:
        built.append(Recorder())
        return built[-1]

    ref = system.spawn(factory, name="rec", restart=True)
    with pytest.raises(Boom):
        await ref.ask(Boom())
    assert len(built) == 1


@pytest.mark.asyncio
async def test_restart_needs_a_factory(system: ActorSystem) -> None:
    with pytest.raises(ValueError, match="factory"):
        system.spawn(Recorder(), name="rec", restart=True)


@pytest.mark.asyncio
async def test_ask_timeout(system: ActorSystem) -> None:
    release = asyncio.Event()

    class Stuck(Actor):
        async def receive(self, message: object) -> object:
            await release.wait()
            return message

    ref = system.spawn(Stuck(), name="stuck")
    with anyio.fail_after(5):
        with pytest.raises(AskTimeoutError, match="stuck"):
            await ref.ask("late", timeout=0.001)
        release.set()
        assert await ref.ask("next", timeout=None) == "next"
    await system.settle()


@pytest.mark.asyncio
async def test_default_ask_timeout_comes_from_the_system() -> None:
    release = asyncio.Event()

    class Stuck(Actor):
        async def receive(self, message: object) -> object:
            await release.wait()
            return message

    with anyio.fail_after(5):
        async with ActorSystem(default_ask_timeout=0.001) as system:
            assert system.default_ask_timeout == 0.001
            ref = system.spawn(Stuck(), name="stuck")
            with pytest.raises(AskTimeoutError):
                await ref.ask("late")
            with pytest.raises(AskTimeoutError):
                await ref.ask("later")
            release.set()
            assert await ref.ask("now", timeout=None) == "now"


@pytest.mark.asyncio
async def test_default_timeout_sweep_fails_only_the_asks_that_waited_too_long() -> None:
    release = asyncio.Event()

    class Slow(Actor):
        async def receive(self, message: object) -> object:
            await release.wait()
            return message

    with anyio.fail_after(5):
        async with ActorSystem(default_ask_timeout=0.02) as system:
            slow = system.spawn(Slow(), name="slow")
            fast = system.spawn(Recorder(), name="fast")
            loop = asyncio.get_running_loop()
            in_hand = loop.create_task(slow.ask("in hand"))
            queued = loop.create_task(slow.ask("queued"))
            started = loop.time()
            replies = 0
            while not queued.done():
                assert await fast.ask(replies) == ("ok", replies)
                replies += 1
            with pytest.raises(AskTimeoutError, match="slow"):
                await in_hand
            with pytest.raises(AskTimeoutError, match="slow"):
                await queued
            assert loop.time() - started >= 0.02  # never early
            assert replies > 0  # the fast actor's asks were never failed
            release.set()
            assert await slow.ask("after", timeout=None) == "after"


@pytest.mark.asyncio
async def test_async_receive_is_awaited_inline_in_order(system: ActorSystem) -> None:
    seen: list[object] = []

    class Slow(Actor):
        async def receive(self, message: object) -> object:
            for _ in range(3):
                await asyncio.sleep(0)
            seen.append(message)
            return f"done {message}"

    ref = system.spawn(Slow(), name="slow")
    for i in range(5):
        ref.tell(i)
    assert await ref.ask("q") == "done q"
    assert seen == [0, 1, 2, 3, 4, "q"]


@pytest.mark.asyncio
@pytest.mark.logs_errors("failed handling")
async def test_async_handler_failure_reaches_the_asker(system: ActorSystem, logs: Logs) -> None:
    class Failing(Actor):
        async def receive(self, message: object) -> object:
            await asyncio.sleep(0)
            raise Boom(str(message))

    ref = system.spawn(Failing(), name="failing")
    with pytest.raises(Boom, match="asked"):
        await ref.ask("asked")
    ref.tell("told")
    await system.settle()
    assert [r["extra"]["message_type"] for r in logs.at("ERROR")] == ["str"]
    assert ref.stats().failures == 2


class Batcher(Actor):
    def __init__(self) -> None:
        self.batches: list[list[object]] = []
        self.asked: list[object] = []

    def receive_batch(self, messages: list[object]) -> None:
        self.batches.append(list(messages))

    def receive(self, message: object) -> object:
        self.asked.append(message)
        return len(self.batches)


@pytest.mark.asyncio
async def test_receive_batch_gets_everything_queued(system: ActorSystem) -> None:
    batcher = Batcher()
    ref = system.spawn(batcher, name="batcher")
    await system.settle()
    for i in range(5):
        ref.tell(i)
    await system.settle()
    assert batcher.batches == [[0, 1, 2, 3, 4]]


@pytest.mark.asyncio
async def test_receive_batch_respects_the_batch_limit(system: ActorSystem) -> None:
    batcher = Batcher()
    ref = system.spawn(batcher, name="batcher", dispatcher=system.dispatcher("d", batch=2))
    await system.settle()
    for i in range(5):
        ref.tell(i)
    await system.settle()
    assert batcher.batches == [[0, 1], [2, 3], [4]]


@pytest.mark.asyncio
async def test_asks_to_a_batching_actor_go_through_receive_in_order(system: ActorSystem) -> None:
    batcher = Batcher()
    ref = system.spawn(batcher, name="batcher")
    await system.settle()
    ref.tell(1)
    ref.tell(2)
    reply = asyncio.get_running_loop().create_task(ref.ask("q"))
    await asyncio.sleep(0)  # the ask is queued behind the two tells
    ref.tell(3)
    assert await reply == 1  # one batch had been handled when the ask arrived
    await system.settle()
    assert batcher.batches == [[1, 2], [3]]
    assert batcher.asked == ["q"]


@pytest.mark.asyncio
@pytest.mark.logs_errors("failed handling")
async def test_async_receive_batch(system: ActorSystem, logs: Logs) -> None:
    batches: list[list[Any]] = []

    class AsyncBatcher(Actor):
        async def receive_batch(self, messages: list[object]) -> None:
            await asyncio.sleep(0)
            if "bad" in messages:
                raise Boom("bad batch")
            batches.append(messages)

    ref = system.spawn(AsyncBatcher(), name="ab")
    await system.settle()
    ref.tell("a")
    ref.tell("b")
    await system.settle()
    ref.tell("bad")
    ref.tell(1)
    await system.settle()
    ref.tell("c")
    await system.settle()
    assert batches == [["a", "b"], ["c"]]
    assert logs.at("ERROR")[0]["extra"]["message_type"] == "batch of int, str"


@pytest.mark.asyncio
async def test_actor_attributes_are_set_by_spawn(system: ActorSystem, logs: Logs) -> None:
    class Introspective(Actor):
        def on_start(self) -> None:
            self.log.info("hello")

        def receive(self, message: object) -> object:
            return (self.actor_ref.name, self.actor_system)

    ref = system.spawn(Introspective(), name="intro")
    assert await ref.ask(None) == ("intro", system)
    hello = [r for r in logs.at("INFO") if r["message"] == "hello"]
    assert hello and hello[0]["extra"]["actor"] == "intro"


@pytest.mark.asyncio
async def test_ask_from_a_handler_to_its_own_group_suspends_instead_of_deadlocking(
    system: ActorSystem,
) -> None:
    group = system.dispatcher("group")
    other = system.spawn(Recorder(), name="other", dispatcher=group)

    class Asker(Actor):
        async def receive(self, message: object) -> object:
            return await other.ask(message)

    asker = system.spawn(Asker(), name="asker", dispatcher=group)
    assert await asker.ask("hi") == ("ok", "hi")
    outside = system.spawn(Asker(), name="outside")
    assert await outside.ask("hi") == ("ok", "hi")


@pytest.mark.asyncio
async def test_ask_from_an_inline_hook_to_its_own_group_is_refused(system: ActorSystem) -> None:
    group = system.dispatcher("group")
    other = system.spawn(Recorder(), name="other", dispatcher=group)
    failures: list[BaseException] = []

    class Hooked(Actor):
        def receive(self, message: object) -> object:
            return None

        async def on_start(self) -> None:
            try:
                await other.ask("from a hook")
            except RuntimeError as exc:
                failures.append(exc)

    system.spawn(Hooked(), name="hooked", dispatcher=group)
    await system.settle()
    assert len(failures) == 1 and "deadlock" in str(failures[0])
