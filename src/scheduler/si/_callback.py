"""The RM side of the Scheduler Interface: what the core calls back."""

from __future__ import annotations

from scheduler import si

__all__ = ["ResourceManagerCallback"]


class ResourceManagerCallback:
    """Base class of an RM's callback; every method does nothing (or allows) by default.

    The core calls one RM's callback methods one at a time, in the order the outcomes
    happened, merging outcomes that are ready together into one call. An exception raised
    by a method is logged and does not stop the core.
    """

    async def update_allocation(self, response: si.AllocationResponse) -> None:
        """New allocations, releases (confirmed or decided by the core), rejected asks."""

    async def update_application(self, response: si.ApplicationResponse) -> None:
        """Accepted and rejected applications, and application state changes."""

    async def update_node(self, response: si.NodeResponse) -> None:
        """Accepted and rejected nodes."""

    async def predicates(self, args: si.PredicatesArgs) -> bool:
        """Whether the allocation ``args.allocation_key`` may go on ``args.node_id``."""
        return True

    async def send_event(self, events: list[si.EventRecord]) -> None:
        """Events about applications, asks, nodes and queues, for people to read."""

    async def update_container_scheduling_state(
        self, request: si.UpdateContainerSchedulingStateRequest
    ) -> None:
        """The scheduling state of a pending ask, for an autoscaler: ``FAILED`` when it fits
        its queue's quota but no node (more nodes would let it run), ``SKIPPED`` when its
        queue's quota holds it. Sent when an ask's state changes, at most once per
        ``Timeouts.outstanding``; the core inspects pending asks only for an RM that
        overrides this method."""
