"""``scheduler simulate``: a cluster's day on a virtual clock, and replays of real traffic.

A scenario file (``_scenario``) names node groups, the queue configuration, workloads and
cluster events; a simulated RM (``_shim``) behaves as YuniKorn's Kubernetes shim does; the
engine (``_engine``) plays the scenario against a core and hands back a ``RunResult``
(``_result``), which ``_report`` turns into ``summary.json``, ``report.md`` and an HTML page
with plots. ``_replay`` plays a recording made by ``scheduler serve --record``.

This room may import ``si``, ``config``, ``core``, ``daemon``, ``client`` and the public
``scheduler.testing``; only ``cli`` uses it. It never writes to the terminal: the CLI
renders the progress it reports.
"""

from __future__ import annotations

from scheduler.simulate._result import (
    Checks,
    Distribution,
    GangRecord,
    PodRecord,
    QueueSample,
    QueueSummary,
    RunResult,
    Sample,
    SimEvent,
    Summary,
)

__all__ = [
    "Checks",
    "Distribution",
    "GangRecord",
    "PodRecord",
    "QueueSample",
    "QueueSummary",
    "RunResult",
    "Sample",
    "SimEvent",
    "Summary",
]
