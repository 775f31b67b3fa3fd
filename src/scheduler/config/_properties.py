"""Queue property values, read one way for the core (``scheduler.objects``) and for
``scheduler check-config``.

YuniKorn does not validate queue properties: a queue that cannot read a value logs it and
uses the default (``Queue.UpdateQueueProperties``), and so does the core. ``check-config``
reports each value :data:`PROPERTY_READERS` cannot read, with its line and column. A property
joins the check by adding its reader there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, NamedTuple

from scheduler.config._duration import parse_duration
from scheduler.config._model import PREEMPTION_DELAY, PREEMPTION_POLICY

__all__ = [
    "DEFAULT_PREEMPTION_DELAY",
    "PREEMPTION_POLICIES",
    "PROPERTY_READERS",
    "PropertyReader",
    "preemption_delay",
    "preemption_policy",
]

#: ``preemption.policy`` values (YuniKorn's ``policies.PreemptionPolicy``), the default first.
PREEMPTION_POLICIES: Final = ("default", "fence", "disabled")
#: ``preemption.delay`` when unset or unreadable (``configs.DefaultPreemptionDelay``), seconds.
DEFAULT_PREEMPTION_DELAY: Final = 30.0


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


class PropertyReader(NamedTuple):
    """How a property's value is read, and what the core uses when it cannot be."""

    read: Callable[[str], object]  # raises ValueError saying why
    default: str  # as it would be written in the file


#: The properties whose values ``check-config`` checks, and the core warns about.
PROPERTY_READERS: Final[Mapping[str, PropertyReader]] = {
    PREEMPTION_POLICY: PropertyReader(preemption_policy, PREEMPTION_POLICIES[0]),
    PREEMPTION_DELAY: PropertyReader(preemption_delay, "30s"),
}
