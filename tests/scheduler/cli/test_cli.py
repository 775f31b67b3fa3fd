"""The ``scheduler`` command line, and the library's silence when nobody asked it to log."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import scheduler
from scheduler.cli._app import _table, main
from scheduler.cli._demo import Section

SRC = str(Path(scheduler.__file__).parents[1])
GOOD = """\
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: batch
            resources:
              max: {memory: 10G, vcore: 10}
          - name: service
"""
# Two partitions, one problem each: a quota problem (no line of its own: placed at its
# queue) and an unknown key.
BROKEN = """\
partitions:
  - name: default
    queues:
      - name: root
        queues:
          - name: batch
            resources:
              max: {memory: 10G}
              guaranteed: {memory: 20G}
  - name: gpu
    queues:
      - name: root
        maxapps: 3
"""


def run(*args: str, code: str | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m scheduler ARGS`` (or ``python -c CODE``) in a fresh process."""
    env = {**os.environ, "PYTHONPATH": SRC}
    command = ["-c", code] if code is not None else ["-m", "scheduler", *args]
    return subprocess.run(
        [sys.executable, *command], capture_output=True, text=True, env=env, timeout=120
    )


def cells(text: str) -> list[list[str]]:
    """The lines of a table, cut into cells at runs of two or more spaces."""
    return [[c.strip() for c in line.split("  ") if c.strip()] for line in text.splitlines()]


# ============================================================================ demo
def test_demo_prints_nodes_apps_allocations_and_queues(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--nodes", "2", "--tasks", "2"]) == 0
    out = capsys.readouterr().out
    for title in ("Nodes", "Applications", "Allocations", "Placeholders", "Queues"):
        assert f"\n{title}" in out
    table = cells(out)
    assert ["spark-etl", "executors", "2", "2", "0"] in table  # both placeholders replaced
    assert ["spark-etl", "Accepted -> Starting -> Running -> Completing -> Completed"] in table
    assert out.count("node-1") >= 2
    assert "Traceback" not in out
    # Resources in the units check-config and the status page use: 8Gi, 500m.
    assert ["node-1", "memory=8Gi, vcore=4", "memory=2Gi, vcore=1", "memory=6Gi, vcore=3", "2"] in (
        table
    )
    assert ["web-api-task-0", "web-api", "node-2", "memory=1Gi, vcore=500m"] in table
    # the built-in configuration made each queue from the application's namespace tag
    assert ["root.service", "Active", "-", "memory=2Gi, vcore=1", "-"] in table
    assert ["root.batch", "Active", "-", "-", "-"] in table


def test_demo_summarises_long_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--nodes", "30", "--tasks", "1", "--max-rows", "5"]) == 0
    out = capsys.readouterr().out
    assert "node-5" in out and "node-6 " not in out
    assert out.count("… and 25 more") == 3  # the Nodes table of each of the three reports


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--tasks", "-3"], "--tasks"),
        (["--nodes", "0"], "--nodes"),
        (["--nodes", "many"], "--nodes"),
        (["--max-rows", "-1"], "--max-rows"),
    ],
)
def test_demo_refuses_a_bad_option_with_a_usage_error(
    capsys: pytest.CaptureFixture[str], args: list[str], option: str
) -> None:
    assert main(["demo", *args]) == 2
    captured = capsys.readouterr()
    assert f"Invalid value for '{option}'" in captured.err
    assert captured.out == "" and "Traceback" not in captured.err


def test_demo_shows_progress_on_stderr_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--nodes", "2", "--tasks", "1", "--progress"]) == 0
    captured = capsys.readouterr()
    assert "7/7" in captured.err  # one node batch and six steps
    assert "7/7" not in captured.out


def test_table_says_none_and_counts_the_rows_it_leaves_out() -> None:
    from rich.console import Console

    console = Console(width=200, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(_table(Section("T", ("a", "b"), [("x", {"memory": 1 << 30})] * 4), max_rows=3))
    console.print(_table(Section("E", ("a",), []), max_rows=3))
    console.file.close()
    text = console.export_text()
    assert ["x", "memory=1Gi"] in cells(text)
    assert "… and 1 more" in text and "(none)" in text


def test_a_closed_pipe_ends_the_demo_quietly() -> None:
    env = {**os.environ, "PYTHONPATH": SRC}
    # Output far beyond a pipe's buffer, so that the demo writes after the reader left.
    with subprocess.Popen(
        [sys.executable, "-m", "scheduler", "demo", "--nodes", "2000", "--max-rows", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline().startswith("== after placing")
        proc.stdout.close()
        err = proc.stderr.read()
        assert proc.wait(timeout=120) == 1
    assert "Traceback" not in err and "Exception ignored" not in err
    assert err == ""


# ============================================================================ check-config
def test_check_config_summarises_a_valid_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(GOOD)
    assert main(["check-config", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path} is valid: 1 partition, 3 queues" in out
    assert ["default", "3", "-", "fair"] in cells(out)


def test_check_config_lists_each_problem_with_line_and_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(BROKEN)
    assert main(["check-config", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{path}:6:13: partition 'default', queue 'root.batch': ")
    assert "guaranteed resource" in lines[0]
    assert lines[1].startswith(f"{path}:13:9: partitions[gpu].queues[root].maxapps: unknown key")
    assert lines[2].startswith(f"2 problems in {path}")


SEVERAL = """\
partitions:
  - name: default
    placementrules:
      - name: nosuchrule
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: bad name
          - name: fine
          - name: also bad!
          - name: quota
            resources:
              guaranteed: {memory: 2G}
              max: {memory: 1G}
"""


def test_check_config_lists_every_problem_of_one_partition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(SEVERAL)
    assert main(["check-config", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": ", 1)[0] for line in lines[:-1]] == [
        f"{path}:4:15",  # the unknown placement rule
        f"{path}:9:19",  # 'bad name'
        f"{path}:11:19",  # 'also bad!'
        f"{path}:12:13",  # the quota queue: guaranteed over max
    ]  # in file order
    assert "nosuchrule" in lines[0]
    assert "invalid queue name 'bad name'" in lines[1]
    assert "invalid queue name 'also bad!'" in lines[2]
    assert "guaranteed resource" in lines[3]
    assert lines[-1].startswith(f"4 problems in {path}")


def test_check_config_shows_resources_in_units(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(
        textwrap.dedent("""\
            partitions:
              - queues:
                  - name: p
                    resources: {max: {memory: 2Gi, vcore: 2}}
                    queues:
                      - name: c
                        resources: {max: {memory: 3G, vcore: 2500m}}
            """)
    )
    assert main(["check-config", str(path)]) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        f"{path}:6:13: partition 'default', queue 'root.p.c': maximum resource "
        "{memory: 2.8Gi, vcore: 2500m} is larger than the maximum resource "
        "{memory: 2Gi, vcore: 2} of its parent"
    )


def test_check_config_reports_a_preemption_property_the_core_would_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(GOOD.replace("          - name: service\n", PREEMPTION))
    assert main(["check-config", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{path}:12:34: ")
    assert lines[0].endswith(
        "partition 'default', queue 'root.service': preemption.policy 'always' is not valid "
        "(expected default, fence or disabled); the core logs it and uses default"
    )
    assert lines[1].startswith(f"{path}:13:33: ")
    assert lines[1].endswith(
        "preemption.delay '1 minute' is not valid (unknown unit ' minute' "
        "in duration '1 minute'); the core logs it and uses 30s"
    )
    assert lines[2].startswith(f"2 problems in {path}")


PREEMPTION = """\
          - name: service
            properties:
              preemption.policy: always
              preemption.delay: 1 minute
"""


def test_check_config_places_a_yaml_syntax_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text("partitions:\n  - name: x\n    queues: [\n")
    assert main(["check-config", str(path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{path}:4:1: invalid YAML: the file ends where a value is expected: complete the "
        "value, or close the open '[' or '{'",
        f"1 problem in {path} (the rest of the file is checked once its YAML can be read)",
    ]


@pytest.mark.parametrize("name", ["missing.yaml", "."])
def test_check_config_on_an_unreadable_file_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    path = tmp_path / name
    assert main(["check-config", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"scheduler check-config: cannot read {str(path)!r}: ")
    assert "Traceback" not in captured.err and captured.out == ""


def test_check_config_reads_standard_input() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "scheduler", "check-config", "-"],
        input=GOOD,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("<stdin> is valid: 1 partition, 3 queues")


# ============================================================================ the program
def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"scheduler (pyscheduler-core) {scheduler.__version__}\n"


def test_help_is_written_for_users(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "check-config  Validate a queues.yaml and list its problems." in out
    assert "demo          Run a demo scenario and print the core's state." in out
    assert "-v, --verbose" in out


def test_python_dash_m_scheduler_is_the_same_program() -> None:
    result = run("--help")
    assert result.returncode == 0
    assert "check-config" in result.stdout and "demo" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["demo", "--nodes", "1", "--tasks", "1", "-v"],
        ["-v", "demo", "--nodes", "1", "--tasks", "1"],
        ["demo", "--nodes", "1", "--tasks", "1", "--log-level", "info"],
    ],
)
def test_logging_options_work_before_and_after_the_command(args: list[str]) -> None:
    result = run(*args)
    assert result.returncode == 0, result.stderr
    assert "resource manager registered" in result.stderr
    assert ("DEBUG" in result.stderr) == ("--log-level" not in args)


def test_the_library_is_silent_unless_enabled() -> None:
    scenario = textwrap.dedent(
        """
        import asyncio, sys
        import scheduler
        from scheduler import si
        from scheduler.testing import ManualClock, RecordingCallback

        async def scenario():
            async with scheduler.start_scheduler(clock=ManualClock()) as core:
                await core.register_resource_manager(
                    si.RegisterResourceManagerRequest(rm_id="rm"), RecordingCallback())
                await core.update_node(si.NodeRequest(rm_id="rm", nodes=[si.NodeInfo(
                    node_id="n1", action=si.ActionFromRM.CREATE,
                    schedulable_resource=si.Resource.of(memory=10))]))
                await core.settle()

        asyncio.run(scenario())
        if "enable" in sys.argv:
            from loguru import logger
            logger.enable("scheduler"); logger.enable("actors")
            asyncio.run(scenario())
        """
    )
    quiet = run(code=scenario)
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout == ""
    loud = subprocess.run(
        [sys.executable, "-c", scenario, "enable"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=120,
    )
    assert "resource manager registered" in loud.stderr
