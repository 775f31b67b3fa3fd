"""The floor: the least work one placement takes in plain CPython, beside the core.

``bench_scheduling``'s 10k-asks case (5,000 nodes, 10,000 distinct asks of
``{memory: 10, vcore: 1}``, two applications, each node room for 4) done by a minimal loop
with none of the core's generality, on the same ``si.AllocationAsk`` objects:

* ingest with checks: the type checks and the resource map of each ask, the ask filed
  under its application in arrival order, the pending totals of application and queue;
* per placement: the next ask of the application, the least used node from an integer heap
  (score above node rank) that has room, the node's, application's and queue's totals
  updated, the node re-sorted, the ``si.Allocation`` built (one shared ``si.Resource`` per
  size) and put in the response.

No actors, no queue order, no re-checks, no reservations, no gangs, no outstanding-request
inspection: what is left between the core and this loop is the price of those. The same
process then runs the core on the case (``bench_scheduling.run_case``), interleaved over
``--repeat`` rounds, and prints both with the ratio.

    python bench/bench_floor.py [--repeat 5] [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import statistics
import sys
import time
from typing import Any

import scheduler
from _common import Run, add_arguments
from bench_scheduling import CASES, QUICK_CASES, Case, asks_per_node, build_asks, run_case
from scheduler import si

_Resource = si.Resource
_Quantity = si.Quantity
INT64_MAX = 2**63 - 1


def floor_once(case: Case, asks: list[si.AllocationAsk]) -> float:
    """One run of the minimal loop; returns allocations per second."""
    per_node = asks_per_node(case, "headroom")
    capacity = {"memory": 10 * per_node, "vcore": per_node}
    node_ids = [f"node-{i:05d}" for i in range(case.nodes)]
    available = [dict(capacity) for _ in node_ids]
    allocated: list[dict[str, int]] = [{} for _ in node_ids]
    factors = tuple((name, 0.5 / v) for name, v in capacity.items())
    heap = [rank for rank in range(len(node_ids))]  # score 0 above the rank
    keys = list(heap)
    app_asks: dict[str, dict[str, tuple[str, dict[str, int], tuple[tuple[str, int], ...]]]] = {}
    app_pending: dict[str, dict[str, int]] = {}
    app_allocated: dict[str, dict[str, int]] = {}
    queue_pending: dict[str, int] = {}
    queue_allocated: dict[str, int] = {}
    shared: dict[tuple[tuple[str, int], ...], si.Resource] = {}
    out: list[si.Allocation] = []
    serial = 0

    start = time.perf_counter()
    for ask in asks:  # ingest with checks
        key, app_id, res = ask.allocation_key, ask.application_id, ask.resource_ask
        if type(key) is not str or not key or type(app_id) is not str or not app_id:
            raise ValueError("bad ask")
        if type(res) is not _Resource:
            raise ValueError("bad resource")
        resource: dict[str, int] = {}
        for name, q in res.resources.items():
            value = q.value
            if type(q) is not _Quantity or type(value) is not int or not 0 <= value <= INT64_MAX:
                raise ValueError("bad quantity")
            if value:
                resource[name] = value
        per_app = app_asks.get(app_id)
        if per_app is None:
            per_app = app_asks[app_id] = {}
            app_pending[app_id] = {}
            app_allocated[app_id] = {}
        per_app[key] = (key, resource, tuple(resource.items()))
        pending = app_pending[app_id]
        for name, v in resource.items():
            pending[name] = pending.get(name, 0) + v
            queue_pending[name] = queue_pending.get(name, 0) + v
    while app_asks:  # placements, the applications in turn
        for app_id in list(app_asks):
            per_app = app_asks[app_id]
            key = next(iter(per_app))
            _, resource, size = per_app.pop(key)
            if not per_app:
                del app_asks[app_id]
            top = heap[0]
            rank = top & 0xFFFFFFFF
            free = available[rank]
            for name, v in size:
                if v > free.get(name, 0):
                    raise RuntimeError("the floor assumes the top node has room")
            used = allocated[rank]
            pending = app_pending[app_id]
            held = app_allocated[app_id]
            for name, v in size:
                free[name] -= v
                used[name] = used.get(name, 0) + v
                pending[name] -= v
                held[name] = held.get(name, 0) + v
                queue_pending[name] -= v
                queue_allocated[name] = queue_allocated.get(name, 0) + v
            score = 0.0
            for name, factor in factors:
                score += used.get(name, 0) * factor
            keys[rank] = (int(score * (1 << 32)) << 32) + rank
            heapq.heapreplace(heap, keys[rank])
            si_res = shared.get(size)
            if si_res is None:
                si_res = shared[size] = si.Resource.of(**dict(size))
            serial += 1
            out.append(
                si.Allocation(
                    allocation_key=key,
                    uuid=f"u-{serial}",
                    resource_per_alloc=si_res,
                    node_id=node_ids[rank],
                    application_id=app_id,
                    partition_name="default",
                )
            )
    si.AllocationResponse(new=out)
    elapsed = time.perf_counter() - start
    assert len(out) == case.asks
    return case.asks / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int)
    add_arguments(parser)
    args = parser.parse_args()
    from loguru import logger

    logger.remove()
    case = (QUICK_CASES if args.quick else CASES)["10k-asks"]
    repeat = args.repeat or (1 if args.quick else 5)
    run = Run("floor", args)
    progress = run.progress(2 * repeat)
    floors: list[float] = []
    cores: list[float] = []
    for r in range(repeat):
        with progress.step(f"floor loop, repeat {r + 1}/{repeat}") as step:
            floors.append(floor_once(case, build_asks(case)))
            step.result = f"{floors[-1]:,.0f} allocs/s"
        with progress.step(f"core, repeat {r + 1}/{repeat}") as step:
            figures: dict[str, Any] = asyncio.run(run_case(case, "headroom"))
            cores.append(figures["allocs_per_s"])
            step.result = f"{cores[-1]:,.0f} allocs/s"
    floor_per_s, core_per_s = statistics.median(floors), statistics.median(cores)
    print(f"{case.name}: {case.nodes:,} nodes, {case.asks:,} asks; median of {repeat}")
    print(f"{'':<6} {'allocs/s':>10} {'us/alloc':>9}")
    for label, rate in (("floor", floor_per_s), ("core", core_per_s)):
        print(f"{label:<6} {rate:>10,.0f} {1e6 / rate:>9.2f}")
    print(f"the core takes {floor_per_s / core_per_s:.1f}x the floor's time per allocation")
    return run.finish(
        {
            "case": case.name,
            "floor_allocs_per_s": floor_per_s,
            "core_allocs_per_s": core_per_s,
            "floor_runs": floors,
            "core_runs": cores,
        }
    )


if __name__ == "__main__":
    scheduler.tune_gc()  # this process is the benchmark's own, as a daemon's would be
    sys.exit(main())
