"""Simulated pods per wall-clock second: ``scheduler simulate``'s engine on a large cluster.

A scenario of ``--nodes`` nodes (5,000; 64Gi, 16 vcores each) and about ``--pods`` pods
(100,000): batch jobs of 10 pods (1Gi, 1 vcore, 5 to 20 minutes each) arriving as a
Poisson process over the first hour into two queues with guarantees, and one Spark-like
gang workload (a tenth of the pods, Soft gangs with placeholders); the run lasts two
hours of virtual time, sampled every minute. ``--seed`` (1) seeds the arrivals and the
runtimes, so every repeat plays the same pods.

The scenario is parsed once, outside the timed part. Each repeat plays it as ``scheduler
simulate`` does: a fresh in-process core on a manual clock, the engine moving virtual time
as fast as it goes, in this process (whose garbage collector and malloc are tuned once,
as the ``scheduler`` console script tunes its own). The wall time is the engine's, from
the start of the core to the end of the run; the pods placed are the real pods (not the
placeholders) that the core allocated; the rate is pods placed per wall-clock second.
Then, untimed, the run is checked on what the simulated RM saw: no node over capacity, no
gang that ran with part of its members, every job finished. A run that breaks one fails
the script (exit 1, whatever the target).

The table has each repeat (wall seconds and this process's CPU seconds over the engine's
run, pods placed, pods per second, the 1-minute load average before and after it), the
median and the best, and the load average at the start; bench/results/simulate.json keeps
every repeat.

Target: >= 2,000 simulated pods per wall-clock second at 5,000 nodes and 100,000 pods (a
day of 100,000 pods in under a minute), the median of the repeats, read on the build this
interpreter imports. ``--check`` exits 1 when it is missed.

    PYTHONPATH=src python bench/bench_simulate.py [--nodes 5000] [--pods 100000] [--seed 1]
        [--repeats 3] [--quick] [--check] [--out FILE]

``--quick`` is 200 nodes and 2,000 pods, once.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from typing import Any

import scheduler
from _common import Run, add_arguments, load_average
from bench_scheduling import build_of_scheduler
from scheduler.simulate import (
    RunResult,
    Scenario,
    Summary,
    parse_scenario,
    run_scenario,
    summarize,
)

TARGET = 2_000.0  # simulated pods per wall-clock second, at least, for the default size
NODES, PODS = 5_000, 100_000
QUICK_NODES, QUICK_PODS = 200, 2_000
RUNTIME = "{uniform: [5m, 20m]}"


class BenchError(RuntimeError):
    """A run that broke one of its checks: its numbers would be wrong."""


def scenario_text(nodes: int, pods: int, seed: int) -> str:
    batch_jobs = max(1, round(pods * 0.9 / 10))
    gangs = max(1, round(pods * 0.1 / 21))  # a driver and 20 executors
    vcores = nodes * 16
    return f"""\
name: bench-{nodes}-nodes-{pods}-pods
seed: {seed}
duration: 2h
sample_every: 1m
nodes:
  - {{group: worker, count: {nodes}, capacity: {{memory: 64Gi, vcore: 16}}}}
queues:
  partitions:
    - name: default
      queues:
        - name: root
          submitacl: '*'
          queues:
            - name: batch
              resources: {{guaranteed: {{vcore: {vcores // 2}}}}}
            - name: spark
              resources: {{guaranteed: {{vcore: {vcores // 4}}}}}
workloads:
  - name: batch-a
    queue: root.batch
    arrivals: {{poisson: {{rate: {batch_jobs / 2}/h, until: 1h}}}}
    job: {{kind: batch, pods: 10, resource: {{memory: 1Gi, vcore: 1}}, runtime: {RUNTIME}}}
  - name: batch-b
    queue: root.batch
    arrivals: {{poisson: {{rate: {batch_jobs / 2}/h, until: 1h}}}}
    job: {{kind: batch, pods: 10, resource: {{memory: 1Gi, vcore: 1}}, runtime: {RUNTIME}}}
  - name: spark
    queue: root.spark
    arrivals: {{poisson: {{rate: {gangs}/h, until: 1h}}}}
    job:
      kind: spark
      pods: 20
      resource: {{memory: 2Gi, vcore: 1}}
      runtime: {{uniform: [5m, 15m]}}
      gang: {{style: Soft, timeout: 10m}}
"""


def check(summary: Summary) -> None:
    """Untimed: no node over capacity, no partial gang, every job finished."""
    checks = summary.checks
    problems = []
    if checks.over_capacity:
        shown = "; ".join(checks.over_capacity[:3])
        problems.append(f"{len(checks.over_capacity):,} over-capacity breaches: {shown}")
    if checks.partial_gangs:
        shown = ", ".join(checks.partial_gangs[:3])
        problems.append(f"{len(checks.partial_gangs):,} gangs ran partial: {shown}")
    if not checks.all_finished:
        problems.append(
            f"not every job finished ({checks.jobs_finished:,} of {checks.jobs_submitted:,})"
        )
    if problems:
        raise BenchError("; ".join(problems))


async def play(scenario: Scenario) -> tuple[RunResult, float]:
    """The engine's run of ``scenario`` and the CPU seconds of this process over it."""
    cpu_before = time.process_time()
    result = await run_scenario(scenario)
    return result, time.process_time() - cpu_before


def run_once(scenario: Scenario) -> dict[str, Any]:
    """One play of ``scenario`` on a fresh core; its figures, once it passed its checks."""
    gc.collect()  # what came before, outside the timed part
    result, cpu = asyncio.run(play(scenario))
    summary = summarize(result)
    check(summary)
    wall = result.wall_seconds
    checks = summary.checks
    return {
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "virtual_seconds": result.duration,
        "pods_submitted": summary.pods_submitted,
        "pods_with_placeholders": len(result.pods),
        "pods_placed": summary.pods_allocated,
        "pods_finished": summary.pods_finished,
        # no *_per_s key in the runs: bench/ab.py compares the medians only
        "pods_per_wall_second": summary.pods_allocated / wall,
        "pending_p90_seconds": summary.pending_time.p90,
        "jobs": checks.jobs_submitted,
        "jobs_finished": checks.jobs_finished,
        "gangs": checks.gangs,
        "gangs_whole": checks.gangs_whole,
    }


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rates = [r["pods_per_wall_second"] for r in runs]
    loads = [x for r in runs for x in (r["load_before"], r["load_after"]) if x is not None]
    return {
        "wall_seconds": statistics.median(r["wall_seconds"] for r in runs),
        "wall_seconds_best": min(r["wall_seconds"] for r in runs),
        "cpu_seconds": statistics.median(r["cpu_seconds"] for r in runs),
        "pods_placed": statistics.median(r["pods_placed"] for r in runs),
        "pods_per_s": statistics.median(rates),
        "pods_per_s_best": max(rates),
        "load_min": min(loads) if loads else None,
        "load_max": max(loads) if loads else None,
    }


def _load(low: float | None, high: float | None) -> str:
    return f"{low:.2f}-{high:.2f}" if low is not None and high is not None else "-"


def print_table(
    nodes: int,
    runs: list[dict[str, Any]],
    res: dict[str, Any],
    build: str,
    load: list[float] | None,
) -> None:
    first = runs[0]
    shown = f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}" if load else "unknown"
    print(
        f"simulate: {nodes:,} nodes, {first['pods_submitted']:,} pods submitted "
        f"({first['pods_with_placeholders']:,} with placeholders), "
        f"{first['virtual_seconds']:,.0f}s virtual; build {build}; "
        f"{len(runs)} repeat{'s' if len(runs) > 1 else ''}; "
        f"load: 1-minute, before-after (at the start: {shown}; {os.cpu_count()} CPUs)"
    )
    print(
        f"{'repeat':<7} {'wall s':>8} {'CPU s':>8} {'pods placed':>11} "
        f"{'finished':>9} {'pods/s':>8} {'load':>11}"
    )
    for i, r in enumerate(runs, 1):
        print(
            f"{i:<7} {r['wall_seconds']:>8.2f} {r['cpu_seconds']:>8.2f} {r['pods_placed']:>11,} "
            f"{r['pods_finished']:>9,} {r['pods_per_wall_second']:>8,.0f} "
            f"{_load(r['load_before'], r['load_after']):>11}"
        )
    print(
        f"{'median':<7} {res['wall_seconds']:>8.2f} {res['cpu_seconds']:>8.2f} "
        f"{res['pods_placed']:>11,.0f} {'':>9} {res['pods_per_s']:>8,.0f} "
        f"{_load(res['load_min'], res['load_max']):>11}"
    )
    print(
        f"{'best':<7} {res['wall_seconds_best']:>8.2f} {'':>8} {'':>11} {'':>9} "
        f"{res['pods_per_s_best']:>8,.0f}"
    )
    print(
        f"checks, every repeat: no node over capacity, no partial gang "
        f"({first['gangs_whole']:,} of {first['gangs']:,} gangs whole), every job finished "
        f"({first['jobs_finished']:,} of {first['jobs']:,})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, help=f"nodes of the cluster ({NODES:,})")
    parser.add_argument("--pods", type=int, help=f"pods of the scenario, about ({PODS:,})")
    parser.add_argument("--seed", type=int, default=1, help="the scenario's seed (1)")
    parser.add_argument("--repeats", type=int, help="plays of the scenario (3; 1 with --quick)")
    add_arguments(parser)
    args = parser.parse_args()
    nodes = args.nodes or (QUICK_NODES if args.quick else NODES)
    pods = args.pods or (QUICK_PODS if args.quick else PODS)
    repeats = args.repeats or (1 if args.quick else 3)
    if nodes < 1 or pods < 1 or repeats < 1:
        parser.error("--nodes, --pods and --repeats must be at least 1")
    scenario = parse_scenario(scenario_text(nodes, pods, args.seed), source="bench")
    build = build_of_scheduler()
    run = Run("simulate", args)
    progress = run.progress(repeats)
    runs: list[dict[str, Any]] = []
    for r in range(repeats):
        with progress.step(f"{nodes:,} nodes, {pods:,} pods, repeat {r + 1}/{repeats}") as step:
            before = load_average()
            figures = run_once(scenario)
            after = load_average()
            step.result = (
                f"{figures['pods_placed']:,} pods placed in {figures['wall_seconds']:.2f} s "
                f"wall, {figures['pods_per_wall_second']:,.0f} pods/s"
            )
        figures["load_before"] = before[0] if before else None
        figures["load_after"] = after[0] if after else None
        runs.append(figures)
    res = summarise(runs)
    print_table(nodes, runs, res, build, run.machine["load_average_start"])
    run.target(
        "pods_per_s",
        f"simulated pods per wall-clock second at {nodes:,} nodes, {pods:,} pods (median)",
        res["pods_per_s"],
        at_least=TARGET,
    )
    return run.finish(
        {
            "nodes": nodes,
            "pods": pods,
            "seed": args.seed,
            "scenario": scenario.name,
            "repeats": repeats,
            "build": build,
            **res,
            "runs": runs,
        }
    )


if __name__ == "__main__":
    scheduler.tune_gc()  # this process is the benchmark's own, as the console script's is
    scheduler.tune_malloc()
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
