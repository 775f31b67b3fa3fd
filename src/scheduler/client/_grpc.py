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
    port_of,
    remote_error,
)
from scheduler.client._reconnect import Reconnect, Recover
from scheduler.daemon._grpc_session import (
    BASE_KEY,
    CALLBACKS_KEY,
    ERROR_KEY,
    KINDS,
    RESUME_KEY,
    SESSION_KEY,
    TOKEN_KEY,
    received_message,
)
from scheduler.daemon._tls import TLSArg, read_ca
from scheduler.si import si_pb2 as pb
from scheduler.si._callback import (
    ClosedKind,
    ConnectionClosed,
    ResourceManagerCallback,
    check_callback,
    refuse_preemption,
)
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
    reconnect: Reconnect | None = None,
    recover: Recover | None = None,
    idle_timeout: float = 60.0,
) -> AsyncIterator[GrpcRemoteCore]:
    """Connect to a daemon's ``--grpc`` address ``grpc://host:port`` (``grpcs://`` with
    TLS, trusting the CA file ``tls`` or the system's trust store); leaving the block
    closes the connection. Raises as ``scheduler.client.connect`` does."""
    parts = urlsplit(target)
    if parts.scheme not in ("grpc", "grpcs"):
        raise SchedulerError(f"target {target!r}: say grpc://host:port (or grpcs://)")
    port = port_of(parts, target, "grpc://host:port (or grpcs://)")
    if parts.scheme == "grpc" and tls is not None:
        raise SchedulerError(f"target {target!r}: tls= is for grpcs:// targets")
    credentials = (
        grpc.ssl_channel_credentials(root_certificates=read_ca(tls, target))
        if parts.scheme == "grpcs"
        else None
    )
    hostname = parts.hostname or ""
    host = f"[{hostname}]" if ":" in hostname else hostname
    remote = GrpcRemoteCore(
        target,
        f"{host}:{port}",
        token=token,
        max_frame=max_frame,
        timeout=timeout,
        credentials=credentials,
        reconnect=reconnect,
        recover=recover,
        idle_timeout=idle_timeout,
    )
    try:
        await remote._start()
        yield remote
    finally:
        await remote.aclose()


_SESSION_STREAM = 0  # what the session stream counts for in a Received (KINDS)
_EOF: Any = vars(grpc.aio)["EOF"]  # the end of a stream's read() (not in grpc-stubs)
_Kind = Any  # pb.Ack.Stream, an int


class GrpcRemoteCore(RemoteCore):
    """The core of a daemon, seen from an RM over gRPC: the methods of the in-process core.

    A ``RemoteCore`` (its queries, its closed state and reconnection are shared); the calls
    and the connection are its own.
    """

    def __init__(
        self,
        target: str,
        address: str,
        *,
        token: str,
        max_frame: int,
        timeout: float,
        credentials: grpc.ChannelCredentials | None,
        reconnect: Reconnect | None,
        recover: Recover | None,
        idle_timeout: float,
    ) -> None:
        super().__init__(
            target,
            token=token,
            timeout=timeout,
            reconnect=reconnect,
            recover=recover,
            idle_timeout=idle_timeout,
        )
        self._address = address
        self._credentials = credentials
        ping = max(1, int(idle_timeout * 1000 / 2))
        self._options = [
            ("grpc.max_receive_message_length", max_frame),
            ("grpc.max_send_message_length", -1),
            # a daemon silent for half of idle_timeout is pinged (no more often than a
            # daemon of the same --idle-timeout allows: a third of it); the connection is
            # lost when a ping is not answered within the other half
            ("grpc.keepalive_time_ms", ping),
            ("grpc.keepalive_timeout_ms", ping),
            ("grpc.http2.ping_timeout_ms", ping),  # any ping: a BDP ping may be the one out
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
        ]
        self._glink: _GrpcLink | None = None
        self._counted: _GrpcLink | None = None  # the connection _counts reads
        # The RM's registration, for a resume: its secret, and what it received since on
        # each stream: _prior from earlier connections, plus the current one's count less
        # _base (what it had before the registration).
        self._registration = ""
        self._prior: dict[int, int] = dict.fromkeys(KINDS, 0)
        self._base: dict[int, int] = dict.fromkeys(KINDS, 0)
        self._resumed = False  # the last connection's Welcome took its Resume
        self._acking = False  # a Received is on its way for this turn of the loop
        self._closers: list[asyncio.Task[None]] = []  # closing lost connections

    def __repr__(self) -> str:
        return "<Grpc" + super().__repr__().removeprefix("<")

    # ========================================================================== SI calls
    async def register_resource_manager(
        self, request: si.RegisterResourceManagerRequest, callback: ResourceManagerCallback
    ) -> si.RegisterResourceManagerResponse:
        """As the in-process core's: the callback is called here, the core is there."""
        check_callback(callback)
        expect(request, si.RegisterResourceManagerRequest)
        own = overridden(callback)
        self._callback = callback
        link = await self._current()
        metadata = [*link.metadata, (CALLBACKS_KEY, ",".join(own))]
        register = link.unary(
            "/si.v1.Scheduler/RegisterResourceManager", pb.RegisterResourceManagerResponse
        )
        call = register(_to[si.RegisterResourceManagerRequest](request), metadata=metadata)
        await self._finish_call(link, call)
        self._registered = True
        trailing: Any = await call.trailing_metadata() or ()
        found = {key: value for key, value in trailing if isinstance(value, str)}
        base = [int(n) for n in found.get(BASE_KEY, "").split(",") if n.isdecimal()]
        if RESUME_KEY in found and len(base) == len(KINDS) and link is self._glink:
            # what this RM receives from now on counts for its registration
            self._rm_id = request.rm_id
            self._registration = found[RESUME_KEY]
            self._prior = dict.fromkeys(KINDS, 0)
            self._base = dict(zip(KINDS, base, strict=True))
            self._counted = link
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
        link = await self._current()
        self._sent += 1
        message = _to[si.UpdateConfigurationRequest](request)
        method = link.unary("/si.v1.SchedulerExtensions/UpdateConfiguration", pb.Empty)
        await self._unary(link, method, message, link.metadata)

    async def settle(self) -> None:
        """Return once the daemon settled and every callback it caused ran here; what those
        callbacks sent is settled too."""
        while True:
            before = self._sent
            try:
                await self._settle_once()
            except ConnectionError:
                if self._retries("settle"):
                    continue  # once connected again
                raise
            await self._inbox.join()
            if self._sent == before:
                return

    async def _settle_once(self) -> None:
        """The daemon settled, and everything it sent before is read."""
        link = await self._current()
        method = link.unary("/si.v1.SchedulerExtensions/Settle", pb.SettleResponse)
        response: pb.SettleResponse = await self._unary(link, method, pb.Empty(), link.metadata)
        while link.received < response.pushed:
            if link.ended:
                raise ConnectionError(f"{self.target}: {link.ended}")
            link.arrived.clear()
            await link.arrived.wait()

    # =========================================================================== queries
    # The query methods and their argument check are RemoteCore's; only the sending differs.
    async def _send_query(self, method: str, args: list[str]) -> Any:
        request = pb.QueryRequest(method=method, args=args)
        while True:
            link = await self._current()
            query = link.unary("/si.v1.SchedulerExtensions/Query", pb.QueryResponse)
            try:
                response: pb.QueryResponse = await self._unary(link, query, request, link.metadata)
            except ConnectionError:
                if self._retries(method):
                    continue  # a query, once connected again
                raise
            return msgspec.json.decode(response.json)

    # ====================================================================== plumbing
    async def _current(self) -> _GrpcLink:
        await self._gate()
        link = self._glink
        if link is None or link.ended:
            raise (
                self._error()
                if self._closed
                else ConnectionError(f"{self.target}: the connection was lost; reconnecting")
            )
        return link

    async def _unary(
        self, link: _GrpcLink, method: Any, request: Any, metadata: list[tuple[str, str]]
    ) -> Any:
        return await self._finish_call(link, method(request, metadata=metadata))

    async def _finish_call(self, link: _GrpcLink, call: Any) -> Any:
        """The answer of a unary ``call`` on ``link``, or the error it means here."""
        try:
            return await call
        except grpc.aio.AioRpcError as exc:
            raise self._rpc_error(link, exc) from None
        except asyncio.CancelledError:
            # the call was cancelled with its channel (the connection is over), not us
            task = asyncio.current_task()
            if link.ended and task is not None and not task.cancelling():
                raise ConnectionError(f"{self.target}: {link.ended}") from None
            raise

    def _rpc_error(self, link: _GrpcLink, exc: grpc.aio.AioRpcError) -> Exception:
        code = exc.code()
        details = exc.details() or ""
        if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND):
            trailing: Any = exc.trailing_metadata() or ()
            for key, value in trailing:
                if key == ERROR_KEY and is_remote_error(value):
                    return remote_error(str(value), details)
        if code == grpc.StatusCode.INTERNAL:
            return SchedulerError(details)
        if link.ended:
            return ConnectionError(f"{self.target}: {link.ended}")
        return ConnectionError(f"{self.target}: {details or code.name}")

    async def _stream_call(self, kind: _Kind, message: Any) -> None:
        link = await self._current()
        self._sent += 1
        future: asyncio.Future[pb.Ack] = asyncio.get_running_loop().create_future()
        async with link.locks[kind]:
            key = (kind, next(link.seqs[kind]))
            link.acks[key] = future
            try:
                await link.stream_calls[kind].write(message)
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as exc:
                link.acks.pop(key, None)
                link.end("lost", f"the connection broke while sending ({exc})")
                raise ConnectionError(f"{self.target}: {link.ended}") from None
        try:
            ack = await future
        finally:
            link.acks.pop(key, None)
        if ack.error:
            raise remote_error(ack.error, ack.message)

    async def _connect(self) -> None:
        """A new channel, its session welcomed and its streams open (``Lifeline``)."""
        if self._credentials is not None:
            channel = grpc.aio.secure_channel(
                self._address, self._credentials, options=self._options
            )
        else:
            channel = grpc.aio.insecure_channel(self._address, options=self._options)
        link = _GrpcLink(self, channel)
        try:
            welcome = await link.open(self._timeout, self._hello())
        except BaseException:
            link.end("closed", "not welcomed")
            await link.close()
            raise
        # what earlier connections brought stays counted; this one counts from 0
        self._prior, self._base = self._counts(), dict.fromkeys(KINDS, 0)
        self._glink = self._counted = link  # welcomed: its loss is the core's from now on
        self._welcomed(welcome)

    async def _resume(self) -> bool:
        """The connection's Hello resumed the registration (``_connect``), or not."""
        return self._resumed

    def _hello(self) -> pb.Hello:
        """The Hello of a new connection: with a Resume once an RM registered."""
        hello = pb.Hello(client="scheduler.client")
        if self._registration:
            counts = self._counts()
            hello.resume.CopyFrom(
                pb.Resume(
                    rm_id=self._rm_id,
                    registration=self._registration,
                    received=received_message(counts),
                )
            )
        return hello

    def _welcomed(self, welcome: pb.Welcome) -> None:
        self._resumed = welcome.resumed
        if not welcome.resumed and welcome.not_resumed:
            _log.warning("{}: {}", self.target, welcome.not_resumed)
            self._registration = ""

    def _counts(self) -> dict[int, int]:
        """What the RM received on each stream since it registered."""
        link = self._counted
        told = link.told if link is not None else dict.fromkeys(KINDS, 0)
        return {k: self._prior[k] + told[k] - self._base[k] for k in KINDS}

    def _told(self, link: _GrpcLink) -> None:
        """``link`` brought the RM something its registration counts: the daemon hears the
        counts once per turn of the loop (it need not keep what the RM has)."""
        if self._registration and not self._acking and link is self._glink:
            self._acking = True
            asyncio.get_running_loop().call_soon(self._send_received, link)

    def _send_received(self, link: _GrpcLink) -> None:
        self._acking = False
        if self._registration and link is self._glink and not link.ended:
            counts = self._counts()
            link.write(pb.FromRM(received=received_message(counts)))

    def _link_up(self) -> bool:
        return self._glink is not None and not self._glink.ended

    def _tell(self, closed: ConnectionClosed) -> None:
        self._inbox.put_nowait(("closed", closed))

    async def _call_back(self) -> None:
        """The RM's callbacks, one at a time, in the order they arrived."""
        while True:
            item: Any = await self._inbox.get()
            kind, message = item
            try:
                await self._deliver_one(kind, message)
            except Exception:
                _log.exception("the RM's callback raised on {}", kind)
            finally:
                self._inbox.task_done()

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
        elif kind == "closed":
            lost = getattr(callback, "connection_lost", None)
            if lost is not None:
                await lost(message)
        elif kind == "predicates":
            allowed = False
            try:
                allowed = bool(await callback.predicates(_from_predicates(message.args)))
            finally:
                answer = pb.PredicatesAnswer(id=message.id, allowed=allowed)
                await self._answer(pb.FromRM(predicates_answer=answer))
        elif kind == "preemption_predicates":
            response = refuse_preemption()
            try:
                response = await answer_preemption(callback, _from_preemption(message.args))
            finally:
                reply = pb.PreemptionPredicatesAnswer(
                    id=message.id, response=_to_preemption(response)
                )
                await self._answer(pb.FromRM(preemption_predicates_answer=reply))

    async def _answer(self, message: pb.FromRM) -> None:
        link = self._glink
        if link is not None and not link.ended:  # a question of a lost connection: none
            link.write(message)

    async def aclose(self) -> None:
        """Close the connection (``connect`` does it on leaving its block)."""
        await self._stop_lifeline()
        link, self._glink = self._glink, None
        if link is not None:
            link.end("closed", "the connection is closed")
            await link.close()
        for closer in self._closers:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await closer
        if self._callbacks is not None:
            self._callbacks.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._callbacks


class _GrpcLink:
    """One connection of a ``GrpcRemoteCore``: its channel, session stream and three
    Scheduler streams, the Acks they wait for, and their reader tasks."""

    def __init__(self, core: GrpcRemoteCore, channel: grpc.aio.Channel) -> None:
        self.core = core
        self.target = core.target
        self.channel = channel
        token = core._token
        self.metadata: list[tuple[str, str]] = [(TOKEN_KEY, token)] if token else []
        self.acks: dict[tuple[_Kind, int], asyncio.Future[pb.Ack]] = {}
        self.seqs: dict[_Kind, itertools.count[int]] = {k: itertools.count(1) for k, *_ in _STREAMS}
        self.locks: dict[_Kind, asyncio.Lock] = {k: asyncio.Lock() for k, *_ in _STREAMS}
        self.stream_calls: dict[_Kind, Any] = {}
        self.session: Any = None
        self.received = 0  # messages of the daemon counted by its Settle
        self.told = dict.fromkeys(KINDS, 0)  # callbacks received, by stream
        self.arrived = asyncio.Event()
        self.outgoing: asyncio.Queue[pb.FromRM] = asyncio.Queue()  # on the session stream
        self.ended = ""
        self.tasks: list[asyncio.Task[None]] = []

    def write(self, message: pb.FromRM) -> None:
        """Send ``message`` on the session stream, after those before it."""
        self.outgoing.put_nowait(message)

    async def _write(self) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
            while True:
                await self.session.write(await self.outgoing.get())

    def unary(self, path: str, response: Any) -> Any:
        return self.channel.unary_unary(
            path,
            request_serializer=_serialize,
            response_deserializer=response.FromString,
        )

    async def open(self, timeout: float, hello: pb.Hello) -> pb.Welcome:
        loop = asyncio.get_running_loop()
        session = self.channel.stream_stream(
            "/si.v1.SchedulerExtensions/Session",
            request_serializer=pb.FromRM.SerializeToString,
            response_deserializer=pb.FromDaemon.FromString,
        )(None, metadata=self.metadata)
        self.session = session
        try:
            async with asyncio.timeout(timeout):
                await session.write(pb.FromRM(hello=hello))
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
            raise _refusal(status)(f"{self.target}: {details or status.name}") from None
        if welcome is _EOF or welcome.WhichOneof("kind") != "welcome":
            status = await session.code()
            details = await session.details()
            raise _refusal(status)(f"{self.target}: {details or status.name}")
        name = welcome.welcome.session
        self.metadata = [*self.metadata, (SESSION_KEY, name)]
        self.tasks.append(loop.create_task(self._read_session(), name=f"grpc session {name}"))
        self.tasks.append(loop.create_task(self._write(), name=f"grpc session {name} out"))
        for kind, method, request, response in _STREAMS:
            call = self.channel.stream_stream(
                f"/si.v1.Scheduler/{method}",
                request_serializer=request.SerializeToString,
                response_deserializer=response.FromString,
            )(None, metadata=self.metadata)
            self.stream_calls[kind] = call
            self.tasks.append(loop.create_task(self._read_stream(kind, call), name=method))
        reply: pb.Welcome = welcome.welcome
        return reply

    def _arrive(self, kind: str, message: Any, stream: int | None = None) -> None:
        self.received += 1
        self.core._inbox.put_nowait((kind, message))
        self.arrived.set()
        if stream is not None:  # a callback: counted for a resume
            self.told[stream] += 1
            self.core._told(self)

    async def _read_stream(self, kind: _Kind, call: Any) -> None:
        name = {pb.Ack.ALLOCATION: "allocation", pb.Ack.APPLICATION: "application"}.get(
            kind, "node"
        )
        try:
            async for message in call:
                self._arrive(name, message, kind)
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                hint = (
                    " (the daemon's --max-frame)"
                    if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                    else ""
                )
                self.end("lost", f"the connection broke: {exc.details() or exc.code().name}{hint}")

    async def _read_session(self) -> None:
        kind: ClosedKind = "lost"
        reason = "the daemon closed the connection"
        try:
            while True:  # read(), as for the welcome: the two styles do not mix
                message = await self.session.read()
                if message is _EOF:
                    return
                which = message.WhichOneof("kind")
                if which == "ack":
                    ack = message.ack
                    future = self.acks.get((ack.stream, ack.seq))
                    if future is not None and not future.done():
                        future.set_result(ack)
                elif which == "goodbye":
                    kind = "goodbye"
                    reason = f"the daemon closed the connection: {message.goodbye.message}"
                    return
                elif which in ("events", "scheduling_state"):
                    self._arrive(which, getattr(message, which), _SESSION_STREAM)
                elif which in ("predicates", "preemption_predicates"):
                    self._arrive(which, getattr(message, which))
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                reason = f"the connection broke: {exc.details() or exc.code().name}"
        finally:
            self.end(kind, reason)

    def end(self, kind: ClosedKind, reason: str) -> None:
        """The connection is over: its calls fail, and the core hears it (once)."""
        if self.ended:
            return
        self.ended = reason
        error = ConnectionError(f"{self.target}: {reason}")
        for future in self.acks.values():
            if not future.done():
                future.set_exception(error)
        self.arrived.set()
        if kind in ("lost", "goodbye"):  # its channel and tasks go (aclose waits for it)
            self.core._closers.append(asyncio.get_running_loop().create_task(self.close()))
        if self.core._glink is self:
            self.core._glink = None
            self.core._lost(kind, reason)

    async def close(self) -> None:
        for call in [self.session, *self.stream_calls.values()]:
            if call is not None:
                call.cancel()
        tasks = [task for task in self.tasks if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.channel.close(None)


def _refusal(status: grpc.StatusCode) -> type[ConnectionError]:
    """A daemon that refuses the session (a wrong token, a bad hello) would refuse it
    again: ``ConnectionRefusedError``; one that is not there (yet) may be there later."""
    refused = (
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    return ConnectionRefusedError if status in refused else ConnectionError


def _serialize(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data
