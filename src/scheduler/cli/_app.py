"""The ``scheduler`` command line (typer for options and help, rich for tables and progress).

The CLI owns the terminal and the log sinks: the library is silent until ``-v`` or
``--log-level`` (accepted before or after the command) turns its loggers on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Final

import typer
from loguru import logger
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

import scheduler
from scheduler._errors import SchedulerError
from scheduler.cli._demo import Report, Section, demo_steps, run_demo
from scheduler.cli._simulate import simulate
from scheduler.config._check import CheckResult, check_config
from scheduler.config._quantity import format_resources
from scheduler.daemon._native import Limits
from scheduler.daemon._serve import DaemonOptions, run_daemon
from scheduler.simulate._units import counted

__all__ = ["app", "main"]

PIPE_WIDTH: Final = 240  # columns when stdout is not a terminal: tables stay on one line
LARGE_RUN: Final = 1_000  # nodes from which the demo shows progress on a terminal
_LOGGERS: Final = ("scheduler", "actors")


class LogLevel(StrEnum):
    TRACE = "TRACE"
    DEBUG = "DEBUG"
    INFO = "INFO"
    SUCCESS = "SUCCESS"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRITICAL = "CRITICAL"


class _LogSinks:
    """The one stderr sink the CLI adds, when asked to log; removed when ``main`` returns."""

    def __init__(self) -> None:
        self.sink_id: int | None = None

    def configure(self, verbose: bool, level: LogLevel | None, *, json: bool = False) -> None:
        if not verbose and level is None:
            return
        self.close()
        for name in _LOGGERS:
            logger.enable(name)
        level_name = str(level or LogLevel.DEBUG)
        if json:  # one JSON object a line, for a log collector
            self.sink_id = logger.add(sys.stderr, level=level_name, serialize=True)
        else:
            self.sink_id = logger.add(sys.stderr, level=level_name, format=_fmt)

    def close(self) -> None:
        if self.sink_id is not None:
            with contextlib.suppress(ValueError):
                logger.remove(self.sink_id)
            self.sink_id = None


def _fmt(record: Any) -> str:
    extra = " <dim>{extra}</dim>" if record["extra"] else ""
    return (
        "<green>{time:HH:mm:ss.SSS}</green> <level>{level: <8}</level> "
        "<cyan>{name}</cyan> {message}" + extra + "\n{exception}"
    )


Verbose = Annotated[
    bool,
    typer.Option(
        "--verbose", "-v", help="Log what the core does to stderr (from DEBUG unless --log-level)."
    ),
]
Level = Annotated[
    LogLevel | None,
    typer.Option(
        "--log-level",
        metavar="LEVEL",
        case_sensitive=False,
        help="Log to stderr from LEVEL up: TRACE, DEBUG, INFO, SUCCESS, WARNING, ERROR, CRITICAL.",
        show_default=False,
    ),
]

app = typer.Typer(
    name="scheduler",
    help="Apache YuniKorn's scheduler core in Python: serve it to RMs, check a queues.yaml, "
    "or watch a demo run.",
    epilog="-v and --log-level work before or after the command. The library logs nothing "
    "unless one of them is given.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain click help and errors: readable in a pipe and a terminal
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"scheduler (pyscheduler-core) {scheduler.__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    verbose: Verbose = False,
    log_level: Level = None,
) -> None:
    _sinks(ctx).configure(verbose, log_level)


def _sinks(ctx: typer.Context) -> _LogSinks:
    if not isinstance(ctx.obj, _LogSinks):
        ctx.obj = _LogSinks()
    return ctx.obj


# =================================================================================== serve
MAX_TIMEOUT: Final = 86_400.0  # seconds; gRPC's keepalive counts milliseconds in 32 bits


def _seconds(value: float) -> float:
    """A timeout: above 0, at most a day (click names the option and exits 2 otherwise)."""
    if not 0 < value <= MAX_TIMEOUT:  # NaN too
        raise typer.BadParameter(f"{value:g}: say seconds above 0, at most {MAX_TIMEOUT:g}")
    return value


def _timeout(help_text: str) -> Any:
    return typer.Option(metavar="SECONDS", callback=_seconds, help=help_text)


@app.command(short_help="Run the core as a daemon that RMs connect to.")
def serve(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            metavar="FILE",
            help="queues.yaml for RMs that register without one; watched, and reloaded on "
            "change (an invalid change is logged and the old configuration stays).",
            show_default=False,
        ),
    ] = None,
    native: Annotated[
        str,
        typer.Option(
            metavar="ADDRESS",
            help="Where RMs connect with scheduler.client: tcp://host:port (port 0: a free "
            "one; tls://host:port with --tls-cert) or unix:///path.",
        ),
    ] = "tcp://127.0.0.1:9091",
    http: Annotated[
        str,
        typer.Option(
            metavar="HOST:PORT",
            help="Where the REST API (YuniKorn's /ws/v1/...) and the metrics are served "
            "(port 0: a free one).",
        ),
    ] = "127.0.0.1:9080",
    grpc: Annotated[
        str,
        typer.Option(
            metavar="HOST:PORT",
            help="Where the SI gRPC service (si.proto: Scheduler and SchedulerExtensions) "
            "is served, for scheduler.client.connect('grpc://host:port') and other gRPC "
            "clients (port 0: a free one; an empty value: none).",
        ),
    ] = "127.0.0.1:9090",
    token: Annotated[
        str,
        typer.Option(
            envvar="SCHEDULER_TOKEN",
            help="A shared token every RM must present (also $SCHEDULER_TOKEN).",
            show_default=False,
        ),
    ] = "",
    tls_cert: Annotated[
        Path | None,
        typer.Option(
            "--tls-cert",
            metavar="FILE",
            help="A PEM certificate (chain) for the daemon; with --tls-key, every listener "
            "serves TLS: native tls://, HTTP https://, gRPC grpcs://.",
            show_default=False,
        ),
    ] = None,
    tls_key: Annotated[
        Path | None,
        typer.Option(
            "--tls-key",
            metavar="FILE",
            help="The PEM private key of --tls-cert.",
            show_default=False,
        ),
    ] = None,
    tls_client_ca: Annotated[
        Path | None,
        typer.Option(
            "--tls-client-ca",
            metavar="FILE",
            help="Mutual TLS (with --tls-cert): every listener requires a client "
            "certificate signed by a CA of this PEM file.",
            show_default=False,
        ),
    ] = None,
    max_frame: Annotated[
        int, typer.Option(min=1024, metavar="BYTES", help="The largest frame an RM may send.")
    ] = Limits().max_frame,
    max_asks: Annotated[
        int, typer.Option(min=1, metavar="N", help="Asks in one AllocationRequest.")
    ] = Limits().max_asks,
    max_id: Annotated[
        int,
        typer.Option(min=1, metavar="N", help="Characters in a node, application or ask id."),
    ] = Limits().max_id,
    max_backlog: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="N",
            help="Frames that may wait for an RM before it is disconnected as too slow.",
        ),
    ] = Limits().max_backlog,
    hello_timeout: Annotated[
        float,
        _timeout(
            "How long a new connection may take to introduce itself: an RM its hello "
            "(native and gRPC session), an HTTP client its request's head (also each "
            "later request's, from its first byte)."
        ),
    ] = Limits().hello_timeout,
    idle_timeout: Annotated[
        float,
        _timeout(
            "An RM connection the daemon hears nothing from is pinged after a third of "
            "this, and closed after all of it (native: Ping/Pong; gRPC: HTTP/2 keepalive, "
            "which also closes a connection without calls after this)."
        ),
    ] = Limits().idle_timeout,
    write_timeout: Annotated[
        float,
        _timeout(
            "How long a peer may leave a send untaken (its TCP or HTTP/2 window full) "
            "before it is cut off: an RM over native or gRPC, an HTTP client of the REST API."
        ),
    ] = Limits().write_timeout,
    grace: Annotated[
        float,
        typer.Option(
            min=0.0,
            metavar="SECONDS",
            help="How long SIGTERM/SIGINT waits for RMs' calls in flight.",
        ),
    ] = 10.0,
    rm_timeout: Annotated[
        float,
        typer.Option(
            "--rm-timeout",
            min=0.0,
            metavar="SECONDS",
            help="How long an RM that lost its connection stays Paused (its state kept, "
            "its partitions its own) before it is Stopped and its state dropped, unless "
            "it registers again.",
        ),
    ] = 60.0,
    keep_terminated: Annotated[
        int,
        typer.Option(
            "--keep-terminated",
            min=0,
            metavar="N",
            help="How many Completed, Failed or Rejected applications each partition keeps "
            "(for the REST API) before the oldest expires early.",
        ),
    ] = scheduler.Timeouts.terminated_kept,
    record: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="Record every SI request and response with its time, for scheduler "
            "simulate --replay (docs/record-replay.md).",
            show_default=False,
        ),
    ] = None,
    record_max_bytes: Annotated[
        int, typer.Option(min=1, metavar="BYTES", help="Rotate the recording past this size.")
    ] = DaemonOptions.record_max_bytes,
    record_keep: Annotated[
        int, typer.Option(min=1, metavar="N", help="Recording files kept (FILE, FILE.1, ...).")
    ] = DaemonOptions.record_keep,
    log_json: Annotated[
        bool, typer.Option("--log-json", help="Log one JSON object a line.")
    ] = False,
    verbose: Verbose = False,
    log_level: Level = None,
) -> None:
    """Serve the core to RMs over the network until SIGTERM or SIGINT.

    Prints each address it bound ("native tcp://127.0.0.1:9091") and then "ready" on
    stdout. Logs to stderr from INFO unless --log-level says otherwise.
    """
    _sinks(ctx).configure(True, log_level or LogLevel.INFO, json=log_json)
    options = DaemonOptions(
        config=config,
        native=native,
        http=http,
        grpc=grpc,
        token=token,
        tls_cert=tls_cert,
        tls_key=tls_key,
        tls_client_ca=tls_client_ca,
        grace=grace,
        rm_timeout=rm_timeout,
        keep_terminated=keep_terminated,
        record=record,
        record_max_bytes=record_max_bytes,
        record_keep=record_keep,
        limits=Limits(
            max_frame=max_frame,
            max_asks=max_asks,
            max_id=max_id,
            max_backlog=max_backlog,
            hello_timeout=hello_timeout,
            idle_timeout=idle_timeout,
            write_timeout=write_timeout,
        ),
    )
    try:
        code = asyncio.run(run_daemon(options))
    except SchedulerError as exc:
        typer.echo(f"scheduler serve: {exc}", err=True)
        raise typer.Exit(2) from None
    except OSError as exc:  # each listener names its own address (SchedulerError above)
        typer.echo(f"scheduler serve: {exc.strerror or exc}", err=True)
        raise typer.Exit(2) from None
    raise typer.Exit(code)


# ============================================================================ check-config
@app.command("check-config", short_help="Validate a queues.yaml and list its problems.")
def check_config_command(
    ctx: typer.Context,
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="The queues.yaml to check; '-' reads standard input.",
            show_default=False,
        ),
    ],
    verbose: Verbose = False,
    log_level: Level = None,
) -> None:
    """Check a queues.yaml as the core would; print each problem with its line and column.

    Exit status: 0 when the file is valid, 1 when it has problems, 2 when it cannot be read.
    """
    _sinks(ctx).configure(verbose, log_level)
    text = _read(file)
    result = check_config(text)
    out = _console()
    name = "<stdin>" if str(file) == "-" else str(file)
    with _quiet_on_closed_pipe():
        if result.problems:
            _print_problems(out, name, result)
            raise typer.Exit(1)
        _print_summary(out, name, result)


def _read(file: Path) -> str:
    try:
        return sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        typer.echo(f"scheduler check-config: cannot read {str(file)!r}: {reason}", err=True)
        raise typer.Exit(2) from None


def _print_problems(out: Console, name: str, result: CheckResult) -> None:
    for p in result.problems:
        where = f"{name}:{p.line}:{p.column}" if p.line else name
        out.print(f"{where}: {p.message}", soft_wrap=True)
    note = (
        "(a queue with a problem of its own is left out of the checks across queues)"
        if result.readable
        else "(the rest of the file is checked once its YAML can be read)"
    )
    out.print(f"{counted(len(result.problems), 'problem')} in {name} {note}", soft_wrap=True)


def _print_summary(out: Console, name: str, result: CheckResult) -> None:
    what = "empty: the core uses its built-in default configuration; " if result.default else ""
    out.print(
        f"{name} is valid: {what}{counted(len(result.partitions), 'partition')}, "
        f"{counted(result.queues(), 'queue')}",
        soft_wrap=True,
    )
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for column in ("partition", "queues", "placement rules", "node sort policy"):
        table.add_column(column)
    for p in result.partitions:
        rules = ", ".join(r.name for r in p.placement_rules) or "-"
        table.add_row(p.name, str(_count_queues(p)), rules, p.node_sort_policy.type or "fair")
    out.print(table)


def _count_queues(partition: Any) -> int:
    return CheckResult(partitions=[partition]).queues()


# ============================================================================ demo
@app.command(short_help="Run a demo scenario and print the core's state.")
def demo(
    ctx: typer.Context,
    nodes: Annotated[
        int,
        typer.Option(
            min=1, metavar="N", help="Nodes to register, each with 8Gi of memory and 4 vcores."
        ),
    ] = 3,
    tasks: Annotated[
        int,
        typer.Option(
            min=1,
            metavar="N",
            help="Tasks per application: the gang's placeholders and real tasks, and the "
            "plain application's asks.",
        ),
    ] = 4,
    max_rows: Annotated[
        int,
        typer.Option(
            min=0,
            metavar="N",
            help="Rows shown per table; the others are counted. 0 shows every row.",
        ),
    ] = 20,
    progress: Annotated[
        bool | None,
        typer.Option(
            "--progress/--no-progress",
            help=f"A progress bar on stderr. Default: on for {LARGE_RUN:,} nodes or more when "
            "stderr is a terminal.",
            show_default=False,
        ),
    ] = None,
    verbose: Verbose = False,
    log_level: Level = None,
) -> None:
    """Run a short scenario in-process on a manual clock and print what happened.

    Nodes, a gang application whose placeholders real tasks replace, and a plain
    application, in two dynamic queues; the core's state is printed as tables at three
    moments.
    """
    _sinks(ctx).configure(verbose, log_level)
    out = _console()
    err = Console(stderr=True)
    show = progress if progress is not None else (nodes >= LARGE_RUN and err.is_terminal)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=not show,
    )
    step = bar.add_task("starting", total=demo_steps(nodes))

    def advance(description: str) -> None:
        bar.update(step, advance=1, description=description)

    with _quiet_on_closed_pipe(), bar:
        asyncio.run(
            run_demo(
                nodes=nodes,
                tasks=tasks,
                on_report=lambda report: _print_report(out, report, max_rows),
                on_step=advance,
            )
        )


def _print_report(out: Console, report: Report, max_rows: int) -> None:
    out.print(Text(f"== {report.moment} ==", style="bold"))
    for section in report.sections:
        out.print(_table(section, max_rows))
        out.print()


def _table(section: Section, max_rows: int) -> Table:
    table = Table(
        title=section.title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        header_style="bold",
    )
    for column in section.header:
        table.add_column(column)
    shown = section.rows if max_rows == 0 else section.rows[:max_rows]
    for row in shown:
        table.add_row(*(_cell(c) for c in row))
    if not section.rows:
        table.add_row("(none)")
    elif len(shown) < len(section.rows):
        table.add_row(Text(f"… and {len(section.rows) - len(shown):,} more", style="dim"))
    return table


def _cell(value: Any) -> str:
    if isinstance(value, dict):  # a resource map: the units check-config and the page use
        return format_resources(value, sep="=") or "-"
    return str(value)


app.command(short_help="Play a scenario on virtual time and write its report.")(simulate)


# ============================================================================ terminal
def _console() -> Console:
    """Standard output; wide when it is not a terminal, so piped tables keep one line a row."""
    width = None if sys.stdout.isatty() else PIPE_WIDTH
    return Console(width=width, markup=False, highlight=False, emoji=False)


@contextlib.contextmanager
def _quiet_on_closed_pipe() -> Iterator[None]:
    try:
        yield
    except BrokenPipeError:
        raise typer.Exit(_stdout_closed()) from None


def _stdout_closed() -> int:
    """The reader of stdout went away (``scheduler demo | head``). As the ``signal`` module's
    note on SIGPIPE does: send the rest of stdout to devnull, so that the flush at exit does
    not fail too, and exit with status 1."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``scheduler`` command line with ``argv`` (default: ``sys.argv[1:]``).

    Returns the exit status: 0 on success, 1 on a problem found (or a closed pipe), 2 on a
    usage error. A user's mistake gets a message, never a traceback.
    """
    with contextlib.suppress(ValueError):
        logger.remove(0)  # loguru's default sink: the CLI adds its own when asked to log
    sinks = _LogSinks()
    command = typer.main.get_command(app)
    try:
        command.main(list(argv) if argv is not None else None, "scheduler", obj=sinks)
        code: int | str | None = 0  # standalone mode always exits; this is for the checker
    except SystemExit as exc:  # typer's standalone mode: usage errors shown, status set
        code = exc.code
    finally:
        sinks.close()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return _stdout_closed()
    if isinstance(code, str):  # sys.exit("message"): shown on stderr, status 1
        typer.echo(code, err=True)
        return 1
    return code or 0
