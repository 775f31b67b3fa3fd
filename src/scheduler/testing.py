"""Helpers for driving the core from tests and scripts: a manual clock and a recording RM."""

from __future__ import annotations

from actors import ManualClock
from scheduler import si
from scheduler._callback import ResourceManagerCallback

__all__ = ["ManualClock", "RecordingCallback"]


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
