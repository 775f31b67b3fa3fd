"""The daemon's gRPC transport: the SI ``Scheduler`` service of the spec and the
``SchedulerExtensions`` service (``si.proto``), served with ``grpc.aio`` in the daemon's
event loop, on the same ``Core`` as the native transport and with the same rules.

A ``GrpcSession`` is one RM: the calls of a session (the spec's unary
``RegisterResourceManager``, the requests read from its three streams, and the
extension's unary calls) go into one queue and are run one at a time, in the order they
came, by the session's worker, as the native transport runs them. The RM's callback inside
the core is a stand-in that queues what it is given: responses on the matching Scheduler
stream, events, container scheduling states and (preemption) predicate questions on the
session stream.
Every session's outgoing queues together hold at most ``--max-backlog`` messages: an RM
that does not read fast enough is told goodbye and its streams end.

A session stream must say hello within ``--hello-timeout``, a write the RM does not take
within ``--write-timeout`` ends its session, and HTTP/2 keepalive pings find a connection
whose RM vanished (``_grpc_liveness``).

Sessions come from the extension's ``Session`` stream (the daemon's Welcome names the id
the RM then sends as ``x-scheduler-session`` metadata). A plain SI client that never opens
one still works: its calls are tied to a session named after the rmID they carry.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio
import msgspec
from loguru import logger

from scheduler._errors import SchedulerError
from scheduler.daemon._address import cannot_listen, host_port
from scheduler.daemon._grpc_liveness import grpc_options, hello_within, write_within
from scheduler.daemon._grpc_session import (
    _ALLOCATION,
    _APPLICATION,
    _NODE,
    _SESSION,
    ERROR_KEY,
    SESSION_KEY,
    TOKEN_KEY,
    GrpcSession,
    _CallError,
    _from_configuration,
    _from_register,
    refuse_newer_si,
)
from scheduler.daemon._native import Limits, run_query
from scheduler.daemon._outbox import Outboxes
from scheduler.si import si_pb2 as pb

if TYPE_CHECKING:
    from scheduler.core import Core
    from scheduler.daemon._native import NativeServer

__all__ = ["GrpcServer"]

_log = logger.bind(transport="grpc")
_JSON = msgspec.json.Encoder()


class GrpcServer:
    """Serves ``native``'s core, token, limits and configuration over gRPC (``start``);
    RMs registered here are added to ``native.rm_ids`` so a configuration reload reaches
    them too."""

    def __init__(self, native: NativeServer) -> None:
        self.native = native
        self.core: Core = native.core
        self.edge = native.edge  # the SI calls: the core, or a RecordingCore in front of it
        self.token = native.token
        self.limits: Limits = native.limits
        self.sessions: dict[str, GrpcSession] = {}
        # The outbox of each RM registered here with a session stream, while it may resume.
        self.outboxes: Outboxes[Any] = Outboxes()
        self._ids = itertools.count(1)
        self._closing = ""
        self._server: grpc.aio.Server | None = None
        # How long a chunk of a session's stream requests waits for more after its first
        # (0: it takes what has arrived by the next turn of the loop; see _batching).
        self.batch_window = 0.0

    async def start(
        self,
        address: str,
        *,
        tls: tuple[bytes, bytes] | None = None,
        client_ca: bytes | None = None,
    ) -> str:
        """Listen on ``host:port`` (port 0: a free one); returns ``grpc://host:port``, or
        with ``tls`` (a PEM certificate chain and its key) ``grpcs://host:port``; with
        ``client_ca`` too (PEM), a client must show a certificate that CA signed."""
        host, _ = host_port("--grpc", address, "127.0.0.1:9090")
        if ":" in host:
            host = f"[{host}]"
        size = self.limits.max_frame
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", size),
                ("grpc.max_send_message_length", -1),
                ("grpc.so_reuseport", 0),
                *grpc_options(self.limits.idle_timeout),
            ]
        )
        server.add_generic_rpc_handlers(self._handlers())
        try:
            if tls is None:
                port = server.add_insecure_port(address)
            else:
                cert_pem, key_pem = tls
                credentials = grpc.ssl_server_credentials(
                    [(key_pem, cert_pem)],
                    root_certificates=client_ca,
                    require_client_auth=client_ca is not None,
                )
                port = server.add_secure_port(address, credentials)
        except RuntimeError as exc:
            raise cannot_listen("--grpc", address, OSError(str(exc))) from None
        if port == 0:
            raise cannot_listen("--grpc", address, OSError("the address is in use or not local"))
        await server.start()
        self._server = server
        return f"{'grpc' if tls is None else 'grpcs'}://{host}:{port}"

    async def shut_down(self, reason: str, grace: float) -> None:
        """No more calls; those taken are answered; every RM hears goodbye with ``reason``;
        the server stops (within ``grace`` seconds)."""
        self._closing = reason
        sessions = list(self.sessions.values())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await asyncio.gather(*(s.finish(reason) for s in sessions))
        if self._server is not None:
            await self._server.stop(grace)

    # ===================================================================== handlers
    def _handlers(self) -> tuple[grpc.GenericRpcHandler[Any, Any], ...]:
        def unary(fn: Any, req: Any, resp: Any) -> grpc.RpcMethodHandler[Any, Any]:
            return grpc.unary_unary_rpc_method_handler(
                fn, request_deserializer=req.FromString, response_serializer=resp.SerializeToString
            )

        def stream(fn: Any, req: Any, resp: Any) -> grpc.RpcMethodHandler[Any, Any]:
            return grpc.stream_stream_rpc_method_handler(
                fn, request_deserializer=req.FromString, response_serializer=resp.SerializeToString
            )

        scheduler = grpc.method_handlers_generic_handler(
            "si.v1.Scheduler",
            {
                "RegisterResourceManager": unary(
                    self._register,
                    pb.RegisterResourceManagerRequest,
                    pb.RegisterResourceManagerResponse,
                ),
                "UpdateAllocation": stream(
                    self._update_allocation, pb.AllocationRequest, pb.AllocationResponse
                ),
                "UpdateApplication": stream(
                    self._update_application, pb.ApplicationRequest, pb.ApplicationResponse
                ),
                "UpdateNode": stream(self._update_node, pb.NodeRequest, pb.NodeResponse),
            },
        )
        extensions = grpc.method_handlers_generic_handler(
            "si.v1.SchedulerExtensions",
            {
                "Session": stream(self._session, pb.FromRM, pb.FromDaemon),
                "UpdateConfiguration": unary(
                    self._update_configuration, pb.UpdateConfigurationRequest, pb.Empty
                ),
                "Settle": unary(self._settle, pb.Empty, pb.SettleResponse),
                "Query": unary(self._query, pb.QueryRequest, pb.QueryResponse),
            },
        )
        return (scheduler, extensions)

    async def _check(self, context: grpc.aio.ServicerContext[Any, Any]) -> dict[str, str]:
        metadata = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
        if self.token and metadata.get(TOKEN_KEY) != self.token:
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED, "authentication failed: wrong or missing token"
            )
        if self._closing:
            await context.abort(grpc.StatusCode.UNAVAILABLE, self._closing)
        return metadata

    async def _find(
        self, context: grpc.aio.ServicerContext[Any, Any], metadata: dict[str, str], rm_id: str
    ) -> GrpcSession:
        """The session of a call: the one its metadata names, else the plain client's of
        ``rm_id`` (made if need be)."""
        name = metadata.get(SESSION_KEY, "")
        if name:
            session = self.sessions.get(name)
            if session is None or session.closing:
                await context.abort(grpc.StatusCode.NOT_FOUND, f"no session {name!r}")
            assert session is not None
            return session
        name = f"rm:{rm_id}"
        session = self.sessions.get(name)
        if session is None or session.closing:
            session = self.sessions[name] = GrpcSession(self, name, context.peer(), plain=True)
        return session

    async def _unary(
        self,
        context: grpc.aio.ServicerContext[Any, Any],
        rm_id: str,
        run: Callable[[GrpcSession], Awaitable[Any]],
    ) -> Any:
        metadata = await self._check(context)
        session = await self._find(context, metadata, rm_id)
        try:
            return await session.call(lambda: run(session), metadata)
        except _CallError as exc:
            await context.abort(exc.code, exc.message, trailing_metadata=((ERROR_KEY, exc.kind),))

    async def _register(
        self,
        request: pb.RegisterResourceManagerRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> pb.RegisterResourceManagerResponse:
        async def run(session: GrpcSession) -> pb.RegisterResourceManagerResponse:
            await session.register(_from_register(request), context)
            return pb.RegisterResourceManagerResponse()

        result: pb.RegisterResourceManagerResponse = await self._unary(context, request.rm_id, run)
        return result

    async def _update_configuration(
        self, request: pb.UpdateConfigurationRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.Empty:
        async def run(session: GrpcSession) -> pb.Empty:
            await self.edge.update_configuration(_from_configuration(request))
            return pb.Empty()

        result: pb.Empty = await self._unary(context, request.rm_id, run)
        return result

    async def _settle(
        self, request: pb.Empty, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.SettleResponse:
        async def run(session: GrpcSession) -> pb.SettleResponse:
            await self.core.settle()
            return pb.SettleResponse(pushed=session.pushed)

        result: pb.SettleResponse = await self._unary(context, "", run)
        return result

    async def _query(
        self, request: pb.QueryRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.QueryResponse:
        method, args = request.method, list(request.args)

        async def run(session: GrpcSession) -> pb.QueryResponse:
            if method == "settle":  # the extension has a call of its own for it
                raise SchedulerError(f"unknown query {method!r}")
            if method == "stop_resource_manager" and len(args) == 1:
                await session.stop(args[0])
                return pb.QueryResponse(json="null")
            value = await run_query(self.core, method, args)
            return pb.QueryResponse(json=_JSON.encode(value).decode())

        result: pb.QueryResponse = await self._unary(context, "", run)
        return result

    # ====================================================================== streams
    async def _update_allocation(
        self,
        requests: AsyncIterator[pb.AllocationRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        await self._stream(requests, context, _ALLOCATION)

    async def _update_application(
        self,
        requests: AsyncIterator[pb.ApplicationRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        await self._stream(requests, context, _APPLICATION)

    async def _update_node(
        self, requests: AsyncIterator[pb.NodeRequest], context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        await self._stream(requests, context, _NODE)

    async def _stream(
        self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any], kind: int
    ) -> None:
        """One of the Scheduler streams: requests in (each acknowledged on the session
        stream), the core's responses of that kind out."""
        metadata = await self._check(context)
        first: Any = None
        if SESSION_KEY not in metadata:  # a plain client: its first request names its RM
            first = await anext(aiter(requests), None)
            if first is None:
                return
        session = await self._find(context, metadata, "" if first is None else first.rm_id)
        queue = session.open_stream(kind)
        session.streams += 1
        seq = itertools.count(1)
        refused: list[str] = []

        def take(request: Any) -> bool:
            if session.plain and kind != _APPLICATION:
                # A plain client hears no acks: a request of a newer SI ends its stream
                # with the reason, rather than lose what protobuf could not read.
                try:
                    refuse_newer_si(request)
                except SchedulerError as exc:
                    refused.append(str(exc))
                    queue.put_nowait(None)
                    return False
            session.take_request(kind, next(seq), request)
            return True

        async def read() -> None:
            if first is not None and not take(first):
                return
            async for request in requests:
                if not take(request):
                    return

        reader = asyncio.create_task(read())
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                session.backlog -= 1
                await write_within(context, item, session)
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            session.stream_ended()
        if refused:
            session.log.warning("a request of {} refused: {}", session.rm_id, refused[0])
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, refused[0])

    async def _session(
        self, requests: AsyncIterator[pb.FromRM], context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        """The extension's session stream: Hello / Welcome, acks, callbacks, goodbye."""
        # The hello is read before the token is checked: refused at once, the RM's write of
        # its hello could meet the closed call, and the RM would read gRPC's generic
        # INTERNAL instead of UNAUTHENTICATED.
        hello = await hello_within(requests, context, self.limits.hello_timeout)
        await self._check(context)
        if hello is None or hello.WhichOneof("kind") != "hello":
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, "the first message must be a hello"
            )
        name = f"s{next(self._ids)}-{secrets.token_hex(8)}"
        session = self.sessions[name] = GrpcSession(self, name, context.peer(), plain=False)
        queue = session.open_stream(_SESSION)
        welcome = pb.Welcome(session=name)
        if hello.hello.HasField("resume"):
            welcome.not_resumed = session.resume(hello.hello.resume)
            welcome.resumed = not welcome.not_resumed
        await context.write(pb.FromDaemon(welcome=welcome))

        async def read() -> None:
            async for message in requests:
                kind = message.WhichOneof("kind")
                if kind == "received":
                    session.received(message.received)
                elif kind == "predicates_answer":
                    session.answer(message.predicates_answer)
                elif kind == "preemption_predicates_answer":
                    session.answer_preemption(message.preemption_predicates_answer)
            session.gone()  # the RM closed its side, or keepalive found its connection dead

        reader = asyncio.create_task(read())
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                session.backlog -= 1
                await write_within(context, item, session)
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            session.gone()
