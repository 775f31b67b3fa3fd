"""Instructions per allocation, counted by valgrind's callgrind: an A/B the neighbours of a
shared machine do not move (wall-clock figures here move by up to a third from one hour to
the next; an instruction count moves by a fraction of a percent).

    python bench/instructions.py [--cases 10k-asks,gang] [--repeat 3] [--base COMMIT]
        [--jobs 1] [--hash-seed 0] [--keep DIR] [--quick] [--out FILE]

Each case runs one of the other bench scripts in a fresh process under
``valgrind --tool=callgrind --callgrind-out-file=FILE`` (collection on from the start, so the
whole process is counted) twice: at its full size and at a tiny size of the same set-up.
The total instructions of the tiny run (``totals:`` of its callgrind file, the Ir event)
are taken from the full run's and the rest divided by the difference in units, so the
interpreter's start, the imports, the nodes, queues and applications of the set-up fall
out and what is left is the cost of one more unit:

    10k-asks   bench_scheduling.py --child: the 10k-asks case, headroom sizing, collector
               tuned; 5,000 nodes, 2 queues, 2 applications, 10,000 asks less a run of 100.
               Unit: an allocation.
    gang       bench_gang.py --once: 1,000 nodes, 200 Soft gangs of 50 placeholders less a
               run of 2 gangs of 50. Unit: a gang member, i.e. one replaced placeholder: its
               placeholder allocated, then the real ask's PLACEHOLDER_REPLACED release, the
               RM's confirmation and the real allocation (two allocations and a handshake;
               a fiftieth of its gang's application comes with it).

``--quick`` shrinks them (10k-asks: 20 nodes, 1,000 less 100 asks; gang: 20 nodes, 10 less
2 gangs of 5), to prove the script runs; a measurement still takes 15-25 s, most of it the
interpreter's start and imports under valgrind. A full measurement (the two runs of one
case, one after the other) takes about 35-40 s for 10k-asks and 45 s for gang on a quiet
machine; ``--jobs 2`` runs the full and the tiny run side by side (about 21 s and 30-40 s;
counts do not depend on the machine's load).

``--base COMMIT`` checks the commit out into a temporary ``git worktree`` (``ab.checkout``)
and measures it too, interleaved with the working tree, each repeat in the other order; the
table then has the base's and the working tree's instructions per unit and the change. Both
sides run the *working tree's* bench scripts, with the measured side's ``src`` first on
``PYTHONPATH``: the base may predate this script and the flags it uses (``bench_gang.py
--once``), and the scripts use only the public API (``scheduler``, ``scheduler.si``,
``scheduler.testing``, and the package's files to tell the pure build from the compiled
one), so they run against either, before the move of the modules into rooms or after it.
The working tree's ``src`` is measured from a copy made at the start (as a fresh
checkout has it, see below), at a path as long as the base's. Each side checks that
``scheduler`` is imported from its own ``src``. Both sides run on this interpreter (the pure
build: ``src`` shadows an installed compiled one).

Noise: under one set-up the count hardly moves (two runs agree within 0.03%, the rest being
the clock and the event loop's timing), but it moves with the process's memory layout,
which anything at start-up shifts. The same code (c947737, 10k-asks) counted 110,699
instructions per allocation in a fresh checkout, 110,785 in the working tree itself (whose
``src`` also holds the egg-info of ``pip install -e``), 111,157 through a symlink to it,
and 110,600 to 110,886 with random hash seeds. Hence:

* each repeat runs with a hash seed of its own, the same on both sides (``--hash-seed
  FIRST``, default 0: the repeats run with 0, 1, 2, ...; ``random`` leaves it to Python),
  which lays every dict and set of strings out anew and so samples that noise; the table
  has each side's median and spread;
* both sides run from fresh directories of equal path length (the copy of the working
  tree's ``src`` leaves out ``*.egg-info``, ``__pycache__`` and built extensions);
* with ``--base`` the change is the median of the repeats' own changes, each between the
  two sides' runs of one seed, which is far steadier than either side: an A/A of c947737
  gave 0.00% with seeds 0, 1 and 2 (110,699/110,699, 110,688/110,689, 111,115/111,115)
  while each side spread over 0.4%. A real change moves the layout too, so its repeats
  differ; read a change whose repeats disagree in sign as no change.

``--keep DIR`` keeps the callgrind files (for ``callgrind_annotate``).

Progress goes to stderr; the table (median per side, and the spread over ``--repeat``) to
stdout; the JSON, with every run's totals and the commits measured, to
bench/results/instructions.json (instructions-quick.json with ``--quick``). valgrind must be
installed (``apt-get install -y valgrind``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _common import Run, add_arguments
from ab import checkout

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RUN_TIMEOUT = 1800  # seconds for one run under valgrind (about 50x slower than without)

VALGRIND_MISSING = (
    "valgrind not found on PATH: bench/instructions.py counts instructions with valgrind's "
    "callgrind. Install it: apt-get update && apt-get install -y valgrind (as root; "
    "brew install valgrind has no callgrind on Apple silicon)"
)


@dataclass(frozen=True)
class Size:
    """One run of a case: how many units it does, and the bench script's arguments."""

    units: int
    args: tuple[str, ...]


@dataclass(frozen=True)
class Case:
    name: str
    script: str  # a bench/ script that prints the run's figures as JSON on its last line
    unit: str  # what one unit of the difference is
    count_key: str  # the key of the script's JSON that says how many units it did
    full: Size
    small: Size


def scheduling_size(nodes: int, asks: int) -> Size:
    spec = {
        "case": {"name": "10k-asks", "nodes": nodes, "asks": asks},
        "sizing": "headroom",
        "gc": "tuned",
    }
    return Size(asks, ("--child", json.dumps(spec)))


def gang_size(nodes: int, apps: int, per_app: int) -> Size:
    args = ("--once", "--nodes", str(nodes), "--apps", str(apps), "--per-app", str(per_app))
    return Size(apps * per_app, args)


def cases(quick: bool) -> dict[str, Case]:
    nodes, asks, few = (20, 1_000, 100) if quick else (5_000, 10_000, 100)
    g_nodes, g_apps, g_few, g_per_app = (20, 10, 2, 5) if quick else (1_000, 200, 2, 50)
    return {
        "10k-asks": Case(
            "10k-asks",
            "bench_scheduling.py",
            "allocation",
            "asks",
            scheduling_size(nodes, asks),
            scheduling_size(nodes, few),
        ),
        "gang": Case(
            "gang",
            "bench_gang.py",
            "gang member (placeholder placed and replaced)",
            "placeholders",
            gang_size(g_nodes, g_apps, g_per_app),
            gang_size(g_nodes, g_few, g_per_app),
        ),
    }


# -- the arithmetic ----------------------------------------------------------------------

_FIELD = re.compile(r"^(events|summary|totals):\s*(.*?)\s*$", re.MULTILINE)


def total_instructions(text: str) -> int:
    """The Ir total of a callgrind output file: its ``totals:`` line (``summary:`` when there
    is none), the column of ``Ir`` in its ``events:`` line."""
    fields: dict[str, str] = {}
    for match in _FIELD.finditer(text):
        fields.setdefault(match.group(1), match.group(2))
    line = fields.get("totals", fields.get("summary"))
    if line is None:
        raise ValueError("no totals: or summary: line in the callgrind output")
    events = fields.get("events", "Ir").split()
    if "Ir" not in events:
        raise ValueError(f"no Ir among the events {events}")
    values = line.split()
    return int(values[events.index("Ir")])


def per_unit(full_ir: int, small_ir: int, full_units: int, small_units: int) -> float:
    """Instructions of one more unit: the difference of the totals over that of the units."""
    if full_units <= small_units:
        raise ValueError(f"the full run ({full_units}) must do more than the small ({small_units})")
    return (full_ir - small_ir) / (full_units - small_units)


def change_percent(base: float, working: float) -> float:
    """The working tree's figure against the base's, in percent (negative: fewer)."""
    return (working - base) / base * 100.0


def paired_changes(base: Sequence[float], working: Sequence[float]) -> list[float]:
    """The change of each repeat, in percent: its working run against its base run (the
    same hash seed, so the same draw of the layout noise)."""
    if len(base) != len(working):
        raise ValueError(f"{len(base)} base runs and {len(working)} working runs")
    return [change_percent(a, b) for a, b in zip(base, working, strict=True)]


# -- running -----------------------------------------------------------------------------


def valgrind() -> str:
    """The path of valgrind; a clear error naming the fix without it."""
    path = shutil.which("valgrind")
    if path is None:
        raise SystemExit(VALGRIND_MISSING)
    return path


def hash_seed(first: str, repeat: int) -> str | None:
    """The ``PYTHONHASHSEED`` of a repeat: ``first`` + the repeat's index; None: random."""
    return None if first == "random" else str(int(first) + repeat)


def side_env(tree: Path, seed: str | None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    env.pop("BENCH_GANG_SMALL", None)
    env.pop("BENCH_REPEAT", None)
    if seed is None:
        env.pop("PYTHONHASHSEED", None)
    else:
        env["PYTHONHASHSEED"] = seed
    return env


def copy_src(tree: Path, into: Path) -> Path:
    """Copy ``tree``'s ``src`` to ``into``/src as a fresh checkout has it (no
    ``*.egg-info``, ``__pycache__`` or built extensions) and return ``into``.

    The count moves with what the import system sees (see "Noise" above): the working tree's
    ``src`` measured 0.08% more than a fresh checkout of the same commit, and so did a copy
    of it with its egg-info, against 0.01% for a copy without."""
    shutil.copytree(
        tree / "src",
        into / "src",
        ignore=shutil.ignore_patterns("*.egg-info", "__pycache__", "*.so", "*.pyd"),
    )
    return into


def check_import(tree: Path, env: dict[str, str]) -> str:
    """Where ``scheduler`` comes from with ``env``; it must be ``tree``'s ``src``."""
    done = subprocess.run(
        [sys.executable, "-c", "import scheduler; print(scheduler.__file__)"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    where = done.stdout.strip()
    if done.returncode != 0 or not Path(where).resolve().is_relative_to(tree.resolve() / "src"):
        raise SystemExit(
            f"scheduler is not imported from {tree / 'src'} (got {where or done.stderr.strip()})"
        )
    return where


def measure_run(
    tool: str, case: Case, size: Size, env: dict[str, str], out: Path
) -> dict[str, Any]:
    """One run under callgrind: its Ir total, the script's figures, its wall time."""
    cmd = [
        tool,
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        sys.executable,
        str(BENCH / case.script),
        *size.args,
    ]
    started = time.perf_counter()
    done = subprocess.run(
        cmd, cwd=BENCH, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        tail = "\n".join(done.stderr.splitlines()[-30:])
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}\n{tail}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if figures.get(case.count_key) != size.units:
        raise RuntimeError(
            f"{case.name}: the run reports {case.count_key}={figures.get(case.count_key)}, "
            f"expected {size.units}"
        )
    return {
        "units": size.units,
        "instructions": total_instructions(out.read_text()),
        "seconds": round(seconds, 2),
        "build": figures.get("build"),
        "command": cmd,
    }


def measure(
    tool: str, case: Case, env: dict[str, str], out_dir: Path, tag: str, jobs: int
) -> dict[str, Any]:
    """The full and the small run of a case (side by side with ``jobs`` 2), and the
    instructions per unit."""
    sizes = {"full": case.full, "small": case.small}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {
            name: pool.submit(
                measure_run, tool, case, size, env, out_dir / f"{tag}-{case.name}-{name}.out"
            )
            for name, size in sizes.items()
        }
        runs = {name: future.result() for name, future in futures.items()}
    full, small = runs["full"], runs["small"]
    return {
        "per_unit": per_unit(
            full["instructions"], small["instructions"], full["units"], small["units"]
        ),
        "full": full,
        "small": small,
    }


def names(value: str, known: Sequence[str]) -> list[str]:
    chosen = [x.strip() for x in value.split(",") if x.strip()]
    unknown = [x for x in chosen if x not in known]
    if unknown or not chosen:
        raise SystemExit(f"unknown case {', '.join(unknown)}; known: {', '.join(known)}")
    return chosen


def resolve(commit: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{commit}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"--base {commit}: not a commit ({done.stderr.strip()})")
    return done.stdout.strip()


def valgrind_version(tool: str) -> str:
    done = subprocess.run([tool, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


# -- the report --------------------------------------------------------------------------


def summary(per: list[float]) -> dict[str, float]:
    return {"median": statistics.median(per), "min": min(per), "max": max(per)}


def spread(per: list[float]) -> str:
    if len(per) < 2:
        return "-"
    return f"{min(per):,.0f}-{max(per):,.0f}"


def print_table(results: list[dict[str, Any]], base: str | None) -> None:
    repeat = len(results[0]["sides"]["working"]["runs"])
    print(f"instructions per unit (callgrind Ir), median of {repeat}; spread: lowest-highest")
    if base is None:
        print(f"{'case':<9} {'instr/unit':>11} {'spread':>17}  unit")
        for res in results:
            per = [r["per_unit"] for r in res["sides"]["working"]["runs"]]
            print(
                f"{res['case']:<9} {statistics.median(per):>11,.0f} {spread(per):>17}  "
                f"{res['unit']}"
            )
        return
    print(
        f"base = {base}, working = this tree; change: the median of the repeats' changes "
        "(each between runs of one hash seed), their range beside it"
    )
    print(
        f"{'case':<9} {'base':>11} {'working':>11} {'change':>8} {'changes':>17} "
        f"{'base spread':>17} {'working spread':>17}  unit"
    )
    for res in results:
        a = [r["per_unit"] for r in res["sides"]["base"]["runs"]]
        b = [r["per_unit"] for r in res["sides"]["working"]["runs"]]
        changes = res["changes_percent"]
        span = f"{min(changes):+.2f}..{max(changes):+.2f}%" if len(changes) > 1 else "-"
        print(
            f"{res['case']:<9} {statistics.median(a):>11,.0f} {statistics.median(b):>11,.0f} "
            f"{statistics.median(changes):>+7.2f}% {span:>17} {spread(a):>17} {spread(b):>17}"
            f"  {res['unit']}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", default="10k-asks,gang", help="comma list of 10k-asks, gang")
    parser.add_argument(
        "--repeat", type=int, default=3, help="measurements per case and side (default 3)"
    )
    parser.add_argument("--base", help="a commit to measure too, in a temporary git worktree")
    parser.add_argument(
        "--jobs", type=int, default=1, choices=(1, 2), help="2: the full and small run together"
    )
    parser.add_argument(
        "--hash-seed",
        default="0",
        help="PYTHONHASHSEED of the first repeat, the next ones count up (default 0); or random",
    )
    parser.add_argument("--keep", type=Path, help="keep the callgrind files in this directory")
    add_arguments(parser)  # --check and --target-scale are accepted; there are no targets
    args = parser.parse_args()
    if args.hash_seed != "random" and not args.hash_seed.isdigit():
        parser.error("--hash-seed takes an integer or random")
    table = cases(args.quick)
    chosen = [table[n] for n in names(args.cases, list(table))]
    tool = valgrind()
    base_sha = resolve(args.base) if args.base else None
    run = Run("instructions", args)
    sides = ["working", "base"] if base_sha else ["working"]
    progress = run.progress(args.repeat * len(chosen) * len(sides))
    measured: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="instructions-")))
        out_dir = args.keep or tmp
        out_dir.mkdir(parents=True, exist_ok=True)
        # "work" and "base": paths of one length (the count moves with the layout)
        trees = {"working": copy_src(ROOT, tmp / "work")}
        if base_sha:  # removed on the way out, before the temporary directory
            trees["base"] = stack.enter_context(checkout(base_sha, tmp / "base"))
        where = {s: check_import(tree, side_env(tree, None)) for s, tree in trees.items()}
        for r in range(args.repeat):
            order = sides if r % 2 == 0 else sides[::-1]
            for case in chosen:
                for side in order:
                    seed = hash_seed(args.hash_seed, r)
                    label = (
                        f"{case.name}, {side}: {case.full.units:,} less {case.small.units:,}, "
                        f"repeat {r + 1}/{args.repeat}, hash seed {seed or 'random'}"
                    )
                    env = side_env(trees[side], seed)
                    with progress.step(label) as step:
                        got = measure(tool, case, env, out_dir, f"{side}{r}", args.jobs)
                        step.result = f"{got['per_unit']:,.0f} instructions per unit"
                    got["hash_seed"] = seed
                    measured.setdefault((case.name, side), []).append(got)
    results: list[dict[str, Any]] = [
        {
            "case": case.name,
            "unit": case.unit,
            "script": case.script,
            "full": asdict(case.full),
            "small": asdict(case.small),
            "sides": {
                side: {
                    **summary([m["per_unit"] for m in measured[(case.name, side)]]),
                    "runs": measured[(case.name, side)],
                }
                for side in sides
            },
        }
        for case in chosen
    ]
    if base_sha:
        for res in results:
            res["changes_percent"] = paired_changes(
                [r["per_unit"] for r in res["sides"]["base"]["runs"]],
                [r["per_unit"] for r in res["sides"]["working"]["runs"]],
            )
    print_table(results, f"{args.base} ({base_sha[:12]})" if base_sha else None)
    document: dict[str, Any] = {
        "results": results,
        "hash_seed": args.hash_seed,
        "valgrind": valgrind_version(tool),
        "scheduler_imported_from": where,
        # the working tree's is the metadata's "commit"; the base ran this tree's scripts
        "base_commit": {"ref": args.base, "sha": base_sha} if base_sha else None,
    }
    return run.finish(document)


if __name__ == "__main__":
    sys.exit(main())
