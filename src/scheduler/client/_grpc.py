"""``scheduler.client.connect("grpc://host:port")``: the core of a daemon over gRPC, with
the methods of the in-process core (those of ``scheduler.client.RemoteCore``).

The client opens the extension's session stream (Hello, then the daemon's Welcome names
the session), then the three ``Scheduler`` streams, all with the session id as metadata.
``update_allocation`` / ``update_application`` / ``update_node`` write their request on
their stream and wait for its Ack on the session stream (so errors come back as
in-process); ``register_resource_manager`` is the spec's unary call, and the rest are the
extension's (``update_configuration``, ``settle``, the queries). The RM's callbacks are
called one at a time, from a task of the connection, in the order they arrived; order is
kept within a stream (allocation responses among themselves, ...), not across streams.
``settle()`` returns once the daemon settled, every message it sent before is read, and
every callback it caused has run here (and what those sent has settled in turn).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import grpc
import grpc.aio
import msgspec
from loguru import logger

from scheduler import si
from scheduler._errors import SchedulerError
from scheduler.client._native import (
    RemoteCore,
    answer_preemption,
    expect,
    is_remote_error,
    overridden,
    remote_error,
)
from scheduler.daemon._grpc import CALLBACKS_KEY, ERROR_KEY, SESSION_KEY, TOKEN_KEY
from scheduler.daemon._tls import TLSArg, read_ca
from scheduler.si import si_pb2 as pb
from scheduler.si._callback import ResourceManagerCallback, check_callback, refuse_preemption
from scheduler.si._grpc_codec import from_proto_of, to_proto_of
from scheduler.si._wire import MAX_FRAME

__all__ = ["GrpcRemoteCore", "connect_grpc"]

_log = logger.bind(transport="grpc")
_STREAMS = (
    (pb.Ack.ALLOCATION, "UpdateAllocation", pb.AllocationRequest, pb.AllocationResponse),
    (pb.Ack.APPLICATION, "UpdateApplication", pb.ApplicationRequest, pb.ApplicationResponse),
    (pb.Ack.NODE, "UpdateNode", pb.NodeRequest, pb.NodeResponse),
)
_to = {
    cls: to_proto_of(cls)
    for cls in (
        si.RegisterResourceManagerRequest,
        si.AllocationRequest,
        si.ApplicationRequest,
        si.NodeRequest,
        si.UpdateConfigurationRequest,
    )
}
_from_allocation = from_proto_of(si.AllocationResponse)
_from_application = from_proto_of(si.ApplicationResponse)
_from_node = from_proto_of(si.NodeResponse)
_from_event = from_proto_of(si.EventRecord)
_from_state = from_proto_of(si.UpdateContainerSchedulingStateRequest)
_from_predicates = from_proto_of(si.PredicatesArgs)
_from_preemption = from_proto_of(si.PreemptionPredicatesArgs)
_to_preemption = to_proto_of(si.PreemptionPredicatesResponse)


@contextlib.asynccontextmanager
async def connect_grpc(
    target: str,
    *,
    token: str = "",
    max_frame: int = MAX_FRAME,
    timeout: float = 30.0,
    tls: TLSArg = None,
) -> AsyncIterator[GrpcRemoteCore]:
    """Connect to a daemon's ``--grpc`` address ``grpc://host:port`` (``grpcs://`` with
    TLS, trusting the CA file ``tls`` or the system's trust store); leaving the block
    closes the connection. Raises as ``scheduler.client.connect`` does."""
    parts = urlsplit(target)
    if parts.scheme not in ("grpc", "grpcs") or not parts.hostname or parts.port is None:
        raise SchedulerError(f"target {target!r}: say grpc://host:port (or grpcs://)")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    options = [
        ("grpc.max_receive_message_length", max_frame),
        ("grpc.max_send_message_length", -1),
    ]
    if parts.scheme == "grpcs":
        credentials = grpc.ssl_channel_credentials(root_certificates=read_ca(tls, target))
        channel = grpc.aio.secure_channel(f"{host}:{parts.port}", credentials, options=options)
    elif tls is not None:
        raise SchedulerError(f"target {target!r}: tls= is for grpcs:// targets")
    else:
        channel = grpc.aio.insecure_channel(f"{host}:{parts.port}", options=options)
    remote = GrpcRemoteCore(channel, target, token)
    try:
        await remote._open(timeout)
        yield remote
    finally:
        await remote.aclose()


_EOF: Any = vars(grpc.aio)["EOF"]  # the end of a stream's read() (not in grpc-stubs)
_Kind = Any  # pb.Ack.Stream, an int


class GrpcRemoteCore(RemoteCore):
    """The core of a daemon, seen from an RM over gRPC: the methods of the in-process core.

    A ``RemoteCore`` for type checkers (it is used where one is); every method is its own.
    """

    def __init__(  # the native RemoteCore's __init__ is not called: nothing of it is used
        self, channel: grpc.aio.Channel, target: str, token: str
    ) -> None:
        self._channel = channel
        self.target = target
        self._token = token
        self._metadata: list[tuple[str, str]] = [(TOKEN_KEY, token)] if token else []
        self._callback: ResourceManagerCallback | None = None
        self._arrivals: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._received = 0  # messages of the daemon counted by its Settle
        self._arrived = asyncio.Event()
        self._acks: dict[tuple[_Kind, int], asyncio.Future[pb.Ack]] = {}
        self._seqs: dict[_Kind, itertools.count[int]] = {
            k: itertools.count(1) for k, *_ in _STREAMS
        }
        self._locks: dict[_Kind, asyncio.Lock] = {k: asyncio.Lock() for k, *_ in _STREAMS}
        self._stream_calls: dict[_Kind, Any] = {}
        self._session: Any = None
        self._sent = 0  # requests that change state, sent so far (settle counts them)
        self._closed = ""
        self._tasks = []
        self._register = channel.unary_unary(
            "/si.v1.Scheduler/RegisterResourceManager",
            request_serializer=pb.RegisterResourceManagerRequest.SerializeToString,
            response_deserializer=pb.RegisterResourceManagerResponse.FromString,
        )
        self._update_configuration = channel.unary_unary(
            "/si.v1.SchedulerExtensions/UpdateConfiguration",
            request_serializer=pb.UpdateConfigurationRequest.SerializeToString,
            response_deserializer=pb.Empty.FromString,
        )
        self._settle = channel.unary_unary(
            "/si.v1.SchedulerExtensions/Settle",
            request_serializer=pb.Empty.SerializeToString,
            response_deserializer=pb.SettleResponse.FromString,
        )
        self._query_call = channel.unary_unary(
            "/si.v1.SchedulerExtensions/Query",
            request_serializer=pb.QueryRequest.SerializeToString,
            response_deserializer=pb.QueryResponse.FromString,
        )

    def __repr__(self) -> str:
        state = f"closed: {self._closed}" if self._closed else "open"
        return f"<GrpcRemoteCore {self.target} {state}>"

    # ========================================================================== SI calls
    async def register_resource_manager(
        self, request: si.RegisterResourceManagerRequest, callback: ResourceManagerCallback
    ) -> si.RegisterResourceManagerResponse:
        """As the in-process core's: the callback is called here, the core is there."""
        check_callback(callback)
        expect(request, si.RegisterResourceManagerRequest)
        own = overridden(callback)
        self._callback = callback
        metadata = [*self._metadata, (CALLBACKS_KEY, ",".join(own))]
        await self._unary(self._register, _to[si.RegisterResourceManagerRequest](request), metadata)
        return si.RegisterResourceManagerResponse()

    async def update_node(self, request: si.NodeRequest) -> None:
        expect(request, si.NodeRequest)
        await self._stream_call(pb.Ack.NODE, _to[si.NodeRequest](request))

    async def update_application(self, request: si.ApplicationRequest) -> None:
        expect(request, si.ApplicationRequest)
        await self._stream_call(pb.Ack.APPLICATION, _to[si.ApplicationRequest](request))

    async def update_allocation(self, request: si.AllocationRequest) -> None:
        expect(request, si.AllocationRequest)
        await self._stream_call(pb.Ack.ALLOCATION, _to[si.AllocationRequest](request))

    async def update_configuration(self, request: si.UpdateConfigurationRequest) -> None:
        expect(request, si.UpdateConfigurationRequest)
        self._sent += 1
        message = _to[si.UpdateConfigurationRequest](request)
        await self._unary(self._update_configuration, message, self._metadata)

    async def settle(self) -> None:
        """Return once the daemon settled and every callback it caused ran here; what those
        callbacks sent is settled too."""
        while True:
            before = self._sent
            response: pb.SettleResponse = await self._unary(
                self._settle, pb.Empty(), self._metadata
            )
            while self._received < response.pushed:
                if self._closed:
                    raise ConnectionError(f"{self.target}: {self._closed}")
                self._arrived.clear()
                await self._arrived.wait()
            await self._arrivals.join()
            if self._sent == before:
                return

    # =========================================================================== queries
    # The query methods and their argument check are RemoteCore's; only the sending differs.
    async def _send_query(self, method: str, args: list[str]) -> Any:
        request = pb.QueryRequest(method=method, args=args)
        response: pb.QueryResponse = await self._unary(self._query_call, request, self._metadata)
        return msgspec.json.decode(response.json)

    # ====================================================================== plumbing
    async def _unary(self, method: Any, request: Any, metadata: list[tuple[str, str]]) -> Any:
        if self._closed:
            raise ConnectionError(f"{self.target}: {self._closed}")
        try:
            return await method(request, metadata=metadata)
        except grpc.aio.AioRpcError as exc:
            raise self._error(exc) from None

    def _error(self, exc: grpc.aio.AioRpcError) -> Exception:
        code = exc.code()
        details = exc.details() or ""
        if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND):
            trailing: Any = exc.trailing_metadata() or ()
            for key, value in trailing:
                if key == ERROR_KEY and is_remote_error(value):
                    return remote_error(str(value), details)
        if code == grpc.StatusCode.INTERNAL:
            return SchedulerError(details)
        if self._closed:
            return ConnectionError(f"{self.target}: {self._closed}")
        return ConnectionError(f"{self.target}: {details or code.name}")

    async def _stream_call(self, kind: _Kind, message: Any) -> None:
        if self._closed:
            raise ConnectionError(f"{self.target}: {self._closed}")
        self._sent += 1
        future: asyncio.Future[pb.Ack] = asyncio.get_running_loop().create_future()
        async with self._locks[kind]:
            key = (kind, next(self._seqs[kind]))
            self._acks[key] = future
            try:
                await self._stream_calls[kind].write(message)
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as exc:
                self._acks.pop(key, None)
                self._fail(f"the connection broke while sending ({exc})")
                raise ConnectionError(f"{self.target}: {self._closed}") from None
        try:
            ack = await future
        finally:
            self._acks.pop(key, None)
        if ack.error:
            raise remote_error(ack.error, ack.message)

    async def _open(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        session = self._channel.stream_stream(
            "/si.v1.SchedulerExtensions/Session",
            request_serializer=pb.FromRM.SerializeToString,
            response_deserializer=pb.FromDaemon.FromString,
        )(None, metadata=self._metadata)
        self._session = session
        try:
            async with asyncio.timeout(timeout):
                await session.write(pb.FromRM(hello=pb.Hello(client="scheduler.client")))
                welcome: Any = await session.read()
        except TimeoutError:
            session.cancel()
            raise ConnectionError(f"{self.target}: no welcome within {timeout:g}s") from None
        except grpc.aio.AioRpcError as exc:
            # A hello written while the daemon refuses the call (a wrong token, say) fails
            # with gRPC's own INTERNAL; the call's final status says why.
            status, details = exc.code(), exc.details()
            if status == grpc.StatusCode.INTERNAL:
                with contextlib.suppress(Exception):
                    status, details = await session.code(), await session.details()
            raise ConnectionError(f"{self.target}: {details or status.name}") from None
        if welcome is _EOF or welcome.WhichOneof("kind") != "welcome":
            status = await session.code()
            details = await session.details()
            raise ConnectionError(f"{self.target}: {details or status.name}")
        name = welcome.welcome.session
        self._metadata = [*self._metadata, (SESSION_KEY, name)]
        self._tasks.append(loop.create_task(self._read_session(), name=f"grpc session {name}"))
        for kind, method, request, response in _STREAMS:
            call = self._channel.stream_stream(
                f"/si.v1.Scheduler/{method}",
                request_serializer=request.SerializeToString,
                response_deserializer=response.FromString,
            )(None, metadata=self._metadata)
            self._stream_calls[kind] = call
            self._tasks.append(loop.create_task(self._read_stream(kind, call), name=method))
        self._tasks.append(loop.create_task(self._call_back(), name=f"grpc callbacks {name}"))

    def _arrive(self, kind: str, message: Any) -> None:
        self._received += 1
        self._arrivals.put_nowait((kind, message))
        self._arrived.set()

    async def _read_stream(self, kind: _Kind, call: Any) -> None:
        name = {pb.Ack.ALLOCATION: "allocation", pb.Ack.APPLICATION: "application"}.get(
            kind, "node"
        )
        try:
            async for message in call:
                self._arrive(name, message)
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                hint = (
                    " (the daemon's --max-frame)"
                    if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                    else ""
                )
                self._fail(f"the connection broke: {exc.details() or exc.code().name}{hint}")

    async def _read_session(self) -> None:
        reason = "the daemon closed the connection"
        try:
            while True:  # read(), as for the welcome: the two styles do not mix
                message = await self._session.read()
                if message is _EOF:
                    return
                which = message.WhichOneof("kind")
                if which == "ack":
                    ack = message.ack
                    future = self._acks.get((ack.stream, ack.seq))
                    if future is not None and not future.done():
                        future.set_result(ack)
                elif which == "goodbye":
                    reason = f"the daemon closed the connection: {message.goodbye.message}"
                    return
                elif which in ("predicates", "preemption_predicates", "events", "scheduling_state"):
                    self._arrive(which, getattr(message, which))
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                reason = f"the connection broke: {exc.details() or exc.code().name}"
        finally:
            self._fail(reason)

    def _fail(self, reason: str) -> None:
        if self._closed:
            return
        self._closed = reason
        error = ConnectionError(f"{self.target}: {reason}")
        for future in self._acks.values():
            if not future.done():
                future.set_exception(error)
        self._arrived.set()

    async def _call_back(self) -> None:
        """The RM's callbacks, one at a time, in the order they arrived."""
        while True:
            kind, message = await self._arrivals.get()
            try:
                await self._deliver_one(kind, message)
            except Exception:
                _log.exception("the RM's callback raised on {}", kind)
            finally:
                self._arrivals.task_done()

    async def _deliver_one(self, kind: str, message: Any) -> None:
        callback = self._callback
        if callback is None:
            return
        if kind == "allocation":
            await callback.update_allocation(_from_allocation(message))
        elif kind == "application":
            await callback.update_application(_from_application(message))
        elif kind == "node":
            await callback.update_node(_from_node(message))
        elif kind == "events":
            await callback.send_event([_from_event(e) for e in message.events])
        elif kind == "scheduling_state":
            await callback.update_container_scheduling_state(_from_state(message))
        elif kind == "predicates":
            allowed = False
            try:
                allowed = bool(await callback.predicates(_from_predicates(message.args)))
            finally:
                if not self._closed:
                    answer = pb.PredicatesAnswer(id=message.id, allowed=allowed)
                    with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                        await self._session.write(pb.FromRM(predicates_answer=answer))
        elif kind == "preemption_predicates":
            response = refuse_preemption()
            try:
                response = await answer_preemption(callback, _from_preemption(message.args))
            finally:
                if not self._closed:
                    reply = pb.PreemptionPredicatesAnswer(
                        id=message.id, response=_to_preemption(response)
                    )
                    with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                        await self._session.write(pb.FromRM(preemption_predicates_answer=reply))

    async def aclose(self) -> None:
        """Close the connection (``connect`` does it on leaving its block)."""
        self._fail("the connection is closed")
        for call in [self._session, *self._stream_calls.values()]:
            if call is not None:
                call.cancel()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._channel.close(None)
