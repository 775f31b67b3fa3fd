"""A run in numbers (``Summary``, the body of ``summary.json``), worked out from what the
simulated RM saw and the samples of the queues.

Percentiles are nearest-rank over the values (no interpolation), so they are values that
occurred. Every figure depends on virtual time only, except ``wall_seconds`` and
``pods_per_wall_second`` (``WALL_FIELDS``), which summary.json leaves out: two runs of one
scenario with one seed write the same summary.json, bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

from scheduler.simulate._result import (
    Checks,
    Distribution,
    JobRecord,
    QueueSample,
    QueueSummary,
    RunResult,
    Sample,
    Summary,
)
from scheduler.simulate._units import counted

__all__ = ["distribution", "summarize", "summary_json", "write_summary"]

SUMMARY_FILE = "summary.json"
MAX_REJECTED: Final = 10  # groups of rejected jobs the checks name; the others counted
_ENCODER = msgspec.json.Encoder(order="deterministic")


def distribution(values: Sequence[float]) -> Distribution:
    """Count, mean, nearest-rank p50/p90/p99 and max of ``values`` (all 0 when empty)."""
    if not values:
        return Distribution(count=0, mean=0.0, p50=0.0, p90=0.0, p99=0.0, max=0.0)
    ordered = sorted(values)
    n = len(ordered)

    def rank(p: float) -> float:
        return ordered[max(0, math.ceil(p * n) - 1)]

    return Distribution(
        count=n,
        mean=round(sum(ordered) / n, 6),
        p50=rank(0.5),
        p90=rank(0.9),
        p99=rank(0.99),
        max=ordered[-1],
    )


def summarize(result: RunResult) -> Summary:
    """The run's ``Summary``: pods, waits, utilization, each queue and the checks."""
    real = [p for p in result.pods if not p.placeholder]
    allocated = [p for p in real if p.allocated is not None]
    finished = [p for p in real if p.finished is not None and not (p.preempted or p.lost)]
    pending = [p.allocated - p.submitted for p in allocated if p.allocated is not None]
    waits = [g.whole - g.submitted for g in result.gangs if g.whole is not None]
    queues = _queues(result.samples)
    jobs = result.jobs
    expected = [j for j in jobs if not j.long_running]
    done = [j for j in jobs if j.finished is not None]
    first: dict[str, float] = {}  # each job's first real pod placed
    for p in allocated:
        if p.allocated is not None and (p.job not in first or p.allocated < first[p.job]):
            first[p.job] = p.allocated
    # A gang ran with part of its members: a real pod placed before it was whole (a Soft
    # gang that timed out runs so on purpose).
    partial = [
        g.job
        for g in result.gangs
        if not g.timed_out and g.job in first and (g.whole is None or first[g.job] < g.whole)
    ]
    checks = Checks(
        jobs_submitted=len(jobs),
        jobs_finished=len(done),
        all_finished=all(j.finished is not None for j in expected),
        over_capacity=list(result.breaches),
        gangs=len(result.gangs),
        gangs_whole=sum(1 for g in result.gangs if g.whole is not None),
        partial_gangs=partial,
        guarantees_reached={
            q.queue: q.guarantee_reached_after is not None
            for q in queues
            if q.guaranteed and _asked(result.samples, q.queue)
        },
        rejected_jobs=_rejected(jobs),
    )
    wall = result.wall_seconds
    return Summary(
        scenario=result.scenario,
        configuration=result.configuration,
        seed=result.seed,
        duration=result.duration,
        wall_seconds=round(wall, 3),
        pods_per_wall_second=round(len(allocated) / wall, 1) if wall > 0 else 0.0,
        pods_submitted=len(real),
        pods_allocated=len(allocated),
        pods_finished=len(finished),
        preemptions=sum(1 for p in result.pods if p.preempted),
        pending_time=distribution(pending),
        gang_wait=distribution(waits),
        utilization=_utilization(result.samples),
        queues=queues,
        checks=checks,
        pods_lost=sum(1 for p in real if p.lost),
        jobs_failed=sum(1 for j in jobs if j.failed and not j.rejected),
        jobs_rejected=sum(1 for j in jobs if j.rejected),
    )


def _rejected(jobs: Sequence[JobRecord]) -> list[str]:
    """The rejected jobs grouped by workload and reason (the job's id in the reason made
    ``...``), in the order first seen: ``"job: reason"`` for one job, ``"12 jobs of
    workload w: reason"`` for several; the first ``MAX_REJECTED`` groups, then a line
    counting the jobs of the others."""
    groups: dict[tuple[str, str], list[JobRecord]] = {}
    for j in jobs:
        if j.rejected:
            groups.setdefault((j.workload, j.rejected.replace(j.job, "...")), []).append(j)
    lines = [
        f"{group[0].job}: {group[0].rejected}"
        if len(group) == 1
        else f"{len(group):,} jobs of workload {workload}: {reason}"
        for (workload, reason), group in list(groups.items())[:MAX_REJECTED]
    ]
    more = sum(len(ids) for ids in list(groups.values())[MAX_REJECTED:])
    if more:
        lines.append(f"... and {counted(more, 'more job')}")
    return lines


def _asked(samples: Sequence[Sample], queue: str) -> bool:
    return any(q.queue == queue and any(q.pending.values()) for s in samples for q in s.queues)


def _utilization(samples: Sequence[Sample]) -> dict[str, float]:
    shares: dict[str, list[float]] = {}
    for s in samples:
        for name, cap in s.capacity.items():
            if cap > 0:
                shares.setdefault(name, []).append(s.allocated.get(name, 0) / cap)
    return {name: round(sum(v) / len(v), 6) for name, v in sorted(shares.items())}


def _queues(samples: Sequence[Sample]) -> list[QueueSummary]:
    series: dict[str, list[tuple[float, QueueSample]]] = {}
    for s in samples:
        for q in s.queues:
            series.setdefault(q.queue, []).append((s.time, q))
    return [_queue(name, points) for name, points in series.items()]


def _below(q: QueueSample) -> bool:
    """The queue holds less than it asks for within its guarantee: of some guaranteed
    resource, less than the guarantee or than allocated plus pending, whichever is less (a
    queue that asks for less than its guarantee reaches it with all it asks for)."""
    return any(
        q.allocated.get(name, 0) < min(value, q.allocated.get(name, 0) + q.pending.get(name, 0))
        for name, value in q.guaranteed.items()
        if value > 0
    )


def _reached(q: QueueSample) -> bool:
    """The queue holds, of every guaranteed resource, its guarantee or all it asks for if
    that is less, and holds something: a queue that holds nothing and asks nothing (its
    only job failed or was rejected) has not reached its guarantee."""
    held = any(q.allocated.get(name, 0) > 0 for name, value in q.guaranteed.items() if value > 0)
    return held and not _below(q)


def _queue(name: str, points: list[tuple[float, QueueSample]]) -> QueueSummary:
    last = points[-1][1]
    peak: dict[str, int] = {}
    shares: dict[str, list[float]] = {}
    first_pending: float | None = None
    reached: float | None = None
    starved = 0.0
    for i, (t, q) in enumerate(points):
        for res, value in q.allocated.items():
            peak[res] = max(peak.get(res, 0), value)
        for res, value in q.guaranteed.items():
            if value > 0:
                shares.setdefault(res, []).append(q.allocated.get(res, 0) / value)
        asking = any(q.pending.values())
        if asking and first_pending is None:
            first_pending = t
        if q.guaranteed and first_pending is not None and reached is None and _reached(q):
            # every pod it asked for within its guarantee placed, or the guarantee reached
            reached = t - first_pending
        if asking and q.guaranteed and _below(q) and i + 1 < len(points):
            starved += points[i + 1][0] - t
    return QueueSummary(
        queue=name,
        guaranteed=dict(last.guaranteed),
        max=dict(last.max),
        peak=peak,
        mean_share={res: round(sum(v) / len(v), 6) for res, v in sorted(shares.items())},
        guarantee_reached_after=reached,
        starved_seconds=round(starved, 6),
    )


#: The figures of the wall clock, which no two runs share: the console and report.md show
#: them, summary.json leaves them out, so a seed gives the same file bit for bit.
WALL_FIELDS: Final = ("wall_seconds", "pods_per_wall_second")


def summary_json(summaries: Sequence[Summary]) -> bytes:
    """``{"runs": [...]}``, keys in a fixed order, indented, without ``WALL_FIELDS``: the
    bytes of summary.json, the same for every run of a scenario with one seed."""
    runs = [msgspec.json.decode(_ENCODER.encode(s)) for s in summaries]  # fields in order
    for run in runs:
        for name in WALL_FIELDS:
            del run[name]
    return msgspec.json.format(msgspec.json.encode({"runs": runs}), indent=2) + b"\n"


def write_summary(results: Sequence[RunResult], folder: str | Path) -> Path:
    """Write ``summary.json`` (one ``Summary`` per run) into ``folder`` (made if missing)."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    path = out / SUMMARY_FILE
    path.write_bytes(summary_json([summarize(r) for r in results]))
    return path
