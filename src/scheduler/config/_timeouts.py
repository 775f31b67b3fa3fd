"""The core's timeouts, YuniKorn's defaults; every one reads the clock given to the core."""

from __future__ import annotations

__all__ = ["Timeouts"]


class Timeouts:
    """YuniKorn's defaults, in seconds; a test may shorten them."""

    starting = 5 * 60.0
    """Starting -> Running with a single allocation."""
    completing = 30.0
    """Completing -> Completed."""
    terminated = 3 * 24 * 3600.0
    """Completed / Failed / Rejected -> Expired."""
    terminated_kept = 10_000
    """At most this many Completed / Failed / Rejected applications are kept per partition
    (``scheduler serve --keep-terminated``); the oldest expires early to make room. Each
    costs its actor and its application (some kilobytes), so without a bound a churning
    RM (thousands of applications a minute) grows the heap for ``terminated``."""
    dynamic_queue = 10.0
    """An empty dynamic queue is removed after this."""
    reservation_delay = 2.0
    """An ask that found no room may reserve a node after this."""
    placeholder = 15 * 60.0
    """Gang placeholders time out after this when the application does not say."""
    handshake = 60.0
    """A placeholder release waiting this long for the RM is reported overdue."""
    preemption = 60.0
    """A preemption whose victims the RM has not all confirmed after this gives up: its
    node is no longer held, and the ask is tried again."""
    preempt_retry = 15.0
    """An ask whose preemption found no victims is not tried again before this
    (YuniKorn's ``preemptAttemptFrequency``)."""
    outstanding = 1.0
    """Pending asks are inspected for an autoscaler at most this often."""
    rm_paused = 60.0
    """A Paused RM (its connection lost) is Stopped, its state dropped, after this
    (``scheduler serve --rm-timeout``)."""
