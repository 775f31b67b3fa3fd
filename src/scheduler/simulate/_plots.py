"""The report's plots: matplotlib figures drawn from ``RunResult``s, saved as PNGs.

Imported only by ``_report.write_report``, after it has checked that matplotlib is there
(it is the ``simulate`` extra, not a dependency). Figures are made with
``matplotlib.figure.Figure`` and drawn by the Agg canvas, never through ``pyplot``: no
display is needed, and the backend a user's own program chose is left alone.

Every plot has a title, axis labels with units and a legend. Time axes are in seconds,
minutes or hours as fits the run's length; resources on a queue's axis are written as
``queues.yaml`` writes them (``format_quantity``: ``16Gi``, ``4``, ``500m``). Several runs
(configurations of one scenario) share each file: one panel per run where lines of one run
would crowd another's, one line per run where they read well overlaid.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from matplotlib import rc_context
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator, PercentFormatter
from matplotlib.transforms import offset_copy

from scheduler.config._quantity import BYTE_RESOURCES, MEMORY, VCORE, format_quantity
from scheduler.simulate._result import Distribution, RunResult, Sample, Summary
from scheduler.simulate._units import TimeUnit, short_duration, time_unit

__all__ = [
    "MAX_QUEUE_PANELS",
    "Plot",
    "plot_comparison",
    "plot_gang_wait",
    "plot_pending_time",
    "plot_preemptions",
    "plot_queues",
    "plot_utilization",
    "style",
]

MAX_QUEUE_PANELS: Final = 12  # queues.png shows at most this many queues (the busiest)
_DPI: Final = 100
_RUN_COLOURS: Final = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")
_RESOURCE_COLOURS: Final = {MEMORY: "tab:blue", VCORE: "tab:orange"}
# utilization.png: memory wide and solid, vcore narrower, dashed and drawn over it, so that
# where the two are equal both show (blue edges and gaps around the orange dashes)
_RESOURCE_LINES: Final[dict[str, dict[str, Any]]] = {
    MEMORY: {"linestyle": "-", "linewidth": 3.0, "zorder": 2},
    VCORE: {"linestyle": (0, (5, 3)), "linewidth": 1.6, "zorder": 3},
}
_BOUND: Final = "0.3"  # a queue's bound that every run shares
_STYLES: Final[dict[str, Literal["-", "--", ":"]]] = {
    "allocated": "-",
    "guaranteed": "--",
    "max": ":",
}
#: The percentiles marked on a cumulative distribution: their height and their marker.
_PERCENTILES: Final = {"p50": (50.0, "o"), "p90": (90.0, "s"), "p99": (99.0, "^")}
_LABEL_BOX: Final = {"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1}
_EVENT_LABELS: Final = 10  # events labelled on a panel; later ones are drawn unlabelled
# PNG text chunks left out so the same run gives the same bytes (no matplotlib version).
_METADATA: Final[dict[str, str | None]] = {"Software": None}


@dataclass(frozen=True)
class Plot:
    """A PNG written: its file name in the report's folder and what it shows, in words (the
    report's caption and the image's alt text)."""

    name: str
    caption: str


def style() -> AbstractContextManager[None]:
    """The report's look, for the plots drawn inside it (the defaults stay as they were for
    the rest of the program): text a size larger, read on a page scaled to its width."""
    return rc_context({"font.size": 11, "axes.titlesize": 11, "legend.fontsize": 9})


# -- units ----------------------------------------------------------------------------------


def _scale(name: str, largest: float) -> float:
    """What one unit on a resource axis is worth: a binary unit for bytes (ticks fall on
    whole Gi), a core for vcore, one for a count."""
    if name in BYTE_RESOURCES:
        scale = 1.0
        while largest >= scale * 1024 and scale < 1 << 60:
            scale *= 1024
        return scale
    if name == VCORE:
        return 1000.0
    return 1.0


def _resource_axis(ax: Axes, name: str, scale: float) -> None:
    """Ticks on round numbers of ``scale`` units, labelled as ``format_quantity`` writes."""
    ax.yaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 4, 5, 10]))
    ax.yaxis.set_major_formatter(
        FuncFormatter(lambda value, _pos: format_quantity(name, round(value * scale)))
    )


# -- derived series -------------------------------------------------------------------------


def _percent(sample: Sample, name: str) -> float:
    capacity = sample.capacity.get(name, 0)
    if capacity <= 0:  # every node down: no utilization to speak of
        return math.nan
    return 100.0 * sample.allocated.get(name, 0) / capacity


def _percent_top(results: Sequence[RunResult]) -> float:
    """The top of a utilization axis: 105%, or above the highest point when a run went over
    its capacity (a breach the checks name; the plot must not hide it)."""
    values = [
        _percent(s, n)
        for r in results
        for s in r.samples
        for n in (MEMORY, VCORE)
        if s.capacity.get(n, 0) > 0
    ]
    return max([105.0, *(v * 1.05 for v in values)])


def _pending_times(result: RunResult) -> list[float]:
    """allocated - submitted for the real pods (not placeholders) that were allocated."""
    return sorted(
        p.allocated - p.submitted
        for p in result.pods
        if not p.placeholder and p.allocated is not None
    )


def _gang_waits(result: RunResult) -> list[float]:
    return sorted(g.whole - g.submitted for g in result.gangs if g.whole is not None)


def _queue_paths(results: Sequence[RunResult]) -> list[str]:
    """Every queue below root that any sample shows, by path."""
    return sorted({q.queue for r in results for s in r.samples for q in s.queues} - {"root"})


def _leaves(paths: Sequence[str]) -> list[str]:
    return [p for p in paths if not any(o.startswith(p + ".") for o in paths)]


def _same(a: list[float], b: list[float]) -> bool:
    """Two series equal, NaN equal to NaN (a bound missing in both)."""
    return len(a) == len(b) and all(
        x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b, strict=True)
    )


def _colour(index: int) -> str:
    return _RUN_COLOURS[index % len(_RUN_COLOURS)]


def _save(fig: Figure, folder: Path, name: str) -> Path:
    path = folder / name
    fig.savefig(path, dpi=_DPI, metadata=_METADATA)
    return path


def _events(ax: Axes, result: RunResult, unit: TimeUnit) -> None:
    """The run's cluster events as grey vertical lines, each labelled with its kind (events
    at the same moment share a line and a label)."""
    at: dict[float, list[str]] = {}
    for event in result.events:
        if event.kind == "skipped":  # after the run's end: it did not happen
            continue
        at.setdefault(event.time, []).append(event.kind)
    # x in data, y in axes fraction, the text 3 pixels right of its line
    transform = offset_copy(ax.get_xaxis_transform(), x=3, y=0, units="dots")
    for index, (time, kinds) in enumerate(sorted(at.items())):
        x = time / unit.seconds
        ax.axvline(x, color="0.45", linestyle=":", linewidth=1.2)
        if index >= _EVENT_LABELS:
            continue
        counted = {k: kinds.count(k) for k in kinds}
        label = ", ".join(k if n == 1 else f"{k} x{n}" for k, n in counted.items())
        ax.text(
            x,
            0.97,
            label,
            transform=transform,
            rotation=90,
            va="top",
            ha="left",
            fontsize=8,
            color="0.25",
            bbox=_LABEL_BOX,
        )


def _no_data(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=12)
    ax.set_xticks([])
    ax.set_yticks([])


# -- the plots ------------------------------------------------------------------------------


def plot_utilization(results: Sequence[RunResult], folder: Path) -> Plot:
    """utilization.png: memory and vcore allocated as % of the capacity of the nodes that
    are up, over time, one panel per run, with the cluster events."""
    unit = time_unit(max(r.duration for r in results))
    fig = Figure(figsize=(12, 1.5 + 3.2 * len(results)), layout="constrained")
    axes = fig.subplots(len(results), 1, sharex=True, squeeze=False)[:, 0]
    fig.suptitle("Cluster utilization: allocated / capacity of the nodes that are up")
    for ax, result in zip(axes, results, strict=True):
        times = [s.time / unit.seconds for s in result.samples]
        for name in (MEMORY, VCORE):
            ax.plot(
                times,
                [_percent(s, name) for s in result.samples],
                color=_RESOURCE_COLOURS[name],
                label=name,
                drawstyle="steps-post",
                **_RESOURCE_LINES[name],
            )
        _events(ax, result, unit)
        ax.set_ylim(0, _percent_top([result]))
        ax.yaxis.set_major_formatter(PercentFormatter())
        ax.set_ylabel("allocated (% of capacity)")
        ax.set_title(f"configuration: {result.configuration}", loc="left")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower right")
    axes[-1].set_xlabel(f"virtual time ({unit.label})")
    axes[-1].set_xlim(left=0)
    return Plot(
        _save(fig, folder, "utilization.png").name,
        "Cluster utilization: memory (solid) and vcore (dashed) allocated as a share of the "
        "capacity of the nodes that are up; dotted lines are cluster events.",
    )


def _dominant(path: str, results: Sequence[RunResult]) -> str:
    """The resource a queue's panel shows: the one whose peak allocation came nearest its
    guarantee (else its max, else the cluster's capacity); memory when nothing was used."""
    peak: dict[str, int] = {}
    bound: dict[str, int] = {}
    for result in results:
        for sample in result.samples:
            for q in sample.queues:
                if q.queue != path:
                    continue
                for name, value in q.allocated.items():
                    peak[name] = max(peak.get(name, 0), value)
                for name in {*q.guaranteed, *q.max, *q.allocated}:
                    ref = q.guaranteed.get(name) or q.max.get(name) or sample.capacity.get(name)
                    if ref:
                        bound[name] = max(bound.get(name, 0), ref)
    shares = {n: peak.get(n, 0) / b for n, b in bound.items() if b > 0}
    best = max(shares.values(), default=0.0)
    if best <= 0:
        return MEMORY
    order = sorted(shares, key=lambda n: (n != MEMORY, n != VCORE, n))
    return next(n for n in order if shares[n] == best)


def _busiest(paths: list[str], results: Sequence[RunResult]) -> list[str]:
    """At most ``MAX_QUEUE_PANELS`` queues: those with a guarantee or a max first, then the
    most allocated memory at a peak; shown by path."""
    if len(paths) <= MAX_QUEUE_PANELS:
        return paths
    configured: set[str] = set()
    peak: dict[str, int] = dict.fromkeys(paths, 0)
    for result in results:
        for sample in result.samples:
            for q in sample.queues:
                if q.queue in peak:
                    peak[q.queue] = max(peak[q.queue], q.allocated.get(MEMORY, 0))
                    if q.guaranteed or q.max:
                        configured.add(q.queue)
    ranked = sorted(paths, key=lambda p: (p not in configured, -peak[p], p))
    return sorted(ranked[:MAX_QUEUE_PANELS])


@dataclass(frozen=True)
class _Series:
    """One queue over a run: its allocated, guaranteed and max (NaN where it has none) in
    one resource, at ``times``."""

    times: list[float]
    allocated: list[float]
    guaranteed: list[float]
    max: list[float]

    def lines(self) -> dict[str, list[float]]:
        return {"allocated": self.allocated, "guaranteed": self.guaranteed, "max": self.max}


def _queue_series(result: RunResult, path: str, name: str, unit: TimeUnit) -> _Series:
    series = _Series([], [], [], [])
    for sample in result.samples:
        q = next((q for q in sample.queues if q.queue == path), None)
        if q is None:
            continue
        series.times.append(sample.time / unit.seconds)
        series.allocated.append(float(q.allocated.get(name, 0)))
        series.guaranteed.append(float(q.guaranteed.get(name, math.nan)))
        series.max.append(float(q.max.get(name, math.nan)))
    return series


def plot_queues(results: Sequence[RunResult], folder: Path) -> Plot:
    """queues.png: one panel per queue, its allocation against its guaranteed and max over
    time, in the resource whose peak came nearest its bound (memory on a tie); one colour per
    run."""
    every = _queue_paths(results)
    shown = _busiest(every, results)
    unit = time_unit(max(r.duration for r in results))
    columns = min(3, max(1, len(shown)))
    rows = max(1, math.ceil(len(shown) / columns))
    fig = Figure(figsize=(5.2 * columns, 1.2 + 3.4 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    fig.suptitle("Queues: allocated against guaranteed and max")
    if not shown:
        _no_data(axes[0], "no queue below root in the samples")
    for ax, path in zip(axes, shown, strict=False):
        name = _dominant(path, results)
        series = [_queue_series(result, path, name, unit) for result in results]
        top = max(
            (v for s in series for line in s.lines().values() for v in line if not math.isnan(v)),
            default=0.0,
        )
        scale = _scale(name, top)
        for index, s in enumerate(series):
            for (what, line), dash in zip(s.lines().items(), _STYLES.values(), strict=True):
                colour = _colour(index)
                if what != "allocated":
                    if all(math.isnan(v) for v in line):
                        continue  # the queue has no such bound
                    if all(_same(line, o.lines()[what]) for o in series):
                        if index:
                            continue  # the same bound in every run: drawn once, in grey
                        colour = _BOUND
                ax.plot(
                    s.times,
                    [v / scale for v in line],
                    color=colour,
                    linestyle=dash,
                    drawstyle="steps-post",
                    linewidth=2 if what == "max" else 1.5,
                )
        _resource_axis(ax, name, scale)
        ax.set_ylim(0, max(top / scale * 1.1, 1.0))
        ax.set_xlim(left=0)
        ax.set_title(path)
        ax.set_ylabel(f"{name} ({_unit_word(name, scale)})")
        ax.set_xlabel(f"virtual time ({unit.label})")
        ax.grid(True, alpha=0.3)
    one = len(results) == 1
    handles: list[Artist] = [
        Line2D(
            [], [], color=_colour(0) if one and w == "allocated" else _BOUND, linestyle=st, label=w
        )
        for w, st in _STYLES.items()
    ]
    if not one:
        handles += [
            Patch(color=_colour(i), label=f"configuration {r.configuration}")
            for i, r in enumerate(results)
        ]
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles))
    for ax in axes[len(shown) :]:
        ax.set_visible(False)
    caption = (
        "Each queue's allocation (solid) against its guaranteed (dashed) and max (dotted), "
        "in the resource that came nearest its bound (memory on a tie)"
        + (
            "; one colour per configuration, bounds in grey when every run has the same."
            if len(results) > 1
            else "."
        )
    )
    if len(shown) < len(every):
        caption += f" {len(shown)} of {len(every)} queues: those with bounds and the busiest."
    return Plot(_save(fig, folder, "queues.png").name, caption)


def _unit_word(name: str, scale: float) -> str:
    if name in BYTE_RESOURCES:
        return "bytes" if scale == 1 else format_quantity(name, int(scale))[1:]
    return "cores" if name == VCORE else "count"


def _distribution(
    results: Sequence[RunResult],
    summaries: Sequence[Summary],
    folder: Path,
    *,
    name: str,
    title: str,
    what: str,
    empty: str,
    values: Callable[[RunResult], list[float]],
    stats: Callable[[Summary], Distribution],
) -> Path:
    """A histogram and a cumulative distribution of waits, one colour per run, with the
    summary's p50, p90 and p99 marked on the cumulative one."""
    per_run = [values(r) for r in results]
    longest = max((v[-1] for v in per_run if v), default=0.0)
    unit = time_unit(longest)
    fig = Figure(figsize=(12, 4.6), layout="constrained")
    fig.suptitle(title)
    if not any(per_run):
        _no_data(fig.subplots(), empty + (" in these runs" if len(results) > 1 else " in this run"))
        return _save(fig, folder, name)
    hist, cdf = fig.subplots(1, 2)
    bins = [longest / unit.seconds * i / 30 for i in range(31)] if longest > 0 else 30
    for index, (result, summary, data) in enumerate(zip(results, summaries, per_run, strict=True)):
        if not data:
            continue
        colour = _colour(index)
        xs = [v / unit.seconds for v in data]
        label = result.configuration if len(results) > 1 else what
        hist.hist(xs, bins=bins, histtype="step", linewidth=1.6, color=colour, label=label)
        ys = [100.0 * (i + 1) / len(xs) for i in range(len(xs))]
        d = stats(summary)
        marks = ", ".join(f"{m} {short_duration(getattr(d, m))}" for m in _PERCENTILES)
        cdf.plot(
            [0.0, *xs],
            [0.0, *ys],
            drawstyle="steps-post",
            color=colour,
            label=f"{label}: {marks}" if len(results) > 1 else marks,
        )
        for mark, (quantile, marker) in _PERCENTILES.items():
            cdf.plot(
                getattr(d, mark) / unit.seconds,
                quantile,
                marker=marker,
                color=colour,
                markersize=8,
                markeredgecolor="black",
                linestyle="none",
            )
            if len(results) == 1:
                cdf.axvline(getattr(d, mark) / unit.seconds, color="0.5", linestyle=":")
    handles = cdf.get_legend_handles_labels()[0]
    handles += [
        Line2D(
            [],
            [],
            marker=marker,
            color="0.6",
            markeredgecolor="black",
            linestyle="none",
            label=mark,
        )
        for mark, (_, marker) in _PERCENTILES.items()
    ]
    hist.set_title(f"how many {what} waited how long")
    hist.set_xlabel(f"wait ({unit.label})")
    hist.set_ylabel(f"{what} (count)")
    cdf.set_title("cumulative: share waiting at most x")
    cdf.set_xlabel(f"wait ({unit.label})")
    cdf.set_ylabel(f"{what} (% of those placed)")
    cdf.yaxis.set_major_formatter(PercentFormatter())
    cdf.set_ylim(0, 102)
    hist.yaxis.set_major_locator(MaxNLocator(integer=True))
    hist.set_ylim(0, hist.get_ylim()[1] * 1.1)  # the tallest bar below the legend
    hist.legend(loc="upper right")
    cdf.legend(handles=handles, loc="lower right")
    for ax in (hist, cdf):
        ax.set_xlim(left=0)
        ax.grid(True, alpha=0.3)
    return _save(fig, folder, name)


def plot_pending_time(
    results: Sequence[RunResult], summaries: Sequence[Summary], folder: Path
) -> Plot:
    """pending-time.png: how long real pods waited from submission to allocation."""
    path = _distribution(
        results,
        summaries,
        folder,
        name="pending-time.png",
        title="Pending time: from a pod's submission to its allocation (placeholders left out)",
        what="pods",
        empty="no pod was allocated",
        values=_pending_times,
        stats=lambda s: s.pending_time,
    )
    return Plot(
        path.name,
        "Pending time of the real pods (placeholders left out): a histogram, and the "
        "cumulative share with p50, p90 and p99 marked.",
    )


def plot_gang_wait(
    results: Sequence[RunResult], summaries: Sequence[Summary], folder: Path
) -> Plot:
    """gang-wait.png: how long gangs waited from submission until every member was placed."""
    path = _distribution(
        results,
        summaries,
        folder,
        name="gang-wait.png",
        title="Gang wait: from a gang's submission until every member is placed",
        what="gangs",
        empty="no gang became whole",
        values=_gang_waits,
        stats=lambda s: s.gang_wait,
    )
    never = sum(1 for r in results for g in r.gangs if g.whole is None)
    caption = "Gang wait until the gang was whole: a histogram, and the cumulative share."
    if never:
        caption += f" {never} gang{'s' if never != 1 else ''} never became whole (not shown)."
    return Plot(path.name, caption)


def plot_preemptions(results: Sequence[RunResult], folder: Path) -> Plot:
    """preemptions.png: pods preempted so far, over time, one line per run."""
    unit = time_unit(max(r.duration for r in results))
    fig = Figure(figsize=(12, 4.2), layout="constrained")
    ax = fig.subplots()
    fig.suptitle("Preemptions: pods the core preempted to make room, cumulative")
    for index, result in enumerate(results):
        ax.plot(
            [s.time / unit.seconds for s in result.samples],
            [s.preemptions for s in result.samples],
            drawstyle="steps-post",
            color=_colour(index),
            label=result.configuration,
        )
    if len(results) == 1:
        _events(ax, results[0], unit)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.set_xlabel(f"virtual time ({unit.label})")
    ax.set_ylabel("pods preempted (cumulative)")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", title="configuration")
    return Plot(
        _save(fig, folder, "preemptions.png").name,
        "Pods preempted so far, over virtual time.",
    )


def _memory_share(result: RunResult, path: str) -> float:
    """The queue's mean share of the cluster's memory over the samples, in %."""
    shares = [
        100.0 * q.allocated.get(MEMORY, 0) / s.capacity[MEMORY]
        for s in result.samples
        if s.capacity.get(MEMORY, 0) > 0
        for q in s.queues
        if q.queue == path
    ]
    return sum(shares) / len(shares) if shares else 0.0


def plot_comparison(
    results: Sequence[RunResult], summaries: Sequence[Summary], folder: Path
) -> Plot:
    """comparison.png: the runs side by side: memory utilization over time, the pending
    time's cumulative distribution and each leaf queue's mean share of the cluster."""
    unit = time_unit(max(r.duration for r in results))
    fig = Figure(figsize=(16, 5.2), layout="constrained")
    util, cdf, share = fig.subplots(1, 3, width_ratios=[1.2, 1, 1.2])
    fig.suptitle("The configurations on the same workload")
    waits = [_pending_times(r) for r in results]
    wait_unit = time_unit(max((w[-1] for w in waits if w), default=0.0))
    for index, (result, data) in enumerate(zip(results, waits, strict=True)):
        colour = _colour(index)
        util.plot(
            [s.time / unit.seconds for s in result.samples],
            [_percent(s, MEMORY) for s in result.samples],
            drawstyle="steps-post",
            color=colour,
            label=result.configuration,
        )
        if data:
            xs = [v / wait_unit.seconds for v in data]
            ys = [100.0 * (i + 1) / len(xs) for i in range(len(xs))]
            p90 = short_duration(summaries[index].pending_time.p90)
            cdf.plot(
                [0.0, *xs],
                [0.0, *ys],
                drawstyle="steps-post",
                color=colour,
                label=f"{result.configuration}: p90 {p90}",
            )
    util.set_title("memory utilization")
    util.set_xlabel(f"virtual time ({unit.label})")
    util.set_ylabel("memory allocated (% of capacity)")
    util.set_ylim(0, _percent_top(results))
    util.yaxis.set_major_formatter(PercentFormatter())
    cdf.set_title("pending time, cumulative")
    cdf.set_xlabel(f"pending time ({wait_unit.label})")
    cdf.set_ylabel("pods placed (%)")
    cdf.set_ylim(0, 102)
    cdf.yaxis.set_major_formatter(PercentFormatter())
    leaves = _leaves(_queue_paths(results))[:MAX_QUEUE_PANELS]
    width = 0.8 / len(results)
    for index, result in enumerate(results):
        share.bar(
            [i + (index - (len(results) - 1) / 2) * width for i in range(len(leaves))],
            [_memory_share(result, p) for p in leaves],
            width=width,
            color=_colour(index),
            label=result.configuration,
        )
    share.set_xticks(range(len(leaves)), [p.removeprefix("root.") for p in leaves])
    share.tick_params(axis="x", labelrotation=30 if len(leaves) > 4 else 0)
    share.set_title("each leaf queue's mean share of the cluster")
    share.set_xlabel("queue")
    share.set_ylabel("memory allocated (% of capacity, mean)")
    share.yaxis.set_major_formatter(PercentFormatter(decimals=0))
    for ax in (util, cdf, share):
        ax.grid(True, alpha=0.3, axis="y" if ax is share else "both")
        ax.legend(title="configuration")
    util.set_xlim(left=0)
    cdf.set_xlim(left=0)
    return Plot(
        _save(fig, folder, "comparison.png").name,
        "The configurations side by side: memory utilization over time, the pending time's "
        "cumulative distribution, and each leaf queue's mean share of the cluster's memory.",
    )
