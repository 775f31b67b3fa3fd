"""The engine and the simulated RM: each job kind, gangs, preemption, node events, an RM
restart, and the checks of summary.json, on small scenarios in virtual time."""

from __future__ import annotations

import io
import random

import pytest
from rich.console import Console

from scheduler.cli._live import LiveView
from scheduler.simulate import (
    PodRecord,
    RunResult,
    run_all,
    run_scenario,
    summarize,
    summary_json,
    with_overrides,
)
from scheduler.simulate._engine import arrival_times

from .conftest import QUEUES, scenario, without_wall

pytestmark = pytest.mark.asyncio

BATCH = """\
workloads:
  - name: jobs
    queue: root.a
    arrivals: {poisson: {rate: 4/min, until: 10m}}
    job: {kind: batch, pods: 3, resource: {memory: 2Gi, vcore: 1}, runtime: {uniform: [1m, 4m]}}
"""


def pods(result: RunResult, job: str, *, placeholder: bool | None = None) -> list[PodRecord]:
    return [
        p
        for p in result.pods
        if p.job == job and (placeholder is None or p.placeholder == placeholder)
    ]


async def test_batch_jobs_run_their_run_time_and_all_finish() -> None:
    result = await run_scenario(scenario(BATCH))
    s = summarize(result)
    assert s.checks.jobs_submitted > 10 and s.checks.all_finished
    assert s.pods_finished == s.pods_submitted == s.pods_allocated
    for p in result.pods:
        assert p.allocated is not None and p.finished is not None
        assert 60 <= p.finished - p.allocated <= 241  # the run time, to a tick
    assert s.checks.over_capacity == [] and s.preemptions == 0
    assert [x.time for x in result.samples][:3] == [0.0, 30.0, 60.0]
    assert result.samples[-1].time == 1800.0


async def test_the_same_seed_gives_the_same_summary_and_another_seed_another() -> None:
    first = summarize(await run_scenario(scenario(BATCH)))
    again = summarize(await run_scenario(scenario(BATCH)))
    assert without_wall(first) == without_wall(again)
    assert summary_json([first]) == summary_json([again])  # summary.json, bit for bit
    assert b"wall" not in summary_json([first])
    changed = summarize(await run_scenario(with_overrides(scenario(BATCH), seed=99)))
    assert without_wall(changed) != without_wall(first)


@pytest.mark.asyncio
async def test_a_workload_added_leaves_the_others_arrivals_alone() -> None:
    one = scenario(BATCH)
    two = scenario(BATCH + BATCH[len("workloads:\n") :].replace("name: jobs", "name: more"))
    times_one = arrival_times(one, 0, random.Random(f"{one.seed}/jobs"))
    times_two = arrival_times(two, 0, random.Random(f"{two.seed}/jobs"))
    assert times_one == times_two and times_one


async def test_a_spark_gang_places_placeholders_first_then_its_real_pods_replace_them() -> None:
    result = await run_scenario(
        scenario(
            """\
workloads:
  - name: spark
    queue: root.a
    arrivals: {fixed: [1m]}
    job:
      kind: spark
      pods: 5
      driver: {memory: 2Gi, vcore: 1}
      resource: {memory: 4Gi, vcore: 1}
      runtime: 3m
"""
        )
    )
    (gang,) = result.gangs
    assert gang.style == "Soft" and gang.members == 6 and gang.whole is not None
    holders = pods(result, "spark-00001", placeholder=True)
    real = pods(result, "spark-00001", placeholder=False)
    assert len(holders) == 6 and len(real) == 6
    assert all(r.allocated is not None and r.allocated > gang.whole for r in real)
    # each real pod went where a placeholder was, once the RM confirmed its release
    assert sorted(r.node or "" for r in real) == sorted(h.node or "" for h in holders)
    assert all(
        h.finished is not None and h.finished <= min(r.allocated or 0 for r in real)
        for h in holders
    )
    s = summarize(result)
    assert s.checks.all_finished and s.checks.partial_gangs == [] and s.checks.gangs_whole == 1


async def test_a_permit_gang_is_placed_all_at_once_or_not_at_all() -> None:
    result = await run_scenario(
        scenario(
            """\
workloads:
  - name: fits
    queue: root.a
    arrivals: {fixed: [0s]}
    job: {kind: permit, pods: 4, resource: {memory: 4Gi, vcore: 1}, runtime: 2m}
  - name: too-big
    queue: root.b
    arrivals: {fixed: [5m]}
    job: {kind: permit, pods: 20, resource: {memory: 4Gi, vcore: 1}, runtime: 2m}
"""
        )
    )
    fits = pods(result, "fits-00001")
    assert len({p.allocated for p in fits}) == 1 and fits[0].allocated is not None
    assert all(p.allocated is None for p in pods(result, "too-big-00001"))
    s = summarize(result)
    assert s.checks.gangs == 2 and s.checks.gangs_whole == 1 and not s.checks.all_finished


@pytest.mark.parametrize(("style", "failed"), [("Soft", 0), ("Hard", 1)])
async def test_a_gang_that_cannot_gather_times_out_as_its_style_says(
    style: str, failed: int
) -> None:
    result = await run_scenario(
        scenario(
            f"""\
workloads:
  - name: spark
    queue: root.a
    arrivals: {{fixed: [0s]}}
    job:
      kind: spark
      pods: 4
      resource: {{memory: 12Gi, vcore: 1}}
      runtime: 2m
      gang: {{style: {style}, timeout: 2m}}
""",
            nodes=3,
        )
    )
    (gang,) = result.gangs
    assert gang.timed_out and gang.whole is None
    s = summarize(result)
    assert s.jobs_failed == failed
    real = pods(result, "spark-00001", placeholder=False)
    if style == "Soft":  # its real pods go as plain pods: those that fit run
        assert real and any(p.allocated is not None for p in real)
    else:  # the job failed: no real pod was ever sent
        assert real == [] and result.jobs[0].failed
    assert s.checks.partial_gangs == [] and s.checks.over_capacity == []


async def test_preemption_takes_back_a_guarantee_and_victims_are_resubmitted() -> None:
    result = await run_scenario(
        scenario(
            """\
workloads:
  - name: hog
    queue: root.b
    arrivals: {fixed: [0s]}
    job: {kind: service, pods: 16, resource: {memory: 4Gi, vcore: 1}}
  - name: want
    queue: root.a
    arrivals: {fixed: [2m]}
    job:
      kind: batch
      pods: 8
      resource: {memory: 4Gi, vcore: 1}
      runtime: 5m
      preemption: {allow_preempt_other: true}
"""
        )
    )
    s = summarize(result)
    assert s.preemptions > 0
    preempted = [p for p in result.pods if p.preempted]
    assert all(p.job.startswith("hog") for p in preempted)
    assert len(pods(result, "hog-00001")) == 16 + len(preempted)  # each victim came back
    assert s.checks.guarantees_reached["root.a"] is True
    (a,) = [q for q in s.queues if q.queue == "root.a"]
    assert a.guarantee_reached_after is not None
    assert s.checks.over_capacity == [] and s.checks.all_finished


async def test_nodes_removed_lose_their_pods_which_run_again_elsewhere() -> None:
    result = await run_scenario(
        scenario(
            BATCH
            + """\
events:
  - {at: 5m, nodes_drained: {group: w, count: 1}}
  - {at: 6m, nodes_removed: {group: w, count: 2}}
  - {at: 8m, nodes_added: {group: w, count: 2}}
""",
            duration="1h",
        )
    )
    s = summarize(result)
    lost = [p for p in result.pods if p.lost]
    assert s.pods_lost == len(lost) > 0
    assert all(p.finished == 360.0 for p in lost)
    assert [e.kind for e in result.events] == ["node-drained", "node-removed", "node-added"]
    drained = result.events[0].detail.rsplit(": ", 1)[1]
    removed = result.events[1].detail.rsplit(": ", 1)[1].split(", ")
    assert drained in removed  # a drained node goes first
    assert not [p for p in result.pods if p.node == drained and (p.allocated or 0) > 300]
    assert not [p for p in result.pods if p.node in removed and (p.allocated or 0) > 360]
    assert s.checks.all_finished and s.checks.over_capacity == []


async def test_an_rm_restart_recovers_running_and_waiting_pods() -> None:
    body = """\
workloads:
  - name: jobs
    queue: root.a
    arrivals: {poisson: {rate: 2/min, until: 10m}}
    job: {kind: batch, pods: 3, resource: {memory: 4Gi, vcore: 1}, runtime: {uniform: [2m, 6m]}}
  - name: spark
    queue: root.b
    arrivals: {fixed: [3m]}
    job: {kind: spark, pods: 3, resource: {memory: 2Gi, vcore: 1}, runtime: 5m}
events:
  - {at: 4m, rm_restart: {}}
"""
    result = await run_scenario(scenario(body, duration="1h"))
    (event,) = result.events
    assert event.kind == "rm-restarted" and event.time == 240.0
    assert "recovered" in event.detail and " 0 pods" not in event.detail.split(",")[1]
    s = summarize(result)
    assert s.checks.all_finished and s.checks.over_capacity == [] and s.checks.partial_gangs == []
    running_then = [p for p in result.pods if (p.allocated or 1e9) < 240 < (p.finished or 1e9)]
    assert running_then and all(p.finished and p.finished > 240 for p in running_then)


async def test_configurations_run_the_same_workload_one_result_each() -> None:
    s = scenario(
        BATCH + "configurations:\n  - {name: fair}\n  - {name: packed, node_sorting: binpacking}\n"
    )
    results = await run_all(s)
    assert [r.configuration for r in results] == ["fair", "packed"]
    submitted = [[p.submitted for p in r.pods] for r in results]
    assert submitted[0] == submitted[1]  # one workload
    used = [len({p.node for p in r.pods}) for r in results]
    assert used[1] <= used[0]
    assert summary_json([summarize(r) for r in results]).startswith(b'{\n  "runs": [')


async def test_realtime_plays_the_same_run_on_the_wall_clock() -> None:
    s = scenario(BATCH, duration="2m")
    virtual = summarize(await run_scenario(s))
    paced = await run_scenario(s, realtime=True, speed=600)
    assert paced.wall_seconds >= 0.15  # 120 virtual seconds at 600x
    assert without_wall(summarize(paced)) == without_wall(virtual)


async def test_a_drained_node_counts_in_the_capacity_until_it_is_removed() -> None:
    body = """\
workloads:
  - name: fill
    queue: root.a
    arrivals: {fixed: [0s]}
    job: {kind: batch, pods: 16, resource: {memory: 8Gi, vcore: 2}, runtime: 8m}
events:
  - {at: 1m, nodes_drained: {group: w, count: 1}}
  - {at: 12m, nodes_removed: {group: w, count: 1}}
"""
    result = await run_scenario(
        scenario(body, nodes=2, capacity="{memory: 64Gi, vcore: 16}", duration="15m")
    )
    gi = 1 << 30
    for s in result.samples:  # never more allocated than the nodes that are up hold
        assert all(s.allocated.get(n, 0) <= cap for n, cap in s.capacity.items()), s.time
    at = {s.time: s for s in result.samples}
    full = {"memory": 128 * gi, "vcore": 32_000}
    assert at[120.0].capacity == full and at[120.0].allocated == full  # drained, still up
    assert at[750.0].capacity == {"memory": 64 * gi, "vcore": 16_000}  # removed
    util = summarize(result).utilization
    assert 0 < util["memory"] <= 1 and 0 < util["vcore"] <= 1

    # the live view, which reads the same samples, says 100% of the two nodes
    view = LiveView(console=Console(file=io.StringIO()), enabled=False)
    view.update(at[120.0], configuration="default", duration=result.duration)
    screen = Console(record=True, width=120, file=io.StringIO())
    screen.print(view)
    text = screen.export_text()
    assert "100%: 128Gi of 128Gi" in text and "100%: 32 of 32" in text


async def test_a_job_the_core_rejects_says_why_and_counts_apart_from_failed() -> None:
    acl = QUEUES.replace("submitacl: '*'\n", "submitacl: ana\n")  # only ana may submit
    body = """\
workloads:
  - name: lost
    queue: root.nope
    arrivals: {fixed: [0s, 1m, 2m]}
    job: {kind: batch, pods: 1, resource: {memory: 1Gi, vcore: 1}, runtime: 1m}
  - name: parent
    queue: root
    arrivals: {fixed: [0s]}
    job: {kind: batch, pods: 1, resource: {memory: 1Gi, vcore: 1}, runtime: 1m}
  - name: stranger
    queue: root.a
    user: bob
    arrivals: {fixed: [0s]}
    job: {kind: batch, pods: 1, resource: {memory: 1Gi, vcore: 1}, runtime: 1m}
  - name: ana
    queue: root.b
    user: ana
    arrivals: {fixed: [0s]}
    job: {kind: batch, pods: 1, resource: {memory: 1Gi, vcore: 1}, runtime: 1m}
"""
    result = await run_scenario(scenario(body, queues=acl, duration="5m"))
    by_job = {j.job: j for j in result.jobs}
    assert by_job["lost-00001"].rejected == "queue root.nope does not exist in partition default"
    assert by_job["parent-00001"].rejected == "queue root is not a leaf queue"
    assert by_job["stranger-00001"].rejected == "user 'bob' may not submit to queue root.a"
    assert by_job["lost-00002"].failed and by_job["ana-00001"].rejected == ""
    assert by_job["ana-00001"].finished is not None
    s = summarize(result)
    assert s.jobs_rejected == 5 and s.jobs_failed == 0
    assert s.checks.rejected_jobs == [
        "3 jobs of workload lost: queue root.nope does not exist in partition default",
        "parent-00001: queue root is not a leaf queue",
        "stranger-00001: user 'bob' may not submit to queue root.a",
    ]
    assert b'"rejected_jobs"' in summary_json([s]) and b'"jobs_rejected": 5' in summary_json([s])


async def test_events_say_what_they_could_not_do_and_those_after_the_end_are_skipped() -> None:
    body = """\
workloads:
  - name: one
    queue: root.a
    arrivals: {fixed: [0s]}
    job: {kind: service, pods: 1, resource: {memory: 1Gi, vcore: 1}}
events:
  - {at: 1m, nodes_drained: {group: w, count: 2}}
  - {at: 2m, nodes_drained: {group: w, count: 5}}
  - {at: 3m, nodes_removed: {group: w, count: 10}}
  - {at: 4m, nodes_drained: {group: w, count: 1}}
  - {at: 5m, nodes_added: {group: w, count: 1}}
  - {at: 6m, rm_restart: {}}
  - {at: 20m, nodes_removed: {group: w, count: 1}}
"""
    result = await run_scenario(scenario(body, nodes=2, duration="10m"))
    assert [(e.time, e.kind, e.detail) for e in result.events] == [
        (60.0, "node-drained", "2 nodes of w drained: w-1, w-2"),
        (120.0, "node-drained", "none: every node of w is drained already"),
        (
            180.0,
            "node-removed",
            "2 nodes of w removed (2 of the 10 asked: the group had 2 up), 1 pod lost: w-1, w-2",
        ),
        (240.0, "node-drained", "none: every node of w is removed already"),
        (300.0, "node-added", "1 node of w added: w-3"),
        (
            360.0,
            "rm-restarted",
            "recovered 1 application, 1 node update with 1 pod, 0 pods waiting",
        ),
        (
            1200.0,
            "skipped",
            "nodes_removed of w (1): after the run's end (10m0s), not played",
        ),
    ]
