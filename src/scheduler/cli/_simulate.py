"""``scheduler simulate``: play a scenario file (or the built-in one) and write its report
folder (``summary.json``, ``report.md``, ``index.html`` and the plots), with the live view
of the run under way on stderr (``_live``).

``_app`` registers the command; this module imports nothing of ``_app`` (the log sinks
come through the typer context's object, which the app's callback sets).
"""

from __future__ import annotations

import asyncio
import math
import os
from pathlib import Path
from typing import Annotated, Any, NoReturn

import msgspec
import typer
from rich.console import Console

from scheduler._errors import ConfigError, SchedulerError
from scheduler.cli._live import LiveView
from scheduler.config._duration import parse_duration
from scheduler.config._parser import parse_config
from scheduler.config._quantity import format_resources
from scheduler.simulate import (
    RunResult,
    Sample,
    Scenario,
    ScenarioError,
    Summary,
    builtin_scenario,
    check_limits,
    load_scenario,
    run_scenario,
    summarize,
    with_overrides,
    write_summary,
)
from scheduler.simulate._replay import ReplayReport, replay
from scheduler.simulate._report import PlotsUnavailable, write_report

__all__ = ["simulate"]


def _duration(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise typer.BadParameter(f"{exc}: write a duration such as 90s, 30m or 2h") from None
    if seconds <= 0:
        raise typer.BadParameter("the duration must be above 0")
    return seconds


def simulate(
    ctx: typer.Context,
    scenario_file: Annotated[
        Path | None,
        typer.Argument(
            metavar="SCENARIO",
            help="A scenario file (YAML; docs/simulate.md); none: the built-in scenario.",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            metavar="DIR",
            help="The report folder: summary.json, report.md, index.html and the plots.",
        ),
    ] = Path("simulation-report"),
    seed: Annotated[
        int | None,
        typer.Option(
            min=0, metavar="N", help="Another seed than the scenario's.", show_default=False
        ),
    ] = None,
    duration: Annotated[
        str | None,
        typer.Option(
            metavar="DURATION",
            help="Another duration than the scenario's (90s, 30m, 2h).",
            show_default=False,
        ),
    ] = None,
    configuration: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="Play only this configuration of the scenario (default: each in turn).",
            show_default=False,
        ),
    ] = None,
    realtime: Annotated[
        bool, typer.Option("--realtime", help="Move virtual time with the wall clock.")
    ] = False,
    speed: Annotated[
        float,
        typer.Option(
            min=0.001, metavar="X", help="With --realtime or --connect: X times the wall clock."
        ),
    ] = 1.0,
    connect: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="Drive a running daemon (tcp://host:port, grpc://host:port, ...) instead of "
            "an in-process core; on the wall clock.",
            show_default=False,
        ),
    ] = None,
    token: Annotated[
        str,
        typer.Option(
            envvar="SCHEDULER_TOKEN", help="With --connect: the daemon's token.", show_default=False
        ),
    ] = "",
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress",
            help="The live view of the run on stderr (default: when stderr is a terminal).",
            show_default=False,
        ),
    ] = None,
    replay_file: Annotated[
        Path | None,
        typer.Option(
            "--replay",
            metavar="FILE",
            help="Play a recording of 'scheduler serve --record FILE' instead of a scenario, "
            "and report the decisions that differ (replay.json in --out).",
            show_default=False,
        ),
    ] = None,
    rotated: Annotated[
        bool,
        typer.Option("--rotated", help="With --replay: FILE's rotated files too, oldest first."),
    ] = False,
    queues: Annotated[
        Path | None,
        typer.Option(
            metavar="QUEUES_YAML",
            help="With --replay: replay with this queue configuration instead of the "
            "recorded one (what a changed policy would have decided).",
            show_default=False,
        ),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log what the core does to stderr.")
    ] = False,
) -> None:
    """Play a scenario against the core on virtual time and write its report folder.

    Without a SCENARIO it plays the built-in one: a few hundred nodes, three queues with
    guarantees, Spark-like gangs, batch jobs and a node failure. With --replay FILE it
    plays a recording of 'scheduler serve --record' instead and reports the decisions that
    differ from the recorded ones. Exit status: 0 when no node went over its capacity
    and no gang ran with part of its members (the report's other checks, such as every job
    finished, say how the workload fared and do not change it), or when every replayed
    decision is the same; 1 when not; 2 for a scenario or recording it cannot play, or a
    report folder it cannot write.
    """
    sinks = ctx.obj
    if verbose and hasattr(sinks, "configure"):
        sinks.configure(True, None)
    err = Console(stderr=True)
    if not math.isfinite(speed):
        raise typer.BadParameter(f"--speed must be a finite number, got {speed}")
    if replay_file is not None:
        if scenario_file is not None:
            raise typer.BadParameter("give a SCENARIO or --replay FILE, not both")
        _replay(replay_file, rotated, queues, out, err)
        return
    if queues is not None or rotated:
        raise typer.BadParameter("--queues and --rotated go with --replay FILE")
    try:
        scenario = load_scenario(scenario_file) if scenario_file else builtin_scenario()
        scenario = with_overrides(scenario, seed=seed, duration=_duration(duration))
        check_limits(scenario)  # again: --duration may have made it longer
        names = [configuration] if configuration else [c.name for c in scenario.configurations]
        for name in names:
            scenario.configuration(name)
    except ScenarioError as exc:
        _stop(err, str(exc))
    _check_out(out, err)
    show = progress if progress is not None else err.is_terminal
    results: list[RunResult] = []
    try:
        for name in names:
            results.append(_play(scenario, name, err, show, realtime, speed, connect, token))
    except ScenarioError as exc:
        _stop(err, str(exc))
    except (OSError, SchedulerError) as exc:  # --connect: a bad address, or no daemon there
        _stop(err, f"scheduler simulate: {exc}")
    path = write_summary(results, out)
    summaries = [summarize(r) for r in results]
    stdout = Console(markup=False, highlight=False, emoji=False)
    for s in summaries:
        _headline(stdout, s)
    try:
        write_report(results, summaries, out)
    except PlotsUnavailable as exc:  # summary.json is written: say what the rest needs
        err.print(f"scheduler simulate: no report.md or plots: {exc}", markup=False)
        stdout.print(f"summary: {path}", soft_wrap=True)
    else:
        stdout.print(f"report: {out / 'index.html'} (and report.md, summary.json)", soft_wrap=True)
    if not all(_checks_hold(s) for s in summaries):
        raise typer.Exit(1)


def _stop(err: Console, message: str) -> NoReturn:
    """Say on stderr, as written, what stops the command (a scenario or recording it
    cannot play, an option it cannot take), and exit 2."""
    err.print(message, markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def _check_out(out: Path, err: Console) -> None:
    """``--out`` must be a folder this process can make (or has) and write in: said
    before a run that could take minutes, never as a traceback after it. Nothing is made
    here: a run that fails leaves no folder behind."""
    problem = ""
    if out.exists():
        if not out.is_dir():
            problem = "that is a file; name a folder (it is made if missing)"
        elif not os.access(out, os.W_OK | os.X_OK):
            problem = "cannot write in that folder"
    else:
        parent = out.absolute().parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir():
            problem = f"cannot make the folder: {parent} is a file"
        elif not os.access(parent, os.W_OK | os.X_OK):
            problem = f"cannot make the folder: cannot write in {parent}"
    if problem:
        _stop(err, f"scheduler simulate: --out {out}: {problem}")


def _play(
    scenario: Scenario,
    name: str,
    err: Console,
    show: bool,
    realtime: bool,
    speed: float,
    connect: str | None,
    token: str,
) -> RunResult:
    options: dict[str, Any] = {"realtime": realtime, "speed": speed, "connect": connect}
    if connect is not None:
        options["token"] = token
    with LiveView(console=err, enabled=show) as view:

        def on_sample(sample: Sample) -> None:
            view.update(sample, configuration=name, duration=scenario.duration)

        return asyncio.run(
            run_scenario(scenario, configuration=name, on_sample=on_sample, **options)
        )


def _replay(path: Path, rotated: bool, queues: Path | None, out: Path, err: Console) -> None:
    """``--replay``: play the recording, write ``replay.json`` and print what differs;
    exit 1 when a decision differs, 2 when the recording cannot be played."""
    try:
        config = queues.read_text() if queues is not None else None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not a text file"
        _stop(err, f"scheduler simulate: --queues {queues}: {reason}")
    if config is not None:
        try:  # every problem said before playing, not as differences after it
            parse_config(config)
        except ConfigError as exc:
            _stop(err, f"scheduler simulate: --queues {queues}: {exc}")
    _check_out(out, err)
    try:
        report = asyncio.run(replay(path, rotated=rotated, config=config))
    except SchedulerError as exc:
        _stop(err, f"scheduler simulate: {exc}")
    out.mkdir(parents=True, exist_ok=True)
    written = out / "replay.json"
    written.write_bytes(msgspec.json.format(msgspec.json.encode(report.to_dict())) + b"\n")
    _replay_headline(Console(markup=False, highlight=False, emoji=False), report, written)
    if not report.same:
        raise typer.Exit(1)


def _replay_headline(out: Console, report: ReplayReport, written: Path) -> None:
    matched = ", ".join(f"{n:,} {kind}" for kind, n in sorted(report.matched.items()))
    out.print(
        f"replayed {len(report.files)} file(s): {report.records:,} records, "
        f"{report.requests:,} requests, {report.duration:,.0f}s of recorded time",
        soft_wrap=True,
    )
    out.print(f"  same decisions: {matched or 'none'}", soft_wrap=True)
    for note in report.notes:
        out.print(f"  note: {note}", soft_wrap=True)
    shown = report.differences[:_SHOWN]
    out.print(f"  differences: {len(report.differences):,}", soft_wrap=True)
    for d in shown:
        out.print(
            f"    {d.time:,.1f}s {d.kind} {d.key}: recorded {d.recorded or '-'}, "
            f"replayed {d.replayed or '-'}",
            soft_wrap=True,
        )
    if len(report.differences) > len(shown):
        out.print(f"    ... {len(report.differences) - len(shown):,} more in {written}")
    out.print(f"report: {written}", soft_wrap=True)


_SHOWN = 20  # differences printed; replay.json has them all


def _checks_hold(s: Summary) -> bool:
    c = s.checks
    return not c.over_capacity and not c.partial_gangs


def _headline(out: Console, s: Summary) -> None:
    from scheduler.simulate._units import counted, short_duration

    c = s.checks
    util = ", ".join(f"{k} {v:.0%}" for k, v in s.utilization.items()) or "-"
    out.print(
        f"{s.scenario} [{s.configuration}] seed {s.seed}: "
        f"{short_duration(s.duration)} virtual in {s.wall_seconds:.1f}s wall "
        f"({s.pods_per_wall_second:,.0f} pods/s)",
        soft_wrap=True,
    )
    out.print(
        f"  jobs {c.jobs_finished:,}/{c.jobs_submitted:,} finished ({s.jobs_failed} failed); "
        f"pods {s.pods_allocated:,}/{s.pods_submitted:,} placed, {s.preemptions:,} preempted, "
        f"{s.pods_lost:,} lost; gangs {c.gangs_whole}/{c.gangs} whole",
        soft_wrap=True,
    )
    out.print(
        f"  pending p50 {short_duration(s.pending_time.p50)} "
        f"p90 {short_duration(s.pending_time.p90)} "
        f"p99 {short_duration(s.pending_time.p99)}; utilization {util}",
        soft_wrap=True,
    )
    if s.jobs_rejected:
        first = c.rejected_jobs[0] if c.rejected_jobs else "-"
        out.print(
            f"  rejected by the core: {counted(s.jobs_rejected, 'job')}, first: {first}",
            soft_wrap=True,
        )
    missed = [q for q, ok in c.guarantees_reached.items() if not ok]
    out.print(
        f"  checks: over capacity {len(c.over_capacity)}, partial gangs {len(c.partial_gangs)}, "
        f"guarantees missed {', '.join(missed) or 'none'}",
        soft_wrap=True,
    )
    for q in s.queues:
        if q.guaranteed:
            out.print(
                f"    {q.queue}: guaranteed {format_resources(q.guaranteed, sep='=')}, "
                f"peak {format_resources(q.peak, sep='=') or '-'}, "
                f"starved {short_duration(q.starved_seconds)}",
                soft_wrap=True,
            )
