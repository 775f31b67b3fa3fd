"""The core's event log (scheduler.core._event_log) and YuniKorn's event endpoints over it:
``/ws/v1/events/batch`` and the streaming ``/ws/v1/events/stream``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import anyio
import httpx
import pytest
import pytest_asyncio

import scheduler
from scheduler import si
from scheduler.core._event_log import EventLog, Subscription, event_record
from scheduler.daemon import _rest
from scheduler.daemon._rest import make_app
from scheduler.testing import ErrorWatch, RecordingCallback, Scenario, gang_tags, start_scenario

from ..daemon.test_rest import conforms

Json = Any
APP = si.EventRecordType.APP


def record(n: int) -> si.EventRecord:
    return si.EventRecord(type=APP, object_id=f"app-{n}", message=str(n), timestamp_nano=n)


def messages(records: list[si.EventRecord]) -> list[int]:
    return [int(r.message) for r in records]


def filled(capacity: int, sent: int) -> EventLog:
    log = EventLog(capacity)
    log.extend([record(n) for n in range(sent)])
    return log


# =============================================================================== the log
def test_an_empty_log() -> None:
    log = EventLog(5)
    assert (log.lowest_id, log.highest_id, len(log)) == (0, -1, 0)
    assert log.get() == []
    assert log.get(0, 10) == []
    assert log.recent(3) == []


def test_ids_count_every_event_from_zero() -> None:
    log = filled(10, 4)
    assert (log.lowest_id, log.highest_id, len(log)) == (0, 3, 4)
    assert messages(log.get()) == [0, 1, 2, 3]
    log.extend([])
    log.extend([record(4), record(5)])
    assert (log.lowest_id, log.highest_id) == (0, 5)


def test_the_log_keeps_the_newest_capacity_events() -> None:
    log = filled(5, 12)
    assert (log.lowest_id, log.highest_id, len(log)) == (7, 11, 5)
    assert messages(log.get()) == [7, 8, 9, 10, 11]  # the id of an event is its number


@pytest.mark.parametrize(
    ("start", "count", "expected"),
    [
        (None, None, [7, 8, 9, 10, 11]),
        (7, None, [7, 8, 9, 10, 11]),
        (9, None, [9, 10, 11]),
        (9, 2, [9, 10]),
        (11, 5, [11]),
        (8, 0, []),
        (6, 3, []),  # no longer kept: nothing, as YuniKorn answers
        (0, 3, []),
        (12, 3, []),  # not yet sent
        (None, 2, [7, 8]),
    ],
)
def test_get_from_start_at_most_count(
    start: int | None, count: int | None, expected: list[int]
) -> None:
    assert messages(filled(5, 12).get(start, count)) == expected


def test_recent_and_bad_arguments() -> None:
    log = filled(5, 12)
    assert messages(log.recent(2)) == [10, 11]
    assert messages(log.recent(50)) == [7, 8, 9, 10, 11]
    assert log.recent(0) == []
    with pytest.raises(ValueError, match="count"):
        log.get(7, -1)
    with pytest.raises(ValueError, match="capacity"):
        EventLog(0)
    with pytest.raises(ValueError, match="limit"):
        log.subscribe(0)


def test_each_core_has_its_own_instance_id() -> None:
    assert EventLog().instance_uuid != EventLog().instance_uuid
    assert EventLog(instance_uuid="x").instance_uuid == "x"


# ========================================================================= subscriptions
def test_a_subscriber_gets_what_is_sent_after_it_subscribed() -> None:
    log = filled(10, 3)
    sub = log.subscribe(5)
    assert sub.take() == []
    log.extend([record(3), record(4)])
    log.extend([record(5)])
    assert messages(sub.take()) == [3, 4, 5]
    assert sub.take() == []
    assert log.subscribers == 1 and not sub.closed


def test_history_comes_first_and_at_most_the_limit() -> None:
    log = filled(10, 8)
    assert messages(log.subscribe(5, history=2).take()) == [6, 7]
    assert messages(log.subscribe(3, history=100).take()) == [5, 6, 7]


def test_a_subscriber_that_falls_behind_is_cut_off() -> None:
    log = EventLog(100)
    slow, fast = log.subscribe(3), log.subscribe(10)
    log.extend([record(0), record(1)])
    assert messages(fast.take()) == [0, 1]
    log.extend([record(2), record(3), record(4)])  # the fourth finds slow's queue full
    assert slow.closed and slow.reason == "cut off: the reader fell 3 events behind"
    assert log.subscribers == 1  # never offered anything again
    log.extend([record(5)])
    assert messages(slow.take()) == [0, 1, 2]  # what was queued can still be read
    assert slow.take() == []
    assert messages(fast.take()) == [2, 3, 4, 5]  # the others go on
    assert not fast.closed


def test_closing_the_log_ends_every_subscription_with_its_first_reason() -> None:
    log = EventLog(10)
    a, b = log.subscribe(), log.subscribe()
    a.close("gone")
    log.close("the core stopped")
    assert (a.reason, b.reason, log.subscribers) == ("gone", "the core stopped", 0)
    assert "closed (gone)" in repr(a) and "subscribers=0" in repr(log)


@pytest.mark.asyncio
async def test_a_waiting_subscriber_wakes_when_an_event_comes_or_it_ends() -> None:
    log = EventLog(10)
    sub = log.subscribe()
    async with anyio.create_task_group() as tg:
        woke = anyio.Event()

        async def reader(s: Subscription) -> None:
            await s.wait()
            woke.set()

        tg.start_soon(reader, sub)
        await anyio.wait_all_tasks_blocked()
        assert not woke.is_set()
        log.extend([record(0)])
        with anyio.fail_after(5):
            await woke.wait()
        assert messages(sub.take()) == [0]
        woke = anyio.Event()
        tg.start_soon(reader, sub)
        await anyio.wait_all_tasks_blocked()
        log.close("stopped")
        with anyio.fail_after(5):
            await woke.wait()
    await sub.wait()  # ended: returns at once


# ============================================================================ in the core
QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: default
"""


@pytest_asyncio.fixture
async def s() -> AsyncIterator[Scenario]:
    with ErrorWatch() as errors:
        async with start_scenario(QUEUES) as scenario:
            yield scenario
    assert not errors, errors.report()


async def some_events(s: Scenario) -> None:
    """Application state changes, a gang's placeholders and their replacement."""
    await s.add_nodes("n1", "n2")
    await s.submit("app-1")
    await s.ask("app-1", "work", count=2, memory=10, vcore=1)
    await s.submit_gang("spark", {"driver": 1, "executor": 2})
    await s.submit("p-1")
    await s.ask("p-1", "m1", tags=gang_tags("g1", 2))
    await s.remove("app-1")


def core_of(s: Scenario) -> scheduler.Core:
    assert isinstance(s.core, scheduler.Core)
    return s.core


@pytest.mark.asyncio
async def test_the_log_holds_what_the_rm_received_in_the_same_order(s: Scenario) -> None:
    await some_events(s)
    log = core_of(s).events
    assert len(s.rm.events) > 10
    assert log.get() == s.rm.events
    assert all(a is b for a, b in zip(log.get(), s.rm.events, strict=True))  # the same records
    assert (log.lowest_id, log.highest_id) == (0, len(s.rm.events) - 1)


@pytest.mark.asyncio
async def test_two_rms_each_see_their_events_in_log_order() -> None:
    other_rm = RecordingCallback()
    second = QUEUES.replace("name: default\n    queues", "name: other\n    queues", 1)
    async with start_scenario(QUEUES) as s:
        t = Scenario(s.core, s.clock, other_rm, rm_id="rm-2", partition="other")
        await t.register(second)
        for n in range(3):
            await s.submit(f"a-{n}")
            await t.submit(f"b-{n}")
        await s.remove("a-0")
        await t.remove("b-1")
        log = core_of(s).events.get()
        assert len(log) == len(s.rm.events) + len(other_rm.events)
        for rm in (s.rm, other_rm):
            mine = {id(r) for r in rm.events}
            assert [r for r in log if id(r) in mine] == rm.events


@pytest.mark.asyncio
async def test_the_log_is_bounded_as_configured() -> None:
    async with scheduler.start_scheduler(event_capacity=3) as core:
        async with start_scenario(QUEUES) as s:  # another core: its own log
            assert core_of(s).events is not core.events
        assert core.events.capacity == 3
    async with start_scenario(QUEUES) as s:
        await some_events(s)
        log = core_of(s).events
        assert log.capacity == 10_000 and len(log) == len(s.rm.events)


@pytest.mark.asyncio
async def test_leaving_the_core_ends_the_subscriptions() -> None:
    async with scheduler.start_scheduler() as core:
        sub = core.events.subscribe()
    assert sub.reason == "the scheduler core stopped"


# ========================================================================== batch (REST)
@pytest_asyncio.fixture
async def client(s: Scenario) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=make_app(core_of(s)))
    async with httpx.AsyncClient(transport=transport, base_url="http://scheduler") as c:
        yield c


async def batch(client: httpx.AsyncClient, **query: int | str) -> Json:
    r = await client.get("/ws/v1/events/batch", params=query)
    assert r.status_code == 200, r.text
    body = r.json()
    assert not conforms(body, {"$ref": "#/components/schemas/EventRecords"}), conforms(
        body, {"$ref": "#/components/schemas/EventRecords"}
    )
    return body


@pytest.mark.asyncio
async def test_batch_events(s: Scenario, client: httpx.AsyncClient) -> None:
    log = core_of(s).events
    empty = await batch(client)
    assert empty == {
        "InstanceUUID": log.instance_uuid,
        "LowestID": 0,
        "HighestID": -1,
        "EventRecords": [],
    }
    await some_events(s)
    sent = [event_record(r) for r in s.rm.events]
    body = await batch(client)
    assert body["HighestID"] == len(sent) - 1 and body["EventRecords"] == sent
    assert (await batch(client, start=3, count=2))["EventRecords"] == sent[3:5]
    assert (await batch(client, start=len(sent)))["EventRecords"] == []
    assert {e["type"] for e in sent} >= {int(APP), int(si.EventRecordType.NODE)}
    first = next(e for e in sent if e["type"] == int(APP))
    assert first["objectID"] == "app-1"
    assert set(first) == {"type", "objectID", "referenceID", "reason", "message", "timestampNano"}
    assert first["referenceID"] == "root.default"  # the SI's groupID: the application's queue


@pytest.mark.asyncio
async def test_batch_pages_through_a_wrapped_log() -> None:
    async with scheduler.start_scheduler(event_capacity=4) as core:
        async with start_scenario(QUEUES) as s:
            await some_events(s)
        transport = httpx.ASGITransport(app=make_app(core))
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as c:
            assert (await batch(c))["EventRecords"] == []  # no RM: nothing was sent
        core.events.extend(s.rm.events)  # what another core's RM got, 4 kept
        async with httpx.AsyncClient(transport=transport, base_url="http://x") as c:
            body = await batch(c)
            n = len(s.rm.events)
            assert (body["LowestID"], body["HighestID"]) == (n - 4, n - 1)
            assert body["EventRecords"] == [event_record(r) for r in s.rm.events[-4:]]
            assert (await batch(c, start=0))["EventRecords"] == []  # no longer kept
            pages, start = [], body["LowestID"]
            while page := (await batch(c, start=start, count=3))["EventRecords"]:
                pages.append(page)
                start += len(page)
            assert [len(p) for p in pages] == [3, 1]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "query", ["count=0", "count=-1", "count=x", "start=-2", "start=1.5", "start=", "count=%C2%B2"]
)
async def test_batch_refuses_a_bad_query(client: httpx.AsyncClient, query: str) -> None:
    r = await client.get(f"/ws/v1/events/batch?{query}")
    assert r.status_code == 400, r.text
    assert not conforms(r.json(), {"$ref": "#/components/schemas/YAPIError"})


# ========================================================================= stream (REST)
class Stream:
    """One GET of the stream, driven as an ASGI server would, chunk by chunk.

    ``reading`` cleared is a reader that does not read: the app's next send waits.
    """

    def __init__(self, app: Any, query: dict[str, int] | None = None) -> None:
        self.app = app
        self.query = urlencode(query or {}).encode()
        self.chunks: asyncio.Queue[bytes] = asyncio.Queue()
        self.status = 0
        self.content_type = ""
        self.reading = asyncio.Event()
        self.reading.set()
        self.gone = asyncio.Event()
        self.ended = False
        self._requested = False
        self._buffer = b""

    async def run(self) -> None:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": "/ws/v1/events/stream",
            "raw_path": b"/ws/v1/events/stream",
            "query_string": self.query,
            "root_path": "",
            "headers": [(b"host", b"scheduler")],
            "server": ("scheduler", 80),
            "client": ("reader", 1234),
        }
        await self.app(scope, self._receive, self._send)

    async def _receive(self) -> dict[str, Any]:
        if not self._requested:
            self._requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict[str, Any]) -> None:
        await self.reading.wait()
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.content_type = dict(message["headers"])[b"content-type"].decode()
        elif message.get("body"):
            await self.chunks.put(message["body"])
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            self.ended = True

    async def line(self) -> Json:
        """The next line, as JSON."""
        while b"\n" not in self._buffer:
            with anyio.fail_after(5):
                self._buffer += await self.chunks.get()
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    async def lines(self, n: int) -> list[Json]:
        return [await self.line() for _ in range(n)]


@pytest.mark.asyncio
async def test_the_stream_sends_events_as_they_happen(s: Scenario) -> None:
    core = core_of(s)
    await s.submit("before")
    stream = Stream(make_app(core), {"count": 1})
    async with anyio.create_task_group() as tg:
        tg.start_soon(stream.run)
        assert await stream.line() == {"InstanceUUID": core.events.instance_uuid}
        assert await stream.line() == event_record(s.rm.events[-1])  # one past event
        assert stream.status == 200 and stream.content_type == "application/x-ndjson"
        for step in range(3):
            seen = len(s.rm.events)
            await s.submit(f"app-{step}")
            new = s.rm.events[seen:]
            assert new, "a submission sends events"
            assert await stream.lines(len(new)) == [event_record(r) for r in new]
            assert stream.chunks.empty()
        assert core.events.subscribers == 1
        stream.gone.set()  # the client goes away while nothing comes
    assert core.events.subscribers == 0
    assert not stream.ended  # cut short: no closing chunk


@pytest.mark.asyncio
async def test_a_reader_that_does_not_read_is_cut_off(
    s: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_rest, "DEFAULT_SUBSCRIBER_LIMIT", 2)
    core = core_of(s)
    stream = Stream(make_app(core))
    async with anyio.create_task_group() as tg:
        stream.reading.clear()  # the first write waits: nothing is read from now on
        tg.start_soon(stream.run)
        await anyio.wait_all_tasks_blocked()
        seen = len(s.rm.events)
        for app in ("app-1", "app-2", "app-3"):
            await s.submit(app)
        sent = s.rm.events[seen:]
        assert len(sent) > 2
        assert core.events.subscribers == 0  # cut off, in the core's turn: nothing piles up
        stream.reading.set()  # the reader comes back
        assert await stream.line() == {"InstanceUUID": core.events.instance_uuid}
        assert await stream.lines(2) == [event_record(r) for r in sent[:2]]
        assert await stream.line() == {
            "status_code": 200,
            "message": "Event stream was closed by the producer",
            "description": "cut off: the reader fell 2 events behind",
        }
    assert stream.ended


@pytest.mark.asyncio
async def test_the_stream_ends_when_the_core_stops() -> None:
    async with scheduler.start_scheduler() as core:
        stream = Stream(make_app(core))
        task = asyncio.get_running_loop().create_task(stream.run())
        assert (await stream.line())["InstanceUUID"] == core.events.instance_uuid
    assert (await stream.line())["description"] == "the scheduler core stopped"
    with anyio.fail_after(5):
        await task
    assert stream.ended


@pytest.mark.asyncio
async def test_stream_query_and_head(s: Scenario, client: httpx.AsyncClient) -> None:
    r = await client.get("/ws/v1/events/stream?count=x")
    assert r.status_code == 400 and r.json()["status_code"] == 400
    r = await client.head("/ws/v1/events/stream")  # answers at once, with no body
    assert r.status_code == 200 and r.content == b""
    assert core_of(s).events.subscribers == 0
