"""Typed internal messages: what the RM proxy routes to partitions, and what actors tell.

The wire stops at the RM proxy (STYLE 6): these carry validated, normalised values (resources
as ``dict[str, int]``, partition names filled in), and the core trusts them.
"""

from __future__ import annotations

from typing import Any

import msgspec

from scheduler import si
from scheduler.objects._asks import Ask

__all__ = [
    "AllocationReleased",
    "AllocationSpec",
    "AllocationsReleased",
    "AppSpec",
    "AppTimer",
    "ApplicationsAdded",
    "ApplicationsRemoved",
    "AskSpec",
    "AsksReleased",
    "AsksUpdated",
    "CheckPredicates",
    "CheckPreemptionPredicates",
    "ChildQueueRemoved",
    "ConfigUpdated",
    "ConfigureQueue",
    "HandshakesDue",
    "NodeUpdate",
    "NodesUpdated",
    "Outbound",
    "PlaceholderTimer",
    "Query",
    "QueueEmptied",
    "QueueTimer",
    "ReservationDue",
    "Retire",
]

Res = dict[str, int]


class Event(msgspec.Struct, frozen=True, kw_only=True):
    """Base of the core's internal messages."""


# -- from the RM proxy ---------------------------------------------------------------------
class AllocationSpec(Event, frozen=True, kw_only=True):
    """An allocation the RM reports as existing (recovery), as the core will hold it."""

    uuid: str
    allocation_key: str
    application_id: str
    node_id: str
    resource: Res
    priority: int = 0
    tags: dict[str, str] = {}
    task_group_name: str = ""
    placeholder: bool = False


class NodeUpdate(Event, frozen=True, kw_only=True):
    node_id: str
    action: si.ActionFromRM
    capacity: Res | None = None
    occupied: Res | None = None
    attributes: dict[str, str] | None = None
    existing: tuple[AllocationSpec, ...] = ()


class NodesUpdated(Event, frozen=True, kw_only=True):
    nodes: tuple[NodeUpdate, ...]


class AppSpec(Event, frozen=True, kw_only=True):
    application_id: str
    queue_name: str
    user: str = ""
    groups: tuple[str, ...] = ()
    tags: dict[str, str] = {}
    placeholder_ask: Res = {}
    gang_scheduling_style: str = "Soft"
    execution_timeout_ms: int = 0


class ApplicationsAdded(Event, frozen=True, kw_only=True):
    apps: tuple[AppSpec, ...]


class ApplicationsRemoved(Event, frozen=True, kw_only=True):
    application_ids: tuple[str, ...]


# An ask travels as the domain value itself: the proxy builds it checked, the partition owns
# it from then on.
AskSpec = Ask


class AsksUpdated(Event, frozen=True, kw_only=True):
    application_id: str
    asks: tuple[AskSpec, ...]


class AllocationReleased(Event, frozen=True, kw_only=True):
    uuid: str  # "" releases every allocation of the application
    termination: si.TerminationType
    message: str = ""
    allocation_key: str = ""


class AllocationsReleased(Event, frozen=True, kw_only=True):
    application_id: str
    releases: tuple[AllocationReleased, ...]


class AsksReleased(Event, frozen=True, kw_only=True):
    application_id: str
    allocation_keys: tuple[str, ...]  # empty releases every ask of the application
    termination: si.TerminationType
    message: str = ""


class ConfigUpdated(Event, frozen=True, kw_only=True):
    config: Any  # scheduler.config._parser.PartitionConfig
    dry_run: bool = False  # only check that it can replace the live configuration


class Query(Event, frozen=True, kw_only=True):
    """A read of state, answered with a JSON-able value in the partition's turn."""

    kind: str  # "partition" | "queue" | "application" | "node" | "dump" | "nodes" | ...
    key: str = ""


# -- timers --------------------------------------------------------------------------------
class AppTimer(Event, frozen=True, kw_only=True):
    """A state timer of an application, valid only while the application is in ``state``."""

    application_id: str
    event: str
    state: str


class PlaceholderTimer(Event, frozen=True, kw_only=True):
    """The placeholder timeout of a gang application ran out."""

    application_id: str


class HandshakesDue(Event, frozen=True, kw_only=True):
    """Time to look for placeholder releases the RM has not confirmed within the bound."""

    application_id: str


class ReservationDue(Event, frozen=True, kw_only=True):
    """An ask that found no room has waited long enough to reserve a node: schedule."""


class PreemptionDue(Event, frozen=True, kw_only=True):
    """An ask that waited for its preemption delay (or to try again) may preempt now."""


class RMPaused(Event, frozen=True, kw_only=True):
    """The partition's RM lost its connection (``paused``) or resumed it: a Paused RM's
    partition makes no allocation, release or rejection of its own accord (no pass, no
    preemption) until it resumes."""

    paused: bool


class QueueTimer(Event, frozen=True, kw_only=True):
    """Remove a dynamic queue if it is still empty."""

    path: str


# -- between the actors of a partition ------------------------------------------------------
class ConfigureQueue(Event, frozen=True, kw_only=True):
    """A queue's new configuration; ``None``: it is gone from the configuration (drain)."""

    config: Any  # scheduler.config._parser.QueueConfig | None


class QueueEmptied(Event, frozen=True, kw_only=True):
    """An application left the queue."""


class ChildQueueRemoved(Event, frozen=True, kw_only=True):
    """A child left the queue's tree: the queue may be empty now."""


class Retire(Event, frozen=True, kw_only=True):
    """An application of the same id took this application actor's place: stop after the
    messages already queued (they were sent for the old application)."""


# -- predicates: the partition asks the RM's callback actor ---------------------------------
class CheckPredicates(Event, frozen=True, kw_only=True):
    """May ``allocation_key`` go on ``node_id``? Asked; the reply is a bool. ``allocate``
    is false for a replacement and for a reservation (YuniKorn asks
    ``preReserveConditions`` for both)."""

    allocation_key: str
    node_id: str
    allocate: bool = True


class CheckPreemptionPredicates(Event, frozen=True, kw_only=True):
    """May ``allocation_key`` go on ``node_id`` once victims there are preempted (SI 1.3's
    ``PreemptionPredicatesArgs``)? Asked; the reply is an ``si.PreemptionPredicatesResponse``.

    ``preempt_allocation_keys`` are the victims in the order they would go; victims
    ``0..start_index`` are needed for the ask to fit by resources. ``success`` in the reply:
    it fits once victims ``0..index`` are gone. An RM that does not check preemption
    accepts (``index == start_index``); a refusal (``success`` false: the RM refused or
    raised, is Paused, did not answer in time over the wire) has ``index`` -1.
    """

    allocation_key: str
    node_id: str
    preempt_allocation_keys: tuple[str, ...]
    start_index: int


# -- to the RM callback actor ----------------------------------------------------------------
class Outbound(Event, frozen=True, kw_only=True):
    """One response (or event list) for an RM's callback, in order."""

    kind: str  # "allocation" | "application" | "node" | "event" | "scheduling_state"
    payload: Any
