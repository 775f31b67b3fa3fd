"""The scenario file: read strictly, every problem placed at its file, line and column."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from scheduler.simulate import (
    ScenarioError,
    builtin_scenario,
    check_limits,
    load_scenario,
    parse_scenario,
)

ROOT = Path(__file__).resolve().parents[3]

GOOD = """\
name: small
seed: 3
duration: 1h30m
sample_every: 1m
nodes:
  - group: w
    count: 2
    capacity: {memory: 8Gi, vcore: 2}
    attributes: {zone: a}
workloads:
  - name: jobs
    namespace: dev
    arrivals:
      fixed: [0s, 90]
      poisson: {rate: 6/h, until: 1h}
      burst: [{at: 10m, count: 3}]
    job: {kind: batch, pods: 2, resource: {memory: 1Gi, vcore: 500m}, runtime: {uniform: [1m, 2m]}}
  - name: spark
    namespace: dev
    arrivals: {fixed: [5m]}
    job:
      kind: spark
      pods: 3
      resource: {memory: 1Gi, vcore: 1}
      runtime: {lognormal: {median: 5m, sigma: 0.3}}
      gang: {style: Hard, timeout: 2m}
events:
  - {at: 20m, nodes_drained: {group: w, count: 1}}
  - {at: 10m, rm_restart: {}}
"""


def problem(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, source="s.yaml")
    return caught.value


def test_a_good_file_reads_into_values() -> None:
    s = parse_scenario(GOOD, source="s.yaml")
    assert (s.name, s.seed, s.duration, s.sample_every) == ("small", 3, 5400.0, 60.0)
    assert s.nodes[0].capacity == {"memory": 8 << 30, "vcore": 2000}
    assert s.nodes[0].attributes == {"zone": "a"}
    jobs, spark = s.workloads
    assert jobs.arrivals.fixed == (0.0, 90.0)
    assert jobs.arrivals.poisson[0].rate == pytest.approx(6 / 3600)
    assert jobs.arrivals.bursts[0].at == 600.0 and jobs.arrivals.bursts[0].count == 3
    assert jobs.job.resource == {"memory": 1 << 30, "vcore": 500}
    assert spark.job.gang.style == "Hard" and spark.job.gang.timeout == 120.0
    assert spark.job.runtime is not None and spark.job.runtime.kind == "lognormal"
    assert [e.kind for e in s.events] == ["rm_restart", "nodes_drained"]  # in time order
    assert s.configurations[0].queues == ""  # the core's built-in configuration


def test_an_unknown_key_is_placed_at_its_line_and_column() -> None:
    e = problem(GOOD.replace("    count: 2\n", "    count: 2\n    cont: 3\n"))
    assert (e.line, e.column) == (8, 5)
    assert "unknown key 'cont'" in e.message and "nodes[0].cont" in e.message
    assert str(e).startswith("s.yaml:8:5: ")


def test_a_wrong_type_names_what_it_expected() -> None:
    e = problem(GOOD.replace("count: 2\n", "count: two\n"))
    assert e.line == 7 and "expected a non-negative integer" in e.message


def test_a_bad_duration_and_a_bad_rate_say_how_to_write_them() -> None:
    e = problem(GOOD.replace("duration: 1h30m", "duration: 90 minutes"))
    assert e.line == 3 and "such as 90s" in e.message
    e = problem(GOOD.replace("rate: 6/h", "rate: often"))
    assert e.line == 15 and "2/min" in e.message


def test_an_unknown_job_kind_lists_the_kinds() -> None:
    e = problem(GOOD.replace("kind: batch", "kind: cron"))
    assert e.line == 17 and "batch, spark, permit, service" in e.message


def test_a_yaml_syntax_error_has_its_place() -> None:
    e = problem(GOOD.replace("seed: 3", "seed: [3"))
    assert e.line > 0 and e.message.startswith("invalid YAML")


def test_an_event_on_an_unknown_group_is_an_error() -> None:
    e = problem(GOOD.replace("nodes_drained: {group: w", "nodes_drained: {group: x"))
    assert e.line == 28 and "no node group 'x'" in e.message


def test_inline_queues_are_checked_by_the_core_and_placed_in_the_scenario() -> None:
    queues = (
        "queues:\n  partitions:\n    - name: default\n      queues:\n"
        "        - name: root\n          queues:\n            - name: a\n"
        "              resources: {guaranteed: {memory: lots}}\n"
    )
    text = GOOD + queues
    e = problem(text)
    lines = text.splitlines()
    assert lines[e.line - 1].strip().startswith("resources:") and "lots" in e.message
    assert lines[e.line - 1][e.column - 1 :].startswith("lots")


def test_a_queues_file_is_read_beside_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "q.yaml").write_text(
        "partitions:\n  - name: default\n    queues:\n      - name: root\n"
        "        queues:\n          - name: a\n"
    )
    path = tmp_path / "s.yaml"
    path.write_text(GOOD + "queues_file: q.yaml\n")
    assert "name: a" in load_scenario(path).configurations[0].queues
    (tmp_path / "q.yaml").write_text("partitions:\n  - name: default\n    queus: []\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert caught.value.source.endswith("q.yaml") and caught.value.line == 3


def test_configurations_vary_sorting_and_gang_style() -> None:
    s = parse_scenario(
        GOOD + "configurations:\n  - {name: fair}\n  - {name: packed, node_sorting: binpacking,"
        " gang_style: Soft}\n",
        source="s.yaml",
    )
    fair, packed = s.configurations
    assert fair.queues == "" and "binpacking" in packed.queues and packed.gang_style == "Soft"


def test_a_missing_file_is_a_scenario_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="cannot read the scenario"):
        load_scenario(tmp_path / "nope.yaml")


def test_the_built_in_scenario_and_the_suite_read() -> None:
    assert len(builtin_scenario().nodes) == 2
    files = sorted((ROOT / "scenarios").glob("*.yaml"))
    assert len(files) == 5
    for f in files:
        assert load_scenario(f).workloads


def test_numbers_and_durations_read_every_form_yaml_gives_an_int() -> None:
    s = parse_scenario(
        GOOD.replace("duration: 1h30m", "duration: 0x10")
        .replace("fixed: [0s, 90]", "fixed: [0b1, 0x10]")
        .replace("sigma: 0.3", "sigma: 0x10")
        .replace("kind: batch,", "kind: batch, priority: 0x10,"),
        source="s.yaml",
    )
    jobs, spark = s.workloads
    assert s.duration == 16.0 and jobs.arrivals.fixed == (1.0, 16.0)
    assert jobs.job.priority == 16
    assert spark.job.runtime is not None and spark.job.runtime.b == 16.0


def test_a_priority_takes_the_int32_range_exactly() -> None:
    def priority(value: str) -> str:
        return GOOD.replace("kind: batch,", f"kind: batch, priority: {value},")

    assert parse_scenario(priority("-2147483648")).workloads[0].job.priority == -(2**31)
    assert parse_scenario(priority("2147483647")).workloads[0].job.priority == 2**31 - 1
    for outside in ("-2147483649", "2147483648"):
        e = problem(priority(outside))
        assert e.line == 17 and "expected a 32-bit integer" in e.message


OTHER = "partitions:\n  - name: other\n    queues:\n      - name: root\n"


def test_a_configuration_without_the_default_partition_is_refused(tmp_path: Path) -> None:
    inline = "queues:\n" + "".join("  " + line + "\n" for line in OTHER.splitlines())
    text = GOOD + inline
    e = problem(text)
    assert "plays the partition 'default'" in e.message
    assert "has 'other': name it default" in e.message
    assert text.splitlines()[e.line - 1][e.column - 1 :] == "other"
    root = "queues: [{name: root}]"
    entry = (
        "configurations:\n  - name: c\n"
        f"    queues: {{partitions: [{{name: b, {root}}}, {{name: c, {root}}}]}}\n"
    )
    e = problem(GOOD + entry)
    assert "has 'b', 'c': name one of them default" in e.message
    assert (GOOD + entry).splitlines()[e.line - 1][e.column - 1 :].startswith("b, queues")
    (tmp_path / "q.yaml").write_text(OTHER)
    (tmp_path / "s.yaml").write_text(GOOD + "queues_file: q.yaml\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(tmp_path / "s.yaml")
    assert caught.value.source.endswith("q.yaml")
    assert (caught.value.line, caught.value.column) == (2, 11)
    two = f"queues: {{partitions: [{{name: other, {root}}}, {{name: Default, {root}}}]}}\n"
    assert "Default" in parse_scenario(GOOD + two, source="s.yaml").configurations[0].queues


def _at(text: str, e: ScenarioError) -> str:
    """The text of the file from the place of ``e``."""
    return text.splitlines()[e.line - 1][e.column - 1 :]


@pytest.mark.parametrize(
    ("change", "fragments", "place"),
    [
        (("duration: 1h30m", "duration: 10000h"), ["36,000,000 ticks", "MAX_TICKS"], "10000h"),
        (("sample_every: 1m", "tick: 0.1ms"), ["54,000,000 ticks", "lengthen the tick"], "0.1ms"),
        (
            ("sample_every: 1m", "sample_every: 10ms\ntick: 10ms"),
            ["540,000 samples", "MAX_SAMPLES", "sample less often"],
            "10ms",
        ),
        (("count: 2\n", "count: 100001\n"), ["100,001 nodes", "MAX_NODES"], "100001"),
        (
            ("nodes_drained: {group: w, count: 1}", "nodes_added: {group: w, count: 99999}"),
            ["100,001 nodes", "MAX_NODES"],
            "99999}}",
        ),
        (
            ("count: 3}]", "count: 1000001}]"),
            ["workload 'jobs' plans 1,000,0", "1,000,001 jobs in a burst", "MAX_JOBS_PER_WORKLOAD"],
            "1000001}]",
        ),
        (
            ("rate: 6/h, until: 1h}", "rate: 300/s, until: 1h}"),
            ["1,080,000 Poisson arrivals", "MAX_JOBS_PER_WORKLOAD", "window"],
            "300/s, until: 1h}",
        ),
        (
            ("pods: 3\n", "pods: 10000001\n"),
            ["10,000,023 pods", "MAX_PODS", "fewer pods per job"],
            "10000001",
        ),
    ],
)
def test_what_a_run_may_ask_for_is_limited(
    change: tuple[str, str], fragments: list[str], place: str
) -> None:
    text = GOOD.replace(*change)
    e = problem(text)
    for fragment in fragments:
        assert fragment in e.message
    assert _at(text, e).startswith(place)


def test_the_limits_hold_at_their_values() -> None:
    at_limits = (
        GOOD.replace("duration: 1h30m", "duration: 10000000")  # 10,000,000 ticks of 1s
        .replace("sample_every: 1m", "sample_every: 100s")  # 100,000 samples
        .replace("count: 2\n", "count: 100000\n")
        .replace("count: 3}]", "count: 999992}]")  # with 2 fixed and 6 Poisson: 1,000,000
    )
    parse_scenario(at_limits, source="s.yaml")


def test_the_whole_scenario_plans_at_most_two_million_jobs() -> None:
    more = "".join(
        f"  - name: more{i}\n    namespace: dev\n"
        "    arrivals: {burst: {at: 0s, count: 700000}}\n"
        "    job: {kind: batch, resource: {vcore: 1}, runtime: 1s}\n"
        for i in range(3)
    )
    text = GOOD.replace("events:\n", more + "events:\n")
    e = problem(text)
    assert "the workloads plan 2,100,0" in e.message and "MAX_JOBS)" in e.message
    assert "more2" in text.splitlines()[e.line - 3] and _at(text, e).startswith("700000")


def test_check_limits_weighs_a_duration_given_after_loading() -> None:
    s = parse_scenario(GOOD, source="s.yaml")
    check_limits(s)
    with pytest.raises(ScenarioError, match="MAX_TICKS") as caught:
        check_limits(replace(s, duration=1e9))
    assert caught.value.line == 3  # the file's duration


def test_a_queues_file_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "q.yaml")  # reading it would wait for a writer forever
    (tmp_path / "s.yaml").write_text(GOOD + "queues_file: q.yaml\n")
    with pytest.raises(ScenarioError, match="is not a regular file") as caught:
        load_scenario(tmp_path / "s.yaml")
    assert caught.value.line == GOOD.count("\n") + 1
    (tmp_path / "d.yaml").write_text(GOOD + "queues_file: /dev/zero\n")
    with pytest.raises(ScenarioError, match="'/dev/zero' is not a regular file"):
        load_scenario(tmp_path / "d.yaml")


def test_a_duplicate_group_or_workload_is_placed_at_the_second() -> None:
    text = GOOD.replace(
        "    attributes: {zone: a}\n", "  - {group: w, count: 1, capacity: {vcore: 1}}\n"
    )
    e = problem(text)
    assert "nodes[1].group" in e.message and "duplicate group 'w'" in e.message
    assert (e.line, _at(text, e)) == (9, "w, count: 1, capacity: {vcore: 1}}")
    text = GOOD.replace("  - name: spark\n", "  - name: jobs\n")
    e = problem(text)
    assert "workloads[1].name" in e.message and "duplicate workload 'jobs'" in e.message
    assert (e.line, e.column) == (18, 11)  # the first is on line 11


def test_messages_name_the_scenario_and_the_key() -> None:
    e = problem(GOOD + "---\nname: two\n")
    assert "a scenario file holds one" in e.message and "queues.yaml" not in e.message
    text = GOOD.replace("kind: batch,", "kind: batch, preemption: {allow_preempt_other: maybe},")
    e = problem(text)
    assert "workloads[0].job.preemption.allow_preempt_other: expected true or false" in e.message
    assert _at(text, e).startswith("maybe}")
    text = GOOD.replace("rm_restart: {}", "rm_restart: {soon: true}")
    e = problem(text)
    assert "events[1].rm_restart.soon: unknown key 'soon'" in e.message
    assert "rm_restart takes no keys (rm_restart: {})" in e.message and "allowed" not in e.message
    assert _at(text, e).startswith("soon")
    for pods in ("-1", "0"):
        e = problem(GOOD.replace("pods: 3\n", f"pods: {pods}\n"))
        assert e.line == 23 and "expected a whole number of at least 1" in e.message
    e = problem(GOOD.split("nodes:")[0] + "nodes: []\n" + GOOD.split("attributes: {zone: a}\n")[1])
    assert (e.line, e.column) == (5, 8) and "needs 'nodes'" in e.message


def test_a_duration_without_a_unit_is_seconds() -> None:
    s = parse_scenario(GOOD.replace("duration: 1h30m", "duration: 90"), source="s.yaml")
    assert s.duration == 90.0 and s.workloads[0].arrivals.fixed == (0.0, 90.0)
    assert "plain numbers, taken as seconds" in (ROOT / "docs" / "simulate.md").read_text()
