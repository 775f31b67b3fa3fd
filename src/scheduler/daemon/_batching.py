"""A burst of small SI requests becomes few core calls: the gRPC transport merges what an
RM sends on its three Scheduler streams into one stream (aiostream's ``merge``), cuts it into
chunks with a time bound (``chunks_within``), and joins the requests of a chunk that can
go to the core as one (``join_requests``).

Joining keeps what the core does: only consecutive requests of one kind join, and only
those that add (asks without releases, new applications without removals) and name the
same RM, so the core sees the same items in the same order, in fewer calls. A request that
releases or removes, and every node request, goes on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from aiostream import pipable_operator, streamcontext

from scheduler import si

__all__ = ["chunks_within", "drain", "join_requests", "joined"]

_DONE: Any = object()


@pipable_operator
async def chunks_within(
    source: AsyncIterable[Any], n: int, within: float
) -> AsyncIterator[list[Any]]:
    """Chunks of at most ``n`` items: a chunk starts with the next item and takes those that
    follow within ``within`` seconds of it; with ``within`` 0 it takes those that keep
    arriving turn after turn of the event loop, so a burst already sent is one chunk and
    a lone item waits one turn.

    The source is read by a task of this operator's own (a pending read is never
    cancelled, so a merged source stays whole); it ends with the operator.
    """
    ready: asyncio.Queue[Any] = asyncio.Queue()

    async def pump() -> None:
        try:
            async with streamcontext(source) as items:
                async for item in items:
                    ready.put_nowait(item)
        finally:
            ready.put_nowait(_DONE)

    loop = asyncio.get_running_loop()
    reader = loop.create_task(pump())
    try:
        while True:
            first = await ready.get()
            if first is _DONE:
                return
            chunk: list[Any] = [first]
            done = False
            if within > 0:
                deadline = loop.time() + within
                while len(chunk) < n:
                    left = deadline - loop.time()
                    if left <= 0:
                        break
                    try:
                        item = await asyncio.wait_for(ready.get(), left)
                    except TimeoutError:
                        break
                    if item is _DONE:
                        done = True
                        break
                    chunk.append(item)
            else:
                # What has arrived: the source hands items over a few per turn of the
                # loop, so the chunk grows while a turn brings more.
                while len(chunk) < n and not done:
                    await asyncio.sleep(0)
                    if ready.empty():
                        break
                    while len(chunk) < n and not ready.empty():
                        item = ready.get_nowait()
                        if item is _DONE:
                            done = True
                            break
                        chunk.append(item)
            yield chunk
            if done:
                return
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader


def join_requests(requests: list[Any], max_asks: int) -> list[list[int]]:
    """Which of ``requests`` (SI requests, in order) go to the core together: runs of the
    indexes of consecutive requests that join, each run at most ``max_asks`` asks (an
    ``AllocationRequest`` over it goes alone, for its own limit check to refuse)."""
    runs: list[list[int]] = []
    last: Any = None
    asks = 0
    for i, request in enumerate(requests):
        kind = _joinable(request)
        size = len(request.asks) if isinstance(request, si.AllocationRequest) else 0
        if kind is not None and runs and kind == last and (not size or asks + size <= max_asks):
            runs[-1].append(i)
            asks += size
        else:
            runs.append([i])
            asks = size
        last = kind
    return runs


def _joinable(request: Any) -> tuple[type, str] | None:
    """What a request may join with (its kind and RM), or None when it goes alone."""
    if isinstance(request, si.AllocationRequest):
        if request.releases is None:
            return (si.AllocationRequest, request.rm_id)
        return None
    if isinstance(request, si.ApplicationRequest):
        if not request.remove:
            return (si.ApplicationRequest, request.rm_id)
        return None
    return None


def joined(requests: list[Any]) -> Any:
    """One request holding the items of ``requests`` (a run of ``join_requests``)."""
    first = requests[0]
    if len(requests) == 1:
        return first
    if isinstance(first, si.AllocationRequest):
        return si.AllocationRequest(
            asks=[ask for r in requests for ask in r.asks], rm_id=first.rm_id
        )
    return si.ApplicationRequest(new=[app for r in requests for app in r.new], rm_id=first.rm_id)


async def drain(
    queue: asyncio.Queue[tuple[int, int, Any] | None],
) -> AsyncIterator[list[tuple[int, int, Any]]]:
    """What one Scheduler stream read, as lists of all that waited at once (a burst goes
    through the merge as one item), until the session ends it (``None``)."""
    while True:
        item = await queue.get()
        batch = []
        while item is not None:
            batch.append(item)
            if queue.empty():
                break
            item = queue.get_nowait()
        if batch:
            yield batch
        if item is None:
            return
