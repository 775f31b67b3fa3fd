"""What a partition's actors tell the RM, in the order it happened, merged into responses."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from scheduler import si

if TYPE_CHECKING:
    from scheduler.objects._asks import Allocation, Ask

__all__ = ["Outbox"]

# Which response an outbox entry belongs to.
_RESPONSE_OF = {
    "new": "allocation",
    "released": "allocation",
    "released_asks": "allocation",
    "rejected": "allocation",
    "app_accepted": "application",
    "app_rejected": "application",
    "app_updated": "application",
    "node_accepted": "node",
    "node_rejected": "node",
    "scheduling_state": "scheduling_state",  # one call per request: never merged
}


class Outbox:
    """Outcomes for the RM in the order they happened, merged into responses on flush.

    Events (``si.EventRecord``) are a stream of their own: they are kept apart and go out
    as one list after the responses of the same flush, so they never split a run of
    allocations into many responses.
    """

    __slots__ = ("clock", "entries", "events", "partition", "wall")

    def __init__(
        self,
        partition: str = "",
        clock: Callable[[], float] = lambda: 0.0,
        wall: Callable[[float], int] = lambda t: int(t * 1e9),
    ) -> None:
        self.partition = partition
        self.clock = clock
        self.wall = wall  # wall-clock Unix nanoseconds of a reading of ``clock``
        self.entries: list[tuple[str, object]] = []
        self.events: list[si.EventRecord] = []

    def add(self, field: str, item: object) -> None:
        """A response field (``new``, ``app_updated``, ...); events go to ``events``."""
        self.entries.append((field, item))

    def event(
        self, kind: si.EventRecordType, object_id: str, reason: str, message: str, group: str = ""
    ) -> None:
        """An event for people to read, stamped with the wall-clock time of the core's
        clock (Unix nanoseconds, as YuniKorn stamps events)."""
        self.events.append(
            si.EventRecord(
                type=kind,
                object_id=object_id,
                group_id=group,
                reason=reason,
                message=message,
                timestamp_nano=self.wall(self.clock()),
            )
        )

    def release(self, alloc: Allocation, termination: si.TerminationType, message: str) -> None:
        """Tell the RM that ``alloc`` is released (or confirm the RM's own release)."""
        self.entries.append(
            (
                "released",
                si.AllocationRelease(
                    partition_name=self.partition,
                    application_id=alloc.application_id,
                    uuid=alloc.uuid,
                    termination_type=termination,
                    message=message,
                    allocation_key=alloc.allocation_key,
                ),
            )
        )

    def release_ask(self, ask: Ask, termination: si.TerminationType, message: str) -> None:
        """Tell the RM that the core dropped ``ask`` (a gang timeout)."""
        self.entries.append(
            (
                "released_asks",
                si.AllocationAskRelease(
                    partition_name=self.partition,
                    application_id=ask.application_id,
                    allocation_key=ask.allocation_key,
                    termination_type=termination,
                    message=message,
                ),
            )
        )

    def reject_ask(self, ask: Ask, reason: str) -> None:
        self.entries.append(
            (
                "rejected",
                si.RejectedAllocationAsk(
                    allocation_key=ask.allocation_key,
                    application_id=ask.application_id,
                    reason=reason,
                ),
            )
        )

    def scheduling_state(
        self, application_id: str, allocation_key: str, state: si.SchedulingState, reason: str
    ) -> None:
        """Where the core is with an ask, for an autoscaler (``_outstanding``)."""
        self.entries.append(
            (
                "scheduling_state",
                si.UpdateContainerSchedulingStateRequest(
                    application_id=application_id,
                    allocation_key=allocation_key,
                    state=state,
                    reason=reason,
                ),
            )
        )

    def __len__(self) -> int:
        return len(self.entries) + len(self.events)

    def flush(self) -> list[tuple[str, object]]:
        """Consecutive entries of one response kind become one response (kind, payload);
        a scheduling state is a call of its own; the events follow as one
        ``("event", [...])``."""
        out: list[tuple[str, object]] = []
        current_kind = ""
        fields: dict[str, list[object]] = {}
        for field, item in self.entries:
            kind = _RESPONSE_OF[field]
            if kind == "scheduling_state":
                if fields:
                    out.append((current_kind, _build(current_kind, fields)))
                current_kind, fields = "", {}
                out.append((kind, item))
                continue
            if kind != current_kind:
                if fields:
                    out.append((current_kind, _build(current_kind, fields)))
                current_kind, fields = kind, {}
            fields.setdefault(field, []).append(item)
        if fields:
            out.append((current_kind, _build(current_kind, fields)))
        self.entries = []
        if self.events:
            out.append(("event", self.events))
            self.events = []
        return out


def _build(kind: str, f: dict[str, list[object]]) -> object:
    if kind == "allocation":
        return si.AllocationResponse(
            new=f.get("new", []),  # type: ignore[arg-type]
            released=f.get("released", []),  # type: ignore[arg-type]
            released_asks=f.get("released_asks", []),  # type: ignore[arg-type]
            rejected=f.get("rejected", []),  # type: ignore[arg-type]
        )
    if kind == "application":
        return si.ApplicationResponse(
            rejected=f.get("app_rejected", []),  # type: ignore[arg-type]
            accepted=f.get("app_accepted", []),  # type: ignore[arg-type]
            updated=f.get("app_updated", []),  # type: ignore[arg-type]
        )
    return si.NodeResponse(
        rejected=f.get("node_rejected", []),  # type: ignore[arg-type]
        accepted=f.get("node_accepted", []),  # type: ignore[arg-type]
    )
