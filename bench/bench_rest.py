"""What one REST list request costs: ``GET /ws/v1/partition/default/nodes``.

A core with 5,000 nodes (and 200 applications with a pending ask each). "before" is the
handler as it was: the whole ``Core.state_dump()``, of which it answers the partition's
nodes; "after" is the partition's own ``nodes`` query, as the handler reads it now. The
HTTP row is the real request through the ASGI app (httpx, no network). Prints a table.

    python bench/bench_rest.py [--nodes 5000] [--apps 200] [--repeat 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from starlette.responses import JSONResponse

from scheduler.core._events import Query
from scheduler.daemon._rest import make_app
from scheduler.testing import start_scenario


async def timed(step: Callable[[], Awaitable[Any]], repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        await step()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3, min(times) * 1e3


async def main(args: argparse.Namespace) -> None:
    async with start_scenario() as s:
        core = s.core
        await s.add_nodes(*(f"node-{n}" for n in range(args.nodes)))
        for n in range(args.apps):
            await s.submit(f"app-{n}", tags={"namespace": "default"})  # the built-in tag rule
            await s.ask(f"app-{n}", "work", memory=10**12)  # fits nowhere: stays pending
        ref = core._partition_ref("default")

        async def before() -> None:
            dump = await core.state_dump()
            part = next(p for p in dump["partitions"] if p["partition"]["name"] == "default")
            JSONResponse(part["nodes"])

        async def after() -> None:
            JSONResponse(await core._ask(ref, Query(kind="nodes")))

        transport = httpx.ASGITransport(app=make_app(core))
        async with httpx.AsyncClient(transport=transport, base_url="http://core") as client:

            async def request() -> None:
                response = await client.get("/ws/v1/partition/default/nodes")
                assert response.status_code == 200 and len(response.json()) == args.nodes

            rows = [
                ("before: state_dump, pick nodes", await timed(before, args.repeat)),
                ("after: nodes query", await timed(after, args.repeat)),
                ("after: GET .../nodes over ASGI", await timed(request, args.repeat)),
            ]
    print(f"GET /ws/v1/partition/default/nodes, {args.nodes} nodes, {args.apps} apps")
    print(f"{'path':<34} {'median ms':>10} {'best ms':>9}")
    for name, (median, best) in rows:
        print(f"{name:<34} {median:>10.1f} {best:>9.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--apps", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=20)
    asyncio.run(main(parser.parse_args()))
