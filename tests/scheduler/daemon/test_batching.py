"""A burst of small SI requests over gRPC becomes few core calls (``scheduler.daemon._batching``):
the chunking of the merged streams, which requests join, and a session that turns a burst
of single-ask requests into one call of the core, every request still acknowledged."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiostream import stream

import scheduler
from scheduler import si
from scheduler.daemon._batching import chunks_within, join_requests, joined
from scheduler.daemon._grpc import GrpcServer
from scheduler.daemon._grpc_session import GrpcSession
from scheduler.daemon._native import Limits, NativeServer
from scheduler.si import si_pb2 as pb
from scheduler.si._grpc_codec import to_proto

R = si.Resource.of


async def fed(queue: asyncio.Queue[Any]) -> AsyncIterator[Any]:
    while (item := await queue.get()) is not None:
        yield item


async def chunks_of(source: Any, n: int, within: float = 0.0) -> list[list[Any]]:
    async with chunks_within(source, n, within).stream() as read:
        chunks = [chunk async for chunk in read]
    return chunks


# ====================================================================== chunks_within
@pytest.mark.asyncio
async def test_what_has_arrived_is_one_chunk_and_n_caps_it() -> None:
    queue: asyncio.Queue[Any] = asyncio.Queue()
    for item in [*range(10), None]:
        queue.put_nowait(item)
    assert await chunks_of(fed(queue), 4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert await chunks_of(stream.empty(), 5) == []


@pytest.mark.asyncio
async def test_a_lone_item_waits_for_nothing_and_a_later_one_starts_a_new_chunk() -> None:
    queue: asyncio.Queue[Any] = asyncio.Queue()
    got: list[list[int]] = []

    async def read() -> None:
        async with chunks_within(fed(queue), 10, 0.0).stream() as chunks:
            async for chunk in chunks:
                got.append(chunk)

    reader = asyncio.create_task(read())
    queue.put_nowait(1)
    while not got:
        await asyncio.sleep(0)
    assert got == [[1]]  # no window: the first chunk went as soon as it was read
    queue.put_nowait(2)
    queue.put_nowait(3)
    queue.put_nowait(None)
    await asyncio.wait_for(reader, 5)
    assert got == [[1], [2, 3]]


@pytest.mark.asyncio
async def test_a_time_bound_takes_what_follows_and_the_end_flushes() -> None:
    queue: asyncio.Queue[Any] = asyncio.Queue()
    for item in (1, 2, 3, None):
        queue.put_nowait(item)
    # the source ends inside the window: the chunk goes with what it has
    assert await asyncio.wait_for(chunks_of(fed(queue), 10, within=30.0), 5) == [[1, 2, 3]]


@pytest.mark.asyncio
async def test_merged_streams_keep_each_streams_order() -> None:
    a = stream.iterate([("a", i) for i in range(50)])
    b = stream.iterate([("b", i) for i in range(50)])
    chunks = await chunks_of(stream.merge(a, b), 1000)
    items = [item for chunk in chunks for item in chunk]
    assert sorted(items) == sorted([("a", i) for i in range(50)] + [("b", i) for i in range(50)])
    for name in "ab":
        assert [i for n, i in items if n == name] == list(range(50))


# ====================================================================== join_requests
def ask(key: str, rm: str = "rm") -> si.AllocationRequest:
    return si.AllocationRequest(
        rm_id=rm,
        asks=[si.AllocationAsk(allocation_key=key, application_id="app", resource_ask=R(m=1))],
    )


def test_consecutive_asks_of_one_rm_join_and_a_release_goes_alone() -> None:
    release = si.AllocationRequest(rm_id="rm", releases=si.AllocationReleasesRequest())
    apps = si.ApplicationRequest(rm_id="rm", new=[si.AddApplicationRequest(application_id="x")])
    removal = si.ApplicationRequest(
        rm_id="rm", remove=[si.RemoveApplicationRequest(application_id="x")]
    )
    nodes = si.NodeRequest(rm_id="rm")
    requests: list[Any] = [
        ask("a"), ask("b"), release, ask("c"), ask("d", rm="other"), apps, apps, removal,
        nodes, nodes, ask("e"),
    ]  # fmt: skip
    runs = join_requests(requests, max_asks=100)
    assert runs == [[0, 1], [2], [3], [4], [5, 6], [7], [8], [9], [10]]
    one = joined([requests[i] for i in runs[0]])
    assert [a.allocation_key for a in one.asks] == ["a", "b"] and one.rm_id == "rm"
    assert [a.application_id for a in joined([apps, apps]).new] == ["x", "x"]


def test_a_join_stays_within_max_asks() -> None:
    requests = [ask(str(i)) for i in range(7)]
    assert join_requests(requests, max_asks=3) == [[0, 1, 2], [3, 4, 5], [6]]


# ====================================================================== a session
class Recording:
    """A core that records the calls a session makes."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    async def update_allocation(self, request: si.AllocationRequest) -> None:
        self.calls.append(request)

    async def update_node(self, request: si.NodeRequest) -> None:
        self.calls.append(request)


@pytest.mark.asyncio
async def test_a_burst_of_single_ask_requests_is_one_core_call_and_each_is_acked() -> None:
    async with scheduler.start_scheduler() as core:
        server = GrpcServer(NativeServer(core, limits=Limits(max_asks=1000, max_id=8)))
        recording = Recording()
        server.edge = recording  # type: ignore[assignment]  # where the SI calls go
        session = GrpcSession(server, "s1", "test", plain=False)
        acks = session.open_stream(pb.Ack.ALLOCATION * 0)  # the session stream
        for i in range(200):
            session.take_request(pb.Ack.ALLOCATION, i + 1, to_proto(ask(f"k{i}")))
        too_long = to_proto(ask("x" * 20))
        session.take_request(pb.Ack.ALLOCATION, 201, too_long)
        session.take_request(pb.Ack.NODE, 1, to_proto(si.NodeRequest(rm_id="rm")))
        session._end_calls()
        await asyncio.wait_for(session._worker, 5)

        [burst, node] = recording.calls
        assert [a.allocation_key for a in burst.asks] == [f"k{i}" for i in range(200)]
        assert isinstance(node, si.NodeRequest)
        got = [acks.get_nowait().ack for _ in range(acks.qsize())]
        fine = [(a.stream, a.seq) for a in got if not a.error]
        assert sorted(fine) == [(pb.Ack.ALLOCATION, i) for i in range(1, 201)] + [(pb.Ack.NODE, 1)]
        [refused] = [a for a in got if a.error]
        assert (refused.seq, refused.error) == (201, "SchedulerError")
        assert "--max-id" in refused.message
