"""SI requests through the RM proxy into typed events.

Measures how fast ``RMProxy.update_allocation`` checks SI asks and turns them into the
partition's typed ``AsksUpdated`` events (the partition ref is a counter, so only the proxy
is measured), for requests of 1, 100 and 1,000 asks, and node requests of 100 nodes.
Prints a table, compares against the target and writes JSON.

    python bench/bench_proxy.py [--asks 200000]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from scheduler import si
from scheduler._proxy import RMProxy, RMRecord

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--asks", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "proxy.json"))
    args = parser.parse_args()
    from loguru import logger

    logger.remove()
    results = []
    for per in (1, 100, 1000):
        runs = [bench_asks(args.asks, per) for _ in range(args.repeat)]
        results.append(max(runs, key=lambda r: r["items_per_s"]))
    results.append(
        max(
            (bench_nodes(args.asks // 4, 100) for _ in range(args.repeat)),
            key=lambda r: r["items_per_s"],
        )
    )
    print(f"{'kind':>6} {'per req':>8} {'items/s':>12} {'requests/s':>12}")
    for r in results:
        print(
            f"{r['kind']:>6} {r['per_request']:>8} {r['items_per_s']:>12,.0f} "
            f"{r['requests_per_s']:>12,.0f}"
        )
    best = max(r["items_per_s"] for r in results if r["kind"] == "asks")
    print(
        f"target: >= {TARGET_ASKS_PER_S:,} asks/s into typed events: {best:,.0f} "
        f"{'PASS' if best >= TARGET_ASKS_PER_S else 'MISS'}"
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"results": results, "target_asks_per_s": TARGET_ASKS_PER_S}, indent=2)
    )


if __name__ == "__main__":
    main()
