"""Throughput of the actor runtime against raw asyncio baselines, side by side.

Run standalone: `python bench/bench_actors.py [--n 200000] [--repeat 3]`. Prints a table and
writes bench/results/actors.json. Targets: actor tell >= 60% of a raw deque mailbox, actor
ask >= 90% of a raw asyncio.Queue + future round trip. Each case runs `--repeat` times,
interleaved with its baseline, and the best run counts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import platform
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path

from loguru import logger

from actors import Actor, ActorSystem

RESULTS = Path(__file__).parent / "results" / "actors.json"
TELL_TARGET = 0.60
ASK_TARGET = 0.90


# -- baselines -------------------------------------------------------------------------


async def raw_deque_tell(n: int, chunk: int) -> float:
    """Producer appends to a deque; a consumer task pops, woken by a future when empty."""
    loop = asyncio.get_running_loop()
    mailbox: deque[int] = deque()
    waiter: asyncio.Future[None] | None = None
    done: asyncio.Future[None] = loop.create_future()

    async def consumer() -> None:
        nonlocal waiter
        count = 0
        popleft = mailbox.popleft
        while True:
            while mailbox:
                popleft()
                count += 1
            if count >= n:
                done.set_result(None)
                return
            waiter = loop.create_future()
            await waiter

    task = loop.create_task(consumer())
    await asyncio.sleep(0)
    started = time.perf_counter()
    for i in range(n):
        mailbox.append(i)
        if waiter is not None:
            waiter.set_result(None)
            waiter = None
        if i % chunk == chunk - 1:
            await asyncio.sleep(0)
    await done
    elapsed = time.perf_counter() - started
    await task
    return n / elapsed


async def raw_queue_tell(n: int, chunk: int) -> float:
    """Producer put_nowait()s into an asyncio.Queue; a consumer task awaits get()."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[int] = asyncio.Queue()
    done: asyncio.Future[None] = loop.create_future()

    async def consumer() -> None:
        count = 0
        while count < n:
            await queue.get()
            count += 1
        done.set_result(None)

    task = loop.create_task(consumer())
    await asyncio.sleep(0)
    started = time.perf_counter()
    put = queue.put_nowait
    for i in range(n):
        put(i)
        if i % chunk == chunk - 1:
            await asyncio.sleep(0)
    await done
    elapsed = time.perf_counter() - started
    await task
    return n / elapsed


async def raw_ask(n: int, _chunk: int) -> float:
    """Put (msg, future) into an asyncio.Queue; the consumer sets the result; await it."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[int, asyncio.Future[int]]] = asyncio.Queue()

    async def consumer() -> None:
        while True:
            message, future = await queue.get()
            if not future.done():
                future.set_result(message)

    task = loop.create_task(consumer())
    await asyncio.sleep(0)
    started = time.perf_counter()
    for i in range(n):
        future: asyncio.Future[int] = loop.create_future()
        queue.put_nowait((i, future))
        await future
    elapsed = time.perf_counter() - started
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return n / elapsed


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


async def actor_tell(n: int, chunk: int) -> float:
    """A task tells n messages to an actor that counts them; settle() waits for the last."""
    counter = Counter()
    async with ActorSystem() as system:
        ref = system.spawn(counter, name="counter")
        await system.settle()
        started = time.perf_counter()
        tell = ref.tell
        for i in range(n):
            tell(i)
            if i % chunk == chunk - 1:
                await asyncio.sleep(0)
        await system.settle()
        elapsed = time.perf_counter() - started
    assert counter.count == n, counter.count
    return n / elapsed


def actor_ask_with(timeout: str) -> Callable[[int, int], Awaitable[float]]:
    async def actor_ask(n: int, _chunk: int) -> float:
        async with ActorSystem() as system:
            ref = system.spawn(Echo(), name="echo")
            await system.settle()
            ask = ref.ask
            started = time.perf_counter()
            if timeout == "default":
                for i in range(n):
                    await ask(i)
            else:
                for i in range(n):
                    await ask(i, None)
            elapsed = time.perf_counter() - started
        return n / elapsed

    return actor_ask


# -- driver ------------------------------------------------------------------------------

Case = Callable[[int, int], Awaitable[float]]
CASES: dict[str, Case] = {
    "raw deque tell": raw_deque_tell,
    "raw asyncio.Queue tell": raw_queue_tell,
    "actor tell": actor_tell,
    "raw Queue+future ask": raw_ask,
    "actor ask (default timeout)": actor_ask_with("default"),
    "actor ask (timeout=None)": actor_ask_with("none"),
}


async def measure(n: int, repeat: int, chunk: int) -> dict[str, float]:
    best = dict.fromkeys(CASES, 0.0)
    for _ in range(repeat):
        for name, case in CASES.items():  # interleaved, so drift hits every case alike
            gc.collect()
            best[name] = max(best[name], await case(n, chunk))
    return best


def report(best: dict[str, float], n: int) -> dict[str, object]:
    tell_ratio = best["actor tell"] / best["raw deque tell"]
    ask_ratio = best["actor ask (default timeout)"] / best["raw Queue+future ask"]
    ask_none_ratio = best["actor ask (timeout=None)"] / best["raw Queue+future ask"]
    print(f"\nactors bench, n={n:,} (best of repeats), Python {platform.python_version()}\n")
    print(f"{'case':<30} {'msgs/s':>14}")
    print("-" * 45)
    for name, rate in best.items():
        print(f"{name:<30} {rate:>14,.0f}")
    print()
    print(f"{'ratio':<36} {'value':>7} {'target':>7}  result")
    print("-" * 60)
    rows = [
        ("actor tell / raw deque tell", tell_ratio, TELL_TARGET),
        ("actor ask / raw ask", ask_ratio, ASK_TARGET),
        ("actor ask (no timeout) / raw ask", ask_none_ratio, ASK_TARGET),
    ]
    for label, value, target in rows:
        verdict = "PASS" if value >= target else "MISS"
        print(f"{label:<36} {value:>7.1%} {target:>7.0%}  {verdict}")
    return {
        "n": n,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "rates": best,
        "ratios": {
            "tell": tell_ratio,
            "ask": ask_ratio,
            "ask_no_timeout": ask_none_ratio,
        },
        "targets": {"tell": TELL_TARGET, "ask": ASK_TARGET},
        "pass": tell_ratio >= TELL_TARGET and ask_ratio >= ASK_TARGET,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=200_000, help="messages per case")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case; best counts")
    parser.add_argument("--chunk", type=int, default=1000, help="tells between producer yields")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON")
    args = parser.parse_args(argv)
    logger.remove()  # the runtime's debug lines (actor started/stopped) are not the point here
    logger.add(sys.stderr, level="WARNING")
    best = asyncio.run(measure(args.n, args.repeat, args.chunk))
    result = report(best, args.n)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
