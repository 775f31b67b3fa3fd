"""The native transport's wire (``scheduler.si._wire``): frames split at any byte come out
whole, every message round-trips, and nothing a peer sends crashes a decoder: it decodes
to a message or is refused with ``WireError``."""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler import si
from scheduler.daemon._native import Limits, NativeServer, Session
from scheduler.si._wire import (
    AllocationCall,
    AllocationPush,
    CallbackReply,
    FrameReader,
    Goodbye,
    Hello,
    Ping,
    Pong,
    PredicatesAsk,
    PreemptionPredicatesAsk,
    PreemptionReply,
    QueryCall,
    RegisterCall,
    Result,
    WireError,
    decode_from_daemon,
    decode_from_rm,
    encode,
)

FROM_RM = [
    Hello(token="t"),
    RegisterCall(
        id=1,
        request=si.RegisterResourceManagerRequest(rm_id="rm-1", config="x: 1"),
        overrides=["update_allocation", "predicates", "preemption_predicates"],
    ),
    AllocationCall(
        id=2,
        request=si.AllocationRequest(
            rm_id="rm-1",
            asks=[
                si.AllocationAsk(
                    allocation_key="k",
                    application_id="a",
                    resource_ask=si.Resource.of(memory=10, vcore=1),
                    tags={"x": "y"},
                    max_allocations=3,
                )
            ],
        ),
    ),
    QueryCall(id=3, method="get_queue", args=["default", "root"]),
    CallbackReply(id=4, allowed=False),
    PreemptionReply(id=6, response=si.PreemptionPredicatesResponse(success=True, index=2)),
    Ping(),
    Pong(),
]
FROM_DAEMON = [
    Result(id=1, value={"a": [1, 2]}),
    Result(id=2, error="NotFoundError", message="no"),
    AllocationPush(
        response=si.AllocationResponse(
            new=[si.Allocation(uuid="u", allocation_key="k", node_id="n1", placeholder=True)]
        )
    ),
    PredicatesAsk(id=5, args=si.PredicatesArgs(allocation_key="k", node_id="n1", allocate=True)),
    PreemptionPredicatesAsk(
        id=6,
        args=si.PreemptionPredicatesArgs(
            allocation_key="k", node_id="n1", preempt_allocation_keys=["v1", "v2"], start_index=1
        ),
    ),
    Goodbye(message="bye"),
    Ping(),
    Pong(),
]


@pytest.mark.parametrize("message", FROM_RM, ids=lambda m: type(m).__name__)
def test_what_an_rm_sends_round_trips(message: Any) -> None:
    [body] = FrameReader().feed(encode(message))
    assert decode_from_rm(body) == message


@pytest.mark.parametrize("message", FROM_DAEMON, ids=lambda m: type(m).__name__)
def test_what_the_daemon_sends_round_trips(message: Any) -> None:
    [body] = FrameReader().feed(encode(message))
    assert decode_from_daemon(body) == message


def test_a_ping_is_a_tag_and_nothing_else() -> None:
    """Pings are sent every third of --idle-timeout to an RM that says nothing: 12 bytes."""
    assert encode(Ping()) == b"\x00\x00\x00\x08\x81\xa1t\xa4ping"
    assert decode_from_rm(encode(Pong())[4:]) == Pong()


def test_the_spec_field_names_are_on_the_wire() -> None:
    body = encode(FROM_RM[2])[4:]
    doc = msgspec.msgpack.decode(body)
    ask = doc["request"]["asks"][0]
    assert ask["allocationKey"] == "k" and ask["applicationID"] == "a"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(FROM_RM + FROM_DAEMON), max_size=8), st.data())
def test_frames_cut_anywhere_come_out_whole(messages: list[Any], data: st.DataObject) -> None:
    stream = b"".join(encode(m) for m in messages)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    reader = FrameReader()
    bodies: list[bytes] = []
    at = 0
    for cut in [*cuts, len(stream)]:
        bodies += reader.feed(stream[at:cut])
        at = cut
    assert bodies == [encode(m)[4:] for m in messages]


def test_a_frame_over_the_limit_is_refused_before_it_is_read() -> None:
    reader = FrameReader(limit=100)
    with pytest.raises(WireError, match="over the limit of 100"):
        reader.feed((101).to_bytes(4, "big"))


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_decode_or_are_refused(body: bytes) -> None:
    for decode in (decode_from_rm, decode_from_daemon):
        with contextlib.suppress(WireError):
            decode(body)


_TAGS = ["hello", "register", "node", "application", "allocation", "configuration", "query"]
_TAGS += ["reply", "welcome", "result", "alloc", "app", "nodes", "events", "state", "bye"]
_TAGS += ["predicates", "preemption", "preemption_reply", "nope"]
_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=10,
)
_fields = ["id", "request", "asks", "nodes", "rmID", "token", "version", "args", "response"]


@settings(max_examples=500, deadline=None)
@given(
    st.sampled_from(_TAGS),
    st.dictionaries(st.sampled_from(_fields) | st.text(max_size=6), _values, max_size=5),
)
def test_messages_of_any_shape_decode_or_are_refused(tag: str, fields: dict[str, Any]) -> None:
    body = msgspec.msgpack.encode({"t": tag, **fields})
    for decode in (decode_from_rm, decode_from_daemon):
        with contextlib.suppress(WireError):
            decode(body)


# ======================================================================= a slow RM
class _Stuck:
    """A stream nobody reads: a send never completes."""

    async def send(self, data: bytes) -> None:  # pragma: no cover - never reached here
        raise AssertionError("not sent in this test")

    def extra(self, attribute: object) -> object:
        raise LookupError(attribute)


@pytest.mark.asyncio
async def test_an_rm_that_does_not_read_is_disconnected_not_buffered() -> None:
    server = NativeServer(core=None, limits=Limits(max_backlog=3))  # type: ignore[arg-type]
    session = Session(server, _Stuck())  # type: ignore[arg-type]
    for _ in range(3):
        session.push(encode(AllocationPush(response=si.AllocationResponse())))
    assert not session._closing
    session.push(encode(AllocationPush(response=si.AllocationResponse())))
    assert "reads too slowly: 3 frames wait" in session._closing
    for _ in range(1000):  # nothing more is kept for it
        session.push(encode(AllocationPush(response=si.AllocationResponse())))
    assert session._backlog == 4  # the three, and the goodbye
    session.close_queues()
