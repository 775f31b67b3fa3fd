"""Asks and allocations: what an application wants, and what it was given.

No anyio here: plain classes, testable without an event loop (STYLE 2).
"""

from __future__ import annotations

import os
from itertools import count

import msgspec

from scheduler import si
from scheduler.objects._gang_tags import GangSpec
from scheduler.objects._resources import Res, Size, to_si

__all__ = ["Allocation", "Ask", "new_uuid"]

# Random per process: a daemon that replaces one that died gets back the allocations the
# dead one made (the RM recovers them, uuids and all), and its own must not collide with
# them. An address (``id(object())``, as before) varied in about 8 bits between two starts,
# and not at all without address-space randomisation.
_uuid_prefix = os.urandom(6).hex()
_uuid_counter = count(1)


def new_uuid() -> str:
    """An allocation id unique to this process and, with 48 random bits, against those of
    every other process that served the same RM; cheap enough for the hot path."""
    return f"{_uuid_prefix}-{next(_uuid_counter)}"


class Allocation(msgspec.Struct, gc=False, repr_omit_defaults=True):
    """One allocation of an ask on a node. Identity (``uuid``) never changes.

    A msgspec struct without GC tracking: cheap to build on the hot path, and it holds no
    reference cycles.
    """

    uuid: str
    allocation_key: str
    application_id: str
    partition: str
    node_id: str
    resource: Res
    priority: int = 0
    tags: dict[str, str] = {}
    task_group_name: str = ""
    placeholder: bool = False
    request_time: float = 0.0
    allocation_time: float = 0.0
    # Released to the RM and waiting for its confirmation (the protocol's own in-between).
    release_pending: si.TerminationType | None = None
    # A permit gang member placed but not sent to the RM yet (``scheduler.gangs._permit``).
    tentative: bool = False
    # What preemption reads of its ask: whether it may be a victim (a preference: those
    # that allow it go first) and whether it is its application's originator.
    allow_preempt_self: bool = True
    originator: bool = False

    def to_si(self, resource: si.Resource | None = None) -> si.Allocation:
        """The SI message; ``resource`` is this allocation's resource already converted."""
        return si.Allocation(
            allocation_key=self.allocation_key,
            allocation_tags=self.tags,
            uuid=self.uuid,
            resource_per_alloc=resource if resource is not None else to_si(self.resource),
            priority=self.priority,
            node_id=self.node_id,
            application_id=self.application_id,
            partition_name=self.partition,
            task_group_name=self.task_group_name,
            placeholder=self.placeholder,
        )


class Ask(msgspec.Struct, kw_only=True, gc=False, repr_omit_defaults=True):
    """A request of an application: ``pending`` more allocations of ``resource``.

    The RM proxy builds it from a checked SI ``AllocationAsk`` and hands it to the partition,
    which numbers it (``seq``, for age order), stamps ``created`` and then owns it.
    ``resource`` is read-only: asks of the same resource share one map (and ``size``).
    """

    allocation_key: str
    application_id: str
    resource: Res
    max_allocations: int = 1
    priority: int = 0
    tags: dict[str, str] = {}
    task_group_name: str = ""
    placeholder: bool = False
    originator: bool = False
    execution_timeout_ms: int = 0
    required_node: str = ""
    # A real ask of a task group that no placeholder can take (its own was too small): it
    # is scheduled as a normal ask.
    no_replace: bool = False
    # The permit gang it is a member of (its tags), and that gang's creation time.
    gang: GangSpec | None = None
    gang_time: float = 0.0
    created: float = 0.0
    seq: int = 0
    pending: int = -1  # allocations still wanted; starts at max_allocations
    size: Size = ()  # the resource as a hashable value
    gid: int = 0  # the group of its application's pending asks it is in (``_pending``)
    # The SI's ``PreemptionPolicy``, read as YuniKorn reads an ask without one: it may be
    # a victim, and it may not trigger preemption.
    allow_preempt_self: bool = True
    allow_preempt_other: bool = False
    # Preemption (``scheduler.core._preempt``): not tried again before this time of the
    # core's clock; it has triggered one (shown by REST as YuniKorn does).
    preempt_after: float = 0.0
    triggered_preemption: bool = False

    def __post_init__(self) -> None:
        if self.pending < 0:
            self.pending = self.max_allocations
        if not self.size:
            self.size = tuple(self.resource.items())
