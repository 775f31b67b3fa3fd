"""The live view of ``scheduler simulate``: the cluster of the run under way, on stderr.

The engine hands each sample it takes to ``LiveView.update``; the view keeps the latest
one and what it needs for the allocation rate, and rich's ``Live`` redraws it a few times a
second from its own refresh thread. An update costs a few assignments, so a run that takes
thousands of samples a second is not slowed by its screen.

The view is off when stderr is not a terminal (a pipe, CI, a log file) or when the user
asks (``enabled=False``): updates are then only recorded, and nothing is written.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from types import TracebackType
from typing import Final

from rich import box
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from scheduler.config._quantity import MEMORY, VCORE, format_quantity, format_resources
from scheduler.simulate._result import QueueSample, Sample
from scheduler.simulate._units import short_duration

__all__ = ["RATE_WINDOW", "LiveView"]

RATE_WINDOW: Final = 10  # samples the allocation rate is measured over
_BAR: Final = 32  # columns of a bar


@dataclass(frozen=True)
class _State:
    """What the view shows: one sample of one run and the allocation rate up to it."""

    sample: Sample
    configuration: str
    duration: float
    rate: float  # allocations per virtual minute over the last samples


class LiveView:
    """A rich ``Live`` display of a simulation's progress: virtual time, pods, allocation
    rate, utilization, gangs, preemptions and the queues' usage against their guarantee.

    A context manager: the display runs inside the ``with`` and leaves its last picture on
    the terminal. ``console`` defaults to stderr; ``enabled`` to whether that is a
    terminal. ``max_queues`` caps the queue table (the others are counted).
    """

    def __init__(
        self,
        *,
        console: Console | None = None,
        enabled: bool | None = None,
        refresh_per_second: float = 4.0,
        max_queues: int = 8,
    ) -> None:
        self.console = console if console is not None else Console(stderr=True)
        self.enabled = self.console.is_terminal if enabled is None else enabled
        self.max_queues = max_queues
        self._state: _State | None = None
        self._history: deque[tuple[float, int]] = deque(maxlen=RATE_WINDOW)
        self._live: Live | None = None
        self._refresh = refresh_per_second

    def __enter__(self) -> LiveView:
        if self.enabled:
            self._live = Live(
                get_renderable=self.renderable,
                console=self.console,
                refresh_per_second=self._refresh,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.stop()  # draws the last sample once more, and leaves it there
            self._live = None

    def update(self, sample: Sample, *, configuration: str, duration: float) -> None:
        """Show ``sample`` of the run of ``configuration`` (``duration`` virtual seconds in
        all). A new configuration, or time going back, starts the rate afresh."""
        last = self._state
        if last is None or last.configuration != configuration or sample.time < last.sample.time:
            self._history.clear()
        self._history.append((sample.time, sample.allocations))
        (t0, a0), (t1, a1) = self._history[0], self._history[-1]
        rate = (a1 - a0) * 60.0 / (t1 - t0) if t1 > t0 else 0.0
        self._state = _State(sample, configuration, duration, rate)

    # -- what it draws ----------------------------------------------------------------------

    def __rich__(self) -> RenderableType:
        return self.renderable()

    def renderable(self) -> RenderableType:
        """The picture of the latest sample (a line saying so before the first)."""
        state = self._state
        if state is None:
            return Text("scheduler simulate: starting", style="dim")
        s = state.sample
        facts = Table.grid(padding=(0, 2))
        facts.add_column(style="bold", no_wrap=True)
        facts.add_column(no_wrap=True)
        facts.add_column(no_wrap=True)
        done = min(s.time, state.duration)
        facts.add_row(
            "virtual time",
            ProgressBar(total=max(state.duration, 1e-9), completed=done, width=_BAR),
            f"{short_duration(s.time)} of {short_duration(state.duration)} "
            f"({_percent(done, state.duration)})",
        )
        for name in _resources(s):
            capacity, used = s.capacity.get(name, 0), s.allocated.get(name, 0)
            facts.add_row(
                f"{name} used",
                ProgressBar(total=max(capacity, 1), completed=min(used, capacity), width=_BAR),
                f"{_percent(used, capacity)}: {format_quantity(name, used)} of "
                f"{format_quantity(name, capacity)}",
            )
        facts.add_row("pods", f"{s.pending_pods:,} pending, {s.running_pods:,} running")
        facts.add_row(
            "allocations", f"{s.allocations:,} so far, {state.rate:,.1f} per virtual minute"
        )
        facts.add_row("gangs", f"{s.gangs_waiting:,} waiting, {s.gangs_running:,} running")
        facts.add_row("preemptions", f"{s.preemptions:,}")
        return Panel(
            Group(facts, Text(), self._queues(s.queues)),
            title=f"scheduler simulate: {state.configuration}",
            title_align="left",
            box=box.ROUNDED,
            expand=False,
        )

    def _queues(self, queues: list[QueueSample]) -> Table:
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, header_style="bold")
        for column, right in (
            ("queue", False),
            ("allocated", False),
            ("guaranteed", False),
            ("of guarantee", True),
            ("pending", False),
        ):
            table.add_column(column, justify="right" if right else "left", no_wrap=True)
        below_root = sorted((q for q in queues if q.queue != "root"), key=lambda q: q.queue)
        shown = below_root[: self.max_queues]
        for q in shown:
            table.add_row(
                q.queue,
                format_resources(q.allocated, sep=" ") or "-",
                format_resources(q.guaranteed, sep=" ") or "-",
                _share(q),
                format_resources(q.pending, sep=" ") or "-",
            )
        if len(shown) < len(below_root):
            table.add_row(Text(f"… and {len(below_root) - len(shown):,} more", style="dim"))
        return table


def _resources(sample: Sample) -> list[str]:
    """Memory and vcore, then any other resource the nodes have, by name."""
    others = sorted(n for n in sample.capacity if n not in (MEMORY, VCORE))
    return [MEMORY, VCORE, *others]


def _percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole > 0 else "-"


def _share(q: QueueSample) -> str:
    """Allocated over guaranteed in the guaranteed resource the queue is furthest below
    (the one that decides whether it has its guarantee)."""
    shares = [q.allocated.get(n, 0) / g for n, g in q.guaranteed.items() if g > 0]
    return f"{100 * min(shares):.0f}%" if shares else "-"
