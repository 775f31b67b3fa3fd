"""A/B: one benchmark script against a base commit and the working tree, interleaved.

    python bench/ab.py --base c5b1493 --rounds 5 bench_scheduling.py -- --nodes 1000 --repeat 1

The base commit is checked out (``git worktree``) into a temporary directory. Each round runs
the script once per side, alternating which side goes first, so a slow spell of a shared
machine hits both alike; each side imports its own ``src`` (``PYTHONPATH``). Every run writes
its JSON (``--out``); the table shows each ``*_per_s`` number of it per side (best and
median over the rounds) and the change from A (base) to B (working tree).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def rates(doc: Any, prefix: str = "") -> dict[str, float]:
    """Every ``*_per_s`` number of a result document, by a readable path."""
    out: dict[str, float] = {}
    if isinstance(doc, dict):
        for key, value in doc.items():
            path = f"{prefix}.{key}" if prefix else key
            if key.endswith("_per_s") and isinstance(value, int | float):
                out[path] = float(value)
            elif isinstance(value, dict | list) and not key.startswith("best_"):
                out.update(rates(value, path))
    elif isinstance(doc, list):
        for i, item in enumerate(doc):
            out.update(rates(item, f"{prefix}[{_label(item, i)}]"))
    return out


def _label(item: Any, index: int) -> str | int:
    """A list item's label: its ``case`` (and ``sizing``), else its ``nodes``, else its index."""
    if not isinstance(item, dict):
        return index
    if "case" in item:
        sizing = f",sizing={item['sizing']}" if "sizing" in item else ""
        gc_mode = f",gc={item['gc']}" if "gc" in item else ""
        return f"case={item['case']}{sizing}{gc_mode}"
    if "nodes" in item:
        return f"nodes={item['nodes']}"
    return index


@contextlib.contextmanager
def checkout(commit: str, into: Path) -> Iterator[Path]:
    """``commit`` checked out (detached) into a new ``git worktree`` at ``into``, removed
    again on the way out; ``bench/instructions.py`` uses it too."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(into), commit],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"git worktree add {commit} failed: {done.stderr.strip()}")
    try:
        yield into
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(into)],
            check=False,
            capture_output=True,
        )


def run(tree: Path, script: str, args: list[str], out: Path) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    cmd = [sys.executable, str(tree / "bench" / script), *args, "--out", str(out)]
    done = subprocess.run(
        cmd, cwd=tree / "bench", env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stdout}\n{done.stderr}")
    return rates(json.loads(out.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", required=True, help="the commit to compare with (A)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("script", help="a bench/ script that takes --out")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- then the script's arguments")
    opts = parser.parse_args()
    args = [a for a in opts.args if a != "--"]
    with (
        tempfile.TemporaryDirectory(prefix="ab-") as tmp,
        checkout(opts.base, Path(tmp) / "base") as base,
    ):
        sides = {"A": base, "B": ROOT}
        seen: dict[str, dict[str, list[float]]] = {"A": {}, "B": {}}
        for n in range(opts.rounds):
            order = ["A", "B"] if n % 2 == 0 else ["B", "A"]
            for side in order:
                got = run(sides[side], opts.script, args, Path(tmp) / f"{side}{n}.json")
                for key, value in got.items():
                    seen[side].setdefault(key, []).append(value)
            print(f"round {n + 1}/{opts.rounds} done", file=sys.stderr, flush=True)
    print(
        f"A = {opts.base}, B = working tree; {opts.script} {' '.join(args)}; {opts.rounds} rounds"
    )
    keys = sorted(set(seen["A"]) & set(seen["B"]))
    width = max([34, *map(len, keys)])
    header = (
        f"{'metric':<{width}} {'A best':>10} {'B best':>10} {'B/A':>6} "
        f"{'A med':>10} {'B med':>10} {'B/A':>6}"
    )
    print(header)
    for key in keys:
        a, b = seen["A"][key], seen["B"][key]
        best_a, best_b = max(a), max(b)
        med_a, med_b = statistics.median(a), statistics.median(b)
        print(
            f"{key:<{width}} {best_a:>10,.0f} {best_b:>10,.0f} {best_b / best_a:>6.2f} "
            f"{med_a:>10,.0f} {med_b:>10,.0f} {med_b / med_a:>6.2f}"
        )


if __name__ == "__main__":
    main()
