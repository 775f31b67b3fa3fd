"""Throughput of the actor runtime against raw asyncio baselines, side by side.

Run standalone: `python bench/bench_actors.py [--n 200000] [--repeat 3] [--quick] [--check]`.
Prints a table and writes bench/results/actors.json.

Targets: actor tell >= 60% of a raw deque mailbox; actor ask (default timeout) >= 90% of a
raw asyncio.Queue + future round trip. ``--check`` exits 1 when one is missed. The ask with
``timeout=None`` is printed beside it, without a target. ``--quick`` is 2,000 messages per
case, once.

Suspend/resume (no target, the ratio is printed): round trips in which a handler of a
reentrant actor starts, parks on a `Promise`, is resolved by another message (or by another
actor of its dispatcher) and its continuation runs; against a task that awaits a fresh
asyncio future which the producer resolves.

Each case moves `--n` messages per run, and each run counts the best of `--repeat`. Within a
run the n messages go in `--slices` slices, interleaved with the slices of every other case
(all contestants are set up first and stay idle between their slices), so a burst of load
from elsewhere on the machine hits the runtime and its baseline alike.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import cast

from loguru import logger

from _common import Progress, Run, add_arguments
from actors import Actor, ActorRef, ActorSystem, Promise

TELL_TARGET = 0.60
ASK_TARGET = 0.90

Slice = Callable[[int], Awaitable[None]]  # moves m messages and returns once all are handled
Contestant = Callable[[int], contextlib.AbstractAsyncContextManager[Slice]]  # chunk -> Slice


# -- baselines -------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def running(consumer: Coroutine[None, None, None]) -> AsyncIterator[None]:
    """A baseline's consumer task, started and running while the block runs."""
    task = asyncio.get_running_loop().create_task(consumer)
    await asyncio.sleep(0)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def raw_deque_tell(chunk: int) -> AsyncIterator[Slice]:
    """Producer appends to a deque; a consumer task pops, woken by a future when empty."""
    loop = asyncio.get_running_loop()
    mailbox: deque[int] = deque()
    waiter: asyncio.Future[None] | None = None
    target = 0
    done: asyncio.Future[None] | None = None

    async def consumer() -> None:
        nonlocal waiter, done
        count = 0
        popleft = mailbox.popleft
        while True:
            while mailbox:
                popleft()
                count += 1
            if done is not None and count >= target:
                done.set_result(None)
                done = None
            waiter = loop.create_future()
            await waiter

    async def run_slice(m: int) -> None:
        nonlocal waiter, target, done
        target += m
        finished = done = loop.create_future()
        for i in range(m):
            mailbox.append(i)
            if waiter is not None:
                waiter.set_result(None)
                waiter = None
            if i % chunk == chunk - 1:
                await asyncio.sleep(0)
        await finished

    async with running(consumer()):
        yield run_slice


@contextlib.asynccontextmanager
async def raw_queue_tell(chunk: int) -> AsyncIterator[Slice]:
    """Producer put_nowait()s into an asyncio.Queue; a consumer task awaits get()."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[int] = asyncio.Queue()
    target = 0
    done: asyncio.Future[None] | None = None

    async def consumer() -> None:
        nonlocal done
        count = 0
        while True:
            await queue.get()
            count += 1
            if done is not None and count >= target:
                done.set_result(None)
                done = None

    async def run_slice(m: int) -> None:
        nonlocal target, done
        target += m
        finished = done = loop.create_future()
        put = queue.put_nowait
        for i in range(m):
            put(i)
            if i % chunk == chunk - 1:
                await asyncio.sleep(0)
        await finished

    async with running(consumer()):
        yield run_slice


@contextlib.asynccontextmanager
async def raw_ask(_chunk: int) -> AsyncIterator[Slice]:
    """Put (msg, future) into an asyncio.Queue; the consumer sets the result; await it."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[int, asyncio.Future[int]]] = asyncio.Queue()

    async def consumer() -> None:
        while True:
            message, future = await queue.get()
            if not future.done():
                future.set_result(message)

    async def run_slice(m: int) -> None:
        for i in range(m):
            future: asyncio.Future[int] = loop.create_future()
            queue.put_nowait((i, future))
            await future

    async with running(consumer()):
        yield run_slice


@contextlib.asynccontextmanager
async def raw_future_round_trip(_chunk: int) -> AsyncIterator[Slice]:
    """A task awaits a fresh asyncio future; the producer resolves it and yields once, by
    which time the task has counted it and awaits the next one."""
    loop = asyncio.get_running_loop()
    parked: list[asyncio.Future[None]] = []
    count = 0

    async def consumer() -> None:
        nonlocal count
        while True:
            future: asyncio.Future[None] = loop.create_future()
            parked.append(future)
            await future
            count += 1

    async def run_slice(m: int) -> None:
        expected = count + m
        pop = parked.pop
        for _ in range(m):
            pop().set_result(None)
            await asyncio.sleep(0)
        assert count == expected, (count, expected)

    async with running(consumer()):
        yield run_slice


# -- the runtime -------------------------------------------------------------------------


class Counter(Actor):
    def __init__(self) -> None:
        self.count = 0

    def receive(self, message: object) -> object:
        self.count += 1
        return None


class Echo(Actor):
    def receive(self, message: object) -> object:
        return message


@contextlib.asynccontextmanager
async def actor_tell(chunk: int) -> AsyncIterator[Slice]:
    """A task tells messages to an actor that counts them; settle() waits for the last."""
    counter = Counter()
    async with ActorSystem() as system:
        ref = system.spawn(counter, name="counter")
        await system.settle()

        async def run_slice(m: int) -> None:
            expected = counter.count + m
            tell = ref.tell
            for i in range(m):
                tell(i)
                if i % chunk == chunk - 1:
                    await asyncio.sleep(0)
            await system.settle()
            assert counter.count == expected, (counter.count, expected)

        yield run_slice


def actor_ask(
    default_timeout: bool,
) -> Callable[[int], contextlib.AbstractAsyncContextManager[Slice]]:
    @contextlib.asynccontextmanager
    async def contestant(_chunk: int) -> AsyncIterator[Slice]:
        async with ActorSystem() as system:
            ref = system.spawn(Echo(), name="echo")
            await system.settle()
            ask = ref.ask

            async def with_default(m: int) -> None:
                for i in range(m):
                    await ask(i)

            async def without(m: int) -> None:
                for i in range(m):
                    await ask(i, None)

            yield with_default if default_timeout else without

    return contestant


class Suspender(Actor):
    """ "wait": a handler parks on a new promise, then counts; "release" resolves the oldest.

    With a releaser, the handler hands the promise to that actor instead, which resolves it.
    """

    def __init__(self, releaser: ActorRef | None = None) -> None:
        self.releaser = releaser
        self.pending: deque[Promise[None]] = deque()
        self.count = 0

    async def receive(self, message: object) -> object:
        if message == "wait":
            promise: Promise[None] = self.promise()
            if self.releaser is None:
                self.pending.append(promise)
            else:
                self.releaser.tell(promise)
            await promise  # the turn ends here
            self.count += 1
        else:
            self.pending.popleft().resolve(None)
        return None


class Releaser(Actor):
    """Another actor of the suspender's dispatcher: resolves each promise it is told."""

    def receive(self, message: object) -> object:
        cast("Promise[None]", message).resolve(None)
        return None


def actor_suspend_resume(
    peer: bool,
) -> Callable[[int], contextlib.AbstractAsyncContextManager[Slice]]:
    """Per round trip the producer tells "wait" (and "release", to the same actor, unless a
    peer resolves), then yields once: in one dispatcher turn the handler starts and parks,
    the release resolves its promise, and the continuation runs as a later turn."""

    @contextlib.asynccontextmanager
    async def contestant(_chunk: int) -> AsyncIterator[Slice]:
        async with ActorSystem() as system:
            group = system.dispatcher("suspend")
            releaser = None
            if peer:
                releaser = system.spawn(Releaser(), name="releaser", dispatcher=group)
            suspender = Suspender(releaser)
            ref = system.spawn(suspender, name="suspender", dispatcher=group)
            await system.settle()

            async def run_slice(m: int) -> None:
                expected = suspender.count + m
                tell = ref.tell
                for _ in range(m):
                    tell("wait")
                    if not peer:
                        tell("release")
                    await asyncio.sleep(0)
                await system.settle()
                assert suspender.count == expected, (suspender.count, expected)
                assert not suspender.pending

            yield run_slice

    return contestant


# -- driver ------------------------------------------------------------------------------

GROUPS: dict[str, dict[str, Contestant]] = {
    "tell": {
        "raw deque tell": raw_deque_tell,
        "raw asyncio.Queue tell": raw_queue_tell,
        "actor tell": actor_tell,
    },
    "ask": {
        "raw Queue+future ask": raw_ask,
        "actor ask (default timeout)": actor_ask(default_timeout=True),
        "actor ask (timeout=None)": actor_ask(default_timeout=False),
    },
    "suspend/resume": {
        "raw future round trip": raw_future_round_trip,
        "actor suspend/resume": actor_suspend_resume(peer=False),
        "actor suspend/resume (peer resolves)": actor_suspend_resume(peer=True),
    },
}


async def measure_group(
    contestants: dict[str, Contestant], n: int, chunk: int, slices: int
) -> dict[str, float]:
    """One run: n messages per contestant, in interleaved slices; returns msgs/s."""
    elapsed = dict.fromkeys(contestants, 0.0)
    async with contextlib.AsyncExitStack() as stack:
        runners = {
            name: await stack.enter_async_context(c(chunk)) for name, c in contestants.items()
        }
        sizes = [n // slices + (1 if i < n % slices else 0) for i in range(slices)]
        for size in sizes:
            for name, run_slice in runners.items():
                gc.collect()
                started = time.perf_counter()
                await run_slice(size)
                elapsed[name] += time.perf_counter() - started
    return {name: n / seconds for name, seconds in elapsed.items()}


async def measure(
    n: int, repeat: int, chunk: int, slices: int, progress: Progress
) -> dict[str, float]:
    best: dict[str, float] = {}
    for group, contestants in GROUPS.items():
        for r in range(repeat):
            with progress.step(f"{group}: {n:,} messages per case, repeat {r + 1}/{repeat}"):
                rates = await measure_group(contestants, n, chunk, slices)
            for name, rate in rates.items():
                best[name] = max(best.get(name, 0.0), rate)
    return best


def report(best: dict[str, float], args: argparse.Namespace, run: Run) -> dict[str, object]:
    ratios = {
        "tell": best["actor tell"] / best["raw deque tell"],
        "ask": best["actor ask (default timeout)"] / best["raw Queue+future ask"],
        "ask_no_timeout": best["actor ask (timeout=None)"] / best["raw Queue+future ask"],
        "suspend_resume": best["actor suspend/resume"] / best["raw future round trip"],
        "suspend_resume_peer": (
            best["actor suspend/resume (peer resolves)"] / best["raw future round trip"]
        ),
    }
    print(
        f"\nactors bench: n={args.n:,} per run, best of {args.repeat}, "
        f"{args.slices} interleaved slices\n"
    )
    print(f"{'case':<38} {'msgs/s':>14}")
    print("-" * 53)
    for name, rate in best.items():
        print(f"{name:<38} {rate:>14,.0f}")
    print("(suspend/resume cases count round trips/s)")
    print()
    print(f"{'ratio':<44} {'value':>7}")
    print("-" * 52)
    labels = {
        "tell": "actor tell / raw deque tell",
        "ask": "actor ask / raw ask",
        "ask_no_timeout": "actor ask (no timeout) / raw ask",
        "suspend_resume": "actor suspend/resume / raw future",
        "suspend_resume_peer": "actor suspend/resume (peer) / raw future",
    }
    for key, label in labels.items():
        print(
            f"{label:<44} {ratios[key]:>7.1%}" + ("" if key in ("tell", "ask") else "  (no target)")
        )
    print()
    for key, bound in (("tell", TELL_TARGET), ("ask", ASK_TARGET)):
        run.target(key, labels[key], ratios[key], at_least=bound, fmt=".1%")
    return {
        "n": args.n,
        "repeat": args.repeat,
        "slices": args.slices,
        "chunk": args.chunk,
        "rates": best,
        "ratios": ratios,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="actors runtime vs raw asyncio throughput")
    parser.add_argument("--n", type=int, help="messages per case and run (default 200,000)")
    parser.add_argument("--repeat", type=int, help="runs per case; the best counts (default 3)")
    parser.add_argument("--slices", type=int, default=10, help="interleaved slices per run")
    parser.add_argument("--chunk", type=int, default=1000, help="tells between producer yields")
    add_arguments(parser)
    args = parser.parse_args(argv)
    args.n = args.n or (2_000 if args.quick else 200_000)
    args.repeat = args.repeat or (1 if args.quick else 3)
    logger.remove()  # the runtime's debug lines (actor started/stopped) are not the point here
    logger.add(sys.stderr, level="WARNING")
    run = Run("actors", args)
    progress = run.progress(len(GROUPS) * args.repeat)
    best = asyncio.run(measure(args.n, args.repeat, args.chunk, max(1, args.slices), progress))
    return run.finish(report(best, args, run))


if __name__ == "__main__":
    sys.exit(main())
