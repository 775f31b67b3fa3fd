"""The daemon's native transport: RMs call the core over length-prefixed MessagePack frames
(``scheduler.si._wire``) on TCP or a Unix socket, and hear their callbacks on the same stream.

One ``Session`` per connection, and three tasks in it: the reader decodes frames, answers
``CallbackReply`` and ``PreemptionReply`` at once and queues calls; the call worker runs
the calls one at a time, in order, against the ``Core`` (so requests keep the order the
RM sent them in, and a ``settle`` holds back later calls as it does in-process); the
writer sends what the session queued, in order. The RM's callback, inside the core, is a
stand-in that queues a frame and returns: the outgoing queue is bounded, and an RM that
does not read fast enough is disconnected with a reason instead of growing the daemon's
memory.

A fourth task, the watchdog, cuts off a peer that stalls: no ``Hello`` within
``--hello-timeout``; nothing heard for ``--idle-timeout`` although it was pinged (``Ping``
after a third of that silence, which a live client answers with ``Pong`` at once, so a
half-open connection is found even when the daemon has nothing to send); a send that the
RM does not take within ``--write-timeout`` (its TCP window stays full). The reader and the
writer only count what they do, so the watchdog costs the hot path two counters.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

import anyio
from anyio.abc import ByteStream, Listener
from loguru import logger

from scheduler import si
from scheduler._errors import NotFoundError, SchedulerError
from scheduler.daemon._liveness import keep_alive
from scheduler.daemon._outbox import Outbox, Outboxes
from scheduler.si._callback import ResourceManagerCallback, refuse_preemption
from scheduler.si._wire import (
    MAX_FRAME,
    PROTOCOL_VERSION,
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
    decode_from_rm,
    encode,
)

if TYPE_CHECKING:
    from scheduler.core import Core
    from scheduler.daemon._record import RecordingCore
    from scheduler.si._wire import Call

__all__ = ["Limits", "NativeServer"]

_log = logger.bind(transport="native")

# Frames the writer joins into one send, in bytes (one frame alone may be larger).
_WRITE_BYTES = 1 << 20

# The queries an RM may call over either transport, and how many string arguments each
# takes (gRPC has a call of its own for ``settle``).
QUERIES: dict[str, int] = {
    "settle": 0,
    "get_partitions": 0,
    "get_queue": 2,
    "get_application": 2,
    "get_node": 2,
    "get_user_usage": 1,
    "get_group_usage": 1,
    "state_dump": 0,
    "get_resource_managers": 0,
    "get_config": 0,
    "get_nodes": 1,
    "get_applications": 1,
    "get_events": 2,  # start, count: decimal, or "" for the default
    "stop_resource_manager": 1,  # only the RM of the calling connection
}


async def run_query(core: Core, method: str, args: list[str]) -> Any:
    """One of ``QUERIES`` (not ``stop_resource_manager``, which is the connection's), by
    name with its string arguments, as either transport receives it."""
    expected = QUERIES.get(method)
    if expected is None:
        raise SchedulerError(f"unknown query {method!r}")
    if len(args) != expected:
        raise SchedulerError(f"{method} takes {expected} arguments, got {len(args)}")
    if method == "get_events":
        start, count = (None if not arg else _decimal(method, arg) for arg in args)
        return await core.get_events(start, count)
    function: Callable[..., Awaitable[Any]] = getattr(core, method)
    return await function(*args)


def _decimal(method: str, arg: str) -> int:
    if not arg.isdecimal() or len(arg) > 19:
        raise SchedulerError(f"{method}: {arg!r} is not a number")
    return int(arg)


async def stop_own_rm(core: Core | RecordingCore, mine: str, rm_id: str, log: Any) -> None:
    """The RM of a connection (``mine``, over either transport) shuts down of its own
    accord: Stopped, not Paused, and the connection's end then changes nothing. Another
    RM is not this connection's to stop."""
    if rm_id != mine:
        registered = f"{mine!r}" if mine else "none yet"
        raise SchedulerError(
            f"a connection may stop only the resource manager it registered ({registered}), "
            f"not {rm_id!r}"
        )
    await core.stop_resource_manager(rm_id)
    log.info("resource manager {} stopped of its own accord", rm_id)


class Limits:
    """What one RM may send: frame size, asks per request, id length, and how many frames
    may wait for it before it counts as too slow; and how long a peer may stall, in
    seconds: to say hello (and an HTTP client to send its request's head), to stay silent
    (pinged meanwhile), and to take one send."""

    def __init__(
        self,
        *,
        max_frame: int = MAX_FRAME,
        max_asks: int = 100_000,
        max_id: int = 1024,
        max_backlog: int = 100_000,
        predicates_timeout: float = 30.0,
        hello_timeout: float = 10.0,
        idle_timeout: float = 60.0,
        write_timeout: float = 30.0,
    ) -> None:
        self.max_frame = max_frame
        self.max_asks = max_asks
        self.max_id = max_id
        self.max_backlog = max_backlog
        self.predicates_timeout = predicates_timeout
        self.hello_timeout = hello_timeout
        self.idle_timeout = idle_timeout
        self.write_timeout = write_timeout

    def check_ids(self, what: str, ids: Any) -> None:
        """Raise ``SchedulerError`` naming the first of ``ids`` longer than ``max_id``."""
        limit = self.max_id
        for item in ids:
            if isinstance(item, str) and len(item) > limit:
                raise SchedulerError(
                    f"{what} id of {len(item):,} characters is over the limit of {limit:,} "
                    f"(the daemon's --max-id): {item[:40]}..."
                )

    def check_asks(self, request: si.AllocationRequest) -> None:
        """Raise ``SchedulerError`` for more asks than ``max_asks``, or an id too long."""
        asks = request.asks
        if len(asks) > self.max_asks:
            raise SchedulerError(
                f"the request holds {len(asks):,} asks, over the limit of "
                f"{self.max_asks:,} (the daemon's --max-asks): send them in parts"
            )
        limit = self.max_id
        for ask in asks:  # one pass; the long id, if any, named as check_ids names it
            key, app = ask.allocation_key, ask.application_id
            if (isinstance(key, str) and len(key) > limit) or (
                isinstance(app, str) and len(app) > limit
            ):
                self.check_ids("allocation key", (a.allocation_key for a in asks))
                self.check_ids("application", (a.application_id for a in asks))


class NativeServer:
    """Serves the core to RMs on listeners (``serve``); ``config`` is the queue
    configuration an RM that registers with none gets (the daemon's ``--config``).
    ``edge`` is where both transports send the RMs' SI calls: the core, or with
    ``--record`` a ``RecordingCore`` in front of it (``scheduler.daemon._record``)."""

    def __init__(
        self,
        core: Core,
        *,
        token: str = "",
        limits: Limits | None = None,
        edge: RecordingCore | None = None,
    ) -> None:
        self.core = core
        self.edge: Core | RecordingCore = core if edge is None else edge
        self.token = token
        self.limits = limits or Limits()
        self.config = ""
        self.sessions: set[Session] = set()
        self.rm_ids: set[str] = set()  # RMs registered through this server
        # The outbox of each RM registered here, kept while it may resume its session.
        self.outboxes: Outboxes[bytes] = Outboxes()

    async def serve(self, listener: Listener[Any]) -> None:
        """Take connections until cancelled; each is served in a task of the listener's."""
        await listener.serve(self._handle)

    async def _handle(self, stream: ByteStream) -> None:
        keep_alive(stream, self.limits.idle_timeout)
        session = Session(self, stream)
        self.sessions.add(session)
        try:
            await session.run()
        finally:
            self.sessions.discard(session)

    async def shut_down(self, reason: str, grace: float) -> None:
        """Every connected RM: no more calls are taken, those in flight are answered, then
        goodbye with ``reason``. Returns when all are gone, or after ``grace`` seconds."""
        for session in list(self.sessions):
            session.shut_down(reason)
        with anyio.move_on_after(grace):
            while self.sessions:
                await anyio.sleep(0.01)


class Session:
    """One connected RM."""

    def __init__(self, server: NativeServer, stream: ByteStream) -> None:
        self.server = server
        self.stream = stream
        self.limits = server.limits
        send, receive = anyio.create_memory_object_stream[bytes | None](math.inf)
        self._out_send, self._out_receive = send, receive
        self._backlog = 0
        calls_send, calls_receive = anyio.create_memory_object_stream["Call"](math.inf)
        self._calls_send, self._calls_receive = calls_send, calls_receive
        self._replies: dict[int, anyio.Event] = {}
        self._answers: dict[int, bool | si.PreemptionPredicatesResponse] = {}
        self._next_ask = 0
        self._closing = ""
        self._ended = False  # nothing more goes out
        self._greeted = anyio.Event()
        self._heard = 0  # reads that brought something (the watchdog compares)
        self._sends = 0  # sends begun
        self._sending = False  # one is under way
        self._read_scope = anyio.CancelScope()
        self._farewell = ""  # said after the last answer (a graceful shutdown)
        self._scope: anyio.CancelScope | None = None
        self.rm_id = ""
        # The outboxes of the RMs registered (or resumed) here, by session token; the
        # latest is sent once the call's result is queued (``_attach``).
        self.outboxes: dict[str, Outbox[bytes]] = {}
        self.outbox: Outbox[bytes] | None = None
        self._attach = False
        self.peer = _peer(stream)
        self.log = _log.bind(peer=self.peer)

    # ============================================================================ run
    async def run(self) -> None:
        lost = True  # the RM's connection is lost, unless the daemon stops
        try:
            async with anyio.create_task_group() as tg:
                self._scope = tg.cancel_scope
                tg.start_soon(self._write)
                tg.start_soon(self._read_all)
                tg.start_soon(self._watch)
                await self._work()  # until the reader is done: every call answered
                if self._farewell:
                    self._queue(encode(Goodbye(message=self._farewell)), force=True)
                self._end_output()  # the writer sends what is queued, then the session ends
        except anyio.get_cancelled_exc_class():
            lost = False
            raise
        except Exception:
            self.log.exception("session of {} failed", self.peer)
        finally:
            for event in self._replies.values():
                event.set()  # predicates waiting for this RM: refused
            self.close_queues()
            for box in self.outboxes.values():
                if box.detach(self) and lost and not self._farewell:
                    # no goodbye of a daemon that stops: the RM is Paused
                    # (Core.rm_disconnected), its outbox keeps what it is sent to resume
                    self.server.edge.rm_disconnected(box.rm_id, box.callback)
            with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                await self.stream.aclose()

    def close_queues(self) -> None:
        """Nothing more goes in or out of this session's queues."""
        self._ended = True
        for end in (self._out_send, self._out_receive, self._calls_send, self._calls_receive):
            end.close()

    def close(self, reason: str) -> None:
        """Send ``Goodbye(reason)`` after what is queued, then end the session."""
        if not self._closing:
            self._closing = reason
            self.log.info("closing the connection of {}: {}", self.rm_id or self.peer, reason)
            self._queue(encode(Goodbye(message=reason)), force=True)
            self._end_output()

    def shut_down(self, reason: str) -> None:
        """Take no more calls, answer those already read, then say goodbye with
        ``reason``: the daemon stops."""
        if not self._closing and not self._farewell:
            self._farewell = reason
            self._read_scope.cancel()

    def _end_output(self) -> None:
        if not self._ended:
            self._ended = True
            self._out_send.send_nowait(None)

    async def _read_all(self) -> None:
        try:
            with self._read_scope:
                await self._read()
        finally:
            self._calls_send.close()  # the worker answers what came, then stops

    async def _read(self) -> None:
        reader = FrameReader(self.limits.max_frame)
        hello = False
        while not self._closing:
            try:
                data = await self.stream.receive(RECEIVE_BYTES)
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                return
            self._heard += 1
            try:
                bodies = reader.frames(data)
            except WireError as exc:
                self.close(f"{exc} (the daemon's --max-frame)")
                return
            for body in bodies:
                try:
                    message = decode_from_rm(body)
                except WireError as exc:
                    self.close(str(exc))
                    return
                if not hello:
                    hello = True
                    if not self._hello(message):
                        return
                    continue
                if isinstance(message, Received):
                    box = self.outboxes.get(message.session)
                    if box is not None:
                        box.ack(0, message.count)
                elif isinstance(message, CallbackReply | PreemptionReply):
                    self._reply(message)
                elif isinstance(message, Hello):
                    self.close("a second hello")
                    return
                elif isinstance(message, Ping | Pong):
                    if isinstance(message, Ping):
                        self._queue(encode(Pong()), force=True)
                else:
                    self._calls_send.send_nowait(message)

    def _hello(self, message: object) -> bool:
        if not isinstance(message, Hello):
            self.close("the first frame must be a hello")
            return False
        if message.version != PROTOCOL_VERSION:
            self.close(
                f"protocol version {message.version} is not {PROTOCOL_VERSION}: "
                "use a client of the same release as the daemon"
            )
            return False
        token = self.server.token
        if token and message.token != token:
            self.close("authentication failed: wrong or missing token")
            return False
        self._queue(encode(Welcome()))
        self._greeted.set()
        return True

    async def _write(self) -> None:
        """Send what is queued, in order: all the frames that wait go out in one send (up
        to ``_WRITE_BYTES``), so answers to calls in flight do not cost a send each."""
        receive = self._out_receive
        end = False
        async for data in receive:
            if data is None:
                break
            batch = [data]
            size = len(data)
            while size < _WRITE_BYTES:
                try:
                    more = receive.receive_nowait()
                except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                    break
                if more is None:
                    end = True
                    break
                batch.append(more)
                size += len(more)
            self._backlog -= len(batch)
            self._sends += 1
            self._sending = True
            try:
                await self.stream.send(data if len(batch) == 1 else b"".join(batch))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                break
            self._sending = False
            if end:
                break
        if self._scope is not None:
            self._scope.cancel()  # goodbye said (or the RM is gone): the session ends

    async def _watch(self) -> None:
        """Cut off a peer that stalls (module docstring); checked a third of the shorter
        of the idle and write timeouts apart."""
        limits = self.limits
        with anyio.move_on_after(limits.hello_timeout):
            await self._greeted.wait()
        if not self._greeted.is_set():
            self.close(f"no hello within {limits.hello_timeout:g}s (the daemon's --hello-timeout)")
        tick = min(limits.idle_timeout, limits.write_timeout) / 3
        now = anyio.current_time
        heard, heard_at = self._heard, now()
        pinged_at = heard_at
        sends, stuck_at = self._sends, heard_at
        while True:
            await anyio.sleep(tick)
            at = now()
            if self._heard != heard:
                heard, heard_at, pinged_at = self._heard, at, at
            elif at - heard_at >= limits.idle_timeout:
                self.close(
                    f"nothing heard from the RM for {at - heard_at:.1f}s, pings unanswered "
                    "(the daemon's --idle-timeout)"
                )
            elif at - pinged_at >= limits.idle_timeout / 3 and not self._closing:
                pinged_at = at
                self._queue(encode(Ping()), force=True)
            if not self._sending or self._sends != sends:
                sends, stuck_at = self._sends, at
            elif at - stuck_at >= limits.write_timeout:
                self._cut(
                    f"the RM took nothing of a send for {at - stuck_at:.1f}s "
                    "(the daemon's --write-timeout)"
                )
                return

    def _cut(self, reason: str) -> None:
        """End the session at once, without a goodbye: the RM does not read."""
        self.log.info("cutting off {}: {}", self.rm_id or self.peer, reason)
        self._closing = self._closing or reason
        if self._scope is not None:
            self._scope.cancel()

    def _queue(self, data: bytes, *, force: bool = False) -> None:
        if self._ended:
            return
        if not force and self._backlog >= self.limits.max_backlog:
            self.close(
                f"the RM reads too slowly: {self._backlog:,} frames wait for it "
                "(the daemon's --max-backlog)"
            )
            return
        self._backlog += 1
        self._out_send.send_nowait(data)

    # ========================================================================== calls
    async def _work(self) -> None:
        """Run the calls in order; those already read run one after the other without a
        turn of the event loop between them (their answers then go out together)."""
        receive = self._calls_receive
        while True:
            try:
                call = receive.receive_nowait()
            except anyio.WouldBlock:
                try:
                    call = await receive.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    return
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return
            result = await self._call(call)
            del call  # the request and its asks are freed before the next call is read
            self._queue(encode(result))
            if self._attach and self.outbox is not None:
                # registered or resumed: what the RM has not had goes out after the result
                self._attach = False
                for _, frame in self.outbox.attach(self):
                    self._queue(frame)

    async def _call(self, call: Call) -> Result:
        core = self.server.edge
        try:
            value: Any = None
            if isinstance(call, RegisterCall):
                value = await self._register(call)
            elif isinstance(call, ResumeCall):
                self._resume(call)
            elif isinstance(call, NodeCall):
                self.limits.check_ids("node", (n.node_id for n in call.request.nodes))
                await core.update_node(call.request)
            elif isinstance(call, ApplicationCall):
                self.limits.check_ids("application", (a.application_id for a in call.request.new))
                await core.update_application(call.request)
            elif isinstance(call, AllocationCall):
                self.limits.check_asks(call.request)
                await core.update_allocation(call.request)
            elif isinstance(call, ConfigurationCall):
                await core.update_configuration(call.request)
            else:
                value = await self._query(call)
            return Result(id=call.id, value=value)
        except (SchedulerError, NotFoundError) as exc:
            return Result(id=call.id, error=type(exc).__name__, message=str(exc))
        except Exception as exc:
            self.log.exception("call {} of {} failed", type(call).__name__, self.rm_id)
            return Result(id=call.id, error="Error", message=f"{type(exc).__name__}: {exc}")

    async def _register(self, call: RegisterCall) -> Any:
        request = call.request
        if not request.config and self.server.config:
            request.config = self.server.config
        outbox: Outbox[bytes] = Outbox(request.rm_id, self.limits.max_backlog)
        outbox.callback = callback = _stand_in(outbox, set(call.overrides))
        await self.server.edge.register_resource_manager(request, callback)
        self._own(outbox)
        self.server.outboxes.add(outbox, self.server.edge.is_registered)
        self.server.rm_ids.add(request.rm_id)
        self.log.info("resource manager {} registered from {}", self.rm_id, self.peer)
        return {"session": outbox.token}

    def _resume(self, call: ResumeCall) -> None:
        """The RM resumes its session: Running again, and what it has not received goes
        out after the result (``Outbox``)."""
        core = self.server.edge
        received = {0: call.received}
        outbox = self.server.outboxes.resume(
            call.rm_id, call.session, received, core.rm_reconnected
        )
        old = outbox.owner
        if isinstance(old, Session) and old is not self:  # its loss not yet seen
            old.close("the resource manager resumed its session on another connection")
        self._own(outbox)
        self.log.info("resource manager {} resumed its session from {}", self.rm_id, self.peer)

    def _own(self, outbox: Outbox[bytes]) -> None:
        for token, box in list(self.outboxes.items()):
            if box.rm_id == outbox.rm_id:  # registered again on this connection
                box.detach(self)
                del self.outboxes[token]
        self.outboxes[outbox.token] = outbox
        self.outbox = outbox
        self.rm_id = outbox.rm_id
        self._attach = True
        self.log = _log.bind(peer=self.peer, rm_id=self.rm_id)

    async def _query(self, call: QueryCall) -> Any:
        if call.method == "stop_resource_manager" and len(call.args) == 1:
            return await self._stop(call.args[0])
        return await run_query(self.server.core, call.method, call.args)

    async def _stop(self, rm_id: str) -> None:
        await stop_own_rm(self.server.edge, self.rm_id, rm_id, self.log)

    # ====================================================================== callbacks
    def push(self, data: bytes) -> None:
        self._queue(data)

    async def ask_predicates(self, args: si.PredicatesArgs) -> bool:
        answer = await self._ask(lambda ask_id: PredicatesAsk(id=ask_id, args=args))
        return answer if isinstance(answer, bool) else False

    async def ask_preemption_predicates(
        self, args: si.PreemptionPredicatesArgs
    ) -> si.PreemptionPredicatesResponse:
        answer = await self._ask(lambda ask_id: PreemptionPredicatesAsk(id=ask_id, args=args))
        if isinstance(answer, si.PreemptionPredicatesResponse):
            return answer
        return refuse_preemption()

    async def _ask(
        self, question: Callable[[int], PredicatesAsk | PreemptionPredicatesAsk]
    ) -> bool | si.PreemptionPredicatesResponse | None:
        """Send the RM ``question(id)`` and wait for its reply; None when none comes within
        ``predicates_timeout`` or the RM is gone (the caller refuses)."""
        if self._closing:
            return None
        self._next_ask += 1
        ask_id = self._next_ask
        event = anyio.Event()
        self._replies[ask_id] = event
        self._queue(encode(question(ask_id)))
        try:
            with anyio.move_on_after(self.limits.predicates_timeout):
                await event.wait()
        finally:
            self._replies.pop(ask_id, None)
        return self._answers.pop(ask_id, None)

    def _reply(self, reply: CallbackReply | PreemptionReply) -> None:
        event = self._replies.get(reply.id)
        if event is not None:
            if isinstance(reply, CallbackReply):
                self._answers[reply.id] = reply.allowed
            else:
                self._answers[reply.id] = reply.response
            event.set()


# What each callback method tells the RM, as the frame that carries it.
_TOLD: dict[str, Callable[[Any], Told]] = {
    "update_allocation": lambda response: AllocationPush(response=response),
    "update_application": lambda response: ApplicationPush(response=response),
    "update_node": lambda response: NodePush(response=response),
    "send_event": lambda events: EventsPush(events=events),
    "update_container_scheduling_state": lambda request: SchedulingStatePush(request=request),
}


def _stand_in(outbox: Outbox[bytes], overrides: set[str]) -> ResourceManagerCallback:
    """The RM's callback inside the core: it overrides what the RM's own callback
    overrides. What it is told goes into the RM's outbox (and to the session that owns
    it, if one does); its questions go to that session, and are refused while none does.
    ``dropped`` counts what the outbox could not keep."""

    def teller(wrap: Callable[[Any], Told]) -> Callable[[Any, Any], Awaitable[None]]:
        async def tell(self: Any, payload: Any) -> None:
            frame = encode(wrap(payload))
            if outbox.push(0, frame):
                cast(Session, outbox.owner).push(frame)

        return tell

    namespace: dict[str, Any] = {
        method: teller(wrap) for method, wrap in _TOLD.items() if method in overrides
    }
    namespace["dropped"] = property(lambda self: outbox.dropped)
    if "predicates" in overrides:

        async def predicates(self: Any, args: si.PredicatesArgs) -> bool:
            owner = outbox.owner
            return isinstance(owner, Session) and await owner.ask_predicates(args)

        namespace["predicates"] = predicates
    if "preemption_predicates" in overrides:

        async def preemption_predicates(
            self: Any, args: si.PreemptionPredicatesArgs
        ) -> si.PreemptionPredicatesResponse:
            owner = outbox.owner
            if not isinstance(owner, Session):
                return refuse_preemption()
            return await owner.ask_preemption_predicates(args)

        namespace["preemption_predicates"] = preemption_predicates
    cls = type("RemoteResourceManager", (ResourceManagerCallback,), namespace)
    return cls()  # type: ignore[no-any-return]


def _peer(stream: ByteStream) -> str:
    from anyio.abc import SocketAttribute

    try:
        address = stream.extra(SocketAttribute.remote_address)
    except Exception:
        return "?"
    if isinstance(address, tuple):
        return f"{address[0]}:{address[1]}"
    return str(address) or "unix"
