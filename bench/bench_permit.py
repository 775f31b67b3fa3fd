"""Permit gangs (Koordinator style) beside placeholder gangs (YuniKorn style) and plain asks.

500 gangs of 20 members on 2,000 nodes, each node room for 10 members (``{memory: 10,
vcore: 1}`` each; the cluster ends half full). One leaf queue ``root.gang`` (fifo), one
application per gang, everything through the public API on a ``ManualClock`` (as
``bench_gang``: no gang waiting time or placeholder timeout passes mid-run). The cases:

    strict       each application has 20 asks (``max_allocations`` 1) tagged as members of
                 its own permit gang (``gang_tags(name, 20, mode="Strict")``); a gang is
                 complete when its members reach the RM (one ``AllocationResponse.new``)
    nonstrict    the same with ``mode="NonStrict"``
    placeholder  each application has ``placeholder_ask`` for 20 members (Soft) and 20
                 placeholder asks; a gang is complete when all its placeholders reached the
                 RM. Then (reported apart, as ``replace``) 20 real asks per application
                 replace them, the RM confirming the ``PLACEHOLDER_REPLACED`` releases once
                 per round, as ``bench_gang`` does; a gang is replaced when all its real
                 allocations reached the RM
    plain        the same 10,000 asks with no gang tags: the reference

All the asks of a case go in one request; the clock starts right before it and stops when
the RM callback has seen the last gang complete (for plain: the last application of 20).
Each run is then checked, untimed, and a wrong run fails the script (exit 1, whatever the
targets): every gang complete and exactly once, every allocation at the RM once, each
permit gang's members in a single response, no rejection, release or error logged by the
core, every application's view (gangs satisfied and bound, no tentative or placeholder
allocation left, placeholderData replaced) and the nodes holding exactly the allocations.

The cases run in one process (``scheduler.tune_gc()`` once, a collection between runs),
interleaved: each repeat runs every case once, in the opposite order to the repeat before,
so a slow spell of a shared machine hits all alike. The table shows the medians over the
repeats (and the best gangs/s): gangs and allocations per second, the seconds to the last
complete gang, to the first and until the core settled, and how many responses carried the
allocations, with the 1-minute load average sampled before and after each run;
bench/results/permit.json keeps every run.

Target (a sanity bound, no number was asked for): gangs/s of Strict and of NonStrict permit
gangs >= 0.25 x gangs/s of placeholder gangs (placing them), in the same run.

    python bench/bench_permit.py [--gangs 500] [--members 20] [--nodes 2000] [--repeat 3]
        [--quick] [--check] [--out FILE]

``--quick`` is 10 gangs of 5 on 10 nodes, once.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import scheduler
from _common import Run, add_arguments, confirm_replaced, load_average
from scheduler import si
from scheduler.testing import ErrorWatch, ManualClock, gang_tags

TARGET_RATIO = 0.25  # permit gangs/s vs placeholder gangs/s
CASES = ("strict", "nonstrict", "placeholder", "plain")
RM_ID = "rm-1"
PARTITION = "default"
QUEUE = "root.gang"
TASK_GROUP = "tg"
ASK_MEMORY, ASK_VCORE = 10, 1
PER_NODE = 10  # members a node holds
STEP_TIMEOUT = 600.0  # seconds for any one settle(); a stuck core fails the run instead

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: gang
            properties:
              application.sort.policy: fifo
"""


class BenchError(RuntimeError):
    """The core did not do what the case needs: the run measured would be a broken one."""


@dataclass
class Tally:
    """Allocations of one kind (placeholder or not) as the RM receives them."""

    members: int  # allocations that complete one application's gang
    per_app: dict[str, int] = field(default_factory=dict)
    allocations: int = 0
    responses: int = 0  # responses that carried allocations of this kind
    complete: int = 0  # applications with all their members received
    first_complete_at: float | None = None
    last_complete_at: float | None = None

    def add(self, app_id: str, now: float) -> None:
        n = self.per_app.get(app_id, 0) + 1
        self.per_app[app_id] = n
        self.allocations += 1
        if n == self.members:
            self.complete += 1
            if self.first_complete_at is None:
                self.first_complete_at = now
            self.last_complete_at = now


class Recorder(scheduler.ResourceManagerCallback):
    """Counts what reaches the RM per application and keeps the releases to confirm.

    It never calls the core itself: the driver confirms releases after a settle.
    """

    def __init__(self, members: int) -> None:
        self.real = Tally(members)
        self.placeholders = Tally(members)
        self.uuids: set[str] = set()
        self.placeholder_nodes: dict[str, dict[str, int]] = {}  # app -> node -> placeholders
        self.real_allocs: list[si.Allocation] = []
        self.responses: dict[str, int] = {}  # app -> responses carrying its real allocations
        self.to_confirm: list[si.AllocationRelease] = []
        self.replaced: set[str] = set()
        self.problems: list[str] = []
        self.other_releases: list[si.AllocationRelease] = []
        self.released_asks: list[si.AllocationAskRelease] = []
        self.rejected: list[si.RejectedAllocationAsk] = []
        self.rejected_apps: list[si.RejectedApplication] = []
        self.echoed: set[str] = set()  # confirmed placeholders the core echoed back

    async def update_allocation(self, response: si.AllocationResponse) -> None:
        now = time.perf_counter()
        seen: set[str] = set()
        placeholders = self.placeholders.allocations
        for alloc in response.new:
            if alloc.uuid in self.uuids:
                self.problems.append(f"uuid {alloc.uuid} ({alloc.allocation_key}) sent twice")
            self.uuids.add(alloc.uuid)
            app = alloc.application_id
            if alloc.placeholder:
                per = self.placeholder_nodes.setdefault(app, {})
                per[alloc.node_id] = per.get(alloc.node_id, 0) + 1
                self.placeholders.add(app, now)
            else:
                self.real_allocs.append(alloc)
                self.real.add(app, now)
                seen.add(app)
        for app in seen:
            self.responses[app] = self.responses.get(app, 0) + 1
        if seen:
            self.real.responses += 1
        if self.placeholders.allocations > placeholders:
            self.placeholders.responses += 1
        for rel in response.released:
            if rel.termination_type == si.TerminationType.PLACEHOLDER_REPLACED:
                if rel.uuid in self.replaced:
                    self.problems.append(f"PLACEHOLDER_REPLACED twice for {rel.uuid}")
                else:
                    self.replaced.add(rel.uuid)
                    self.to_confirm.append(rel)
            elif (
                rel.termination_type == si.TerminationType.STOPPED_BY_RM
                and rel.uuid in self.replaced
                and rel.uuid not in self.echoed
            ):
                # YuniKorn v1.2 answers the RM's confirmation: STOPPED_BY_RM, once (a core
                # from before issue 22 does not, and bench/ab.py runs both)
                self.echoed.add(rel.uuid)
            else:
                self.other_releases.append(rel)
        self.released_asks.extend(response.released_asks)
        self.rejected.extend(response.rejected)

    async def update_application(self, response: si.ApplicationResponse) -> None:
        self.rejected_apps.extend(response.rejected)

    def take_confirmations(self) -> list[si.AllocationRelease]:
        taken, self.to_confirm = self.to_confirm, []
        return taken

    def check_clean(self, where: str, errors: ErrorWatch) -> None:
        msgs = list(self.problems[:5])
        if errors:
            msgs.append(errors.report())
        if self.rejected:
            r = self.rejected[0]
            msgs.append(f"{len(self.rejected)} asks rejected, e.g. {r.allocation_key}: {r.reason}")
        if self.rejected_apps:
            r2 = self.rejected_apps[0]
            msgs.append(
                f"{len(self.rejected_apps)} apps rejected, e.g. {r2.application_id}: {r2.reason}"
            )
        if self.other_releases:
            r3 = self.other_releases[0]
            msgs.append(
                f"{len(self.other_releases)} unexpected releases, e.g. {r3.uuid} "
                f"{r3.termination_type.name} {r3.message!r}"
            )
        if self.released_asks:
            r4 = self.released_asks[0]
            msgs.append(
                f"{len(self.released_asks)} asks released, e.g. {r4.allocation_key} "
                f"{r4.termination_type.name}"
            )
        if msgs:
            raise BenchError(f"{where}: " + "; ".join(msgs))


@dataclass(frozen=True)
class Size:
    gangs: int
    members: int
    nodes: int

    @property
    def asks(self) -> int:
        return self.gangs * self.members

    def apps(self) -> list[str]:
        return [f"app-{i:04d}" for i in range(self.gangs)]

    def __str__(self) -> str:
        return f"{self.gangs:,} gangs x {self.members:,} on {self.nodes:,} nodes"


async def settle(core: scheduler.Core) -> None:
    await asyncio.wait_for(core.settle(), timeout=STEP_TIMEOUT)


def build_asks(case: str, size: Size, *, phase: str = "") -> list[si.AllocationAsk]:
    """The asks of a case, application by application: member ``j`` of application ``i``
    is the ask ``app-<i>-<phase>-<j>`` (``max_allocations`` 1)."""
    resource = si.Resource.of(memory=ASK_MEMORY, vcore=ASK_VCORE)
    mode = {"strict": "Strict", "nonstrict": "NonStrict"}.get(case)
    asks = []
    for i, app in enumerate(size.apps()):
        tags = gang_tags(f"gang-{i:04d}", size.members, mode=mode) if mode else {}
        for j in range(size.members):
            asks.append(
                si.AllocationAsk(
                    allocation_key=f"{app}-{phase or case}-{j}",
                    application_id=app,
                    partition_name=PARTITION,
                    resource_ask=resource,
                    max_allocations=1,
                    tags=dict(tags),
                    task_group_name=TASK_GROUP if case == "placeholder" else "",
                    placeholder=phase == "ph",
                )
            )
    return asks


def timed(tally: Tally, size: Size, start: float, settled: float) -> dict[str, float]:
    """The figures of one timed phase, from when it started to its last complete gang."""
    assert tally.last_complete_at is not None and tally.first_complete_at is not None
    seconds = tally.last_complete_at - start
    return {
        "seconds": seconds,
        "settle_seconds": settled - start,
        "first_gang_seconds": tally.first_complete_at - start,
        "gangs_per_s": size.gangs / seconds,
        "allocs_per_s": size.asks / seconds,
        "responses": tally.responses,
    }


def incomplete(where: str, tally: Tally, size: Size) -> BenchError:
    short = sorted(
        (n, app) for app in size.apps() if (n := tally.per_app.get(app, 0)) != size.members
    )
    example = ", ".join(f"{app} {n}" for n, app in short[:5])
    return BenchError(
        f"{where}: {tally.complete} of {size.gangs} gangs complete, {tally.allocations} of "
        f"{size.asks} allocations at the RM (allocations per application: {example})"
    )


async def run_case(case: str, size: Size) -> dict[str, dict[str, float]]:
    """One run of a case; its timed phases (``placeholder`` has ``replace`` too). Raises
    BenchError if the core misbehaves."""
    rm = Recorder(size.members)
    apps = size.apps()
    with ErrorWatch() as errors:
        async with scheduler.start_scheduler(clock=ManualClock()) as core:
            await core.register_resource_manager(
                si.RegisterResourceManagerRequest(
                    rm_id=RM_ID, policy_group="default", version="1", config=QUEUES
                ),
                rm,
            )
            node_res = si.Resource.of(memory=ASK_MEMORY * PER_NODE, vcore=ASK_VCORE * PER_NODE)
            await core.update_node(
                si.NodeRequest(
                    rm_id=RM_ID,
                    nodes=[
                        si.NodeInfo(
                            node_id=f"node-{i:05d}",
                            action=si.ActionFromRM.CREATE,
                            schedulable_resource=node_res,
                        )
                        for i in range(size.nodes)
                    ],
                )
            )
            placeholder = case == "placeholder"
            gang_res = si.Resource.of(
                memory=ASK_MEMORY * size.members, vcore=ASK_VCORE * size.members
            )
            await core.update_application(
                si.ApplicationRequest(
                    rm_id=RM_ID,
                    new=[
                        si.AddApplicationRequest(
                            application_id=app,
                            queue_name=QUEUE,
                            partition_name=PARTITION,
                            ugi=si.UserGroupInformation(user="u"),
                            placeholder_ask=gang_res if placeholder else None,
                            gang_scheduling_style="Soft",
                        )
                        for app in apps
                    ],
                )
            )
            await settle(core)
            rm.check_clean(f"{case}: setup", errors)

            asks = build_asks(case, size, phase="ph" if placeholder else "")
            tally = rm.placeholders if placeholder else rm.real
            start = time.perf_counter()
            await core.update_allocation(si.AllocationRequest(rm_id=RM_ID, asks=asks))
            await settle(core)
            settled = time.perf_counter()
            rm.check_clean(case, errors)
            if tally.complete != size.gangs or tally.allocations != size.asks:
                raise incomplete(case, tally, size)
            phases = {case: timed(tally, size, start, settled)}
            if placeholder:
                phases["replace"] = await replace(core, rm, size, errors)
            await check_state(core, rm, case, size)
            rm.check_clean(f"{case}: end", errors)
    return phases


async def replace(
    core: scheduler.Core, rm: Recorder, size: Size, errors: ErrorWatch
) -> dict[str, float]:
    """The real asks replace the placeholders; the RM confirms the releases it has
    received after each settle, as ``bench_gang``'s phase 2."""
    real_asks = build_asks("placeholder", size, phase="real")
    rounds = 0
    start = time.perf_counter()
    await core.update_allocation(si.AllocationRequest(rm_id=RM_ID, asks=real_asks))
    while True:
        await settle(core)
        if rm.real.complete >= size.gangs:
            break
        batch = rm.take_confirmations()
        if not batch:
            rm.check_clean("replace", errors)
            raise BenchError(
                f"replace stalled after {rounds} rounds: {rm.real.allocations} of {size.asks} "
                f"real allocations, {len(rm.replaced)} PLACEHOLDER_REPLACED releases received"
            )
        rounds += 1
        await core.update_allocation(confirm_replaced(RM_ID, PARTITION, batch))
    settled = time.perf_counter()
    rm.check_clean("replace", errors)
    if rm.real.allocations != size.asks or len(rm.replaced) != size.asks:
        raise incomplete("replace", rm.real, size)
    return {**timed(rm.real, size, start, settled), "confirm_rounds": rounds}


async def check_state(core: scheduler.Core, rm: Recorder, case: str, size: Size) -> None:
    """Untimed end-of-run checks of what the RM received and of the core's own view."""
    errors: list[str] = []
    permit = case in ("strict", "nonstrict")
    if permit:
        split = sorted(app for app, n in rm.responses.items() if n != 1)
        if split:
            errors.append(
                f"{len(split)} permit gangs reached the RM in more than one response, e.g. "
                f"{split[0]} in {rm.responses[split[0]]}"
            )
    if case == "placeholder":
        # each real allocation lands on the node of a placeholder of its own application
        for a in rm.real_allocs:
            per = rm.placeholder_nodes.get(a.application_id, {})
            if per.get(a.node_id, 0) <= 0:
                errors.append(f"{a.allocation_key} on {a.node_id}: no placeholder of its there")
                break
            per[a.node_id] -= 1
    mode = {"strict": "Strict", "nonstrict": "NonStrict"}.get(case)
    for i, app in enumerate(size.apps()):
        info = await core.get_application(PARTITION, app)
        state = info.get("applicationState")
        if state != "Running":
            errors.append(f"{app}: state {state!r}")
        allocs = info.get("allocations") or []
        odd = [a for a in allocs if a.get("placeholder") or a.get("tentative")]
        if len(allocs) != size.members or odd:
            errors.append(f"{app}: {len(allocs)} allocations, {len(odd)} placeholder or tentative")
        gangs = info.get("gangs") or []
        if permit:
            want = {
                "gangId": f"default/gang-{i:04d}",
                "mode": mode,
                "minAvailable": size.members,
                "placed": 0,
                "bound": size.members,
                "satisfied": True,
                "timedOut": False,
            }
            got = [{k: g.get(k) for k in want} for g in gangs]
            if got != [want]:
                errors.append(f"{app}: gangs {got}, expected [{want}]")
        elif gangs:
            errors.append(f"{app}: gangs {gangs}, expected none")
        groups = {g.get("taskGroupName"): g for g in info.get("placeholderData") or []}
        if case == "placeholder":
            g = groups.get(TASK_GROUP)
            want_ph = {"count": size.members, "replaced": size.members, "timedout": 0}
            got_ph = None if g is None else {k: g.get(k) for k in want_ph}
            if got_ph != want_ph:
                errors.append(f"{app}: placeholderData[{TASK_GROUP}] {got_ph}, want {want_ph}")
        elif groups:
            errors.append(f"{app}: placeholderData {list(groups)}, expected none")
        if len(errors) > 20:
            break
    on_nodes = 0
    for n in range(size.nodes):
        node = await core.get_node(PARTITION, f"node-{n:05d}")
        allocs = node.get("allocations") or []
        on_nodes += len(allocs)
        if len(allocs) > PER_NODE or any(a.get("placeholder") for a in allocs):
            errors.append(f"node-{n:05d}: {len(allocs)} allocations, room for {PER_NODE}")
    if on_nodes != size.asks:
        errors.append(f"nodes hold {on_nodes} allocations, expected {size.asks}")
    if errors:
        shown = errors[:10] + ([f"... {len(errors) - 10} more"] if len(errors) > 10 else [])
        raise BenchError(f"{case}: end-of-run check: " + "; ".join(shown))


def orders(repeat: int) -> Iterator[tuple[int, str]]:
    """(repeat, case) in run order: each repeat every case, the order flipped each time."""
    for r in range(repeat):
        for case in CASES if r % 2 == 0 else tuple(reversed(CASES)):
            yield r, case


def summarise(name: str, runs: list[dict[str, float]]) -> dict[str, Any]:
    """Medians (and best gangs/s) over the runs of one phase; every run kept."""
    loads = [x for r in runs for x in (r["load_before"], r["load_after"]) if x >= 0]
    return {
        "case": name,
        "gangs_per_s": statistics.median(r["gangs_per_s"] for r in runs),
        "allocs_per_s": statistics.median(r["allocs_per_s"] for r in runs),
        "gangs_per_s_best": max(r["gangs_per_s"] for r in runs),
        "seconds": statistics.median(r["seconds"] for r in runs),
        "settle_seconds": statistics.median(r["settle_seconds"] for r in runs),
        "first_gang_seconds": statistics.median(r["first_gang_seconds"] for r in runs),
        "responses": statistics.median(r["responses"] for r in runs),
        "load_min": min(loads) if loads else None,
        "load_max": max(loads) if loads else None,
        # no *_per_s key in the runs: bench/ab.py compares the medians only
        "runs": [{k: v for k, v in r.items() if not k.endswith("_per_s")} for r in runs],
    }


def print_table(results: list[dict[str, Any]], size: Size, repeat: int) -> None:
    print(
        f"{size} (room for {PER_NODE} members each), {size.asks:,} allocations; "
        f"median of {repeat}, interleaved; load: 1-minute, lowest-highest"
    )
    print(
        f"{'case':<12} {'gangs/s':>9} {'best':>9} {'allocs/s':>9} {'seconds':>8} "
        f"{'1st gang s':>10} {'settle s':>8} {'responses':>9} {'load':>11}"
    )
    for res in results:
        load = (
            f"{res['load_min']:.2f}-{res['load_max']:.2f}" if res["load_min"] is not None else "-"
        )
        print(
            f"{res['case']:<12} {res['gangs_per_s']:>9,.0f} {res['gangs_per_s_best']:>9,.0f} "
            f"{res['allocs_per_s']:>9,.0f} {res['seconds']:>8.3f} "
            f"{res['first_gang_seconds']:>10.3f} {res['settle_seconds']:>8.3f} "
            f"{res['responses']:>9,.0f} {load:>11}"
        )


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gangs", type=int, help="gangs (applications) per case (500)")
    parser.add_argument("--members", type=int, help="members per gang, its min-available (20)")
    parser.add_argument("--nodes", type=int, help=f"nodes, each room for {PER_NODE} (2,000)")
    parser.add_argument("--repeat", type=int, help="runs of each case (3; 1 with --quick)")
    add_arguments(parser)
    args = parser.parse_args()
    d_gangs, d_members, d_nodes = (10, 5, 10) if args.quick else (500, 20, 2_000)
    size = Size(args.gangs or d_gangs, args.members or d_members, args.nodes or d_nodes)
    if size.asks > size.nodes * PER_NODE:
        parser.error(f"{size.asks:,} members do not fit on {size.nodes:,} nodes of {PER_NODE}")
    repeat = args.repeat or (1 if args.quick else 3)
    run = Run("permit", args)
    progress = run.progress(repeat * len(CASES))
    runs: dict[str, list[dict[str, float]]] = {}
    for r, case in orders(repeat):
        gc.collect()  # the previous run's garbage, outside the timed part
        with progress.step(f"{case}: {size}, repeat {r + 1}/{repeat}") as step:
            before = load_average()
            phases = await run_case(case, size)
            after = load_average()
            step.result = ", ".join(
                f"{name} {p['gangs_per_s']:,.0f} gangs/s" for name, p in phases.items()
            )
        for name, figures in phases.items():
            figures["load_before"] = before[0] if before else -1.0
            figures["load_after"] = after[0] if after else -1.0
            runs.setdefault(name, []).append(figures)
    names = [n for c in CASES for n in ((c, "replace") if c == "placeholder" else (c,))]
    results = [summarise(n, runs[n]) for n in names]
    print_table(results, size, repeat)
    by = {r["case"]: r for r in results}
    placeholder = by["placeholder"]["gangs_per_s"]
    for case in ("strict", "nonstrict"):
        run.target(
            f"{case}_vs_placeholder",
            f"{case} permit gangs/s ({by[case]['gangs_per_s']:,.0f}) / placeholder gangs/s "
            f"({placeholder:,.0f})",
            by[case]["gangs_per_s"] / placeholder,
            at_least=TARGET_RATIO,
            fmt=".2f",
        )
    return run.finish(
        {
            "gangs": size.gangs,
            "members": size.members,
            "nodes": size.nodes,
            "members_per_node": PER_NODE,
            "repeat": repeat,
            "results": results,
        }
    )


if __name__ == "__main__":
    from loguru import logger

    logger.remove()  # no sink but the ErrorWatch of each run
    try:
        scheduler.tune_gc()  # this process is the benchmark's own, as a daemon's would be
        sys.exit(asyncio.run(main()))
    except BenchError as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
