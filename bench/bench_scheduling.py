"""Scheduling throughput at scale, in the shape of YuniKorn's ``BenchmarkScheduling``.

Every ask is ``{memory: 10, vcore: 1}`` with its own allocation key; everything goes through
the public API on the system clock, and the clock stops when the RM callback has received
every allocation. The cases:

    10k-asks     5,000 nodes,  10,000 asks, 2 queues (root.a, root.b), 2 applications
    100k-asks    5,000 nodes, 100,000 asks, 2 queues, 2 applications
    50k-nodes   50,000 nodes, 100,000 asks, 2 queues, 2 applications
    100-queues   5,000 nodes,  10,000 asks, 100 leaf queues (10 parents x 10 leaves,
                 guaranteed set), 1,000 applications spread over them

each in two node sizings: ``headroom`` (every node holds twice its share of the asks) and
``yunikorn`` (every node holds ``asks // nodes + 1`` asks, as YuniKorn's benchmark sizes
them, so the cluster ends nearly full).

Each run is a fresh subprocess, so its peak RSS is its own and no heap or GC state carries
over. The subprocess owns its interpreter, so it tunes the garbage collector as a daemon
would (``scheduler.tune_gc()`` once imports are done); ``--gc default,tuned`` runs both
ways, interleaved, to show what the tuning is worth (the targets read the tuned runs).
Repeats are interleaved: each repeat runs every (case, sizing, gc) once in turn, so a slow
spell of a shared machine hits all alike. The table shows, per (case, sizing), the median
and best allocations/s, the median time per allocation, the peak RSS (the largest over the
repeats) and the 1-minute load average sampled right before and after each run (lowest and
highest); the JSON (bench/results/scheduling.json) keeps every run.

Targets (on the medians, in each sizing):
    10k-asks    >= 75,000 allocations/s
    100k-asks   >= 60,000 allocations/s; per-allocation time <= 1.3 x the 10k-asks case
    50k-nodes   per-allocation time <= 1.3 x the 100k-asks case; peak RSS <= 300 MB
    100-queues  >= 40,000 allocations/s
``--check`` exits 1 when one is missed.

    python bench/bench_scheduling.py [--cases 10k-asks,...] [--sizing headroom,yunikorn]
        [--gc tuned,default] [--repeat 3] [--quick] [--check] [--out FILE]

``--python PY1,PY2`` runs every case with each interpreter, interleaved: say the venv of
the pure package and the venv of the compiled build (``docs/compiled.md``). Each run
reports the build its interpreter imports (``pure`` or ``compiled``); the table has a row
per build, and the targets are read per build.

``--nodes 500,1000`` (with ``--asks N``, default 10,000) runs the older sweep instead: the
2-queue shape at each node count, with the targets >= 75,000 allocations/s at the largest
and per-allocation time at the largest <= 1.3 x the smallest. ``--quick`` runs tiny versions
of the cases (or 200 asks on 10 and 20 nodes for the sweep), once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import resource
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import scheduler
from _common import Run, add_arguments, run_child
from scheduler import si

TARGET_SMALL_PER_S = 75_000  # 10k-asks, and the largest size of the sweep
TARGET_LARGE_PER_S = 60_000  # 100k-asks
TARGET_QUEUES_PER_S = 40_000  # 100-queues
TARGET_SCALING = 1.3  # per-allocation time against the smaller case
TARGET_RSS_MB = 300  # 50k-nodes

SIZINGS = ("headroom", "yunikorn")
GC_MODES = ("tuned", "default")  # scheduler.tune_gc() in the run's process, or CPython's own


@dataclass(frozen=True)
class Case:
    name: str
    nodes: int
    asks: int
    parents: int = 0  # 0: the two queues root.a and root.b
    leaves: int = 0  # leaf queues under each parent
    apps: int = 2


CASES = {
    "10k-asks": Case("10k-asks", 5_000, 10_000),
    "100k-asks": Case("100k-asks", 5_000, 100_000),
    "50k-nodes": Case("50k-nodes", 50_000, 100_000),
    "100-queues": Case("100-queues", 5_000, 10_000, parents=10, leaves=10, apps=1_000),
}
QUICK_CASES = {
    "10k-asks": Case("10k-asks", 20, 200),
    "100k-asks": Case("100k-asks", 20, 1_000),
    "50k-nodes": Case("50k-nodes", 200, 1_000),
    "100-queues": Case("100-queues", 20, 200, parents=2, leaves=3, apps=12),
}

TWO_QUEUES = """
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


def queues_yaml(case: Case) -> tuple[str, list[str]]:
    """The queues.yaml of a case and its leaf queues, in order."""
    if not case.parents:
        return TWO_QUEUES, ["root.a", "root.b"]
    n_leaves = case.parents * case.leaves
    # Guaranteed to each leaf its share of the asks: usage against it differs from leaf to
    # leaf as asks are placed, so fair sorting has work at both levels.
    share = math.ceil(case.asks / n_leaves)
    lines = ["partitions:", "  - name: default", "    queues:", "      - name: root"]
    lines += ['        submitacl: "*"', "        queues:"]
    leaves: list[str] = []
    for p in range(case.parents):
        lines += [f"          - name: p{p}", "            resources:"]
        guaranteed = share * case.leaves
        lines += [f"              guaranteed: {{memory: {10 * guaranteed}, vcore: {guaranteed}}}"]
        lines += ["            queues:"]
        for leaf in range(case.leaves):
            lines += [f"              - name: q{leaf}", "                resources:"]
            lines += [f"                  guaranteed: {{memory: {10 * share}, vcore: {share}}}"]
            leaves.append(f"root.p{p}.q{leaf}")
    return "\n".join(lines) + "\n", leaves


def asks_per_node(case: Case, sizing: str) -> int:
    """How many asks one node holds."""
    if sizing == "yunikorn":
        return case.asks // case.nodes + 1
    return math.ceil(case.asks / case.nodes) * 2


class Counter(scheduler.ResourceManagerCallback):
    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.done = asyncio.Event()

    async def update_allocation(self, response: si.AllocationResponse) -> None:
        self.count += len(response.new)
        if self.count >= self.expected:
            self.done.set()


def build_asks(case: Case) -> list[si.AllocationAsk]:
    """The case's distinct asks of ``{memory: 10, vcore: 1}``, over its applications in turn."""
    return [
        si.AllocationAsk(
            allocation_key=f"ask-{i}",
            application_id=f"app-{i % case.apps + 1}",
            resource_ask=si.Resource.of(memory=10, vcore=1),
            max_allocations=1,
        )
        for i in range(case.asks)
    ]


async def run_case(
    case: Case,
    sizing: str,
    timed: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext,
) -> dict[str, Any]:
    """One timed run of a case in this process; ``timed()`` wraps the timed part (a
    profiler's sampling, say)."""
    rm = Counter(case.asks)
    per_node = asks_per_node(case, sizing)
    config, leaves = queues_yaml(case)
    async with scheduler.start_scheduler() as core:
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(rm_id="bench", policy_group="default", config=config),
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
                    for i in range(case.nodes)
                ],
            )
        )
        await core.update_application(
            si.ApplicationRequest(
                rm_id="bench",
                new=[
                    si.AddApplicationRequest(
                        application_id=f"app-{a + 1}",
                        queue_name=leaves[a % len(leaves)],
                        ugi=si.UserGroupInformation(user="bench"),
                    )
                    for a in range(case.apps)
                ],
            )
        )
        await core.settle()
        asks = build_asks(case)
        with timed():
            start = time.perf_counter()
            await core.update_allocation(si.AllocationRequest(rm_id="bench", asks=asks))
            await asyncio.wait_for(rm.done.wait(), timeout=600)
            elapsed = time.perf_counter() - start
        await core.settle()
        assert rm.count == case.asks, (rm.count, case.asks)
    return {
        "nodes": case.nodes,
        "asks": case.asks,
        "seconds": elapsed,
        "allocs_per_s": case.asks / elapsed,
        "us_per_alloc": elapsed / case.asks * 1e6,
    }


async def run_once(n_nodes: int, n_asks: int) -> dict[str, Any]:
    """The 2-queue shape with headroom, in this process (``bench_gang`` compares with it)."""
    return await run_case(Case(f"nodes={n_nodes}", n_nodes, n_asks), "headroom")


def peak_rss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024  # kilobytes on Linux


def child(spec: str) -> None:
    """``--child``: run one case, print its figures and this process's peak RSS as JSON."""
    from loguru import logger

    logger.remove()
    given = json.loads(spec)
    if given.get("gc", "tuned") == "tuned":
        scheduler.tune_gc()
    figures = asyncio.run(run_case(Case(**given["case"]), given["sizing"]))
    print(json.dumps({**figures, "rss_bytes": peak_rss_bytes(), "build": build_of_scheduler()}))


def build_of_scheduler() -> str:
    """``compiled`` when this interpreter imports the mypyc build of the scheduler (its
    package holds C extensions), else ``pure``. Read from the package's files, not from a
    module's path, so it holds for any layout of the package (``bench/instructions.py``
    runs this script against earlier commits too)."""
    package = Path(str(scheduler.__file__)).parent
    return "compiled" if next(package.rglob("*.so"), None) is not None else "pure"


def run_in_subprocess(
    case: Case, sizing: str, gc_mode: str = "tuned", python: str = sys.executable
) -> dict[str, Any]:
    """One run in a fresh interpreter (``python``), with the 1-minute load average before
    and after."""
    spec = {"case": asdict(case), "sizing": sizing, "gc": gc_mode}
    return run_child(
        __file__, spec, f"{case.name} {sizing}", python=python, timeout=1800, capture_stderr=True
    )


def summarise(case: Case, sizing: str, gc_mode: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and best over the runs of one (case, sizing, gc mode, interpreter); every run
    kept."""
    rates = [r["allocs_per_s"] for r in runs]
    loads = [x for r in runs for x in (r["load_before"], r["load_after"]) if x is not None]
    return {
        "case": case.name,
        "sizing": sizing,
        "gc": gc_mode,
        "build": runs[0]["build"],
        "python": runs[0]["python"],
        "nodes": case.nodes,
        "asks": case.asks,
        "queues": case.parents * case.leaves or 2,
        "apps": case.apps,
        "asks_per_node": asks_per_node(case, sizing),
        "allocs_per_s": statistics.median(rates),
        "allocs_per_s_best": max(rates),
        "us_per_alloc": statistics.median(r["us_per_alloc"] for r in runs),
        "us_per_alloc_best": min(r["us_per_alloc"] for r in runs),
        "rss_bytes": max(r["rss_bytes"] for r in runs),
        "load_min": min(loads) if loads else None,
        "load_max": max(loads) if loads else None,
        # no *_per_s key in the runs: bench/ab.py compares the medians only
        "runs": [
            {
                "seconds": r["seconds"],
                "us_per_alloc": r["us_per_alloc"],
                "rss_bytes": r["rss_bytes"],
                "load_before": r["load_before"],
                "load_after": r["load_after"],
            }
            for r in runs
        ],
    }


def print_table(results: list[dict[str, Any]], repeat: int) -> None:
    print(f"median and best of {repeat}; RSS: the largest peak; load: 1-minute, lowest-highest")
    print(
        f"{'case':<11} {'sizing':<9} {'gc':<7} {'build':<8} {'nodes':>6} {'asks':>7} "
        f"{'per node':>8} "
        f"{'med allocs/s':>12} {'best':>8} {'us/alloc':>8} {'RSS MB':>7} {'load':>11}"
    )
    for res in results:
        load = (
            f"{res['load_min']:.2f}-{res['load_max']:.2f}" if res["load_min"] is not None else "-"
        )
        print(
            f"{res['case']:<11} {res['sizing']:<9} {res['gc']:<7} {res['build']:<8} "
            f"{res['nodes']:>6} "
            f"{res['asks']:>7} "
            f"{res['asks_per_node']:>8} {res['allocs_per_s']:>12,.0f} "
            f"{res['allocs_per_s_best']:>8,.0f} {res['us_per_alloc']:>8.1f} "
            f"{res['rss_bytes'] / 2**20:>7.0f} {load:>11}"
        )


def case_targets(run: Run, results: list[dict[str, Any]], sizings: list[str]) -> None:
    """The targets on each interpreter's runs (named with its build when there are several)."""
    pythons = list(dict.fromkeys(r["python"] for r in results))
    builds = [next(r["build"] for r in results if r["python"] == py) for py in pythons]
    for i, (python, build) in enumerate(zip(pythons, builds, strict=True)):
        mine = [r for r in results if r["python"] == python]
        name = build if builds.count(build) == 1 else f"{build}{i + 1}"
        suffix = f", {name}" if len(pythons) > 1 else ""
        key = f".{name}" if len(pythons) > 1 else ""
        _case_targets(run, mine, sizings, suffix, key)


def _case_targets(
    run: Run, results: list[dict[str, Any]], sizings: list[str], suffix: str, key: str
) -> None:
    by = {(r["case"], r["sizing"]): r for r in results if r["gc"] == targets_gc(results)}
    for sizing in sizings:
        small = by.get(("10k-asks", sizing))
        large = by.get(("100k-asks", sizing))
        wide = by.get(("50k-nodes", sizing))
        queues = by.get(("100-queues", sizing))
        if small:
            run.target(
                f"allocs_per_s.10k-asks.{sizing}{key}",
                f"allocs/s, 10k-asks ({sizing}{suffix})",
                small["allocs_per_s"],
                at_least=TARGET_SMALL_PER_S,
            )
        if large:
            run.target(
                f"allocs_per_s.100k-asks.{sizing}{key}",
                f"allocs/s, 100k-asks ({sizing}{suffix})",
                large["allocs_per_s"],
                at_least=TARGET_LARGE_PER_S,
            )
        if large and small:
            run.target(
                f"scaling.100k-asks.{sizing}{key}",
                f"us/alloc, 100k-asks vs 10k-asks ({sizing}{suffix})",
                large["us_per_alloc"] / small["us_per_alloc"],
                at_most=TARGET_SCALING,
                fmt=".2f",
            )
        if wide and large:
            run.target(
                f"scaling.50k-nodes.{sizing}{key}",
                f"us/alloc, 50k-nodes vs 100k-asks ({sizing}{suffix})",
                wide["us_per_alloc"] / large["us_per_alloc"],
                at_most=TARGET_SCALING,
                fmt=".2f",
            )
        if wide:
            run.target(
                f"rss_mb.50k-nodes.{sizing}{key}",
                f"peak RSS MB, 50k-nodes ({sizing}{suffix})",
                wide["rss_bytes"] / 2**20,
                at_most=TARGET_RSS_MB,
            )
        if queues:
            run.target(
                f"allocs_per_s.100-queues.{sizing}{key}",
                f"allocs/s, 100-queues ({sizing}{suffix})",
                queues["allocs_per_s"],
                at_least=TARGET_QUEUES_PER_S,
            )


def targets_gc(results: list[dict[str, Any]]) -> str:
    """The GC mode the targets read: tuned, unless only default runs were made."""
    return "tuned" if any(r["gc"] == "tuned" for r in results) else "default"


def sweep_targets(run: Run, results: list[dict[str, Any]], sizings: list[str]) -> None:
    for sizing in sizings:
        mine = [r for r in results if r["sizing"] == sizing and r["gc"] == targets_gc(results)]
        largest, smallest = mine[-1], mine[0]
        run.target(
            f"allocs_per_s.{sizing}",
            f"allocs/s at {largest['nodes']:,} nodes ({sizing})",
            largest["allocs_per_s"],
            at_least=TARGET_SMALL_PER_S,
        )
        run.target(
            f"scaling.{sizing}",
            f"us/alloc at {largest['nodes']:,} vs {smallest['nodes']:,} nodes ({sizing})",
            largest["us_per_alloc"] / smallest["us_per_alloc"],
            at_most=TARGET_SCALING,
            fmt=".2f",
        )


def names(value: str, known: tuple[str, ...] | list[str], what: str) -> list[str]:
    chosen = [x.strip() for x in value.split(",") if x.strip()]
    unknown = [x for x in chosen if x not in known]
    if unknown or not chosen:
        raise SystemExit(f"unknown {what} {', '.join(unknown)}; known: {', '.join(known)}")
    return chosen


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", help=f"comma list of {', '.join(CASES)} (default: all)")
    parser.add_argument("--sizing", default=",".join(SIZINGS), help="headroom, yunikorn or both")
    parser.add_argument(
        "--gc", default="tuned", help="tuned (scheduler.tune_gc, the default), default or both"
    )
    parser.add_argument("--nodes", help="the older sweep: these node counts, 2 queues")
    parser.add_argument("--asks", type=int, help="asks of the sweep (default 10,000)")
    parser.add_argument("--repeat", type=int)
    parser.add_argument(
        "--python",
        help="comma list of interpreters to run the cases with, interleaved (say a pure and "
        "a compiled build's venv); default: this one",
    )
    add_arguments(parser)
    args = parser.parse_args()
    quick = args.quick
    sizings = names(args.sizing, SIZINGS, "sizing")
    gc_modes = names(args.gc, GC_MODES, "gc mode")
    sweep = args.nodes is not None or args.asks is not None
    if sweep and args.cases:
        parser.error("--cases and the --nodes/--asks sweep exclude each other")
    if sweep and args.python and "," in args.python:
        parser.error("several --python interpreters work with the cases, not the sweep")
    if sweep:
        n_asks = args.asks or (200 if quick else 10_000)
        nodes = args.nodes or ("10,20" if quick else "500,1000,2000,5000")
        cases = [Case(f"nodes={n}", int(n), n_asks) for n in nodes.split(",")]
    else:
        table = QUICK_CASES if quick else CASES
        cases = [table[n] for n in names(args.cases or ",".join(CASES), list(CASES), "case")]
    repeat = args.repeat or (1 if quick else 3)
    run = Run("scheduling", args)
    pythons = list(dict.fromkeys(p.strip() for p in (args.python or sys.executable).split(",")))
    pythons = [p for p in pythons if p]
    combos = [(c, s, g, py) for c in cases for s in sizings for g in gc_modes for py in pythons]
    progress = run.progress(repeat * len(combos))
    runs: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
    for r in range(repeat):
        for case, sizing, gc_mode, python in combos:
            label = (
                f"{case.name} ({sizing}, gc {gc_mode}): {case.nodes:,} nodes, "
                f"{case.asks:,} asks, repeat {r + 1}/{repeat}"
            )
            if len(pythons) > 1:
                label += f", {python}"
            with progress.step(label) as step:
                once = run_in_subprocess(case, sizing, gc_mode, python)
                once["python"] = python
                step.result = (
                    f"{once['allocs_per_s']:,.0f} allocs/s, "
                    f"{once['rss_bytes'] / 2**20:,.0f} MB, load {once['load_after']}"
                )
            runs.setdefault((case.name, sizing, gc_mode, python), []).append(once)
    results = [summarise(c, s, g, runs[(c.name, s, g, py)]) for c, s, g, py in combos]
    print_table(results, repeat)
    if sweep:
        sweep_targets(run, results, sizings)
    else:
        case_targets(run, results, sizings)
    return run.finish({"results": results})


if __name__ == "__main__":
    sys.exit(main())
