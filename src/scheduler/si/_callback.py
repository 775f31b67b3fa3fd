"""The RM side of the Scheduler Interface: what the core calls back."""

from __future__ import annotations

import inspect
from typing import Literal

import msgspec

from scheduler import si
from scheduler._errors import SchedulerError

__all__ = [
    "CALLBACK_METHODS",
    "OPTIONAL_CALLBACK_METHODS",
    "ClosedKind",
    "ConnectionClosed",
    "ResourceManagerCallback",
    "accept_preemption",
    "check_callback",
    "overrides",
    "refuse_preemption",
]


#: How a connection to a daemon ended (``ConnectionClosed.kind``).
ClosedKind = Literal["goodbye", "lost", "refused", "closed"]


class ConnectionClosed(msgspec.Struct, frozen=True, kw_only=True):
    """How a connection to a daemon ended (``scheduler.client``): what
    ``RemoteCore.closed`` holds, ``RemoteCore.wait_closed()`` returns, and
    ``ResourceManagerCallback.connection_lost`` hears.

    Attributes:
        kind: ``"goodbye"`` (the daemon closed it and said why: it stops, or the RM broke
            a limit), ``"lost"`` (it broke, or the daemon went without a word),
            ``"refused"`` (the daemon would not take it: a wrong token, another protocol
            version, TLS), or ``"closed"`` (the RM closed it).
        reason: In words, as the ``ConnectionError`` of a call on it says.
        final: No reconnection follows (``connect`` without ``reconnect=``, a refusal,
            the RM's own close, or reconnecting gave up).
    """

    kind: ClosedKind
    reason: str
    final: bool = True


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

    async def preemption_predicates(
        self, args: si.PreemptionPredicatesArgs
    ) -> si.PreemptionPredicatesResponse:
        """Whether the ask ``args.allocation_key`` fits on ``args.node_id`` once victims are
        preempted (SI 1.3): remove victims ``0..args.start_index`` of
        ``args.preempt_allocation_keys``, check, then remove one more at a time until it
        fits; answer ``success`` and the ``index`` of the last victim that had to go.

        By default the ask is taken to fit with exactly the victims the core picked
        (``success=True, index=args.start_index``), as YuniKorn's core assumes when no RM
        plugin is registered. An RM that does not override this method is never asked.
        """
        return accept_preemption(args)

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

    async def connection_lost(self, closed: ConnectionClosed) -> None:
        """The connection to the daemon ended (called by ``scheduler.client`` only, after
        every callback the daemon sent before): why, and whether the client reconnects
        (``closed.final`` is False while ``connect(..., reconnect=...)`` tries again)."""


# The methods every callback must have (``check_callback``).
CALLBACK_METHODS = (
    "update_allocation",
    "update_application",
    "update_node",
    "predicates",
    "send_event",
    "update_container_scheduling_state",
)
# Methods added since: a callback written before them (one that does not subclass
# ``ResourceManagerCallback``) may lack them, and keeps the default's behaviour.
OPTIONAL_CALLBACK_METHODS = ("preemption_predicates",)


def accept_preemption(args: si.PreemptionPredicatesArgs) -> si.PreemptionPredicatesResponse:
    """The answer of an RM that does not check preemption: the ask fits once the victims
    up to ``start_index`` are gone."""
    return si.PreemptionPredicatesResponse(success=True, index=args.start_index)


def refuse_preemption() -> si.PreemptionPredicatesResponse:
    """The answer when the RM cannot say yes (it raised, is Paused, did not answer in
    time): no success; ``index`` -1, as YuniKorn's shim and core put it on a failure."""
    return si.PreemptionPredicatesResponse(success=False, index=-1)


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
    missing += [
        m
        for m in OPTIONAL_CALLBACK_METHODS
        if getattr(callback, m, None) is not None
        and not inspect.iscoroutinefunction(getattr(callback, m))
    ]
    if missing:
        raise SchedulerError(
            f"the callback {type(callback).__qualname__} lacks the coroutine methods "
            f"{', '.join(missing)}: subclass scheduler.ResourceManagerCallback and override "
            "what you need with 'async def'"
        )


def overrides(callback: object, name: str) -> bool:
    """The RM's callback has its own ``name``. An RM that keeps the default ``predicates``
    (or ``preemption_predicates``) is never asked, and one that keeps the default
    ``update_container_scheduling_state`` costs no inspection of outstanding requests. A
    callback without the method at all (one written before an optional method existed)
    does not override it."""
    method = getattr(type(callback), name, None)
    return method is not None and method is not getattr(ResourceManagerCallback, name)
