"""One RM over gRPC (``GrpcSession``): its calls, run one at a time in the order they came;
its outgoing queues, one per stream; its (preemption) predicate questions; the RM's
stand-in callback inside the core; and, for an RM with a session stream, the outbox of its
registration (``scheduler.daemon._outbox``) that lets it resume on a new connection. The
server (``scheduler.daemon._grpc``) reads the streams and hands their requests here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import grpc
import grpc.aio
import msgspec
from aiostream import stream
from loguru import logger

from scheduler import si
from scheduler._errors import NotFoundError, SchedulerError
from scheduler.daemon._batching import chunks_within, drain, join_requests, joined
from scheduler.daemon._native import stop_own_rm
from scheduler.daemon._outbox import Outbox
from scheduler.si import si_pb2 as pb
from scheduler.si._callback import (
    CALLBACK_METHODS,
    OPTIONAL_CALLBACK_METHODS,
    ResourceManagerCallback,
    refuse_preemption,
)
from scheduler.si._grpc_codec import from_proto_of, to_proto_of
from scheduler.si._versions import newer_fields, newer_si_message

if TYPE_CHECKING:
    from scheduler.daemon._grpc import GrpcServer

__all__ = [
    "BASE_KEY",
    "CALLBACKS_KEY",
    "ERROR_KEY",
    "KINDS",
    "RESUME_KEY",
    "SESSION_KEY",
    "TOKEN_KEY",
    "GrpcSession",
    "received_counts",
    "received_message",
]

_log = logger.bind(transport="grpc")

SESSION_KEY = "x-scheduler-session"
TOKEN_KEY = "x-scheduler-token"
CALLBACKS_KEY = "x-scheduler-callbacks"
ERROR_KEY = "x-scheduler-error"
# Trailing metadata of RegisterResourceManager on a session: the registration's secret
# (what a Resume names), and what the session had told the RM before it on each stream
# ("allocation,application,node,session"), for the RM to count what it received since.
RESUME_KEY = "x-scheduler-resume"
BASE_KEY = "x-scheduler-base"

_CALLBACKS = frozenset((*CALLBACK_METHODS, *OPTIONAL_CALLBACK_METHODS))
# A plain SI client hears the responses on its streams and nothing else.
_PLAIN_CALLBACKS = frozenset(("update_allocation", "update_application", "update_node"))

_ALLOCATION, _APPLICATION, _NODE = pb.Ack.ALLOCATION, pb.Ack.APPLICATION, pb.Ack.NODE
_SESSION = 0  # the index of the session stream's queue
# The streams, in the order of x-scheduler-base and of a Received's fields.
KINDS = (_ALLOCATION, _APPLICATION, _NODE, _SESSION)
_RECEIVED_FIELDS = ("allocation", "application", "node", "session")


def received_counts(received: pb.Received) -> dict[int, int]:
    """A ``Received`` as counts by stream (``KINDS``)."""
    return {kind: getattr(received, f) for kind, f in zip(KINDS, _RECEIVED_FIELDS, strict=True)}


def received_message(counts: dict[int, int]) -> pb.Received:
    """Counts by stream as a ``Received`` (what the client sends, and resumes with)."""
    fields = {f: counts.get(kind, 0) for kind, f in zip(KINDS, _RECEIVED_FIELDS, strict=True)}
    return pb.Received(**fields)


_GONE = "its streams ended: it closed them, or its connection died (the daemon's --idle-timeout)"

_from_register = from_proto_of(si.RegisterResourceManagerRequest)
_from_allocation = from_proto_of(si.AllocationRequest)
_from_application = from_proto_of(si.ApplicationRequest)
_from_node = from_proto_of(si.NodeRequest)
_from_configuration = from_proto_of(si.UpdateConfigurationRequest)
_to_allocation_response = to_proto_of(si.AllocationResponse)
_to_application_response = to_proto_of(si.ApplicationResponse)
_to_node_response = to_proto_of(si.NodeResponse)
_to_event = to_proto_of(si.EventRecord)
_to_state = to_proto_of(si.UpdateContainerSchedulingStateRequest)
_to_predicates = to_proto_of(si.PredicatesArgs)
_to_preemption = to_proto_of(si.PreemptionPredicatesArgs)
_from_preemption = from_proto_of(si.PreemptionPredicatesResponse)
_JSON = msgspec.json.Encoder()


class _CallError(Exception):
    """A call failed: its gRPC status, and the Python class name of the error."""

    def __init__(self, code: grpc.StatusCode, kind: str, message: str) -> None:
        super().__init__(message)
        self.code, self.kind, self.message = code, kind, message


# A call in a session's queue: what to run, and where its result goes (a future for a
# unary call, the (stream, seq) of the Ack of each stream request it holds).
_Call = tuple[Callable[[], Awaitable[Any]], "asyncio.Future[Any] | list[tuple[int, int]]"]

# At most this many reads (each what a stream had waiting) make one chunk of the
# session's merged streams.
_CHUNK = 64


class GrpcSession:
    """One RM over gRPC: its ordered calls, its outgoing queues, its predicates."""

    def __init__(self, server: GrpcServer, name: str, peer: str, *, plain: bool) -> None:
        self.server = server
        self.name = name
        self.peer = peer
        self.plain = plain  # no session stream: acks and extension callbacks have nowhere to go
        self.rm_id = ""
        self._callback: ResourceManagerCallback | None = None  # registered with the core
        # The outbox of the RM's registration (not for a plain client, which cannot
        # resume), and what this session told the RM on each stream.
        self.outbox: Outbox[Any] | None = None
        self.told = dict.fromkeys(KINDS, 0)
        self.limits = server.limits
        self.pushed = 0  # messages queued for the RM that it counts (not acks)
        self.streams = 0  # the Scheduler streams open in this session
        self.backlog = 0
        self.closing = ""
        self.draining = ""  # the daemon stops: no more calls are taken
        self._queues: dict[int, asyncio.Queue[Any]] = {}
        self._calls: asyncio.Queue[_Call | None] = asyncio.Queue()
        # What the three Scheduler streams read, merged and cut into chunks by the
        # batcher, which hands the worker few calls for a burst of requests.
        self._incoming: dict[int, asyncio.Queue[tuple[int, int, Any] | None]] = {
            kind: asyncio.Queue() for kind in (_ALLOCATION, _APPLICATION, _NODE)
        }
        self._batcher = asyncio.get_running_loop().create_task(self._batch())
        # Questions to the RM waiting for its answer (a refusal when it is gone).
        self._questions: dict[int, asyncio.Future[bool | si.PreemptionPredicatesResponse]] = {}
        self._next_question = 0
        self._worker = asyncio.get_running_loop().create_task(self._work())
        self.log = _log.bind(peer=peer, session=name)

    # ====================================================================== outgoing
    def open_stream(self, kind: int) -> asyncio.Queue[Any]:
        """The queue of stream ``kind`` (what was queued before it opened is kept)."""
        return self._queue(kind)

    def _queue(self, kind: int) -> asyncio.Queue[Any]:
        queue = self._queues.get(kind)
        if queue is None:
            queue = self._queues[kind] = asyncio.Queue()
        return queue

    def push(self, kind: int, message: Any, *, counted: bool = True, told: bool = False) -> None:
        if told:
            self.told[kind] += 1
        if self.closing:
            return
        if self.backlog >= self.limits.max_backlog:
            self.close(
                f"the RM reads too slowly: {self.backlog:,} messages wait for it "
                "(the daemon's --max-backlog)"
            )
            return
        if kind == _SESSION and self.plain:
            return
        self.backlog += 1
        if counted:
            self.pushed += 1
        self._queue(kind).put_nowait(message)

    def close(self, reason: str) -> None:
        """Goodbye with ``reason`` after what is queued; then every stream ends."""
        if self.closing:
            return
        self.closing = reason
        self.log.info("closing the session of {}: {}", self.rm_id or self.peer, reason)
        if not self.plain:
            self._queue(_SESSION).put_nowait(pb.FromDaemon(goodbye=pb.Goodbye(message=reason)))
        for kind in (_ALLOCATION, _APPLICATION, _NODE, _SESSION):
            self._queue(kind).put_nowait(None)
        self._end_calls()
        self._end()

    async def finish(self, reason: str) -> None:
        """The daemon stops: the calls taken are answered, then goodbye."""
        self.draining = reason
        self._end_calls()
        with contextlib.suppress(asyncio.CancelledError):
            await self._worker
        self.close(reason)

    def stream_ended(self) -> None:
        """One of the session's Scheduler streams ended. A plain client (no session
        stream) whose last one ends, closed or broken, is gone once it registered, as a
        native connection that ends is: its RM is Paused after the calls it sent ran."""
        self.streams -= 1
        if self.plain and not self.streams and self.rm_id:
            self.log.info("the last SI stream of {} ended", self.rm_id)
            self.gone()

    def gone(self) -> None:
        """The RM closed its session stream (or a plain client its last SI stream), or
        its connection died."""
        if not self.closing:
            self.closing = "the RM is gone"
            self.log.info("the session of {} ended: {}", self.rm_id or self.peer, _GONE)
            for kind in (_ALLOCATION, _APPLICATION, _NODE, _SESSION):
                self._queue(kind).put_nowait(None)
            self._end_calls()  # the calls taken still run, as on the native transport
            self._end()

    def _end(self) -> None:
        for future in self._questions.values():
            if not future.done():
                future.set_result(False)
        if self.server.sessions.get(self.name) is self:
            del self.server.sessions[self.name]

    # ========================================================================= calls
    async def call(self, run: Callable[[], Awaitable[Any]], metadata: dict[str, str]) -> Any:
        """Run ``run`` in turn; its result, or ``_CallError``."""
        if self.closing or self.draining:
            reason = self.closing or self.draining
            raise _CallError(grpc.StatusCode.UNAVAILABLE, "ConnectionError", reason)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._calls.put_nowait((run, future))
        return await future

    def take_request(self, kind: int, seq: int, request: Any) -> None:
        """A request read from a Scheduler stream, queued; its Ack goes on the session
        stream when it has run."""
        if self.closing or self.draining:
            return
        self._incoming[kind].put_nowait((kind, seq, request))

    def _end_calls(self) -> None:
        """No more calls: the requests read so far still run, then the worker stops."""
        for queue in self._incoming.values():
            queue.put_nowait(None)

    async def _batch(self) -> None:
        """The session's stream requests, merged and chunked, to the worker; when the
        streams end, the worker's end (after the unary calls taken so far)."""
        merged = stream.merge(*(drain(q) for q in self._incoming.values()))
        try:
            chunks = chunks_within(merged, _CHUNK, self.server.batch_window)
            async with chunks.stream() as read:
                async for chunk in read:
                    self._take_chunk([item for batch in chunk for item in batch])
        except Exception:
            self.log.exception("the requests of {} could not be read", self.rm_id or self.peer)
        finally:
            self._calls.put_nowait(None)

    def _take_chunk(self, chunk: list[tuple[int, int, Any]]) -> None:
        """A chunk of stream requests as calls: each checked against the limits (one that
        fails is answered with its error, in its place), the others joined where the core
        may take them in one call (``join_requests``)."""
        limits = self.limits
        taken: list[tuple[int, int, Any]] = []
        for kind, seq, message in chunk:
            try:
                if kind != _APPLICATION and not self.plain:
                    refuse_newer_si(message)
                if kind == _ALLOCATION:
                    request: Any = _from_allocation(message)
                    limits.check_asks(request)
                elif kind == _APPLICATION:
                    request = _from_application(message)
                    limits.check_ids("application", (a.application_id for a in request.new))
                else:
                    request = _from_node(message)
                    limits.check_ids("node", (n.node_id for n in request.nodes))
            except Exception as exc:
                self._put_calls(taken)
                taken = []
                self._calls.put_nowait((_raiser(exc), [(kind, seq)]))
                continue
            taken.append((kind, seq, request))
        self._put_calls(taken)

    def _put_calls(self, taken: list[tuple[int, int, Any]]) -> None:
        core = self.server.edge
        requests = [request for _, _, request in taken]
        for run_of in join_requests(requests, self.limits.max_asks):
            request = joined([requests[i] for i in run_of])
            acks = [(taken[i][0], taken[i][1]) for i in run_of]
            if isinstance(request, si.AllocationRequest):
                call: Callable[[], Awaitable[None]] = partial(core.update_allocation, request)
            elif isinstance(request, si.ApplicationRequest):
                call = partial(core.update_application, request)
            else:
                call = partial(core.update_node, request)
            self._calls.put_nowait((call, acks))

    async def _work(self) -> None:
        while True:
            item = await self._calls.get()
            if item is None:
                owned = self.outbox is None or self.outbox.detach(self)
                if self.rm_id and self.closing and not self.draining and owned:
                    # the calls taken have run; no goodbye of a daemon that stops: the RM
                    # is Paused (Core.rm_disconnected), its outbox keeps what it is told
                    self.server.edge.rm_disconnected(self.rm_id, self._callback)
                return
            run, reply = item
            try:
                value = await run()
            except (SchedulerError, NotFoundError) as exc:
                code = (
                    grpc.StatusCode.NOT_FOUND
                    if isinstance(exc, NotFoundError)
                    else grpc.StatusCode.INVALID_ARGUMENT
                )
                self._reply(reply, error=_CallError(code, type(exc).__name__, str(exc)))
            except Exception as exc:
                self.log.exception("a call of {} failed", self.rm_id or self.peer)
                message = f"{type(exc).__name__}: {exc}"
                self._reply(reply, error=_CallError(grpc.StatusCode.INTERNAL, "Error", message))
            else:
                self._reply(reply, value=value)

    async def stop(self, rm_id: str) -> None:
        """The RM of this session shuts down of its own accord (``stop_own_rm``)."""
        await stop_own_rm(self.server.edge, self.rm_id, rm_id, self.log)

    def _reply(self, reply: Any, *, value: Any = None, error: _CallError | None = None) -> None:
        if isinstance(reply, asyncio.Future):
            if not reply.done():
                if error is None:
                    reply.set_result(value)
                else:
                    reply.set_exception(error)
            return
        if self.plain:
            if error is not None:
                self.log.warning("a request of {} failed: {}", self.rm_id, error.message)
            return
        for kind, seq in reply:
            ack = pb.Ack(stream=kind, seq=seq)
            if error is not None:
                ack.error, ack.message = error.kind, error.message
            self.push(_SESSION, pb.FromDaemon(ack=ack), counted=False)

    async def register(
        self,
        request: si.RegisterResourceManagerRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        native = self.server.native
        if not request.config and native.config:
            request.config = native.config
        metadata = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
        if self.plain:
            overrides = set(_PLAIN_CALLBACKS)
        else:
            named = metadata.get(CALLBACKS_KEY, "")
            overrides = {m for m in named.split(",") if m in _CALLBACKS}
        outbox: Outbox[Any] | None = None
        if not self.plain:
            outbox = Outbox(request.rm_id, self.limits.max_backlog)
        callback = _stand_in(self, overrides, outbox)
        await self.server.edge.register_resource_manager(request, callback)
        self.rm_id = request.rm_id
        self._callback = callback
        native.rm_ids.add(request.rm_id)
        self.log = self.log.bind(rm_id=self.rm_id)
        if outbox is not None:
            outbox.callback = callback
            self.server.outboxes.add(outbox, self.server.edge.is_registered)
            base = ",".join(str(self.told[kind]) for kind in KINDS)
            context.set_trailing_metadata(((RESUME_KEY, outbox.token), (BASE_KEY, base)))
            self._own(outbox)
        self.log.info("resource manager {} registered from {} over gRPC", self.rm_id, self.peer)

    def resume(self, resume: pb.Resume) -> str:
        """The Hello's ``Resume``: the RM's session is this one now, and what it did not
        receive is queued on each stream. Returns why not, or "" when it resumed."""
        counts = received_counts(resume.received)
        core = self.server.edge
        try:
            outbox = self.server.outboxes.resume(
                resume.rm_id, resume.registration, counts, core.rm_reconnected
            )
        except NotFoundError as exc:
            self.log.info("a resume of {} from {} refused: {}", resume.rm_id, self.peer, exc)
            return str(exc)
        old = outbox.owner
        if isinstance(old, GrpcSession) and old is not self:  # its loss not yet seen
            old.close("the resource manager resumed its session on another connection")
        self.rm_id = outbox.rm_id
        self._callback = cast(ResourceManagerCallback, outbox.callback)
        self.log = self.log.bind(rm_id=self.rm_id)
        self._own(outbox)
        self.log.info("resource manager {} resumed its session from {}", self.rm_id, self.peer)
        return ""

    def _own(self, outbox: Outbox[Any]) -> None:
        """This session sends what ``outbox`` is told from now on, after what it kept."""
        if self.outbox is not None and self.outbox is not outbox:
            self.outbox.detach(self)  # registered again on this session
        self.outbox = outbox
        for kind, item in outbox.attach(self):
            self.push(kind, item, told=True)

    def received(self, received: pb.Received) -> None:
        """The RM's count of what it received on each stream: need not be kept."""
        if self.outbox is not None:
            for kind, count in received_counts(received).items():
                self.outbox.ack(kind, count)

    # ==================================================================== predicates
    async def ask_predicates(self, args: si.PredicatesArgs) -> bool:
        def question(number: int) -> pb.FromDaemon:
            asked = pb.PredicatesQuestion(id=number, args=_to_predicates(args))
            return pb.FromDaemon(predicates=asked)

        answer = await self._ask(question)
        return answer if isinstance(answer, bool) else False

    async def ask_preemption_predicates(
        self, args: si.PreemptionPredicatesArgs
    ) -> si.PreemptionPredicatesResponse:
        def question(number: int) -> pb.FromDaemon:
            asked = pb.PreemptionPredicatesQuestion(id=number, args=_to_preemption(args))
            return pb.FromDaemon(preemption_predicates=asked)

        answer = await self._ask(question)
        if isinstance(answer, si.PreemptionPredicatesResponse):
            return answer
        return refuse_preemption()

    async def _ask(
        self, question: Callable[[int], pb.FromDaemon]
    ) -> bool | si.PreemptionPredicatesResponse | None:
        """Put ``question(id)`` to the RM on the session stream and wait for its answer;
        None when none comes within ``predicates_timeout`` (the caller refuses)."""
        if self.closing:
            return None
        self._next_question += 1
        number = self._next_question
        future: asyncio.Future[bool | si.PreemptionPredicatesResponse]
        future = asyncio.get_running_loop().create_future()
        self._questions[number] = future
        self.push(_SESSION, question(number))
        try:
            async with asyncio.timeout(self.limits.predicates_timeout):
                return await future
        except TimeoutError:
            return None
        finally:
            self._questions.pop(number, None)

    def answer(self, answer: pb.PredicatesAnswer) -> None:
        future = self._questions.get(answer.id)
        if future is not None and not future.done():
            future.set_result(bool(answer.allowed))

    def answer_preemption(self, answer: pb.PreemptionPredicatesAnswer) -> None:
        future = self._questions.get(answer.id)
        if future is not None and not future.done():
            if answer.HasField("response"):
                future.set_result(_from_preemption(answer.response))
            else:
                future.set_result(refuse_preemption())


def _stand_in(
    session: GrpcSession, overrides: set[str], outbox: Outbox[Any] | None
) -> ResourceManagerCallback:
    """The RM's callback inside the core: it overrides what the RM named. What it is told
    is queued for the RM on its stream: through the registration's ``outbox`` (kept until
    the RM has it, and sent by the session that owns the outbox, if one does), or, for a
    plain client, on ``session``. Its questions go to the session that has the RM (none
    while it is away: refused). ``dropped`` counts what the outbox could not keep."""

    def tell(kind: int, message: Any) -> None:
        if outbox is None:
            session.push(kind, message, told=True)
        elif outbox.push(kind, message):
            cast(GrpcSession, outbox.owner).push(kind, message, told=True)

    def now() -> GrpcSession | None:
        owner = session if outbox is None else outbox.owner
        return owner if isinstance(owner, GrpcSession) else None

    namespace: dict[str, Any] = {
        "dropped": property(lambda self: 0 if outbox is None else outbox.dropped)
    }
    if "update_allocation" in overrides:

        async def update_allocation(self: Any, response: si.AllocationResponse) -> None:
            tell(_ALLOCATION, _to_allocation_response(response))

        namespace["update_allocation"] = update_allocation
    if "update_application" in overrides:

        async def update_application(self: Any, response: si.ApplicationResponse) -> None:
            tell(_APPLICATION, _to_application_response(response))

        namespace["update_application"] = update_application
    if "update_node" in overrides:

        async def update_node(self: Any, response: si.NodeResponse) -> None:
            tell(_NODE, _to_node_response(response))

        namespace["update_node"] = update_node
    if "send_event" in overrides:

        async def send_event(self: Any, events: list[si.EventRecord]) -> None:
            message = pb.Events()
            message.events.extend(_to_event(e) for e in events)
            tell(_SESSION, pb.FromDaemon(events=message))

        namespace["send_event"] = send_event
    if "predicates" in overrides:

        async def predicates(self: Any, args: si.PredicatesArgs) -> bool:
            owner = now()
            return owner is not None and await owner.ask_predicates(args)

        namespace["predicates"] = predicates
    if "preemption_predicates" in overrides:

        async def preemption_predicates(
            self: Any, args: si.PreemptionPredicatesArgs
        ) -> si.PreemptionPredicatesResponse:
            owner = now()
            if owner is None:
                return refuse_preemption()
            return await owner.ask_preemption_predicates(args)

        namespace["preemption_predicates"] = preemption_predicates
    if "update_container_scheduling_state" in overrides:

        async def update_container_scheduling_state(
            self: Any, request: si.UpdateContainerSchedulingStateRequest
        ) -> None:
            tell(_SESSION, pb.FromDaemon(scheduling_state=_to_state(request)))

        namespace["update_container_scheduling_state"] = update_container_scheduling_state
    cls = type("RemoteResourceManager", (ResourceManagerCallback,), namespace)
    return cls()  # type: ignore[no-any-return]


def refuse_newer_si(request: Any) -> None:
    """Raise ``SchedulerError`` if ``request`` carries fields of a newer SI than ours (an
    RM of YuniKorn 1.5 or later): protobuf would keep them as unknown fields, and the
    core would never see what they say."""
    fields = newer_fields(request)
    if fields:
        raise SchedulerError(newer_si_message(fields))


def _raiser(exc: Exception) -> Callable[[], Awaitable[None]]:
    """A call that fails with ``exc`` (a request refused before it could run)."""

    async def run() -> None:
        raise exc

    return run
