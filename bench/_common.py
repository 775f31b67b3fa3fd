"""What every benchmark script shares: progress, run metadata, targets and the JSON file.

    parser = argparse.ArgumentParser(description=__doc__)
    add_arguments(parser)                       # --check, --quick, --out, --target-scale
    args = parser.parse_args()
    run = Run("scheduling", args)               # machine and load average at the start
    progress = run.progress(total=8)
    with progress.step("5,000 nodes, repeat 1/5") as step:
        ...
        step.result = "61,234 allocs/s"
    run.target("allocs_per_s", "allocs/s at 5,000 nodes", value, at_least=50_000)
    sys.exit(run.finish(document))              # prints targets, writes JSON, exit code

Progress goes to stderr, one line per case, so the tables on stdout stay clean. The JSON
gets ``machine`` (platform, processor, CPUs, memory, load average at the start and the
end), ``python`` (version and implementation), ``commit`` (``git rev-parse HEAD`` and
whether the tree is dirty; ``null`` without git) and ``targets`` (each with its value and
verdict), beside the script's own keys. Without ``--check`` a missed target is printed and
the exit code is 0; with it the missed targets are listed on stderr and the exit code is 1.

``--target-scale F`` (hidden; for tests) makes every target F times harder: an at-least
target is multiplied by F, an at-most target divided by it. 0 meets every target, 1e9
misses every one.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from scheduler import si

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every script takes."""
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when a target is missed (they are listed)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the smallest sizes and one repeat: proves the script runs; the numbers mean little",
    )
    parser.add_argument("--out", type=Path, help="where to write the JSON (default bench/results/)")
    parser.add_argument("--target-scale", type=float, default=1.0, help=argparse.SUPPRESS)


def out_path(args: argparse.Namespace, name: str) -> Path:
    """``--out``, else ``bench/results/<name>.json`` (``<name>-quick.json`` with ``--quick``,
    so a quick run never overwrites a real one)."""
    if args.out is not None:
        return Path(args.out)
    return RESULTS / (f"{name}-quick.json" if args.quick else f"{name}.json")


# -- metadata ----------------------------------------------------------------------------


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):  # not on Windows
        return None


def run_child(
    script: str,
    spec: dict[str, Any],
    what: str,
    *,
    python: str = sys.executable,
    timeout: float = 3600,
    capture_stderr: bool = False,
) -> dict[str, Any]:
    """Run ``script --child SPEC`` (a bench script's own mode for one case) in a fresh
    interpreter (``python``) and return the JSON figures it printed last, with the
    1-minute load average before and after (``load_before``, ``load_after``). Its stderr
    goes through unless ``capture_stderr``; then a failure shows it. ``what`` names the
    case in the error of a child that failed."""
    before = load_average()
    done = subprocess.run(
        [python, str(Path(script).resolve()), "--child", json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if capture_stderr else None,
        text=True,
        timeout=timeout,
        check=False,
    )
    after = load_average()
    if done.returncode != 0:
        shown = f"{done.stdout}\n{done.stderr}" if capture_stderr else done.stdout
        raise RuntimeError(f"{what} failed (exit {done.returncode}):\n{shown}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    figures["load_before"] = before[0] if before else None
    figures["load_after"] = after[0] if after else None
    return figures


def total_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def machine_info() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "memory_bytes": total_memory(),
        "load_average_start": load_average(),
    }


def python_info() -> dict[str, Any]:
    return {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "compiler": platform.python_compiler(),
        "executable": sys.executable,
    }


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, timeout=30
    )
    return done.stdout.strip()


def commit_info(repo: Path = BENCH.parent) -> dict[str, Any]:
    """HEAD of the repository and whether tracked files differ from it; nulls without git."""
    try:
        sha = _git(repo, "rev-parse", "HEAD")
        dirty = bool(_git(repo, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError) as exc:
        reason = exc.stderr.strip() if isinstance(exc, subprocess.CalledProcessError) else exc
        return {"sha": None, "dirty": None, "error": f"git: {reason}"}
    return {"sha": sha, "dirty": dirty}


# -- progress ----------------------------------------------------------------------------


class Step:
    """One case in progress; set ``result`` to show it when the case ends."""

    def __init__(self) -> None:
        self.result = ""


class Progress:
    """``[i/n] label …`` on stderr as each case starts, its result when it ends."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total = total
        self.done = 0
        self.stream = stream

    @contextlib.contextmanager
    def step(self, label: str) -> Iterator[Step]:
        stream = self.stream or sys.stderr
        self.done += 1
        prefix = f"[{self.done}/{self.total}] {label}"
        # On a terminal the end of the case overwrites its start line; elsewhere (a log,
        # a pipe) both lines stay.
        tty = stream.isatty()
        print(f"{prefix} …", file=stream, end="" if tty else "\n", flush=True)
        again = "\r\033[K" if tty else ""
        step = Step()
        started = time.perf_counter()
        try:
            yield step
        except BaseException:
            print(f"{again}{prefix}: failed", file=stream, flush=True)
            raise
        seconds = time.perf_counter() - started
        result = f"{step.result}, " if step.result else ""
        print(f"{again}{prefix}: {result}{seconds:.2f} s", file=stream, flush=True)


# -- targets -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    name: str
    label: str
    value: float
    bound: float
    at_most: bool  # the value must stay at or under the bound (else: reach at least it)
    fmt: str

    @property
    def met(self) -> bool:
        return self.value <= self.bound if self.at_most else self.value >= self.bound

    def line(self) -> str:
        op = "<=" if self.at_most else ">="
        verdict = "PASS" if self.met else "MISS"
        return (
            f"target: {self.label} {op} {self.bound:{self.fmt}}: {self.value:{self.fmt}} {verdict}"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "value": self.value,
            "at_most" if self.at_most else "at_least": self.bound,
            "met": self.met,
        }


class Run:
    """One run of a benchmark script: its metadata, targets, and the JSON it writes."""

    def __init__(self, name: str, args: argparse.Namespace, *, out: Path | None = None) -> None:
        self.name = name
        self.args = args
        self.out = out_path(args, name) if args.out is not None or out is None else out
        self.started = datetime.datetime.now(datetime.UTC)
        self.machine = machine_info()
        self.targets: list[Target] = []

    def progress(self, total: int) -> Progress:
        return Progress(total)

    def target(
        self,
        name: str,
        label: str,
        value: float,
        *,
        at_least: float | None = None,
        at_most: float | None = None,
        fmt: str = ",.0f",
    ) -> Target:
        """Record a measured figure against its bound (exactly one of at_least / at_most)."""
        if (at_least is None) == (at_most is None):
            raise ValueError("give exactly one of at_least and at_most")
        scale = self.args.target_scale
        if at_least is not None:
            bound = at_least * scale
        else:
            assert at_most is not None
            bound = at_most / scale if scale else float("inf")
        target = Target(name, label, value, bound, at_most is not None, fmt)
        self.targets.append(target)
        return target

    def metadata(self) -> dict[str, Any]:
        machine = dict(self.machine, load_average_end=load_average())
        return {
            "benchmark": self.name,
            "argv": sys.argv[1:],
            "started": self.started.isoformat(timespec="seconds"),
            "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": machine,
            "python": python_info(),
            "commit": commit_info(),
        }

    def finish(self, document: dict[str, Any]) -> int:
        """Print the targets, write the JSON; the exit code (1 only for --check and a miss)."""
        for target in self.targets:
            print(target.line())
        doc = {
            **document,
            **self.metadata(),
            "targets": {t.name: t.as_json() for t in self.targets},
        }
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {self.out}", file=sys.stderr)
        missed = [t for t in self.targets if not t.met]
        if not missed:
            return 0
        names = ", ".join(t.name for t in missed)
        if not self.args.check:
            print(f"missed targets: {names} (not an error without --check)", file=sys.stderr)
            return 0
        print(f"missed targets: {names}", file=sys.stderr)
        return 1


def confirm_replaced(
    rm_id: str, partition: str, releases: list[si.AllocationRelease]
) -> si.AllocationRequest:
    """The RM's confirmation of ``PLACEHOLDER_REPLACED`` releases: the same uuids and type."""
    return si.AllocationRequest(
        rm_id=rm_id,
        releases=si.AllocationReleasesRequest(
            allocations_to_release=[
                si.AllocationRelease(
                    partition_name=partition,
                    application_id=r.application_id,
                    uuid=r.uuid,
                    termination_type=si.TerminationType.PLACEHOLDER_REPLACED,
                )
                for r in releases
            ]
        ),
    )
