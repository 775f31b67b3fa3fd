"""``scheduler simulate``: a cluster's day on a virtual clock, and replays of real traffic.

A scenario file (``_scenario`` reads it into ``_model``'s values) names node groups, the
queue configuration, workloads and cluster events; a simulated RM (``_shim``) behaves as
YuniKorn's Kubernetes shim does; the engine (``_engine``) plays the scenario against a core
and hands back a ``RunResult`` (``_result``); ``_summary`` turns it into ``summary.json``
and ``_report`` into ``report.md`` and an HTML page with plots. ``_replay`` plays a
recording made by ``scheduler serve --record``.

This room may import ``si``, ``config``, ``core``, ``daemon``, ``client`` and the public
``scheduler.testing``; only ``cli`` uses it. It never writes to the terminal: the CLI
renders the progress it reports.
"""

from __future__ import annotations

from scheduler.simulate._engine import OnSample, run_all, run_scenario, with_overrides
from scheduler.simulate._model import Configuration, Scenario, ScenarioError
from scheduler.simulate._result import (
    Checks,
    Distribution,
    GangRecord,
    JobRecord,
    PodRecord,
    QueueSample,
    QueueSummary,
    RunResult,
    Sample,
    SimEvent,
    Summary,
)
from scheduler.simulate._scenario import (
    builtin_scenario,
    check_limits,
    load_scenario,
    parse_scenario,
)
from scheduler.simulate._summary import summarize, summary_json, write_summary

__all__ = [
    "Checks",
    "Configuration",
    "Distribution",
    "GangRecord",
    "JobRecord",
    "OnSample",
    "PodRecord",
    "QueueSample",
    "QueueSummary",
    "RunResult",
    "Sample",
    "Scenario",
    "ScenarioError",
    "SimEvent",
    "Summary",
    "builtin_scenario",
    "check_limits",
    "load_scenario",
    "parse_scenario",
    "run_all",
    "run_scenario",
    "summarize",
    "summary_json",
    "with_overrides",
    "write_summary",
]
