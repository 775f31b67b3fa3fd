"""Small, realistic runs made by hand for the report's and the live view's tests.

An hour of a cluster of 8 nodes (64Gi, 16 cores each) with three queues under root:
``batch`` (guaranteed and max), ``service`` (guaranteed and max) and ``adhoc`` (a max
only); a node fails at 30 minutes and comes back at 45. Pods are drawn from a seeded
random generator, the samples are what those pods add up to every minute, and the Summary
is computed from them as the engine would, so every number the report shows can be traced
to the input.
"""

from __future__ import annotations

import math
import random

from scheduler.simulate import (
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

GI = 1 << 30
NODE = {"memory": 64 * GI, "vcore": 16_000}
NODES = 8
HOUR = 3600.0
FAILED_AT, BACK_AT = 1800.0, 2700.0
QUEUES = {
    "root.batch": ({"memory": 256 * GI, "vcore": 64_000}, {"memory": 384 * GI, "vcore": 96_000}),
    "root.service": ({"memory": 128 * GI, "vcore": 32_000}, {"memory": 256 * GI}),
    "root.adhoc": ({}, {"memory": 128 * GI, "vcore": 32_000}),
}


def _add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: a.get(k, 0) + b.get(k, 0) for k in {*a, *b}}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def distribution(values: list[float]) -> Distribution:
    if not values:
        return Distribution(count=0, mean=0.0, p50=0.0, p90=0.0, p99=0.0, max=0.0)
    return Distribution(
        count=len(values),
        mean=sum(values) / len(values),
        p50=_percentile(values, 0.5),
        p90=_percentile(values, 0.9),
        p99=_percentile(values, 0.99),
        max=max(values),
    )


def _pods(rng: random.Random, wait: float) -> list[PodRecord]:
    pods = []
    for i in range(150):
        queue = rng.choice(list(QUEUES))
        submitted = round(rng.uniform(0, HOUR * 0.8), 1)
        allocated = round(submitted + rng.expovariate(1 / wait), 1)
        finished = round(allocated + rng.uniform(300, 1500), 1)
        size = rng.choice([4, 8, 12])
        cores = rng.choice([1, 2, 3])
        pods.append(
            PodRecord(
                key=f"pod-{i}",
                job=f"job-{i // 3}",
                kind="batch" if queue != "root.service" else "service",
                queue=queue,
                workload=queue.removeprefix("root."),
                placeholder=False,
                resource={"memory": size * GI, "vcore": cores * 1000},
                submitted=submitted,
                allocated=allocated if allocated < HOUR else None,
                finished=finished if finished < HOUR and allocated < HOUR else None,
                node=f"node-{i % NODES}" if allocated < HOUR else None,
                preempted=queue == "root.adhoc" and i % 7 == 0 and finished < HOUR,
            )
        )
    return pods


def _gangs(rng: random.Random, wait: float) -> list[GangRecord]:
    gangs = []
    for i in range(6):
        submitted = 120.0 + 500 * i
        timed_out = i == 5
        whole = None if timed_out else round(submitted + rng.expovariate(1 / wait), 1)
        gangs.append(
            GangRecord(
                job=f"gang-{i}",
                style="Hard" if i % 2 else "Soft",
                queue="root.batch",
                members=8,
                submitted=submitted,
                whole=whole,
                timed_out=timed_out,
                finished=None if whole is None else whole + 600,
            )
        )
    return gangs


def _sample(time: float, pods: list[PodRecord], gangs: list[GangRecord]) -> Sample:
    up = NODES - (1 if FAILED_AT <= time < BACK_AT else 0)
    running = [
        p
        for p in pods
        if p.allocated is not None
        and p.allocated <= time
        and (p.finished is None or time < p.finished)
    ]
    queues = []
    root_alloc: dict[str, int] = {}
    for path, (guaranteed, maximum) in QUEUES.items():
        used: dict[str, int] = {}
        for p in running:
            if p.queue == path:
                used = _add(used, p.resource)
        pending: dict[str, int] = {}
        for p in pods:
            if p.queue == path and p.submitted <= time and (p.allocated or HOUR) > time:
                pending = _add(pending, p.resource)
        root_alloc = _add(root_alloc, used)
        queues.append(
            QueueSample(
                queue=path, allocated=used, guaranteed=guaranteed, max=maximum, pending=pending
            )
        )
    capacity = {k: v * up for k, v in NODE.items()}
    root = QueueSample(queue="root", allocated=root_alloc, guaranteed={}, max=capacity, pending={})
    return Sample(
        time=time,
        capacity=capacity,
        allocated={"memory": root_alloc.get("memory", 0), "vcore": root_alloc.get("vcore", 0)},
        pending_pods=sum(
            1 for p in pods if p.submitted <= time and (p.allocated or HOUR + 1) > time
        ),
        running_pods=len(running),
        allocations=sum(1 for p in pods if p.allocated is not None and p.allocated <= time),
        preemptions=sum(1 for p in pods if p.preempted and (p.finished or HOUR) <= time),
        gangs_waiting=sum(1 for g in gangs if g.submitted <= time and (g.whole or HOUR) > time),
        gangs_running=sum(
            1
            for g in gangs
            if g.whole is not None and g.whole <= time and (g.finished or HOUR) > time
        ),
        queues=[root, *queues],
    )


def make_run(configuration: str = "default", *, seed: int = 7, wait: float = 90.0) -> RunResult:
    """An hour of the three-queue cluster, a sample a minute; ``wait`` is the mean pending
    time of its pods (a slower configuration waits longer)."""
    rng = random.Random(seed)
    pods = _pods(rng, wait)
    gangs = _gangs(rng, wait * 2)
    return RunResult(
        scenario="three-queues",
        configuration=configuration,
        seed=seed,
        duration=HOUR,
        wall_seconds=4.25,
        samples=[_sample(60.0 * m, pods, gangs) for m in range(61)],
        pods=pods,
        gangs=gangs,
        events=[
            SimEvent(time=FAILED_AT, kind="node-removed", detail="node-3 failed"),
            SimEvent(time=BACK_AT, kind="node-added", detail="node-3 back"),
        ],
    )


def summarize(run: RunResult) -> Summary:
    """The Summary of ``run``, computed as the engine computes it."""
    real = [p for p in run.pods if not p.placeholder]
    waits = [p.allocated - p.submitted for p in real if p.allocated is not None]
    gang_waits = [g.whole - g.submitted for g in run.gangs if g.whole is not None]
    util = {
        name: sum(s.allocated.get(name, 0) / s.capacity[name] for s in run.samples)
        / len(run.samples)
        for name in ("memory", "vcore")
    }
    queues = []
    for path, (guaranteed, maximum) in QUEUES.items():
        peak: dict[str, int] = {}
        shares: dict[str, list[float]] = {n: [] for n in guaranteed}
        for s in run.samples:
            q = next(q for q in s.queues if q.queue == path)
            peak = {k: max(peak.get(k, 0), q.allocated.get(k, 0)) for k in {*peak, *q.allocated}}
            for n, g in guaranteed.items():
                shares[n].append(q.allocated.get(n, 0) / g)
        queues.append(
            QueueSummary(
                queue=path,
                guaranteed=guaranteed,
                max=maximum,
                peak=peak,
                mean_share={n: sum(v) / len(v) for n, v in shares.items()},
                guarantee_reached_after=540.0 if path == "root.batch" else None,
                starved_seconds=120.0 if guaranteed else 0.0,
            )
        )
    jobs = {p.job for p in run.pods} | {g.job for g in run.gangs}
    unfinished = {p.job for p in run.pods if p.finished is None}
    unfinished |= {g.job for g in run.gangs if g.finished is None}
    return Summary(
        scenario=run.scenario,
        configuration=run.configuration,
        seed=run.seed,
        duration=run.duration,
        wall_seconds=run.wall_seconds,
        pods_per_wall_second=len(run.pods) / run.wall_seconds,
        pods_submitted=len(run.pods),
        pods_allocated=sum(1 for p in run.pods if p.allocated is not None),
        pods_finished=sum(1 for p in run.pods if p.finished is not None),
        preemptions=run.samples[-1].preemptions,
        pending_time=distribution(waits),
        gang_wait=distribution(gang_waits),
        utilization=util,
        queues=queues,
        checks=Checks(
            jobs_submitted=len(jobs),
            jobs_finished=len(jobs - unfinished),
            all_finished=not unfinished,
            over_capacity=[],
            gangs=len(run.gangs),
            gangs_whole=sum(1 for g in run.gangs if g.whole is not None),
            partial_gangs=[],
            guarantees_reached={"root.batch": True, "root.service": False},
        ),
    )
