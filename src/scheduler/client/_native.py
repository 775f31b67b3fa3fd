"""The native transport's client: ``RemoteCore`` speaks SI structs as length-prefixed
MessagePack frames (``scheduler.si._wire``) to a daemon's native listener, and calls the
RM's callback for what the daemon pushes. What the gRPC client shares with it (the check of
a request's type, the errors by name) lives here too."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import ssl
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import SplitResult, urlsplit

import anyio
from anyio.abc import ByteStream
from loguru import logger

from scheduler import si
from scheduler._errors import ConfigError, NotFoundError, SchedulerError
from scheduler.client._reconnect import Lifeline, Reconnect, Recover, _restoring
from scheduler.daemon._tls import TLSArg, client_context
from scheduler.si._callback import (
    CALLBACK_METHODS,
    OPTIONAL_CALLBACK_METHODS,
    ClosedKind,
    ConnectionClosed,
    ResourceManagerCallback,
    check_callback,
    overrides,
    refuse_preemption,
)
from scheduler.si._wire import (
    MAX_FRAME,
    RECEIVE_BYTES,
    AllocationCall,
    AllocationPush,
    ApplicationCall,
    ApplicationPush,
    CallbackReply,
    ConfigurationCall,
    EventsPush,
    FrameReader,
    Goodbye,
    Hello,
    NodeCall,
    NodePush,
    Ping,
    Pong,
    PredicatesAsk,
    PreemptionPredicatesAsk,
    PreemptionReply,
    QueryCall,
    Received,
    RegisterCall,
    Result,
    ResumeCall,
    SchedulingStatePush,
    Told,
    Welcome,
    WireError,
    decode_from_daemon,
    encode,
)

__all__ = [
    "RemoteCore",
    "answer_preemption",
    "connect_native",
    "expect",
    "is_remote_error",
    "overridden",
    "port_of",
    "remote_error",
]

_ERRORS: dict[str, type[Exception]] = {
    "SchedulerError": SchedulerError,
    "ConfigError": ConfigError,
    "NotFoundError": NotFoundError,
}
_log = logger.bind(transport="native")


@contextlib.asynccontextmanager
async def connect_native(
    target: str,
    *,
    token: str = "",
    max_frame: int = MAX_FRAME,
    timeout: float = 30.0,
    tls: TLSArg = None,
    reconnect: Reconnect | None = None,
    recover: Recover | None = None,
    idle_timeout: float = 60.0,
) -> AsyncIterator[RemoteCore]:
    """``scheduler.client.connect`` for the native transport's targets (``tcp://``,
    ``unix://``, ``tls://``): connected and welcomed; closed when the block is left."""
    remote = RemoteCore(
        target,
        token=token,
        max_frame=max_frame,
        timeout=timeout,
        tls=tls,
        reconnect=reconnect,
        recover=recover,
        idle_timeout=idle_timeout,
    )
    try:
        await remote._start()
        yield remote
    finally:
        await remote.aclose()


def _tls_reason(exc: BaseException | None) -> str:
    return f"TLS failed: {getattr(exc, 'reason', None) or exc}"


def port_of(parts: SplitResult, target: str, form: str) -> int:
    """The port of a ``scheme://host:port`` target; a missing host or port, or one outside
    0 to 65535, is a ``SchedulerError`` that shows the ``form`` to write."""
    try:
        port = parts.port
    except ValueError:  # urllib's "Port out of range", or not a number
        port = None
    if not parts.hostname or port is None:
        raise SchedulerError(f"target {target!r}: say {form}, with a port from 0 to 65535")
    return port


async def _open(target: str, timeout: float, tls: TLSArg = None) -> ByteStream:
    parts = urlsplit(target)
    try:
        with anyio.fail_after(timeout):
            if parts.scheme == "tcp":
                port = port_of(parts, target, "tcp://host:port")
                return await anyio.connect_tcp(parts.hostname or "", port)
            if parts.scheme == "tls":
                port = port_of(parts, target, "tls://host:port")
                return await anyio.connect_tcp(
                    parts.hostname or "",
                    port,
                    ssl_context=client_context(tls),
                    tls_standard_compatible=False,
                )
            if parts.scheme == "unix":
                if not parts.path:
                    raise SchedulerError(f"target {target!r}: say unix:///path/to/socket")
                return await anyio.connect_unix(parts.path)
    except TimeoutError:
        raise ConnectionError(f"{target}: no connection within {timeout:g}s") from None
    except ssl.SSLError as exc:  # the certificate is not trusted, or no TLS there
        raise ConnectionError(f"{target}: TLS failed: {exc.reason or exc}") from None
    except OSError as exc:
        raise ConnectionError(f"{target}: {exc.strerror or exc}") from None
    except (anyio.EndOfStream, anyio.BrokenResourceError):  # closed during the handshake
        raise ConnectionError(f"{target}: the daemon closed the connection (TLS)") from None
    raise SchedulerError(
        f"target {target!r}: the scheme must be tcp://, unix:// or grpc:// "
        "(tls:// and grpcs:// with TLS)"
    )


class RemoteCore(Lifeline):
    """The core of a daemon, seen from an RM: the methods of the in-process core.

    Attributes:
        target: the daemon's address.
        reconnects: how many times the connection was made again (``reconnect=``).
    """

    def __init__(
        self,
        target: str,
        *,
        token: str = "",
        max_frame: int = MAX_FRAME,
        timeout: float = 30.0,
        tls: TLSArg = None,
        reconnect: Reconnect | None = None,
        recover: Recover | None = None,
        idle_timeout: float = 60.0,
    ) -> None:
        self.target = target
        self._idle_timeout = idle_timeout
        self._token = token
        self._max_frame = max_frame
        self._timeout = timeout
        self._tls = tls
        self._init_lifeline(reconnect, recover)
        self._ids = itertools.count(1)
        self._link: _Link | None = None
        self._callback: ResourceManagerCallback | None = None
        self._inbox: asyncio.Queue[object] = asyncio.Queue()
        self._sent = 0  # requests that change state, sent so far (``settle`` counts them)
        self._callbacks: asyncio.Task[None] | None = None
        # The session of the RM registered here: its id, and the pushes received since
        # its register result (``ResumeCall``, ``Received``).
        self._rm_id = ""
        self._session = ""
        self._received = 0
        self._registering: dict[int, str] = {}  # register call id -> rm id

    def __repr__(self) -> str:
        state = f"closed: {self._closed.reason}" if self._closed else "open"
        if self._closed is None and not self._ready.is_set():
            state = "reconnecting"
        return f"<RemoteCore {self.target} {state}>"

    # ========================================================================== SI calls
    async def register_resource_manager(
        self, request: si.RegisterResourceManagerRequest, callback: ResourceManagerCallback
    ) -> si.RegisterResourceManagerResponse:
        """As the in-process core's: the callback is called here, the core is there."""
        check_callback(callback)
        expect(request, si.RegisterResourceManagerRequest)
        self._callback = callback
        call = RegisterCall(id=0, request=request, overrides=overridden(callback))
        await self._call(call)
        self._registered = True
        return si.RegisterResourceManagerResponse()

    async def update_node(self, request: si.NodeRequest) -> None:
        expect(request, si.NodeRequest)
        await self._call(NodeCall(id=0, request=request), changes=True)

    async def update_application(self, request: si.ApplicationRequest) -> None:
        expect(request, si.ApplicationRequest)
        await self._call(ApplicationCall(id=0, request=request), changes=True)

    async def update_allocation(self, request: si.AllocationRequest) -> None:
        expect(request, si.AllocationRequest)
        await self._call(AllocationCall(id=0, request=request), changes=True)

    async def update_configuration(self, request: si.UpdateConfigurationRequest) -> None:
        expect(request, si.UpdateConfigurationRequest)
        await self._call(ConfigurationCall(id=0, request=request), changes=True)

    async def settle(self) -> None:
        """Return once the daemon settled and every callback it caused ran here; what those
        callbacks sent is settled too."""
        while True:
            before = self._sent
            await self._query("settle")
            await self._inbox.join()
            if self._sent == before:
                return

    # =========================================================================== queries
    async def get_partitions(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._query("get_partitions")
        return result

    async def get_queue(self, partition: str, queue_path: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._query("get_queue", partition, queue_path)
        return result

    async def get_application(self, partition: str, application_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._query("get_application", partition, application_id)
        return result

    async def get_node(self, partition: str, node_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._query("get_node", partition, node_id)
        return result

    async def get_nodes(self, partition: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._query("get_nodes", partition)
        return result

    async def get_applications(self, partition: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._query("get_applications", partition)
        return result

    async def get_events(
        self, start: int | None = None, count: int | None = None
    ) -> dict[str, Any]:
        """As the in-process core's (``Core.get_events``): a page of the events the
        daemon's core sent to the RMs (the daemon checks the arguments)."""
        args = ["" if value is None else str(value) for value in (start, count)]
        result: dict[str, Any] = await self._query("get_events", *args)
        return result

    async def get_user_usage(self, partition: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._query("get_user_usage", partition)
        return result

    async def get_group_usage(self, partition: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._query("get_group_usage", partition)
        return result

    async def state_dump(self) -> dict[str, Any]:
        result: dict[str, Any] = await self._query("state_dump")
        return result

    async def get_resource_managers(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._query("get_resource_managers")
        return result

    async def get_config(self) -> dict[str, dict[str, Any]]:
        """As the in-process core's: the queue configuration in force for each RM."""
        result: dict[str, dict[str, Any]] = await self._query("get_config")
        return result

    async def stop_resource_manager(self, rm_id: str) -> None:
        """The RM this connection registered shuts down of its own accord
        (``Core.stop_resource_manager``): it is Stopped at once, where closing the
        connection would only pause it. Another RM's id is refused."""
        await self._query("stop_resource_manager", rm_id)
        self._registered = False
        self._session = ""

    async def _query(self, method: str, *args: str) -> Any:
        for arg in args:
            if not isinstance(arg, str):
                raise SchedulerError(f"{method}: arguments must be strings, got {arg!r}")
        return await self._send_query(method, list(args))

    async def _send_query(self, method: str, args: list[str]) -> Any:
        """One query to the daemon, over this transport (the gRPC client has its own)."""
        return await self._call(QueryCall(id=0, method=method, args=args))

    # ====================================================================== plumbing
    async def _call(self, call: Any, *, changes: bool = False) -> Any:
        if changes:
            self._sent += 1
        while True:
            await self._gate()
            link = self._link
            try:
                if link is None:
                    raise ConnectionError(f"{self.target}: the connection was lost")
                call.id = next(self._ids)
                if isinstance(call, RegisterCall):
                    self._registering[call.id] = call.request.rm_id
                try:
                    result = await link.call(call)
                finally:
                    self._registering.pop(call.id, None)
            except ConnectionError:
                if isinstance(call, QueryCall) and self._retries(call.method):
                    continue  # a query, once connected again
                raise
            if result.error:
                raise remote_error(result.error, result.message)
            return result.value

    def _retries(self, method: str) -> bool:
        """A query that met a lost connection is asked again once the client reconnected
        (it changes nothing); a request is not (the daemon may have run it)."""
        return (
            self._reconnect is not None
            and self._closed is None
            and not _restoring.get()
            and method != "stop_resource_manager"
        )

    async def _start(self) -> None:
        self._callbacks = asyncio.get_running_loop().create_task(
            self._call_back(), name=f"scheduler.client callbacks {self.target}"
        )
        await self._connect()
        self._ready.set()

    async def _connect(self) -> None:
        """A new connection, welcomed (``Lifeline``)."""
        stream = await _open(self.target, self._timeout, self._tls)
        link = _Link(self, stream)
        await link.start(self._token, self._timeout)
        self._link = link  # welcomed: its loss is the core's from now on

    async def _resume(self) -> bool:
        """Resume the RM's session on the new connection (``Lifeline``): True if resumed,
        False if there is none to resume or the daemon no longer has it."""
        if not self._session:
            return False
        call = ResumeCall(id=0, rm_id=self._rm_id, session=self._session, received=self._received)
        try:
            await self._call(call)
        except NotFoundError as exc:
            _log.warning("{}: {}", self.target, exc)
            self._session = ""
            return False
        return True

    def _link_up(self) -> bool:
        return self._link is not None

    def _tell(self, closed: ConnectionClosed) -> None:
        self._inbox.put_nowait(closed)

    def _took(self, link: _Link, message: object) -> bool:
        """A frame of ``link`` that is not an answer: counted if the RM's callback is told
        it (the count its session resumes from). Returns whether it was counted."""
        if isinstance(message, Told):
            self._received += 1
            self._inbox.put_nowait(message)
            return True
        self._inbox.put_nowait(message)
        return False

    def _answered(self, message: Result) -> None:
        """A register result starts the count of a new session."""
        rm_id = self._registering.get(message.id)
        if rm_id is not None and not message.error and isinstance(message.value, dict):
            self._rm_id = rm_id
            self._session = str(message.value.get("session", ""))
            self._received = 0

    def _acknowledge(self, link: _Link) -> None:
        if self._session and link is self._link:
            link.send(encode(Received(session=self._session, count=self._received)))

    async def _call_back(self) -> None:
        """The RM's callbacks, one at a time, in the order the core made them."""
        while True:
            message = await self._inbox.get()
            try:
                await self._deliver(message)
            except Exception:
                _log.exception("the RM's callback raised on {}", type(message).__name__)
            finally:
                self._inbox.task_done()

    async def _deliver(self, message: object) -> None:
        callback = self._callback
        if callback is None:
            return
        if isinstance(message, AllocationPush):
            await callback.update_allocation(message.response)
        elif isinstance(message, ApplicationPush):
            await callback.update_application(message.response)
        elif isinstance(message, NodePush):
            await callback.update_node(message.response)
        elif isinstance(message, EventsPush):
            await callback.send_event(message.events)
        elif isinstance(message, SchedulingStatePush):
            await callback.update_container_scheduling_state(message.request)
        elif isinstance(message, ConnectionClosed):
            lost = getattr(callback, "connection_lost", None)
            if lost is not None:
                await lost(message)
        elif isinstance(message, PredicatesAsk):
            allowed = False
            try:
                allowed = bool(await callback.predicates(message.args))
            finally:
                self._reply(CallbackReply(id=message.id, allowed=allowed))
        elif isinstance(message, PreemptionPredicatesAsk):
            response = refuse_preemption()
            try:
                response = await answer_preemption(callback, message.args)
            finally:
                self._reply(PreemptionReply(id=message.id, response=response))

    def _reply(self, reply: CallbackReply | PreemptionReply) -> None:
        if self._link is not None:  # a question of a lost connection needs no answer
            self._link.send(encode(reply))

    async def aclose(self) -> None:
        """Close the connection (``connect`` does it on leaving its block)."""
        await self._stop_lifeline()
        link, self._link = self._link, None
        if link is not None:
            await link.close("the connection is closed")
        if self._callbacks is not None:
            self._callbacks.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._callbacks


class _Link:
    """One connection of a ``RemoteCore``: its stream, the calls waiting on it, and its
    reader and writer tasks."""

    def __init__(self, core: RemoteCore, stream: ByteStream) -> None:
        self.core = core
        self.target = core.target
        self.stream = stream
        self.waiting: dict[int, asyncio.Future[Result]] = {}
        self.welcome: asyncio.Future[Welcome] = asyncio.get_running_loop().create_future()
        self.outgoing: list[bytes] = []  # frames for the writer task, in order
        self.wake_writer = asyncio.Event()
        self.ended = ""
        self.refused = False  # the daemon would not take the connection
        self.tasks: list[asyncio.Task[None]] = []
        self.heard = 0  # reads from the daemon so far (the watchdog compares)

    async def start(self, token: str, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        self.tasks = [
            loop.create_task(self._read(), name=f"scheduler.client read {self.target}"),
            loop.create_task(self._write(), name=f"scheduler.client write {self.target}"),
            loop.create_task(self._watch(), name=f"scheduler.client watch {self.target}"),
        ]
        self.send(encode(Hello(token=token)))
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self.welcome)
        except TimeoutError:
            await self.close(f"no welcome within {timeout:g}s")
            raise ConnectionError(f"{self.target}: no welcome within {timeout:g}s") from None
        except ConnectionError as exc:
            await self.close("refused")
            if self.refused:  # a wrong token, another version, TLS: trying again won't do
                raise ConnectionRefusedError(str(exc)) from None
            raise

    async def call(self, call: Any) -> Result:
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self.waiting[call.id] = future
        try:
            self.send(encode(call))
            return await future
        finally:
            self.waiting.pop(call.id, None)

    def send(self, data: bytes) -> None:
        """Hand a frame to the writer task. A send that breaks ends the connection, and
        so fails every call waiting on it."""
        if self.ended:
            raise ConnectionError(f"{self.target}: {self.ended}")
        self.outgoing.append(data)
        self.wake_writer.set()

    async def _write(self) -> None:
        """Send the frames in the order they were handed over: all those that wait go out
        in one send (calls made together, as with ``asyncio.gather``, cost one)."""
        try:
            while True:
                await self.wake_writer.wait()
                self.wake_writer.clear()
                while self.outgoing:
                    batch, self.outgoing = self.outgoing, []
                    await self.stream.send(batch[0] if len(batch) == 1 else b"".join(batch))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            self.end("lost", f"the connection broke while sending ({exc or type(exc).__name__})")
            with contextlib.suppress(Exception):
                await self.stream.aclose()  # the reader wakes, and ends the link

    async def _read(self) -> None:
        reader = FrameReader(self.core._max_frame)
        core = self.core
        kind: ClosedKind = "lost"
        reason = "the daemon closed the connection"
        try:
            while True:
                data = await self.stream.receive(RECEIVE_BYTES)
                self.heard += 1
                told = False
                for body in reader.frames(data):
                    message = decode_from_daemon(body)
                    if isinstance(message, Result):
                        core._answered(message)
                        future = self.waiting.get(message.id)
                        if future is not None and not future.done():
                            future.set_result(message)
                    elif isinstance(message, Welcome):
                        if not self.welcome.done():
                            self.welcome.set_result(message)
                    elif isinstance(message, Goodbye):
                        welcomed = self.welcome.done()
                        kind = "goodbye" if welcomed else "refused"
                        reason = f"the daemon closed the connection: {message.message}"
                        return
                    elif isinstance(message, Ping):  # answered here, not after the callbacks
                        self.send(encode(Pong()))
                    else:
                        told = core._took(self, message) or told
                if told:
                    core._acknowledge(self)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            if isinstance(exc.__cause__ or exc.__context__, ssl.SSLError):  # a TLS alert
                kind, reason = "refused", _tls_reason(exc.__cause__ or exc.__context__)
        except ssl.SSLError as exc:  # e.g. mutual TLS: the daemon wants a client certificate
            kind, reason = "refused", _tls_reason(exc)
        except WireError as exc:
            reason = (
                f"bad frame from the daemon: {exc}"
                if self.welcome.done()
                else f"no scheduler daemon's native transport there: its first bytes are no "
                f"frame of ours ({exc}); an --http or --grpc address?"
            )
        except OSError as exc:
            reason = f"the connection broke: {exc.strerror or exc}"
        finally:
            if not self.welcome.done() and self.target.startswith("tls://"):  # refused at once
                kind = "refused"
                reason += (
                    " before its welcome (a daemon with --tls-client-ca wants a client "
                    "certificate it trusts: tls=ssl.SSLContext, with load_cert_chain)"
                )
            self.end(kind, reason)
            for task in self.tasks[1:]:  # the writer and the watchdog
                task.cancel()
            with contextlib.suppress(Exception):
                await self.stream.aclose()

    async def _watch(self) -> None:
        """A daemon heard nothing from for a third of the idle timeout is pinged (a live
        one answers ``Pong``); heard nothing from for all of it, the connection is lost
        (its host vanished, or the network between: no FIN ever comes)."""
        idle = self.core._idle_timeout
        loop = asyncio.get_running_loop()
        heard, heard_at = self.heard, loop.time()
        pinged = False
        while not self.ended:
            await asyncio.sleep(idle / 6)
            if self.heard != heard:
                heard, heard_at, pinged = self.heard, loop.time(), False
            silent = loop.time() - heard_at
            if silent >= idle:
                self.end("lost", f"nothing heard from the daemon for {silent:.3g}s (idle_timeout)")
                with contextlib.suppress(Exception):
                    await self.stream.aclose()  # the reader wakes, and ends the link
                return
            if silent >= idle / 3 and not pinged:
                pinged = True
                with contextlib.suppress(ConnectionError):
                    self.send(encode(Ping()))

    def end(self, kind: ClosedKind, reason: str) -> None:
        """The connection is over: its calls fail, and the core hears it (once)."""
        if self.ended:
            return
        self.ended = reason
        self.refused = kind == "refused"
        error = ConnectionError(f"{self.target}: {reason}")
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(error)
        if not self.welcome.done():
            self.welcome.set_exception(error)
            self.welcome.exception()  # retrieved: start() raises it, or nobody waits
        if self.core._link is self:
            self.core._link = None
            self.core._lost(kind, reason)

    async def close(self, reason: str) -> None:
        self.end("closed", reason)
        for task in self.tasks:
            if task is not asyncio.current_task():
                task.cancel()
        for task in self.tasks:
            if task is not asyncio.current_task():
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        with contextlib.suppress(Exception):
            await self.stream.aclose()


def overridden(callback: ResourceManagerCallback) -> list[str]:
    """The callback methods the RM's callback overrides: what the daemon's stand-in for it
    overrides (and so what the daemon asks it, or pushes to it)."""
    methods = (*CALLBACK_METHODS, *OPTIONAL_CALLBACK_METHODS)
    return [m for m in methods if overrides(callback, m)]


async def answer_preemption(
    callback: ResourceManagerCallback, args: si.PreemptionPredicatesArgs
) -> si.PreemptionPredicatesResponse:
    """The RM's ``preemption_predicates``, checked: anything but a response raises (the
    caller answers the daemon with a refusal), so a bad value never reaches the wire."""
    response = await callback.preemption_predicates(args)
    if not isinstance(response, si.PreemptionPredicatesResponse):
        raise TypeError(
            f"preemption_predicates returned {response!r}, not an si.PreemptionPredicatesResponse"
        )
    return response


def remote_error(name: str, message: str) -> Exception:
    """The error the daemon reported by ``name``, as it would be raised in-process."""
    return _ERRORS.get(name, SchedulerError)(message)


def is_remote_error(name: object) -> bool:
    """``name`` is one of the errors the daemon reports by name."""
    return name in _ERRORS


def expect(request: object, kind: type) -> None:
    """Refuse a request of the wrong SI type, as the in-process core does."""
    if type(request) is not kind:
        raise SchedulerError(f"expected si.{kind.__name__}, got {type(request).__name__}")
