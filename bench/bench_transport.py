"""Asks per second from an RM: in-process, and from another process over the native
transport and over gRPC.

The same RM work (register, ten applications, then asks of ``{memory: 10, vcore: 1}`` spread
over them, each its own ``allocation_key``, ``max_allocations`` 1) against the in-process
core and against a ``scheduler serve`` daemon that the script starts itself on a free port
(a subprocess, so the daemon and this process, the RM, share the machine's cores; its REST
API and its gRPC service on free ports too). The clock starts right
before the first request and stops when ``settle()`` returns; each run is then checked,
untimed: the queue's pending resource must hold every ask (``get_queue``), no ask or
application rejected, and a run that lost asks fails the script (exit 1, whatever the
targets). There are no nodes in these cases, so the core only ingests the asks: they are
checked, turned into events and queued under their application, and none is allocated.

    inproc-batched       the in-process core (``scheduler.start_scheduler()``), the asks
                         in requests of ``--batch`` asks, each call awaited
    inproc-single        the in-process core, one ask per request: what the core itself
                         costs per request, beside native-single
    native-batched       the same requests to the daemon over tcp://127.0.0.1
    native-batched-unix  the same over a Unix socket (a second daemon)
    native-single        one ask per ``AllocationRequest``, each call awaited before the
                         next is made: a naive RM, one round trip per ask
    native-pipelined     one ask per request, ``--window`` calls in flight at once
                         (``asyncio.gather``): what the protocol allows one ask at a time

Beside them, reported apart, the same with nodes (room for every ask), so the core also
allocates and the RM hears every allocation through its callback (over the wire for the
daemon) before ``settle()`` returns; the check is the queue's allocated resource and every
allocation received:

    inproc-alloc         the in-process core, batched
    native-alloc         the daemon over tcp, batched

and over gRPC, to the tcp daemon's gRPC service (``grpc://``, the SI ``Scheduler`` service
and its extension service):

    grpc-batched         the batched requests over gRPC
    grpc-pipelined       one ask per request over gRPC, ``--window`` calls in flight
    grpc-alloc           the same with nodes (reported apart, as above)

Each batched case first runs once untimed (the first run in a process is slower: its heap
grows; ``--no-warm-up`` skips it). Then the cases run interleaved: each repeat runs every
case once, in the opposite order to the repeat before, so a slow spell of the shared
machine hits all alike; the table shows the medians (and the best asks/s), the CPU each
process used during the run per ask, in microseconds (this one, the RM's, and the daemon's,
read from ``/proc``; the JSON has the seconds), and the 1-minute load average before and
after each run. Every run starts from
a new connection and registers the RM again (the daemon drops its state); the daemons live
for the whole script, their log goes to a file and must hold no traceback.
bench/results/transport.json keeps every run.

Targets: native-batched (tcp) >= 150,000 asks/s; grpc-batched >= 50,000 asks/s.
``--check`` exits 1 when one is missed.

    python bench/bench_transport.py [--asks 100000] [--batch 5000] [--single-asks 10000]
        [--window 200] [--alloc-asks 20000] [--nodes 200] [--cases a,b] [--repeat 3]
        [--quick] [--check] [--out FILE]

``--quick`` is 2,000 asks in batches of 500, 200 single asks, 200 allocated asks on 4
nodes, once. ``BENCH_TRANSPORT_RECORD=1`` makes the daemons record the SI traffic
(``scheduler serve --record``, beside their logs). ``BENCH_TRANSPORT_PROFILE=DIR``
profiles the native-batched runs with cProfile on both sides: the daemon runs under
``python -m cProfile`` (``DIR/daemon.prof``, written when it stops) and this process
profiles its native-batched runs (``DIR/client.prof``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import scheduler
import scheduler.client
from _common import Run, add_arguments, load_average
from scheduler import si
from scheduler.testing import DaemonProcess

TARGET_NATIVE_BATCHED = 150_000  # asks/s
TARGET_GRPC_BATCHED = 50_000  # asks/s
RM_ID = "rm-1"
PARTITION = "default"
QUEUE = "root.bench"
APPS = 10  # asks go to the applications in turn
ASK_MEMORY, ASK_VCORE = 10, 1
STEP_TIMEOUT = 600.0  # seconds for any one settle(); a stuck core fails the run instead
PROFILE_ENV = "BENCH_TRANSPORT_PROFILE"
RECORD_ENV = "BENCH_TRANSPORT_RECORD"

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: bench
"""


class BenchError(RuntimeError):
    """A run that lost asks, a rejection, a daemon that failed: the numbers would be wrong."""


@dataclass(frozen=True)
class Case:
    name: str
    where: str  # "inproc", "tcp", "unix" or "grpc" (the tcp daemon's gRPC service)
    per_call: str  # "batch" or "single"
    window: bool = False  # single asks, many calls in flight
    allocate: bool = False  # with nodes: the asks are allocated too


ALL_CASES = (
    Case("inproc-batched", "inproc", "batch"),
    Case("inproc-single", "inproc", "single"),
    Case("native-batched", "tcp", "batch"),
    Case("native-batched-unix", "unix", "batch"),
    Case("native-single", "tcp", "single"),
    Case("native-pipelined", "tcp", "single", window=True),
    Case("inproc-alloc", "inproc", "batch", allocate=True),
    Case("native-alloc", "tcp", "batch", allocate=True),
    Case("grpc-batched", "grpc", "batch"),
    Case("grpc-pipelined", "grpc", "single", window=True),
    Case("grpc-alloc", "grpc", "batch", allocate=True),
)
BY_NAME = {c.name: c for c in ALL_CASES}


@dataclass(frozen=True)
class Sizes:
    asks: int
    batch: int
    single_asks: int
    window: int
    alloc_asks: int
    nodes: int

    def asks_of(self, case: Case) -> int:
        if case.allocate:
            return self.alloc_asks
        return self.single_asks if case.per_call == "single" else self.asks

    def per_call(self, case: Case) -> int:
        return 1 if case.per_call == "single" else self.batch


class CountingRM(scheduler.ResourceManagerCallback):
    """Counts the allocations it hears of; keeps rejections (a run with one fails)."""

    def __init__(self) -> None:
        self.allocated = 0
        self.problems: list[str] = []

    async def update_allocation(self, response: si.AllocationResponse) -> None:
        self.allocated += len(response.new)
        for r in response.rejected[:3]:
            self.problems.append(f"ask {r.allocation_key} rejected: {r.reason}")
        for a in response.released_asks[:3]:
            self.problems.append(f"ask {a.allocation_key} released: {a.message}")

    async def update_application(self, response: si.ApplicationResponse) -> None:
        for r in response.rejected[:3]:
            self.problems.append(f"application {r.application_id} rejected: {r.reason}")


# ====================================================================== the daemons
class Daemon(DaemonProcess):
    """``scheduler.testing.DaemonProcess`` on ``native`` (port 0: a free one), logging
    warnings only, under cProfile when ``profile`` names its output."""

    def __init__(self, native: str, log: Path, profile: Path | None) -> None:
        prefix = ["-m", "cProfile", "-o", str(profile)] if profile is not None else []
        # BENCH_TRANSPORT_RECORD=1: the daemon records the SI traffic (serve --record),
        # beside its log; an environment variable, so an A/B against a base without
        # --record runs the base as it is.
        record = ["--record", str(log.with_suffix(".rec"))] if os.environ.get(RECORD_ENV) else []
        try:
            super().__init__(
                "--native",
                native,
                *record,
                "--log-level",
                "WARNING",
                log=log,
                python=prefix,
                start_timeout=60.0,
            )
        except RuntimeError as exc:
            raise BenchError(str(exc)) from None

    @property
    def address(self) -> str:
        return self.native

    def cpu_seconds(self) -> float | None:
        """CPU seconds the daemon used so far, all its threads (Linux ``/proc``: the
        scheduler's nanoseconds on a CPU, else user and system time in clock ticks)."""
        proc = Path(f"/proc/{self.proc.pid}")
        try:
            return (
                sum(
                    int((task / "schedstat").read_text().split()[0])
                    for task in (proc / "task").iterdir()
                )
                / 1e9
            )
        except (OSError, ValueError, IndexError):
            pass
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM; it must exit 0 within ``timeout`` and have logged no traceback."""
        try:
            code = super().stop(timeout)
        except RuntimeError as exc:
            raise BenchError(str(exc)) from None
        logged = self.log.read_text()
        if code != 0 or "Traceback" in logged:
            raise BenchError(f"the daemon on {self.address} exited with {code}:\n{logged}")
        return code


# ========================================================================= one run
def make_requests(size: int, per_call: int, run: int) -> list[si.AllocationRequest]:
    """``size`` asks in requests of ``per_call``; keys unique within the run."""
    resource = si.Resource.of(memory=ASK_MEMORY, vcore=ASK_VCORE)
    requests = []
    for start in range(0, size, per_call):
        asks = [
            si.AllocationAsk(
                allocation_key=f"r{run}-ask-{i}",
                application_id=f"app-{i % APPS}",
                partition_name=PARTITION,
                resource_ask=resource,
                max_allocations=1,
            )
            for i in range(start, min(start + per_call, size))
        ]
        requests.append(si.AllocationRequest(rm_id=RM_ID, asks=asks))
    return requests


async def set_up(core: Any, rm: CountingRM, nodes: int, room: int) -> None:
    """Register (the daemon drops what an earlier run left), nodes if any, the apps."""
    await core.register_resource_manager(
        si.RegisterResourceManagerRequest(
            rm_id=RM_ID, policy_group="default", version="1", config=QUEUES
        ),
        rm,
    )
    if nodes:
        node_res = si.Resource.of(memory=ASK_MEMORY * room, vcore=ASK_VCORE * room)
        await core.update_node(
            si.NodeRequest(
                rm_id=RM_ID,
                nodes=[
                    si.NodeInfo(
                        node_id=f"node-{i:05d}",
                        action=si.ActionFromRM.CREATE,
                        schedulable_resource=node_res,
                    )
                    for i in range(nodes)
                ],
            )
        )
    await core.update_application(
        si.ApplicationRequest(
            rm_id=RM_ID,
            new=[
                si.AddApplicationRequest(
                    application_id=f"app-{i}",
                    queue_name=QUEUE,
                    partition_name=PARTITION,
                    ugi=si.UserGroupInformation(user="u"),
                )
                for i in range(APPS)
            ],
        )
    )
    await asyncio.wait_for(core.settle(), STEP_TIMEOUT)


async def send(core: Any, case: Case, requests: list[si.AllocationRequest], window: int) -> None:
    if not case.window:
        for request in requests:
            await core.update_allocation(request)
        return
    for at in range(0, len(requests), window):
        await asyncio.gather(*(core.update_allocation(r) for r in requests[at : at + window]))


async def check(core: Any, rm: CountingRM, case: Case, asks: int) -> None:
    """Untimed: every ask in the core (pending, or allocated and heard of by the RM)."""
    problems = list(rm.problems[:5])
    queue = await core.get_queue(PARTITION, QUEUE)
    key = "allocatedResource" if case.allocate else "pendingResource"
    held = dict(queue.get(key) or {})
    want = {"memory": asks * ASK_MEMORY, "vcore": asks * ASK_VCORE}
    if {k: held.get(k, 0) for k in want} != want:
        problems.append(f"{QUEUE} {key} is {held}, expected {want} ({asks:,} asks)")
    if case.allocate and rm.allocated != asks:
        problems.append(f"the RM heard of {rm.allocated:,} allocations, expected {asks:,}")
    if problems:
        raise BenchError(f"{case.name}: " + "; ".join(problems))


@dataclass
class Env:
    sizes: Sizes
    daemons: dict[str, Daemon]
    profile: cProfile.Profile | None = None


def _daemon_of(case: Case) -> str:
    """Which daemon a case talks to: gRPC cases use the tcp daemon's gRPC service."""
    return "tcp" if case.where == "grpc" else case.where


async def run_case(case: Case, env: Env, run: int) -> dict[str, float]:
    """One run of a case: its figures. Raises BenchError on a wrong end state."""
    sizes = env.sizes
    asks = sizes.asks_of(case)
    requests = make_requests(asks, sizes.per_call(case), run)
    nodes = sizes.nodes if case.allocate else 0
    room = -(-asks // nodes) if nodes else 0
    rm = CountingRM()
    daemon = env.daemons.get(_daemon_of(case))
    opened: Callable[[], contextlib.AbstractAsyncContextManager[Any]]
    if daemon is None:
        opened = scheduler.start_scheduler
    else:
        address = daemon.grpc if case.where == "grpc" else daemon.address

        def opened() -> contextlib.AbstractAsyncContextManager[Any]:
            return scheduler.client.connect(address)

    async with opened() as core:
        await set_up(core, rm, nodes, room)
        profile = env.profile if case.name == "native-batched" else None
        gc.collect()  # the set-up's garbage, outside the timed part
        daemon_before = daemon.cpu_seconds() if daemon is not None else None
        cpu_before = time.process_time()
        if profile is not None:
            profile.enable()
        start = time.perf_counter()
        await send(core, case, requests, sizes.window)
        await asyncio.wait_for(core.settle(), STEP_TIMEOUT)
        seconds = time.perf_counter() - start
        if profile is not None:
            profile.disable()
        cpu = time.process_time() - cpu_before
        daemon_after = daemon.cpu_seconds() if daemon is not None else None
        await check(core, rm, case, asks)
    daemon_cpu = (
        daemon_after - daemon_before
        if daemon_after is not None and daemon_before is not None
        else -1.0
    )
    return {
        "asks": asks,
        "calls": len(requests),
        "seconds": seconds,
        "asks_per_s": asks / seconds,
        "client_cpu_s": cpu,
        "daemon_cpu_s": daemon_cpu,
    }


# ========================================================================= the run
def orders(cases: list[Case], repeat: int) -> Iterator[tuple[int, Case]]:
    """(repeat, case) in run order: each repeat every case, the order flipped each time."""
    for r in range(repeat):
        for case in cases if r % 2 == 0 else list(reversed(cases)):
            yield r, case


def summarise(case: Case, sizes: Sizes, runs: list[dict[str, float]]) -> dict[str, Any]:
    loads = [x for r in runs for x in (r["load_before"], r["load_after"]) if x >= 0]
    daemon = [r["daemon_cpu_s"] for r in runs if r["daemon_cpu_s"] >= 0]
    return {
        "case": case.name,
        "variant": "allocate" if case.allocate else "ingest",
        "transport": case.where,
        "asks": sizes.asks_of(case),
        "asks_per_call": sizes.per_call(case),
        "in_flight": sizes.window if case.window else 1,
        "asks_per_s": statistics.median(r["asks_per_s"] for r in runs),
        "asks_per_s_best": max(r["asks_per_s"] for r in runs),
        "seconds": statistics.median(r["seconds"] for r in runs),
        "client_cpu_s": statistics.median(r["client_cpu_s"] for r in runs),
        "daemon_cpu_s": statistics.median(daemon) if daemon else None,
        "load_min": min(loads) if loads else None,
        "load_max": max(loads) if loads else None,
        # no *_per_s key in the runs: bench/ab.py compares the medians only
        "runs": [{k: v for k, v in r.items() if not k.endswith("_per_s")} for r in runs],
    }


def print_table(results: list[dict[str, Any]], repeat: int, load: list[float] | None) -> None:
    shown = f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}" if load else "unknown"
    print(
        f"median of {repeat}, interleaved; CPU: microseconds of CPU per ask in this process "
        f"(the RM; all of it in-process) and in the daemon during the run; load: 1-minute, "
        f"lowest-highest (at the start: {shown}; {os.cpu_count()} CPUs)"
    )
    print(
        f"{'case':<20} {'asks':>8} {'per call':>8} {'in flight':>9} {'asks/s':>9} "
        f"{'best':>9} {'seconds':>8} {'RM CPU':>8} {'daemon CPU':>10} {'load':>11}"
    )
    for variant, title in (("ingest", "no nodes: the core ingests"), ("allocate", "with nodes")):
        rows = [r for r in results if r["variant"] == variant]
        if not rows:
            continue
        print(f"-- {title}")
        for res in rows:
            load_range = (
                f"{res['load_min']:.2f}-{res['load_max']:.2f}"
                if res["load_min"] is not None
                else "-"
            )
            per_ask = 1e6 / res["asks"]  # CPU seconds of the run to microseconds per ask
            daemon = (
                f"{res['daemon_cpu_s'] * per_ask:.2f}" if res["daemon_cpu_s"] is not None else "-"
            )
            print(
                f"{res['case']:<20} {res['asks']:>8,} {res['asks_per_call']:>8,} "
                f"{res['in_flight']:>9,} {res['asks_per_s']:>9,.0f} "
                f"{res['asks_per_s_best']:>9,.0f} {res['seconds']:>8.3f} "
                f"{res['client_cpu_s'] * per_ask:>8.2f} {daemon:>10} {load_range:>11}"
            )


def parse_cases(text: str | None, parser: argparse.ArgumentParser) -> list[Case]:
    if not text:
        return list(ALL_CASES)
    cases = []
    for name in text.split(","):
        if name not in BY_NAME:
            parser.error(f"unknown case {name}; known: {', '.join(BY_NAME)}")
        cases.append(BY_NAME[name])
    return cases


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--asks", type=int, help="asks of a batched case (100,000)")
    parser.add_argument("--batch", type=int, help="asks per request when batched (5,000)")
    parser.add_argument("--single-asks", type=int, help="asks of a one-per-call case (10,000)")
    parser.add_argument(
        "--window", type=int, help="calls in flight, native- and grpc-pipelined (200)"
    )
    parser.add_argument("--alloc-asks", type=int, help="asks of the cases with nodes (20,000)")
    parser.add_argument("--nodes", type=int, help="nodes of the cases with nodes (200)")
    parser.add_argument("--cases", help=f"a comma-separated subset of: {', '.join(BY_NAME)}")
    parser.add_argument("--repeat", type=int, help="runs of each case (3; 1 with --quick)")
    parser.add_argument(
        "--no-warm-up",
        dest="warm_up",
        action="store_false",
        help="no untimed first run of each batched case (there is none with --quick)",
    )
    add_arguments(parser)
    args = parser.parse_args()
    cases = parse_cases(args.cases, parser)
    quick = args.quick
    args.warm_up = args.warm_up and not quick
    sizes = Sizes(
        asks=args.asks or (2_000 if quick else 100_000),
        batch=args.batch or (500 if quick else 5_000),
        single_asks=args.single_asks or (200 if quick else 10_000),
        window=args.window or (50 if quick else 200),
        alloc_asks=args.alloc_asks or (200 if quick else 20_000),
        nodes=args.nodes or (4 if quick else 200),
    )
    for name in ("asks", "batch", "single_asks", "window", "alloc_asks", "nodes"):
        if getattr(sizes, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    repeat = args.repeat or (1 if quick else 3)
    run = Run("transport", args)
    profile_dir = Path(os.environ[PROFILE_ENV]) if os.environ.get(PROFILE_ENV) else None
    if profile_dir is not None:
        profile_dir.mkdir(parents=True, exist_ok=True)
    wanted = {_daemon_of(c) for c in cases} - {"inproc"}
    daemons: dict[str, Daemon] = {}
    env = Env(sizes, daemons, cProfile.Profile() if profile_dir else None)
    with tempfile.TemporaryDirectory(prefix="bench-transport-") as tmp:
        try:
            for where in sorted(wanted):
                native = "tcp://127.0.0.1:0" if where == "tcp" else f"unix://{tmp}/native.sock"
                prof = profile_dir / "daemon.prof" if profile_dir and where == "tcp" else None
                daemons[where] = Daemon(native, Path(tmp) / f"daemon-{where}.log", prof)
            warm = [c for c in cases if c.per_call == "batch"] if args.warm_up else []
            progress = run.progress(len(warm) + repeat * len(cases))
            for n, case in enumerate(warm):
                with progress.step(f"{case.name}, warm-up (not counted)") as step:
                    figures = await run_case(case, env, -1 - n)
                    step.result = f"{figures['asks_per_s']:,.0f} asks/s"
            runs: dict[str, list[dict[str, float]]] = {}
            for n, (r, case) in enumerate(orders(cases, repeat)):
                with progress.step(f"{case.name}, repeat {r + 1}/{repeat}") as step:
                    before = load_average()
                    figures = await run_case(case, env, n)
                    after = load_average()
                    step.result = f"{figures['asks_per_s']:,.0f} asks/s"
                figures["load_before"] = before[0] if before else -1.0
                figures["load_after"] = after[0] if after else -1.0
                runs.setdefault(case.name, []).append(figures)
        finally:
            errors = []
            for daemon in daemons.values():
                try:
                    daemon.stop()
                except BenchError as exc:
                    errors.append(str(exc))
            if errors:
                raise BenchError("; ".join(errors))
    if profile_dir is not None and env.profile is not None:
        env.profile.dump_stats(profile_dir / "client.prof")
        print(f"profiles in {profile_dir}", file=sys.stderr)
    results = [summarise(c, sizes, runs[c.name]) for c in cases]
    print_table(results, repeat, run.machine["load_average_start"])
    by = {r["case"]: r for r in results}
    if "native-batched" in by:
        run.target(
            "native_batched_asks_per_s",
            "native-batched asks/s (tcp)",
            by["native-batched"]["asks_per_s"],
            at_least=TARGET_NATIVE_BATCHED,
        )
    if "grpc-batched" in by:
        run.target(
            "grpc_batched_asks_per_s",
            "grpc-batched asks/s",
            by["grpc-batched"]["asks_per_s"],
            at_least=TARGET_GRPC_BATCHED,
        )
    return run.finish(
        {
            "asks": sizes.asks,
            "batch": sizes.batch,
            "single_asks": sizes.single_asks,
            "window": sizes.window,
            "alloc_asks": sizes.alloc_asks,
            "nodes": sizes.nodes,
            "repeat": repeat,
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
