"""summarize on runs made by hand: the rejected jobs' check and when a queue reached its
guarantee."""

from __future__ import annotations

from scheduler.simulate import JobRecord, QueueSample, RunResult, Sample, summarize


def test_rejected_jobs_are_grouped_by_reason_and_capped() -> None:
    jobs = [
        JobRecord(job=f"w{i}-{n}", kind="batch", workload=f"w{i}", queue="root.x", pods=1,
                  submitted=0.0, failed=True, rejected=f"failed to place application w{i}-{n}: "
                  "no placement rule matched")
        for i in range(12)
        for n in range(2 if i < 11 else 1)
    ]  # fmt: skip
    run = RunResult(
        scenario="t", configuration="c", seed=1, duration=60.0, wall_seconds=0.0, jobs=jobs
    )
    rejected = summarize(run).checks.rejected_jobs
    assert rejected[0] == (
        "2 jobs of workload w0: failed to place application ...: no placement rule matched"
    )
    assert len(rejected) == 11 and rejected[-1] == "... and 3 more jobs"  # w10 (2), w11 (1)


def _queue_run(*points: tuple[float, int, int]) -> RunResult:
    """root.a, guaranteed 32Gi, at each (time, allocated Gi, pending Gi)."""
    gi = 1 << 30
    samples = [
        Sample(
            time=t,
            capacity={"memory": 64 * gi},
            allocated={"memory": alloc * gi},
            pending_pods=1 if pending else 0,
            running_pods=1 if alloc else 0,
            allocations=0,
            preemptions=0,
            gangs_waiting=0,
            gangs_running=0,
            queues=[
                QueueSample(
                    queue="root.a",
                    allocated={"memory": alloc * gi},
                    guaranteed={"memory": 32 * gi},
                    max={},
                    pending={"memory": pending * gi},
                )
            ],
        )
        for t, alloc, pending in points
    ]
    return RunResult(
        scenario="t", configuration="c", seed=1, duration=90.0, wall_seconds=0.0, samples=samples
    )


def test_a_queue_whose_only_job_failed_has_not_reached_its_guarantee() -> None:
    # asked for 4Gi, got nothing, and asked for nothing once its job failed
    s = summarize(_queue_run((0.0, 0, 4), (30.0, 0, 0), (60.0, 0, 0)))
    (a,) = s.queues
    assert a.guarantee_reached_after is None
    assert s.checks.guarantees_reached == {"root.a": False}


def test_a_queue_that_holds_all_it_asks_for_below_its_guarantee_reached_it() -> None:
    s = summarize(_queue_run((0.0, 0, 4), (30.0, 4, 0), (60.0, 0, 0)))
    (a,) = s.queues
    assert a.guarantee_reached_after == 30.0
    assert s.checks.guarantees_reached == {"root.a": True}
