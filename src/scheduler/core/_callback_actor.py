"""The RM's callback actor: calls one RM's callback, one call at a time, in order."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from loguru import logger

from actors import Actor
from scheduler import si
from scheduler._errors import SchedulerError
from scheduler.core._events import CheckPredicates, CheckPreemptionPredicates, Outbound
from scheduler.si._callback import accept_preemption, overrides, refuse_preemption

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
        # The RM lost its connection: nobody answers predicates. Its other calls still go
        # to the callback (a transport's stand-in keeps them for the RM to resume).
        self.paused = False

    async def receive_batch(self, messages: list[object]) -> None:
        for kind, payload in _merge(messages):
            if kind == "event" and self.events is not None:
                self.events.extend(payload)  # in the order the RM gets them, even if it raises
            method: Callable[[Any], Awaitable[Any]] = getattr(self.callback, _METHOD_OF[kind])
            self.calls += 1
            try:
                await method(payload)
            except Exception:
                logger.bind(rm_id=self.rm_id).exception(
                    "RM callback {} raised; the core goes on", _METHOD_OF[kind]
                )

    async def receive(self, message: object) -> object:
        """Asks: the RM's predicates for one proposal (an exception refuses the node), and
        its preemption predicates (an ``si.PreemptionPredicatesResponse``)."""
        if isinstance(message, CheckPreemptionPredicates):
            return await self._preemption_predicates(message)
        if isinstance(message, CheckPredicates):
            args = si.PredicatesArgs(
                allocation_key=message.allocation_key,
                node_id=message.node_id,
                allocate=message.allocate,
            )
            if self.paused:
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

    async def _preemption_predicates(
        self, message: CheckPreemptionPredicates
    ) -> si.PreemptionPredicatesResponse:
        """The RM's answer; a refusal when it is Paused or raises, the default's answer
        (accepted) when its callback has no ``preemption_predicates`` of its own."""
        args = si.PreemptionPredicatesArgs(
            allocation_key=message.allocation_key,
            node_id=message.node_id,
            preempt_allocation_keys=list(message.preempt_allocation_keys),
            start_index=message.start_index,
        )
        if self.paused:
            return refuse_preemption()  # nobody to ask, nor to hear of the victims: refused
        if not overrides(self.callback, "preemption_predicates"):
            return accept_preemption(args)
        try:
            answer = await self.callback.preemption_predicates(args)
            if not isinstance(answer, si.PreemptionPredicatesResponse):
                raise TypeError(f"returned {answer!r}, not an si.PreemptionPredicatesResponse")
        except Exception:
            logger.bind(rm_id=self.rm_id).exception(
                "RM preemption_predicates raised: preemption on {} refused", message.node_id
            )
            return refuse_preemption()
        return answer


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
