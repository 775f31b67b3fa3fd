"""The RM side of the Scheduler Interface: what the core calls back."""

from __future__ import annotations

import inspect

from scheduler import si
from scheduler._errors import SchedulerError

__all__ = ["CALLBACK_METHODS", "ResourceManagerCallback", "check_callback", "overrides"]


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


CALLBACK_METHODS = (
    "update_allocation",
    "update_application",
    "update_node",
    "predicates",
    "send_event",
    "update_container_scheduling_state",
)


def check_callback(callback: object) -> None:
    """Refuse what cannot be called back: a class instead of an instance, or an object
    without the contract's coroutine methods (YuniKorn's RM takes an object, never a type)."""
    if isinstance(callback, type):
        name = callback.__qualname__
        raise SchedulerError(
            f"the callback is the class {name}, not an instance: pass {name}(), not {name}"
        )
    missing = [
        m for m in CALLBACK_METHODS if not inspect.iscoroutinefunction(getattr(callback, m, None))
    ]
    if missing:
        raise SchedulerError(
            f"the callback {type(callback).__qualname__} lacks the coroutine methods "
            f"{', '.join(missing)}: subclass scheduler.ResourceManagerCallback and override "
            "what you need with 'async def'"
        )


def overrides(callback: object, name: str) -> bool:
    """The RM's callback has its own ``name``. An RM that keeps the default ``predicates``
    is never asked, and one that keeps the default ``update_container_scheduling_state``
    costs no inspection of outstanding requests."""
    method = getattr(type(callback), name, None)
    return method is not getattr(ResourceManagerCallback, name)
