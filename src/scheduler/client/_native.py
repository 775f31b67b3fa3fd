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
from urllib.parse import urlsplit

import anyio
import msgspec
from anyio.abc import ByteStream
from loguru import logger

from scheduler import si
from scheduler._errors import ConfigError, NotFoundError, SchedulerError
from scheduler.daemon._tls import TLSArg, client_context
from scheduler.si._callback import (
    CALLBACK_METHODS,
    OPTIONAL_CALLBACK_METHODS,
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
    RegisterCall,
    Result,
    SchedulingStatePush,
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
) -> AsyncIterator[RemoteCore]:
    """``scheduler.client.connect`` for the native transport's targets (``tcp://``,
    ``unix://``, ``tls://``): connected and welcomed; closed when the block is left."""
    stream = await _open(target, timeout, tls)
    remote = RemoteCore(stream, target, max_frame)
    try:
        await remote._start(token, timeout)
        yield remote
    finally:
        await remote.aclose()


def _tls_reason(exc: BaseException | None) -> str:
    return f"TLS failed: {getattr(exc, 'reason', None) or exc}"


async def _open(target: str, timeout: float, tls: TLSArg = None) -> ByteStream:
    parts = urlsplit(target)
    try:
        with anyio.fail_after(timeout):
            if parts.scheme == "tcp":
                if not parts.hostname or parts.port is None:
                    raise SchedulerError(f"target {target!r}: say tcp://host:port")
                return await anyio.connect_tcp(parts.hostname, parts.port)
            if parts.scheme == "tls":
                if not parts.hostname or parts.port is None:
                    raise SchedulerError(f"target {target!r}: say tls://host:port")
                return await anyio.connect_tcp(
                    parts.hostname,
                    parts.port,
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


class RemoteCore:
    """The core of a daemon, seen from an RM: the methods of the in-process core."""

    def __init__(self, stream: ByteStream, target: str, max_frame: int) -> None:
        self._stream = stream
        self.target = target
        self._max_frame = max_frame
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Result]] = {}
        self._welcome: asyncio.Future[Welcome] | None = None
        self._callback: ResourceManagerCallback | None = None
        self._inbox: asyncio.Queue[object] = asyncio.Queue()
        self._outgoing: list[bytes] = []  # frames for the writer task, in order
        self._wake_writer = asyncio.Event()
        self._sent = 0  # requests that change state, sent so far (``settle`` counts them)
        self._closed: str = ""
        self._tasks: list[asyncio.Task[None]] = []

    def __repr__(self) -> str:
        state = f"closed: {self._closed}" if self._closed else "open"
        return f"<RemoteCore {self.target} {state}>"

    # ========================================================================== SI calls
    async def register_resource_manager(
        self, request: si.RegisterResourceManagerRequest, callback: ResourceManagerCallback
    ) -> si.RegisterResourceManagerResponse:
        """As the in-process core's: the callback is called here, the core is there."""
        check_callback(callback)
        expect(request, si.RegisterResourceManagerRequest)
        self._callback = callback
        value = await self._call(
            RegisterCall(id=0, request=request, overrides=overridden(callback))
        )
        return msgspec.convert(value or {}, si.RegisterResourceManagerResponse)

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
        if self._closed:
            raise ConnectionError(f"{self.target}: {self._closed}")
        call.id = next(self._ids)
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._waiting[call.id] = future
        if changes:
            self._sent += 1
        try:
            self._send(encode(call))
            result = await future
        finally:
            self._waiting.pop(call.id, None)
        if result.error:
            raise remote_error(result.error, result.message)
        return result.value

    def _send(self, data: bytes) -> None:
        """Hand a frame to the writer task. A send that breaks fails the connection, and
        so every call waiting on it."""
        if self._closed:
            raise ConnectionError(f"{self.target}: {self._closed}")
        self._outgoing.append(data)
        self._wake_writer.set()

    async def _write(self) -> None:
        """Send the frames in the order they were handed over: all those that wait go out
        in one send (calls made together, as with ``asyncio.gather``, cost one)."""
        try:
            while True:
                await self._wake_writer.wait()
                self._wake_writer.clear()
                while self._outgoing:
                    batch, self._outgoing = self._outgoing, []
                    await self._stream.send(batch[0] if len(batch) == 1 else b"".join(batch))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            self._fail(f"the connection broke while sending ({exc or type(exc).__name__})")

    async def _start(self, token: str, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        self._welcome = loop.create_future()
        self._tasks = [
            loop.create_task(self._read(), name=f"scheduler.client read {self.target}"),
            loop.create_task(self._call_back(), name=f"scheduler.client callbacks {self.target}"),
            loop.create_task(self._write(), name=f"scheduler.client write {self.target}"),
        ]
        self._send(encode(Hello(token=token)))
        try:
            async with asyncio.timeout(timeout):
                await self._welcome
        except TimeoutError:
            raise ConnectionError(f"{self.target}: no welcome within {timeout:g}s") from None

    async def _read(self) -> None:
        reader = FrameReader(self._max_frame)
        reason = "the daemon closed the connection"
        try:
            while True:
                data = await self._stream.receive(RECEIVE_BYTES)
                for body in reader.frames(data):
                    message = decode_from_daemon(body)
                    if isinstance(message, Result):
                        future = self._waiting.get(message.id)
                        if future is not None and not future.done():
                            future.set_result(message)
                    elif isinstance(message, Welcome):
                        if self._welcome is not None and not self._welcome.done():
                            self._welcome.set_result(message)
                    elif isinstance(message, Goodbye):
                        reason = f"the daemon closed the connection: {message.message}"
                        return
                    elif isinstance(message, Ping):  # answered here, not after the callbacks
                        if not self._closed:
                            self._send(encode(Pong()))
                    else:
                        self._inbox.put_nowait(message)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            if isinstance(exc.__cause__ or exc.__context__, ssl.SSLError):  # a TLS alert
                reason = _tls_reason(exc.__cause__ or exc.__context__)
        except ssl.SSLError as exc:  # e.g. mutual TLS: the daemon wants a client certificate
            reason = _tls_reason(exc)
        except WireError as exc:
            reason = f"bad frame from the daemon: {exc}"
        except OSError as exc:
            reason = f"the connection broke: {exc.strerror or exc}"
        finally:
            welcomed = self._welcome is None or self._welcome.done()
            if not welcomed and self.target.startswith("tls://"):  # refused at once
                reason += (
                    " before its welcome (a daemon with --tls-client-ca wants a client "
                    "certificate it trusts: tls=ssl.SSLContext, with load_cert_chain)"
                )
            self._fail(reason)

    def _fail(self, reason: str) -> None:
        if self._closed:
            return
        self._closed = reason
        error = ConnectionError(f"{self.target}: {reason}")
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(error)
        if self._welcome is not None and not self._welcome.done():
            self._welcome.set_exception(error)

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
        elif isinstance(message, PredicatesAsk):
            allowed = False
            try:
                allowed = bool(await callback.predicates(message.args))
            finally:
                if not self._closed:
                    self._send(encode(CallbackReply(id=message.id, allowed=allowed)))
        elif isinstance(message, PreemptionPredicatesAsk):
            response = refuse_preemption()
            try:
                response = await answer_preemption(callback, message.args)
            finally:
                if not self._closed:
                    self._send(encode(PreemptionReply(id=message.id, response=response)))

    async def aclose(self) -> None:
        """Close the connection (``connect`` does it on leaving its block)."""
        self._fail("the connection is closed")
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        with contextlib.suppress(Exception):
            await self._stream.aclose()


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
