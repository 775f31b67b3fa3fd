"""The benchmark scripts as tools: progress on stderr, metadata in the JSON, ``--check``.

Each script runs in a subprocess at its ``--quick`` size. No measured figure is asserted:
``--target-scale`` (hidden) makes every target trivially met (0) or impossible (1e9), so
only the structure of the output and the exit codes are checked.
"""

from __future__ import annotations

import argparse
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

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
SCRIPTS = ["bench_scheduling.py", "bench_actors.py", "bench_proxy.py", "bench_gang.py"]
PROGRESS = re.compile(r"^\[(\d+)/(\d+)\] ", re.MULTILINE)


def run_script(
    script: str, out: Path, *args: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    env.pop("BENCH_GANG_SMALL", None)
    env.pop("BENCH_REPEAT", None)
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--quick", "--out", str(out), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
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


def test_ab_still_reads_the_rates_and_no_metadata(tmp_path: Path) -> None:
    _, doc = run_script("bench_scheduling.py", tmp_path / "out.json")
    sys.path.insert(0, str(BENCH))
    try:
        import ab  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(BENCH))
    rates: dict[str, float] = ab.rates(doc)
    assert set(rates) == {"results[nodes=10].allocs_per_s", "results[nodes=20].allocs_per_s"}


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
