"""The ``scheduler`` command line."""

from __future__ import annotations

import subprocess
import sys

from scheduler._cli import main, table


def test_table_aligns_columns_and_says_none() -> None:
    text = table("T", ("a", "bb"), [("x", {"memory": 1}), ("long", 2)])
    lines = text.splitlines()
    assert lines[0] == "T"
    assert lines[3].startswith("x     memory=1")
    assert table("T", ("a",), []).endswith("(none)\n")


def test_demo_prints_nodes_apps_allocations_and_queues(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["demo", "--nodes", "2", "--tasks", "2"]) == 0
    out = capsys.readouterr().out
    for title in ("Nodes", "Applications", "Allocations", "Placeholders", "Queues"):
        assert title in out
    assert "spark-etl    executors   2      2         0" in out  # both placeholders replaced
    assert "spark-etl    Accepted -> Starting -> Running -> Completing -> Completed" in out
    assert out.count("node-1") >= 2


def test_python_dash_m_scheduler_is_the_same_program() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "scheduler", "--help"], capture_output=True, text=True, check=True
    )
    assert "demo" in result.stdout
