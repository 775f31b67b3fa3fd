"""Handlers that await: promises, suspended handlers, their continuations and deadlines.

Nothing here sleeps in real time: the tests move on with `settle()` and the manual clock. The
one exception is an ask's `timeout=`, which is a liveness guard in real seconds by design.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio
import pytest

from actors import (
    Actor,
    ActorDeadError,
    ActorRef,
    ActorSystem,
    AskTimeoutError,
    DeadlineExceeded,
    ManualClock,
    Promise,
)

from .conftest import Logs

T = TypeVar("T")  # a promise's value type, for `value_of`

# -- messages and actors used throughout ---------------------------------------------------


class Boom(Exception):
    pass


@dataclass(frozen=True)
class Wait:
    """Park on a new promise kept under `key`; reply with the value it is resolved with."""

    key: str


@dataclass(frozen=True)
class Run:
    """Call `fn` in the receiving actor's turn (to resolve a promise from an actor, say)."""

    label: str
    fn: Callable[[], object]


@dataclass(frozen=True)
class Within:
    """Wait for the promise kept under `key` for at most `seconds` of the clock, then on."""

    key: str
    seconds: float


@dataclass(frozen=True)
class Nap:
    """`await self.sleep(seconds)`."""

    seconds: float


class Waiter(Actor):
    """A reentrant actor whose handlers park on promises the test (or an actor) settles.

    `Wait(key)` journals "<name> parks <key>", awaits a new promise kept in
    `promises[key]`, journals "<name> resumes <key>=<value>" and replies with the value; its
    `finally` records the key in `finals`. An exception message is raised; anything else is
    journaled as "<name> got <message>" and echoed.
    """

    def __init__(self, journal: list[str] | None = None) -> None:
        self.journal: list[str] = [] if journal is None else journal
        self.promises: dict[str, Promise[object]] = {}
        self.finals: list[str] = []

    async def receive(self, message: object) -> object:
        name = self.actor_ref.name
        if isinstance(message, Exception):
            raise message
        if isinstance(message, Wait):
            self.journal.append(f"{name} parks {message.key}")
            promise = self.promises[message.key] = self.promise()
            try:
                value = await promise
                self.journal.append(f"{name} resumes {message.key}={value}")
                return value
            finally:
                self.finals.append(message.key)
        self.journal.append(f"{name} got {message}")
        return message


class Runner(Actor):
    """A synchronous actor: runs `Run` messages and journals everything it handles."""

    def __init__(self, journal: list[str]) -> None:
        self.journal = journal

    def receive(self, message: object) -> object:
        name = self.actor_ref.name
        if isinstance(message, Run):
            message.fn()
            self.journal.append(f"{name} ran {message.label}")
        else:
            self.journal.append(f"{name} got {message}")
        return None


class Patient(Actor):
    """Deadlines and sleeps on the system's clock; journals what happened and when."""

    def __init__(self) -> None:
        self.journal: list[str] = []
        self.promises: dict[str, Promise[object]] = {}

    def now(self) -> str:
        return f"{self.actor_system.clock.now():g}"

    async def receive(self, message: object) -> object:
        match message:
            case Within(key, seconds):
                promise = self.promises[key] = self.promise()
                try:
                    value = await promise.within(seconds)
                except DeadlineExceeded:
                    self.journal.append(f"{key} overdue at {self.now()}")
                    value = await promise  # the promise is unchanged: wait on
                self.journal.append(f"{key}={value} at {self.now()}")
                return value
            case Nap(seconds):
                self.journal.append(f"nap {seconds:g} at {self.now()}")
                await self.sleep(seconds)
                self.journal.append(f"woke from {seconds:g} at {self.now()}")
            case _:
                self.journal.append(f"got {message} at {self.now()}")
        return None


class Parker(Actor):
    """Every message parks a handler on a new promise; adds up the values it is given."""

    def __init__(self) -> None:
        self.promises: list[Promise[int]] = []
        self.total = 0

    async def receive(self, message: object) -> object:
        promise: Promise[int] = self.promise()
        self.promises.append(promise)
        value = await promise  # not `self.total += await ...`: that reads total before it
        self.total += value
        return None


def resumed_lines(journal: list[str]) -> list[str]:
    return [line for line in journal if " resumes " in line]


# -- 1. order of continuations -------------------------------------------------------------


@pytest.mark.asyncio
async def test_continuations_of_one_actor_run_in_the_order_they_became_ready(
    system: ActorSystem,
) -> None:
    journal: list[str] = []
    waiter = Waiter(journal)
    ref = system.spawn(waiter, name="w")
    for key in "abcd":
        ref.tell(Wait(key))
    await system.settle()
    assert journal == ["w parks a", "w parks b", "w parks c", "w parks d"]
    assert ref.stats().suspended == 4

    for key in "cadb":
        waiter.promises[key].resolve(key.upper())
    assert ref.stats().suspended == 0  # woken: queued to go on, no longer waiting
    await system.settle()
    assert resumed_lines(journal) == [
        "w resumes c=C",
        "w resumes a=A",
        "w resumes d=D",
        "w resumes b=B",
    ]
    assert (ref.stats().suspended, ref.stats().resumed) == (0, 4)


@pytest.mark.asyncio
@pytest.mark.parametrize("first", ["x", "y"])
async def test_continuations_of_two_actors_of_a_group_run_in_the_order_they_became_ready(
    system: ActorSystem, first: str
) -> None:
    journal: list[str] = []
    group = system.dispatcher("group")
    waiters = {name: Waiter(journal) for name in ("x", "y")}
    for name, waiter in waiters.items():
        system.spawn(waiter, name=name, dispatcher=group).tell(Wait("k"))
    resolver = system.spawn(Runner(journal), name="resolver", dispatcher=group)
    await system.settle()
    second = "y" if first == "x" else "x"

    def resolve_both() -> None:
        waiters[first].promises["k"].resolve(1)
        waiters[second].promises["k"].resolve(2)

    resolver.tell(Run("resolve", resolve_both))
    await system.settle()
    assert journal[-3:] == ["resolver ran resolve", f"{first} resumes k=1", f"{second} resumes k=2"]


# -- 2. the group goes on while a handler waits, one handler at a time ---------------------


@pytest.mark.asyncio
async def test_a_waiting_handler_lets_its_group_handle_other_messages_first(
    system: ActorSystem,
) -> None:
    journal: list[str] = []
    group = system.dispatcher("group")
    waiter = Waiter(journal)
    w = system.spawn(waiter, name="w", dispatcher=group)
    other = system.spawn(Runner(journal), name="other", dispatcher=group)
    await system.settle()

    w.tell(Wait("k"))
    w.tell("own later message")
    other.tell("another actor's message")
    other.tell(Run("resolve", lambda: waiter.promises["k"].resolve("v")))
    await system.settle()
    assert journal == [
        "w parks k",
        "w got own later message",  # this actor's own next message did not wait
        "other got another actor's message",
        "other ran resolve",
        "w resumes k=v",  # a later turn of w, after the handler that resolved it
    ]


class Turns:
    """Which handler of a group is running; records every overlap of two of them."""

    def __init__(self) -> None:
        self.running: str | None = None
        self.overlaps: list[tuple[str, str]] = []

    def enter(self, who: str) -> None:
        if self.running is not None:
            self.overlaps.append((self.running, who))
        self.running = who

    def leave(self) -> None:
        self.running = None


@pytest.mark.asyncio
async def test_a_continuation_never_runs_beside_another_handler_of_its_group(
    system: ActorSystem,
) -> None:
    journal: list[str] = []
    turns = Turns()
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiting_at_gate = asyncio.Event()

    class Careful(Actor):
        """Parks on a promise (its turn ends), then awaits an asyncio future inline."""

        pending: Promise[None]

        async def receive(self, message: object) -> object:
            turns.enter("careful")
            journal.append("careful starts")
            self.pending = self.promise()
            turns.leave()
            await self.pending
            turns.enter("careful")
            journal.append("careful resumes")
            waiting_at_gate.set()
            await gate  # foreign: the whole group waits, careful keeps the turn
            journal.append("careful passed the gate")
            turns.leave()
            return None

    class Plain(Actor):
        def receive(self, message: object) -> object:
            turns.enter("plain")
            journal.append(f"plain got {message}")
            turns.leave()
            return None

    group = system.dispatcher("group")
    careful = Careful()
    careful_ref = system.spawn(careful, name="careful", dispatcher=group)
    plain = system.spawn(Plain(), name="plain", dispatcher=group)
    careful_ref.tell("go")
    await system.settle()
    plain.tell(1)  # runs while careful is parked
    await system.settle()

    careful.pending.resolve(None)
    try:
        with anyio.fail_after(5):
            await waiting_at_gate.wait()  # the continuation now awaits the gate inline
        plain.tell(2)
        for _ in range(20):
            await asyncio.sleep(0)  # give a wrongly interleaving dispatcher every chance
        assert journal[-1] == "careful resumes"
    finally:
        gate.set_result(None)
    await system.settle()
    assert journal == [
        "careful starts",
        "plain got 1",
        "careful resumes",
        "careful passed the gate",
        "plain got 2",
    ]
    assert turns.overlaps == []


# -- 3. deadlines and sleeps on the manual clock -------------------------------------------


@pytest.mark.asyncio
async def test_within_raises_deadline_exceeded_exactly_when_the_clock_passes_it(
    system: ActorSystem, clock: ManualClock
) -> None:
    patient = Patient()
    ref = system.spawn(patient, name="patient")
    ref.tell(Within("k", 10))
    await system.settle()
    assert len(system.timers) == 1

    await clock.advance(9.5)
    assert patient.journal == []
    await clock.advance(0.5)
    assert patient.journal == ["k overdue at 10"]
    promise = patient.promises["k"]
    assert not promise.done()  # the deadline left the promise as it was
    assert len(system.timers) == 0
    assert ref.stats().suspended == 1  # awaiting the same promise again, with no deadline

    await clock.advance(100)
    assert patient.journal == ["k overdue at 10"]
    assert promise.resolve("late")
    await system.settle()
    assert patient.journal == ["k overdue at 10", "k=late at 110"]
    assert ref.stats().suspended == 0


@pytest.mark.asyncio
async def test_resolving_before_the_deadline_cancels_it(
    system: ActorSystem, clock: ManualClock
) -> None:
    patient = Patient()
    ref = system.spawn(patient, name="patient")
    ref.tell(Within("k", 10))
    await system.settle()
    assert len(system.timers) == 1

    await clock.advance(5)
    patient.promises["k"].resolve("on time")
    await system.settle()
    assert patient.journal == ["k=on time at 5"]
    assert len(system.timers) == 0  # the deadline timer is gone, not just ignored
    await clock.advance(60)
    assert patient.journal == ["k=on time at 5"]
    assert (ref.stats().suspended, ref.stats().resumed) == (0, 1)


@pytest.mark.asyncio
async def test_sleep_continues_after_the_clock_moved_on(
    system: ActorSystem, clock: ManualClock
) -> None:
    patient = Patient()
    ref = system.spawn(patient, name="patient")
    ref.tell(Nap(5))
    ref.tell("ping")
    await system.settle()
    assert patient.journal == ["nap 5 at 0", "got ping at 0"]  # the next message did not wait
    assert len(system.timers) == 1

    await clock.advance(4.5)
    assert patient.journal == ["nap 5 at 0", "got ping at 0"]
    await clock.advance(0.5)
    assert patient.journal == ["nap 5 at 0", "got ping at 0", "woke from 5 at 5"]
    assert len(system.timers) == 0


@pytest.mark.asyncio
async def test_deadlines_falling_due_in_one_advance_fire_in_time_order(
    system: ActorSystem, clock: ManualClock
) -> None:
    patient = Patient()
    ref = system.spawn(patient, name="patient")
    for seconds in (3, 1, 2):
        ref.tell(Nap(seconds))
    await system.settle()
    await clock.advance(10)
    assert patient.journal[3:] == ["woke from 1 at 1", "woke from 2 at 2", "woke from 3 at 3"]


# -- 4. stop and restart cancel suspended handlers -----------------------------------------


@pytest.mark.asyncio
async def test_stop_closes_suspended_handlers_and_fails_their_askers(system: ActorSystem) -> None:
    journal: list[str] = []
    waiter = Waiter(journal)
    ref = system.spawn(waiter, name="w")
    ref.tell(Wait("told"))
    asked = asyncio.get_running_loop().create_task(ref.ask(Wait("asked")))
    await system.settle()
    assert ref.stats().suspended == 2

    ref.stop()
    await system.settle()
    assert sorted(waiter.finals) == ["asked", "told"]  # their finally blocks ran
    with anyio.fail_after(5), pytest.raises(ActorDeadError):
        await asked

    assert waiter.promises["told"].resolve("too late")  # the promise itself still works...
    await system.settle()
    assert resumed_lines(journal) == []  # ...but nothing of the closed handler runs
    assert ref.stats().resumed == 0


@pytest.mark.asyncio
async def test_stop_cancels_the_deadlines_of_suspended_handlers(
    system: ActorSystem, clock: ManualClock
) -> None:
    patient = Patient()
    ref = system.spawn(patient, name="patient")
    ref.tell(Within("k", 10))
    ref.tell(Nap(10))
    await system.settle()
    assert len(system.timers) == 2

    ref.stop()
    await system.settle()
    assert len(system.timers) == 0
    await clock.advance(20)
    assert patient.journal == ["nap 10 at 0"]


@pytest.mark.asyncio
async def test_a_woken_continuation_does_not_run_after_stop(system: ActorSystem) -> None:
    journal: list[str] = []
    waiter = Waiter(journal)
    ref = system.spawn(waiter, name="w")
    ref.tell(Wait("k"))
    await system.settle()

    waiter.promises["k"].resolve("v")  # queued as a continuation...
    ref.stop()  # ...and stopped before the dispatcher ran it
    await system.settle()
    assert journal == ["w parks k"]
    assert waiter.finals == ["k"]
    assert ref.stats().resumed == 0


@pytest.mark.asyncio
async def test_system_stop_closes_suspended_and_woken_handlers(clock: ManualClock) -> None:
    journal: list[str] = []
    waiter = Waiter(journal)
    with anyio.fail_after(5):
        async with ActorSystem(clock) as system:
            ref = system.spawn(waiter, name="w")
            ref.tell(Wait("woken"))
            asked = asyncio.get_running_loop().create_task(ref.ask(Wait("asked")))
            await system.settle()
            assert ref.stats().suspended == 2
            waiter.promises["woken"].resolve("v")  # woken, never run: the system stops first
        # leaving the block stopped the system
    assert sorted(waiter.finals) == ["asked", "woken"]
    assert resumed_lines(journal) == []
    with anyio.fail_after(5), pytest.raises(ActorDeadError):
        await asked


@pytest.mark.asyncio
@pytest.mark.logs_errors("failed handling")
async def test_restart_closes_the_old_instances_suspended_handlers(system: ActorSystem) -> None:
    built: list[Waiter] = []

    def factory() -> Waiter:
        built.append(Waiter())
        return built[-1]

    ref = system.spawn(factory, name="w", restart=True)
    ref.tell(Wait("told"))
    asked = asyncio.get_running_loop().create_task(ref.ask(Wait("asked")))
    await system.settle()
    assert ref.stats().suspended == 2

    ref.tell(Boom("state is broken"))  # a failed tell: the restart policy rebuilds the actor
    await system.settle()
    assert len(built) == 2
    old, new = built
    assert sorted(old.finals) == ["asked", "told"]
    with anyio.fail_after(5), pytest.raises(ActorDeadError):
        await asked
    assert ref.stats().suspended == 0

    old.promises["told"].resolve("late")
    await system.settle()
    assert resumed_lines(old.journal) == []
    assert await ref.ask("ping") == "ping"
    assert new.journal == ["w got ping"]


@pytest.mark.asyncio
@pytest.mark.logs_errors("failed handling")
async def test_restart_does_not_resume_a_handler_that_a_closing_handler_woke(
    system: ActorSystem, logs: Logs
) -> None:
    built: list[Pair] = []
    journal: list[str] = []

    class Pair(Actor):
        """Closing "first" (its finally resolves `shared`) wakes "second"."""

        def __init__(self) -> None:
            built.append(self)
            self.shared: Promise[str] = self.promise()

        async def receive(self, message: object) -> object:
            if message == "boom":
                raise Boom("state is broken")
            if message == "first":
                try:
                    await self.promise()  # nobody resolves it
                finally:
                    self.shared.resolve("from a finally")
            if message == "second":
                try:
                    journal.append(f"second resumes with {await self.shared}")
                finally:
                    journal.append("second finally")
            return None

    ref = system.spawn(Pair, name="pair", restart=True)
    ref.tell("first")
    ref.tell("second")
    await system.settle()
    assert ref.stats().suspended == 2

    ref.tell("boom")
    await system.settle()
    assert journal == ["second finally"]  # closed with its instance, never resumed
    assert len(built) == 2  # one restart, not a second one for a "resumed" closed handler
    assert ref.stats().failures == 1
    assert len(logs.at("ERROR")) == 1
    assert (ref.stats().suspended, ref.stats().resumed) == (0, 0)


# -- 5. errors raised after an await go through supervision --------------------------------


@pytest.mark.asyncio
@pytest.mark.logs_errors("failed handling")
async def test_a_failing_continuation_of_a_tell_is_logged_and_the_actor_goes_on(
    system: ActorSystem, logs: Logs
) -> None:
    journal: list[str] = []
    waiter = Waiter(journal)
    ref = system.spawn(waiter, name="w")
    ref.tell(Wait("k"))
    await system.settle()

    waiter.promises["k"].reject(Boom("bad value"))
    await system.settle()
    errors = logs.at("ERROR")
    assert len(errors) == 1
    assert errors[0]["extra"]["actor"] == "w"
    assert errors[0]["extra"]["message_type"] == "Wait"
    assert errors[0]["exception"] is not None and errors[0]["exception"].type is Boom
    assert ref.stats().failures == 1
    assert waiter.finals == ["k"]

    assert ref.alive
    ref.tell(Wait("again"))
    await system.settle()
    waiter.promises["again"].resolve(1)
    await system.settle()
    assert journal[-1] == "w resumes again=1"


@pytest.mark.asyncio
async def test_a_failing_continuation_of_an_ask_raises_in_the_asker(
    system: ActorSystem, logs: Logs
) -> None:
    waiter = Waiter()
    ref = system.spawn(waiter, name="w")
    asked = asyncio.get_running_loop().create_task(ref.ask(Wait("k")))
    await system.settle()

    waiter.promises["k"].reject(Boom("bad value"))
    with anyio.fail_after(5), pytest.raises(Boom, match="bad value"):
        await asked
    assert ref.stats().failures == 1
    assert logs.at("ERROR") == []  # the asker has it; nothing to log
    assert await ref.ask("still here") == "still here"


@pytest.mark.asyncio
@pytest.mark.logs_errors("failed handling")
async def test_a_failing_continuation_with_restart_rebuilds_the_actor(
    system: ActorSystem, logs: Logs
) -> None:
    built: list[Waiter] = []

    def factory() -> Waiter:
        built.append(Waiter())
        return built[-1]

    ref = system.spawn(factory, name="w", restart=True)
    ref.tell(Wait("k"))
    await system.settle()

    built[0].promises["k"].reject(Boom("bad value"))
    ref.tell("after the failure")
    await system.settle()
    assert len(built) == 2
    assert built[0].journal == ["w parks k"]
    assert built[1].journal == ["w got after the failure"]  # the mailbox went to the new one
    assert "restart" in logs.at("ERROR")[0]["message"]


@pytest.mark.asyncio
@pytest.mark.logs_errors("failed handling")
async def test_a_failing_continuation_with_restart_cancels_its_woken_siblings(
    system: ActorSystem,
) -> None:
    built: list[Waiter] = []

    def factory() -> Waiter:
        built.append(Waiter())
        return built[-1]

    ref = system.spawn(factory, name="w", restart=True)
    ref.tell(Wait("fails"))
    ref.tell(Wait("next"))
    await system.settle()

    old = built[0]
    old.promises["fails"].reject(Boom("state is broken"))
    old.promises["next"].resolve("v")  # woken as well, queued behind the failing one
    await system.settle()
    assert len(built) == 2
    assert resumed_lines(old.journal) == []  # nothing more runs on the instance that failed
    assert sorted(old.finals) == ["fails", "next"]
    assert ref.stats().failures == 1


@pytest.mark.asyncio
@pytest.mark.logs_errors("failed handling")
async def test_a_failing_run_handler_continuation_with_restart_hands_the_mailbox_on(
    system: ActorSystem,
) -> None:
    built: list[Flows] = []

    class Flows(Actor):
        """A synchronous actor whose "start" begins a flow that fails after an await."""

        def __init__(self) -> None:
            built.append(self)
            self.seen: list[object] = []
            self.pending: Promise[None] = self.promise()

        def receive(self, message: object) -> object:
            if message == "start":
                self.run_handler(self.flow())
            else:
                self.seen.append(message)
            return None

        async def flow(self) -> None:
            await self.pending
            raise Boom("the flow failed")

    ref = system.spawn(Flows, name="flows", restart=True)
    ref.tell("start")
    await system.settle()
    assert ref.stats().suspended == 1

    built[0].pending.resolve(None)
    ref.tell("after the failure")
    await system.settle()
    assert len(built) == 2
    assert built[0].seen == []
    assert built[1].seen == ["after the failure"]


# -- 6. settle() and suspended handlers ----------------------------------------------------


@pytest.mark.asyncio
async def test_settle_returns_while_handlers_are_suspended(system: ActorSystem) -> None:
    patient = Patient()
    ref = system.spawn(patient, name="patient")
    ref.tell(Within("k", 60))
    ref.tell(Nap(60))
    waiter_ref = system.spawn(Waiter(), name="w")
    waiter_ref.tell(Wait("k"))
    with anyio.fail_after(5):
        await system.settle()
    assert ref.stats().suspended == 2
    assert waiter_ref.stats().suspended == 1


class Forwarder(Actor):
    """Waits for `pending`, asks `relay` (another dispatcher), sleeps 0, then tells `sink`."""

    def __init__(self, relay: ActorRef, sink: ActorRef) -> None:
        self.relay = relay
        self.sink = sink
        self.pending: Promise[str] = self.promise()

    async def receive(self, message: object) -> object:
        value = await self.pending
        reply = await self.relay.ask(f"{value} relayed")
        await self.sleep(0)  # a timer due at once: settle delivers it too
        self.sink.tell(reply)
        return None


@pytest.mark.asyncio
@pytest.mark.parametrize("resolved_by", ["the test", "an actor"])
async def test_settle_waits_for_a_continuation_and_everything_it_causes(
    system: ActorSystem, resolved_by: str
) -> None:
    journal: list[str] = []
    relay = system.spawn(Waiter(journal), name="relay")
    sink = system.spawn(Runner(journal), name="sink")
    forwarder = Forwarder(relay, sink)
    system.spawn(forwarder, name="forwarder").tell("go")
    resolver = system.spawn(Runner([]), name="resolver")
    await system.settle()
    assert journal == []

    if resolved_by == "the test":
        forwarder.pending.resolve("v")
    else:
        resolver.tell(Run("resolve", lambda: forwarder.pending.resolve("v")))
    await system.settle()
    assert journal == ["relay got v relayed", "sink got v relayed"]


# -- 7. many handlers suspended at once ----------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("actors", [1, 100])
async def test_ten_thousand_suspended_handlers_all_resume(system: ActorSystem, actors: int) -> None:
    n = 10_000
    started = time.perf_counter()
    group = system.dispatcher("many")
    parkers = [Parker() for _ in range(actors)]
    refs = [system.spawn(p, name=f"p{i}", dispatcher=group) for i, p in enumerate(parkers)]
    for i in range(n):
        refs[i % actors].tell(i)
    await system.settle()
    assert sum(ref.stats().suspended for ref in refs) == n

    for parker in reversed(parkers):
        for promise in reversed(parker.promises):
            promise.resolve(1)
    await system.settle()
    assert sum(ref.stats().suspended for ref in refs) == 0
    assert sum(ref.stats().resumed for ref in refs) == n
    assert sum(p.total for p in parkers) == n
    assert time.perf_counter() - started < 5


# -- 8. asks made from handlers ------------------------------------------------------------


class Countdown(Actor):
    """(whom, n): asks itself or its peer (whom, n - 1); replies with the names on the way."""

    peer: ActorRef

    async def receive(self, message: object) -> object:
        assert isinstance(message, tuple)
        whom, n = message
        if n == 0:
            return [self.actor_ref.name]
        target = self.actor_ref if whom == "self" else self.peer
        rest = await target.ask((whom, n - 1))
        assert isinstance(rest, list)
        return [self.actor_ref.name, *rest]


@pytest.mark.asyncio
async def test_a_handler_can_ask_itself_and_an_actor_of_its_own_group(
    system: ActorSystem,
) -> None:
    group = system.dispatcher("group")
    a, b = Countdown(), Countdown()
    a_ref = system.spawn(a, name="a", dispatcher=group)
    b_ref = system.spawn(b, name="b", dispatcher=group)
    a.peer, b.peer = b_ref, a_ref
    with anyio.fail_after(5):  # a deadlock would wait for the 30 s default ask timeout
        assert await a_ref.ask(("self", 3)) == ["a", "a", "a", "a"]
        assert await a_ref.ask(("peer", 3)) == ["a", "b", "a", "b"]
    assert a_ref.stats().suspended == 0


@pytest.mark.asyncio
async def test_an_ask_timeout_still_fires_from_a_handler(system: ActorSystem, logs: Logs) -> None:
    stuck = Parker()  # never answers until the test resolves it
    stuck_ref = system.spawn(stuck, name="stuck")

    class Impatient(Actor):
        async def receive(self, message: object) -> object:
            try:
                return await stuck_ref.ask(message, timeout=0.01)
            except AskTimeoutError as exc:
                return f"gave up: {exc}"

    ref = system.spawn(Impatient(), name="impatient")
    with anyio.fail_after(5):
        reply = await ref.ask("hello", timeout=None)
    assert isinstance(reply, str) and reply.startswith("gave up:") and "stuck" in reply
    assert (ref.stats().suspended, ref.stats().resumed) == (0, 1)  # it waited suspended

    stuck.promises[0].resolve(1)  # the reply nobody waits for any more goes nowhere
    await system.settle()
    assert logs.at("ERROR") == []


@pytest.mark.asyncio
async def test_an_ask_from_a_handler_to_a_stopped_actor_raises_inside_the_handler(
    system: ActorSystem,
) -> None:
    target = system.spawn(Waiter(), name="target")

    class Caller(Actor):
        async def receive(self, message: object) -> object:
            try:
                return await target.ask(message)
            except ActorDeadError:
                return "target is dead"

    caller = system.spawn(Caller(), name="caller")
    waiting = asyncio.get_running_loop().create_task(caller.ask(Wait("k")))
    await system.settle()
    assert caller.stats().suspended == 1 and target.stats().suspended == 1

    target.stop()  # while the caller's ask is in the target's hands
    with anyio.fail_after(5):
        assert await waiting == "target is dead"
    await system.settle()
    assert await caller.ask("again") == "target is dead"  # asked after the stop


# -- 9. run_handler ------------------------------------------------------------------------


class Owner(Actor):
    """A synchronous actor that owns a flow any handler of its group may begin."""

    def __init__(self) -> None:
        self.state = "idle"
        self.pending: Promise[str] = self.promise()
        self.finals: list[str] = []

    def receive(self, message: object) -> object:
        return self.state

    async def flow(self, label: str) -> None:
        try:
            self.state = f"{label}: first step"
            value = await self.pending
            self.state = f"{label}: {value}"
        finally:
            self.finals.append(label)


@pytest.mark.asyncio
async def test_run_handler_runs_the_first_step_in_the_callers_turn(system: ActorSystem) -> None:
    group = system.dispatcher("group")
    owner = Owner()
    owner_ref = system.spawn(owner, name="owner", dispatcher=group)
    observed: list[str] = []

    class Starter(Actor):
        def receive(self, message: object) -> object:
            owner.run_handler(owner.flow("begun by starter"))
            observed.append(owner.state)  # right after the call, in the same turn
            return None

    system.spawn(Starter(), name="starter", dispatcher=group).tell("go")
    await system.settle()
    assert observed == ["begun by starter: first step"]
    assert owner_ref.stats().suspended == 1

    owner.pending.resolve("done")
    assert owner.state == "begun by starter: first step"  # the rest is a later turn
    await system.settle()
    assert owner.state == "begun by starter: done"
    assert owner_ref.stats().resumed == 1


@pytest.mark.asyncio
async def test_run_handler_from_outside_while_the_dispatcher_is_idle(system: ActorSystem) -> None:
    owner = Owner()
    ref = system.spawn(owner, name="owner")
    await system.settle()

    owner.run_handler(owner.flow("from the test"))
    assert owner.state == "from the test: first step"
    assert ref.stats().suspended == 1
    owner.pending.resolve("done")
    await system.settle()
    assert await ref.ask("state?") == "from the test: done"


@pytest.mark.asyncio
@pytest.mark.logs_errors("failed handling")
async def test_a_run_handler_error_goes_through_supervision(
    system: ActorSystem, logs: Logs
) -> None:
    owner = Owner()
    ref = system.spawn(owner, name="owner")
    await system.settle()

    owner.run_handler(owner.flow("doomed"))
    owner.pending.reject(Boom("no answer"))
    await system.settle()
    errors = logs.at("ERROR")
    assert len(errors) == 1
    assert errors[0]["extra"]["actor"] == "owner"
    assert errors[0]["extra"]["message_type"] == "Owner.flow"
    assert errors[0]["exception"] is not None and errors[0]["exception"].type is Boom
    assert ref.stats().failures == 1
    assert ref.alive


@pytest.mark.asyncio
async def test_run_handler_from_another_task_while_the_dispatcher_is_busy_is_refused(
    system: ActorSystem,
) -> None:
    gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    entered = asyncio.Event()

    class Blocker(Actor):
        async def receive(self, message: object) -> object:
            entered.set()
            await gate  # foreign: the group's dispatcher is busy until it is set
            return None

    group = system.dispatcher("group")
    owner = Owner()
    system.spawn(owner, name="owner", dispatcher=group)
    system.spawn(Blocker(), name="blocker", dispatcher=group).tell("block")
    try:
        await entered.wait()
        with pytest.raises(RuntimeError, match="busy"):
            owner.run_handler(owner.flow("refused"))  # the runtime closes the coroutine
        assert owner.state == "idle"
    finally:
        gate.set_result(None)
    await system.settle()
    assert owner.state == "idle"


@pytest.mark.asyncio
async def test_stop_closes_a_run_handler_flow_even_while_its_coroutine_is_referenced(
    system: ActorSystem,
) -> None:
    owner = Owner()
    ref = system.spawn(owner, name="owner")
    await system.settle()
    flow = owner.flow("held")  # still referenced here: only an explicit close runs its finally
    owner.run_handler(flow)
    assert owner.finals == []

    ref.stop()
    await system.settle()
    assert owner.finals == ["held"]
    assert inspect.getcoroutinestate(flow) == inspect.CORO_CLOSED  # closed, not merely dropped
    owner.pending.resolve("late")
    await system.settle()
    assert owner.state == "held: first step"


@pytest.mark.asyncio
async def test_run_handler_on_a_stopped_actor_raises_actor_dead_error(
    system: ActorSystem,
) -> None:
    owner = Owner()
    ref = system.spawn(owner, name="owner")
    ref.stop()
    await system.settle()
    with pytest.raises(ActorDeadError):
        owner.run_handler(owner.flow("too late"))
    assert owner.state == "idle"


# -- 10. Promise basics --------------------------------------------------------------------


def test_a_promise_settles_once() -> None:
    resolved: Promise[int] = Promise()
    assert not resolved.done()
    with pytest.raises(asyncio.InvalidStateError):
        resolved.result()
    assert resolved.resolve(1) is True
    assert resolved.resolve(2) is False
    assert resolved.reject(Boom("late")) is False
    assert resolved.done() and resolved.result() == 1

    rejected: Promise[int] = Promise()
    assert rejected.reject(Boom("no")) is True
    assert rejected.resolve(1) is False
    assert rejected.done()
    with pytest.raises(Boom, match="no"):
        rejected.result()


async def value_of(promise: Promise[T]) -> T:
    return await promise


@pytest.mark.asyncio
async def test_plain_asyncio_code_can_await_a_promise() -> None:
    loop = asyncio.get_running_loop()
    promise: Promise[str] = Promise()
    waiting = loop.create_task(value_of(promise))
    await asyncio.sleep(0)
    assert not waiting.done()
    promise.resolve("v")
    assert await waiting == "v"

    rejected: Promise[str] = Promise()
    failing = loop.create_task(value_of(rejected))
    await asyncio.sleep(0)
    rejected.reject(Boom("no"))
    with pytest.raises(Boom, match="no"):
        await failing


@pytest.mark.asyncio
async def test_one_resolve_wakes_a_handler_and_a_plain_task_alike(system: ActorSystem) -> None:
    waiter = Waiter()
    ref = system.spawn(waiter, name="w")
    ref.tell(Wait("k"))
    await system.settle()
    outside = asyncio.get_running_loop().create_task(value_of(waiter.promises["k"]))
    await asyncio.sleep(0)

    waiter.promises["k"].resolve("shared")
    assert await outside == "shared"
    await system.settle()
    assert waiter.journal[-1] == "w resumes k=shared"


@pytest.mark.asyncio
async def test_within_and_sleep_outside_a_handler_raise_runtime_error() -> None:
    promise: Promise[int] = Promise()
    with pytest.raises(RuntimeError, match="handler"):
        await promise.within(1)
    with pytest.raises(RuntimeError, match="handler"):
        await Waiter().sleep(1)
    assert not promise.done()


@pytest.mark.asyncio
async def test_awaiting_only_settled_promises_does_not_suspend(system: ActorSystem) -> None:
    class Eager(Actor):
        async def receive(self, message: object) -> object:
            promise = self.promise()
            promise.resolve(message)
            return await promise.within(5)  # already settled: no suspension, no timer

    ref = system.spawn(Eager(), name="eager")
    assert await ref.ask("now") == "now"
    assert (ref.stats().suspended, ref.stats().resumed) == (0, 0)
    assert len(system.timers) == 0


# -- 11. non-reentrant actors --------------------------------------------------------------


class Stepwise(Actor):
    """Each message: journal the start, await a promise another actor resolves, journal the end."""

    def __init__(self, resolver: ActorRef) -> None:
        self.resolver = resolver
        self.journal: list[str] = []

    async def receive(self, message: object) -> object:
        self.journal.append(f"start {message}")
        promise = self.promise()
        self.resolver.tell(Run(f"resolve {message}", lambda: promise.resolve(message)))
        await promise
        self.journal.append(f"end {message}")
        return None


class OneAtATime(Stepwise):
    reentrant = False


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("actor_class", "expected"),
    [
        (OneAtATime, ["start 1", "end 1", "start 2", "end 2", "start 3", "end 3"]),
        (Stepwise, ["start 1", "start 2", "start 3", "end 1", "end 2", "end 3"]),
    ],
)
async def test_a_non_reentrant_actor_handles_one_message_at_a_time(
    system: ActorSystem, actor_class: type[Stepwise], expected: list[str]
) -> None:
    resolver = system.spawn(Runner([]), name="resolver")  # its own dispatcher
    actor = actor_class(resolver)
    ref = system.spawn(actor, name="stepwise")
    await system.settle()
    for i in (1, 2, 3):
        ref.tell(i)
    await system.settle()
    assert actor.journal == expected
