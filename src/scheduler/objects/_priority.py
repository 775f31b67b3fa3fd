"""Priority scheduling, as YuniKorn v1.2 does it (yunikorn-site ``design/priority_scheduling.md``).

* An application's priority is the highest priority of its pending asks, ``MIN_PRIORITY``
  when it has none (``Application.priority``, kept by the application as asks come and go;
  YuniKorn's ``askMaxPriority``).
* A queue's priority is ``MIN_PRIORITY`` when nothing is pending below it; otherwise the
  highest priority of its applications (a leaf) or of its children (a parent), then its own
  ``priority.policy``: ``fence`` reports its ``priority.offset`` alone, so nothing below it
  shows above it; ``default`` adds the offset, clamped to int32 (YuniKorn's
  ``Queue.recalculatePriority`` and ``priorityValueByPolicy``).
* ``application.sort.priority`` (``enabled`` unless set, inherited down the tree): on a leaf,
  applications are ordered by priority first and then by the sort policy; on a parent, its
  children by priority first and then fair. ``disabled`` keeps the policy's order and uses
  priority only to break its ties (YuniKorn's ``sortApplications`` and ``sortQueue``).
* ``priority.policy`` and ``priority.offset`` are not inherited. Values YuniKorn cannot parse
  are logged and replaced by the default (its queue properties have no validation); the
  readers are ``scheduler.config._properties``, which ``scheduler check-config`` shares.

Nothing of this costs anything in a partition where every ask has priority 0 and no queue
has an offset: then every queue with pending work has priority 0 and the orders above are
the sort policies' own. The partition's root remembers (``priorities_active``) the first
time that stops being so: from then on queues cache their priority and the application
order of their leaf, and an application whose priority moves clears the caches of its
queue chain.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NamedTuple

from loguru import logger

from scheduler.config._parser import APPLICATION_SORT_PRIORITY, PRIORITY_OFFSET, PRIORITY_POLICY
from scheduler.config._properties import (
    PRIORITY_OFFSET_RANGE,
    application_sort_priority,
    priority_offset,
    priority_policy,
    read_or_default,
)

if TYPE_CHECKING:
    from scheduler.objects._application import Application
    from scheduler.objects._queue import Queue

__all__ = [
    "MAX_PRIORITY",
    "MIN_PRIORITY",
    "PrioritySettings",
    "activate",
    "app_priority_moved",
    "current_priority",
    "forget",
    "settings_of",
]

MIN_PRIORITY: Final = PRIORITY_OFFSET_RANGE[0]  # int32, as an ask's priority
MAX_PRIORITY: Final = PRIORITY_OFFSET_RANGE[1]


class PrioritySettings(NamedTuple):
    """What a queue's priority properties mean once parsed."""

    sort: bool = True  # application.sort.priority: order by priority first
    fence: bool = False  # priority.policy: fence
    offset: int = 0  # priority.offset


def settings_of(queue: Queue) -> PrioritySettings:
    """Parse ``queue``'s priority properties as YuniKorn's ``UpdateQueueProperties`` does; a
    value it cannot read counts as unset (the queue that sets it logs it)."""
    props = queue.properties
    return PrioritySettings(
        sort=read_or_default(
            application_sort_priority, _inherited(queue, APPLICATION_SORT_PRIORITY), True
        ),
        fence=read_or_default(priority_policy, props.get(PRIORITY_POLICY), "default") == "fence",
        offset=read_or_default(priority_offset, props.get(PRIORITY_OFFSET), 0),
    )


def _inherited(queue: Queue, key: str) -> str | None:
    for q in queue.chain:
        if key in q.properties:
            return q.properties[key]
    return None


# ==================================================================== queue priority
def current_priority(queue: Queue) -> int:
    """The priority ``queue`` shows its parent (YuniKorn's ``GetCurrentPriority``)."""
    cached = queue.priority_cache
    if cached is not None:
        return cached
    highest = MIN_PRIORITY
    if queue.leaf:
        for app in queue.pending_apps.values():
            if app.priority > highest:
                highest = app.priority
    else:
        for child in queue.pending_children.values():
            value = current_priority(child)
            if value > highest:
                highest = value
    value = _by_policy(queue.priority_settings, highest)
    if queue.root.priorities_active:
        queue.priority_cache = value
    return value


def _by_policy(settings: PrioritySettings, highest: int) -> int:
    if highest == MIN_PRIORITY:
        return MIN_PRIORITY  # nothing pending: no offset lifts it
    if settings.fence:
        return settings.offset
    return max(MIN_PRIORITY, min(MAX_PRIORITY, highest + settings.offset))


# ===================================================================== the bookkeeping
def app_priority_moved(queue: Queue, app: Application) -> None:
    """``app`` in leaf ``queue`` changed priority, or joined or left the queue."""
    root = queue.root
    if root.priorities_active:
        forget(queue)
    elif app.priority != 0 and app.pending_asks:
        activate(root)


def forget(queue: Queue) -> None:
    """Priorities changed at ``queue``: it and its parents compute theirs again."""
    queue.apps_by_priority = None
    for q in queue.chain:
        q.priority_cache = None
        q.order_changed()


def activate(root: Queue) -> None:
    """The partition has a priority other than 0 or an offset: priorities count from now on."""
    if root.priorities_active:
        return
    logger.debug("queue {}: priorities are in use", root.path)
    root.priorities_active = True
    stack = [root]
    while stack:
        queue = stack.pop()
        queue.priority_cache = None
        queue.apps_by_priority = None
        queue.refresh_order()  # its children are keyed again
        stack.extend(queue.children.values())
