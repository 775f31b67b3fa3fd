"""The core: the RM proxy, the actors, the scheduling pass, and ``Core``.

What it holds:

* ``_proxy``: the edge. An SI request is checked and turned into typed events
  (``_events``) routed to the partition that owns them; the wire stops here.
* The actors, one mailbox each, sharing their partition's turn: ``_partition_actor``
  (nodes, applied by ``_node_flows``; applications arriving, configuration, queries),
  ``_queue_actor`` (a dynamic
  queue's life), ``_app_actor`` (an application's asks, releases, state machine and gang
  flows), ``_callback_actor`` (calls one RM's callback, in order). ``_partition`` is the
  state they share (``scheduler.objects``' ``PartitionState``, their references and the
  permit gangs).
* ``_pass``: the scheduling pass by proposal and commit; ``_outstanding``: what an
  autoscaler hears of the asks that wait.
* ``_views`` (the query answers, YuniKorn's REST shapes), ``_event_log`` (the events an RM
  and the REST API read), ``_history`` (running applications and containers, sampled once
  a minute of the core's clock), ``_counters`` (the pass's counters), ``_gc`` (collector tuning),
  and ``_core`` (``Core``, ``start_scheduler``: the core's coroutine API).

It may import every room below it (``gangs``, ``policies``, ``objects``, ``config``,
``si``, ``scheduler._errors``) and the actor runtime (``actors``). The rooms above it (the
daemon, the client, the command line, the public doors) import this package only, never
its modules: the names below are the core's API to them.
"""

from __future__ import annotations

from scheduler.core._core import Core, start_scheduler
from scheduler.core._counters import ATTEMPTS, LATENCY_BUCKETS, SUBMISSIONS, SchedulingCounters
from scheduler.core._event_log import DEFAULT_SUBSCRIBER_LIMIT, Subscription, event_record
from scheduler.core._gc import tune_gc, tune_malloc
from scheduler.objects._application import TERMINAL_STATES, AppState
from scheduler.objects._gang_tags import gang_tags

__all__ = [
    "ATTEMPTS",
    "DEFAULT_SUBSCRIBER_LIMIT",
    "LATENCY_BUCKETS",
    "SUBMISSIONS",
    "TERMINAL_STATES",
    "AppState",
    "Core",
    "SchedulingCounters",
    "Subscription",
    "event_record",
    "gang_tags",
    "start_scheduler",
    "tune_gc",
    "tune_malloc",
]
