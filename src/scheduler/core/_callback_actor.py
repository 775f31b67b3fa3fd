"""The RM's callback actor: calls one RM's callback, one call at a time, in order."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from loguru import logger

from actors import Actor
from scheduler import si
from scheduler._errors import SchedulerError
from scheduler.core._events import CheckPredicates, Outbound

if TYPE_CHECKING:
    from scheduler.core._event_log import EventLog
    from scheduler.si._callback import ResourceManagerCallback

__all__ = ["CallbackActor"]

_METHOD_OF = {
    "allocation": "update_allocation",
    "application": "update_application",
    "node": "update_node",
    "event": "send_event",
    "scheduling_state": "update_container_scheduling_state",
}


class CallbackActor(Actor):
    """Calls one RM's callback, one call at a time, in order, merging what is ready.

    The callback is the RM's code: whatever it awaits is awaited inline (``reentrant`` is
    off), so the next call never starts before the last one returned.
    """

    reentrant = False

    def __init__(
        self, rm_id: str, callback: ResourceManagerCallback, events: EventLog | None = None
    ) -> None:
        self.rm_id = rm_id
        self.callback = callback
        self.events = events  # the core's event log: every event this RM is sent, in order
        self.calls = 0
        self.paused = False  # the RM lost its connection: its callback has nowhere to go
        self.dropped = 0  # callback calls not made while paused

    async def receive_batch(self, messages: list[object]) -> None:
        for kind, payload in _merge(messages):
            if kind == "event" and self.events is not None:
                self.events.extend(payload)  # in the order the RM gets them, even if it raises
            if self.paused:
                self._drop(_METHOD_OF[kind])
                continue
            method: Callable[[Any], Awaitable[Any]] = getattr(self.callback, _METHOD_OF[kind])
            self.calls += 1
            try:
                await method(payload)
            except Exception:
                logger.bind(rm_id=self.rm_id).exception(
                    "RM callback {} raised; the core goes on", _METHOD_OF[kind]
                )

    async def receive(self, message: object) -> object:
        """Asks: the RM's predicates for one proposal (an exception refuses the node)."""
        if isinstance(message, CheckPredicates):
            args = si.PredicatesArgs(
                allocation_key=message.allocation_key,
                node_id=message.node_id,
                allocate=message.allocate,
            )
            if self.paused:
                self._drop("predicates")
                return False  # nobody to ask: the node is refused
            try:
                return bool(await self.callback.predicates(args))
            except Exception:
                logger.bind(rm_id=self.rm_id).exception("RM predicates raised: node refused")
                return False
        if isinstance(message, Outbound):
            await self.receive_batch([message])
            return None
        raise SchedulerError(f"RM {self.rm_id} callback: unexpected {message!r}")

    def _drop(self, method: str) -> None:
        """A call the Paused RM does not get: counted, the first one logged."""
        if not self.dropped:
            logger.bind(rm_id=self.rm_id).warning(
                "resource manager {} is Paused: {} and what follows are dropped until it "
                "registers again or is Stopped",
                self.rm_id,
                method,
            )
        self.dropped += 1


def _merge(messages: list[object]) -> list[tuple[str, Any]]:
    """Merge consecutive responses of one kind into one (order across kinds is kept)."""
    out: list[tuple[str, Any]] = []
    for msg in messages:
        if not isinstance(msg, Outbound):
            continue
        if out and out[-1][0] == msg.kind and msg.kind != "scheduling_state":
            out[-1] = (msg.kind, _join(msg.kind, out[-1][1], msg.payload))
        else:
            out.append((msg.kind, msg.payload))
    return out


def _join(kind: str, a: Any, b: Any) -> Any:
    if kind == "event":
        return [*a, *b]
    cls = type(a)
    return cls(**{f: [*getattr(a, f), *getattr(b, f)] for f in cls.__struct_fields__})
