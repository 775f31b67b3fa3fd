"""Recovery: how long a fresh core takes to take back an RM's cluster after a restart.

What an RM does after the core it used died (docs/daemon.md, "When the daemon dies"): it
registers again, sends its applications, then its nodes, each with
``existing_allocations`` = the allocations it runs there; the core is done when it has
settled. The RM's requests are built first; the clock starts right before the
registration and stops when ``settle()`` returns. Then, untimed, the run is checked:
every node accepted, no node or application rejected, root's allocated resource and the
partition's allocation count are the cluster's (a run that lost an allocation fails the
script, exit 1, whatever the targets).

The cluster: ``--nodes`` nodes (5,000) of ``{memory: 64000, vcore: 64}``, each running
``--per-node`` allocations (10: 50,000 in all) of ``{memory: 1000 or 2000, vcore: 1}``,
spread over ``APPS`` applications in ``QUEUES`` leaf queues; nodes go in requests of
``NODES_PER_REQUEST``.

    inproc    the in-process core (``scheduler.start_scheduler()``), a new one each run
    native    a ``scheduler serve`` daemon (a subprocess, started fresh for each run on a
              free port, outside the timed part) over tcp://127.0.0.1, with
              ``scheduler.client.connect``; the requests are encoded inside the timed part

The cases run interleaved: each repeat runs every case once, in the opposite order to the
repeat before. The table has the median and the best seconds, allocations recovered per
second (median), the CPU seconds of this process (the RM; all of it in-process) and of the
daemon during the run, and the 1-minute load average before and after the runs.

Targets: inproc <= 1 s and native <= 2 s for 5,000 nodes and 50,000 allocations (read on
the build this interpreter imports). ``--check`` exits 1 when one is missed.

    python bench/bench_recovery.py [--nodes 5000] [--per-node 10] [--cases inproc,native]
        [--repeats 3] [--quick] [--check] [--out FILE]

``--quick`` is 50 nodes of 10 allocations, once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import scheduler
import scheduler.client
from _common import Run, add_arguments, load_average
from bench_scheduling import build_of_scheduler
from bench_transport import Daemon
from scheduler import si

TARGETS = {"inproc": 1.0, "native": 2.0}  # seconds, at most, for the default size
RM_ID = "rm-1"
PARTITION = "default"
APPS = 100
QUEUES = 4
NODES_PER_REQUEST = 500
NODE = {"memory": 64_000, "vcore": 64}
STEP_TIMEOUT = 600.0  # seconds for any one settle(); a stuck core fails the run instead
CASES = ("inproc", "native")

QUEUES_YAML = "\n".join(
    [
        "partitions:",
        f"  - name: {PARTITION}",
        "    queues:",
        "      - name: root",
        '        submitacl: "*"',
        "        queues:",
        *(f"          - name: q{q}" for q in range(QUEUES)),
    ]
)


class BenchError(RuntimeError):
    """A run that lost an allocation or was refused something: its numbers would be wrong."""


@dataclass(frozen=True)
class Cluster:
    nodes: int
    per_node: int

    @property
    def allocations(self) -> int:
        return self.nodes * self.per_node

    def memory(self, i: int) -> int:
        return 1000 * (1 + i % 2)

    def allocated(self) -> dict[str, int]:
        memory = sum(self.memory(i) for i in range(self.allocations))
        return {"memory": memory, "vcore": self.allocations}

    def applications(self) -> si.ApplicationRequest:
        return si.ApplicationRequest(
            rm_id=RM_ID,
            new=[
                si.AddApplicationRequest(
                    application_id=f"app-{a}",
                    queue_name=f"root.q{a % QUEUES}",
                    partition_name=PARTITION,
                    ugi=si.UserGroupInformation(user=f"user-{a % 10}"),
                )
                for a in range(APPS)
            ],
        )

    def node_requests(self) -> list[si.NodeRequest]:
        """Every node with what runs on it, ``NODES_PER_REQUEST`` nodes a request."""
        capacity = si.Resource.of(**NODE)
        sizes = [si.Resource.of(memory=self.memory(i), vcore=1) for i in range(2)]
        nodes = []
        for n in range(self.nodes):
            node_id = f"node-{n:05d}"
            existing = []
            for k in range(self.per_node):
                i = n * self.per_node + k
                existing.append(
                    si.Allocation(
                        allocation_key=f"task-{i}",
                        uuid=f"uuid-{i}",
                        resource_per_alloc=sizes[i % 2],
                        node_id=node_id,
                        application_id=f"app-{i % APPS}",
                        partition_name=PARTITION,
                    )
                )
            nodes.append(
                si.NodeInfo(
                    node_id=node_id,
                    action=si.ActionFromRM.CREATE,
                    schedulable_resource=capacity,
                    existing_allocations=existing,
                )
            )
        return [
            si.NodeRequest(rm_id=RM_ID, nodes=nodes[at : at + NODES_PER_REQUEST])
            for at in range(0, len(nodes), NODES_PER_REQUEST)
        ]


class RecoveringRM(scheduler.ResourceManagerCallback):
    """Counts the nodes accepted; keeps what was refused (a run with any fails)."""

    def __init__(self) -> None:
        self.accepted = 0
        self.problems: list[str] = []

    async def update_node(self, response: si.NodeResponse) -> None:
        self.accepted += len(response.accepted)
        self.problems += [f"node {r.node_id}: {r.reason}" for r in response.rejected[:3]]

    async def update_application(self, response: si.ApplicationResponse) -> None:
        self.problems += [f"app {r.application_id}: {r.reason}" for r in response.rejected[:3]]


@contextlib.asynccontextmanager
async def core_of(case: str, tmp: Path, run: int) -> AsyncIterator[tuple[Any, Daemon | None]]:
    """A fresh core: in-process, or a new daemon and a connection to it."""
    if case == "inproc":
        async with scheduler.start_scheduler() as core:
            yield core, None
        return
    daemon = await asyncio.to_thread(Daemon, "tcp://127.0.0.1:0", tmp / f"daemon-{run}.log", None)
    try:
        async with scheduler.client.connect(daemon.address) as core:
            yield core, daemon
    finally:
        daemon.stop()


async def recover(
    core: Any, rm: RecoveringRM, apps: si.ApplicationRequest, nodes: list[si.NodeRequest]
) -> None:
    """What the RM does: register, its applications, its nodes with their allocations."""
    await core.register_resource_manager(
        si.RegisterResourceManagerRequest(
            rm_id=RM_ID, policy_group="default", version="1", config=QUEUES_YAML
        ),
        rm,
    )
    await core.update_application(apps)
    for request in nodes:
        await core.update_node(request)
    await asyncio.wait_for(core.settle(), STEP_TIMEOUT)


async def check(core: Any, rm: RecoveringRM, cluster: Cluster) -> None:
    """Untimed: every node accepted and every allocation held, nothing refused."""
    problems = list(rm.problems[:5])
    if rm.accepted != cluster.nodes:
        problems.append(f"{rm.accepted:,} of {cluster.nodes:,} nodes accepted")
    root = await core.get_queue(PARTITION, "root")
    if root["allocatedResource"] != cluster.allocated():
        problems.append(f"root holds {root['allocatedResource']}, not {cluster.allocated()}")
    [partition] = await core.get_partitions()
    if partition["totalContainers"] != cluster.allocations:
        problems.append(
            f"{partition['totalContainers']:,} allocations, not {cluster.allocations:,}"
        )
    if problems:
        raise BenchError("; ".join(problems))


async def run_case(case: str, cluster: Cluster, tmp: Path, run: int) -> dict[str, float]:
    rm = RecoveringRM()
    apps, nodes = cluster.applications(), cluster.node_requests()  # the RM's, built before
    async with core_of(case, tmp, run) as (core, daemon):
        gc.collect()  # what came before, outside the timed part
        daemon_before = daemon.cpu_seconds() if daemon is not None else None
        cpu_before = time.process_time()
        start = time.perf_counter()
        await recover(core, rm, apps, nodes)
        seconds = time.perf_counter() - start
        cpu = time.process_time() - cpu_before
        daemon_after = daemon.cpu_seconds() if daemon is not None else None
        await check(core, rm, cluster)
    daemon_cpu = (
        daemon_after - daemon_before
        if daemon_after is not None and daemon_before is not None
        else -1.0
    )
    return {"seconds": seconds, "client_cpu_s": cpu, "daemon_cpu_s": daemon_cpu}


def orders(cases: list[str], repeats: int) -> Iterator[tuple[int, str]]:
    """(repeat, case) in run order: each repeat every case, the order flipped each time."""
    for r in range(repeats):
        for case in cases if r % 2 == 0 else list(reversed(cases)):
            yield r, case


def summarise(case: str, cluster: Cluster, runs: list[dict[str, float]]) -> dict[str, Any]:
    seconds = statistics.median(r["seconds"] for r in runs)
    loads = [x for r in runs for x in (r["load_before"], r["load_after"]) if x >= 0]
    daemon = [r["daemon_cpu_s"] for r in runs if r["daemon_cpu_s"] >= 0]
    return {
        "case": case,
        "nodes": cluster.nodes,
        "allocations": cluster.allocations,
        "seconds": seconds,
        "seconds_best": min(r["seconds"] for r in runs),
        "allocs_per_s": cluster.allocations / seconds,
        "client_cpu_s": statistics.median(r["client_cpu_s"] for r in runs),
        "daemon_cpu_s": statistics.median(daemon) if daemon else None,
        "load_min": min(loads) if loads else None,
        "load_max": max(loads) if loads else None,
        "build": build_of_scheduler(),
        # no *_per_s key in the runs: bench/ab.py compares the medians only
        "runs": runs,
    }


def print_table(results: list[dict[str, Any]], repeats: int, load: list[float] | None) -> None:
    shown = f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}" if load else "unknown"
    print(
        f"recovery (register, applications, nodes with their allocations, settle); median "
        f"of {repeats}, interleaved; CPU seconds of this process (the RM) and of the daemon; "
        f"load: 1-minute, lowest-highest (at the start: {shown}; {os.cpu_count()} CPUs)"
    )
    print(
        f"{'case':<8} {'build':<8} {'nodes':>7} {'allocations':>11} {'seconds':>8} "
        f"{'best':>7} {'allocs/s':>9} {'RM CPU':>7} {'daemon CPU':>10} {'load':>11}"
    )
    for res in results:
        load_range = (
            f"{res['load_min']:.2f}-{res['load_max']:.2f}" if res["load_min"] is not None else "-"
        )
        daemon = f"{res['daemon_cpu_s']:.2f}" if res["daemon_cpu_s"] is not None else "-"
        print(
            f"{res['case']:<8} {res['build']:<8} {res['nodes']:>7,} {res['allocations']:>11,} "
            f"{res['seconds']:>8.3f} {res['seconds_best']:>7.3f} {res['allocs_per_s']:>9,.0f} "
            f"{res['client_cpu_s']:>7.2f} {daemon:>10} {load_range:>11}"
        )


def parse_cases(text: str | None, parser: argparse.ArgumentParser) -> list[str]:
    if not text:
        return list(CASES)
    cases = text.split(",")
    for name in cases:
        if name not in CASES:
            parser.error(f"unknown case {name}; known: {', '.join(CASES)}")
    return cases


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, help="nodes of the cluster (5,000)")
    parser.add_argument("--per-node", type=int, help="allocations on each node (10)")
    parser.add_argument("--cases", help=f"a comma-separated subset of: {', '.join(CASES)}")
    parser.add_argument("--repeats", type=int, help="runs of each case (3; 1 with --quick)")
    add_arguments(parser)
    args = parser.parse_args()
    cases = parse_cases(args.cases, parser)
    cluster = Cluster(
        nodes=args.nodes or (50 if args.quick else 5_000), per_node=args.per_node or 10
    )
    if cluster.nodes < 1 or cluster.per_node < 0:
        parser.error("--nodes must be at least 1 and --per-node at least 0")
    repeats = args.repeats or (1 if args.quick else 3)
    run = Run("recovery", args)
    progress = run.progress(repeats * len(cases))
    runs: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-recovery-") as tmp:
        for r, case in orders(cases, repeats):
            with progress.step(f"{case}, repeat {r + 1}/{repeats}") as step:
                before = load_average()
                figures = await run_case(case, cluster, Path(tmp), len(runs.get(case, [])))
                after = load_average()
                step.result = f"{cluster.allocations / figures['seconds']:,.0f} allocs/s"
            figures["load_before"] = before[0] if before else -1.0
            figures["load_after"] = after[0] if after else -1.0
            runs.setdefault(case, []).append(figures)
    results = [summarise(c, cluster, runs[c]) for c in cases]
    print_table(results, repeats, run.machine["load_average_start"])
    for res in results:
        run.target(
            f"{res['case']}_seconds",
            f"{res['case']} recovery of {cluster.nodes:,} nodes, "
            f"{cluster.allocations:,} allocations, seconds",
            res["seconds"],
            at_most=TARGETS[res["case"]],
            fmt=".2f",
        )
    return run.finish(
        {
            "nodes": cluster.nodes,
            "per_node": cluster.per_node,
            "allocations": cluster.allocations,
            "apps": APPS,
            "repeats": repeats,
            "results": results,
        }
    )


if __name__ == "__main__":
    from loguru import logger

    logger.remove()  # the client's own log lines would mix with the table
    try:
        scheduler.tune_gc()  # this process is the benchmark's own, as a daemon's would be
        sys.exit(asyncio.run(main()))
    except BenchError as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
