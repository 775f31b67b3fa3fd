"""What ``scheduler.client.connect`` says when the address is not a daemon's native
transport, or not an address: never a frame-size figure or a urllib traceback alone."""

from __future__ import annotations

import asyncio

import pytest

import scheduler.client
from scheduler import SchedulerError

pytestmark = pytest.mark.asyncio


async def test_an_http_port_is_said_to_be_no_native_transport() -> None:
    async def answer_http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer_http, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        with pytest.raises(ConnectionError, match="no scheduler daemon's native transport there"):
            async with scheduler.client.connect(f"tcp://127.0.0.1:{port}", timeout=5):
                pass


@pytest.mark.parametrize(
    "target", ["tcp://127.0.0.1:99999", "tls://127.0.0.1:x", "grpc://127.0.0.1:70000", "tcp://:5"]
)
async def test_a_port_out_of_range_is_a_scheduler_error(target: str) -> None:
    with pytest.raises(SchedulerError, match="with a port from 0 to 65535"):
        async with scheduler.client.connect(target, timeout=5):
            pass
