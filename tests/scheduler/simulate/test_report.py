"""The report folder of ``scheduler simulate``: which files it holds, that report.md and
index.html say what the Summary says, that the page shows every plot, that the same input
gives the same bytes, and what a user without matplotlib is told.

Reports are written once per module (matplotlib takes about a second a report).
"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path

import msgspec
import pytest

from scheduler._errors import SchedulerError
from scheduler.simulate import Distribution, QueueSample, RunResult, Summary
from scheduler.simulate._report import INSTALL_HINT, REPORT_FILES, PlotsUnavailable, write_report
from tests.scheduler.simulate.runs import make_run, summarize

pytest.importorskip("matplotlib")

PNGS = {name for name in REPORT_FILES if name.endswith(".png")}


def one_run() -> tuple[RunResult, Summary]:
    """The three-queue hour, its summary given numbers easy to spot in the report."""
    run = make_run("default")
    summary = msgspec.structs.replace(
        summarize(run),
        pending_time=Distribution(count=150, mean=80.0, p50=61.0, p90=217.0, p99=354.0, max=410.0),
        utilization={"memory": 0.6342, "vcore": 0.5817},
        preemptions=17,
    )
    return run, summary


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    folder = tmp_path_factory.mktemp("one") / "report"
    run, summary = one_run()
    return folder, write_report([run], [summary], folder)


@pytest.fixture(scope="module")
def double(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    folder = tmp_path_factory.mktemp("two")
    fair, fifo = make_run("fair"), make_run("fifo", seed=8, wait=300.0)
    return folder, write_report([fair, fifo], [summarize(fair), summarize(fifo)], folder)


class _Page(HTMLParser):
    """The images of a page and the cells of its tables, row by row."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "img":
            self.images.append(dict(attrs)["src"] or "")
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def page(folder: Path) -> _Page:
    parser = _Page()
    parser.feed((folder / "index.html").read_text(encoding="utf-8"))
    return parser


def test_one_run_writes_exactly_the_report_files(single: tuple[Path, list[Path]]) -> None:
    folder, written = single
    assert [p.name for p in written] == list(REPORT_FILES)
    assert sorted(p.name for p in folder.iterdir()) == sorted(REPORT_FILES)
    for png in PNGS:
        assert (folder / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png


def test_several_runs_add_the_comparison_plot(double: tuple[Path, list[Path]]) -> None:
    folder, written = double
    assert [p.name for p in written] == [*REPORT_FILES, "comparison.png"]
    assert sorted(p.name for p in folder.iterdir()) == sorted([*REPORT_FILES, "comparison.png"])


def test_report_md_shows_the_summary_numbers_and_checks(single: tuple[Path, list[Path]]) -> None:
    text = (single[0] / "report.md").read_text(encoding="utf-8")
    # The Summary's own numbers, not numbers recomputed from the pods.
    assert "p50 1m1s, p90 3m37s, p99 5m54s, max 6m50s" in text
    assert "memory 63.4%, vcore 58.2%" in text
    assert "- **preemptions**: 17" in text
    # The checks, each with its verdict.
    assert "| every job finished | FAIL |" in text
    assert "| no node used beyond its capacity | pass | none |" in text
    assert "| root.batch reached its guarantee | pass |" in text
    assert "| root.service reached its guarantee | FAIL |" in text
    # The queue table in queues.yaml's units.
    assert "| root.batch | memory 256Gi, vcore 64 | memory 384Gi, vcore 96 |" in text
    assert "| 30m0s | node-removed | node-3 failed |" in text
    for png in PNGS:
        assert f"]({png})" in text, png
    assert "## Comparison" not in text


def test_html_shows_every_plot_and_the_checks(single: tuple[Path, list[Path]]) -> None:
    html = page(single[0])
    assert sorted(html.images) == sorted(PNGS)
    assert [
        "root.service reached its guarantee",
        "FAIL",
        "2m0s below it with pods pending",
    ] in html.rows
    text = (single[0] / "index.html").read_text(encoding="utf-8")
    assert "<style>" in text and "<link" not in text and "<script" not in text  # one file
    assert 'class="fail">FAIL</td>' in text
    assert "p90 3m37s" in text


def test_two_runs_compare_in_a_table_and_a_plot(double: tuple[Path, list[Path]]) -> None:
    folder = double[0]
    html = page(folder)
    assert sorted(html.images) == sorted([*PNGS, "comparison.png"])
    header = next(r for r in html.rows if r and r[0] == "configuration")
    assert header[4:7] == ["pending p50", "pending p90", "pending p99"]
    rows = {r[0]: r for r in html.rows if r and r[0] in ("fair", "fifo")}
    for name, seed, wait in (("fair", 7, 90.0), ("fifo", 8, 300.0)):
        summary = summarize(make_run(name, seed=seed, wait=wait))
        assert rows[name][1] == f"{summary.pods_submitted:,}"
        assert rows[name][9] == f"{100 * summary.utilization['memory']:.1f}%"
    text = (folder / "report.md").read_text(encoding="utf-8")
    assert "## Comparison" in text and "## Configuration: fair" in text
    assert "## Configuration: fifo" in text and "](comparison.png)" in text


def test_the_same_input_gives_the_same_bytes(
    single: tuple[Path, list[Path]], tmp_path: Path
) -> None:
    run, summary = one_run()
    again = write_report([run], [summary], tmp_path)
    for first, second in zip(single[1], again, strict=True):
        assert first.read_bytes() == second.read_bytes(), first.name


def test_a_run_without_gangs_still_has_its_gang_plot(tmp_path: Path) -> None:
    run = make_run("plain")
    run.gangs = []
    summary = msgspec.structs.replace(
        summarize(run), gang_wait=Distribution(count=0, mean=0, p50=0, p90=0, p99=0, max=0)
    )
    written = write_report([run], [summary], tmp_path)
    assert (tmp_path / "gang-wait.png") in written
    assert "- **gang wait**: no gangs whole" in (tmp_path / "report.md").read_text()


def test_without_matplotlib_the_error_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    run, summary = one_run()
    with pytest.raises(PlotsUnavailable, match="plots need matplotlib") as caught:
        write_report([run], [summary], tmp_path / "report")
    assert INSTALL_HINT in str(caught.value)
    assert INSTALL_HINT == "pip install 'pyscheduler-core[simulate]'"
    assert isinstance(caught.value, SchedulerError)  # the CLI shows it as a message
    assert not (tmp_path / "report").exists()  # nothing half written


def test_runs_and_summaries_must_pair_up(tmp_path: Path) -> None:
    fair, fifo = make_run("fair"), make_run("fifo")
    with pytest.raises(SchedulerError, match="no run to report"):
        write_report([], [], tmp_path)
    with pytest.raises(SchedulerError, match="2 runs but 1 summaries"):
        write_report([fair, fifo], [summarize(fair)], tmp_path)
    with pytest.raises(SchedulerError, match="run 'fair' is paired with the summary of 'fifo'"):
        write_report([fair, fifo], [summarize(fifo), summarize(fair)], tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_an_empty_run_still_gives_the_whole_report(tmp_path: Path) -> None:
    """A run stopped before its first sample (no nodes, no pods) is reported, not a crash."""
    run = RunResult(
        scenario="empty", configuration="default", seed=1, duration=0.0, wall_seconds=0.0
    )
    summary = msgspec.structs.replace(
        summarize(make_run("default")),
        scenario="empty",
        pods_submitted=0,
        pending_time=Distribution(count=0, mean=0, p50=0, p90=0, p99=0, max=0),
        queues=[],
    )
    written = write_report([run], [summary], tmp_path)
    assert sorted(p.name for p in written) == sorted(REPORT_FILES)
    text = (tmp_path / "report.md").read_text()
    assert "# Simulation: empty" in text and "- **pending time**: no pods" in text


def test_queues_png_shows_the_bounded_and_busiest_queues_first() -> None:
    from scheduler.simulate._plots import MAX_QUEUE_PANELS, _busiest

    run = make_run("many")
    extra = [f"root.tenants.t{i:02d}" for i in range(15)]
    run.samples = [
        msgspec.structs.replace(
            s,
            queues=[
                *s.queues,
                *(
                    QueueSample(
                        queue=q, allocated={"memory": i << 30}, guaranteed={}, max={}, pending={}
                    )
                    for i, q in enumerate(extra)
                ),
            ],
        )
        for s in run.samples
    ]
    every = sorted(["root.adhoc", "root.batch", "root.service", *extra])
    shown = _busiest(every, [run])
    assert len(shown) == MAX_QUEUE_PANELS == 12
    # The three queues with bounds, then the nine that used the most memory.
    assert shown == sorted(["root.adhoc", "root.batch", "root.service", *extra[-9:]])


def test_rejected_jobs_are_a_failed_check_with_their_reasons(tmp_path: Path) -> None:
    run, summary = one_run()
    reasons = [
        "3 jobs of workload lost: queue root.nope does not exist in partition default",
        "parent-00001: queue root is not a leaf queue",
    ]
    summary = msgspec.structs.replace(
        summary,
        jobs_rejected=4,
        checks=msgspec.structs.replace(summary.checks, rejected_jobs=reasons),
    )
    write_report([run], [summary], tmp_path)
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert f"| every job accepted | FAIL | {'; '.join(reasons)} |" in text
    assert ["every job accepted", "FAIL", "; ".join(reasons)] in page(tmp_path).rows


def test_a_run_without_rejections_passes_the_acceptance_check(
    single: tuple[Path, list[Path]],
) -> None:
    text = (single[0] / "report.md").read_text(encoding="utf-8")
    assert "| every job accepted | pass | none rejected |" in text


def test_one_run_removes_the_comparison_an_earlier_run_of_several_left(tmp_path: Path) -> None:
    fair, fifo = make_run("fair"), make_run("fifo", seed=8, wait=300.0)
    write_report([fair, fifo], [summarize(fair), summarize(fifo)], tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    assert (tmp_path / "comparison.png").exists()
    run, summary = one_run()
    write_report([run], [summary], tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*REPORT_FILES, "notes.txt"])
    assert "comparison.png" not in (tmp_path / "index.html").read_text(encoding="utf-8")


def test_counts_of_one_are_in_the_singular(tmp_path: Path) -> None:
    run, summary = one_run()
    one = Distribution(count=1, mean=0.002, p50=0.002, p90=0.002, p99=0.002, max=0.002)
    summary = msgspec.structs.replace(
        summary,
        pending_time=one,
        gang_wait=msgspec.structs.replace(one, mean=30.0, p50=30.0, p90=30.0, p99=30.0, max=30.0),
        checks=msgspec.structs.replace(
            summary.checks,
            jobs_submitted=1,
            jobs_finished=1,
            all_finished=True,
            gangs=1,
            gangs_whole=1,
        ),
    )
    write_report([run], [summary], tmp_path)
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "- **pending time**: 1 pod: mean 2ms, p50 2ms, p90 2ms, p99 2ms, max 2ms" in text
    assert "- **gang wait**: 1 gang whole: mean 30s," in text
    assert "| every job finished | pass | 1 of 1 job |" in text
    assert "| no gang ran with part of its members | pass | 1 of 1 gang whole |" in text


def test_utilization_png_shows_memory_and_vcore_when_they_are_equal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from matplotlib.figure import Figure

    from scheduler.simulate import _plots

    figures: list[Figure] = []
    save = _plots._save

    def keep(fig: Figure, folder: Path, name: str) -> Path:
        figures.append(fig)
        return save(fig, folder, name)

    monkeypatch.setattr(_plots, "_save", keep)
    run = make_run("equal")  # memory and vcore the same share of the capacity at every sample
    run.samples = [
        msgspec.structs.replace(s, allocated={"memory": 128 << 30, "vcore": 32_000})
        for s in run.samples
    ]
    with _plots.style():
        _plots.plot_utilization([run], tmp_path)
    memory, vcore = figures[0].axes[0].get_lines()[:2]
    assert (memory.get_label(), vcore.get_label()) == ("memory", "vcore")
    assert memory.get_ydata().tolist() == vcore.get_ydata().tolist()  # type: ignore[union-attr]
    # vcore drawn over memory, narrower and dashed: memory shows around and between its dashes
    assert vcore.get_zorder() > memory.get_zorder()
    assert vcore.get_linewidth() < memory.get_linewidth()
    assert memory.get_linestyle() == "-" and vcore.get_linestyle() not in ("-", "None")
