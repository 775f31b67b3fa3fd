"""``scheduler simulate`` end to end, the contention suite in scenarios/, and --connect
against a daemon."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from scheduler.cli._app import app
from scheduler.simulate import load_scenario, run_scenario, summarize, with_overrides
from scheduler.simulate._report import REPORT_FILES
from scheduler.testing import DaemonProcess

from ..daemon.test_record import serving, session
from .conftest import scenario
from .test_replay import BINPACKING

ROOT = Path(__file__).resolve().parents[3]
TINY = """\
name: tiny
seed: 5
duration: 10m
nodes:
  - {group: w, count: 2, capacity: {memory: 8Gi, vcore: 4}}
workloads:
  - name: jobs
    namespace: dev
    arrivals: {fixed: [0s, 1m, 2m]}
    job: {kind: batch, pods: 2, resource: {memory: 1Gi, vcore: 1}, runtime: 2m}
"""


def test_the_command_writes_the_report_folder_and_prints_headlines(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["simulate", str(path), "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    runs = json.loads((out / "summary.json").read_text())["runs"]
    (run,) = runs
    assert run["scenario"] == "tiny" and run["seed"] == 5 and run["duration"] == 600.0
    assert run["pods_submitted"] == run["pods_finished"] == 6
    assert run["checks"]["all_finished"] and run["checks"]["over_capacity"] == []
    assert "jobs 3/3 finished" in result.output and "index.html" in result.output
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted(["summary.json", *REPORT_FILES]), written  # one run: no comparison
    assert "6 submitted, 6 allocated, 6 finished" in (out / "report.md").read_text()


def test_the_command_takes_seed_and_duration_overrides(tmp_path: Path) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    out = tmp_path / "r"
    args = ["simulate", str(path), "--out", str(out), "--seed", "9", "--duration", "3m"]
    result = CliRunner().invoke(app, [*args, "--no-progress"])
    assert result.exit_code == 0, result.output
    (run,) = json.loads((out / "summary.json").read_text())["runs"]
    assert run["seed"] == 9 and run["duration"] == 180.0


def test_a_scenario_error_is_printed_with_its_place_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(TINY.replace("count: 2,", "count: 2, colour: red,"))
    result = CliRunner().invoke(app, ["simulate", str(path), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert f"{path}:5:26:" in result.output and "unknown key 'colour'" in result.output
    assert not (tmp_path / "r").exists()


SUITE = {
    "gangs-one-quota": "30m",
    "large-gang-small-jobs": "40m",
    "guarantee-starvation": "30m",
    "deep-backlog": "30m",
    "preemption-storm": "20m",
}


@pytest.mark.asyncio
@pytest.mark.parametrize("name", sorted(SUITE))
async def test_each_scenario_of_the_suite_holds_its_checks(name: str) -> None:
    s = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    short = with_overrides(s, duration=float(SUITE[name][:-1]) * 60)
    summary = summarize(await run_scenario(short))
    c = summary.checks
    assert c.over_capacity == [] and c.partial_gangs == []
    assert summary.pods_allocated > 0
    if name == "gangs-one-quota":
        assert c.gangs == 3 and c.gangs_whole == 3
        assert summary.gang_wait.max > 0  # the third gang waited for room, whole
        (spark,) = [q for q in summary.queues if q.queue == "root.spark"]
        assert spark.peak["vcore"] <= spark.max["vcore"]
    if name == "guarantee-starvation":
        assert summary.preemptions > 0 and c.guarantees_reached["root.interactive"]
    if name == "large-gang-small-jobs":
        assert c.gangs_whole == 1
        assert summary.gang_wait.max > 300  # it waited for the full cluster to make room
    if name == "deep-backlog":
        assert summary.pending_time.p90 > 60  # a backlog: pods wait


@pytest.mark.asyncio
async def test_connect_drives_a_daemon_on_the_wall_clock(tmp_path: Path) -> None:
    s = scenario(
        """\
workloads:
  - name: jobs
    queue: root.a
    arrivals: {fixed: [0s, 2s]}
    job: {kind: batch, pods: 2, resource: {memory: 1Gi, vcore: 1}, runtime: 3s}
""",
        duration="8s",
    )
    with DaemonProcess(log=tmp_path / "daemon.log") as daemon:
        result = await run_scenario(s, connect=daemon.native, speed=2.0)
    summary = summarize(result)
    assert summary.pods_finished == 4 and summary.checks.all_finished
    assert summary.checks.over_capacity == []
    assert result.wall_seconds >= 3.5  # 8 virtual seconds at twice the wall clock


def test_replay_writes_replay_json_and_exits_1_when_a_decision_differs(tmp_path: Path) -> None:
    """``scheduler simulate --replay FILE``: a daemon session replayed decides the same
    (exit 0); replayed with binpacking instead of the recorded fair sorting, the command
    prints the allocation that went elsewhere and exits 1; a missing file exits 2."""
    recording = tmp_path / "si.rec"

    async def record() -> None:
        async with serving(recording) as addresses:
            await session(addresses["native"])

    asyncio.run(record())
    same = CliRunner().invoke(app, ["simulate", "--replay", str(recording), "--out", str(tmp_path)])
    assert same.exit_code == 0, same.output
    assert "differences: 0" in same.output
    assert json.loads((tmp_path / "replay.json").read_text())["same"] is True

    binpacking = tmp_path / "binpacking.yaml"
    binpacking.write_text(BINPACKING)
    other = tmp_path / "other"
    args = ["--replay", str(recording), "--queues", str(binpacking), "--out", str(other)]
    changed = CliRunner().invoke(app, ["simulate", *args])
    assert changed.exit_code == 1, changed.output
    assert "allocation p: recorded n1, n1, n2, replayed n1, n1, n1" in changed.output
    differences = json.loads((other / "replay.json").read_text())["differences"]
    keys = [(d["kind"], d["key"]) for d in differences]  # the gang packed on n1 too
    assert keys == [
        ("allocation", "p"),
        ("allocation", "gang-workers-ph-0"),
        ("allocation", "gang-workers-ph-1"),
        ("allocation", "w"),
    ], changed.output

    missing = CliRunner().invoke(app, ["simulate", "--replay", str(tmp_path / "nope.rec")])
    assert missing.exit_code == 2 and "no recording at" in missing.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--out", "{file}"], "--out {file}: that is a file; name a folder"),
        (["--out", "{file}/sub"], "--out {file}/sub: cannot make the folder: {file} is a file"),
        (["--connect", "nonsense"], "the scheme must be tcp://, unix:// or grpc://"),
        (["--connect", "tcp://127.0.0.1:99999"], "with a port from 0 to 65535"),
        (["--connect", "grpc://127.0.0.1:70000"], "with a port from 0 to 65535"),
        (["--speed", "inf"], "--speed must be a finite number"),
        (["--queues", "{file}"], "--queues and --rotated go with --replay FILE"),
        (["--duration", "200000h"], "at most 10,000,000 (MAX_TICKS) are played"),
    ],
)
def test_bad_options_exit_2_with_what_was_wrong(tmp_path: Path, args: list[str], said: str) -> None:
    """A tester's finds: each of these was a traceback (exit 1), or was ignored."""
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    args = [a.format(file=a_file) for a in args]
    out = ["--out", str(tmp_path / "report")] if "--out" not in args else []
    result = CliRunner().invoke(app, ["simulate", str(path), *out, "--no-progress", *args])
    assert result.exit_code == 2, result.output
    assert said.format(file=a_file) in " ".join(result.output.split()), result.output
    assert "Traceback" not in result.output


def test_replay_with_a_bad_queues_file_exits_2_before_playing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "partitions:\n  - name: default\n    queues:\n      - name: root\n        queues:\n"
        "          - name: a\n            resources: {max: {memory: lots}}\n"
    )
    recording = tmp_path / "si.rec"
    recording.write_bytes(b"")
    args = ["simulate", "--replay", str(recording), "--queues", str(bad), "--out", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert f"--queues {bad}:" in said and "lots" in said, said


def test_the_headline_names_the_rejected_jobs_and_the_first_reason() -> None:
    from rich.console import Console

    from scheduler.cli._simulate import _headline

    s = summarize(asyncio.run(run_scenario(scenario(REJECTED, duration="5m"))))
    console = Console(record=True, width=200, file=io.StringIO())
    _headline(console, s)
    text = console.export_text()
    assert (
        "rejected by the core: 2 jobs, first: 2 jobs of workload lost: "
        "queue root.nope does not exist in partition default"
    ) in text
    assert "(0 failed)" in text


REJECTED = """\
workloads:
  - name: lost
    queue: root.nope
    arrivals: {fixed: [0s, 1m]}
    job: {kind: batch, pods: 1, resource: {memory: 1Gi, vcore: 1}, runtime: 1m}
"""


def test_the_headline_writes_durations_as_durations() -> None:
    """Pending times under --connect are fractions of a second: 2ms, not 0.00212918s."""
    from rich.console import Console

    from scheduler.cli._simulate import _headline
    from scheduler.simulate import Distribution

    from .runs import make_run
    from .runs import summarize as by_hand

    s = msgspec.structs.replace(
        by_hand(make_run()),
        duration=10_800.0,
        pending_time=Distribution(count=3, mean=0.5, p50=0.00212918, p90=1.25, p99=61.4, max=61.4),
    )
    console = Console(record=True, width=200, file=io.StringIO())
    _headline(console, s)
    text = console.export_text()
    assert "seed 7: 3h0m0s virtual in 4.2s wall" in text
    assert "pending p50 2ms p90 1.2s p99 1m1s;" in text
    assert "starved 2m0s" in text
