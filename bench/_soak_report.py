"""The soak's judge and report (``bench/soak.py``): samples in, checks and files out.

Plain functions on plain data, so a test can feed them synthetic samples:

    checks = judge(samples, warmup=20.0, thresholds=Thresholds())
    write_report(out_dir, samples, checks, figures=..., warmup=20.0, plot=True)

Boundedness is judged on the samples after the warm-up, split in two halves by time (with
the default warm-up of a third: the run's second and third thirds): a resource may grow
from the first half's median to the second's by at most its threshold, and RSS's
least-squares slope over both halves must stay under its own.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
#: The columns of samples.csv, in order: the fields of ``Sample``.
COLUMNS = (
    "t",
    "rss_mib",
    "fds",
    "actors",
    "events_lowest",
    "events_highest",
    "events_size",
    "allocations",
    "alloc_rate",
    "reconnects",
    "recoveries",
    "live_apps",
    "load1",
)
PLOT_MISSING = (
    "matplotlib is needed for the soak's plot (rss.png): "
    "pip install 'pyscheduler-core[soak]' (nox -s soak installs it), or run with --no-plot"
)


@dataclass(frozen=True)
class Sample:
    """One sample of the daemon and the RMs, ``t`` seconds into the run."""

    t: float
    rss_mib: float  # the daemon's resident set (VmRSS)
    fds: int  # the daemon's open file descriptors
    actors: int  # live actors (yunikorn_actor_live, summed over kinds)
    events_lowest: int  # /ws/v1/events/batch LowestID
    events_highest: int  # ... HighestID (-1: no event yet)
    events_size: int  # events the ring holds
    allocations: int  # allocations the RMs were sent so far
    alloc_rate: float  # allocations per second since the sample before
    reconnects: int  # connections the RMs resumed or recovered so far
    recoveries: int  # RM recoveries (register again, report state) so far
    live_apps: int  # applications the RMs have submitted and not completed
    load1: float  # the machine's 1-minute load average


@dataclass(frozen=True)
class Thresholds:
    """The bounds the checks hold the post-warm-up samples to."""

    rss_growth_mib: float = 16.0  # second half's median RSS over the first half's
    rss_slope_mib_per_min: float = 4.0  # least-squares slope of RSS after the warm-up
    fds_growth: float = 8.0  # second half's median fd count over the first half's
    actors_growth: float = 24.0  # same for live actors
    event_capacity: int = 10_000  # the event ring's capacity (the core's DEFAULT_CAPACITY)


@dataclass(frozen=True)
class Check:
    """One verdict: ``value`` against ``bound`` (None: a yes/no check), why in ``detail``."""

    name: str
    passed: bool
    detail: str
    value: float | None = None
    bound: float | None = None

    def line(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'} {self.name}: {self.detail}"


def parse_warmup(text: str, duration: float) -> float:
    """``--warmup``: seconds (``20``, ``20s``), or a fraction of the duration below 1
    (``0.33``)."""
    value = float(text.removesuffix("s"))
    if value < 0:
        raise ValueError(f"--warmup {text!r}: must not be negative")
    seconds = value * duration if value < 1 and not text.endswith("s") else value
    if seconds >= duration:
        raise ValueError(f"--warmup {text!r}: {seconds:g}s leaves nothing of {duration:g}s")
    return seconds


def slope_per_minute(points: Sequence[tuple[float, float]]) -> float:
    """The least-squares slope of ``(seconds, value)`` points, per minute (0 for fewer
    than two distinct times)."""
    if len(points) < 2:
        return 0.0
    mean_t = statistics.fmean(t for t, _ in points)
    mean_v = statistics.fmean(v for _, v in points)
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    cov = sum((t - mean_t) * (v - mean_v) for t, v in points)
    return cov / var * 60.0


def halves(samples: Sequence[Sample], warmup: float) -> tuple[list[Sample], list[Sample]]:
    """The post-warm-up samples, split in two by time."""
    post = [s for s in samples if s.t >= warmup]
    if not post:
        return [], []
    mid = (warmup + post[-1].t) / 2
    return [s for s in post if s.t < mid], [s for s in post if s.t >= mid]


def _growth_check(
    name: str,
    unit: str,
    field: Callable[[Sample], float],
    first: list[Sample],
    second: list[Sample],
    bound: float,
) -> Check:
    a = statistics.median(field(s) for s in first)
    b = statistics.median(field(s) for s in second)
    growth = b - a
    return Check(
        name,
        growth <= bound,
        f"median {a:.1f} -> {b:.1f} {unit} (+{growth:.1f}, at most +{bound:g})",
        round(growth, 3),
        bound,
    )


def judge(samples: Sequence[Sample], warmup: float, thresholds: Thresholds) -> list[Check]:
    """The boundedness checks on the samples after ``warmup`` seconds."""
    first, second = halves(samples, warmup)
    if len(first) < 2 or len(second) < 2:
        post = len(first) + len(second)
        return [
            Check(
                "samples",
                False,
                f"{post} samples after the warm-up: at least 4 needed (a longer --duration, "
                "a shorter --sample or --warmup)",
            )
        ]
    post = first + second
    slope = slope_per_minute([(s.t, s.rss_mib) for s in post])
    biggest = max(s.events_size for s in samples)
    allocated = post[-1].allocations - post[0].allocations
    return [
        _growth_check(
            "rss_growth", "MiB", lambda s: s.rss_mib, first, second, thresholds.rss_growth_mib
        ),
        Check(
            "rss_slope",
            slope <= thresholds.rss_slope_mib_per_min,
            f"{slope:+.2f} MiB/min after the warm-up "
            f"(at most {thresholds.rss_slope_mib_per_min:g})",
            round(slope, 3),
            thresholds.rss_slope_mib_per_min,
        ),
        _growth_check("fds_growth", "fds", lambda s: s.fds, first, second, thresholds.fds_growth),
        _growth_check(
            "actors_growth", "actors", lambda s: s.actors, first, second, thresholds.actors_growth
        ),
        Check(
            "event_ring",
            biggest <= thresholds.event_capacity,
            f"at most {biggest} events held (capacity {thresholds.event_capacity}); "
            f"ids up to {samples[-1].events_highest}",
            biggest,
            thresholds.event_capacity,
        ),
        Check(
            "progress",
            allocated > 0,
            f"{allocated} allocations after the warm-up "
            f"({allocated / max(post[-1].t - post[0].t, 1e-9):.1f}/s)",
            allocated,
        ),
    ]


def figures_of(samples: Sequence[Sample], warmup: float) -> dict[str, Any]:
    """The run's figures from its samples: start, end, peak and post-warm-up slopes."""
    post = [s for s in samples if s.t >= warmup] or list(samples)
    first, last = samples[0], samples[-1]
    span = max(last.t - first.t, 1e-9)
    return {
        "samples": len(samples),
        "seconds": round(last.t, 1),
        "rss_mib": {
            "start": first.rss_mib,
            "after_warmup": post[0].rss_mib,
            "end": last.rss_mib,
            "peak": max(s.rss_mib for s in samples),
            "slope_mib_per_min": round(slope_per_minute([(s.t, s.rss_mib) for s in post]), 3),
        },
        "fds": {
            "start": first.fds,
            "end": last.fds,
            "peak": max(s.fds for s in samples),
            "slope_per_min": round(slope_per_minute([(s.t, s.fds) for s in post]), 3),
        },
        "actors": {
            "start": first.actors,
            "end": last.actors,
            "peak": max(s.actors for s in samples),
            "slope_per_min": round(slope_per_minute([(s.t, s.actors) for s in post]), 3),
        },
        "events": {
            "highest_id": last.events_highest,
            "held_end": last.events_size,
            "held_peak": max(s.events_size for s in samples),
            "per_s": round((last.events_highest - first.events_highest) / span, 1),
        },
        "allocations": {
            "total": last.allocations,
            "per_s": round((last.allocations - first.allocations) / span, 1),
        },
        "reconnects": last.reconnects,
        "recoveries": last.recoveries,
        "load1": {"start": first.load1, "end": last.load1, "peak": max(s.load1 for s in samples)},
    }


# -- files -------------------------------------------------------------------------------


def write_samples(path: Path, samples: Sequence[Sample]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for s in samples:
            writer.writerow([getattr(s, c) for c in COLUMNS])


def read_samples(path: Path) -> list[Sample]:
    """samples.csv back into samples (to judge or plot a run again)."""
    types = {f.name: f.type for f in dataclasses.fields(Sample)}
    with path.open(newline="") as f:
        return [
            Sample(
                **{k: (float(v) if types[k] in ("float", float) else int(v)) for k, v in r.items()}
            )
            for r in csv.DictReader(f)
        ]


def plot(path: Path, samples: Sequence[Sample], warmup: float, title: str) -> None:
    """rss.png: RSS over time; fds and actors; the event ring and the allocation rate. The
    warm-up is shaded. Raises ``ImportError`` without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [s.t / 60 for s in samples]
    fig, (top, mid, low) = plt.subplots(
        3, 1, figsize=(10, 9), sharex=True, height_ratios=[2, 1, 1], layout="constrained"
    )
    fig.suptitle(title, fontsize=13)
    post = [s for s in samples if s.t >= warmup]
    top.plot(minutes, [s.rss_mib for s in samples], color="tab:blue", label="daemon RSS")
    if len(post) >= 2:
        slope = slope_per_minute([(s.t, s.rss_mib) for s in post])
        mean_t = statistics.fmean(s.t / 60 for s in post)
        mean_v = statistics.fmean(s.rss_mib for s in post)
        xs = [post[0].t / 60, post[-1].t / 60]
        top.plot(
            xs,
            [mean_v + slope * (x - mean_t) for x in xs],
            color="tab:red",
            linestyle="--",
            label=f"least squares after warm-up: {slope:+.2f} MiB/min",
        )
    top.set_ylabel("RSS (MiB)")
    mid.plot(minutes, [s.actors for s in samples], color="tab:purple", label="live actors")
    mid.set_ylabel("live actors")
    fds = mid.twinx()
    fds.plot(minutes, [s.fds for s in samples], color="tab:green", label="open fds")
    fds.set_ylabel("open fds")
    fds.set_ylim(0, max(s.fds for s in samples) * 1.5 + 1)
    low.plot(minutes, [s.events_size for s in samples], color="tab:orange", label="events held")
    low.set_ylabel("events in the ring")
    rate = low.twinx()
    rate.plot(
        minutes, [s.alloc_rate for s in samples], color="tab:gray", alpha=0.7, label="allocations/s"
    )
    rate.set_ylabel("allocations / s")
    low.set_xlabel("time since start (min)")
    for ax in (top, mid, low):
        ax.axvspan(0, warmup / 60, color="0.85", label="warm-up (not judged)")
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
    rate.set_ylim(bottom=0)
    top.legend(loc="lower right")
    handles, labels = mid.get_legend_handles_labels()
    more, more_labels = fds.get_legend_handles_labels()
    mid.legend(handles + more, labels + more_labels, loc="lower right")
    handles, labels = low.get_legend_handles_labels()
    more, more_labels = rate.get_legend_handles_labels()
    low.legend(handles + more, labels + more_labels, loc="lower right")
    fig.savefig(path, dpi=100)
    plt.close(fig)


def markdown(summary: dict[str, Any]) -> str:
    """report.md: the command, the verdict, the checks, the figures and the plot."""
    f = summary["figures"]
    rss, fds, actors, events, allocs = (
        f["rss_mib"],
        f["fds"],
        f["actors"],
        f["events"],
        f["allocations"],
    )
    lines = [
        f"# Soak: {'PASS' if summary['passed'] else 'FAIL'}",
        "",
        f"`{summary['command']}`, {summary['started']}, commit "
        f"{(summary.get('commit') or {}).get('sha')}; warm-up {summary['warmup_seconds']:g} s, "
        f"a sample every {summary['sample_seconds']:g} s; load average "
        f"{f['load1']['start']} at the start, {f['load1']['end']} at the end "
        f"(peak {f['load1']['peak']}).",
        "",
        "| check | verdict | detail |",
        "|---|---|---|",
        *(
            f"| {c['name']} | {'PASS' if c['passed'] else 'FAIL'} | {c['detail']} |"
            for c in summary["checks"]
        ),
        "",
        "| figure | value |",
        "|---|---|",
        f"| duration | {f['seconds']} s, {f['samples']} samples |",
        f"| RSS | {rss['start']:.1f} MiB at the start, {rss['after_warmup']:.1f} after the "
        f"warm-up, {rss['end']:.1f} at the end (peak {rss['peak']:.1f}); "
        f"{rss['slope_mib_per_min']:+.2f} MiB/min after the warm-up |",
        f"| open fds | {fds['start']} -> {fds['end']} (peak {fds['peak']}) |",
        f"| live actors | {actors['start']} -> {actors['end']} (peak {actors['peak']}) |",
        f"| events | {events['highest_id'] + 1} sent ({events['per_s']}/s), "
        f"{events['held_end']} held at the end (peak {events['held_peak']}) |",
        f"| allocations | {allocs['total']} ({allocs['per_s']}/s) |",
        f"| reconnections | {f['reconnects']} resumed or recovered, {f['recoveries']} recoveries |",
        "",
    ]
    rms = summary.get("rms") or []
    if rms:
        keys = list(rms[0])
        lines += [
            "| " + " | ".join(keys) + " |",
            "|" + "---|" * len(keys),
            *("| " + " | ".join(str(rm[k]) for k in keys) + " |" for rm in rms),
            "",
        ]
    if summary.get("plot"):
        lines += [f"![RSS over time]({summary['plot']})", ""]
    return "\n".join(lines)


def write_report(out: Path, samples: Sequence[Sample], summary: dict[str, Any]) -> None:
    """samples.csv, summary.json and report.md into ``out`` (rss.png is ``plot``'s)."""
    out.mkdir(parents=True, exist_ok=True)
    write_samples(out / "samples.csv", samples)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "report.md").write_text(markdown(summary))


def check_json(check: Check) -> dict[str, Any]:
    return dataclasses.asdict(check)
