"""The report folder of ``scheduler simulate``: ``report.md``, ``index.html`` and the PNGs.

``write_report`` takes the runs of one scenario (one per configuration) with their
summaries and writes the report beside ``summary.json`` (which the engine writes). The
Markdown and the HTML say the same things, so both are rendered from one list of blocks
(headings, paragraphs, tables, figures) built once. The plots need matplotlib, the
``simulate`` extra: without it ``write_report`` refuses before writing anything, and says
how to install it.

The same input gives the same bytes: nothing in the report depends on the clock, the
machine or the order of a dict the input did not order, and the PNGs carry no software
version.
"""

from __future__ import annotations

import html
import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from scheduler._errors import SchedulerError
from scheduler.config._quantity import format_resources
from scheduler.simulate._result import Checks, Distribution, QueueSummary, RunResult, Summary
from scheduler.simulate._units import counted, short_duration

__all__ = ["INSTALL_HINT", "REPORT_FILES", "PlotsUnavailable", "write_report"]

INSTALL_HINT: Final = "pip install 'pyscheduler-core[simulate]'"
#: What every report holds; ``comparison.png`` is added when there are several runs.
REPORT_FILES: Final = (
    "report.md",
    "index.html",
    "utilization.png",
    "queues.png",
    "pending-time.png",
    "gang-wait.png",
    "preemptions.png",
)
COMPARISON: Final = "comparison.png"  # several runs only; removed when there is one
_MAX_EVENTS: Final = 40  # rows of a run's event table; the others are counted
_MAX_BREACHES: Final = 5  # over-capacity breaches named; the others are counted


class PlotsUnavailable(SchedulerError):
    """The report's plots need matplotlib, which is not installed."""


# -- the document: blocks rendered twice --------------------------------------------------


@dataclass(frozen=True)
class _Heading:
    level: int
    text: str


@dataclass(frozen=True)
class _Para:
    text: str
    link: tuple[str, str] | None = None  # (text, href) appended to the paragraph


@dataclass(frozen=True)
class _Table:
    header: tuple[str, ...]
    rows: Sequence[tuple[str, ...]]
    numeric: frozenset[int] = frozenset()  # columns aligned right
    verdict: int | None = None  # a column of "pass"/"FAIL", coloured in the HTML


@dataclass(frozen=True)
class _Facts:
    """Headline numbers: a label and its value a line."""

    items: list[tuple[str, str]]


@dataclass(frozen=True)
class _Figure:
    src: str
    caption: str


_Block = _Heading | _Para | _Facts | _Table | _Figure


def _markdown(blocks: Sequence[_Block]) -> str:
    out: list[str] = []
    for block in blocks:
        match block:
            case _Heading(level, text):
                out.append(f"{'#' * level} {text}")
            case _Para(text, link):
                out.append(text + (f" [{link[0]}]({link[1]})." if link else ""))
            case _Facts(items):
                out.extend(f"- **{label}**: {value}" for label, value in items)
            case _Table(header, rows, numeric, _):
                out.append("| " + " | ".join(header) + " |")
                out.append(
                    "|" + "|".join("---:" if i in numeric else "---" for i in range(len(header)))
                    + "|"
                )  # fmt: skip
                out.extend("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows)
            case _Figure(src, caption):
                out.append(f"![{caption}]({src})\n\n*{caption}*")
        out.append("")
    return "\n".join(out)


_CSS: Final = """
body { margin: 0; background: #f6f7f9; color: #1d232a;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
main { max-width: 1400px; margin: 0 auto; padding: 1.5rem 2rem 3rem; }
h1 { font-size: 1.7rem; margin: 0.5rem 0 0.75rem; }
h2 { font-size: 1.35rem; margin: 2.2rem 0 0.6rem; padding-bottom: 0.25rem;
  border-bottom: 2px solid #d5dae1; }
h3 { font-size: 1.1rem; margin: 1.4rem 0 0.4rem; }
p { margin: 0.4rem 0 0.8rem; max-width: 70rem; }
.scroll { overflow-x: auto; margin: 0.4rem 0 1rem; }
table { border-collapse: collapse; background: #fff; font-size: 0.92rem;
  font-variant-numeric: tabular-nums; }
th, td { padding: 0.3rem 0.6rem; border: 1px solid #d5dae1; text-align: left;
  white-space: nowrap; }
th { background: #eef1f5; white-space: normal; vertical-align: bottom; }
tr:nth-child(even) td { background: #fafbfc; }
td.num, th.num { text-align: right; }
td.pass { color: #11692b; font-weight: 600; }
td.fail { color: #b3261e; font-weight: 700; }
figure { margin: 1rem 0 1.8rem; background: #fff; border: 1px solid #d5dae1;
  padding: 0.75rem; }
figure img { display: block; width: 100%; max-width: 1400px; height: auto; }
figcaption { color: #4a5562; font-size: 0.9rem; margin-top: 0.4rem; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 0.2rem 1.2rem;
  margin: 0.5rem 0 1rem; }
dl.facts dt { font-weight: 600; }
dl.facts dd { margin: 0; font-variant-numeric: tabular-nums; }
code { background: #eef1f5; padding: 0 0.25rem; border-radius: 3px; }
@media (max-width: 900px) { main { padding: 1rem; } body { font-size: 14px; } }
""".strip()


def _html(blocks: Sequence[_Block], title: str) -> str:
    e = html.escape
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(title)}</title>",
        f"<style>\n{_CSS}\n</style>",
        "</head>",
        "<body>",
        "<main>",
    ]
    for block in blocks:
        match block:
            case _Heading(level, text):
                out.append(f"<h{level}>{e(text)}</h{level}>")
            case _Para(text, link):
                more = f' <a href="{e(link[1])}">{e(link[0])}</a>.' if link else ""
                out.append(f"<p>{_code(e(text))}{more}</p>")
            case _Facts(items):
                out.append('<dl class="facts">')
                out.extend(f"<dt>{e(label)}</dt><dd>{e(value)}</dd>" for label, value in items)
                out.append("</dl>")
            case _Table(header, rows, numeric, verdict):
                out.append('<div class="scroll"><table>')
                cells = "".join(
                    f"<th{' class=num' if i in numeric else ''}>{e(h)}</th>"
                    for i, h in enumerate(header)
                )
                out.append(f"<thead><tr>{cells}</tr></thead>")
                out.append("<tbody>")
                for row in rows:
                    cells = "".join(
                        f"<td{_cell_class(i, c, numeric, verdict)}>{e(c)}</td>"
                        for i, c in enumerate(row)
                    )
                    out.append(f"<tr>{cells}</tr>")
                out.append("</tbody></table></div>")
            case _Figure(src, caption):
                out.append(
                    f'<figure><img src="{e(src)}" alt="{e(caption)}">'
                    f"<figcaption>{e(caption)}</figcaption></figure>"
                )
    out += ["</main>", "</body>", "</html>", ""]
    return "\n".join(out)


def _cell_class(index: int, text: str, numeric: frozenset[int], verdict: int | None) -> str:
    if index == verdict:
        return ' class="pass"' if text == "pass" else ' class="fail"'
    return ' class="num"' if index in numeric else ""


def _code(escaped: str) -> str:
    """`name` in a paragraph becomes <code>name</code>, as the Markdown shows it."""
    parts = escaped.split("`")
    if len(parts) % 2 == 0:  # an unpaired backquote: leave the text as it is
        return escaped
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


# -- what the report says -------------------------------------------------------------------


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.1f}%"


def _utilization(summary: Summary) -> str:
    names = sorted(summary.utilization, key=lambda n: (n not in ("memory", "vcore"), n))
    return ", ".join(f"{n} {_pct(summary.utilization[n])}" for n in names) or "none"


def _distribution(d: Distribution, noun: str, after: str = "") -> str:
    """``150 pods: mean 1m20s, p50 ...`` (``no pods`` when there are none)."""
    if d.count == 0:
        return f"no {noun}s{after}"
    return (
        f"{counted(d.count, noun)}{after}: mean {short_duration(d.mean)}, "
        f"p50 {short_duration(d.p50)}, p90 {short_duration(d.p90)}, "
        f"p99 {short_duration(d.p99)}, max {short_duration(d.max)}"
    )


def _verdict(ok: bool) -> str:
    return "pass" if ok else "FAIL"


def _check_rows(checks: Checks, queues: Sequence[QueueSummary]) -> list[tuple[str, str, str]]:
    breaches = checks.over_capacity
    named = "; ".join(breaches[:_MAX_BREACHES])
    if len(breaches) > _MAX_BREACHES:
        named += f"; and {len(breaches) - _MAX_BREACHES:,} more"
    rows = [
        (
            "every job finished",
            _verdict(checks.all_finished),
            f"{checks.jobs_finished:,} of {counted(checks.jobs_submitted, 'job')}",
        ),
        (
            "every job accepted",
            _verdict(not checks.rejected_jobs),
            "; ".join(checks.rejected_jobs) or "none rejected",
        ),
        ("no node used beyond its capacity", _verdict(not breaches), named or "none"),
        (
            "no gang ran with part of its members",
            _verdict(not checks.partial_gangs),
            "; ".join(checks.partial_gangs)
            or f"{checks.gangs_whole:,} of {counted(checks.gangs, 'gang')} whole",
        ),
    ]
    by_path = {q.queue: q for q in queues}
    for queue, ok in sorted(checks.guarantees_reached.items()):
        q = by_path.get(queue)
        detail = ""
        if q is not None and q.guarantee_reached_after is not None:
            detail = f"after {short_duration(q.guarantee_reached_after)} of pods pending"
        if q is not None and q.starved_seconds:
            starved = f"{short_duration(q.starved_seconds)} below it with pods pending"
            detail = f"{detail}; {starved}" if detail else starved
        rows.append((f"{queue} reached its guarantee", _verdict(ok), detail))
    return rows


def _passed(summary: Summary) -> tuple[int, int]:
    rows = _check_rows(summary.checks, summary.queues)
    return sum(1 for r in rows if r[1] == "pass"), len(rows)


def _comparison(summaries: Sequence[Summary]) -> _Table:
    rows = []
    for s in summaries:
        passed, total = _passed(s)
        rows.append(
            (
                s.configuration,
                f"{s.pods_submitted:,}",
                f"{s.pods_allocated:,}",
                f"{s.pods_finished:,}",
                short_duration(s.pending_time.p50),
                short_duration(s.pending_time.p90),
                short_duration(s.pending_time.p99),
                short_duration(s.gang_wait.p90) if s.gang_wait.count else "-",
                f"{s.checks.gangs_whole:,} of {s.checks.gangs:,}",
                _pct(s.utilization.get("memory", 0.0)),
                _pct(s.utilization.get("vcore", 0.0)),
                f"{s.preemptions:,}",
                f"{passed} of {total}",
                f"{s.wall_seconds:.1f}s",
            )
        )
    header = (
        "configuration", "pods submitted", "pods allocated", "pods finished", "pending p50",
        "pending p90", "pending p99", "gang wait p90", "gangs whole", "memory used (mean)",
        "vcore used (mean)", "preemptions", "checks passed", "wall time",
    )  # fmt: skip
    return _Table(header, rows, numeric=frozenset(range(1, len(header))))


def _queue_table(summary: Summary) -> _Table:
    rows = [
        (
            q.queue,
            format_resources(q.guaranteed, sep=" ") or "-",
            format_resources(q.max, sep=" ") or "-",
            format_resources(q.peak, sep=" ") or "-",
            ", ".join(f"{n} {_pct(v)}" for n, v in sorted(q.mean_share.items())) or "-",
            "-" if q.guarantee_reached_after is None else short_duration(q.guarantee_reached_after),
            short_duration(q.starved_seconds),
        )
        for q in summary.queues
    ]
    header = (
        "queue", "guaranteed", "max", "peak allocated", "mean share of guarantee",
        "guarantee reached after", "starved",
    )  # fmt: skip
    return _Table(header, rows, numeric=frozenset({5, 6}))


def _run_blocks(result: RunResult, summary: Summary, heading: str) -> list[_Block]:
    passed, total = _passed(summary)
    rate = f"{summary.pods_per_wall_second:,.0f} pods per wall second"
    headline = _Facts(
        [
            (
                "virtual time",
                f"{short_duration(summary.duration)} played in "
                f"{summary.wall_seconds:.1f}s of wall time ({rate})",
            ),
            (
                "pods",
                f"{summary.pods_submitted:,} submitted, {summary.pods_allocated:,} allocated, "
                f"{summary.pods_finished:,} finished",
            ),
            ("pending time", _distribution(summary.pending_time, "pod")),
            ("gang wait", _distribution(summary.gang_wait, "gang", " whole")),
            ("mean utilization", _utilization(summary)),
            ("preemptions", f"{summary.preemptions:,}"),
            ("checks", f"{passed} of {total} passed"),
        ],
    )
    blocks: list[_Block] = [
        _Heading(2, heading),
        headline,
        _Heading(3, "Checks"),
        _Table(
            ("check", "result", "detail"),
            _check_rows(summary.checks, summary.queues),
            verdict=1,
        ),
        _Heading(3, "Queues"),
        _queue_table(summary),
    ]
    if result.events:
        events = [
            (short_duration(ev.time), ev.kind, ev.detail) for ev in result.events[:_MAX_EVENTS]
        ]
        if len(result.events) > _MAX_EVENTS:
            events.append(("", f"and {len(result.events) - _MAX_EVENTS:,} more", ""))
        blocks += [
            _Heading(3, "Cluster events"),
            _Table(("virtual time", "event", "detail"), events, numeric=frozenset({0})),
        ]
    return blocks


def _document(
    results: Sequence[RunResult], summaries: Sequence[Summary], figures: Sequence[_Figure]
) -> list[_Block]:
    first = summaries[0]
    several = len(summaries) > 1
    runs = (
        f"{len(summaries)} configurations ("
        + ", ".join(f"`{s.configuration}`" for s in summaries)
        + ") on the same workload"
        if several
        else f"configuration `{first.configuration}`"
    )
    blocks: list[_Block] = [
        _Heading(1, f"Simulation: {first.scenario}"),
        _Para(
            f"Scenario `{first.scenario}`, seed {first.seed}, {runs}; times are virtual. "
            "Every number below is in",
            link=("summary.json", "summary.json"),
        ),
    ]
    by_name = {f.src: f for f in figures}
    if several:
        blocks += [_Heading(2, "Comparison"), _comparison(summaries)]
        blocks += [by_name[n] for n in ("comparison.png",) if n in by_name]
    for result, summary in zip(results, summaries, strict=True):
        heading = f"Configuration: {summary.configuration}" if several else "Results"
        blocks += _run_blocks(result, summary, heading)
    blocks.append(_Heading(2, "Plots"))
    blocks += [f for f in figures if f.src != "comparison.png"]
    return blocks


# -- the folder -----------------------------------------------------------------------------


def _check_input(results: Sequence[RunResult], summaries: Sequence[Summary]) -> None:
    if not results:
        raise SchedulerError("no run to report: write_report needs at least one RunResult")
    if len(results) != len(summaries):
        raise SchedulerError(
            f"{len(results)} runs but {len(summaries)} summaries: "
            "pass one Summary per RunResult, in the same order"
        )
    for result, summary in zip(results, summaries, strict=True):
        if result.configuration != summary.configuration:
            raise SchedulerError(
                f"run {result.configuration!r} is paired with the summary of "
                f"{summary.configuration!r}: pass the summaries in the runs' order"
            )


def write_report(results: list[RunResult], summaries: list[Summary], folder: Path) -> list[Path]:
    """Write ``report.md``, ``index.html`` and the plots of ``results`` into ``folder``
    (made if missing) and return the paths written, the Markdown and the page first. With
    one run, a ``comparison.png`` an earlier run of several configurations left there is
    removed (no other file is touched).

    ``summaries[i]`` is the Summary of ``results[i]``. Raises :class:`PlotsUnavailable`
    without matplotlib (before writing anything), and ``SchedulerError`` when the two
    lists do not pair up.
    """
    _check_input(results, summaries)
    try:
        importlib.import_module("matplotlib")
    except ImportError:
        raise PlotsUnavailable(
            f"the simulation report's plots need matplotlib, which is not installed: {INSTALL_HINT}"
        ) from None
    from scheduler.simulate import _plots

    folder.mkdir(parents=True, exist_ok=True)
    with _plots.style():
        plots = [
            _plots.plot_utilization(results, folder),
            _plots.plot_queues(results, folder),
            _plots.plot_pending_time(results, summaries, folder),
            _plots.plot_gang_wait(results, summaries, folder),
            _plots.plot_preemptions(results, folder),
        ]
        if len(results) > 1:
            plots.append(_plots.plot_comparison(results, summaries, folder))
        else:  # one run: a comparison left by an earlier run of several would mislead
            (folder / COMPARISON).unlink(missing_ok=True)
    blocks = _document(results, summaries, [_Figure(p.name, p.caption) for p in plots])
    markdown = folder / "report.md"
    markdown.write_text(_markdown(blocks), encoding="utf-8")
    page = folder / "index.html"
    page.write_text(_html(blocks, f"Simulation: {summaries[0].scenario}"), encoding="utf-8")
    return [markdown, page, *(folder / p.name for p in plots)]
