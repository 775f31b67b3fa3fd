"""``scheduler serve --record FILE``: every SI request the RMs send and every response the
core gives them, stamped with the core's clock, in a file that ``scheduler simulate
--replay`` plays back against an in-process core (``scheduler.simulate._replay``).

Where it is taken: one place for both transports. A transport calls the core's SI entry
points through its server's ``edge``: the ``Core`` itself, or with ``--record`` a
``RecordingCore`` in front of it, which writes each request down before the core takes it,
and registers the RM with a callback that writes down each response before the transport's
own stand-in sends it. The registration is written with the configuration text the core
got and the callback methods the RM overrides (which decide whether the core asks
predicates); the end of a connection (the RM Paused), its resumption and the RM's own stop
are written as events, and so is a request the core refused, with its reason. The answers
to predicate questions are written too, so a replay can give the same answers. Events for
people (``send_event``) are not: they are no decision, and they are the bulk of the traffic.

The file: a run of frames as the native transport's wire has them (``scheduler.si._wire``:
a 4-byte big-endian length, then MessagePack), each one ``Record``: its sequence number,
the core's clock as wall-clock Unix nanoseconds, its kind, the RM, the message's type and
the message, a ``_wire`` envelope (``AllocationCall``, ``AllocationPush``...). It begins with
a header (our version, the SI version).

Bounded and rotated: past ``max_bytes`` the file becomes ``FILE.1`` (``FILE.1`` becomes
``FILE.2``..., ``keep`` files in all) and a new one begins with a header and a restatement
of every registration in force (with its current configuration), so each file replays on
its own. A file already at ``FILE`` when the daemon starts is rotated the same way.

Cost: a record is encoded when it happens (a request may change after it is handed on) and
appended to a buffer; the ``Recorder``'s task, one of the daemon's, writes the buffer in a
worker thread when it passes ``flush_bytes`` or every ``interval`` seconds, so the event
loop never waits for the disk. A buffer that passes ``buffer_limit`` (the disk cannot keep
up) drops what comes and writes down how many records it lost.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import anyio
import anyio.to_thread
import msgspec
from loguru import logger

from scheduler import si
from scheduler._errors import NotFoundError, SchedulerError
from scheduler.si._callback import (
    CALLBACK_METHODS,
    OPTIONAL_CALLBACK_METHODS,
    ResourceManagerCallback,
    overrides,
)
from scheduler.si._versions import SI_VERSION
from scheduler.si._wire import (
    AllocationCall,
    AllocationPush,
    ApplicationCall,
    ApplicationPush,
    ConfigurationCall,
    FrameReader,
    NodeCall,
    NodePush,
    RegisterCall,
    SchedulingStatePush,
    WireError,
    decode_from_daemon,
    decode_from_rm,
)

if TYPE_CHECKING:
    from scheduler.core import Core

__all__ = [
    "FORMAT",
    "Answer",
    "Event",
    "Header",
    "Record",
    "Recorder",
    "RecordingCore",
    "check_record_path",
    "read_records",
    "recording_files",
]

_log = logger.bind(component="record")

FORMAT: Final = 1  # the record format's version, in the header

# Record kinds.
HEADER: Final = "header"
REQUEST: Final = "request"  # from an RM to the core
RESPONSE: Final = "response"  # from the core to an RM
EVENT: Final = "event"  # connection events, refusals, gaps
ANSWER: Final = "answer"  # an RM's answer to a predicates question
REGISTRATION: Final = "registration"  # a registration in force, restated at a file's start

_LENGTH: Final = 4
_READ_BYTES: Final = 1 << 20


class Header(msgspec.Struct, kw_only=True):
    """The first record of every file."""

    format: int = FORMAT
    version: str = ""  # pyscheduler-core's
    si_version: str = SI_VERSION
    part: int = 0  # files begun before this one since the recording started
    started: int = 0  # Unix ns of the core's clock when the recording started


class Event(msgspec.Struct, kw_only=True):
    """Something that is not an SI message: ``what`` is ``disconnected`` (the RM's
    connection ended: Paused), ``reconnected`` (it resumed its session), ``stopped`` (it
    shut down of its own accord), ``refused`` (the core refused the request numbered
    ``request``: ``detail`` says why) or ``lost`` (``count`` records dropped: the disk fell
    behind)."""

    what: str
    detail: str = ""
    count: int = 0
    request: int = 0


class Answer(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An RM's answer to a predicates question (``predicates``: whether it ``allowed``
    it) or to a preemption predicates question (``preemption``: its ``response``)."""

    predicates: si.PredicatesArgs | None = None
    allowed: bool = False
    preemption: si.PreemptionPredicatesArgs | None = None
    response: si.PreemptionPredicatesResponse | None = None


class Record(msgspec.Struct, array_like=True, kw_only=True):
    """One record of a recording, as ``read_records`` gives it.

    Attributes:
        seq: its number, counted from 1 since the recording started (a header and the
            restatements after it carry the number of the record before them).
        at: the core's clock, wall-clock Unix nanoseconds.
        kind: ``header``, ``request``, ``response``, ``event``, ``answer`` or
            ``registration``.
        rm_id: the RM it is about ("" for a header).
        type: the message's type: an SI message's name (``AllocationRequest``,
            ``AllocationResponse``, ``RegisterResourceManagerRequest``...), or ``Header``,
            ``Event``, ``Answer``.
        message: the message, MessagePack; ``decode`` reads it.
    """

    seq: int
    at: int
    kind: str
    rm_id: str
    type: str
    message: msgspec.Raw

    def decode(self) -> Any:
        """The message: a ``_wire`` envelope for an SI message (``RegisterCall``,
        ``NodeCall``, ``AllocationPush``...), else a ``Header``, ``Event`` or ``Answer``.

        Raises:
            WireError: the message does not decode.
        """
        decoder = _DECODERS.get(self.type)
        try:
            if decoder is not None:
                return decoder.decode(self.message)
            if self.kind == RESPONSE:
                return decode_from_daemon(self.message)
            return decode_from_rm(self.message)
        except msgspec.DecodeError as exc:
            raise WireError(f"record {self.seq}: {self.type} does not decode: {exc}") from None


class _Out(msgspec.Struct, array_like=True):
    """A record as it is written: the message encoded in the same pass."""

    seq: int
    at: int
    kind: str
    rm_id: str
    type: str
    message: Any


_DECODERS: dict[str, msgspec.msgpack.Decoder[Any]] = {
    "Header": msgspec.msgpack.Decoder(Header),
    "Event": msgspec.msgpack.Decoder(Event),
    "Answer": msgspec.msgpack.Decoder(Answer),
}
_encoder = msgspec.msgpack.Encoder()
_record_decoder = msgspec.msgpack.Decoder(Record)


def _version() -> str:
    try:
        return metadata.version("pyscheduler-core")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


# ============================================================================ reading
def recording_files(path: Path) -> list[Path]:
    """``path`` and its rotated files that exist, oldest first (``FILE.3``, ``FILE.2``,
    ``FILE.1``, ``FILE``)."""
    rotated = []
    n = 1
    while Path(f"{path}.{n}").exists():
        rotated.append(Path(f"{path}.{n}"))
        n += 1
    return [*reversed(rotated), *([path] if path.exists() else [])]


def read_records(path: Path) -> Iterator[Record]:
    """The records of one file, in order.

    Raises:
        SchedulerError: the file cannot be read, is not a recording (no header first, or
            no whole record at all), or a record is malformed (named by its position); a
            file cut short in its last record (the daemon was killed) ends there without
            an error.
    """
    reader = FrameReader(1 << 31)
    first = True
    try:
        with path.open("rb") as file:
            while chunk := file.read(_READ_BYTES):
                for body in reader.frames(chunk):
                    try:
                        record = _record_decoder.decode(body)
                    except msgspec.DecodeError as exc:
                        raise SchedulerError(f"{path}: a malformed record: {exc}") from None
                    if first and record.kind != HEADER:
                        raise SchedulerError(
                            f"{path} is not a recording of scheduler serve --record "
                            "(it does not begin with a header)"
                        )
                    first = False
                    yield record
    except OSError as exc:
        raise SchedulerError(f"cannot read the recording {path}: {exc.strerror}") from None
    except WireError as exc:
        if first:  # not even a header: some other file
            raise SchedulerError(f"{path} is not a recording of scheduler serve --record") from None
        raise SchedulerError(f"{path}: {exc}") from None
    if first:  # empty, or a text the frame reader took for a first frame cut short
        raise SchedulerError(
            f"{path} is not a recording of scheduler serve --record (it holds no whole record)"
        )


# ============================================================================ writing
def check_record_path(path: Path) -> None:
    """Refuse a ``--record`` path the daemon could not write, before it serves.

    Raises:
        SchedulerError: its directory does not exist or is not writable, or it is a
            directory.
    """
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise SchedulerError(f"--record {path}: the directory {parent} does not exist")
    if path.is_dir():
        raise SchedulerError(f"--record {path}: that is a directory; name a file in it")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise SchedulerError(f"--record {path}: the directory {parent} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise SchedulerError(f"--record {path}: the file is not writable")


class _Registered(msgspec.Struct):
    """A registration in force, as a file's restatement says it (its configuration
    follows ``update_configuration``); ``None`` as the value of an effect: it ended."""

    call: RegisterCall


# What a buffered record changes in the registrations in force: (rm_id, the new one or None).
_Effect = tuple[str, "_Registered | None"]


class Recorder:
    """Writes records to ``path`` (see the module): ``add`` from the event loop, ``run``
    as a task of the daemon's task group, ``aclose`` at shutdown.

    Args:
        path: the file; its directory must exist (``check_record_path``).
        wall: the core's clock now, as wall-clock Unix nanoseconds.
        max_bytes: a file past this many bytes is rotated.
        keep: how many files are kept, this one included.
        flush_bytes: the buffer is written once it holds this many bytes ...
        interval: ... or this many seconds after the last write.
        buffer_limit: past this many bytes waiting, records are dropped (and counted).
    """

    def __init__(
        self,
        path: Path,
        *,
        wall: Callable[[], int],
        max_bytes: int = 100 << 20,
        keep: int = 3,
        flush_bytes: int = 1 << 20,
        interval: float = 0.5,
        buffer_limit: int = 256 << 20,
    ) -> None:
        if max_bytes < 1 or keep < 1:
            raise SchedulerError("--record-max-bytes and --record-keep must be at least 1")
        self.path = path
        self.wall = wall
        self.max_bytes = max_bytes
        self.keep = keep
        self.flush_bytes = flush_bytes
        self.interval = interval
        self.buffer_limit = buffer_limit
        self.seq = 0
        self.lost = 0  # records dropped since the last write
        self.written = 0  # records written in all
        self.rotations = 0
        self._started = 0
        self._pending: list[bytes | _Effect] = []
        self._pending_bytes = 0
        self._registered: dict[str, _Registered] = {}  # as of the last record written
        self._size = 0  # bytes in the current file
        self._file: Any = None
        self._wake = anyio.Event()
        self._closed = False
        self._writing = anyio.Lock()  # one batch at a time, and the close after the last

    def __repr__(self) -> str:
        return (
            f"<Recorder {self.path} seq={self.seq} waiting={self._pending_bytes} "
            f"rotations={self.rotations} lost={self.lost}>"
        )

    def open(self) -> None:
        """Begin the recording (rotating a file already there) with its header.

        Raises:
            SchedulerError: the file cannot be written (naming it and why).
        """
        check_record_path(self.path)
        self._started = self.wall()
        try:
            if self.path.exists() and self.path.stat().st_size:
                self._shift()
            self._file = self.path.open("wb")
            self._write(self._preamble(0))
            self._file.flush()
        except OSError as exc:
            raise SchedulerError(f"--record {self.path}: {exc.strerror}") from None

    # ---------------------------------------------------------------- the event loop's side
    def add(self, kind: str, rm_id: str, type_: str, message: Any) -> int:
        """Encode one record and buffer it; returns its number (0: not kept)."""
        if self._closed:
            return 0
        if self._pending_bytes >= self.buffer_limit:
            self.lost += 1
            return 0
        self.seq += 1
        data = _encoder.encode(_Out(self.seq, self.wall(), kind, rm_id, type_, message))
        self._pending.append(len(data).to_bytes(_LENGTH, "big") + data)
        self._pending_bytes += len(data) + _LENGTH
        if self._pending_bytes >= self.flush_bytes:
            self._wake.set()
        return self.seq

    def registered(self, rm_id: str, call: RegisterCall | None) -> None:
        """The registrations in force change after the record just added: ``rm_id``
        registered with ``call``, or (None) is gone."""
        self._pending.append((rm_id, None if call is None else _Registered(call)))

    async def run(self) -> None:
        """Write what is buffered, in batches, until cancelled; then the rest."""
        try:
            while not self._closed:
                with anyio.move_on_after(self.interval):
                    await self._wake.wait()
                self._wake = anyio.Event()
                await self.flush()
        finally:
            with anyio.CancelScope(shield=True):
                await self.aclose()

    async def flush(self) -> None:
        """Write everything buffered so far (in a worker thread)."""
        async with self._writing:
            await self._flush()

    async def _flush(self) -> None:
        if self._file is None or (not self._pending and not self.lost):
            return
        pending, self._pending, self._pending_bytes = self._pending, [], 0
        if self.lost:  # the buffer has room again: say how many records it had not
            lost, self.lost = self.lost, 0
            self.add(EVENT, "", "Event", Event(what="lost", count=lost))
            pending.extend(self._pending)
            self._pending, self._pending_bytes = [], 0
        segments = self._segments(pending)
        try:
            await anyio.to_thread.run_sync(self._write_segments, segments)
        except OSError as exc:
            _log.error("recording to {} failed, it stops: {}", self.path, exc)
            self._closed = True

    async def aclose(self) -> None:
        """Write what is buffered and close the file; later records are not kept."""
        async with self._writing:
            if self._file is None:
                return
            await self._flush()
            self._closed = True
            file, self._file = self._file, None
            await anyio.to_thread.run_sync(file.close)
        _log.info("recording {} closed: {} records", self.path, self.written)

    def _segments(self, pending: list[bytes | _Effect]) -> list[tuple[bool, list[bytes]]]:
        """``pending`` cut where the file is to rotate: (rotate first, the records), each
        rotated segment led by the preamble of its file."""
        segments: list[tuple[bool, list[bytes]]] = [(False, [])]
        size = self._size
        for item in pending:
            if isinstance(item, tuple):
                rm_id, reg = item
                if reg is None:
                    self._registered.pop(rm_id, None)
                else:
                    self._registered[rm_id] = reg
                continue
            if size >= self.max_bytes:
                self.rotations += 1
                preamble = self._preamble(self.rotations)
                segments.append((True, preamble))
                size = sum(map(len, preamble))
            segments[-1][1].append(item)
            size += len(item)
        return segments

    def _preamble(self, part: int) -> list[bytes]:
        """A file's header and the registrations in force, restated."""
        at = self.wall()
        header = Header(version=_version(), part=part, started=self._started)
        out = [_frame(_Out(self.seq, at, HEADER, "", "Header", header))]
        for rm_id, reg in self._registered.items():
            record = _Out(self.seq, at, REGISTRATION, rm_id, _REQUEST_TYPE[RegisterCall], reg.call)
            out.append(_frame(record))
        return out

    # ---------------------------------------------------------------- the worker thread's side
    def _write_segments(self, segments: list[tuple[bool, list[bytes]]]) -> None:
        for rotate, records in segments:
            if rotate:
                self._file.close()
                self._shift()
                self._file = self.path.open("wb")
                self._size = 0
            self._write(records)
        self._file.flush()

    def _write(self, records: list[bytes]) -> None:
        data = b"".join(records)
        self._file.write(data)
        self._size += len(data)
        self.written += len(records)

    def _shift(self) -> None:
        """``FILE`` becomes ``FILE.1``, ``FILE.1`` ``FILE.2``...; the oldest beyond ``keep``
        go."""
        n = self.keep
        while Path(f"{self.path}.{n}").exists():
            Path(f"{self.path}.{n}").unlink()
            n += 1
        for i in range(self.keep - 2, 0, -1):
            older = Path(f"{self.path}.{i}")
            if older.exists():
                older.replace(f"{self.path}.{i + 1}")
        if self.keep > 1:
            self.path.replace(f"{self.path}.1")
        else:
            self.path.unlink()


def _frame(record: _Out) -> bytes:
    data = _encoder.encode(record)
    return len(data).to_bytes(_LENGTH, "big") + data


# ======================================================================= the SI edge
# Each request's envelope and its type's name.
_REQUEST_TYPE: dict[type, str] = {
    RegisterCall: "RegisterResourceManagerRequest",
    NodeCall: "NodeRequest",
    ApplicationCall: "ApplicationRequest",
    AllocationCall: "AllocationRequest",
    ConfigurationCall: "UpdateConfigurationRequest",
}


class RecordingCore:
    """The core's SI entry points as the transports call them (their server's ``edge``),
    each request written down before the core takes it; see the module.

    An RM is registered with a callback of its own (``_recording_callback``) in front of
    the transport's: ``is_registered``, ``rm_disconnected`` and ``rm_reconnected`` take the
    transport's and find the one the core knows.
    """

    def __init__(self, core: Core, recorder: Recorder) -> None:
        self.core = core
        self.recorder = recorder
        self._callbacks: weakref.WeakKeyDictionary[object, ResourceManagerCallback] = (
            weakref.WeakKeyDictionary()
        )
        self._registrations: dict[str, RegisterCall] = {}  # in force, by RM

    def __repr__(self) -> str:
        return f"<RecordingCore {self.recorder!r}>"

    async def register_resource_manager(
        self, request: si.RegisterResourceManagerRequest, callback: ResourceManagerCallback
    ) -> si.RegisterResourceManagerResponse:
        """``Core.register_resource_manager``, recorded with the methods ``callback``
        overrides."""
        names = [
            m for m in (*CALLBACK_METHODS, *OPTIONAL_CALLBACK_METHODS) if overrides(callback, m)
        ]
        call = RegisterCall(id=0, request=request, overrides=names)
        recorder = self.recorder
        seq = recorder.add(REQUEST, request.rm_id, _REQUEST_TYPE[RegisterCall], call)
        recording = _recording_callback(callback, request.rm_id, recorder)
        try:
            response = await self.core.register_resource_manager(request, recording)
        except (SchedulerError, NotFoundError) as exc:
            self._refused(request.rm_id, seq, exc)
            raise
        self._callbacks[callback] = recording
        self._registrations[request.rm_id] = call
        recorder.registered(request.rm_id, call)
        return response

    async def update_node(self, request: si.NodeRequest) -> None:
        """``Core.update_node``, recorded."""
        await self._request(NodeCall(id=0, request=request), request.rm_id, self.core.update_node)

    async def update_application(self, request: si.ApplicationRequest) -> None:
        """``Core.update_application``, recorded."""
        await self._request(
            ApplicationCall(id=0, request=request), request.rm_id, self.core.update_application
        )

    async def update_allocation(self, request: si.AllocationRequest) -> None:
        """``Core.update_allocation``, recorded."""
        await self._request(
            AllocationCall(id=0, request=request), request.rm_id, self.core.update_allocation
        )

    async def update_configuration(self, request: si.UpdateConfigurationRequest) -> None:
        """``Core.update_configuration``, recorded; the registration restated in later
        files carries the new configuration."""
        await self._request(
            ConfigurationCall(id=0, request=request),
            request.rm_id,
            self.core.update_configuration,
        )
        old = self._registrations.get(request.rm_id)
        if old is not None:
            updated = msgspec.structs.replace(old.request, config=request.config)
            call = RegisterCall(id=0, request=updated, overrides=old.overrides)
            self._registrations[request.rm_id] = call
            self.recorder.registered(request.rm_id, call)

    async def stop_resource_manager(self, rm_id: str) -> None:
        """``Core.stop_resource_manager``, recorded as an event."""
        await self.core.stop_resource_manager(rm_id)
        self._event(rm_id, "stopped")
        self._registrations.pop(rm_id, None)
        self.recorder.registered(rm_id, None)

    def is_registered(self, rm_id: str, callback: object) -> bool:
        """``Core.is_registered`` with the transport's callback."""
        return self.core.is_registered(rm_id, self._callbacks.get(callback, callback))

    def rm_disconnected(self, rm_id: str, callback: object = None) -> bool:
        """``Core.rm_disconnected`` with the transport's callback, recorded as an event."""
        paused = self.core.rm_disconnected(rm_id, self._callbacks.get(callback, callback))
        if paused:
            self._event(rm_id, "disconnected")
        return paused

    def rm_reconnected(self, rm_id: str, callback: object) -> bool:
        """``Core.rm_reconnected`` with the transport's callback, recorded as an event."""
        resumed = self.core.rm_reconnected(rm_id, self._callbacks.get(callback, callback))
        if resumed:
            self._event(rm_id, "reconnected")
        return resumed

    async def _request(self, call: Any, rm_id: str, run: Callable[[Any], Any]) -> None:
        seq = self.recorder.add(REQUEST, rm_id, _REQUEST_TYPE[type(call)], call)
        try:
            await run(call.request)
        except (SchedulerError, NotFoundError) as exc:
            self._refused(rm_id, seq, exc)
            raise

    def _refused(self, rm_id: str, seq: int, exc: Exception) -> None:
        event = Event(what="refused", detail=f"{type(exc).__name__}: {exc}", request=seq)
        self.recorder.add(EVENT, rm_id, "Event", event)

    def _event(self, rm_id: str, what: str) -> None:
        self.recorder.add(EVENT, rm_id, "Event", Event(what=what))


def _recording_callback(
    callback: ResourceManagerCallback, rm_id: str, recorder: Recorder
) -> ResourceManagerCallback:
    """A callback in front of ``callback`` that overrides what it overrides (the core
    asks predicates and inspects outstanding asks as it would for ``callback``), writes
    down each response and each answer, and hands everything on. Events for people
    (``send_event``) are handed on unwritten."""
    add = recorder.add

    def teller(method: str, envelope: Callable[[Any], Any], type_: str) -> Any:
        inner = getattr(callback, method)

        async def tell(self: Any, payload: Any) -> None:
            add(RESPONSE, rm_id, type_, envelope(payload))
            await inner(payload)

        return tell

    namespace: dict[str, Any] = {
        "dropped": property(lambda self: int(getattr(callback, "dropped", 0))),
        "inner": callback,
    }
    told = {
        "update_allocation": (lambda r: AllocationPush(response=r), "AllocationResponse"),
        "update_application": (lambda r: ApplicationPush(response=r), "ApplicationResponse"),
        "update_node": (lambda r: NodePush(response=r), "NodeResponse"),
        "update_container_scheduling_state": (
            lambda r: SchedulingStatePush(request=r),
            "UpdateContainerSchedulingStateRequest",
        ),
    }
    for method, (envelope, type_) in told.items():
        # The responses are written whether the RM listens or not (they are the core's
        # decisions); a scheduling state only when the RM asked for them (the core
        # inspects outstanding asks only then).
        if method != "update_container_scheduling_state" or overrides(callback, method):
            namespace[method] = teller(method, envelope, type_)
    send_event = callback.send_event

    async def events(self: Any, records: list[si.EventRecord]) -> None:
        await send_event(records)

    namespace["send_event"] = events
    if overrides(callback, "predicates"):
        predicates = callback.predicates

        async def ask(self: Any, args: si.PredicatesArgs) -> bool:
            allowed = await predicates(args)
            add(ANSWER, rm_id, "Answer", Answer(predicates=args, allowed=allowed))
            return allowed

        namespace["predicates"] = ask
    if overrides(callback, "preemption_predicates"):
        preemption = callback.preemption_predicates

        async def ask_preemption(
            self: Any, args: si.PreemptionPredicatesArgs
        ) -> si.PreemptionPredicatesResponse:
            response = await preemption(args)
            add(ANSWER, rm_id, "Answer", Answer(preemption=args, response=response))
            return response

        namespace["preemption_predicates"] = ask_preemption
    cls = type("RecordingCallback", (ResourceManagerCallback,), namespace)
    return cls()  # type: ignore[no-any-return]
