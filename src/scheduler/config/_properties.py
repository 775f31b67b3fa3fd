"""Queue property values, read one way for the core (``scheduler.objects``) and for
``scheduler check-config``.

YuniKorn does not validate queue properties: a queue that cannot read a value logs it and
uses the default (``Queue.UpdateQueueProperties``), and so does the core. ``check-config``
reports each value :data:`PROPERTY_READERS` cannot read, with its line and column, and the
core logs each one for the queue that sets it. A property joins both by adding its reader
there. The property names live here too, and the model's
``QueueConfig.application_sort_policy`` reads with the same reader as the core's queues.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final, Literal, NamedTuple, TypeVar

from scheduler.config._duration import parse_duration

__all__ = [
    "APPLICATION_SORT_POLICY",
    "APPLICATION_SORT_PRIORITY",
    "DEFAULT_PREEMPTION_DELAY",
    "PREEMPTION_DELAY",
    "PREEMPTION_POLICIES",
    "PREEMPTION_POLICY",
    "PRIORITY_OFFSET",
    "PRIORITY_OFFSET_RANGE",
    "PRIORITY_POLICY",
    "PROPERTY_READERS",
    "SORT_POLICIES",
    "PropertyReader",
    "SortPolicyName",
    "application_sort_policy",
    "application_sort_priority",
    "preemption_delay",
    "preemption_policy",
    "priority_offset",
    "priority_policy",
    "read_or_default",
]

# Queue properties YuniKorn v1.2 understands (configvalidator.go constants) ...
APPLICATION_SORT_POLICY: Final = "application.sort.policy"
APPLICATION_SORT_PRIORITY: Final = "application.sort.priority"
PRIORITY_POLICY: Final = "priority.policy"
PRIORITY_OFFSET: Final = "priority.offset"
# ... and those YuniKorn 1.3+ adds for preemption (configs.PreemptionPolicy, PreemptionDelay).
PREEMPTION_POLICY: Final = "preemption.policy"
PREEMPTION_DELAY: Final = "preemption.delay"

SortPolicyName = Literal["fifo", "fair", "stateaware"]
#: ``application.sort.policy`` values (YuniKorn's ``policies.SortPolicy``), the default first.
SORT_POLICIES: Final[tuple[SortPolicyName, ...]] = ("fifo", "fair", "stateaware")
#: ``preemption.policy`` values (YuniKorn's ``policies.PreemptionPolicy``), the default first.
PREEMPTION_POLICIES: Final = ("default", "fence", "disabled")
#: ``preemption.delay`` when unset or unreadable (``configs.DefaultPreemptionDelay``), seconds.
DEFAULT_PREEMPTION_DELAY: Final = 30.0
#: ``priority.offset`` is an int32, as Go's ``strconv.ParseInt(value, 10, 32)`` reads it.
PRIORITY_OFFSET_RANGE: Final = (-(2**31), 2**31 - 1)

_DECIMAL: Final = re.compile(r"[+-]?[0-9]+")

_T = TypeVar("_T")


def application_sort_policy(value: str) -> SortPolicyName:
    """``fifo``, ``fair`` or ``stateaware``, exactly (lower case); empty is ``fifo``
    (YuniKorn's ``SortPolicyFromString``).

    Raises:
        ValueError: Any other value, ``FAIR`` too.
    """
    for policy in SORT_POLICIES:
        if value == policy:
            return policy
    if not value:
        return SORT_POLICIES[0]
    raise ValueError("expected fifo, fair or stateaware, in lower case")


def application_sort_priority(value: str) -> bool:
    """``enabled`` (true) or ``disabled`` (false) in any case (YuniKorn's
    ``applicationSortPriorityEnabled``).

    Raises:
        ValueError: Any other value, the empty one too.
    """
    lowered = value.lower()
    if lowered in ("enabled", "disabled"):
        return lowered == "enabled"
    raise ValueError("expected enabled or disabled")


def priority_policy(value: str) -> str:
    """``default`` or ``fence`` in any case, lower case; empty is ``default`` (YuniKorn's
    ``PriorityPolicyFromString``).

    Raises:
        ValueError: Any other value.
    """
    lowered = value.lower()
    if lowered in ("default", "fence"):
        return lowered
    if not lowered:
        return "default"
    raise ValueError("expected default or fence")


def priority_offset(value: str) -> int:
    """A whole number in int32's range, decimal, an optional sign (YuniKorn's
    ``priorityOffset``); empty is 0, as if unset.

    Raises:
        ValueError: Anything else.
    """
    if not value:
        return 0
    low, high = PRIORITY_OFFSET_RANGE
    if _DECIMAL.fullmatch(value) and low <= int(value) <= high:
        return int(value)
    raise ValueError(f"expected a whole number from {low} to {high}")


def preemption_policy(value: str) -> str:
    """``default``, ``fence`` or ``disabled`` in any case, lower case; empty is ``default``
    (YuniKorn's ``PreemptionPolicyFromString``).

    Raises:
        ValueError: Any other value.
    """
    lowered = value.lower()
    if lowered in PREEMPTION_POLICIES:
        return lowered
    if not lowered:
        return PREEMPTION_POLICIES[0]
    raise ValueError("expected default, fence or disabled")


def preemption_delay(value: str) -> float:
    """A Go duration above zero, in seconds (YuniKorn's ``convertDelay``).

    Raises:
        ValueError: Not a Go duration, or not above zero.
    """
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError("the delay must be above zero")
    return seconds


def read_or_default(read: Callable[[str], _T], value: str | None, default: _T) -> _T:
    """``read(value)``; ``default`` when the property is unset (``None``) or unreadable. The
    core logs an unreadable value once, for the queue that sets it (:data:`PROPERTY_READERS`)."""
    if value is None:
        return default
    try:
        return read(value)
    except ValueError:
        return default


class PropertyReader(NamedTuple):
    """How a property's value is read, and what the core uses when it cannot be."""

    read: Callable[[str], object]  # raises ValueError saying why
    default: str  # as it would be written in the file


#: The properties whose values ``check-config`` checks, and the core warns about.
PROPERTY_READERS: Final[Mapping[str, PropertyReader]] = {
    APPLICATION_SORT_POLICY: PropertyReader(application_sort_policy, SORT_POLICIES[0]),
    APPLICATION_SORT_PRIORITY: PropertyReader(application_sort_priority, "enabled"),
    PRIORITY_POLICY: PropertyReader(priority_policy, "default"),
    PRIORITY_OFFSET: PropertyReader(priority_offset, "0"),
    PREEMPTION_POLICY: PropertyReader(preemption_policy, PREEMPTION_POLICIES[0]),
    PREEMPTION_DELAY: PropertyReader(preemption_delay, "30s"),
}
