"""Simulated pods per wall-clock second: ``scheduler simulate``'s engine on a large cluster.

A scenario of ``--nodes`` nodes (64Gi, 16 vcores each) and about ``--pods`` pods: batch
jobs of 10 pods (1Gi, 1 vcore, 5 to 20 minutes each) arriving as a Poisson process over
the first hour into two queues with guarantees, and one Spark-like gang workload (a tenth
of the pods); the run lasts two hours of virtual time. It prints the wall time, the pods
placed and the pods per wall-clock second, and the run's checks.

    PYTHONPATH=src python bench/simulate.py [--nodes 5000] [--pods 100000] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from scheduler.simulate import parse_scenario, run_scenario, summarize

RUNTIME = "{uniform: [5m, 20m]}"


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    scenario = parse_scenario(scenario_text(args.nodes, args.pods, args.seed), source="bench")
    result = asyncio.run(run_scenario(scenario))
    s = summarize(result)
    real = s.pods_submitted
    print(
        f"{args.nodes:,} nodes, {real:,} pods submitted ({len(result.pods):,} with "
        f"placeholders), {s.pods_allocated:,} placed, {s.pods_finished:,} finished: "
        f"{s.duration:,.0f}s virtual in {s.wall_seconds:,.1f}s wall"
    )
    print(f"simulated pods per wall-clock second: {s.pods_per_wall_second:,.0f}")
    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "pods": real,
                "wall_seconds": s.wall_seconds,
                "pods_per_wall_second": s.pods_per_wall_second,
                "pending_p90": s.pending_time.p90,
                "all_finished": s.checks.all_finished,
                "over_capacity": len(s.checks.over_capacity),
                "partial_gangs": len(s.checks.partial_gangs),
            }
        )
    )
    return 0 if not s.checks.over_capacity and not s.checks.partial_gangs else 1


if __name__ == "__main__":
    sys.exit(main())
