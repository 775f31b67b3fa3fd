"""Where the time of a ``bench_scheduling`` case goes, by category, from a sampling profile.

A thread samples the event loop thread's Python stack every ``--interval`` seconds while the
timed part of the case runs (the asks going in until the RM has every allocation). Each
sample goes to the category of the innermost frame that names one (``CATEGORIES``): a
helper with no category of its own (resource arithmetic, say) counts for its caller, and a
sample taken while the cyclic garbage collector runs counts as ``garbage collector``. The
table shows each category's share and its time per allocation (the share of the run's
wall-clock time per allocation). Unlike cProfile it does not inflate code that makes many
small calls, but it has a bias of its own: the loop thread lets the sampler in only where it
checks for a thread switch (calls into Python functions, loop back-edges), so a sample
after a long C call (a clock read, a big sort) lands on the Python code right after it.
Read the shares as a map of where to look, and confirm a change by its instruction count
(``valgrind --tool=callgrind``) or an interleaved A/B (``bench/ab.py``).

    python bench/profile_scheduling.py [--case 10k-asks] [--sizing headroom] [--repeat 3]
        [--interval 0.0005] [--gc tuned|default] [--functions N] [--quick] [--out FILE]

``--functions N`` also lists the N innermost project functions the samples fell in most.

The samples of ``--repeat`` runs (each in this process, one after the other) are added up.
Writes bench/results/profile.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import scheduler
from _common import Run, add_arguments
from bench_scheduling import CASES, QUICK_CASES, SIZINGS, run_case

SRC = Path(scheduler.__file__).resolve().parent.parent

# (module path under src/, function name or "*", category), innermost frame first wins.
# Function entries come before their module's "*" entry.
CATEGORIES: list[tuple[str, str, str]] = [
    # the RM's requests coming in: checks, asks to the application, pending totals
    ("scheduler/core/_proxy.py", "*", "ingest (proxy checks)"),
    ("scheduler/core/_app_actor.py", "update_asks", "ingest (asks to applications)"),
    ("scheduler/core/_app_actor.py", "_update_ask", "ingest (asks to applications)"),
    ("scheduler/objects/_application.py", "add_ask", "ingest (asks to applications)"),
    ("scheduler/objects/_application.py", "add_asks", "ingest (asks to applications)"),
    ("scheduler/objects/_application.py", "_add_fresh", "ingest (asks to applications)"),
    ("scheduler/objects/_application.py", "extend", "ingest (asks to applications)"),
    ("scheduler/objects/_application.py", "append", "ingest (asks to applications)"),
    ("scheduler/objects/_application.py", "apply_pending", "ingest (asks to applications)"),
    ("scheduler/objects/_queue.py", "add_pending", "ingest (asks to applications)"),
    ("scheduler/core/_events.py", "*", "ingest (proxy checks)"),
    # the pass: which ask next, which node
    ("scheduler/objects/_nodes.py", "first_fit", "node choice"),
    ("scheduler/objects/_nodes.py", "update", "node choice"),
    ("scheduler/objects/_nodes.py", "_key", "node choice"),
    ("scheduler/objects/_nodes.py", "_push", "node choice"),
    ("scheduler/objects/_queue.py", "allocate", "commit"),
    ("scheduler/objects/_queue.py", "*", "queue and application order"),
    ("scheduler/objects/_priority.py", "*", "queue and application order"),
    ("scheduler/core/_pass.py", "commit", "commit"),
    ("scheduler/core/_pass.py", "*", "proposal (walk and checks)"),
    ("scheduler/objects/_application.py", "in_order", "proposal (walk and checks)"),
    ("scheduler/objects/_application.py", "*", "commit"),
    ("scheduler/objects/_nodes.py", "*", "commit"),
    ("scheduler/objects/_asks.py", "*", "commit"),
    ("scheduler/objects/_reservations.py", "*", "commit"),
    ("scheduler/objects/_ugm.py", "*", "commit"),
    # what goes back to the RM
    ("scheduler/objects/_outbox.py", "*", "output to the RM"),
    ("scheduler/core/_callback_actor.py", "*", "output to the RM"),
    ("scheduler/si.py", "*", "output to the RM"),
    ("bench_scheduling.py", "update_allocation", "output to the RM"),
    # the rest of the partition's turn (outstanding requests, timers, wake-ups)
    ("scheduler/core/_partition_actor.py", "*", "partition actor (turn bookkeeping)"),
    ("scheduler/core/_node_flows.py", "*", "partition actor (turn bookkeeping)"),
    ("scheduler/core/_outstanding.py", "*", "partition actor (turn bookkeeping)"),
    ("scheduler/objects/_partition.py", "*", "partition actor (turn bookkeeping)"),
    ("scheduler/core/_partition.py", "*", "partition actor (turn bookkeeping)"),
    ("scheduler/", "*", "other scheduler code"),
    ("actors/", "*", "actor runtime (mailboxes, turns)"),
]
# Helpers that count for their caller.
PASS_THROUGH = ("scheduler/objects/_resources.py", "scheduler/config/_quantity.py")
OTHER = "event loop and the rest"
GC = "garbage collector"


def category(frame: FrameType | None) -> str:
    while frame is not None:
        code = frame.f_code
        path = code.co_filename.replace("\\", "/")
        name = code.co_name
        if path.endswith(PASS_THROUGH):
            frame = frame.f_back
            continue
        for where, function, label in CATEGORIES:
            if where in path and (function == "*" or function == name):
                return label
        frame = frame.f_back
    return OTHER


def innermost(frame: FrameType | None) -> str:
    """The innermost frame in the project's code, as ``module:function``."""
    while frame is not None:
        path = frame.f_code.co_filename.replace("\\", "/")
        if "/scheduler/" in path or "/actors/" in path:
            module = path.rsplit("/", 2)
            return f"{module[-2]}/{module[-1]}:{frame.f_code.co_qualname}"
        frame = frame.f_back
    return OTHER


class Sampler:
    """Samples one thread's stack from another thread into ``counts`` while active."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.counts: Counter[str] = Counter()
        self.functions: Counter[str] = Counter()  # innermost project function
        self.seconds = 0.0
        self._in_gc = False
        self._stop = threading.Event()

    def _gc_phase(self, phase: str, info: dict[str, Any]) -> None:
        self._in_gc = phase == "start"

    @contextlib.contextmanager
    def sampling(self) -> Iterator[None]:
        target = threading.get_ident()
        self._stop.clear()
        switch = sys.getswitchinterval()
        sys.setswitchinterval(self.interval)  # the loop thread lets the sampler in this often

        def sample() -> None:
            frames = sys._current_frames
            while not self._stop.wait(self.interval):
                if self._in_gc:
                    self.counts[GC] += 1
                else:
                    frame = frames().get(target)
                    self.counts[category(frame)] += 1
                    self.functions[innermost(frame)] += 1

        thread = threading.Thread(target=sample, name="sampler", daemon=True)
        gc.callbacks.append(self._gc_phase)
        started = time.perf_counter()
        thread.start()
        try:
            yield
        finally:
            self._stop.set()
            thread.join(timeout=5)
            self.seconds += time.perf_counter() - started
            gc.callbacks.remove(self._gc_phase)
            sys.setswitchinterval(switch)


def report(sampler: Sampler, allocations: int, functions: int) -> list[dict[str, Any]]:
    total = sum(sampler.counts.values()) or 1
    per_alloc_us = sampler.seconds / allocations * 1e6
    rows = [
        {
            "category": label,
            "samples": n,
            "share": n / total,
            "us_per_alloc": n / total * per_alloc_us,
        }
        for label, n in sampler.counts.most_common()
    ]
    print(f"{total:,} samples; {per_alloc_us:.1f} us per allocation in all")
    print(f"{'category':<38} {'share':>6} {'us/alloc':>8}")
    for row in rows:
        print(f"{row['category']:<38} {row['share']:>6.1%} {row['us_per_alloc']:>8.2f}")
    if functions:
        print(f"\n{'innermost function':<60} {'share':>6}")
        for name, n in sampler.functions.most_common(functions):
            print(f"{name:<60} {n / total:>6.1%}")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--case", default="10k-asks", choices=list(CASES))
    parser.add_argument("--sizing", default="headroom", choices=SIZINGS)
    parser.add_argument("--gc", default="tuned", choices=("tuned", "default"))
    parser.add_argument("--repeat", type=int)
    parser.add_argument("--functions", type=int, default=0, help="also the top N functions")
    parser.add_argument("--interval", type=float, default=0.0005, help="seconds between samples")
    add_arguments(parser)
    args = parser.parse_args()
    if args.interval <= 0:
        parser.error("--interval must be a positive number of seconds")
    from loguru import logger

    logger.remove()
    if args.gc == "tuned":
        scheduler.tune_gc()
    case = (QUICK_CASES if args.quick else CASES)[args.case]
    repeat = args.repeat or (1 if args.quick else 3)
    run = Run("profile", args)
    progress = run.progress(repeat)
    sampler = Sampler(args.interval)
    for r in range(repeat):
        with progress.step(f"{case.name} ({args.sizing}), repeat {r + 1}/{repeat}") as step:
            figures = asyncio.run(run_case(case, args.sizing, sampler.sampling))
            step.result = f"{figures['allocs_per_s']:,.0f} allocs/s while sampled"
    rows = report(sampler, case.asks * repeat, args.functions)
    return run.finish({"case": case.name, "sizing": args.sizing, "gc": args.gc, "categories": rows})


if __name__ == "__main__":
    sys.exit(main())
