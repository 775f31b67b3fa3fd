"""Slow and stalled peers over gRPC (``scheduler.daemon._grpc``): the server's HTTP/2
keepalive, so a connection whose RM vanished (no FIN) dies; a session stream that must say
hello within ``--hello-timeout``; and a write the RM does not take within
``--write-timeout``, which ends its session. Each cut is logged with its reason.

A Scheduler stream of a plain SI client (no session stream) is not timed out before its
first request: the spec lets an RM open ``UpdateAllocation`` and stay quiet until it has
something to ask, and what waits is one coroutine, not a session; keepalive ends it with
its connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import grpc
from loguru import logger

if TYPE_CHECKING:
    from scheduler.daemon._grpc_session import GrpcSession

__all__ = ["grpc_options", "hello_within", "write_within"]

_log = logger.bind(transport="grpc")


def grpc_options(idle_timeout: float) -> list[tuple[str, int]]:
    """The server's keepalive: an HTTP/2 ping every third of ``idle_timeout``, the
    connection dropped when one is not answered within two thirds of it; pings go on while
    a stream is idle (``max_pings_without_data`` 0: no limit) and on a connection without
    calls, which is closed after ``idle_timeout``. Clients may ping as often as the
    server does."""
    ping = max(1, int(idle_timeout * 1000 / 3))
    return [
        ("grpc.keepalive_time_ms", ping),
        ("grpc.keepalive_timeout_ms", 2 * ping),
        ("grpc.http2.ping_timeout_ms", 2 * ping),  # any ping: a BDP ping may be the one out
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.http2.min_ping_interval_without_data_ms", ping),
        ("grpc.max_connection_idle_ms", max(1, int(idle_timeout * 1000))),
    ]


async def hello_within(
    requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any], seconds: float
) -> Any:
    """The first message of a session stream (None if the stream ends first); the call is
    aborted with DEADLINE_EXCEEDED if none comes within ``seconds``."""
    try:
        async with asyncio.timeout(seconds):
            return await anext(aiter(requests), None)
    except TimeoutError:
        pass
    reason = f"no hello within {seconds:g}s (the daemon's --hello-timeout)"
    peer = context.peer()
    _log.bind(peer=peer).info("closing the session stream of {}: {}", peer, reason)
    await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, reason)


async def write_within(
    context: grpc.aio.ServicerContext[Any, Any], message: Any, session: GrpcSession
) -> None:
    """Write ``message`` on one of ``session``'s streams; if the RM does not take it
    within the write timeout (its HTTP/2 window stays full), the session is closed and
    the call aborted."""
    seconds = session.limits.write_timeout
    try:
        async with asyncio.timeout(seconds):
            await context.write(message)
        return
    except TimeoutError:
        pass
    session.close(f"the RM took nothing for {seconds:g}s (the daemon's --write-timeout)")
    await context.abort(grpc.StatusCode.UNAVAILABLE, session.closing)
