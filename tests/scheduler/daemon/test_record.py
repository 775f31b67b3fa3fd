"""``scheduler serve --record``: a daemon session over the native transport and over gRPC
is written down (a header, the registration with its configuration, every request and
response in order, the end of the connection); past ``--record-max-bytes`` the file is
rotated and ``--record-keep`` files stay, each beginning with a header and the
registrations in force; a path the daemon cannot write stops it at the start."""

from __future__ import annotations

import asyncio
import io
import itertools
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import scheduler
from scheduler import SchedulerError, si
from scheduler.client import connect
from scheduler.daemon._record import (
    Event,
    Header,
    Record,
    Recorder,
    check_record_path,
    read_records,
    recording_files,
)
from scheduler.daemon._serve import DaemonOptions, run_daemon
from scheduler.si._versions import SI_VERSION
from scheduler.si._wire import AllocationCall, AllocationPush, NodeCall, RegisterCall
from scheduler.testing import ManualClock, Scenario

pytestmark = pytest.mark.asyncio

QUEUES = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: default
"""
REPLACED = si.TerminationType.PLACEHOLDER_REPLACED


@asynccontextmanager
async def serving(record: Path, **options: Any) -> AsyncIterator[dict[str, str]]:
    """``run_daemon`` in this process on free ports, recording to ``record``; leaving
    the block stops it as SIGTERM does and waits for it (the recording is then whole)."""
    addresses: dict[str, str] = {}
    ready = asyncio.Event()

    def on_ready(bound: dict[str, str]) -> None:
        addresses.update(bound)
        ready.set()

    daemon_options = DaemonOptions(
        native="tcp://127.0.0.1:0", http="127.0.0.1:0", grpc="127.0.0.1:0", record=record
    )
    for name, value in options.items():
        setattr(daemon_options, name, value)
    task = asyncio.create_task(run_daemon(daemon_options, out=io.StringIO(), ready=on_ready))
    async with asyncio.timeout(30):
        waiting = asyncio.create_task(ready.wait())
        await asyncio.wait([task, waiting], return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
    if task.done():
        task.result()  # the daemon did not start: its error
    try:
        yield addresses
    finally:
        os.kill(os.getpid(), signal.SIGTERM)
        async with asyncio.timeout(30):
            assert await task == 0


async def session(address: str, *, rm_id: str = "rm-1", gang: bool = True) -> Scenario:
    """An RM's day: nodes, applications, asks, a placeholder gang replaced and its
    releases confirmed, an allocation released by the RM, an application removed."""
    async with connect(address) as core:
        s = Scenario(core, ManualClock(), rm_id=rm_id)
        await s.register(QUEUES)
        await s.add_nodes("n1", "n2", memory=100, vcore=10)
        await s.submit("plain")
        await s.ask("plain", "p", count=3, memory=20, vcore=1)
        s.assert_allocated("plain", 3)
        if gang:
            await s.submit_gang("gang", {"workers": 2}, memory=10, vcore=1)
            await s.ask("gang", "w", count=2, task_group="workers", memory=10, vcore=1)
            assert len(s.released(REPLACED)) == 2
            await s.confirm_releases()
            s.assert_allocated("gang", 2)
        await s.release(s.allocations("plain")[0])
        await s.ask("plain", "big", memory=1000, vcore=1)  # fits no node: stays pending
        await s.remove("plain")
        await s.core.settle()
        return s


def kinds(records: list[Record]) -> list[tuple[str, str]]:
    return [(r.kind, r.type) for r in records]


async def test_a_native_session_is_recorded_in_order(tmp_path: Path) -> None:
    path = tmp_path / "si.rec"
    async with serving(path) as addresses:
        s = await session(addresses["native"])
    records = list(read_records(path))
    assert [r.seq for r in records[1:]] == list(range(1, len(records)))
    assert records[0].kind == "header"
    header = records[0].decode()
    assert isinstance(header, Header)
    assert (header.si_version, header.part, header.version) == (
        SI_VERSION,
        0,
        scheduler.__version__,
    )
    assert all(a.at <= b.at for a, b in itertools.pairwise(records))
    register = records[1].decode()
    assert isinstance(register, RegisterCall)
    assert (records[1].kind, records[1].rm_id) == ("request", "rm-1")
    assert register.request.config == QUEUES  # the configuration the core got
    assert "update_allocation" in register.overrides
    # Each request comes before what it caused: the nodes' acceptance, the allocations.
    order = kinds(records)
    assert order.index(("request", "NodeRequest")) < order.index(("response", "NodeResponse"))
    nodes = next(r.decode() for r in records if r.type == "NodeRequest")
    assert isinstance(nodes, NodeCall)
    assert [n.node_id for n in nodes.request.nodes] == ["n1", "n2"]
    requests = [r for r in records if r.kind == "request"]
    assert [r.type for r in requests] == [
        "RegisterResourceManagerRequest",
        "NodeRequest",
        "ApplicationRequest",
        "AllocationRequest",  # plain's asks
        "ApplicationRequest",  # the gang
        "AllocationRequest",  # its placeholders
        "AllocationRequest",  # its real asks
        "AllocationRequest",  # the confirmations of the replacements
        "AllocationRequest",  # the RM's release
        "AllocationRequest",  # the big ask
        "ApplicationRequest",  # plain removed
    ]
    # The responses hold every allocation the RM was told of, with its uuid.
    told = [a for r in records if r.type == "AllocationResponse" for a in _push(r).response.new]
    assert [a.uuid for a in told] == [a.uuid for a in s.rm.allocations]
    released = [
        a for r in records if r.type == "AllocationResponse" for a in _push(r).response.released
    ]
    assert [(a.uuid, a.termination_type) for a in released] == [
        (a.uuid, a.termination_type) for a in s.rm.released
    ]
    # The confirmations name the placeholders by the uuids the recorded core gave.
    confirm = _call(requests[7]).request.releases
    assert confirm is not None
    assert {r.uuid for r in confirm.allocations_to_release} == {
        r.uuid for r in s.released(REPLACED)
    }
    # The connection's end: the RM is Paused.
    last = records[-1].decode()
    assert isinstance(last, Event) and last.what == "disconnected"


def _push(record: Record) -> AllocationPush:
    message = record.decode()
    assert isinstance(message, AllocationPush)
    return message


def _call(record: Record) -> AllocationCall:
    message = record.decode()
    assert isinstance(message, AllocationCall)
    return message


async def test_a_grpc_session_is_recorded_as_a_native_one(tmp_path: Path) -> None:
    path = tmp_path / "si.rec"
    async with serving(path) as addresses:
        s = await session(addresses["grpc"], rm_id="grpc-rm")
    records = list(read_records(path))
    assert {r.rm_id for r in records[1:]} == {"grpc-rm"}
    requests = [r.type for r in records if r.kind == "request"]
    assert requests[:2] == ["RegisterResourceManagerRequest", "NodeRequest"]
    assert len(requests) == 11
    told = [
        a.uuid for r in records if r.type == "AllocationResponse" for a in _push(r).response.new
    ]
    assert told == [a.uuid for a in s.rm.allocations]


async def test_a_refused_request_is_recorded_with_its_reason(tmp_path: Path) -> None:
    path = tmp_path / "si.rec"
    async with serving(path) as addresses, connect(addresses["native"]) as core:
        s = Scenario(core, ManualClock())
        await s.register(QUEUES)
        bad = si.UpdateConfigurationRequest(rm_id="rm-1", config="partitions: [")
        with pytest.raises(SchedulerError):
            await core.update_configuration(bad)
    records = list(read_records(path))
    [refusal] = [r for r in records if r.kind == "event" and r.decode().what == "refused"]
    event = refusal.decode()
    request = next(r for r in records if r.seq == event.request)
    assert request.type == "UpdateConfigurationRequest"
    assert event.detail.startswith("ConfigError") or event.detail.startswith("SchedulerError")


async def test_rotation_keeps_k_files_each_replayable_on_its_own(tmp_path: Path) -> None:
    path = tmp_path / "si.rec"
    async with serving(path, record_max_bytes=1024, record_keep=3) as addresses:
        await session(addresses["native"])
    files = recording_files(path)
    assert files == [tmp_path / "si.rec.2", tmp_path / "si.rec.1", path]
    assert sorted(tmp_path.iterdir()) == sorted(files)  # older ones were removed
    last_seq = 0
    for n, file in enumerate(files):
        records = list(read_records(file))
        header = records[0].decode()
        assert isinstance(header, Header)
        assert header.part >= 1 if n == 0 else header.part == _part(files[n - 1]) + 1
        # the registration in force, restated with its configuration, right after it
        assert records[1].kind == "registration"
        restated = records[1].decode()
        assert isinstance(restated, RegisterCall) and restated.request.config == QUEUES
        body = [r for r in records if r.kind not in ("header", "registration")]
        assert body[0].seq > last_seq
        if last_seq:
            assert body[0].seq == last_seq + 1  # nothing lost between two kept files
        last_seq = body[-1].seq
        if file != path:
            assert file.stat().st_size >= 1024


def _part(file: Path) -> int:
    header = next(read_records(file)).decode()
    assert isinstance(header, Header)
    return header.part


async def test_a_recording_already_there_is_rotated_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "si.rec"
    async with serving(path) as addresses:
        await session(addresses["native"], gang=False)
    first = path.read_bytes()
    async with serving(path):
        pass
    assert (tmp_path / "si.rec.1").read_bytes() == first
    assert [r.kind for r in read_records(path)] == ["header"]


async def test_the_recorder_flushes_in_batches_and_everything_at_close(tmp_path: Path) -> None:
    path = tmp_path / "si.rec"
    now = [1_000]
    recorder = Recorder(path, wall=lambda: now[0], flush_bytes=1 << 30, interval=3600)
    recorder.open()
    for i in range(100):
        now[0] += 1
        recorder.add("event", "rm", "Event", Event(what="stopped", detail=str(i)))
    assert len(list(read_records(path))) == 1  # the header: the rest waits in memory
    await recorder.aclose()
    records = list(read_records(path))
    assert [r.seq for r in records[1:]] == list(range(1, 101))
    assert [r.at for r in records[1:]] == list(range(1_001, 1_101))
    recorder.add("event", "rm", "Event", Event(what="stopped"))  # after close: not kept
    assert len(list(read_records(path))) == 101


async def test_closing_while_the_task_writes_loses_nothing_and_fails_nothing(
    tmp_path: Path,
) -> None:
    """The daemon closes the recording while the recorder's task is writing a batch in
    its thread: the close waits for that write (it does not close the file under it);
    the task ends cleanly."""
    path = tmp_path / "si.rec"
    recorder = Recorder(path, wall=lambda: 0, flush_bytes=64, interval=3600)
    recorder.open()
    writing, go = threading.Event(), threading.Event()
    write = recorder._write_segments

    def slow_write(segments: Any) -> None:
        writing.set()
        go.wait(10)  # held until the close has begun
        write(segments)

    recorder._write_segments = slow_write  # type: ignore[method-assign]
    async with asyncio.timeout(30), asyncio.TaskGroup() as tg:
        task = tg.create_task(recorder.run())
        for i in range(10):
            recorder.add("event", "rm", "Event", Event(what="stopped", detail=str(i)))
        await asyncio.to_thread(writing.wait, 10)  # the task's batch is in the thread
        closing = tg.create_task(recorder.aclose())
        for _ in range(10):
            await asyncio.sleep(0)  # the close has begun and waits
        go.set()
        await closing
        task.cancel()
    assert [r.seq for r in read_records(path)][1:] == list(range(1, 11))


async def test_a_full_buffer_drops_records_and_says_how_many(tmp_path: Path) -> None:
    path = tmp_path / "si.rec"
    recorder = Recorder(path, wall=lambda: 0, buffer_limit=200, flush_bytes=1 << 30)
    recorder.open()
    kept = [recorder.add("event", "rm", "Event", Event(what="stopped")) for _ in range(50)]
    assert 0 < kept.count(0) < 50
    await recorder.aclose()
    events = [r.decode() for r in read_records(path) if r.kind == "event"]
    assert events[-1].what == "lost" and events[-1].count == kept.count(0)


@pytest.mark.parametrize(
    ("where", "why"),
    [
        ("missing/si.rec", "the directory {tmp}/missing does not exist"),
        ("", "that is a directory; name a file in it"),
    ],
)
async def test_a_path_the_daemon_cannot_write_stops_it_at_the_start(
    tmp_path: Path, where: str, why: str
) -> None:
    path = tmp_path / where if where else tmp_path
    with pytest.raises(SchedulerError) as raised:
        check_record_path(path)
    assert str(raised.value) == f"--record {path}: {why.format(tmp=tmp_path)}"


@pytest.mark.parametrize("locked", [False, True])
async def test_scheduler_serve_names_a_record_path_it_cannot_write(
    tmp_path: Path, locked: bool
) -> None:
    if locked and os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    where = tmp_path / "missing"
    why = f"the directory {where} does not exist"
    if locked:
        where.mkdir(mode=0o500)
        why = f"the directory {where} is not writable"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "scheduler", "serve", "--native", "tcp://127.0.0.1:0"),
            *("--http", "127.0.0.1:0", "--grpc", "", "--record", str(where / "si.rec")),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(scheduler.__file__).parents[1])},
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert f"scheduler serve: --record {where}/si.rec: {why}" in done.stderr
    assert "Traceback" not in done.stderr
