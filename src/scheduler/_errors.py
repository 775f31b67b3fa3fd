"""The scheduler's error tree.

::

    SchedulerError(ValueError)     malformed request, unknown RM, invalid queue configuration
    ├── ConfigError                invalid queues.yaml (raised by the configuration parser)
    NotFoundError(LookupError)     unknown partition / queue / application / node

``actors.ActorDeadError`` (an ask sent to an actor that has stopped) belongs to the actor
runtime; the core turns it into a ``SchedulerError`` when the scheduler has been shut down.
Expected scheduling outcomes ("does not fit") are values, never exceptions.
"""

from __future__ import annotations

__all__ = ["ConfigError", "NotFoundError", "SchedulerError"]


class SchedulerError(ValueError):
    """A request the core cannot accept: malformed, from an unknown RM, or invalid config."""


class NotFoundError(LookupError):
    """A partition, queue, application or node that does not exist."""


class ConfigError(SchedulerError):
    """An invalid ``queues.yaml``: the message names the key path or partition/queue."""
