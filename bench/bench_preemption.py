"""Preemption: a starved queue taking its guarantee back, and what a pass pays for
preemption that is enabled but not needed (issue 21).

Two parts, every case on a ``ManualClock`` in a fresh process that tunes its collector as
a daemon does (``scheduler.tune_gc()``), so its peak RSS is its own.

**Storm** (``storm-500``, ``storm-5k``): a full cluster gives a starved queue its
guarantee back. Nodes of memory 40, each filled by 4 allocations of 10 in ``root.greedy``
(no guarantee); ``root.starved`` is guaranteed half the cluster's memory and has
``preemption.delay: 1s``; its application submits as many asks of 10 as that guarantee
holds (``allow_preempt_self`` and ``allow_preempt_other``), which wait in the full
cluster. The RM confirms every ``PREEMPTED_BY_SCHEDULER`` release as soon as its callback
hears of it (from inside the callback, releasing that uuid). The wall clock starts, the
manual clock is advanced by the delay and the core settles: the wall time until the RM
has heard of the allocation that brings the starved queue to its guarantee (``reached``),
and until the core is quiet (``settled``; checked with ``get_queue``: allocated >=
guaranteed). If the core goes quiet short of the guarantee (asks whose preemption found
no victims wait ``Timeouts.preempt_retry``), the manual clock is advanced by that and
the core settles again, up to 10 times (``clock s``: the delay and those advances, the
core's own time until the guarantee, which a real clock would wait out). Also: the
preemptions (releases the RM confirmed), the scheduling passes
(``schedulerMetrics.schedulingLatency``'s count), the callback calls that carried
preemptions (about one per preemption round that started any: a round starts at most
256), the set-up's time and the peak RSS.

    case        nodes   greedy allocations   starved asks (= its guarantee / 10)
    storm-500     500                2,000          1,000
    storm-5k    5,000               20,000         10,000

Nodes of 40 rather than 100 so that 10,000 asks of 10 are exactly half the cluster.

**Idle** (``idle-met``, ``idle-below``): what a pass pays for preemption enabled but not
needed. ``bench_backlog.py``'s full-100k set-up (5,000 nodes, every one exactly full,
100,000 distinct asks of five shapes pending in root.a and root.b, ``set_up``) and its
batch (the RM releases 10 running allocations; the time until the core has refilled the
10 freed slots, ``one_batch``), A/B in one process: the same cluster twice, once with the
partition's ``preemption: {enabled: false}`` (``off``) and once enabled (``on``, the
default), with the same guarantees, the batches alternating between the two (A B, B A,
...) with the same seed, so both see the same releases and refills. Enabled, a
preemption round follows every pass that leaves asks pending (``PreemptionRound.wanted()``)
and reads the guarantees:

    idle-met     root.a and root.b guaranteed 40% of the cluster each, and each holds
                 about half: no queue is below its guarantee, so the round looks no
                 further than the queues (the target's case)
    idle-below   root.a guaranteed 40%, root.b the whole cluster: root.b is below its
                 guarantee, but its asks do not allow preempting others (the SI's default
                 ``PreemptionPolicy``), so no ask may preempt

``--repeat`` processes per case (default 3), each setting the two clusters up in the other
order. The table has per variant the median, p99 (nearest rank) and largest latency over
the measured batches of every repeat, the scheduling passes per batch, the medians of the
repeats and the peak RSS (of the process: both clusters); then ``on / off`` of the
medians and of the p99s, and the median of the paired ratios (each batch of ``on``
against the same batch of ``off``).

``--instructions`` also counts instructions with valgrind's callgrind for idle-met (as
``bench/instructions.py`` counts them): each variant alone in a process under ``valgrind
--tool=callgrind``, with ``--batches`` measured batches and with 10, the same set-up and
hash seed (``PYTHONHASHSEED`` 0); the difference of the totals over the difference of the
batches is the instructions per batch (the core's pass and round, the RM's side of the
batch, and a tenth of a top-up), and the table has ``on / off``. 4 runs of about 2-4
minutes each, 2 at a time.

Targets (read on the build this interpreter imports): idle-met median ``on / off`` <=
1.05 (with ``--instructions``, also instructions per batch ``on / off`` <= 1.05). The
storm cases and idle-below have no target: their figures are printed. ``--check`` exits
1 when a target is missed.

    python bench/bench_preemption.py [--cases storm-500,storm-5k,idle-met,idle-below]
        [--batches N] [--warmup N] [--repeat N] [--instructions] [--seed N] [--quick]
        [--check] [--out FILE]

``--batches`` (default 400) and ``--warmup`` (5) are an idle repeat's. ``--quick`` runs
tiny versions (storm: 50 nodes, 100 asks; idle: 50 nodes, 200 pending, 3 batches after 1
warm-up, one repeat).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import bench_backlog
import scheduler
from _common import Run, add_arguments, load_average, run_child
from bench_backlog import (
    RELEASES,
    TOPUP_EVERY,
    BenchError,
    Cluster,
    Recorder,
    Running,
    cluster_total,
    latency_summary,
    log,
    one_batch,
    percentile,
    set_up,
)
from bench_scheduling import build_of_scheduler, names, peak_rss_bytes
from scheduler import si
from scheduler.testing import ManualClock

PREEMPTED = si.TerminationType.PREEMPTED_BY_SCHEDULER
MAY_PREEMPT = si.PreemptionPolicy(allow_preempt_self=True, allow_preempt_other=True)
TARGET_RATIO = 1.05  # idle-met: on / off
SLOT = 10  # memory of an allocation and of a starved ask
SLOTS = 4  # allocations per node in the storm
DELAY = 1.0  # the starved leaf's preemption.delay, seconds of the manual clock
MAX_ADVANCES = 10  # storm: further advances of preempt_retry, at most
SMALL_BATCHES = 10  # --instructions: the small run's batches
VARIANTS = ("off", "on")


@dataclass(frozen=True)
class Storm:
    name: str
    nodes: int

    @property
    def asks(self) -> int:
        """The starved queue's asks: exactly its guarantee, half the cluster."""
        return self.nodes * SLOTS // 2

    @property
    def guarantee(self) -> int:
        return self.asks * SLOT


@dataclass(frozen=True)
class Idle:
    name: str
    scenario: str  # met or below
    backlog: bench_backlog.Case


STORMS = {c.name: c for c in (Storm("storm-500", 500), Storm("storm-5k", 5_000))}
QUICK_STORMS = {"storm-500": Storm("storm-500", 50), "storm-5k": Storm("storm-5k", 50)}
FULL_100K = bench_backlog.CASES["full-100k"]
FULL_QUICK = bench_backlog.QUICK_CASES["full-100k"]
IDLES = {f"idle-{s}": Idle(f"idle-{s}", s, FULL_100K) for s in ("met", "below")}
QUICK_IDLES = {f"idle-{s}": Idle(f"idle-{s}", s, FULL_QUICK) for s in ("met", "below")}
CASES = [*STORMS, *IDLES]


# -- the storm ---------------------------------------------------------------------------


def storm_yaml(storm: Storm) -> str:
    return f"""partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: greedy
          - name: starved
            resources:
              guaranteed: {{memory: {storm.guarantee}}}
            properties: {{preemption.delay: {DELAY:g}s}}
"""


class StormRM(scheduler.ResourceManagerCallback):
    """Confirms every preemption as soon as it hears of it; counts the starved queue's
    allocations and notes when they reach its guarantee."""

    def __init__(self, needed: int) -> None:
        self.core: scheduler.Core | None = None
        self.needed = needed  # the starved allocations that make its guarantee
        self.new: dict[str, int] = {}  # application -> allocations heard of
        self.preempted = 0
        self.calls_with_preemptions = 0
        self.reached_at: float | None = None  # perf_counter() when starved reached it

    async def update_allocation(self, response: si.AllocationResponse) -> None:
        for alloc in response.new:
            self.new[alloc.application_id] = self.new.get(alloc.application_id, 0) + 1
        if self.reached_at is None and self.new.get("starved", 0) >= self.needed:
            self.reached_at = time.perf_counter()
        victims = [r for r in response.released if r.termination_type == PREEMPTED]
        if not victims:
            return
        self.preempted += len(victims)
        self.calls_with_preemptions += 1
        assert self.core is not None
        await self.core.update_allocation(
            si.AllocationRequest(
                rm_id="bench",
                releases=si.AllocationReleasesRequest(
                    allocations_to_release=[
                        si.AllocationRelease(
                            partition_name="default",
                            application_id=r.application_id,
                            uuid=r.uuid,
                            termination_type=PREEMPTED,
                        )
                        for r in victims
                    ]
                ),
            )
        )


async def passes(core: scheduler.Core) -> int:
    """The scheduling passes the partition has made (its latency histogram's count)."""
    summary = await core.query("default", "summary")
    return int(sum(summary["schedulerMetrics"]["schedulingLatency"]["buckets"]))


async def allocated(core: scheduler.Core, queue: str) -> int:
    info = await core.get_queue("default", queue)
    return int(info["allocatedResource"].get("memory", 0))


async def storm_set_up(core: scheduler.Core, storm: Storm, rm: StormRM) -> None:
    """The nodes, greedy's fill and the starved asks, which wait within their delay."""
    nodes = [
        si.NodeInfo(
            node_id=f"node-{i:05d}",
            action=si.ActionFromRM.CREATE,
            schedulable_resource=si.Resource.of(memory=SLOTS * SLOT, vcore=1000),
        )
        for i in range(storm.nodes)
    ]
    await core.update_node(si.NodeRequest(rm_id="bench", nodes=nodes))
    apps = [("greedy", "root.greedy"), ("starved", "root.starved")]
    await core.update_application(
        si.ApplicationRequest(
            rm_id="bench",
            new=[
                si.AddApplicationRequest(
                    application_id=a, queue_name=q, ugi=si.UserGroupInformation(user="bench")
                )
                for a, q in apps
            ],
        )
    )
    size = si.Resource.of(memory=SLOT)
    fill = [
        si.AllocationAsk(allocation_key=f"g-{i}", application_id="greedy", resource_ask=size)
        for i in range(storm.nodes * SLOTS)
    ]
    await core.update_allocation(si.AllocationRequest(rm_id="bench", asks=fill))
    await core.settle()
    if rm.new.get("greedy", 0) != len(fill):
        raise BenchError(f"the fill placed {rm.new.get('greedy', 0)} of {len(fill)}")
    starved = [
        si.AllocationAsk(
            allocation_key=f"s-{i}",
            application_id="starved",
            resource_ask=size,
            preemption_policy=MAY_PREEMPT,
        )
        for i in range(storm.asks)
    ]
    await core.update_allocation(si.AllocationRequest(rm_id="bench", asks=starved))
    await core.settle()
    if rm.new.get("starved", 0) or rm.preempted:
        raise BenchError("the starved asks found room, or preempted, within their delay")


async def run_storm(storm: Storm) -> dict[str, Any]:
    clock = ManualClock()
    rm = StormRM(storm.asks)
    async with scheduler.start_scheduler(clock=clock) as core:
        rm.core = core
        await core.register_resource_manager(
            si.RegisterResourceManagerRequest(
                rm_id="bench", policy_group="default", config=storm_yaml(storm)
            ),
            rm,
        )
        started = time.perf_counter()
        await storm_set_up(core, storm, rm)
        setup_seconds = time.perf_counter() - started
        setup_rss = peak_rss_bytes()
        log(
            f"set-up: {storm.nodes * SLOTS:,} allocations, {storm.asks:,} asks waiting, "
            f"{setup_seconds:.2f} s"
        )
        passes_before = await passes(core)
        start = time.perf_counter()
        await clock.advance(DELAY)
        await core.settle()
        advances = 0
        while await allocated(core, "root.starved") < storm.guarantee:
            if advances == MAX_ADVANCES:
                break
            advances += 1
            await clock.advance(scheduler.Timeouts().preempt_retry)
            await core.settle()
        settled = time.perf_counter() - start
        held = await allocated(core, "root.starved")
        greedy = await allocated(core, "root.greedy")
        made = await passes(core) - passes_before
    reached = rm.reached_at - start if rm.reached_at is not None else None
    log(
        f"{rm.preempted:,} preemptions, starved holds {held:,} of {storm.guarantee:,}, "
        f"{settled:.2f} s"
    )
    return {
        "case": storm.name,
        "nodes": storm.nodes,
        "greedy_allocations": storm.nodes * SLOTS,
        "asks": storm.asks,
        "guarantee": storm.guarantee,
        "starved_allocated": held,
        "greedy_allocated": greedy,
        "met": held >= storm.guarantee,
        "reached_seconds": reached,
        "settled_seconds": settled,
        "advances": advances,
        "clock_seconds": DELAY + advances * scheduler.Timeouts().preempt_retry,
        "preemptions": rm.preempted,
        "passes": made,
        "calls_with_preemptions": rm.calls_with_preemptions,
        "setup_seconds": setup_seconds,
        "setup_rss_bytes": setup_rss,
    }


# -- idle: enabled but not needed -------------------------------------------------------


def idle_yaml(idle: Idle, enabled: bool) -> str:
    """root.a and root.b with the scenario's guarantees; preemption on or off."""
    memory, vcore = cluster_total(idle.backlog)
    share_b = 1.0 if idle.scenario == "below" else 0.4
    lines = ["partitions:", "  - name: default"]
    if not enabled:
        lines += ["    preemption: {enabled: false}"]
    lines += ["    queues:", "      - name: root", '        submitacl: "*"', "        queues:"]
    for name, share in (("a", 0.4), ("b", share_b)):
        lines += [f"          - name: {name}", "            resources:"]
        g_mem, g_vcore = int(memory * share), int(vcore * share)
        lines += [f"              guaranteed: {{memory: {g_mem}, vcore: {g_vcore}m}}"]
    return "\n".join(lines) + "\n"


class IdleCluster(Cluster):
    """``bench_backlog``'s cluster, whose ``pick`` checks first that ``RELEASES`` nodes run
    allocations by a set of the nodes of every running one (50,000 at full-100k: about 12
    million instructions a batch, outside the timed part but inside an instruction count);
    with more running allocations than ``RELEASES - 1`` nodes can hold (``SLOTS`` each),
    they do."""

    def pick(self) -> list[Running]:
        if len(self.running) <= (RELEASES - 1) * bench_backlog.SLOTS:
            return super().pick()
        chosen: list[Running] = []
        nodes: set[str] = set()
        rng, running = self.rng, self.running
        while len(chosen) < RELEASES:  # the same draws as Cluster.pick
            i = rng.randrange(len(running))
            alloc = running[i]
            if alloc.node in nodes:
                continue
            nodes.add(alloc.node)
            running[i] = running[-1]
            running.pop()
            chosen.append(alloc)
        return chosen


@dataclass
class Side:
    """One cluster of the pair: the RM's side of it, and the latencies of its batches."""

    variant: str
    cluster: Cluster
    figures: dict[str, Any]
    seconds: list[float]
    passes_before: int = 0


async def set_up_side(core: scheduler.Core, idle: Idle, variant: str, seed: int) -> Side:
    rm = Recorder()
    config = idle_yaml(idle, enabled=variant == "on")
    await core.register_resource_manager(
        si.RegisterResourceManagerRequest(rm_id="bench", policy_group="default", config=config),
        rm,
    )
    cluster = IdleCluster(idle.backlog, core, rm, seed)
    figures = await set_up(cluster, ["root.a", "root.b"])
    below = [q for q in ("root.a", "root.b") if await below_guarantee(core, q)]
    if below != (["root.b"] if idle.scenario == "below" else []):
        raise BenchError(f"{idle.name}: below their guarantee after the set-up: {below}")
    return Side(variant, cluster, figures, [])


async def below_guarantee(core: scheduler.Core, queue: str) -> bool:
    """``queue`` uses less of some guaranteed resource than its guarantee."""
    info = await core.get_queue("default", queue)
    used = info["allocatedResource"]
    return any(used.get(name, 0) < g for name, g in info["guaranteedResource"].items())


async def idle_batch(side: Side, b: int) -> float:
    """Batch ``b`` of a side: a top-up where ``bench_backlog`` makes one (every 10
    batches, and before a batch could find no ask of a shape it frees), then the batch."""
    cluster = side.cluster
    core = cluster.core
    if (b and not b % TOPUP_EVERY) or min(cluster.refill_pending) < RELEASES:
        await core.update_allocation(cluster.topup_request())
        await core.settle()
        if cluster.take_new():
            raise BenchError("a top-up found room in a full cluster")
    elapsed, _ = await one_batch(cluster, strict=True)
    return elapsed


async def run_idle(
    idle: Idle, variants: list[str], seed: int, batches: int, warmup: int, first: int
) -> dict[str, Any]:
    """The variants' clusters in this process (set up in turn, ``first`` first), then
    their batches interleaved: A B, B A, A B, ..."""
    order = variants[first:] + variants[:first]
    async with contextlib.AsyncExitStack() as stack:
        sides: dict[str, Side] = {}
        for variant in order:
            core = await stack.enter_async_context(scheduler.start_scheduler(clock=ManualClock()))
            sides[variant] = await set_up_side(core, idle, variant, seed)
            log(f"{variant}: set up in {sides[variant].figures['setup_seconds']:.2f} s")
        setup_rss = peak_rss_bytes()
        for b in range(warmup + batches):
            if b == warmup:
                for side in sides.values():
                    side.passes_before = await passes(side.cluster.core)
            turn = order if b % 2 == 0 else order[::-1]
            for variant in turn:
                side = sides[variant]
                elapsed = await idle_batch(side, b)
                if b >= warmup:
                    side.seconds.append(elapsed)
        out: dict[str, Any] = {}
        for variant, side in sides.items():
            made = await passes(side.cluster.core) - side.passes_before
            refilled = RELEASES * len(side.seconds)
            out[variant] = {
                **side.figures,
                **latency_summary(side.seconds, refilled),
                "passes_per_batch": made / batches,
                "latencies_ms": [s * 1e3 for s in side.seconds],
            }
            log(f"{variant}: median {out[variant]['median_ms']:.3f} ms")
    return {
        "case": idle.name,
        "scenario": idle.scenario,
        "nodes": idle.backlog.nodes,
        "pending": idle.backlog.pending,
        "batches": batches,
        "warmup": warmup,
        "order": order,
        "variants": out,
        "setup_rss_bytes": setup_rss,
    }


# -- processes ---------------------------------------------------------------------------


def child(spec: str) -> None:
    """``--child``: run one case (one repeat of an idle case), print its figures and this
    process's peak RSS as JSON."""
    from loguru import logger

    logger.remove()
    given = json.loads(spec)
    scheduler.tune_gc()
    if given["part"] == "storm":
        figures = asyncio.run(run_storm(Storm(**given["storm"])))
    else:
        idle = given["idle"]
        case = Idle(idle["name"], idle["scenario"], bench_backlog.Case(**idle["backlog"]))
        figures = asyncio.run(
            run_idle(
                case,
                given["variants"],
                given["seed"],
                given["batches"],
                given["warmup"],
                given["first"],
            )
        )
    print(json.dumps({**figures, "rss_bytes": peak_rss_bytes(), "build": build_of_scheduler()}))


def idle_spec(
    idle: Idle, variants: list[str], seed: int, batches: int, warmup: int, first: int
) -> dict[str, Any]:
    return {
        "part": "idle",
        "idle": asdict(idle),
        "variants": variants,
        "seed": seed,
        "batches": batches,
        "warmup": warmup,
        "first": first,
    }


def summarize_idle(idle: Idle, repeats: list[dict[str, Any]]) -> dict[str, Any]:
    """Every repeat's batches pooled per variant; the ratios of ``on`` to ``off``."""
    out: dict[str, Any] = {
        "case": idle.name,
        "scenario": idle.scenario,
        "nodes": idle.backlog.nodes,
        "pending": idle.backlog.pending,
        "repeats": len(repeats),
        "batches": sum(r["batches"] for r in repeats),
        "rss_bytes": max(r["rss_bytes"] for r in repeats),
        "build": repeats[0]["build"],
        "load": [(r["load_before"], r["load_after"]) for r in repeats],
        "variants": {},
    }
    for variant in VARIANTS:
        ms = [x for r in repeats for x in r["variants"][variant]["latencies_ms"]]
        out["variants"][variant] = {
            "median_ms": statistics.median(ms),
            "p99_ms": percentile(ms, 99),
            "max_ms": max(ms),
            "passes_per_batch": statistics.mean(
                r["variants"][variant]["passes_per_batch"] for r in repeats
            ),
            "repeat_medians_ms": [r["variants"][variant]["median_ms"] for r in repeats],
        }
    off, on = out["variants"]["off"], out["variants"]["on"]
    paired = [
        b / a
        for r in repeats
        for a, b in zip(
            r["variants"]["off"]["latencies_ms"], r["variants"]["on"]["latencies_ms"], strict=True
        )
    ]
    out["ratio_median"] = on["median_ms"] / off["median_ms"]
    out["ratio_p99"] = on["p99_ms"] / off["p99_ms"]
    out["ratio_paired"] = statistics.median(paired)
    out["repeat_ratios"] = [
        r["variants"]["on"]["median_ms"] / r["variants"]["off"]["median_ms"] for r in repeats
    ]
    return out


def instructions_per_batch(idle: Idle, batches: int, warmup: int, seed: int) -> dict[str, Any]:
    """Each variant alone under callgrind at ``batches`` and at ``SMALL_BATCHES``, two runs
    at a time; instructions per batch and ``on / off``."""
    import instructions

    tool = instructions.valgrind()
    env = dict(os.environ, PYTHONHASHSEED="0")
    runs: dict[tuple[str, int], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-preemption-") as tmp:

        def one(variant: str, n: int) -> dict[str, Any]:
            out = Path(tmp) / f"{idle.name}-{variant}-{n}.out"
            spec = idle_spec(idle, [variant], seed, n, warmup, 0)
            cmd = [
                tool,
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                str(Path(__file__).resolve()),
                "--child",
                json.dumps(spec),
            ]
            started = time.perf_counter()
            done = subprocess.run(
                cmd, env=env, capture_output=True, text=True, timeout=3600, check=False
            )
            if done.returncode != 0:
                tail = "\n".join(done.stderr.splitlines()[-30:])
                raise RuntimeError(f"callgrind run failed ({done.returncode}):\n{tail}")
            return {
                "batches": n,
                "instructions": instructions.total_instructions(out.read_text()),
                "seconds": round(time.perf_counter() - started, 1),
            }

        jobs = [(v, n) for v in VARIANTS for n in (batches, SMALL_BATCHES)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            futures = {job: pool.submit(one, *job) for job in jobs}
            runs = {job: f.result() for job, f in futures.items()}
    per = {
        v: instructions.per_unit(
            runs[(v, batches)]["instructions"],
            runs[(v, SMALL_BATCHES)]["instructions"],
            batches,
            SMALL_BATCHES,
        )
        for v in VARIANTS
    }
    return {
        "per_batch": per,
        "ratio": per["on"] / per["off"],
        "runs": {f"{v}-{n}": r for (v, n), r in runs.items()},
        "hash_seed": "0",
    }


# -- the report --------------------------------------------------------------------------


def load_text(before: float | None, after: float | None) -> str:
    return f"{before:.2f}-{after:.2f}" if before is not None and after is not None else "-"


def print_storms(results: list[dict[str, Any]]) -> None:
    print(
        f"storm: a starved queue takes its guarantee (half the cluster) back from a full "
        f"cluster, preemption.delay {DELAY:g}s on the manual clock, every preemption "
        "confirmed at once; reached s: until the RM heard of the allocation that makes the "
        "guarantee; settled s: until the core was quiet; clock s: the manual clock's advance "
        "(the delay, and Timeouts.preempt_retry each time the core went quiet short of the "
        "guarantee); passes: scheduling passes; calls: "
        "callback calls with preemptions; load: 1-minute, before-after the case"
    )
    print(
        f"{'case':<10} {'build':<6} {'nodes':>5} {'asks':>6} {'met':>4} {'reached s':>9} "
        f"{'settled s':>9} {'clock s':>7} {'preempted':>9} {'passes':>6} {'calls':>5} "
        f"{'set-up s':>8} {'RSS MB':>7} {'load':>9}"
    )
    for r in results:
        reached = f"{r['reached_seconds']:.2f}" if r["reached_seconds"] is not None else "-"
        print(
            f"{r['case']:<10} {r['build']:<6} {r['nodes']:>5,} {r['asks']:>6,} "
            f"{'yes' if r['met'] else 'NO':>4} {reached:>9} {r['settled_seconds']:>9.2f} "
            f"{r['clock_seconds']:>7g} {r['preemptions']:>9,} {r['passes']:>6,} "
            f"{r['calls_with_preemptions']:>5,} {r['setup_seconds']:>8.1f} "
            f"{r['rss_bytes'] / 2**20:>7,.0f} {load_text(r['load_before'], r['load_after']):>9}"
        )


def print_idles(results: list[dict[str, Any]]) -> None:
    print(
        f"idle: release->refill of {RELEASES} allocations on bench_backlog's full cluster, "
        "preemption off and on (same guarantees), batches interleaved in one process; ms "
        "over every repeat's measured batches (p99: nearest rank); on/off: of the medians, "
        "of the p99s, and the median of the paired batches' ratios; RSS: the process, both "
        "clusters; load: 1-minute, before-after each repeat"
    )
    print(
        f"{'case':<10} {'build':<6} {'variant':<7} {'batches':>7} {'med ms':>7} "
        f"{'p99 ms':>7} {'max ms':>7} {'passes/b':>8} {'repeat medians':>20} {'RSS MB':>7}  load"
    )
    for r in results:
        for variant in VARIANTS:
            v = r["variants"][variant]
            medians = ",".join(f"{m:.3f}" for m in v["repeat_medians_ms"])
            loads = " ".join(load_text(a, b) for a, b in r["load"])
            print(
                f"{r['case']:<10} {r['build']:<6} {variant:<7} {r['batches']:>7} "
                f"{v['median_ms']:>7.3f} {v['p99_ms']:>7.3f} {v['max_ms']:>7.3f} "
                f"{v['passes_per_batch']:>8.2f} {medians:>20} "
                f"{r['rss_bytes'] / 2**20:>7,.0f}  {loads}"
            )
        repeats = ", ".join(f"{x:.3f}" for x in r["repeat_ratios"])
        line = (
            f"{r['case']:<10} on/off: median {r['ratio_median']:.3f}, p99 {r['ratio_p99']:.3f}, "
            f"paired {r['ratio_paired']:.3f} (per repeat {repeats})"
        )
        ins = r.get("instructions")
        if ins:
            line += (
                f"; instructions per batch off {ins['per_batch']['off']:,.0f}, on "
                f"{ins['per_batch']['on']:,.0f}: {ins['ratio']:.3f}"
            )
        print(line)


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", help=f"comma list of {', '.join(CASES)} (default: all)")
    parser.add_argument("--batches", type=int, help="idle: measured batches a repeat (400)")
    parser.add_argument("--warmup", type=int, help="idle: warm-up batches a repeat (5)")
    parser.add_argument("--repeat", type=int, help="idle: processes per case (3)")
    parser.add_argument("--seed", type=int, default=21, help="idle: the releases' RNG seed")
    parser.add_argument(
        "--instructions", action="store_true", help="idle: count instructions (callgrind) too"
    )
    add_arguments(parser)
    args = parser.parse_args()
    quick = args.quick
    batches = args.batches or (3 if quick else 400)
    warmup = args.warmup if args.warmup is not None else (1 if quick else 5)
    repeat = args.repeat or (1 if quick else 3)
    if batches <= SMALL_BATCHES and args.instructions and not quick:
        parser.error(f"--instructions needs --batches above {SMALL_BATCHES}")
    chosen = names(args.cases or ",".join(CASES), CASES, "case")
    storms = QUICK_STORMS if quick else STORMS
    idles = QUICK_IDLES if quick else IDLES
    run = Run("preemption", args)
    print(f"load average at the start: {run.machine['load_average_start']}", file=sys.stderr)
    steps = sum(1 for n in chosen if n in storms) + sum(
        repeat + (1 if args.instructions and idles[n].scenario == "met" else 0)
        for n in chosen
        if n in idles
    )
    progress = run.progress(steps)
    storm_results: list[dict[str, Any]] = []
    idle_results: list[dict[str, Any]] = []
    for name in chosen:
        if name in storms:
            storm = storms[name]
            with progress.step(f"{name}: {storm.nodes:,} nodes, {storm.asks:,} asks") as step:
                once = run_child(__file__, {"part": "storm", "storm": asdict(storm)}, name)
                step.result = (
                    f"{once['preemptions']:,} preemptions, settled {once['settled_seconds']:.2f}"
                    f" s, {once['rss_bytes'] / 2**20:,.0f} MB, load {once['load_after']}"
                )
            storm_results.append(once)
            continue
        idle = idles[name]
        repeats: list[dict[str, Any]] = []
        for i in range(repeat):
            label = f"{name}: off and on, {batches} batches, repeat {i + 1}/{repeat}"
            with progress.step(label) as step:
                spec = idle_spec(idle, list(VARIANTS), args.seed, batches, warmup, i % 2)
                once = run_child(__file__, spec, f"{name} repeat {i + 1}")
                v = once["variants"]
                step.result = (
                    f"median off {v['off']['median_ms']:.3f} ms, on {v['on']['median_ms']:.3f}"
                    f" ms, load {once['load_after']}"
                )
            repeats.append(once)
        summary = summarize_idle(idle, repeats)
        if args.instructions and idle.scenario == "met":
            n = max(batches, SMALL_BATCHES + 1)
            with progress.step(f"{name}: instructions (callgrind), {n} and 10 batches") as step:
                summary["instructions"] = instructions_per_batch(idle, n, warmup, args.seed)
                step.result = f"on/off {summary['instructions']['ratio']:.4f}"
        summary["repeat_figures"] = repeats
        idle_results.append(summary)
    if storm_results:
        print_storms(storm_results)
    if idle_results:
        print_idles(idle_results)
    print(
        f"load average (1, 5, 15 min): {run.machine['load_average_start']} at the start, "
        f"{load_average()} at the end"
    )
    for r in idle_results:
        if r["scenario"] != "met":
            continue
        run.target(
            f"ratio_median.{r['case']}",
            f"median release->refill on/off, {r['case']}",
            r["ratio_median"],
            at_most=TARGET_RATIO,
            fmt=".3f",
        )
        if "instructions" in r:
            run.target(
                f"ratio_instructions.{r['case']}",
                f"instructions per batch on/off, {r['case']}",
                r["instructions"]["ratio"],
                at_most=TARGET_RATIO,
                fmt=".4f",
            )
    return run.finish({"storms": storm_results, "idle": idle_results})


if __name__ == "__main__":
    sys.exit(main())
