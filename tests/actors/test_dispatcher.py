"""A shared dispatcher: one turn for a group, round-robin batches, on_drained between turns."""

from __future__ import annotations

import pytest

from actors import Actor, ActorSystem

from .conftest import Logs


class Member(Actor):
    """Logs each message as "<name>:<message>" into a log shared by the group."""

    def __init__(self, log: list[str]) -> None:
        self.journal = log

    def receive(self, message: object) -> object:
        self.journal.append(f"{self.actor_ref.name}:{message}")
        return None


class Partition(Member):
    """Like a partition actor: on_drained runs the "scheduling pass"."""

    def __init__(self, log: list[str]) -> None:
        super().__init__(log)
        self.passes = 0

    def on_drained(self) -> None:
        self.passes += 1
        self.journal.append(f"drained#{self.passes}")


@pytest.mark.asyncio
async def test_group_is_drained_round_robin_in_batches(system: ActorSystem) -> None:
    journal: list[str] = []
    group = system.dispatcher("p", batch=2)
    a = system.spawn(Member(journal), name="a", dispatcher=group)
    b = system.spawn(Member(journal), name="b", dispatcher=group)
    await system.settle()
    for i in range(3):
        a.tell(i)
    for i in range(3):
        b.tell(i)
    await system.settle()
    assert journal == ["a:0", "a:1", "b:0", "b:1", "a:2", "b:2"]
    assert system.dispatcher("p", batch=2) is group
    with pytest.raises(ValueError, match="batch"):
        system.dispatcher("p", batch=3)
    assert group.actors == ["a", "b"]


@pytest.mark.asyncio
async def test_on_drained_runs_once_all_mailboxes_of_the_group_are_empty(
    system: ActorSystem,
) -> None:
    journal: list[str] = []
    group = system.dispatcher("p", batch=2)
    part = system.spawn(Partition(journal), name="part", dispatcher=group)
    queue = system.spawn(Member(journal), name="queue", dispatcher=group)
    await system.settle()
    journal.clear()
    for i in range(3):
        part.tell(i)
        queue.tell(i)
    await system.settle()
    assert journal[-1] == "drained#2"
    assert journal.count("drained#2") == 1
    assert sorted(journal[:-1]) == sorted([f"{n}:{i}" for n in ("part", "queue") for i in range(3)])


@pytest.mark.asyncio
async def test_messages_told_from_a_handler_in_the_group_are_drained_first(
    system: ActorSystem,
) -> None:
    journal: list[str] = []
    group = system.dispatcher("p")

    class Forwarder(Member):
        def receive(self, message: object) -> object:
            super().receive(message)
            queue.tell(f"from-{message}")
            return None

    queue = system.spawn(Member(journal), name="queue", dispatcher=group)
    partition = Partition(journal)
    system.spawn(partition, name="part", dispatcher=group)
    fwd = system.spawn(Forwarder(journal), name="fwd", dispatcher=group)
    await system.settle()
    journal.clear()
    fwd.tell("x")
    await system.settle()
    assert journal == ["fwd:x", "queue:from-x", f"drained#{partition.passes}"]


@pytest.mark.asyncio
async def test_messages_told_from_on_drained_are_processed_then_drained_again(
    system: ActorSystem,
) -> None:
    journal: list[str] = []
    group = system.dispatcher("p")

    class Scheduler(Partition):
        def on_drained(self) -> None:
            super().on_drained()
            if self.passes == 2:
                app.tell("allocate")

    app = system.spawn(Member(journal), name="app", dispatcher=group)
    system.spawn(Scheduler(journal), name="part", dispatcher=group)
    await system.settle()
    assert journal == ["drained#1"]
    app.tell("ask")
    await system.settle()
    assert journal == ["drained#1", "app:ask", "drained#2", "app:allocate", "drained#3"]


@pytest.mark.asyncio
@pytest.mark.logs_errors("failed in on_drained")
async def test_a_failing_on_drained_is_logged_and_the_group_continues(
    system: ActorSystem, logs: Logs
) -> None:
    journal: list[str] = []

    class Flaky(Partition):
        def on_drained(self) -> None:
            super().on_drained()
            if self.passes == 1:
                raise RuntimeError("pass failed")

    ref = system.spawn(Flaky(journal), name="flaky")
    await system.settle()
    ref.tell("m")
    await system.settle()
    assert journal == ["drained#1", "flaky:m", "drained#2"]
    assert any("on_drained" in r["message"] for r in logs.at("ERROR"))
    assert ref.stats().failures == 1


@pytest.mark.asyncio
async def test_an_actor_without_a_dispatcher_gets_its_own(system: ActorSystem) -> None:
    a = system.spawn(Member([]), name="a")
    b = system.spawn(Member([]), name="b")
    assert a._cell.dispatcher is not b._cell.dispatcher
    assert "a" in repr(a._cell.dispatcher)


@pytest.mark.asyncio
async def test_dispatchers_of_another_system_are_refused(system: ActorSystem) -> None:
    other = ActorSystem()
    with pytest.raises(ValueError, match="another system"):
        system.spawn(Member([]), name="x", dispatcher=other.dispatcher("d"))
    with pytest.raises(ValueError):
        system.dispatcher("bad", batch=0)


@pytest.mark.asyncio
async def test_an_emptied_group_is_forgotten(system: ActorSystem) -> None:
    group = system.dispatcher("short-lived")
    ref = system.spawn(Member([]), name="m1", dispatcher=group)
    ref.stop()
    await system.settle()
    assert system.dispatcher("short-lived") is not group


@pytest.mark.asyncio
async def test_an_emptied_group_takes_actors_again(system: ActorSystem) -> None:
    journal: list[str] = []
    group = system.dispatcher("reused")
    system.spawn(Member(journal), name="m1", dispatcher=group).stop()
    await system.settle()
    again = system.spawn(Member(journal), name="m2", dispatcher=group)
    again.tell("hello")
    await system.settle()
    assert journal == ["m2:hello"]
    assert system.dispatcher("reused") is group
