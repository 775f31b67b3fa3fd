"""summarize on runs made by hand: the rejected jobs' check and when a queue reached its
guarantee."""

from __future__ import annotations

from scheduler.simulate import JobRecord, RunResult, summarize


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
