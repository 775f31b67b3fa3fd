"""The status page at ``/``, checked in headless Chromium (Debian's package) against a real
``scheduler serve``: it loads, draws the queues and applications of a running scenario
with their gang progress, the preemptions in flight and their totals, a Paused RM and the
application counts of every state, the view of one application and of one node (``#app/..``,
``#node/..``) linked from the tables, shows an error when the API does not answer, and
reads only routes that exist (checked without a browser). A screenshot is
kept (``bench/results/web_page.png``, printed by the test). Skipped where no Chromium is
installed, failed instead with ``$SCHEDULER_REQUIRE_CHROMIUM`` set (``.ci/run`` installs
it and sets that)."""

from __future__ import annotations

import asyncio
import html
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import scheduler
from scheduler import si
from scheduler.client import connect
from scheduler.daemon._openapi import APPLICATION_STATES, openapi_document
from scheduler.testing import ManualClock, Scenario, gang_tags

from .test_daemon import Daemon, remote_scenario

pytestmark = pytest.mark.asyncio

GI = 1024**3
QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: default
          - name: batch
            resources:
              guaranteed: {memory: 32Gi, vcore: 8}
              max: {memory: 96Gi, vcore: 24}
          - name: ml
            resources:
              max: {memory: 128Gi, vcore: 32}
            queues:
              - name: training
                resources:
                  guaranteed: {memory: 32Gi, vcore: 8}
                  max: {memory: 96Gi, vcore: 24}
              - name: serving
                resources:
                  guaranteed: {memory: 16Gi, vcore: 4}
"""
SCREENSHOT = Path(__file__).parents[3] / "bench" / "results" / "web_page.png"
PAGE = Path(scheduler.__file__).parent / "daemon" / "web" / "index.html"


def chromium() -> str:
    """Debian's Chromium (``$CHROMIUM`` names another binary), or skip the test."""
    for name in (os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser"):
        found = shutil.which(name) if name else None
        if found:
            return found
    why = "no chromium binary (apt-get install chromium, or set $CHROMIUM)"
    if os.environ.get("SCHEDULER_REQUIRE_CHROMIUM"):  # .ci/run: the check must run
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


async def run_chromium(tmp: Path, *args: str, timeout: float = 90.0) -> str:
    """Headless Chromium with a fresh profile and no background traffic; its stdout."""
    profile = tmp / f"profile-{time.monotonic_ns()}"
    proc = await asyncio.create_subprocess_exec(
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"chromium ran for more than {timeout}s: {args}") from None
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert proc.returncode == 0, f"chromium exited {proc.returncode}:\n{err.decode()[-3000:]}"
    return out.decode()


async def rendered(tmp: Path, url: str, *needles: str, seconds: float = 60.0) -> str:
    """The page's DOM once it has drawn an answer that holds every needle: Chromium runs the
    page's scripts and fetches for up to 5 s of virtual time, again until the deadline."""
    deadline = time.monotonic() + seconds
    while True:
        dom = await run_chromium(tmp, "--virtual-time-budget=5000", "--dump-dom", url)
        text = html.unescape(dom)
        missing = [n for n in needles if n not in text]
        if not missing or time.monotonic() > deadline:
            assert not missing, f"not on the page: {missing}\n{dom[:5000]}"
            return text


def row_html(dom: str, attribute: str, key: str) -> str:
    """The HTML of the table row ``<tr data-ATTRIBUTE="KEY">``."""
    match = re.search(rf'<tr [^>]*data-{attribute}="{re.escape(key)}".*?</tr>', dom, re.S)
    assert match is not None, f"no row {attribute}={key!r}"
    return match.group(0)


def row(dom: str, attribute: str, key: str) -> str:
    """The text of the table row ``<tr data-ATTRIBUTE="KEY">``, tags removed."""
    return re.sub(r"<[^>]+>", " ", row_html(dom, attribute, key))


def gib(n: int) -> str:
    """A whole number of GiB as the page writes it."""
    assert n % GI == 0
    return f"{n // GI}Gi"


def card(dom: str, card_id: str) -> str:
    """The text of the card ``<div class="card" id="CARD_ID">``, tags removed."""
    match = re.search(rf'<div class="card" id="{card_id}">.*?</div></div>', dom, re.S)
    assert match is not None, f"no card {card_id!r}"
    return " ".join(re.sub(r"<[^>]+>", " ", match.group(0)).split())


def section(dom: str, section_id: str) -> str:
    """The HTML of ``<section id="SECTION_ID">``."""
    match = re.search(rf'<section [^>]*id="{section_id}".*?</section>', dom, re.S)
    assert match is not None, f"no section {section_id!r}"
    return match.group(0)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    chromium()  # skip before starting anything
    d = Daemon(tmp_path)
    yield d
    assert d.stop() == 0, d.logged()
    assert "Traceback" not in d.logged(), d.logged()


async def busy_cluster(s: Scenario) -> None:
    """Three nodes; a queue tree; a running batch job, a placeholder gang half replaced, a
    satisfied permit gang, a permit gang still short of members, a pending job that fits
    nowhere and a completed one."""
    await s.register(QUEUES)
    await s.add_nodes("node-1", "node-2", "node-3", memory=64 * GI, vcore=16_000)
    await s.submit("etl-nightly", queue="root.batch", user="alice")
    await s.ask("etl-nightly", "etl", count=3, memory=8 * GI, vcore=2000)

    await s.submit_gang(
        "spark-pi",
        {"driver": 1, "executor": 3},
        queue="root.ml.training",
        memory=4 * GI,
        vcore=1000,
    )
    await s.ask("spark-pi", "driver", task_group="driver", memory=4 * GI, vcore=1000)
    await s.confirm_releases()  # the driver's placeholder is replaced

    await s.submit("tf-train", queue="root.ml.training", user="bob")
    await s.ask(
        "tf-train", "worker", count=4, tags=gang_tags("tf-train", 4), memory=8 * GI, vcore=2000
    )
    await s.submit("mpi-sim", queue="root.ml.serving", user="carol")
    await s.ask("mpi-sim", "rank", count=2, tags=gang_tags("mpi-sim", 4), memory=2 * GI, vcore=1000)

    await s.submit("huge-render", queue="root.default", user="dave")
    await s.ask("huge-render", "frame", memory=100 * GI, vcore=4000)

    await s.submit("report-gen", queue="root.default", user="erin")
    await s.ask("report-gen", "report", memory=1 * GI, vcore=500)
    await s.release(*s.allocations("report-gen"))
    await s.remove("report-gen")

    assert (await s.application("spark-pi"))["placeholderData"][0]["replaced"] == 1
    [tf] = (await s.application("tf-train"))["gangs"]
    assert tf["satisfied"] is True
    [mpi] = (await s.application("mpi-sim"))["gangs"]
    assert mpi["satisfied"] is False


async def test_the_page_shows_a_running_scenario(daemon: Daemon, tmp_path: Path) -> None:
    async with remote_scenario(daemon.address) as s:
        await busy_cluster(s)
        states = {a: await s.app_state(a) for a in ("etl-nightly", "spark-pi", "report-gen")}
        started = time.monotonic()
        dom = await rendered(
            tmp_path,
            daemon.http + "/",
            'data-state="ready"',
            'data-app="report-gen"',
            'data-node="node-3"',
        )
        # the queue tree: every queue a row, named by its path, drawn by its own name
        for path in ("root", "root.default", "root.batch", "root.ml", "root.ml.training"):
            assert f'data-queue="{path}"' in dom
        batch = row(dom, "queue", "root.batch")
        assert "batch" in batch and "guar 32Gi" in batch and "max 96Gi" in batch, batch
        assert "24Gi" in batch  # allocated: three asks of 8Gi
        assert "6 · guar 8 · max 24" in batch, batch  # vcore in cores, as the CLI shows it
        # the applications, their states, queues and gang progress
        for app_id in ("etl-nightly", "spark-pi", "tf-train", "mpi-sim", "huge-render"):
            assert app_id in row(dom, "app", app_id)
        assert states["etl-nightly"] in row(dom, "app", "etl-nightly")
        assert "root.batch" in row(dom, "app", "etl-nightly")
        spark = row(dom, "app", "spark-pi")
        assert states["spark-pi"] in spark and "root.ml.training" in spark
        assert "1/1 replaced" in spark and "0/3 replaced" in spark, spark
        tf = row(dom, "app", "tf-train")
        assert "default/tf-train" in tf and "min 4" in tf and "satisfied" in tf, tf
        mpi = row(dom, "app", "mpi-sim")
        assert "min 4" in mpi and "waiting" in mpi, mpi
        assert "Completed" in row(dom, "app", "report-gen") or states["report-gen"] in dom
        assert "100Gi" in row(dom, "app", "huge-render")  # pending
        # the nodes, allocated against capacity
        assert "/ 64Gi" in row(dom, "node", "node-1")
        assert re.search(r"/ 16(?![\dGMK])", row(dom, "node", "node-1"))
        # the tables link to the views of one application and one node
        assert 'href="#app/default/spark-pi"' in row_html(dom, "app", "spark-pi")
        assert 'href="#node/default/node-2"' in row_html(dom, "node", "node-2")
        # every state the partition counts, active or not
        counts = card(dom, "app-counts")
        assert "5 active · 1 finished" in counts, counts
        [part] = await s.core.get_partitions()
        for state, n in part["applications"].items():
            assert state == "total" or f"{state} {n}" in counts, counts
        assert 'id="error" role="alert"></div>' in dom.replace(' class=""', "")  # no error

        shot = tmp_path / "web_page.png"
        await run_chromium(
            tmp_path,
            "--virtual-time-budget=5000",
            "--window-size=1400,1000",
            f"--screenshot={shot}",
            daemon.http + "/",
        )
        assert shot.stat().st_size > 10_000
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)
        print(f"\nscreenshot of the status page: {SCREENSHOT} ({time.monotonic() - started:.1f}s)")


PREEMPTION_QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: apps
          - name: system
"""
REQUIRED = si.DOMAIN_YUNIKORN + si.KEY_REQUIRED_NODE
PREEMPTED = si.TerminationType.PREEMPTED_BY_SCHEDULER


async def preempting_cluster(s: Scenario) -> None:
    """Two full nodes; a daemon's ask preempted its way onto node-1 (confirmed), and
    another's waits on node-2 for the second of its two victims."""
    await s.register(PREEMPTION_QUEUES)
    await s.add_nodes("node-1", "node-2", memory=8 * GI, vcore=8000)
    await s.submit("web", queue="root.apps", user="alice")
    await s.ask("web", "pod", count=8, memory=2 * GI, vcore=1000)
    for app_id in ("agent-a", "agent-b"):
        await s.submit(app_id, queue="root.system", user="root")
    for app_id, node_id, gib in (("agent-a", "node-1", 2), ("agent-b", "node-2", 4)):
        ask = si.AllocationAsk(
            allocation_key=f"{app_id}-0",
            application_id=app_id,
            partition_name=s.partition,
            resource_ask=si.Resource.of(memory=gib * GI, vcore=1000),
            tags={REQUIRED: node_id},
        )
        await s.send_asks(ask)
    first, second, third = s.released(PREEMPTED)
    held = {a.uuid: a for a in s.rm.allocations}
    await s.release(held[first.uuid], held[second.uuid], termination=PREEMPTED)
    assert [a.node_id for a in s.allocations("agent-a")] == ["node-1"]
    assert s.allocations("agent-b") == []  # node-2 waits for its second victim
    assert held[third.uuid].node_id == "node-2"


async def test_the_page_shows_the_preemptions_in_flight(daemon: Daemon, tmp_path: Path) -> None:
    async with remote_scenario(daemon.address) as s:
        await preempting_cluster(s)
        # Timeouts.preemption (60 s) ends the wait: the page must show it before then.
        dom = await rendered(
            tmp_path, daemon.http + "/", 'data-state="ready"', 'data-preemption="agent-b/agent-b-0"'
        )
        flight = row(dom, "preemption", "agent-b/agent-b-0")
        assert "root.system" in flight and "node-2" in flight and "required node" in flight
        assert "1 of 2" in flight and "web / pod" in flight, flight
        assert "s ago" in flight
        assert 'data-preemption="agent-a/agent-a-0"' not in dom  # confirmed: no longer waits
        totals = re.search(r'<div class="card" id="preemption-totals">.*?</div></div>', dom, re.S)
        assert totals is not None, dom[:3000]
        text = re.sub(r"<[^>]+>", " ", totals.group(0))
        assert "preemptions in flight" in text and " 1 " in text, text
        assert "2 started (2 for a required node)" in text and "1 confirmed," in text, text
        assert "3 victims, 2 confirmed by the RM" in text, text
        assert "1 preempted" in row(dom, "app", "web")


@pytest.fixture
def page_without_api() -> Iterator[str]:
    """The page alone on a plain HTTP server: every API call is a 404."""
    web = Path(scheduler.__file__).parent / "daemon" / "web"
    handler = partial(QuietHandler, directory=str(web))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    server.shutdown()
    server.server_close()
    thread.join()


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


async def test_the_page_shows_what_went_wrong(page_without_api: str, tmp_path: Path) -> None:
    chromium()
    dom = await rendered(tmp_path, page_without_api, 'data-state="error"')
    assert re.search(
        r'<div id="error" role="alert" class="shown"><b>Error: </b>GET /ws/v1/partitions: 404', dom
    ), dom[:3000]


async def test_the_views_of_one_application_and_one_node(daemon: Daemon, tmp_path: Path) -> None:
    async with remote_scenario(daemon.address) as s:
        await busy_cluster(s)
        app = daemon.http + "/#app/default/"

        # an application: its details, allocations on their nodes, state log, placeholders
        spark = await s.application("spark-pi")
        dom = await rendered(
            tmp_path, app + "spark-pi", 'data-view="app"', 'data-task-group="executor"'
        )
        facts = re.sub(r"<[^>]+>", " ", section(dom, "app-facts"))
        assert (
            "root.ml.training" in facts and "16Gi" in facts and re.search(r"vcore\s+4\b", facts)
        ), facts
        assert len(spark["allocations"]) == 4
        for alloc in spark["allocations"]:
            html_row = row_html(dom, "allocation", alloc["allocationKey"])
            assert f'href="#node/default/{alloc["nodeId"]}"' in html_row, html_row
            text = row(dom, "allocation", alloc["allocationKey"])
            assert "4Gi" in text and re.search(r"vcore\s+1\b", text), text
            assert ("placeholder" in text) is alloc["placeholder"], text
        states = section(dom, "app-states")
        assert [e["applicationState"] for e in spark["stateLog"]] == ["New", "Accepted", "Starting"]
        assert all(f">{e['applicationState']}<" in states for e in spark["stateLog"]), states
        executors = row(dom, "task-group", "executor").split()
        assert executors[:2] == ["executor", "3"] and executors[-2:] == ["0", "0"], executors
        assert "no asks waiting" in section(dom, "app-asks")

        # an ask that fits nowhere, and a permit gang still short of members
        dom = await rendered(tmp_path, app + "huge-render", 'data-view="app"', 'data-ask="frame"')
        frame = row(dom, "ask", "frame")
        assert "100Gi" in frame and re.search(r"vcore\s+4\b", frame) and "1 of 1" in frame, frame
        assert "no allocations" in section(dom, "app-allocations")
        dom = await rendered(
            tmp_path, app + "mpi-sim", 'data-view="app"', 'data-gang="default/mpi-sim"'
        )
        gang = row(dom, "gang", "default/mpi-sim")
        assert "Strict" in gang and "4 of 4" in gang and "waiting" in gang, gang

        # a node: capacity, allocated, available, and its allocations with their applications
        node = await s.core.get_node("default", "node-1")
        dom = await rendered(
            tmp_path,
            daemon.http + "/#node/default/node-1",
            'data-view="node"',
            'data-resource="vcore"',
        )
        memory = row(dom, "resource", "memory").split()
        want = [gib(node[k]["memory"]) for k in ("capacity", "allocated", "available")]
        assert node["occupied"] == {}  # nothing outside the scheduler: 0
        assert memory[1:5] == [want[0], want[1], "0", want[2]], memory
        assert row(dom, "resource", "vcore").split()[1] == "16"
        assert node["allocations"]
        for alloc in node["allocations"]:
            key = f"{alloc['applicationId']}/{alloc['allocationKey']}"
            assert f'href="#app/default/{alloc["applicationId"]}"' in row_html(
                dom, "allocation", key
            )

        shots = {"app": app + "spark-pi", "node": daemon.http + "/#node/default/node-1"}
        for name, url in shots.items():
            shot = tmp_path / f"web_page_{name}.png"
            await run_chromium(
                tmp_path,
                "--virtual-time-budget=5000",
                "--window-size=1400,1000",
                f"--screenshot={shot}",
                url,
            )
            assert shot.stat().st_size > 10_000
            shutil.copyfile(shot, SCREENSHOT.with_name(shot.name))


async def test_a_paused_rms_partition_is_not_shown_as_running(
    daemon: Daemon, tmp_path: Path
) -> None:
    async with connect(daemon.address) as remote:
        s = Scenario(remote, ManualClock())
        await s.register(QUEUES)
        await s.add_nodes("node-1", memory=64 * GI, vcore=16_000)
        await s.submit("idle", queue="root.default", user="alice")  # no asks: New
        await s.submit("job", queue="root.batch", user="bob")
        await s.ask("job", "task", count=2, memory=GI, vcore=250)
        [part] = await remote.get_partitions()
    # the connection is gone without a goodbye: the RM is Paused, its partition kept
    dom = await rendered(tmp_path, daemon.http + "/", 'data-rm-state="Paused"')
    assert 'data-rm-state="Running"' not in dom
    assert "Resource manager rm-1 is Paused." in dom and "allocates nothing" in dom
    counts = card(dom, "app-counts")
    assert part["applications"]["New"] == 1 and "New 1" in counts, counts
    assert "2 active · 0 finished" in counts, counts
    assert "500m / 16" in row(dom, "node", "node-1")  # below one core: millicores
    assert "2Gi / 64Gi" in row(dom, "node", "node-1")


async def test_the_page_reads_only_routes_that_exist() -> None:
    script = PAGE.read_text()
    block = re.search(r"const ROUTES = \{(.*?)\};", script, re.S)
    assert block is not None
    routes = dict(re.findall(r'(\w+): "(/[^"]*)"', block.group(1)))
    assert len(routes) == 7, routes
    paths = openapi_document()["paths"]
    for name, template in routes.items():
        assert "/ws/v1" + template in paths, (name, template)
    # every request goes through getJSON(api(NAME, ...)): no path written by hand
    assert script.count("fetch(") == 1 and "fetch(API + path" in script
    calls = re.findall(r"getJSON\((.{0,60})", script)
    assert calls[0].startswith("path)")  # the definition
    for call in calls[1:]:
        name = re.match(r'api\("(\w+)"', call)
        assert name is not None and name.group(1) in routes, call
    for state in re.findall(r'state: "(\w+)"', script):
        assert state in APPLICATION_STATES, state


async def test_two_rms_default_partitions_are_shown_apart(daemon: Daemon, tmp_path: Path) -> None:
    """Two RMs each with a ``default`` partition (YuniKorn's ``[rmID]default``): the page
    shows both, and links to a node of the second go to that RM's node, not the first's."""
    async with connect(daemon.address) as one, connect(daemon.address) as two:
        for remote, rm_id, memory in ((one, "rm-1", 64), (two, "rm-2", 32)):
            s = Scenario(remote, ManualClock(), rm_id=rm_id)
            await s.register(QUEUES)
            await s.add_nodes("node-1", memory=memory * GI, vcore=16_000)
        dom = await rendered(
            tmp_path, daemon.http + "/", 'data-partition="[rm-1]default"', "[rm-2]default"
        )
        assert 'data-partition="[rm-2]default"' in dom
        assert 'href="#node/%5Brm-2%5Ddefault/node-1"' in dom
        dom = await rendered(
            tmp_path,
            daemon.http + "/#node/%5Brm-2%5Ddefault/node-1",
            'data-view="node"',
            'data-resource="memory"',
        )
        assert row(dom, "resource", "memory").split()[1] == "32Gi"
