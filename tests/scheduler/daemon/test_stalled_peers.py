"""Slow and stalled peers (issue 23, item 4): an RM that never says hello, goes silent
(its host vanished: no FIN), or stops reading, over the native transport and gRPC, and an
HTTP client that sends its request or reads its response a byte at a time, are each cut
off after a bounded time with a logged reason, while another RM keeps working.

Real sockets and small timeouts (tenths of a second); every wait is bounded, and what is
checked is that the stalled peer is cut off and why, never how fast."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import grpc
import grpc.aio
import pytest
import uvicorn
from anyio.abc import SocketAttribute
from loguru import logger

import scheduler
from scheduler import si
from scheduler.client import connect
from scheduler.daemon._grpc import GrpcServer
from scheduler.daemon._http_liveness import timed_protocol
from scheduler.daemon._native import Limits, NativeServer
from scheduler.daemon._rest import make_app
from scheduler.si import _grpc_codec as codec
from scheduler.si import si_pb2 as pb
from scheduler.si._wire import (
    Hello,
    NodeCall,
    QueryCall,
    RegisterCall,
    decode_from_daemon,
    encode,
)
from scheduler.testing import ManualClock, RecordingCallback, Scenario

from .test_daemon import QUEUES, Daemon

FAST = {"hello_timeout": 0.3, "idle_timeout": 0.6, "write_timeout": 0.3}
BOUND = 15.0  # seconds any one wait may take before the test fails


@pytest.fixture
def logs() -> Iterator[list[dict[str, Any]]]:
    """The records the library logs at INFO and up, while the test runs."""
    records: list[dict[str, Any]] = []
    logger.enable("scheduler")
    sink = logger.add(lambda m: records.append(dict(m.record)), level="INFO")
    yield records
    logger.remove(sink)
    logger.disable("scheduler")


def said(records: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    return [r for r in records if text in r["message"]]


async def eventually(check: Callable[[], object], seconds: float = BOUND) -> None:
    with anyio.fail_after(seconds):
        while not check():
            await anyio.sleep(0.02)


def node(node_id: str, partition: str) -> si.NodeInfo:
    return si.NodeInfo(
        node_id=node_id,
        action=si.ActionFromRM.CREATE,
        attributes={si.NODE_PARTITION: partition},
        schedulable_resource=si.Resource.of(memory=100, vcore=10),
    )


def _partition(name: str) -> str:
    return QUEUES.replace("name: default", f"name: {name}", 1)


async def _rm_state(core: scheduler.Core, rm_id: str) -> str:
    for rm in await core.get_resource_managers():
        if rm["rmID"] == rm_id:
            return str(rm["state"])
    return ""


async def meanwhile_another_rm_works(address: str) -> None:
    """An RM of its own partition registers, adds a node and settles, within the bound."""
    with anyio.fail_after(BOUND):
        async with connect(address) as core:
            s = Scenario(core, ManualClock(), rm_id="healthy")
            await s.register(_partition("healthy"))
            await s.add_nodes(node("h1", "healthy"))
            await core.settle()
            assert s.rm.accepted_nodes == ["h1"]


# ======================================================================== native
@asynccontextmanager
async def native(**limits: float) -> AsyncIterator[tuple[NativeServer, str, int]]:
    async with scheduler.start_scheduler() as core:
        server = NativeServer(core, limits=Limits(**{**FAST, **limits}))  # type: ignore[arg-type]
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        port = listener.extra(SocketAttribute.local_port)
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(server.serve, listener)
            yield server, f"tcp://127.0.0.1:{port}", port
            tg.cancel_scope.cancel()


class Raw:
    """A peer on a bare socket: it sends what the test says and reads only when told."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.loop = asyncio.get_running_loop()
        self.pending = b""

    @classmethod
    @asynccontextmanager
    async def connect(cls, port: int, *, receive_buffer: int = 0) -> AsyncIterator[Raw]:
        sock = socket.socket()
        sock.setblocking(False)
        if receive_buffer:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        try:
            with anyio.fail_after(BOUND):
                await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
            yield cls(sock)
        finally:
            sock.close()

    async def send(self, message: Any) -> None:
        with anyio.fail_after(BOUND):
            await self.loop.sock_sendall(self.sock, encode(message))

    async def frame(self) -> Any:
        """The next frame, or None when the daemon closed the connection."""
        with anyio.fail_after(BOUND):
            while True:
                if len(self.pending) >= 4:
                    size = int.from_bytes(self.pending[:4], "big")
                    if len(self.pending) >= 4 + size:
                        body, self.pending = self.pending[4 : 4 + size], self.pending[4 + size :]
                        return decode_from_daemon(body)
                try:
                    data = await self.loop.sock_recv(self.sock, 65536)
                except ConnectionResetError:
                    return None
                if not data:
                    return None
                self.pending += data

    async def hello_and_register(self, rm_id: str) -> None:
        await self.send(Hello())
        assert type(await self.frame()).__name__ == "Welcome"
        request = si.RegisterResourceManagerRequest(
            rm_id=rm_id, policy_group="queues", version="1", config=_partition(rm_id)
        )
        await self.send(RegisterCall(id=1, request=request))
        result = await self.frame()
        assert result.id == 1 and not result.error, result


@pytest.mark.asyncio
async def test_a_connection_that_never_says_hello_is_closed(logs: list[Any]) -> None:
    async with native() as (_, address, port), Raw.connect(port) as raw:
        await meanwhile_another_rm_works(address)
        goodbye = await raw.frame()
        assert goodbye.message == "no hello within 0.3s (the daemon's --hello-timeout)"
        assert await raw.frame() is None  # then the connection ends
        (record,) = said(logs, "no hello within")
        assert record["extra"]["peer"].startswith("127.0.0.1:")


@pytest.mark.asyncio
async def test_a_silent_rm_is_pinged_then_cut_off_and_paused(logs: list[Any]) -> None:
    """Its host vanished (no FIN): it reads nothing, says nothing. The daemon pings it,
    then, nothing heard for --idle-timeout, closes its connection; the RM is Paused."""
    async with native() as (server, address, port), Raw.connect(port) as raw:
        await raw.hello_and_register("silent")
        await meanwhile_another_rm_works(address)
        await eventually(lambda: said(logs, "--idle-timeout"))
        (record,) = said(logs, "--idle-timeout")
        assert "nothing heard from the RM for" in record["message"]
        assert record["extra"]["rm_id"] == "silent"
        assert record["extra"]["peer"].startswith("127.0.0.1:")
        await eventually(lambda: len(server.sessions) == 0)
        assert await _rm_state(server.core, "silent") == "Paused"
        frames = [await raw.frame() for _ in range(4)]  # what it would have read
        kinds = [type(f).__name__ for f in frames if f is not None]
        assert kinds[0] == "Ping" and kinds[-1] == "Goodbye", kinds


@pytest.mark.asyncio
async def test_a_client_answers_pings_and_stays_connected(logs: list[Any]) -> None:
    """An idle RM on scheduler.client: the daemon's pings are answered, so it stays."""
    async with native(idle_timeout=0.3) as (_, address, _):
        with anyio.fail_after(BOUND):
            async with connect(address) as core:
                s = Scenario(core, ManualClock(), rm_id="idle")
                await s.register(_partition("idle"))
                await anyio.sleep(1.5)  # five idle timeouts of silence from the RM
                await s.add_nodes(node("i1", "idle"))
                await core.settle()
                assert s.rm.accepted_nodes == ["i1"]
        assert not said(logs, "--idle-timeout")


@pytest.mark.asyncio
async def test_an_rm_that_stops_reading_is_cut_off_after_the_write_timeout(
    logs: list[Any],
) -> None:
    """Its TCP window stays full: the send that waits for it ends the session."""
    async with (
        native(idle_timeout=60) as (server, address, port),
        Raw.connect(port, receive_buffer=4096) as raw,
    ):
        await raw.hello_and_register("stuck")
        (session,) = server.sessions
        sock = session.stream.extra(SocketAttribute.raw_socket)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        nodes = [node(f"{i:04}" + "x" * 1000, "stuck") for i in range(50)]
        await raw.send(NodeCall(id=2, request=si.NodeRequest(rm_id="stuck", nodes=nodes)))
        for i in range(20):  # state dumps of ~50 kB each, none read
            await raw.send(QueryCall(id=3 + i, method="state_dump"))
        await meanwhile_another_rm_works(address)
        await eventually(lambda: said(logs, "--write-timeout"))
        (record,) = said(logs, "--write-timeout")
        assert "the RM took nothing of a send for" in record["message"]
        assert record["extra"]["rm_id"] == "stuck"
        await eventually(lambda: len(server.sessions) == 0)
        assert await _rm_state(server.core, "stuck") == "Paused"


@pytest.mark.asyncio
async def test_tcp_keepalive_is_on_for_accepted_connections() -> None:
    async with native() as (server, address, _):
        with anyio.fail_after(BOUND):
            async with connect(address):
                (session,) = server.sessions
                sock = session.stream.extra(SocketAttribute.raw_socket)
                assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
                if hasattr(socket, "TCP_KEEPINTVL"):
                    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == 1


# ========================================================================== gRPC
@asynccontextmanager
async def grpc_daemon(**limits: float) -> AsyncIterator[tuple[GrpcServer, str]]:
    async with scheduler.start_scheduler() as core:
        native_server = NativeServer(core, limits=Limits(**{**FAST, **limits}))  # type: ignore[arg-type]
        server = GrpcServer(native_server)
        address = await server.start("127.0.0.1:0")
        try:
            yield server, address.removeprefix("grpc://")
        finally:
            await server.shut_down("the test is over", 1.0)


@pytest.mark.asyncio
async def test_a_grpc_session_stream_without_hello_is_aborted(logs: list[Any]) -> None:
    async with grpc_daemon() as (_, target), grpc.aio.insecure_channel(target) as channel:
        call: Any = channel.stream_stream(
            "/si.v1.SchedulerExtensions/Session",
            request_serializer=pb.FromRM.SerializeToString,
            response_deserializer=pb.FromDaemon.FromString,
        )(None)
        with anyio.fail_after(BOUND), suppress(grpc.aio.AioRpcError):
            await call.read()
        assert await call.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert await call.details() == "no hello within 0.3s (the daemon's --hello-timeout)"
        (record,) = said(logs, "--hello-timeout")
        assert record["extra"]["peer"].startswith("ipv4:127.0.0.1:")


@pytest.mark.asyncio
async def test_a_grpc_rm_that_stops_reading_is_cut_off(logs: list[Any]) -> None:
    """A plain SI client that writes node requests and reads none of the responses: its
    HTTP/2 window fills, the write that waits ends its session, the RM is Paused."""
    async with grpc_daemon() as (server, target), grpc.aio.insecure_channel(target) as channel:
        register = channel.unary_unary(
            "/si.v1.Scheduler/RegisterResourceManager",
            request_serializer=pb.RegisterResourceManagerRequest.SerializeToString,
            response_deserializer=pb.RegisterResourceManagerResponse.FromString,
        )
        with anyio.fail_after(BOUND):
            await register(
                pb.RegisterResourceManagerRequest(rm_id="deaf", config=_partition("deaf"))
            )
        nodes: Any = channel.stream_stream(
            "/si.v1.Scheduler/UpdateNode",
            request_serializer=pb.NodeRequest.SerializeToString,
            response_deserializer=pb.NodeResponse.FromString,
        )(None)
        infos = [codec.to_proto(node(f"{i:04}" + "x" * 1000, "deaf")) for i in range(200)]
        with anyio.fail_after(BOUND), suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
            for _ in range(60):  # ~200 kB of response each (the nodes, then rejected)
                if said(logs, "--write-timeout"):
                    break
                await nodes.write(pb.NodeRequest(rm_id="deaf", nodes=infos))
                if _ == 2:  # its window is filling: another RM is not held up by it
                    await meanwhile_another_rm_works(f"grpc://{target}")
        await eventually(lambda: said(logs, "--write-timeout"))
        (record,) = said(logs, "--write-timeout")
        assert "the RM took nothing for 0.3s" in record["message"]
        assert record["extra"]["rm_id"] == "deaf"
        await eventually(lambda: not server.sessions)
        await eventually_state(server.core, "deaf", "Paused")
        nodes.cancel()


async def eventually_state(core: scheduler.Core, rm_id: str, state: str) -> None:
    with anyio.fail_after(BOUND):
        while await _rm_state(core, rm_id) != state:
            await anyio.sleep(0.02)


class FreezingProxy:
    """A TCP proxy that can stop passing bytes either way without closing anything: to
    the daemon, its peer's host vanished."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.frozen = anyio.Event()

    async def serve(self, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        task_status.started(listener.extra(SocketAttribute.local_port))
        async with listener:
            await listener.serve(self._handle)

    async def _handle(self, client: Any) -> None:
        upstream = await anyio.connect_tcp("127.0.0.1", self.upstream)
        async with client, upstream, anyio.create_task_group() as tg:
            tg.start_soon(self._pump, client, upstream)
            tg.start_soon(self._pump, upstream, client)

    async def _pump(self, source: Any, sink: Any) -> None:
        with suppress(anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            async for data in source:
                if self.frozen.is_set():
                    await anyio.sleep_forever()
                await sink.send(data)


@pytest.mark.asyncio
async def test_a_half_open_grpc_connection_dies_by_keepalive(logs: list[Any]) -> None:
    async with grpc_daemon() as (server, target), anyio.create_task_group() as tg:
        proxy = FreezingProxy(int(target.rsplit(":", 1)[1]))
        port = await tg.start(proxy.serve)
        with anyio.fail_after(BOUND):
            async with connect(f"grpc://127.0.0.1:{port}") as core:
                s = Scenario(core, ManualClock(), rm_id="vanished")
                await s.register(_partition("vanished"))
                proxy.frozen.set()
                await meanwhile_another_rm_works(f"grpc://{target}")
                await eventually_state(server.core, "vanished", "Paused")
        died = said(logs, "its connection died (the daemon's --idle-timeout)")
        assert [r["extra"]["rm_id"] for r in died if r["extra"]["rm_id"] == "vanished"]
        tg.cancel_scope.cancel()


# ========================================================================== REST
@asynccontextmanager
async def http_server(core: scheduler.Core) -> AsyncIterator[tuple[int, uvicorn.Server]]:
    """The REST API under uvicorn with the daemon's protocol, on a socket whose send
    buffer is small (so a client that does not read fills it soon)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    server = uvicorn.Server(
        uvicorn.Config(
            make_app(core),
            http=timed_protocol(0.3, 0.3),
            log_config=None,
            access_log=False,
            lifespan="off",
        )
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        try:
            yield sock.getsockname()[1], server
        finally:
            server.should_exit = True
    sock.close()


async def _closed_within_bound(raw: Raw, step: Callable[[], Awaitable[None]]) -> None:
    """Run ``step`` until the server closes the connection (it must, within the bound)."""
    with anyio.fail_after(BOUND):
        while True:
            try:
                await step()
            except (BrokenPipeError, ConnectionResetError):
                return
            readable = await _poll(raw.sock)
            if readable is not None and not readable:
                return


async def _poll(sock: socket.socket) -> bytes | None:
    try:
        return sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return None
    except ConnectionResetError:
        return b""


@pytest.mark.asyncio
async def test_a_slowloris_http_client_is_cut_off(logs: list[Any]) -> None:
    async with scheduler.start_scheduler() as core, http_server(core) as (port, _):
        async with Raw.connect(port) as raw:
            head = iter(b"GET /ws/v1/partitions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000)

            async def one_byte() -> None:
                await raw.loop.sock_sendall(raw.sock, bytes([next(head)]))
                await anyio.sleep(0.05)

            await _closed_within_bound(raw, one_byte)
        (record,) = said(logs, "--hello-timeout")
        assert "no request within 0.3s" in record["message"]
        assert record["extra"]["peer"].startswith("127.0.0.1:")


@pytest.mark.asyncio
async def test_an_http_client_that_reads_a_byte_a_second_is_cut_off(logs: list[Any]) -> None:
    async with scheduler.start_scheduler() as core, http_server(core) as (port, server):
        nodes = [node(f"{i:04}" + "x" * 1000, "big") for i in range(300)]
        rm = RecordingCallback()
        request = si.RegisterResourceManagerRequest(
            rm_id="big", policy_group="queues", version="1", config=_partition("big")
        )
        await core.register_resource_manager(request, rm)
        await core.update_node(si.NodeRequest(rm_id="big", nodes=nodes))
        await core.settle()
        async with Raw.connect(port, receive_buffer=4096) as raw:
            await raw.loop.sock_sendall(
                raw.sock, b"GET /ws/v1/fullstatedump HTTP/1.1\r\nHost: x\r\n\r\n"
            )
            got = 0
            other = RecordingCallback()  # an RM of the same core goes on meanwhile
            other_request = si.RegisterResourceManagerRequest(
                rm_id="other", policy_group="queues", version="1", config=_partition("other")
            )
            with anyio.fail_after(BOUND):
                await core.register_resource_manager(other_request, other)
                await core.update_node(si.NodeRequest(rm_id="other", nodes=[node("o1", "other")]))
                await core.settle()
            assert other.accepted_nodes == ["o1"]
            with anyio.fail_after(BOUND):  # a byte every 50 ms until the server lets go
                while not said(logs, "--write-timeout") or server.server_state.connections:
                    with suppress(BlockingIOError, ConnectionResetError):
                        got += len(raw.sock.recv(1))
                    await anyio.sleep(0.05)
            assert got < 1000  # what the server sent is dropped; its socket is gone
        (record,) = said(logs, "--write-timeout")
        assert "the client read nothing of the response for 0.3s" in record["message"]


# ============================================================== the daemon's options
@pytest.mark.asyncio
async def test_scheduler_serve_takes_the_timeouts(tmp_path: Path) -> None:
    """The options reach every listener: native and HTTP peers that never speak are cut off."""
    d = Daemon(
        tmp_path, "--hello-timeout", "0.3", "--idle-timeout", "0.6", "--write-timeout", "0.3"
    )
    try:
        port = int(d.native.rsplit(":", 1)[1])
        async with Raw.connect(port) as raw:
            goodbye = await raw.frame()
            assert "--hello-timeout" in goodbye.message
        http_port = int(d.http.rsplit(":", 1)[1])
        async with Raw.connect(http_port) as raw:
            with anyio.fail_after(BOUND):
                assert await raw.loop.sock_recv(raw.sock, 1) == b""
        await eventually(lambda: "no request within 0.3s" in d.logged())
    finally:
        assert d.stop() == 0, d.logged()
    assert "no hello within 0.3s" in d.logged()


@pytest.mark.parametrize("option", ["--hello-timeout", "--idle-timeout", "--write-timeout"])
@pytest.mark.parametrize("value", ["0", "-1", "nan", "100000", "soon"])
def test_a_bad_timeout_is_refused_naming_the_option(option: str, value: str) -> None:
    from typer.testing import CliRunner

    from scheduler.cli._app import app

    result = CliRunner().invoke(app, ["serve", option, value])
    assert result.exit_code == 2
    assert f"Invalid value for '{option}': " in result.output
    if value != "soon":  # not a number: click says so in its own words
        assert f"{option}': {value}: say seconds above 0, at most 86400" in result.output
