"""The native transport's wire: SI structs as length-prefixed MessagePack frames.

A frame is a 4-byte big-endian length, then that many bytes of MessagePack: one envelope
message, a tagged msgspec struct. The RM (``scheduler.client``) sends ``Hello`` first, then
calls; the daemon (``scheduler.daemon._native``) answers each call with a ``Result`` of the same
id and pushes the RM's callbacks as they happen, in order, on the same stream. A callback
that answers is an ask the RM answers with a reply of the same id: ``predicates`` is a
``PredicatesAsk`` answered by a ``CallbackReply``, ``preemption_predicates`` a
``PreemptionPredicatesAsk`` answered by a ``PreemptionReply``. Either side may send a
``Ping``, which the other answers with a ``Pong`` at once: the daemon pings an RM it has
heard nothing from for a while, and closes a connection that stays silent past its
``--idle-timeout``. Everything an RM can send
is one tagged union and everything the daemon sends another, each decoded by a
``msgspec.msgpack.Decoder`` built once: a frame decodes straight into typed SI structs, and
anything else is refused (``WireError``).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from scheduler import si

__all__ = [
    "MAX_FRAME",
    "PROTOCOL_VERSION",
    "RECEIVE_BYTES",
    "Call",
    "CallbackReply",
    "FrameReader",
    "Hello",
    "Ping",
    "Pong",
    "PreemptionPredicatesAsk",
    "PreemptionReply",
    "Push",
    "Received",
    "Result",
    "ResumeCall",
    "Told",
    "Welcome",
    "WireError",
    "decode_from_daemon",
    "decode_from_rm",
    "encode",
]

# 2: Ping and Pong, which a client of version 1 cannot read; sessions resume
# (``ResumeCall``), the RM acknowledges what it received (``Received``), and ``register``'s
# result names the session.
PROTOCOL_VERSION: Final = 2
MAX_FRAME: Final = 64 * 1024 * 1024  # bytes; the daemon's --max-frame default
# The most one read of the stream takes. asyncio reads up to 256 KiB at a time and anyio
# copies a chunk it has to cut down to the size asked for: ask for more than that.
RECEIVE_BYTES: Final = 1 << 20
_HEADER: Final = 4


class WireError(ValueError):
    """A frame that is too large or does not decode: the connection cannot go on."""


class _Envelope(msgspec.Struct, tag_field="t", kw_only=True, omit_defaults=True):
    pass


# ===================================================================== RM -> daemon
class Hello(_Envelope, tag="hello"):
    """The first frame of a connection: the protocol version and the shared token."""

    version: int = PROTOCOL_VERSION
    token: str = ""


class RegisterCall(_Envelope, tag="register"):
    id: int
    request: si.RegisterResourceManagerRequest
    # The callback methods the RM's callback overrides: the daemon's stand-in overrides
    # the same ones, so the core asks predicates (and preemption predicates) and reports
    # scheduling states exactly as it would in-process. A daemon ignores a name it does
    # not know, and a client that does not name ``preemption_predicates`` (one older than
    # it) is never asked it.
    overrides: list[str] = []


class NodeCall(_Envelope, tag="node"):
    id: int
    request: si.NodeRequest


class ApplicationCall(_Envelope, tag="application"):
    id: int
    request: si.ApplicationRequest


class AllocationCall(_Envelope, tag="allocation"):
    id: int
    request: si.AllocationRequest


class ConfigurationCall(_Envelope, tag="configuration"):
    id: int
    request: si.UpdateConfigurationRequest


class QueryCall(_Envelope, tag="query"):
    """``settle`` or one of the core's queries, by name, with string arguments."""

    id: int
    method: str
    args: list[str] = []


class CallbackReply(_Envelope, tag="reply"):
    """The RM's answer to a ``PredicatesAsk``."""

    id: int
    allowed: bool = True


class PreemptionReply(_Envelope, tag="preemption_reply"):
    """The RM's answer to a ``PreemptionPredicatesAsk``."""

    id: int
    response: si.PreemptionPredicatesResponse


class ResumeCall(_Envelope, tag="resume"):
    """Resume the session of a registered RM on a new connection (its old one was lost):
    the daemon sends what the RM has not received, then goes on as before. ``received``
    counts the pushes (``AllocationPush``, ``ApplicationPush``, ``NodePush``,
    ``EventsPush``, ``SchedulingStatePush``) the RM had since the ``register`` result of
    its session."""

    id: int
    rm_id: str
    session: str
    received: int


class Received(_Envelope, tag="received"):
    """The RM has received ``count`` pushes in session ``session`` (counted as for
    ``ResumeCall``): the daemon need not keep them for a resume."""

    session: str
    count: int


# ==================================================================== either way
class Ping(_Envelope, tag="ping"):
    """Are you there? The other side answers ``Pong`` as soon as it reads this."""


class Pong(_Envelope, tag="pong"):
    """The answer to a ``Ping``."""


Call = (
    RegisterCall
    | ResumeCall
    | NodeCall
    | ApplicationCall
    | AllocationCall
    | ConfigurationCall
    | QueryCall
)
FromRM = Hello | Call | CallbackReply | PreemptionReply | Received | Ping | Pong


# ===================================================================== daemon -> RM
class Welcome(_Envelope, tag="welcome"):
    version: int = PROTOCOL_VERSION


class Result(_Envelope, tag="result"):
    """The answer to a call: ``value``, or an error by its type's name and its message."""

    id: int
    value: Any = None
    error: str = ""  # "SchedulerError", "NotFoundError", "ConfigError", "Error"
    message: str = ""


class AllocationPush(_Envelope, tag="alloc"):
    response: si.AllocationResponse


class ApplicationPush(_Envelope, tag="app"):
    response: si.ApplicationResponse


class NodePush(_Envelope, tag="nodes"):
    response: si.NodeResponse


class EventsPush(_Envelope, tag="events"):
    events: list[si.EventRecord]


class SchedulingStatePush(_Envelope, tag="state"):
    request: si.UpdateContainerSchedulingStateRequest


class PredicatesAsk(_Envelope, tag="predicates"):
    id: int
    args: si.PredicatesArgs


class PreemptionPredicatesAsk(_Envelope, tag="preemption"):
    """``preemption_predicates``, asked only of an RM that named it at registration; ids
    are shared with ``PredicatesAsk``."""

    id: int
    args: si.PreemptionPredicatesArgs


class Goodbye(_Envelope, tag="bye"):
    """The daemon closes the connection, and why (a bad frame, a wrong token, shutdown)."""

    message: str


# What the RM's callback is told (kept for a resume and counted in ``Received``).
Told = AllocationPush | ApplicationPush | NodePush | EventsPush | SchedulingStatePush
Push = (
    AllocationPush
    | ApplicationPush
    | NodePush
    | EventsPush
    | SchedulingStatePush
    | PredicatesAsk
    | PreemptionPredicatesAsk
)
FromDaemon = Welcome | Result | Push | Goodbye | Ping | Pong

_encoder = msgspec.msgpack.Encoder()
_from_rm: msgspec.msgpack.Decoder[FromRM] = msgspec.msgpack.Decoder(FromRM)
_from_daemon: msgspec.msgpack.Decoder[FromDaemon] = msgspec.msgpack.Decoder(FromDaemon)


def encode(message: _Envelope) -> bytes:
    """One frame: the length, then the message."""
    body = _encoder.encode(message)
    return len(body).to_bytes(_HEADER, "big") + body


def decode_from_rm(body: bytes | memoryview) -> FromRM:
    try:
        return _from_rm.decode(body)
    except msgspec.DecodeError as exc:
        raise WireError(f"malformed frame: {exc}") from None


def decode_from_daemon(body: bytes | memoryview) -> FromDaemon:
    try:
        return _from_daemon.decode(body)
    except msgspec.DecodeError as exc:
        raise WireError(f"malformed frame: {exc}") from None


class FrameReader:
    """Splits a byte stream into frame bodies; refuses a frame over ``limit`` bytes before
    reading it.

    Each chunk is kept as it came until the frame it belongs to is complete: a frame that
    arrives in one chunk is not copied at all (``frames`` hands out views into the chunk),
    and one spread over many chunks is joined once.
    """

    __slots__ = ("_parts", "_size", "_want", "limit")

    def __init__(self, limit: int = MAX_FRAME) -> None:
        self._parts: list[bytes | memoryview] = []  # an incomplete frame's chunks, as they came
        self._size = 0  # their bytes
        self._want = _HEADER  # the bytes they need before anything can be split off
        self.limit = limit

    def feed(self, data: bytes) -> list[bytes]:
        """The frames ``data`` completes (possibly none), each its own ``bytes``.

        Raises:
            WireError: A frame announces more than ``limit`` bytes.
        """
        return [bytes(view) for view in self.frames(data)]

    def frames(self, data: bytes) -> list[memoryview]:
        """As ``feed``, the bodies as read-only views into the chunks they came in (no
        copy): for decoding straight away.

        Raises:
            WireError: A frame announces more than ``limit`` bytes.
        """
        if self._parts:
            self._parts.append(data)
            self._size += len(data)
            if self._size < self._want:
                return []
            data = b"".join(self._parts)
            self._parts = []
        view = memoryview(data)
        out: list[memoryview] = []
        at = 0
        end = len(data)
        want = _HEADER
        while end - at >= _HEADER:
            size = int.from_bytes(view[at : at + _HEADER], "big")
            if size > self.limit:
                raise WireError(
                    f"frame of {size:,} bytes is over the limit of {self.limit:,} bytes"
                )
            start = at + _HEADER
            stop = start + size
            if stop > end:
                want = _HEADER + size
                break
            out.append(view[start:stop])
            at = stop
        if at < end:
            self._parts = [view[at:] if at else data]
            self._size = end - at
            self._want = want
        return out
