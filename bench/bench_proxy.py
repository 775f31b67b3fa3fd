"""SI requests through the RM proxy into typed events.

Measures how fast ``RMProxy.update_allocation`` checks SI asks and turns them into the
partition's typed ``AsksUpdated`` events (the partition ref is a counter, so only the proxy
is measured), for requests of 1, 100 and 1,000 asks, and node requests of 100 nodes.
Prints a table and writes bench/results/proxy.json.

Target: >= 300,000 asks/s into typed events (the best of the three request sizes).
``--check`` exits 1 when it is missed.

    python bench/bench_proxy.py [--asks 200000] [--repeat 3] [--quick] [--check] [--out FILE]

``--quick`` is 2,000 asks (500 nodes), once.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import scheduler
from _common import Run, add_arguments
from scheduler import si
from scheduler.core._proxy import RMProxy, RMRecord

TARGET_ASKS_PER_S = 300_000


class CountingRef:
    def __init__(self) -> None:
        self.events = 0
        self.items = 0

    def tell(self, message: Any) -> None:
        self.events += 1
        self.items += len(getattr(message, "asks", ()) or getattr(message, "nodes", ()))


def make_proxy() -> tuple[RMProxy, CountingRef]:
    proxy = RMProxy()
    ref = CountingRef()
    record = proxy.rms["bench"] = RMRecord("bench", ref)  # type: ignore[arg-type]
    record.add_partition("default", ref, {})  # type: ignore[arg-type]
    return proxy, ref


def bench_asks(total: int, per_request: int) -> dict[str, float]:
    proxy, ref = make_proxy()
    requests = [
        si.AllocationRequest(
            rm_id="bench",
            asks=[
                si.AllocationAsk(
                    allocation_key=f"ask-{r}-{i}",
                    application_id=f"app-{i % 2}",
                    resource_ask=si.Resource.of(memory=10, vcore=1),
                    max_allocations=1,
                )
                for i in range(per_request)
            ],
        )
        for r in range(total // per_request)
    ]
    start = time.perf_counter()
    for request in requests:
        proxy.update_allocation(request)
    elapsed = time.perf_counter() - start
    assert ref.items == total, (ref.items, total)
    return {
        "kind": "asks",
        "per_request": per_request,
        "items": total,
        "seconds": elapsed,
        "items_per_s": total / elapsed,
        "requests_per_s": len(requests) / elapsed,
    }


def bench_nodes(total: int, per_request: int) -> dict[str, float]:
    proxy, ref = make_proxy()
    requests = [
        si.NodeRequest(
            rm_id="bench",
            nodes=[
                si.NodeInfo(
                    node_id=f"node-{r}-{i}",
                    action=si.ActionFromRM.CREATE,
                    schedulable_resource=si.Resource.of(memory=1000, vcore=100),
                )
                for i in range(per_request)
            ],
        )
        for r in range(total // per_request)
    ]
    start = time.perf_counter()
    for request in requests:
        proxy.update_node(request)
    elapsed = time.perf_counter() - start
    assert ref.items == total
    return {
        "kind": "nodes",
        "per_request": per_request,
        "items": total,
        "seconds": elapsed,
        "items_per_s": total / elapsed,
        "requests_per_s": len(requests) / elapsed,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--asks", type=int)
    parser.add_argument("--repeat", type=int)
    add_arguments(parser)
    args = parser.parse_args()
    from loguru import logger

    logger.remove()
    n_asks = args.asks or (2_000 if args.quick else 200_000)
    repeat = args.repeat or (1 if args.quick else 3)
    run = Run("proxy", args)
    cases = [(f"asks, {per:,} per request", n_asks, per, bench_asks) for per in (1, 100, 1000)]
    cases.append(("nodes, 100 per request", n_asks // 4, 100, bench_nodes))
    progress = run.progress(len(cases) * repeat)
    results = []
    for label, total, per, bench in cases:
        runs = []
        for r in range(repeat):
            with progress.step(f"{total:,} {label}, repeat {r + 1}/{repeat}") as step:
                runs.append(bench(total, per))
                step.result = f"{runs[-1]['items_per_s']:,.0f} items/s"
        results.append(max(runs, key=lambda r: r["items_per_s"]))
    print(f"{'kind':>6} {'per req':>8} {'items/s':>12} {'requests/s':>12}")
    for res in results:
        print(
            f"{res['kind']:>6} {res['per_request']:>8} {res['items_per_s']:>12,.0f} "
            f"{res['requests_per_s']:>12,.0f}"
        )
    best = max(r["items_per_s"] for r in results if r["kind"] == "asks")
    run.target("asks_per_s", "asks/s into typed events", best, at_least=TARGET_ASKS_PER_S)
    return run.finish({"results": results})


if __name__ == "__main__":
    scheduler.tune_gc()  # this process is the benchmark's own, as a daemon's would be
    sys.exit(main())
