"""The outstanding-requests inspection on a full cluster with a deep backlog.

An RM whose callback overrides ``update_container_scheduling_state`` has its pending asks
inspected once per interval whenever anything happened (``scheduler.core._outstanding``):
on a busy cluster, every second. This measures one inspection, timed around
``OutstandingRequests.inspect()`` on the partition's actor while the core is settled
(nothing else runs then), at 1,000, 100,000 and 1,000,000 pending asks, in two cases
built as ``bench_backlog.py`` builds them (its ``set_up``: 5,000 nodes, every one
exactly full, five ask shapes none of which fits inside another, two applications):

    full-1k, full-100k, full-1m     the backlog spread over root.a and root.b (no max):
                                    every pending ask is FAILED (no node has room)
    max-1k, max-100k, max-1m        the backlog in root.a, at its max: every pending ask
                                    there is SKIPPED (no headroom); root.b's 500 are FAILED

For each: the first inspection (it reports every pending ask: untimed, its reports are
counted and dropped, not sent to the RM), then ``--repeat`` inspections with nothing
changed (no report), then ``--repeat`` times 10 new asks (two of each shape, to the
backlog's applications; the pass finds no room for them) and the inspection after them
(10 reports). The table has the median and largest time of each, the reports the last
inspection made (a check: 0 and 10), the set-up's time and the peak RSS; each case runs in
a fresh process that tunes its collector as a daemon does (``scheduler.tune_gc()``).

Targets (read on the build this interpreter imports): the median inspection with nothing
changed and after 10 new asks <= 1 ms at 100,000 and at 1,000,000 pending (the full
cases). ``--check`` exits 1 when one is missed.

    python bench/bench_outstanding.py [--cases full-1k,...] [--repeat N] [--quick]
        [--check] [--out FILE]

Before/after a change: run this script (from the working tree) with ``PYTHONPATH``
pointing at each tree's ``src``. ``--quick`` runs tiny versions of the cases (50 nodes,
50 to 500 pending, 3 repeats). The default run took under a minute on 2 cores (most of it
the 1m cases' set-up), a 1m case's process about 750 MB; at b27b8ee, whose inspection
walked every pending ask, 5.5 minutes and 1.1 GB (4.2 s an inspection at full-1m).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import asdict
from typing import Any

import bench_backlog
import scheduler
from _common import Run, add_arguments, load_average, run_child
from bench_backlog import (
    SHAPES,
    BenchError,
    Case,
    Cluster,
    Recorder,
    app_id,
    log,
    queues_yaml,
    set_up,
)
from bench_scheduling import build_of_scheduler, names, peak_rss_bytes
from scheduler import si
from scheduler.testing import ManualClock

KINDS = ("full", "max")
CASES = {n: case for n, case in bench_backlog.CASES.items() if case.kind in KINDS}
QUICK_CASES = {n: case for n, case in bench_backlog.QUICK_CASES.items() if case.kind in KINDS}
CHANGED = 10  # new asks before each inspection of the second kind
REPEAT = 10
QUICK_REPEAT = 3
TARGET_MS = 1.0  # the full-100k and full-1m cases, both kinds of inspection


class Listener(Recorder):
    """Keeps the new allocations (``bench_backlog``'s check) and listens to scheduling
    states, so the core inspects its pending asks; the states themselves go nowhere."""

    async def update_container_scheduling_state(
        self, request: si.UpdateContainerSchedulingStateRequest
    ) -> None:
        pass


def inspect_once(outstanding: Any, outbox: Any) -> tuple[float, int]:
    """One inspection, timed; the reports it made (taken off the outbox unsent)."""
    outstanding.stop()  # the inspection a change armed: this is it
    start = time.perf_counter()
    outstanding.inspect()
    elapsed = time.perf_counter() - start
    reports = [e for e in outbox.entries if e[0] == "scheduling_state"]
    if len(reports) != len(outbox.entries):
        raise BenchError("the outbox held more than the inspection's reports")
    outbox.entries.clear()
    return elapsed, len(reports)


async def run_case(case: Case, repeat: int) -> dict[str, Any]:
    """One case in this process: set-up, a first inspection, the timed ones."""
    rm = Listener()
    config, leaves = queues_yaml(case)
    async with scheduler.start_scheduler(clock=ManualClock()) as core:
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(rm_id="bench", policy_group="default", config=config),
            rm,
        )
        cluster = Cluster(case, core, rm, seed=0)
        figures = await set_up(cluster, leaves)
        actor = core._registrations["bench"].actors["default"]  # type: ignore[attr-defined]
        outstanding, outbox = actor.outstanding, actor.partition.outbox
        first, told = inspect_once(outstanding, outbox)
        log(f"first inspection: {told:,} reports in {first:.2f} s")
        idle: list[float] = []
        idle_reports = 0
        for _ in range(repeat):
            elapsed, idle_reports = inspect_once(outstanding, outbox)
            idle.append(elapsed)
        apps = ["app-a"] if case.kind == "max" else [app_id(case, a) for a in range(case.apps)]
        changed: list[float] = []
        changed_reports = 0
        for _ in range(repeat):
            asks = [cluster.ask(apps[j % len(apps)], j % len(SHAPES)) for j in range(CHANGED)]
            await core.update_allocation(si.AllocationRequest(rm_id="bench", asks=asks))
            await core.settle()
            if cluster.take_new():
                raise BenchError("a new ask found room in a full cluster")
            elapsed, changed_reports = inspect_once(outstanding, outbox)
            changed.append(elapsed)
        if idle_reports != 0 or changed_reports != CHANGED:
            raise BenchError(f"reports: {idle_reports} unchanged, {changed_reports} after 10 new")
    ms = {
        "idle_median_ms": statistics.median(idle) * 1e3,
        "idle_max_ms": max(idle) * 1e3,
        "changed_median_ms": statistics.median(changed) * 1e3,
        "changed_max_ms": max(changed) * 1e3,
    }
    log(f"nothing changed: {ms['idle_median_ms']:.3f} ms, 10 new: {ms['changed_median_ms']:.3f} ms")
    return {
        **figures,
        **ms,
        "first_seconds": first,
        "first_reports": told,
        "idle_reports": idle_reports,
        "changed_reports": changed_reports,
        "repeat": repeat,
        "idle_ms": [s * 1e3 for s in idle],
        "changed_ms": [s * 1e3 for s in changed],
    }


def child(spec: str) -> None:
    """``--child``: run one case, print its figures and this process's peak RSS as JSON."""
    from loguru import logger

    logger.remove()
    given = json.loads(spec)
    scheduler.tune_gc()
    figures = asyncio.run(run_case(Case(**given["case"]), given["repeat"]))
    print(json.dumps({**figures, "rss_bytes": peak_rss_bytes(), "build": build_of_scheduler()}))


def run_in_subprocess(case: Case, repeat: int) -> dict[str, Any]:
    """One case in a fresh interpreter, with the 1-minute load average before and after;
    its stderr (the set-up's phases) goes through."""
    return run_child(__file__, {"case": asdict(case), "repeat": repeat}, case.name)


def print_table(results: list[dict[str, Any]]) -> None:
    print(
        "one outstanding-requests inspection, ms (median and largest of the repeats): with "
        f"nothing changed, and after {CHANGED} new asks; reports: the last inspection's; "
        "first s: the first inspection, which reports every pending ask; load: 1-minute, "
        "before-after the case"
    )
    print(
        f"{'case':<10} {'build':<8} {'nodes':>5} {'pending':>9} {'repeat':>6} "
        f"{'idle med':>8} {'idle max':>8} {'reports':>7} {'10 new med':>10} "
        f"{'10 new max':>10} {'reports':>7} {'first s':>7} {'set-up s':>8} {'RSS MB':>7} "
        f"{'load':>9}"
    )
    for r in results:
        load = f"{r['load_before']:.2f}-{r['load_after']:.2f}" if r["load_before"] else "-"
        print(
            f"{r['case']:<10} {r['build']:<8} {r['nodes']:>5} {r['pending']:>9,} "
            f"{r['repeat']:>6} {r['idle_median_ms']:>8.3f} {r['idle_max_ms']:>8.3f} "
            f"{r['idle_reports']:>7} {r['changed_median_ms']:>10.3f} "
            f"{r['changed_max_ms']:>10.3f} {r['changed_reports']:>7} "
            f"{r['first_seconds']:>7.2f} {r['setup_seconds']:>8.1f} "
            f"{r['rss_bytes'] / 2**20:>7,.0f} {load:>9}"
        )


def target_specs(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The targets these results can be held to, as ``Run.target``'s keywords."""
    specs: list[dict[str, Any]] = []
    for r in results:
        if r["kind"] != "full" or r["case"].endswith("-1k"):
            continue
        for key, what in (("idle", "nothing changed"), ("changed", f"{CHANGED} new asks")):
            specs.append(
                {
                    "name": f"{key}_median_ms.{r['case']}",
                    "label": f"median inspection ms, {what}, {r['case']}",
                    "value": r[f"{key}_median_ms"],
                    "at_most": TARGET_MS,
                    "fmt": ".3f",
                }
            )
    return specs


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", help=f"comma list of {', '.join(CASES)} (default: all)")
    parser.add_argument("--repeat", type=int, help=f"inspections of each kind (default {REPEAT})")
    add_arguments(parser)
    args = parser.parse_args()
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be at least 1")
    repeat = args.repeat or (QUICK_REPEAT if args.quick else REPEAT)
    table = QUICK_CASES if args.quick else CASES
    chosen = names(args.cases or ",".join(CASES), list(CASES), "case")
    run = Run("outstanding", args)
    print(f"load average at the start: {run.machine['load_average_start']}", file=sys.stderr)
    progress = run.progress(len(chosen))
    results: list[dict[str, Any]] = []
    for name in chosen:
        case = table[name]
        with progress.step(f"{case.name}: {case.nodes:,} nodes, {case.pending:,} pending") as step:
            once = run_in_subprocess(case, repeat)
            step.result = (
                f"nothing changed {once['idle_median_ms']:.3f} ms, "
                f"10 new {once['changed_median_ms']:.3f} ms, "
                f"set-up {once['setup_seconds']:.1f} s, {once['rss_bytes'] / 2**20:,.0f} MB"
            )
        results.append(
            {"case": case.name, "kind": case.kind, "nodes": case.nodes, "pending": case.pending}
            | once
        )
    print_table(results)
    print(
        f"load average (1, 5, 15 min): {run.machine['load_average_start']} at the start, "
        f"{load_average()} at the end"
    )
    for spec in target_specs(results):
        run.target(
            spec["name"], spec["label"], spec["value"], at_most=spec["at_most"], fmt=spec["fmt"]
        )
    return run.finish({"changed": CHANGED, "results": results})


if __name__ == "__main__":
    sys.exit(main())
