"""The live view of ``scheduler simulate``: what it shows of a sample, the allocation rate,
and when it draws at all."""

from __future__ import annotations

import io

from rich.console import Console

from scheduler.cli._live import RATE_WINDOW, LiveView
from scheduler.simulate import QueueSample, Sample

GI = 1 << 30


def sample(time: float, *, allocations: int = 480, queues: int = 2) -> Sample:
    extra = [
        QueueSample(queue=f"root.team{i:02d}", allocated={}, guaranteed={}, max={}, pending={})
        for i in range(queues - 2)
    ]
    return Sample(
        time=time,
        capacity={"memory": 512 * GI, "vcore": 128_000},
        allocated={"memory": 384 * GI, "vcore": 32_500},
        pending_pods=37,
        running_pods=211,
        allocations=allocations,
        preemptions=9,
        gangs_waiting=3,
        gangs_running=5,
        queues=[
            QueueSample(
                queue="root",
                allocated={"memory": 384 * GI, "vcore": 32_500},
                guaranteed={},
                max={},
                pending={},
            ),
            QueueSample(
                queue="root.batch",
                allocated={"memory": 128 * GI, "vcore": 16_000},
                guaranteed={"memory": 256 * GI, "vcore": 64_000},
                max={"memory": 384 * GI},
                pending={"memory": 24 * GI, "vcore": 6_000},
            ),
            QueueSample(
                queue="root.service",
                allocated={"memory": 256 * GI, "vcore": 16_500},
                guaranteed={},
                max={},
                pending={},
            ),
            *extra,
        ],
    )


def shown(view: LiveView, width: int = 120) -> str:
    console = Console(record=True, width=width, file=io.StringIO())
    console.print(view)
    return console.export_text()


def test_the_view_shows_the_numbers_of_the_sample() -> None:
    view = LiveView(console=Console(file=io.StringIO()), enabled=False)
    view.update(sample(1800.0), configuration="fair", duration=3600.0)
    text = shown(view)
    assert "scheduler simulate: fair" in text
    assert "30m0s of 1h0m0s (50%)" in text
    assert "75%: 384Gi of 512Gi" in text  # memory
    assert "25%: 32500m of 128" in text  # vcore, as queues.yaml writes it
    assert "37 pending, 211 running" in text
    assert "480 so far" in text
    assert "3 waiting, 5 running" in text
    line = next(li for li in text.splitlines() if "preemptions" in li)
    assert line.split()[1:3] == ["preemptions", "9"]
    batch = next(li for li in text.splitlines() if "root.batch" in li)
    assert "memory 128Gi, vcore 16" in batch and "memory 256Gi, vcore 64" in batch
    assert "25%" in batch  # the furthest-below resource of its guarantee (vcore 16 of 64)
    assert "memory 24Gi, vcore 6" in batch  # pending
    assert "root " not in text.replace("root.", "")  # root itself is the cluster line


def test_the_allocation_rate_is_per_virtual_minute_over_the_last_samples() -> None:
    view = LiveView(console=Console(file=io.StringIO()), enabled=False)
    view.update(sample(0.0, allocations=0), configuration="fair", duration=3600.0)
    assert "0.0 per virtual minute" in shown(view)
    view.update(sample(60.0, allocations=90), configuration="fair", duration=3600.0)
    view.update(sample(120.0, allocations=150), configuration="fair", duration=3600.0)
    assert "75.0 per virtual minute" in shown(view)  # 150 in two minutes
    for minute in range(3, 3 + RATE_WINDOW):  # only the last samples count
        view.update(
            sample(60.0 * minute, allocations=150 + 10 * (minute - 2)),
            configuration="fair",
            duration=3600.0,
        )
    assert "10.0 per virtual minute" in shown(view)
    # A new configuration starts again from its own first sample.
    view.update(sample(0.0, allocations=0), configuration="fifo", duration=3600.0)
    view.update(sample(30.0, allocations=20), configuration="fifo", duration=3600.0)
    text = shown(view)
    assert "scheduler simulate: fifo" in text and "40.0 per virtual minute" in text


def test_the_queue_table_is_capped() -> None:
    view = LiveView(console=Console(file=io.StringIO()), enabled=False, max_queues=3)
    view.update(sample(60.0, queues=7), configuration="fair", duration=600.0)
    text = shown(view)
    assert "root.batch" in text and "root.service" in text and "root.team00" in text
    assert "root.team01" not in text and "… and 4 more" in text


def test_live_draws_on_a_terminal_and_leaves_the_last_picture() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=110, record=True)
    with LiveView(console=console) as view:  # a terminal: on by default
        view.update(sample(900.0), configuration="fair", duration=3600.0)
    assert "15m0s of 1h0m0s (25%)" in console.export_text()


def test_off_when_not_a_terminal_or_when_asked() -> None:
    out = io.StringIO()
    with LiveView(console=Console(file=out)) as view:  # a pipe
        view.update(sample(900.0), configuration="fair", duration=3600.0)
    assert out.getvalue() == ""
    out = io.StringIO()
    console = Console(file=out, force_terminal=True)
    with LiveView(console=console, enabled=False) as view:
        view.update(sample(900.0), configuration="fair", duration=3600.0)
    assert out.getvalue() == ""
    assert "15m0s of 1h0m0s" in shown(view)  # still recorded, for a caller that asks


def test_before_the_first_sample_it_says_it_is_starting() -> None:
    view = LiveView(console=Console(file=io.StringIO()), enabled=False)
    assert "starting" in shown(view)
