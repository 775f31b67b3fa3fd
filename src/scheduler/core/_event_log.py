"""The core's event log: every event sent to an RM, numbered, in a bounded ring buffer, and
handed on to subscribers (``/ws/v1/events/stream``) through bounded queues.

YuniKorn's event web service (``pkg/events``: a ring buffer with ids, and streaming
consumers that are removed when they fall behind) is the model. The log is plain
synchronous code: ``extend`` runs in the callback actor's turn and never awaits, and a
subscriber only needs an event loop to wait for more.

Ids count every event the core has sent since it started, from 0; the buffer keeps the
last ``capacity`` of them. A subscriber's queue holds at most ``limit`` events: an event
that finds it full cuts the subscriber off (it reads what is queued, then why it ended),
so a slow reader never makes the core buffer without bound.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from collections.abc import Iterable
from itertools import islice
from typing import Any, Final

from scheduler import si
from scheduler._errors import SchedulerError

__all__ = [
    "DEFAULT_CAPACITY",
    "DEFAULT_SUBSCRIBER_LIMIT",
    "EventLog",
    "Subscription",
    "event_record",
]

#: Events the log keeps (YuniKorn's ``event.ringBufferCapacity`` defaults to 100,000).
DEFAULT_CAPACITY: Final = 10_000
#: Events a subscriber may fall behind by before it is cut off (YuniKorn: 1,000).
DEFAULT_SUBSCRIBER_LIMIT: Final = 1_000


class Subscription:
    """One reader of the events as they happen: a bounded queue and why it ended.

    Attributes:
        limit: how many events may wait for the reader.
        reason: why the subscription ended (cut off, unsubscribed, core stopped), or
            ``None`` while it is open.
    """

    __slots__ = ("_log", "_queue", "_wakeup", "limit", "reason")

    def __init__(self, log: EventLog, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a subscriber's limit must be at least 1, got {limit}")
        self._log = log
        self._queue: deque[si.EventRecord] = deque()
        self._wakeup: asyncio.Event | None = None
        self.limit = limit
        self.reason: str | None = None

    @property
    def closed(self) -> bool:
        return self.reason is not None

    def __len__(self) -> int:
        return len(self._queue)

    def offer(self, records: Iterable[si.EventRecord]) -> None:
        """Queue ``records``; the first that finds the queue full cuts the reader off."""
        if self.reason is not None:
            return
        queue = self._queue
        for record in records:
            if len(queue) >= self.limit:
                self.close(f"cut off: the reader fell {self.limit} events behind")
                return
            queue.append(record)
        self._wake()

    def take(self) -> list[si.EventRecord]:
        """Every queued event, oldest first; the queue is empty after."""
        records = list(self._queue)
        self._queue.clear()
        return records

    async def wait(self) -> None:
        """Return once an event is queued or the subscription has ended."""
        while not self._queue and self.reason is None:
            if self._wakeup is None:
                self._wakeup = asyncio.Event()
            await self._wakeup.wait()
            self._wakeup.clear()

    def close(self, reason: str) -> None:
        """End the subscription (the first reason stays); queued events can still be taken."""
        if self.reason is None:
            self.reason = reason
            self._log.unsubscribe(self)
        self._wake()

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def __repr__(self) -> str:
        state = "open" if self.reason is None else f"closed ({self.reason})"
        return f"<Subscription queued={len(self._queue)}/{self.limit} {state}>"


class EventLog:
    """Every event the core sent to an RM, in order, with ids from 0; the newest
    ``capacity`` are kept.

    Attributes:
        capacity: how many events are kept.
        instance_uuid: this core's identity: ids start again at 0 with a new one
            (YuniKorn's ``InstanceUUID``).
    """

    __slots__ = ("_next_id", "_records", "_subscribers", "capacity", "instance_uuid")

    def __init__(self, capacity: int = DEFAULT_CAPACITY, *, instance_uuid: str = "") -> None:
        if capacity < 1:
            raise ValueError(f"the event log's capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self.instance_uuid = instance_uuid or str(uuid.uuid4())
        self._records: deque[si.EventRecord] = deque(maxlen=capacity)
        self._next_id = 0
        self._subscribers: dict[Subscription, None] = {}  # ordered, removable while offering

    # ------------------------------------------------------------------- writing
    def extend(self, records: list[si.EventRecord]) -> None:
        """Append ``records`` (in the order the RM gets them) and offer them to every
        subscriber."""
        self._records.extend(records)
        self._next_id += len(records)
        if self._subscribers:
            for sub in list(self._subscribers):
                sub.offer(records)

    # ------------------------------------------------------------------- reading
    @property
    def lowest_id(self) -> int:
        """The id of the oldest event kept (the next id while the log is empty)."""
        return self._next_id - len(self._records)

    @property
    def highest_id(self) -> int:
        """The id of the newest event, -1 before the first."""
        return self._next_id - 1

    def __len__(self) -> int:
        return len(self._records)

    def get(self, start: int | None = None, count: int | None = None) -> list[si.EventRecord]:
        """Up to ``count`` events from id ``start`` (default: the oldest kept); none when
        ``start`` is not kept (too old or not yet sent), as YuniKorn answers."""
        lowest = self.lowest_id
        if start is None:
            start = lowest
        if count is None:
            count = self.capacity
        if count < 0:
            raise ValueError(f"count must not be negative, got {count}")
        if not lowest <= start < self._next_id:
            return []
        first = start - lowest
        last = min(first + count, len(self._records))
        return list(islice(self._records, first, last))

    def batch(self, start: int | None = None, count: int | None = None) -> dict[str, Any]:
        """A page of the log as YuniKorn 1.4+'s ``/ws/v1/events/batch`` answers it:
        ``InstanceUUID``, ``LowestID``, ``HighestID`` and up to ``count`` ``EventRecords``
        from id ``start`` (``get``'s: by default from the oldest kept).

        Raises:
            SchedulerError: ``start`` is not an int of at least 0, or ``count`` of at least 1.
        """
        for name, value, least in (("start", start, 0), ("count", count, 1)):
            if value is not None and (type(value) is not int or value < least):
                raise SchedulerError(
                    f"get_events: {name} must be an int of at least {least}, got {value!r}"
                )
        return {
            "InstanceUUID": self.instance_uuid,
            "LowestID": self.lowest_id,
            "HighestID": self.highest_id,
            "EventRecords": [event_record(r) for r in self.get(start, count)],
        }

    def recent(self, count: int) -> list[si.EventRecord]:
        """The newest ``count`` events, oldest first."""
        if count <= 0:
            return []
        return self.get(max(self.lowest_id, self._next_id - count))

    # ---------------------------------------------------------------- subscribing
    def subscribe(self, limit: int = DEFAULT_SUBSCRIBER_LIMIT, *, history: int = 0) -> Subscription:
        """A new subscriber: the newest ``history`` events first (at most ``limit``),
        then every event as it is sent."""
        sub = Subscription(self, limit)
        sub.offer(self.recent(min(history, limit)))
        self._subscribers[sub] = None
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subscribers.pop(sub, None)

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def close(self, reason: str) -> None:
        """End every subscription (the core stops); the log itself stays readable."""
        for sub in list(self._subscribers):
            sub.close(reason)

    def __repr__(self) -> str:
        return (
            f"<EventLog ids={self.lowest_id}..{self.highest_id} kept={len(self._records)}/"
            f"{self.capacity} subscribers={len(self._subscribers)}>"
        )


def event_record(record: si.EventRecord) -> dict[str, Any]:
    """An event as YuniKorn's web service shows an ``si.EventRecord``; the SI's
    ``groupID`` is named ``referenceID`` as in SI 1.4+, ``reason`` is kept."""
    return {
        "type": int(record.type),
        "objectID": record.object_id,
        "referenceID": record.group_id,
        "reason": record.reason,
        "message": record.message,
        "timestampNano": record.timestamp_nano,
    }
