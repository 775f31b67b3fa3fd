"""The soak (bench/soak.py) in pieces, quickly: the judge on synthetic samples, the report
files, the warm-up option, and the message without matplotlib. ``nox -s soak`` (and CI)
runs the soak itself for a minute."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .test_bench_tools import BENCH, PACKAGE_ROOT, bench_module


@pytest.fixture(scope="module")
def report() -> ModuleType:
    return bench_module("_soak_report")


def samples(report: ModuleType, rss: Any, *, seconds: int = 60, **fields: Any) -> list[Any]:
    """A sample every 2 s; ``rss(t)`` gives the RSS, ``fields`` other fields' functions."""
    out = []
    for i, t in enumerate(range(0, seconds + 1, 2)):
        base = {
            "t": float(t),
            "rss_mib": rss(t),
            "fds": 20,
            "actors": 100,
            "events_lowest": 0,
            "events_highest": 100 * i - 1,
            "events_size": min(100 * i, 10_000),
            "allocations": 50 * t,
            "alloc_rate": 50.0,
            "reconnects": i // 5,
            "recoveries": i // 10,
            "live_apps": 10,
            "load1": 1.0,
        }
        base.update({k: f(t) for k, f in fields.items()})
        out.append(report.Sample(**base))
    return out


def verdicts(checks: list[Any]) -> dict[str, bool]:
    return {c.name: c.passed for c in checks}


def test_a_flat_run_after_warm_up_passes(report: ModuleType) -> None:
    # growing fast during the warm-up, then flat with some noise
    runs = samples(report, lambda t: min(t, 20) * 3 + 60 + (t % 3) * 0.5)
    checks = report.judge(runs, 20.0, report.Thresholds())
    assert all(verdicts(checks).values()), [c.line() for c in checks]
    assert [c.name for c in checks] == [
        "rss_growth",
        "rss_slope",
        "fds_growth",
        "actors_growth",
        "event_ring",
        "progress",
    ]


def test_steady_growth_fails_rss_and_names_the_figures(report: ModuleType) -> None:
    leaking = samples(report, lambda t: 60.0 + t)  # 60 MiB/min
    checks = {c.name: c for c in report.judge(leaking, 20.0, report.Thresholds())}
    assert not checks["rss_slope"].passed and not checks["rss_growth"].passed
    assert checks["rss_slope"].value == pytest.approx(60.0)
    assert "+60.00 MiB/min" in checks["rss_slope"].detail
    fds = samples(report, lambda t: 60.0, fds=lambda t: 20 + t)
    assert verdicts(report.judge(fds, 20.0, report.Thresholds()))["fds_growth"] is False
    full = samples(report, lambda t: 60.0, events_size=lambda t: 10_001)
    assert verdicts(report.judge(full, 20.0, report.Thresholds()))["event_ring"] is False
    idle = samples(report, lambda t: 60.0, allocations=lambda t: 500)
    assert verdicts(report.judge(idle, 20.0, report.Thresholds()))["progress"] is False


def test_too_few_samples_after_the_warm_up_is_a_failure(report: ModuleType) -> None:
    checks = report.judge(samples(report, lambda t: 60.0, seconds=6), 5.0, report.Thresholds())
    assert [(c.name, c.passed) for c in checks] == [("samples", False)]
    assert "at least 4 needed" in checks[0].detail


def test_warmup_is_seconds_or_a_fraction(report: ModuleType) -> None:
    assert report.parse_warmup("0.25", 60) == 15
    assert report.parse_warmup("20", 60) == 20
    assert report.parse_warmup("0.5s", 60) == 0.5
    with pytest.raises(ValueError, match="leaves nothing"):
        report.parse_warmup("60", 60)
    assert report.slope_per_minute([(0, 1.0), (60, 3.0)]) == pytest.approx(2.0)
    assert report.slope_per_minute([(5, 1.0)]) == 0.0


def test_report_files(report: ModuleType, tmp_path: Path) -> None:
    runs = samples(report, lambda t: 60 + (t % 4))
    thresholds = report.Thresholds()
    checks = report.judge(runs, 20.0, thresholds)
    summary = {
        "passed": True,
        "command": "python bench/soak.py --duration 60",
        "started": "2026-01-01T00:00:00+00:00",
        "warmup_seconds": 20.0,
        "sample_seconds": 2.0,
        "thresholds": dataclasses.asdict(thresholds),
        "checks": [report.check_json(c) for c in checks],
        "figures": report.figures_of(runs, 20.0),
        "rms": [{"rm": "rm0", "transport": "tcp", "allocations": 3}],
        "commit": {"sha": "abc"},
        "plot": None,
    }
    report.write_report(tmp_path, runs, summary)
    assert report.read_samples(tmp_path / "samples.csv") == runs
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert {c["name"] for c in doc["checks"]} >= {"rss_growth", "rss_slope", "event_ring"}
    assert doc["figures"]["allocations"]["per_s"] == pytest.approx(50.0)
    md = (tmp_path / "report.md").read_text()
    assert md.startswith("# Soak: PASS") and "| rss_slope | PASS |" in md and "| rm0 |" in md
    pytest.importorskip("matplotlib")
    report.plot(tmp_path / "rss.png", runs, 20.0, "Soak: test")
    assert (tmp_path / "rss.png").read_bytes()[:4] == b"\x89PNG"


def test_without_matplotlib_the_soak_says_how_to_get_it(tmp_path: Path) -> None:
    blocked = "import sys; sys.modules['matplotlib'] = None; sys.argv[0] = 'soak.py'; "
    run = "import runpy; runpy.run_path('soak.py', run_name='__main__')"
    done = subprocess.run(
        [sys.executable, "-c", blocked + run, "--out", str(tmp_path / "out")],
        cwd=BENCH,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(BENCH), PACKAGE_ROOT])),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "pip install 'pyscheduler-core[soak]'" in done.stderr
    assert "--no-plot" in done.stderr
