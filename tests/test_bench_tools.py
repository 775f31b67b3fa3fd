"""The benchmark scripts as tools: progress on stderr, metadata in the JSON, ``--check``.

Each script runs in a subprocess at its ``--quick`` size. No measured figure is asserted:
``--target-scale`` (hidden) makes every target trivially met (0) or impossible (1e9), so
only the structure of the output and the exit codes are checked.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import pytest

import scheduler
from scheduler import si

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
SCRIPTS = [
    "bench_scheduling.py",
    "bench_actors.py",
    "bench_proxy.py",
    "bench_gang.py",
    "bench_permit.py",
    "bench_transport.py",
    "bench_backlog.py",
    "bench_outstanding.py",
    "bench_preemption.py",
    "bench_recovery.py",
    "bench_simulate.py",
]
# The scripts run on the package this test run imports: src/ here, the installed compiled
# build in ``nox -s tests_compiled``.
PACKAGE_ROOT = str(Path(scheduler.__file__).parents[1])
PROGRESS = re.compile(r"^\[(\d+)/(\d+)\] ", re.MULTILINE)


def run_bench(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``script --quick *args`` on the package this test run imports."""
    env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT)
    env.pop("BENCH_GANG_SMALL", None)
    env.pop("BENCH_REPEAT", None)
    return subprocess.run(
        [sys.executable, str(BENCH / script), "--quick", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def run_script(
    script: str, out: Path, *args: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    done = run_bench(script, "--out", str(out), *args)
    assert out.exists(), f"{script} wrote no JSON:\n{done.stdout}\n{done.stderr}"
    return done, json.loads(out.read_text())


@pytest.fixture(scope="module")
def common() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_common", BENCH / "_common.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_common"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("script", SCRIPTS)
def test_met_targets_exit_0_with_metadata_and_progress(script: str, tmp_path: Path) -> None:
    done, doc = run_script(script, tmp_path / "out.json", "--check", "--target-scale", "0")
    assert done.returncode == 0, done.stderr
    assert doc["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert {"implementation", "version"} <= doc["python"].keys()
    machine = doc["machine"]
    assert {"platform", "processor", "cpu_count", "load_average_start"} <= machine.keys()
    assert "load_average_end" in machine
    assert doc["commit"].keys() >= {"sha", "dirty"}
    assert doc["targets"], "every script has targets"
    assert all(t["met"] for t in doc["targets"].values())
    # progress on stderr, as each case runs, numbered up to its total; none on stdout
    steps = PROGRESS.findall(done.stderr)
    assert steps
    assert {int(total) for _, total in steps} == {int(steps[0][1])}
    assert max(int(i) for i, _ in steps) == int(steps[0][1])
    assert not PROGRESS.search(done.stdout)
    assert "PASS" in done.stdout and "MISS" not in done.stdout


@pytest.mark.parametrize("script", SCRIPTS)
def test_missed_target_exits_1_under_check(script: str, tmp_path: Path) -> None:
    done, doc = run_script(script, tmp_path / "out.json", "--check", "--target-scale", "1e9")
    assert done.returncode == 1, done.stderr
    assert not any(t["met"] for t in doc["targets"].values())
    missed = re.search(r"^missed targets: (.*)$", done.stderr, re.MULTILINE)
    assert missed is not None
    assert set(missed.group(1).split(", ")) == set(doc["targets"])


def test_missed_target_without_check_is_reported_but_exits_0(tmp_path: Path) -> None:
    done, doc = run_script("bench_proxy.py", tmp_path / "out.json", "--target-scale", "1e9")
    assert done.returncode == 0, done.stderr
    assert "MISS" in done.stdout
    assert "not an error without --check" in done.stderr
    assert doc["targets"]["asks_per_s"]["met"] is False


def ab_rates(doc: dict[str, Any]) -> dict[str, float]:
    sys.path.insert(0, str(BENCH))
    try:
        import ab  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(BENCH))
    rates: dict[str, float] = ab.rates(doc)
    return rates


def test_ab_still_reads_the_rates_and_no_metadata(tmp_path: Path) -> None:
    _, doc = run_script(
        "bench_scheduling.py", tmp_path / "out.json", "--cases", "10k-asks,50k-nodes"
    )
    assert set(ab_rates(doc)) == {
        f"results[case={case},sizing={sizing},gc=tuned].allocs_per_s"
        for case in ("10k-asks", "50k-nodes")
        for sizing in ("headroom", "yunikorn")
    }


def test_ab_reads_the_node_sweep_by_nodes(tmp_path: Path) -> None:
    done, doc = run_script(
        "bench_scheduling.py", tmp_path / "out.json", "--nodes", "10,20", "--sizing", "headroom"
    )
    assert done.returncode == 0, done.stderr
    assert [r["nodes"] for r in doc["results"]] == [10, 20]
    assert set(doc["targets"]) == {"allocs_per_s.headroom", "scaling.headroom"}
    assert set(ab_rates(doc)) == {
        "results[case=nodes=10,sizing=headroom,gc=tuned].allocs_per_s",
        "results[case=nodes=20,sizing=headroom,gc=tuned].allocs_per_s",
    }


def test_scheduling_cases_interleave_with_rss_load_and_time_per_allocation(
    tmp_path: Path,
) -> None:
    done, doc = run_script(
        "bench_scheduling.py",
        tmp_path / "out.json",
        "--cases",
        "100-queues,10k-asks",
        "--sizing",
        "yunikorn",
        "--repeat",
        "2",
    )
    assert done.returncode == 0, done.stderr
    # each repeat runs every case once, in the order given
    labels = re.findall(
        r"^\[\d+/4\] (\S+) \((\w+), gc tuned\): .* repeat (\d)/2: ", done.stderr, re.M
    )
    assert labels == [
        ("100-queues", "yunikorn", "1"),
        ("10k-asks", "yunikorn", "1"),
        ("100-queues", "yunikorn", "2"),
        ("10k-asks", "yunikorn", "2"),
    ]
    results = {r["case"]: r for r in doc["results"]}
    assert set(results) == {"100-queues", "10k-asks"}
    queues = results["100-queues"]
    assert queues["queues"] > 2 and queues["apps"] > 2
    for res in results.values():
        assert res["sizing"] == "yunikorn"
        assert res["asks_per_node"] == res["asks"] // res["nodes"] + 1
        assert len(res["runs"]) == 2
        assert res["allocs_per_s_best"] >= res["allocs_per_s"] > 0
        assert res["us_per_alloc"] > 0
        assert res["rss_bytes"] > 10 * 2**20  # a whole interpreter with the scheduler loaded
        for once in res["runs"]:
            assert {"seconds", "us_per_alloc", "rss_bytes", "load_before", "load_after"} <= set(
                once
            )
            assert once["load_before"] is not None and once["load_after"] is not None
        assert res["load_min"] <= res["load_max"]
    # a target for each selected case; no ratio without the case it compares with
    assert set(doc["targets"]) == {
        "allocs_per_s.10k-asks.yunikorn",
        "allocs_per_s.100-queues.yunikorn",
    }
    assert "RSS MB" in done.stdout and "us/alloc" in done.stdout


def test_scheduling_unknown_case_is_a_clear_error(tmp_path: Path) -> None:
    done = run_bench("bench_scheduling.py", "--cases", "1m-asks")
    assert done.returncode != 0
    assert "unknown case 1m-asks" in done.stderr


def test_at_most_target_and_scale(common: ModuleType) -> None:
    args = argparse.Namespace(check=True, quick=False, out=None, target_scale=2.0)
    run = common.Run("x", args)
    assert run.target("t", "time", 1.0, at_most=1.5, fmt=".2f").met is False  # bound 0.75
    assert run.target("r", "rate", 10.0, at_least=4).met is True  # bound 8
    with pytest.raises(ValueError, match="exactly one"):
        run.target("z", "both", 1.0, at_least=1, at_most=2)


def test_finish_exit_codes(common: ModuleType, tmp_path: Path) -> None:
    for check, expected in ((False, 0), (True, 1)):
        args = argparse.Namespace(
            check=check, quick=False, out=tmp_path / "r.json", target_scale=1.0
        )
        run = common.Run("x", args)
        run.target("rate", "rate", 1.0, at_least=10**12)
        assert run.finish({"results": []}) == expected
        assert json.loads((tmp_path / "r.json").read_text())["targets"]["rate"]["met"] is False


def test_progress_lines(common: ModuleType) -> None:
    stream = io.StringIO()
    progress = common.Progress(2, stream)
    with progress.step("first") as step:
        step.result = "5 things/s"
    with pytest.raises(RuntimeError), progress.step("second"):
        raise RuntimeError("boom")
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[1/2] first …"
    assert lines[1].startswith("[1/2] first: 5 things/s, ")
    assert lines[2:] == ["[2/2] second …", "[2/2] second: failed"]


def test_commit_without_git_repository(common: ModuleType, tmp_path: Path) -> None:
    info = common.commit_info(tmp_path)
    assert info["sha"] is None and info["dirty"] is None
    assert info["error"].startswith("git")
    head = common.commit_info(ROOT)
    assert head.keys() == {"sha", "dirty"}
    assert re.fullmatch(r"[0-9a-f]{40}", head["sha"])
    assert isinstance(head["dirty"], bool)


def test_commit_without_git(
    common: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no git on it
    info = common.commit_info(ROOT)
    assert info["sha"] is None and info["dirty"] is None
    assert info["error"].startswith("git: ")


def test_scheduling_runs_both_gc_modes_interleaved_and_targets_read_the_tuned_runs(
    tmp_path: Path,
) -> None:
    done, doc = run_script(
        "bench_scheduling.py",
        tmp_path / "out.json",
        "--cases",
        "10k-asks",
        "--sizing",
        "headroom",
        "--gc",
        "default,tuned",
    )
    assert done.returncode == 0, done.stderr
    labels = re.findall(
        r"^\[\d+/2\] 10k-asks \(headroom, gc (\w+)\): .* repeat 1/1: ", done.stderr, re.M
    )
    assert labels == ["default", "tuned"]
    by_gc = {r["gc"]: r for r in doc["results"]}
    assert set(by_gc) == {"default", "tuned"}
    target = doc["targets"]["allocs_per_s.10k-asks.headroom"]
    assert target["value"] == by_gc["tuned"]["allocs_per_s"]


def test_scheduling_runs_each_interpreter_interleaved_with_targets_per_build(
    tmp_path: Path,
) -> None:
    import scheduler.core._pass as scheduling

    build = "pure" if scheduling.__file__.endswith(".py") else "compiled"
    other = tmp_path / "python-again"  # the same interpreter under a second name
    other.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    other.chmod(0o755)
    pythons = f"{sys.executable},{other}"
    done, doc = run_script(
        "bench_scheduling.py",
        tmp_path / "out.json",
        *("--cases", "10k-asks", "--sizing", "headroom", "--python", pythons),
    )
    assert done.returncode == 0, done.stderr
    labels = re.findall(
        r"^\[\d+/2\] 10k-asks \(headroom, gc tuned\): .* repeat 1/1, (.+?): ", done.stderr, re.M
    )
    assert labels == [sys.executable, str(other)]
    assert [r["build"] for r in doc["results"]] == [build, build]
    assert f" {build} " in done.stdout  # the table's build column
    first = doc["targets"][f"allocs_per_s.10k-asks.headroom.{build}1"]
    second = doc["targets"][f"allocs_per_s.10k-asks.headroom.{build}2"]
    assert [first["value"], second["value"]] == [r["allocs_per_s"] for r in doc["results"]]


def test_scheduling_refuses_an_unknown_gc_mode(tmp_path: Path) -> None:
    done = run_bench("bench_scheduling.py", "--gc", "frozen")
    assert done.returncode != 0
    assert "unknown gc mode frozen; known: tuned, default" in done.stderr


def test_floor_runs_the_minimal_loop_beside_the_core(tmp_path: Path) -> None:
    done, doc = run_script("bench_floor.py", tmp_path / "out.json")
    assert done.returncode == 0, done.stderr
    assert doc["floor_allocs_per_s"] > 0 and doc["core_allocs_per_s"] > 0
    assert len(doc["floor_runs"]) == len(doc["core_runs"]) == 1
    assert re.search(r"the core takes \d+\.\dx the floor's time per allocation", done.stdout)


def test_permit_interleaves_the_cases_and_reports_gangs_per_second(tmp_path: Path) -> None:
    done, doc = run_script("bench_permit.py", tmp_path / "out.json", "--repeat", "2")
    assert done.returncode == 0, done.stderr
    # each repeat runs every case once, the order flipped from one repeat to the next
    labels = re.findall(r"^\[\d+/8\] (\w+): .* repeat (\d)/2: ", done.stderr, re.M)
    order = ["strict", "nonstrict", "placeholder", "plain"]
    assert labels == [(c, "1") for c in order] + [(c, "2") for c in reversed(order)]
    assert (doc["gangs"], doc["members"], doc["nodes"], doc["repeat"]) == (10, 5, 10, 2)
    results = {r["case"]: r for r in doc["results"]}
    assert list(results) == ["strict", "nonstrict", "placeholder", "replace", "plain"]
    for res in results.values():
        assert len(res["runs"]) == 2
        assert res["gangs_per_s_best"] >= res["gangs_per_s"] > 0
        # every gang of 5 complete: the allocations are 5 times the gangs
        assert res["allocs_per_s"] == pytest.approx(5 * res["gangs_per_s"])
        assert 0 < res["first_gang_seconds"] <= res["seconds"] <= res["settle_seconds"]
        assert res["load_min"] is not None and res["load_min"] <= res["load_max"]
    assert all(r["confirm_rounds"] >= 1 for r in results["replace"]["runs"])
    # a permit gang's members reach the RM together: one response per gang at most
    assert 1 <= results["strict"]["responses"] <= 10
    assert set(doc["targets"]) == {"strict_vs_placeholder", "nonstrict_vs_placeholder"}
    target = doc["targets"]["strict_vs_placeholder"]
    assert target["value"] == pytest.approx(
        results["strict"]["gangs_per_s"] / results["placeholder"]["gangs_per_s"]
    )
    assert "gangs/s" in done.stdout and "replace" in done.stdout
    assert set(ab_rates(doc)) == {
        f"results[case={case}].{rate}"
        for case in results
        for rate in ("gangs_per_s", "allocs_per_s")
    }


@pytest.mark.parametrize("case", ["strict", "nonstrict", "placeholder", "plain"])
def test_permit_fails_a_run_that_leaves_gangs_incomplete(case: str) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import bench_permit  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(BENCH))
    # 10 gangs of 5 on 4 nodes of room for 10: two gangs cannot be placed
    with pytest.raises(bench_permit.BenchError, match="8 of 10 gangs complete"):
        asyncio.run(bench_permit.run_case(case, bench_permit.Size(10, 5, 4)))


def test_permit_refuses_sizes_that_cannot_fit() -> None:
    done = run_bench("bench_permit.py", "--nodes", "4")
    assert done.returncode == 2
    assert "50 members do not fit on 4 nodes of 10" in done.stderr


def test_transport_interleaves_in_process_and_daemon_cases(tmp_path: Path) -> None:
    cases = ["inproc-batched", "native-batched", "native-single", "native-pipelined"]
    cases.append("grpc-batched")
    done, doc = run_script(
        "bench_transport.py", tmp_path / "out.json", "--cases", ",".join(cases), "--repeat", "2"
    )
    assert done.returncode == 0, done.stderr
    # each repeat runs every case once, the order flipped from one repeat to the next
    labels = re.findall(r"^\[\d+/10\] ([\w-]+), repeat (\d)/2: ", done.stderr, re.M)
    assert labels == [(c, "1") for c in cases] + [(c, "2") for c in reversed(cases)]
    assert (doc["asks"], doc["batch"], doc["single_asks"], doc["repeat"]) == (2000, 500, 200, 2)
    results = {r["case"]: r for r in doc["results"]}
    assert list(results) == cases
    for res in results.values():
        assert len(res["runs"]) == 2
        assert res["asks_per_s_best"] >= res["asks_per_s"] > 0
        assert res["variant"] == "ingest" and res["load_min"] <= res["load_max"]
        assert all(r["asks"] == res["asks"] for r in res["runs"])
    assert results["inproc-batched"]["daemon_cpu_s"] is None
    assert results["native-batched"]["daemon_cpu_s"] is not None
    assert [r["calls"] for r in results["native-batched"]["runs"]] == [4, 4]
    assert [r["calls"] for r in results["native-single"]["runs"]] == [200, 200]
    assert results["native-pipelined"]["in_flight"] == 50
    assert set(doc["targets"]) == {"native_batched_asks_per_s", "grpc_batched_asks_per_s"}
    assert doc["targets"]["native_batched_asks_per_s"]["value"] == pytest.approx(
        results["native-batched"]["asks_per_s"]
    )
    assert "grpc-batched" in done.stdout and "native-pipelined" in done.stdout
    assert set(ab_rates(doc)) == {f"results[case={case}].asks_per_s" for case in cases}


def test_transport_fails_a_run_that_lost_asks() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import bench_transport  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(BENCH))

    async def lose_one() -> None:
        case = bench_transport.BY_NAME["inproc-batched"]
        async with scheduler.start_scheduler() as core:
            rm = bench_transport.CountingRM()
            await bench_transport.set_up(core, rm, 0, 0)
            for request in bench_transport.make_requests(9, 3, 0):
                await core.update_allocation(request)
            await core.settle()
            await bench_transport.check(core, rm, case, 9)  # all there
            await bench_transport.check(core, rm, case, 10)

    with pytest.raises(bench_transport.BenchError, match=r"pendingResource is .* \(10 asks\)"):
        asyncio.run(lose_one())


def test_transport_refuses_an_unknown_case() -> None:
    done = run_bench("bench_transport.py", "--cases", "smoke-signals")
    assert done.returncode == 2
    assert "unknown case smoke-signals" in done.stderr


def test_recovery_interleaves_in_process_and_daemon_runs(tmp_path: Path) -> None:
    done, doc = run_script("bench_recovery.py", tmp_path / "out.json", "--repeats", "2")
    assert done.returncode == 0, done.stderr
    # each repeat runs every case once, the order flipped from one repeat to the next
    labels = re.findall(r"^\[\d+/4\] (\w+), repeat (\d)/2: ", done.stderr, re.M)
    assert labels == [("inproc", "1"), ("native", "1"), ("native", "2"), ("inproc", "2")]
    assert (doc["nodes"], doc["allocations"], doc["repeats"]) == (50, 500, 2)
    results = {r["case"]: r for r in doc["results"]}
    assert list(results) == ["inproc", "native"]
    for res in results.values():
        assert len(res["runs"]) == 2
        assert 0 < res["seconds_best"] <= res["seconds"]
        assert res["allocs_per_s"] == pytest.approx(500 / res["seconds"])
        assert res["load_min"] <= res["load_max"]
    assert results["inproc"]["daemon_cpu_s"] is None
    assert results["native"]["daemon_cpu_s"] is not None
    assert set(doc["targets"]) == {"inproc_seconds", "native_seconds"}
    assert doc["targets"]["native_seconds"]["value"] == results["native"]["seconds"]
    assert "allocs/s" in done.stdout


def test_recovery_fails_a_run_that_lost_an_allocation() -> None:
    recovery = bench_module("bench_recovery")
    cluster = recovery.Cluster(nodes=3, per_node=2)

    async def lose_one() -> None:
        async with scheduler.start_scheduler() as core:
            rm = recovery.RecoveringRM()
            await recovery.recover(core, rm, cluster.applications(), cluster.node_requests())
            await recovery.check(core, rm, cluster)  # all there
            release = si.AllocationRelease(
                partition_name="default", application_id="app-0", uuid="uuid-0"
            )
            await core.update_allocation(
                si.AllocationRequest(
                    rm_id=recovery.RM_ID,
                    releases=si.AllocationReleasesRequest(allocations_to_release=[release]),
                )
            )
            await core.settle()
            await recovery.check(core, rm, cluster)

    with pytest.raises(recovery.BenchError, match="5 allocations, not 6"):
        asyncio.run(lose_one())


def test_simulate_reports_each_repeat_and_the_median_rate_for_ab(tmp_path: Path) -> None:
    done, doc = run_script("bench_simulate.py", tmp_path / "out.json", "--repeats", "2")
    assert done.returncode == 0, done.stderr
    labels = re.findall(r"^\[(\d)/2\] 200 nodes, 2,000 pods, repeat (\d)/2: ", done.stderr, re.M)
    assert labels == [("1", "1"), ("2", "2")]
    assert (doc["nodes"], doc["pods"], doc["seed"], doc["repeats"]) == (200, 2_000, 1, 2)
    assert doc["build"] in ("pure", "compiled")
    runs = doc["runs"]
    assert len(runs) == 2
    for once in runs:
        assert once["pods_placed"] == once["pods_finished"] == once["pods_submitted"] > 0
        assert once["pods_per_wall_second"] == pytest.approx(
            once["pods_placed"] / once["wall_seconds"]
        )
        assert once["jobs_finished"] == once["jobs"] and once["gangs_whole"] == once["gangs"]
        assert once["load_before"] is not None and once["load_after"] is not None
    # the same seed plays the same pods each repeat
    assert runs[0]["pods_placed"] == runs[1]["pods_placed"]
    assert 0 < doc["pods_per_s"] <= doc["pods_per_s_best"]
    assert 0 < doc["wall_seconds_best"] <= doc["wall_seconds"]
    assert doc["load_min"] <= doc["load_max"]
    assert set(doc["targets"]) == {"pods_per_s"}
    assert doc["targets"]["pods_per_s"]["value"] == doc["pods_per_s"]
    assert set(ab_rates(doc)) == {"pods_per_s"}  # the median, not each repeat's
    assert "pods/s" in done.stdout and "median" in done.stdout and "best" in done.stdout


def test_simulate_fails_a_run_that_breaks_a_check() -> None:
    simulate = bench_module("bench_simulate")
    from scheduler.simulate import parse_scenario, run_scenario, summarize

    scenario = parse_scenario(simulate.scenario_text(4, 40, 1), source="test")
    summary = summarize(asyncio.run(run_scenario(scenario)))
    simulate.check(summary)  # a good run
    bad = msgspec.structs.replace(
        summary,
        checks=msgspec.structs.replace(
            summary.checks,
            over_capacity=["node-1 at 60s: used > capacity"],
            partial_gangs=["spark-1"],
            all_finished=False,
        ),
    )
    with pytest.raises(simulate.BenchError) as failed:
        simulate.check(bad)
    message = str(failed.value)
    assert "1 over-capacity breaches: node-1 at 60s" in message
    assert "1 gangs ran partial: spark-1" in message
    assert "not every job finished" in message


def test_profile_puts_every_sample_in_a_category(tmp_path: Path) -> None:
    # Ten quick runs: one is over in a few milliseconds on the compiled build, and on a
    # loaded machine the sampling thread may not get a turn in so short a time.
    done, doc = run_script(
        "profile_scheduling.py",
        tmp_path / "out.json",
        "--interval",
        "0.0002",
        "--functions",
        "5",
        "--repeat",
        "10",
    )
    assert done.returncode == 0, done.stderr
    rows = doc["categories"]
    assert rows and abs(sum(r["share"] for r in rows) - 1.0) < 1e-9
    assert {r["category"] for r in rows} <= {
        "ingest (proxy checks)",
        "ingest (asks to applications)",
        "node choice",
        "commit",
        "queue and application order",
        "proposal (walk and checks)",
        "output to the RM",
        "partition actor (turn bookkeeping)",
        "other scheduler code",
        "actor runtime (mailboxes, turns)",
        "event loop and the rest",
        "garbage collector",
    }
    assert "innermost function" in done.stdout


def bench_module(name: str) -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


# The head and the end of a callgrind output file as valgrind 3.19 writes it.
CALLGRIND_OUT = """\
# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 2876
cmd:  python bench_scheduling.py --child {"case": {"asks": 10000}}
part: 1

desc: I1 cache:
desc: Timerange: Basic block 0 - 512352119
desc: Trigger: Program termination

positions: line
events: Ir
summary: 2927133548


totals: 2927133548
"""


def test_instructions_reads_the_total_of_a_callgrind_file() -> None:
    instructions = bench_module("instructions")
    assert instructions.total_instructions(CALLGRIND_OUT) == 2_927_133_548
    # summary: alone (older files), and the Ir column among several events
    assert instructions.total_instructions("events: Ir\nsummary: 12\n") == 12
    several = "events: Dr Ir Dw\nsummary: 1 2 3\ntotals: 4 5 6\n"
    assert instructions.total_instructions(several) == 5
    with pytest.raises(ValueError, match="no totals"):
        instructions.total_instructions("events: Ir\n")
    with pytest.raises(ValueError, match="no Ir"):
        instructions.total_instructions("events: Dr\ntotals: 7\n")


def test_instructions_per_unit_is_the_difference_over_the_difference() -> None:
    instructions = bench_module("instructions")
    # 10k-asks less 100 asks of the same set-up (the runs of the docstring's example)
    got = instructions.per_unit(2_927_133_548, 1_830_774_179, 10_000, 100)
    assert got == pytest.approx(110_743.37, abs=0.01)
    assert instructions.per_unit(1_500, 500, 20, 10) == 100
    with pytest.raises(ValueError, match="must do more"):
        instructions.per_unit(1_500, 500, 10, 10)
    assert instructions.change_percent(200.0, 190.0) == pytest.approx(-5.0)
    assert instructions.change_percent(200.0, 230.0) == pytest.approx(15.0)
    # each repeat's working run against the base run of the same hash seed
    changes = instructions.paired_changes([100.0, 200.0], [101.0, 198.0])
    assert changes == pytest.approx([1.0, -1.0])
    with pytest.raises(ValueError, match="2 base runs and 1 working"):
        instructions.paired_changes([1.0, 2.0], [1.0])


def test_instructions_counts_the_hash_seed_up_from_one_repeat_to_the_next() -> None:
    instructions = bench_module("instructions")
    assert [instructions.hash_seed("0", r) for r in range(3)] == ["0", "1", "2"]
    assert instructions.hash_seed("7", 1) == "8"
    assert instructions.hash_seed("random", 2) is None
    env = instructions.side_env(ROOT, "3")
    assert env["PYTHONHASHSEED"] == "3" and env["PYTHONPATH"] == str(ROOT / "src")
    assert "PYTHONHASHSEED" not in instructions.side_env(ROOT, None)


def test_instructions_cases_differ_only_in_size() -> None:
    instructions = bench_module("instructions")
    for quick in (False, True):
        for case in instructions.cases(quick).values():
            assert case.full.units > case.small.units > 0
            # the same flags, only the numbers differ
            strip = re.compile(r"\d+")
            assert [strip.sub("N", a) for a in case.full.args] == [
                strip.sub("N", a) for a in case.small.args
            ]
    full = instructions.cases(False)
    assert json.loads(full["10k-asks"].full.args[1])["case"] == {
        "name": "10k-asks",
        "nodes": 5_000,
        "asks": 10_000,
    }
    assert full["gang"].full.units == 200 * 50 and full["gang"].small.units == 2 * 50


def test_instructions_without_valgrind_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    instructions = bench_module("instructions")
    monkeypatch.setenv("PATH", str(tmp_path))  # no valgrind on it
    with pytest.raises(SystemExit, match=r"apt-get install -y valgrind"):
        instructions.valgrind()


def test_gang_once_prints_one_run_and_writes_no_file(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    done = run_bench("bench_gang.py", "--once", "--apps", "3", "--out", str(out))
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert (figures["apps"], figures["placeholders"], figures["nodes"]) == (3, 15, 20)
    assert figures["build"] in ("pure", "compiled")
    assert not out.exists()
    assert not PROGRESS.search(done.stderr)  # no plain runs, no tracemalloc run


def test_backlog_percentile_is_the_nearest_rank() -> None:
    backlog = bench_module("bench_backlog")
    values = [float(v) for v in range(100, 0, -1)]  # 1..100, in any order
    assert backlog.percentile(values, 99) == 99.0
    assert backlog.percentile(values, 50) == 50.0
    assert backlog.percentile(values, 100) == 100.0
    # 200 batches: the 198th smallest; 10 batches: the largest; always an observed value
    assert backlog.percentile([float(v) for v in range(1, 201)], 99) == 198.0
    assert backlog.percentile([3.0, 1.0, 2.0] * 3 + [7.5], 99) == 7.5
    assert backlog.percentile([4.0], 1) == 4.0
    with pytest.raises(ValueError, match="no values"):
        backlog.percentile([], 99)
    with pytest.raises(ValueError, match=r"q must be in \(0, 100\]"):
        backlog.percentile([1.0], 0)


def test_backlog_summary_in_ms_and_per_refilled_allocation() -> None:
    backlog = bench_module("bench_backlog")
    seconds = [0.001, 0.002, 0.003, 0.010]
    summary = backlog.latency_summary(seconds, 40)
    assert summary["median_ms"] == pytest.approx(2.5)
    assert summary["p99_ms"] == pytest.approx(10.0)
    assert summary["max_ms"] == pytest.approx(10.0)
    assert summary["us_per_alloc"] == pytest.approx(16e-3 / 40 * 1e6)  # 400 us
    assert summary["refills_per_s"] == pytest.approx(40 / 16e-3)
    # the system clock's reservations may leave every freed slot empty
    assert backlog.latency_summary(seconds, 0)["us_per_alloc"] is None


def test_backlog_targets_read_the_100k_cases_and_the_1m_against_1k_ratio(
    common: ModuleType,
) -> None:
    backlog = bench_module("bench_backlog")

    def result(case: str, median: float, p99: float) -> dict[str, Any]:
        return {"case": case, "median_ms": median, "p99_ms": p99}

    results = [
        result("full-1k", 1.0, 3.0),
        result("full-100k", 1.5, 12.0),
        result("full-1m", 1.2, 4.0),
        result("max-100k", 80.0, 130.0),
        result("max-1m", 700.0, 800.0),  # no max-1k: no ratio
        result("queues-1k", 10.0, 20.0),
        result("queues-1m", 14.0, 30.0),
    ]
    specs = {s["name"]: s for s in backlog.target_specs(results)}
    assert set(specs) == {
        "median_ms.full-100k",
        "p99_ms.full-100k",
        "scaling.full-1m",
        "median_ms.max-100k",
        "p99_ms.max-100k",
        "scaling.queues-1m",
    }
    assert specs["scaling.full-1m"]["value"] == pytest.approx(1.2)
    assert specs["scaling.queues-1m"]["value"] == pytest.approx(1.4)
    run = common.Run(
        "backlog", argparse.Namespace(check=True, quick=False, out=None, target_scale=1.0)
    )
    met = {s["name"]: run.target(**s).met for s in specs.values()}
    assert met == {
        "median_ms.full-100k": True,  # 1.5 <= 2
        "p99_ms.full-100k": False,  # 12 > 10
        "scaling.full-1m": True,  # 1.2 <= 1.3
        "median_ms.max-100k": False,
        "p99_ms.max-100k": False,
        "scaling.queues-1m": False,  # 1.4 > 1.3
    }
    assert backlog.target_specs([result("full-1k", 1.0, 2.0)]) == []
    assert "p99 <= 10 ms" in backlog.target_note("max-100k")
    assert backlog.target_note("queues-1m") == "med <= 1.3x queues-1k"
    assert backlog.target_note("full-1k") == ""


@pytest.mark.parametrize("name", ["full-1m", "max-1m", "queues-1m"])
def test_backlog_fill_makes_every_node_exactly_full(name: str) -> None:
    backlog = bench_module("bench_backlog")
    case = backlog.CASES[name]
    shapes = backlog.SHAPES
    # no shape fits inside another: a freed slot takes only an ask of its own shape
    for a in shapes:
        for b in shapes:
            assert a == b or not (a[0] <= b[0] and a[1] <= b[1])
    plan = backlog.fill_plan(case)
    nodes_of = [sum(1 for i in range(case.nodes) if backlog.node_shape(i) == k) for k in range(5)]
    assert [sum(n for _, n in stage) for stage in plan] == [backlog.SLOTS * n for n in nodes_of]
    config, leaves = backlog.queues_yaml(case)
    if case.kind == "max":
        memory, vcore = backlog.max_of_a(case)
        held = [n for stage in plan for app, n in stage if app == "app-a"]
        assert sum(held) == case.nodes * backlog.SLOTS // 2
        assert f"max: {{memory: {memory}, vcore: {vcore}}}" in config
    if case.kind == "queues":
        assert len(leaves) == 100 and case.apps == 1_000
        assert {app for stage in plan for app, _ in stage} == {
            f"app-{a + 1}" for a in range(case.apps)
        }


def test_backlog_refills_every_freed_slot_and_times_the_set_up(tmp_path: Path) -> None:
    done, doc = run_script(
        "bench_backlog.py",
        tmp_path / "out.json",
        *("--cases", "max-1k,full-100k,queues-1k", "--batches", "12", "--warmup", "0"),
    )
    assert done.returncode == 0, done.stderr
    labels = re.findall(r"^\[\d+/3\] ([\w-]+): .* 12 batches: median ", done.stderr, re.M)
    assert labels == ["max-1k", "full-100k", "queues-1k"]
    assert doc["clock"] == "manual"
    for res in doc["results"]:
        # 12 batches of 10 releases, each freed slot refilled (a top-up on the way)
        assert (res["batches"], res["refilled"], len(res["latencies_ms"])) == (12, 120, 12)
        assert res["max_ms"] >= res["p99_ms"] >= res["median_ms"] > 0
        assert res["fill_allocations"] == res["nodes"] * 10
        assert 0 < res["fill_seconds"] < res["setup_seconds"]
        assert res["rss_bytes"] >= res["setup_rss_bytes"] > 10 * 2**20
        assert res["load_before"] is not None and res["load_after"] is not None
        assert res["build"] in ("pure", "compiled")
    assert set(doc["targets"]) == {"median_ms.full-100k", "p99_ms.full-100k"}
    assert "set-up s" in done.stdout and "load average" in done.stdout
    assert "med <= 2 ms, p99 <= 10 ms" in done.stdout


def test_backlog_refuses_an_unknown_case_or_clock() -> None:
    done = run_bench("bench_backlog.py", "--cases", "full-10m")
    assert done.returncode != 0
    assert "unknown case full-10m" in done.stderr
    done = run_bench("bench_backlog.py", "--clock", "wall")
    assert done.returncode != 0
    assert "unknown clock wall; known: manual, system" in done.stderr


def test_preemption_cases_are_sized_as_the_issue_asks() -> None:
    preemption = bench_module("bench_preemption")
    storm = preemption.STORMS["storm-5k"]
    # 5,000 full nodes; 10,000 asks of 10 are exactly the starved queue's guarantee,
    # half the cluster
    assert (storm.nodes, storm.asks) == (5_000, 10_000)
    assert storm.guarantee * 2 == storm.nodes * preemption.SLOTS * preemption.SLOT
    assert preemption.STORMS["storm-500"].asks == 1_000
    assert "preemption.delay: 1s" in preemption.storm_yaml(storm)
    met, below = preemption.IDLES["idle-met"], preemption.IDLES["idle-below"]
    assert met.backlog.name == below.backlog.name == "full-100k"
    on, off = preemption.idle_yaml(met, enabled=True), preemption.idle_yaml(met, enabled=False)
    assert "preemption: {enabled: false}" in off and "preemption" not in on
    assert off.replace("    preemption: {enabled: false}\n", "") == on  # nothing else differs
    # vcore in the configuration is in vcores unless it says m: the guarantees say m
    assert on.count("m}") == 2


def test_preemption_idle_summary_pools_the_repeats_and_pairs_the_batches(
    common: ModuleType,
) -> None:
    preemption = bench_module("bench_preemption")

    def repeat(off: list[float], on: list[float]) -> dict[str, Any]:
        def side(ms: list[float]) -> dict[str, Any]:
            return {
                "latencies_ms": ms,
                "median_ms": sorted(ms)[len(ms) // 2],
                "passes_per_batch": 1.0,
            }

        return {
            "batches": len(off),
            "rss_bytes": 2**20,
            "build": "pure",
            "load_before": 1.0,
            "load_after": 1.5,
            "variants": {"off": side(off), "on": side(on)},
        }

    idle = preemption.IDLES["idle-met"]
    summary = preemption.summarize_idle(
        idle, [repeat([1.0, 2.0, 3.0], [1.1, 2.2, 3.3]), repeat([1.0, 1.0, 4.0], [1.0, 1.0, 4.0])]
    )
    assert summary["batches"] == 6
    assert summary["variants"]["off"]["median_ms"] == pytest.approx(1.5)  # of 1, 1, 1, 2, 3, 4
    assert summary["variants"]["on"]["median_ms"] == pytest.approx(1.65)  # of 1, 1, 1.1, 2.2, ...
    assert summary["variants"]["on"]["p99_ms"] == pytest.approx(4.0)
    assert summary["ratio_median"] == pytest.approx(1.1)
    assert summary["ratio_paired"] == pytest.approx(1.05)  # of 1.1, 1.1, 1.1, 1, 1, 1
    assert summary["repeat_ratios"] == pytest.approx([1.1, 1.0])


def test_preemption_storm_takes_the_guarantee_and_idle_runs_both_variants(
    tmp_path: Path,
) -> None:
    done, doc = run_script("bench_preemption.py", tmp_path / "out.json")
    assert done.returncode == 0, done.stderr
    storms = {r["case"]: r for r in doc["storms"]}
    assert set(storms) == {"storm-500", "storm-5k"}
    for res in storms.values():
        assert res["met"] and res["starved_allocated"] == res["guarantee"]
        # each ask of 10 takes the place of one allocation of 10, confirmed by the RM
        assert res["preemptions"] == res["asks"]
        assert res["greedy_allocated"] == res["guarantee"]
        assert 0 < res["reached_seconds"] <= res["settled_seconds"]
        assert res["passes"] > 0 and res["calls_with_preemptions"] > 0
        assert res["rss_bytes"] >= res["setup_rss_bytes"] > 10 * 2**20
        assert res["load_before"] is not None and res["build"] in ("pure", "compiled")
    idle = {r["case"]: r for r in doc["idle"]}
    assert set(idle) == {"idle-met", "idle-below"}
    for res in idle.values():
        assert (res["repeats"], res["batches"]) == (1, 3)
        (figures,) = res["repeat_figures"]
        assert figures["order"] == ["off", "on"]
        for variant in ("off", "on"):
            v = res["variants"][variant]
            assert v["max_ms"] >= v["p99_ms"] >= v["median_ms"] > 0
            assert len(figures["variants"][variant]["latencies_ms"]) == 3
        assert res["ratio_median"] > 0
    assert set(doc["targets"]) == {"ratio_median.idle-met"}
    assert "on/off: median" in done.stdout and "load average" in done.stdout


def test_preemption_refuses_an_unknown_case() -> None:
    done = run_bench("bench_preemption.py", "--cases", "storm-1m")
    assert done.returncode != 0
    assert "unknown case storm-1m" in done.stderr
