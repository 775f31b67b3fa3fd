"""Helpers for driving the core from tests and scripts: a manual clock, a recording RM, and
a watch on the errors the core logs."""

from __future__ import annotations

import contextlib
from types import TracebackType
from typing import Any

from loguru import logger

from actors import ManualClock
from scheduler import si
from scheduler._callback import ResourceManagerCallback

__all__ = ["ErrorWatch", "ManualClock", "RecordingCallback"]


class ErrorWatch:
    """Every record of level ERROR or worse logged while the watch is open.

    The runtime logs each failed actor handler, timer or hook at ERROR (with its traceback)
    and goes on; so does the RM proxy for a callback that raised. A test that opens a watch
    and checks it afterwards cannot pass over a crash that the core survived:

        with ErrorWatch() as errors:
            ...  # drive the core
        assert not errors, errors.report()

    ``allow`` lists substrings of messages that are expected (a test that makes an RM
    callback raise on purpose): those are kept apart in ``allowed``. Opening a watch turns
    the ``actors`` and ``scheduler`` loggers on (they are what it watches).
    """

    def __init__(self, *, allow: tuple[str, ...] = ()) -> None:
        self.allow = allow
        self.records: list[dict[str, Any]] = []
        self.allowed: list[dict[str, Any]] = []
        self._sink_id: int | None = None

    def __enter__(self) -> ErrorWatch:
        logger.enable("actors")
        logger.enable("scheduler")
        self._sink_id = logger.add(self._sink, level="ERROR", format="{message}", catch=False)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._sink_id is not None:
            with contextlib.suppress(ValueError):  # code under the watch called logger.remove()
                logger.remove(self._sink_id)
            self._sink_id = None

    def _sink(self, message: Any) -> None:
        record = message.record
        text = record["message"]
        if any(expected in text for expected in self.allow):
            self.allowed.append(record)
        else:
            self.records.append(record)

    def __bool__(self) -> bool:
        return bool(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def report(self) -> str:
        """Each unexpected record: where it was logged, its message and its exception."""
        lines = [f"{len(self.records)} error(s) logged:"]
        for record in self.records:
            lines.append(f"- {record['name']}:{record['line']}: {record['message']}")
            exception = record["exception"]
            if exception is not None and exception.type is not None:
                lines.append(f"    {exception.type.__name__}: {exception.value}")
        return "\n".join(lines)


class RecordingCallback(ResourceManagerCallback):
    """An RM callback that keeps every response it is given, in order."""

    def __init__(self) -> None:
        self.allocation_responses: list[si.AllocationResponse] = []
        self.application_responses: list[si.ApplicationResponse] = []
        self.node_responses: list[si.NodeResponse] = []
        self.events: list[si.EventRecord] = []
        self.scheduling_states: list[si.UpdateContainerSchedulingStateRequest] = []

    async def update_allocation(self, response: si.AllocationResponse) -> None:
        self.allocation_responses.append(response)

    async def update_application(self, response: si.ApplicationResponse) -> None:
        self.application_responses.append(response)

    async def update_node(self, response: si.NodeResponse) -> None:
        self.node_responses.append(response)

    async def send_event(self, events: list[si.EventRecord]) -> None:
        self.events.extend(events)

    async def update_container_scheduling_state(
        self, request: si.UpdateContainerSchedulingStateRequest
    ) -> None:
        self.scheduling_states.append(request)

    @property
    def allocations(self) -> list[si.Allocation]:
        return [a for r in self.allocation_responses for a in r.new]

    @property
    def released(self) -> list[si.AllocationRelease]:
        return [a for r in self.allocation_responses for a in r.released]

    @property
    def released_asks(self) -> list[si.AllocationAskRelease]:
        return [a for r in self.allocation_responses for a in r.released_asks]

    @property
    def rejected_asks(self) -> list[si.RejectedAllocationAsk]:
        return [a for r in self.allocation_responses for a in r.rejected]

    @property
    def accepted_apps(self) -> list[str]:
        return [a.application_id for r in self.application_responses for a in r.accepted]

    @property
    def rejected_apps(self) -> list[si.RejectedApplication]:
        return [a for r in self.application_responses for a in r.rejected]

    def app_states(self, application_id: str) -> list[str]:
        return [
            u.state
            for r in self.application_responses
            for u in r.updated
            if u.application_id == application_id
        ]

    @property
    def accepted_nodes(self) -> list[str]:
        return [n.node_id for r in self.node_responses for n in r.accepted]

    @property
    def rejected_nodes(self) -> list[si.RejectedNode]:
        return [n for r in self.node_responses for n in r.rejected]
