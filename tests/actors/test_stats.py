"""Mailbox statistics and reprs: state visible without a debugger."""

from __future__ import annotations

import msgspec
import pytest

from actors import Actor, ActorSystem, MailboxStats


class Picky(Actor):
    def receive(self, message: object) -> object:
        if message == "bad":
            raise ValueError("bad message")
        return message


@pytest.mark.asyncio
@pytest.mark.logs_errors("failed handling")
async def test_queued_peak_processed_failures(system: ActorSystem) -> None:
    ref = system.spawn(Picky(), name="picky")
    await system.settle()
    before = ref.stats()
    assert (before.queued, before.peak, before.processed, before.failures) == (0, 0, 0, 0)
    for message in ("a", "bad", "b", "c", "bad"):
        ref.tell(message)
    assert ref.stats().queued == 5
    assert ref.stats().peak == 5
    assert repr(ref) == "<ActorRef picky queued=5 peak=5>"
    await system.settle()
    stats = ref.stats()
    assert (stats.queued, stats.peak, stats.processed, stats.failures) == (0, 5, 5, 2)
    assert stats.handler_time > before.handler_time
    ref.tell("d")
    await system.settle()
    assert ref.stats().peak == 5
    assert ref.stats().processed == 6
    assert system.stats() == {"picky": ref.stats()}
    assert repr(ref) == "<ActorRef picky queued=0 peak=5>"


@pytest.mark.asyncio
async def test_asks_count_as_processed(system: ActorSystem) -> None:
    ref = system.spawn(Picky(), name="picky")
    await ref.ask("x")
    with pytest.raises(ValueError):
        await ref.ask("bad")
    assert ref.stats().processed == 2
    assert ref.stats().failures == 1


def test_stats_are_a_frozen_msgspec_struct() -> None:
    stats = MailboxStats(queued=1, peak=2, processed=3, handler_time=0.5, failures=0)
    assert msgspec.json.decode(msgspec.json.encode(stats), type=MailboxStats) == stats
    with pytest.raises(AttributeError):
        stats.queued = 3  # type: ignore[misc]


@pytest.mark.asyncio
async def test_system_repr(system: ActorSystem) -> None:
    system.spawn(Picky(), name="picky")
    await system.settle()
    assert repr(system).startswith("<ActorSystem running actors=1 ")
    assert "busy=0" in repr(system)


class Other(Picky):
    pass


@pytest.mark.asyncio
@pytest.mark.logs_errors("failed handling")
async def test_stopped_actors_counts_are_kept_per_kind(system: ActorSystem) -> None:
    assert system.retired_stats() == {}
    refs = [system.spawn(Picky(), name=f"p{n}") for n in range(3)]
    other = system.spawn(Other(), name="other")
    for n, ref in enumerate(refs):
        for _ in range(n + 1):
            ref.tell("a")
    refs[2].tell("bad")
    other.tell("a")
    await system.settle()
    live = sum(r.stats().handler_time for r in refs)
    for ref in (*refs[1:], other):
        ref.stop()
    await system.settle()
    assert set(system.stats()) == {"p0"}  # stats() is the live actors only
    retired = system.retired_stats()
    assert set(retired) == {"Picky", "Other"}
    picky = retired["Picky"]
    assert (picky.queued, picky.peak, picky.processed, picky.failures) == (0, 4, 2 + 4, 1)
    assert 0 < picky.handler_time <= live
    assert retired["Other"].processed == 1
    refs[0].stop()
    await system.settle()
    assert system.retired_stats()["Picky"].processed == 1 + 2 + 4
