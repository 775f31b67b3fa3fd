"""Scheduling throughput in the shape of YuniKorn's ``BenchmarkScheduling``.

Queues ``root.a`` and ``root.b`` (guaranteed set), two applications, 10,000 asks of
``{memory: 10, vcore: 1}``, and 500 / 1,000 / 2,000 / 5,000 nodes sized so that every ask
fits. Everything goes through the public API on the system clock; the clock stops when the
RM callback has received every allocation. Prints allocations/s per size and writes
bench/results/scheduling.json.

Targets: >= 50,000 allocations/s at the largest size, and the time per allocation at the
largest size <= 1.3 x the time at the smallest. ``--check`` exits 1 when one is missed.

    python bench/bench_scheduling.py [--asks 10000] [--nodes 500,1000,2000,5000] [--repeat 5]
        [--quick] [--check] [--out FILE]

``--quick`` is 200 asks on 10 and 20 nodes, once.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time

import scheduler
from _common import Run, add_arguments
from scheduler import si

TARGET_ALLOCS_PER_S = 50_000
TARGET_SCALING = 1.3  # per-allocation time at the largest size vs the smallest

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: a
            resources:
              guaranteed: {memory: 100000, vcore: 10000}
          - name: b
            resources:
              guaranteed: {memory: 100000, vcore: 10000}
"""


class Counter(scheduler.ResourceManagerCallback):
    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.done = asyncio.Event()

    async def update_allocation(self, response: si.AllocationResponse) -> None:
        self.count += len(response.new)
        if self.count >= self.expected:
            self.done.set()


async def run_once(n_nodes: int, n_asks: int) -> dict[str, float]:
    rm = Counter(n_asks)
    per_node = math.ceil(n_asks / n_nodes) * 2
    async with scheduler.start_scheduler() as core:
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(rm_id="bench", policy_group="default", config=QUEUES),
            rm,
        )
        await core.update_node(
            si.NodeRequest(
                rm_id="bench",
                nodes=[
                    si.NodeInfo(
                        node_id=f"node-{i:05d}",
                        action=si.ActionFromRM.CREATE,
                        schedulable_resource=si.Resource.of(memory=10 * per_node, vcore=per_node),
                    )
                    for i in range(n_nodes)
                ],
            )
        )
        await core.update_application(
            si.ApplicationRequest(
                rm_id="bench",
                new=[
                    si.AddApplicationRequest(
                        application_id=app,
                        queue_name=queue,
                        ugi=si.UserGroupInformation(user="bench"),
                    )
                    for app, queue in (("app-1", "root.a"), ("app-2", "root.b"))
                ],
            )
        )
        await core.settle()
        asks = [
            si.AllocationAsk(
                allocation_key=f"ask-{i}",
                application_id=f"app-{i % 2 + 1}",
                resource_ask=si.Resource.of(memory=10, vcore=1),
                max_allocations=1,
            )
            for i in range(n_asks)
        ]
        start = time.perf_counter()
        await core.update_allocation(si.AllocationRequest(rm_id="bench", asks=asks))
        await asyncio.wait_for(rm.done.wait(), timeout=600)
        elapsed = time.perf_counter() - start
        await core.settle()
        assert rm.count == n_asks, (rm.count, n_asks)
    return {
        "nodes": n_nodes,
        "asks": n_asks,
        "seconds": elapsed,
        "allocs_per_s": n_asks / elapsed,
        "us_per_alloc": elapsed / n_asks * 1e6,
    }


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--asks", type=int)
    parser.add_argument("--nodes")
    parser.add_argument("--repeat", type=int)
    add_arguments(parser)
    args = parser.parse_args()
    from loguru import logger

    logger.remove()
    quick = args.quick
    n_asks = args.asks or (200 if quick else 10_000)
    sizes = [
        int(x) for x in (args.nodes or ("10,20" if quick else "500,1000,2000,5000")).split(",")
    ]
    repeat = args.repeat or (1 if quick else 5)
    run = Run("scheduling", args)
    progress = run.progress(repeat * len(sizes))
    # Repeats are interleaved across sizes, so a slow spell of a shared machine hits every
    # size alike rather than one; each size keeps its best run.
    best: dict[int, dict[str, float]] = {}
    for r in range(repeat):
        for n in sizes:
            with progress.step(f"{n:,} nodes, {n_asks:,} asks, repeat {r + 1}/{repeat}") as step:
                once = await run_once(n, n_asks)
                step.result = f"{once['allocs_per_s']:,.0f} allocs/s"
            if n not in best or once["allocs_per_s"] > best[n]["allocs_per_s"]:
                best[n] = once
    results = [best[n] for n in sizes]
    print(f"{'nodes':>6} {'asks':>7} {'seconds':>8} {'allocs/s':>10} {'us/alloc':>9}")
    for res in results:
        print(
            f"{res['nodes']:>6} {res['asks']:>7} {res['seconds']:>8.3f} "
            f"{res['allocs_per_s']:>10,.0f} {res['us_per_alloc']:>9.1f}"
        )
    largest, smallest = results[-1], results[0]
    scaling = largest["us_per_alloc"] / smallest["us_per_alloc"]
    run.target(
        "allocs_per_s",
        f"allocs/s at {largest['nodes']:,.0f} nodes",
        largest["allocs_per_s"],
        at_least=TARGET_ALLOCS_PER_S,
    )
    run.target(
        "scaling",
        f"per-allocation time at {largest['nodes']:,.0f} vs {smallest['nodes']:,.0f} nodes",
        scaling,
        at_most=TARGET_SCALING,
        fmt=".2f",
    )
    return run.finish({"results": results, "scaling": scaling})


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
